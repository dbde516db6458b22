#!/usr/bin/python3
"""The official Kubernetes Python client (Debian's python3-kubernetes) against a fresh kubesim.

Run with the system interpreter (/usr/bin/python3), where apt installs the client:
    KUBESIM=build/kubesim /usr/bin/python3 tests/kubesim/python_client.py
Starts kubesim on a free port with a temporary TLS directory, drives it only through the
client's typed APIs (which deserialize every answer into models and fail on a missing required
field), and prints one line per check, then "N passed, M failed"; exits 1 when any check fails.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

KUBESIM = os.environ.get("KUBESIM", "build/kubesim")
TOKEN = "py-token"
NS = "default"

passed = 0
failed = 0


def check(name):
    """Decorator: runs the check at once, counts it, prints ok/FAIL with the reason."""

    def run(fn):
        global passed, failed
        try:
            fn()
            passed += 1
            print("ok   " + name, flush=True)
        except Exception as e:  # any failure is the check's, reported and counted
            failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            for line in traceback.format_exc().splitlines()[-6:]:
                print("     " + line)
        return fn

    return run


def wait_for(what, pred, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_kubesim(tmp):
    for _ in range(5):
        port = free_port()
        out = open(os.path.join(tmp, "out"), "w+")
        err = open(os.path.join(tmp, "err"), "w+")
        proc = subprocess.Popen(
            [KUBESIM, "--clusters", "1", "--base-port", str(port), "--token", TOKEN,
             "--tls-dir", os.path.join(tmp, "tls"), "--pod-start-ms", "100",
             "--job-run-ms", "300", "--log-lines-per-second", "20"],
            stdout=out, stderr=err)
        for _ in range(50):
            out.seek(0)
            if "url https://" in out.read():
                return proc, port
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.kill()
        proc.wait()
    err.seek(0)
    raise SystemExit("python_client: kubesim did not start: " + err.read())


def main():
    tmp = tempfile.mkdtemp(prefix="kubesim-py-")
    proc = None
    try:
        proc, port = start_kubesim(tmp)
        cfg = client.Configuration()
        cfg.host = "https://127.0.0.1:%d" % port
        cfg.ssl_ca_cert = os.path.join(tmp, "tls", "ca.crt")
        cfg.api_key = {"authorization": TOKEN}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(cfg)
        run_checks(api)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def pod_body(name, labels=None, command=None, resources=None):
    c = {"name": "main", "image": "busybox:1.36"}
    if command:
        c["command"] = command
    if resources:
        c["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": "py"}},
            "spec": {"containers": [c]}}


def deployment_body(name, replicas=2, image="nginx:1.25"):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


def job_body(name, command, backoff=0):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": backoff,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "command": command}]}}}}


def run_checks(api):
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    batch = client.BatchV1Api(api)

    @check("list namespaces")
    def _():
        names = [n.metadata.name for n in core.list_namespace().items]
        assert "default" in names and "kube-system" in names, names

    @check("list nodes (nodeInfo complete)")
    def _():
        nodes = core.list_node().items
        assert nodes and nodes[0].status.node_info.boot_id, nodes[0].status.node_info

    @check("create pod, list pods")
    def _():
        core.create_namespaced_pod(NS, pod_body("py1"))
        names = [p.metadata.name for p in core.list_namespaced_pod(NS).items]
        assert "py1" in names, names

    @check("pod generation starts at 1")
    def _():
        assert core.read_namespaced_pod("py1", NS).metadata.generation == 1

    @check("qosClass from requests and limits")
    def _():
        g = {"requests": {"cpu": "100m", "memory": "64Mi"},
             "limits": {"cpu": "100m", "memory": "64Mi"}}
        b = {"requests": {"cpu": "100m"}}
        core.create_namespaced_pod(NS, pod_body("qos-g", resources=g))
        core.create_namespaced_pod(NS, pod_body("qos-b", resources=b))
        got = (core.read_namespaced_pod("qos-g", NS).status.qos_class,
               core.read_namespaced_pod("qos-b", NS).status.qos_class,
               core.read_namespaced_pod("py1", NS).status.qos_class)
        assert got == ("Guaranteed", "Burstable", "BestEffort"), got

    @check("invalid pod refused with 422 and causes")
    def _():
        bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "noimage"},
               "spec": {"containers": [{"name": "main"}]}}
        try:
            core.create_namespaced_pod(NS, bad)
            raise AssertionError("a pod with no image was created")
        except ApiException as e:
            assert e.status == 422 and "spec.containers[0].image" in e.body, (e.status, e.body)
        names = [p.metadata.name for p in core.list_namespaced_pod(NS).items]
        assert "noimage" not in names

    @check("pod with containers of the wrong type refused (400, nothing stored)")
    def _():
        bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notalist"},
               "spec": {"containers": "notalist"}}
        try:
            core.create_namespaced_pod(NS, bad)
            raise AssertionError("a pod with containers: \"notalist\" was created")
        except ApiException as e:
            assert e.status == 400 and "cannot unmarshal string" in e.body, (e.status, e.body)
        core.list_namespaced_pod(NS)  # every stored pod still deserializes

    @check("patch pod: merge, strategic, JSON")
    def _():
        core.patch_namespaced_pod("py1", NS, {"metadata": {"labels": {"m": "1"}}})
        api.set_default_header("Content-Type", "application/merge-patch+json")
        # the client picks the content type from the body: a list is a JSON patch,
        # a dict is strategic merge; merge patch through the explicit header
        core.patch_namespaced_pod("py1", NS, {"metadata": {"labels": {"mp": "1"}}})
        api.default_headers.pop("Content-Type", None)
        core.patch_namespaced_pod(
            "py1", NS, [{"op": "add", "path": "/metadata/labels/j", "value": "1"}])
        labels = core.read_namespaced_pod("py1", NS).metadata.labels
        assert labels.get("m") == "1" and labels.get("mp") == "1" and labels.get("j") == "1", labels

    @check("create deployment, list deployments")
    def _():
        apps.create_namespaced_deployment(NS, deployment_body("pyweb"))
        names = [d.metadata.name for d in apps.list_namespaced_deployment(NS).items]
        assert "pyweb" in names, names
        wait_for("pyweb ready", lambda: (apps.read_namespaced_deployment("pyweb", NS)
                                         .status.ready_replicas or 0) == 2)

    @check("deployment revision annotation")
    def _():
        d = apps.read_namespaced_deployment("pyweb", NS)
        ann = d.metadata.annotations or {}
        assert ann.get("deployment.kubernetes.io/revision") == "1", ann

    @check("scale by patch")
    def _():
        apps.patch_namespaced_deployment_scale("pyweb", NS, {"spec": {"replicas": 3}})
        assert apps.read_namespaced_deployment_scale("pyweb", NS).spec.replicas == 3

    @check("scale by replace (Scale body)")
    def _():
        # a read-modify-write of a live object: the controllers still write the Deployment's
        # status after the scale above, so a replace may meet a newer resourceVersion (409),
        # and a client retries from a fresh read, as client-go's RetryOnConflict does
        for attempt in range(20):
            s = apps.read_namespaced_deployment_scale("pyweb", NS)
            s.spec.replicas = 1
            try:
                apps.replace_namespaced_deployment_scale("pyweb", NS, s)
                break
            except client.exceptions.ApiException as e:
                if e.status != 409 or attempt == 19:
                    raise
                time.sleep(0.1)
        assert apps.read_namespaced_deployment("pyweb", NS).spec.replicas == 1

    @check("status clears: unavailableReplicas goes when all are available")
    def _():
        wait_for("pyweb at 1 available", lambda: (
            apps.read_namespaced_deployment("pyweb", NS).status.available_replicas == 1))
        st = apps.read_namespaced_deployment("pyweb", NS).status
        assert st.unavailable_replicas is None, st

    @check("watch with resource_version and timeout_seconds (watch=True)")
    def _():
        rv = core.list_namespaced_pod(NS).metadata.resource_version
        seen = []

        def later():
            time.sleep(0.5)
            core.create_namespaced_pod(NS, pod_body("py-watched"))

        threading.Thread(target=later).start()
        w = watch.Watch()
        start = time.time()
        for ev in w.stream(core.list_namespaced_pod, NS, resource_version=rv,
                           timeout_seconds=3):
            seen.append((ev["type"], ev["object"].metadata.name))
        assert ("ADDED", "py-watched") in seen, seen
        assert time.time() - start >= 2, "the watch ended before its timeout"

    @check("logs with follow and timestamps")
    def _():
        wait_for("py1 running", lambda: core.read_namespaced_pod("py1", NS).status.phase == "Running")
        r = core.read_namespaced_pod_log("py1", NS, follow=True, timestamps=True, tail_lines=1,
                                         _preload_content=False, _request_timeout=5)
        text = ""
        start = time.time()
        for chunk in r.stream(64):
            text += chunk.decode()
            if text.count("\n") >= 4:
                break
        r.release_conn()
        lines = text.splitlines()
        # tail_lines=1 gives one line at once; the others arrive while following
        assert len(lines) >= 4 and time.time() - start > 0.1, lines
        assert lines[0][:2] == "20" and "Z " in lines[0], lines[0]

    @check("pod generation stays 1 once scheduled and running")
    def _():
        p = core.read_namespaced_pod("py1", NS)
        assert p.spec.node_name and p.metadata.generation == 1, (p.spec.node_name,
                                                                 p.metadata.generation)

    @check("discovery: autoscaling/v1 beside autoscaling/v2")
    def _():
        groups = client.ApisApi(api).get_api_versions().groups
        versions = [v.version for g in groups if g.name == "autoscaling" for v in g.versions]
        assert versions == ["v2", "v1"], versions
        res = client.AutoscalingV1Api(api).get_api_resources().resources
        assert "horizontalpodautoscalers" in [r.name for r in res]

    @check("autoscaling/v1 HPA: create, read in v1 and v2, patch, list")
    def _():
        v1 = client.AutoscalingV1Api(api)
        body = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "pyhpa"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": "pyweb"},
                         "minReplicas": 1, "maxReplicas": 4,
                         "targetCPUUtilizationPercentage": 70}}
        made = v1.create_namespaced_horizontal_pod_autoscaler(NS, body)
        assert made.spec.target_cpu_utilization_percentage == 70, made.spec
        # (this client has no typed autoscaling/v2 API: read the stored v2 object raw)
        v2 = api.call_api("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers/pyhpa",
                          "GET", auth_settings=["BearerToken"], response_type="object",
                          _return_http_data_only=True)
        m = v2["spec"]["metrics"][0]
        assert v2["apiVersion"] == "autoscaling/v2" and m["resource"]["name"] == "cpu" and \
            m["resource"]["target"]["averageUtilization"] == 70, v2
        v1.patch_namespaced_horizontal_pod_autoscaler(
            "pyhpa", NS, {"spec": {"targetCPUUtilizationPercentage": 50}})
        got = v1.read_namespaced_horizontal_pod_autoscaler("pyhpa", NS)
        assert got.spec.target_cpu_utilization_percentage == 50, got.spec
        items = v1.list_namespaced_horizontal_pod_autoscaler(NS).items
        assert [h.api_version for h in items] == ["autoscaling/v1"], items

    @check("jobs: list, selector finds its pods, exit code 0 completes")
    def _():
        batch.create_namespaced_job(NS, job_body("pyok", ["sh", "-c", "exit 0"]))
        j = batch.read_namespaced_job("pyok", NS)
        sel = j.spec.selector.match_labels
        assert sel and "batch.kubernetes.io/controller-uid" in sel, j.spec.selector
        wait_for("pyok complete", lambda: any(
            c.type == "Complete" and c.status == "True"
            for c in (batch.read_namespaced_job("pyok", NS).status.conditions or [])))
        pods = core.list_namespaced_pod(NS, label_selector=",".join(
            "%s=%s" % kv for kv in sel.items())).items
        assert len(pods) == 1, [p.metadata.name for p in pods]
        st = batch.read_namespaced_job("pyok", NS).status
        assert st.active is None and st.succeeded == 1, st
        assert "pyok" in [x.metadata.name for x in batch.list_namespaced_job(NS).items]

    @check("jobs: exit 5 fails with BackoffLimitExceeded")
    def _():
        batch.create_namespaced_job(NS, job_body("pyfail", ["sh", "-c", "exit 5"]))

        def failed_cond():
            for c in batch.read_namespaced_job("pyfail", NS).status.conditions or []:
                if c.type == "Failed" and c.status == "True":
                    return c
            return None

        c = wait_for("pyfail failed", failed_cond)
        assert c.reason == "BackoffLimitExceeded", c

    @check("delete job without policy orphans its pods (orphan finalizer)")
    def _():
        j = batch.delete_namespaced_job("pyok", NS)
        pods = core.list_namespaced_pod(NS, label_selector="job-name=pyok").items
        assert len(pods) == 1, "the Job's pod was deleted"

    @check("delete deployment; dependents go asynchronously")
    def _():
        apps.delete_namespaced_deployment("pyweb", NS)
        wait_for("pyweb pods gone", lambda: not core.list_namespaced_pod(
            NS, label_selector="app=pyweb").items)
        try:
            apps.read_namespaced_deployment("pyweb", NS)
            raise AssertionError("still there")
        except ApiException as e:
            assert e.status == 404

    @check("delete pod")
    def _():
        core.delete_namespaced_pod("py1", NS)
        names = [p.metadata.name for p in core.list_namespaced_pod(NS).items]
        assert "py1" not in names

    @check("events by involvedObject field selector")
    def _():
        evs = core.list_namespaced_event(
            NS, field_selector="involvedObject.kind=Job,involvedObject.name=pyfail").items
        assert evs and all(e.involved_object.name == "pyfail" for e in evs), evs


if __name__ == "__main__":
    sys.exit(main())
