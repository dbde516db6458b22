/* controller: what makes a simulated cluster live. One thread per cluster runs reconcile passes
 * (ks_ctrl_tick) the way kube-controller-manager, kube-scheduler and the kubelets would:
 *
 *   CronJob -> Job on schedule (not when suspended)      Deployment -> ReplicaSet (rolling, paused)
 *   HorizontalPodAutoscaler -> Deployment replicas (utilization read from the HPA's status)
 *   Job -> Pods to completion / failure (parallelism)    ReplicaSet -> Pods (scale up / down)
 *   scheduler: Pending pods onto nodes with free cpu/memory/pods, FailedScheduling otherwise
 *   kubelet: Pending -> Running -> Succeeded | Failed, IPs, container statuses, restarts, node
 *            heartbeats; Events for each step.
 *
 * Every change goes through the cluster's own API (ks_handle_internal), so it has managedFields,
 * resourceVersions and watch events like a real controller's write. A pass reads the current
 * state and acts on the difference (level-triggered), so a missed pass loses nothing. Seeded
 * objects (raw, annotated kubesim.io/seeded) are left alone. Pod behaviour can be steered with
 * annotations on the pod (template): kubesim.io/exit-code, kubesim.io/run-ms. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

#define TICK_MS               50
#define IDLE_MS               500
#define MAX_CRON_LOOKBACK_MIN (60 * 24 * 7)
#define MANAGER_CM            "kube-controller-manager/v1.32.0"
#define MANAGER_SCH           "kube-scheduler/v1.32.0"
#define MANAGER_KL            "kubelet/v1.32.0"
#define EVENT_TTL_MS          (60 * 60 * 1000) /* the API server's default --event-ttl */
#define EVENT_GC_MS           (60 * 1000)

/* A pass over one Deployment (ReplicaSet) reads that object and the ReplicaSets (pods) it
 * controls, and nothing else: no clock, no other kind. When a pass made no API call and the
 * next one finds the very same versions (a resourceVersion names one version in a cluster), it
 * would make none again, so it is skipped; a pass that made calls (even failed ones) runs again
 * next time, as before. One entry per object uid, dropped when a pass no longer sees it. */
#define MEMO_BUCKETS 256

typedef struct memo {
    char *uid;
    int64_t *rvs; /* the object's RV, then its dependents' in snapshot order */
    size_t n;
    uint64_t pass; /* the last pass that saw it */
    struct memo *next;
} memo_t;

struct ks_ctrl {
    memo_t *memo[MEMO_BUCKETS];
    uint64_t pass;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    int64_t last_heartbeat_ms;
    int64_t last_event_gc_ms;
    uint64_t ip_seq;
};

/* ---- time, quantities, helpers ---------------------------------------------- */

int64_t ks_now_ms(const ks_cluster_t *c) {
    return (int64_t)fg_wall_ms() + c->clock_offset_s * 1000;
}

static void ts_of(int64_t ms, char *buf, size_t len) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void now_ts(const ks_cluster_t *c, char *buf, size_t len) {
    ts_of(ks_now_ms(c), buf, len);
}

/* RFC 3339 "YYYY-MM-DDTHH:MM:SSZ" to ms, or -1. */
static int64_t parse_ts(const char *s) {
    struct tm tm = {0};
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

/* A Kubernetes quantity ("100m", "2", "128Mi", "1G") scaled by 1000 when milli is set. */
static int64_t quantity(const char *q, bool milli) {
    static const struct {
        const char *suffix;
        double mult;
    } SUFFIXES[] = {
        {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
        {"k", 1e3},     {"M", 1e6},        {"G", 1e9},           {"T", 1e12},
        {"m", 1e-3}};
    if (q == NULL || q[0] == '\0')
        return 0;
    char *end = NULL;
    double v = strtod(q, &end);
    if (end == q)
        return 0;
    for (size_t i = 0; i < sizeof(SUFFIXES) / sizeof(SUFFIXES[0]); i++) {
        if (strcmp(end, SUFFIXES[i].suffix) == 0) {
            v *= SUFFIXES[i].mult;
            break;
        }
    }
    return (int64_t)(milli ? v * 1000.0 + 0.5 : v + 0.5);
}

static json_t *jget(json_t *j, const char *path) {
    return ks_path_get(j, path);
}

static const char *jstr(json_t *j, const char *path) {
    return json_string_value(jget(j, path));
}

static int64_t jint(json_t *j, const char *path, int64_t dflt) {
    json_t *v = jget(j, path);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static const char *annotation(json_t *o, const char *key) {
    return json_string_value(json_object_get(jget(o, "metadata.annotations"), key));
}

bool ks_obj_seeded(const ks_obj_t *o) {
    if (o->raw)
        return true; /* raw objects come only from seeding (and churn of seeded ones) */
    const char *a = annotation(ks_obj_json(o), "kubesim.io/seeded");
    return a != NULL && strcmp(a, "true") == 0;
}

/* The uid of o's controller owner, or NULL. */
static const char *controller_uid(json_t *o, const char *kind) {
    size_t i;
    json_t *ref;
    json_array_foreach(jget(o, "metadata.ownerReferences"), i, ref) {
        const char *k = json_string_value(json_object_get(ref, "kind"));
        if (json_is_true(json_object_get(ref, "controller")) && k != NULL && strcmp(k, kind) == 0)
            return json_string_value(json_object_get(ref, "uid"));
    }
    return NULL;
}

static json_t *owner_ref(json_t *owner, const char *api_version, const char *kind) {
    return json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", api_version, "kind", kind,
                     "name", jstr(owner, "metadata.name"), "uid", jstr(owner, "metadata.uid"),
                     "controller", 1, "blockOwnerDeletion", 1);
}

/* ---- the cluster's own API --------------------------------------------------- */

/* Calls made by this thread's passes (a pass that made none changed nothing). */
static __thread uint64_t api_calls;

/* Sends method path with body (borrowed, may be NULL) as manager; returns the HTTP code and,
 * when out is set, the answer's JSON (caller decrefs). */
static int api(ks_cluster_t *c, const char *method, const char *path, const char *ctype,
               json_t *body, const char *manager, json_t **out) {
    size_t len = 0;
    api_calls++;
    char *text = body ? fg_json_dumps(body, &len) : NULL;
    ks_req_t req = {.method = method,
                    .path = path,
                    .content_type = ctype,
                    .user_agent = manager,
                    .body = text,
                    .body_len = len};
    ks_resp_t r;
    ks_handle_internal(c, &req, &r);
    if (out != NULL) {
        *out = NULL;
        if (r.body != NULL)
            fg_json_load(r.body, r.len, out, NULL, 0);
    }
    int code = r.code;
    ks_resp_free(&r);
    free(text);
    return code;
}

static void obj_path(char *buf, size_t len, const char *prefix, const char *ns, const char *plural,
                     const char *name, const char *sub) {
    snprintf(buf, len, "%s%s%s/%s%s%s%s%s", prefix, ns ? "/namespaces/" : "", ns ? ns : "", plural,
             name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "");
}

static int merge_patch(ks_cluster_t *c, const char *prefix, json_t *o, const char *plural,
                       const char *sub, json_t *patch, const char *manager) {
    char path[512];
    obj_path(path, sizeof(path), prefix, jstr(o, "metadata.namespace"), plural,
             jstr(o, "metadata.name"), sub);
    int code = api(c, "PATCH", path, "application/merge-patch+json", patch, manager, NULL);
    json_decref(patch);
    return code;
}

/* Writes the whole status of o (stolen) with a PUT of its status subresource, which replaces
 * it as on a real server: a member the controller no longer sets (a Deployment's
 * unavailableReplicas, a finished Job's active) goes away instead of staying from an earlier
 * merge. Unconditional (no resourceVersion): the controller computed it from the latest pass. */
static int replace_status(ks_cluster_t *c, const char *prefix, json_t *o, const char *plural,
                          json_t *status, const char *manager) {
    char path[512];
    /* a shallow copy (o is a stored object, never changed): only its top level and metadata
     * are edited here, each in a copy of its own */
    json_t *body = json_copy(o);
    json_t *meta = json_copy(json_object_get(o, "metadata"));
    obj_path(path, sizeof(path), prefix, jstr(o, "metadata.namespace"), plural,
             jstr(o, "metadata.name"), "status");
    if (meta != NULL) {
        json_object_del(meta, "resourceVersion");
        json_object_del(meta, "managedFields");
        json_object_set_new(body, "metadata", meta);
    }
    json_object_set_new(body, "status", status);
    int code = api(c, "PUT", path, "application/json", body, manager, NULL);
    json_decref(body);
    return code;
}

static void emit_event(ks_cluster_t *c, json_t *o, const char *kind, const char *api_version,
                       const char *type, const char *reason, const char *component,
                       const char *message) {
    char path[256], name[320], ts[32];
    uint64_t r = 0;
    const char *ns = jstr(o, "metadata.namespace");
    fg_random_bytes(&r, sizeof(r));
    snprintf(name, sizeof(name), "%.250s.%016llx", jstr(o, "metadata.name"), (unsigned long long)r);
    now_ts(c, ts, sizeof(ts));
    json_t *ev = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:{s:s}, s:s, s:s, s:i, "
        "s:s, s:s, s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
        ns ? ns : "default", "involvedObject", "kind", kind, "apiVersion", api_version, "name",
        jstr(o, "metadata.name"), "namespace", ns ? ns : "", "uid", jstr(o, "metadata.uid"),
        "reason", reason, "message", message, "source", "component", component, "firstTimestamp",
        ts, "lastTimestamp", ts, "count", 1, "type", type, "reportingComponent", component,
        "reportingInstance", component);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns ? ns : "default");
    api(c, "POST", path, "application/json", ev, MANAGER_CM, NULL);
    json_decref(ev);
}

/* ---- a snapshot of the live (non-seeded) objects of one kind ----------------- */

typedef struct {
    ks_obj_t **objs;
    json_t **json; /* borrowed from objs */
    size_t n;
    /* each object's controller uid for owners of kind cuid_kind (found once per snapshot, not
     * once per owner looking): filled by owned() */
    const char **cuid;
    const char *cuid_kind;
} snap_t;

static void snap(ks_cluster_t *c, const char *kind, snap_t *s) {
    ks_obj_t **items = NULL;
    size_t n = 0;
    int64_t rv;
    memset(s, 0, sizeof(*s));
    if (ks_store_count_live(c->store, ks_resource_by_kind(kind)) == 0)
        return; /* nothing but seeded objects: no need to look at 120k of them */
    if (ks_store_list(c->store, ks_resource_by_kind(kind), NULL, NULL, 0, &items, &n, &rv) != FG_OK)
        return;
    s->objs = fg_xcalloc(n + 1, sizeof(*s->objs));
    s->json = fg_xcalloc(n + 1, sizeof(*s->json));
    for (size_t i = 0; i < n; i++) {
        if (ks_obj_seeded(items[i])) {
            ks_obj_unref(items[i]);
            continue;
        }
        s->objs[s->n] = items[i];
        s->json[s->n++] = ks_obj_json(items[i]);
    }
    free(items);
}

static void snap_free(snap_t *s) {
    ks_objs_free(s->objs, s->n);
    free(s->json);
    free(s->cuid);
}

static bool pod_terminal(json_t *p) {
    const char *ph = jstr(p, "status.phase");
    return ph != NULL && (strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0);
}

static bool pod_ready(json_t *p) {
    const char *ph = jstr(p, "status.phase");
    return ph != NULL && strcmp(ph, "Running") == 0;
}

/* ---- nodes ------------------------------------------------------------------- */

static json_t *node_conditions(const char *ts, const char *since) {
    return json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s, s:s}, "
                     "{s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s, s:s}]",
                     "type", "MemoryPressure", "status", "False", "lastHeartbeatTime", ts,
                     "lastTransitionTime", since, "reason", "KubeletHasSufficientMemory", "message",
                     "kubelet has sufficient memory available", "type", "DiskPressure", "status",
                     "False", "lastHeartbeatTime", ts, "lastTransitionTime", since, "reason",
                     "KubeletHasNoDiskPressure", "message", "kubelet has no disk pressure", "type",
                     "PIDPressure", "status", "False", "lastHeartbeatTime", ts,
                     "lastTransitionTime", since, "reason", "KubeletHasSufficientPID", "message",
                     "kubelet has sufficient PID available", "type", "Ready", "status", "True",
                     "lastHeartbeatTime", ts, "lastTransitionTime", since, "reason", "KubeletReady",
                     "message", "kubelet is posting ready status");
}

/* A stable 32-hex-digit id for node i of a cluster (machineID, systemUUID, bootID). */
static void node_id(const char *cluster, long long i, char *buf, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = cluster; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)i) * 1099511628211ull;
    snprintf(buf, len, "%016llx%016llx", (unsigned long long)h,
             (unsigned long long)(h * 1099511628211ull));
}

static void create_nodes(ks_cluster_t *c, const ks_node_spec_t *spec) {
    char ts[32], name[128], cpu[32], mem[32], pods[16], gpus[16], ip[24], zone[64];
    now_ts(c, ts, sizeof(ts));
    if (spec->cpu_milli % 1000 == 0)
        snprintf(cpu, sizeof(cpu), "%lld", (long long)(spec->cpu_milli / 1000));
    else
        snprintf(cpu, sizeof(cpu), "%lldm", (long long)spec->cpu_milli);
    snprintf(mem, sizeof(mem), "%lldKi", (long long)(spec->memory_bytes / 1024));
    snprintf(pods, sizeof(pods), "%lld", (long long)spec->max_pods);
    snprintf(gpus, sizeof(gpus), "%lld", (long long)spec->gpus);
    for (int64_t i = 0; i < spec->count; i++) {
        snprintf(name, sizeof(name), "%s-worker-%lld", c->name, (long long)i + 1);
        snprintf(ip, sizeof(ip), "10.0.%d.%d", (int)(i / 250), (int)(i % 250) + 2);
        snprintf(zone, sizeof(zone), "%s", c->zone);
        json_t *capacity = json_pack("{s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "pods",
                                     pods, "ephemeral-storage", "100Gi");
        if (spec->gpus > 0)
            json_object_set_new(capacity, "nvidia.com/gpu", json_string(gpus));
        json_t *node = json_pack(
            "{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}}, s:{s:s}, "
            "s:{s:O, s:o, s:[{s:s, s:s}, {s:s, s:s}], s:{s:s, s:s, s:s, s:s, s:s}}}",
            "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
            "kubernetes.io/hostname", name, "kubernetes.io/os", "linux", "kubernetes.io/arch",
            "amd64", "node.kubernetes.io/instance-type", spec->instance_type,
            "topology.kubernetes.io/region", c->region, "topology.kubernetes.io/zone", zone, "spec",
            "providerID", "kubesim://node", "status", "capacity", capacity, "allocatable", capacity,
            "addresses", "type", "InternalIP", "address", ip, "type", "Hostname", "address", name,
            "nodeInfo", "kubeletVersion", "v1.32.0", "containerRuntimeVersion",
            "containerd://1.7.22", "osImage", "Debian GNU/Linux 12 (bookworm)", "operatingSystem",
            "linux", "architecture", "amd64");
        /* the rest of nodeInfo: every member is required by typed clients (the Python client's
         * V1NodeSystemInfo refuses a missing bootID) */
        char id[40];
        node_id(c->name, i, id, sizeof(id));
        json_t *info = json_object_get(json_object_get(node, "status"), "nodeInfo");
        json_object_set_new(info, "machineID", json_string(id));
        json_object_set_new(info, "systemUUID", json_string(id));
        json_object_set_new(info, "bootID", json_string(id));
        json_object_set_new(info, "kernelVersion", json_string("6.1.0-27-cloud-amd64"));
        json_object_set_new(info, "kubeProxyVersion", json_string("v1.32.0"));
        json_object_set_new(json_object_get(node, "status"), "daemonEndpoints",
                            json_pack("{s:{s:i}}", "kubeletEndpoint", "Port", 10250));
        json_decref(capacity);
        json_t *created = NULL;
        json_t *status = json_incref(json_object_get(node, "status"));
        json_object_set_new(status, "conditions", node_conditions(ts, ts));
        if (api(c, "POST", "/api/v1/nodes", "application/json", node, MANAGER_KL, &created) == 201)
            merge_patch(c, "/api/v1", created, "nodes", "status",
                        json_pack("{s:o}", "status", status), MANAGER_KL);
        else
            json_decref(status);
        json_decref(created);
        json_decref(node);
    }
}

static void heartbeat(ks_cluster_t *c, const snap_t *nodes) {
    char ts[32];
    now_ts(c, ts, sizeof(ts));
    for (size_t i = 0; i < nodes->n; i++) {
        json_t *n = nodes->json[i];
        const char *since = NULL;
        size_t k;
        json_t *cond;
        json_array_foreach(jget(n, "status.conditions"), k, cond) {
            if (strcmp(json_string_value(json_object_get(cond, "type")) ?: "", "Ready") == 0)
                since = json_string_value(json_object_get(cond, "lastTransitionTime"));
        }
        merge_patch(
            c, "/api/v1", n, "nodes", "status",
            json_pack("{s:{s:o}}", "status", "conditions", node_conditions(ts, since ? since : ts)),
            MANAGER_KL);
    }
}

/* ---- scheduler and kubelet --------------------------------------------------- */

typedef struct {
    json_t *node;
    int64_t cpu_free, mem_free, pods_free;
} fit_t;

static void pod_requests(json_t *p, int64_t *cpu, int64_t *mem) {
    size_t i;
    json_t *ctr;
    *cpu = *mem = 0;
    json_array_foreach(jget(p, "spec.containers"), i, ctr) {
        *cpu += quantity(jstr(ctr, "resources.requests.cpu"), true);
        *mem += quantity(jstr(ctr, "resources.requests.memory"), false);
    }
}

static fit_t *node_fits(const snap_t *nodes, const snap_t *pods) {
    fit_t *f = fg_xcalloc(nodes->n + 1, sizeof(*f));
    for (size_t i = 0; i < nodes->n; i++) {
        f[i].node = nodes->json[i];
        f[i].cpu_free = quantity(jstr(nodes->json[i], "status.allocatable.cpu"), true);
        f[i].mem_free = quantity(jstr(nodes->json[i], "status.allocatable.memory"), false);
        f[i].pods_free = quantity(jstr(nodes->json[i], "status.allocatable.pods"), false);
    }
    for (size_t k = 0; k < pods->n; k++) {
        const char *nn = jstr(pods->json[k], "spec.nodeName");
        if (nn == NULL || pod_terminal(pods->json[k]))
            continue;
        int64_t cpu, mem;
        pod_requests(pods->json[k], &cpu, &mem);
        for (size_t i = 0; i < nodes->n; i++) {
            if (strcmp(jstr(f[i].node, "metadata.name") ?: "", nn) == 0) {
                f[i].cpu_free -= cpu;
                f[i].mem_free -= mem;
                f[i].pods_free--;
            }
        }
    }
    return f;
}

static json_t *condition(const char *type, const char *status, const char *ts, const char *reason,
                         const char *message) {
    json_t *c = json_pack("{s:s, s:s, s:n, s:s}", "type", type, "status", status, "lastProbeTime",
                          "lastTransitionTime", ts);
    if (reason != NULL)
        json_object_set_new(c, "reason", json_string(reason));
    if (message != NULL)
        json_object_set_new(c, "message", json_string(message));
    return c;
}

static void schedule(ks_cluster_t *c, json_t *p, fit_t *fits, size_t nfits) {
    int64_t cpu, mem;
    char ts[32], msg[256];
    pod_requests(p, &cpu, &mem);
    fit_t *best = NULL;
    for (size_t i = 0; i < nfits; i++) {
        if (fits[i].cpu_free >= cpu && fits[i].mem_free >= mem && fits[i].pods_free > 0 &&
            (best == NULL || fits[i].pods_free > best->pods_free))
            best = &fits[i];
    }
    now_ts(c, ts, sizeof(ts));
    if (best == NULL) {
        json_t *conds = jget(p, "status.conditions");
        if (json_array_size(conds) > 0)
            return; /* already reported */
        snprintf(msg, sizeof(msg),
                 "0/%zu nodes are available: %zu Insufficient cpu or memory. preemption: 0/%zu "
                 "nodes are available: %zu No preemption victims found for incoming pod.",
                 nfits, nfits, nfits, nfits);
        merge_patch(c, "/api/v1", p, "pods", "status",
                    json_pack("{s:{s:[o]}}", "status", "conditions",
                              condition("PodScheduled", "False", ts, "Unschedulable", msg)),
                    MANAGER_SCH);
        emit_event(c, p, "Pod", "v1", "Warning", "FailedScheduling", "default-scheduler", msg);
        return;
    }
    const char *node = jstr(best->node, "metadata.name");
    best->cpu_free -= cpu;
    best->mem_free -= mem;
    best->pods_free--;
    merge_patch(c, "/api/v1", p, "pods", NULL, json_pack("{s:{s:s}}", "spec", "nodeName", node),
                MANAGER_SCH);
    merge_patch(c, "/api/v1", p, "pods", "status",
                json_pack("{s:{s:[o]}}", "status", "conditions",
                          condition("PodScheduled", "True", ts, NULL, NULL)),
                MANAGER_SCH);
    snprintf(msg, sizeof(msg), "Successfully assigned %s/%s to %s", jstr(p, "metadata.namespace"),
             jstr(p, "metadata.name"), node);
    emit_event(c, p, "Pod", "v1", "Normal", "Scheduled", "default-scheduler", msg);
}

static int64_t transition_ms(json_t *p, const char *type) {
    size_t i;
    json_t *cond;
    json_array_foreach(jget(p, "status.conditions"), i, cond) {
        if (strcmp(json_string_value(json_object_get(cond, "type")) ?: "", type) == 0)
            return parse_ts(json_string_value(json_object_get(cond, "lastTransitionTime")));
    }
    return -1;
}

/* The imageID a runtime reports for image: its repository and the digest it runs, the one in
 * the reference when it is pinned ("x:1@sha256:..."), else one derived from the reference, so
 * that the same image keeps one digest however it is spelled (pinned or not). */
static void image_id(const char *image, char *out, size_t len) {
    const char *at = strchr(image, '@');
    size_t n = at ? (size_t)(at - image) : strlen(image);
    const char *slash = memrchr(image, '/', n),
               *colon = memchr(slash ? slash : image, ':',
                               n - (size_t)((slash ? slash : image) - image));
    size_t repo = colon ? (size_t)(colon - image) : n;
    if (at) {
        snprintf(out, len, "docker.io/library/%.*s%s", (int)repo, image, at);
        return;
    }
    uint64_t h[4];
    for (uint64_t k = 0; k < 4; k++)
        h[k] = fg_hash64(image, n, k + 7);
    snprintf(out, len, "docker.io/library/%.*s@sha256:%016llx%016llx%016llx%016llx", (int)repo,
             image, (unsigned long long)h[0], (unsigned long long)h[1], (unsigned long long)h[2],
             (unsigned long long)h[3]);
}

static json_t *container_statuses(json_t *p, const char *state, json_t *state_body, int restarts,
                                  json_t *last_state, bool ready) {
    json_t *out = json_array();
    size_t i;
    json_t *ctr;
    json_array_foreach(jget(p, "spec.containers"), i, ctr) {
        char cid[96], iid[512];
        snprintf(cid, sizeof(cid), "containerd://%.36s%02zu%d", jstr(p, "metadata.uid") ?: "", i,
                 restarts);
        image_id(json_string_value(json_object_get(ctr, "image")) ?: "", iid, sizeof(iid));
        json_array_append_new(
            out,
            json_pack("{s:s, s:{s:O}, s:O, s:b, s:i, s:s, s:s, s:s, s:b}", "name",
                      json_string_value(json_object_get(ctr, "name")), "state", state, state_body,
                      "lastState", last_state, "ready", ready, "restartCount", restarts, "image",
                      json_string_value(json_object_get(ctr, "image")), "imageID", iid,
                      "containerID", cid, "started", strcmp(state, "running") == 0));
    }
    return out;
}

static json_t *ready_conditions(const char *ts, const char *sched_ts, bool ready) {
    const char *st = ready ? "True" : "False";
    return json_pack("[o, o, o, o, o]",
                     condition("PodReadyToStartContainers", "True", ts, NULL, NULL),
                     condition("Initialized", "True", ts, NULL, NULL),
                     condition("Ready", st, ts, ready ? NULL : "PodCompleted", NULL),
                     condition("ContainersReady", st, ts, ready ? NULL : "PodCompleted", NULL),
                     condition("PodScheduled", "True", sched_ts, NULL, NULL));
}

static void start_pod(ks_cluster_t *c, json_t *p, const char *node_ip) {
    char ts[32], sched_ts[32], ip[24], msg[256];
    struct ks_ctrl *k = c->ctrl;
    uint64_t seq = k ? __atomic_add_fetch(&k->ip_seq, 1, __ATOMIC_RELAXED) : 1;
    now_ts(c, ts, sizeof(ts));
    ts_of(transition_ms(p, "PodScheduled"), sched_ts, sizeof(sched_ts));
    snprintf(ip, sizeof(ip), "10.244.%d.%d", (int)(seq / 250) % 250, (int)(seq % 250) + 2);
    json_t *running = json_pack("{s:s}", "startedAt", ts);
    json_t *empty = json_object();
    json_t *st =
        json_pack("{s:{s:s, s:o, s:s, s:[{s:s}], s:s, s:[{s:s}], s:s, s:o}}", "status", "phase",
                  "Running", "conditions", ready_conditions(ts, sched_ts, true), "hostIP", node_ip,
                  "hostIPs", "ip", node_ip, "podIP", ip, "podIPs", "ip", ip, "startTime", ts,
                  "containerStatuses", container_statuses(p, "running", running, 0, empty, true));
    json_decref(running);
    json_decref(empty);
    merge_patch(c, "/api/v1", p, "pods", "status", st, MANAGER_KL);
    size_t i;
    json_t *ctr;
    json_array_foreach(jget(p, "spec.containers"), i, ctr) {
        snprintf(msg, sizeof(msg), "Container image \"%s\" already present on machine",
                 json_string_value(json_object_get(ctr, "image")) ?: "");
        emit_event(c, p, "Pod", "v1", "Normal", "Pulled", "kubelet", msg);
        snprintf(msg, sizeof(msg), "Created container %s",
                 json_string_value(json_object_get(ctr, "name")) ?: "");
        emit_event(c, p, "Pod", "v1", "Normal", "Created", "kubelet", msg);
        snprintf(msg, sizeof(msg), "Started container %s",
                 json_string_value(json_object_get(ctr, "name")) ?: "");
        emit_event(c, p, "Pod", "v1", "Normal", "Started", "kubelet", msg);
    }
}

/* A running pod whose run time is over: ends (restartPolicy Never, or OnFailure with exit 0) or
 * restarts its containers (BackOff). */
static void finish_pod(ks_cluster_t *c, json_t *p, int exit_code) {
    char ts[32], sched_ts[32], started[32];
    const char *policy = jstr(p, "spec.restartPolicy") ?: "Always";
    now_ts(c, ts, sizeof(ts));
    ts_of(transition_ms(p, "PodScheduled"), sched_ts, sizeof(sched_ts));
    snprintf(started, sizeof(started), "%s", jstr(p, "status.startTime") ?: ts);
    json_t *term =
        json_pack("{s:i, s:s, s:s, s:s}", "exitCode", exit_code, "reason",
                  exit_code == 0 ? "Completed" : "Error", "startedAt", started, "finishedAt", ts);
    bool restart =
        strcmp(policy, "Always") == 0 || (strcmp(policy, "OnFailure") == 0 && exit_code != 0);
    json_t *patch;
    if (!restart) {
        json_t *empty = json_object();
        patch = json_pack("{s:{s:s, s:o, s:o}}", "status", "phase",
                          exit_code == 0 ? "Succeeded" : "Failed", "conditions",
                          ready_conditions(ts, sched_ts, false), "containerStatuses",
                          container_statuses(p, "terminated", term, 0, empty, false));
        json_decref(empty);
    } else {
        int restarts =
            (int)jint(json_array_get(jget(p, "status.containerStatuses"), 0), "restartCount", 0) +
            1;
        json_t *last = json_pack("{s:O}", "terminated", term);
        json_t *running = json_pack("{s:s}", "startedAt", ts);
        patch = json_pack("{s:{s:s, s:o}}", "status", "startTime", ts, "containerStatuses",
                          container_statuses(p, "running", running, restarts, last, true));
        json_decref(last);
        json_decref(running);
        emit_event(c, p, "Pod", "v1", "Warning", "BackOff", "kubelet",
                   "Back-off restarting failed container");
    }
    json_decref(term);
    merge_patch(c, "/api/v1", p, "pods", "status", patch, MANAGER_KL);
}

/* A running container whose spec changed (its image: the one container field a pod update may
 * change) is killed and started again, as the kubelet does whatever the restart policy
 * ("Container definition changed, will be restarted"): its restartCount grows by one, its last
 * state is the terminated run, it gets a new containerID; the pod, its IPs and its other
 * containers stay as they are. */
static void restart_changed(ks_cluster_t *c, json_t *p) {
    json_t *next = json_deep_copy(jget(p, "status.containerStatuses"));
    bool any = false;
    char ts[32], msg[400], cid[96], iid[512];
    now_ts(c, ts, sizeof(ts));
    size_t i, j;
    json_t *ctr, *st;
    json_array_foreach(jget(p, "spec.containers"), i, ctr) {
        const char *name = json_string_value(json_object_get(ctr, "name")) ?: "";
        const char *image = json_string_value(json_object_get(ctr, "image")) ?: "";
        json_array_foreach(next, j, st) {
            if (strcmp(json_string_value(json_object_get(st, "name")) ?: "", name) != 0 ||
                json_object_get(jget(st, "state"), "running") == NULL ||
                strcmp(json_string_value(json_object_get(st, "image")) ?: "", image) == 0)
                continue;
            int64_t restarts = jint(st, "restartCount", 0) + 1;
            json_t *term =
                json_pack("{s:{s:i, s:s, s:s, s:s, s:O}}", "terminated", "exitCode", 0, "reason",
                          "Completed", "startedAt", jstr(st, "state.running.startedAt") ?: ts,
                          "finishedAt", ts, "containerID", json_object_get(st, "containerID"));
            snprintf(cid, sizeof(cid), "containerd://%.36s%02zu%lld", jstr(p, "metadata.uid") ?: "",
                     i, (long long)restarts);
            image_id(image, iid, sizeof(iid));
            json_object_set_new(st, "lastState", term);
            json_object_set_new(st, "state", json_pack("{s:{s:s}}", "running", "startedAt", ts));
            json_object_set_new(st, "restartCount", json_integer(restarts));
            json_object_set_new(st, "image", json_string(image));
            json_object_set_new(st, "imageID", json_string(iid));
            json_object_set_new(st, "containerID", json_string(cid));
            json_object_set_new(st, "ready", json_true());
            json_object_set_new(st, "started", json_true());
            snprintf(msg, sizeof(msg), "Container %s definition changed, will be restarted", name);
            emit_event(c, p, "Pod", "v1", "Normal", "Killing", "kubelet", msg);
            snprintf(msg, sizeof(msg), "Container image \"%s\" already present on machine", image);
            emit_event(c, p, "Pod", "v1", "Normal", "Pulled", "kubelet", msg);
            snprintf(msg, sizeof(msg), "Started container %s", name);
            emit_event(c, p, "Pod", "v1", "Normal", "Started", "kubelet", msg);
            any = true;
        }
    }
    if (any)
        merge_patch(c, "/api/v1", p, "pods", "status",
                    json_pack("{s:{s:o}}", "status", "containerStatuses", next), MANAGER_KL);
    else
        json_decref(next);
}

static bool runs_to_end(json_t *p) {
    return controller_uid(p, "Job") != NULL || annotation(p, "kubesim.io/exit-code") != NULL ||
           annotation(p, "kubesim.io/run-ms") != NULL;
}

/* The exit status a container's command would give, read from what is simulable without
 * running it: `true` 0, `false` 1, and for a shell script (sh|bash -c SCRIPT, in command or
 * args) the last `exit N` in it; anything else 0. */
static int64_t container_exit_code(json_t *ctr) {
    json_t *argv = json_array();
    size_t i;
    json_t *a;
    int64_t code = 0;
    json_array_extend(argv, jget(ctr, "command"));
    json_array_extend(argv, jget(ctr, "args"));
    const char *prog = json_string_value(json_array_get(argv, 0));
    const char *base = prog ? strrchr(prog, '/') : NULL;
    base = base ? base + 1 : prog;
    if (base != NULL && strcmp(base, "false") == 0)
        code = 1;
    if (base != NULL && (strcmp(base, "sh") == 0 || strcmp(base, "bash") == 0)) {
        json_array_foreach(argv, i, a) {
            const char *arg = json_string_value(a);
            if (i == 0 || arg == NULL || strcmp(arg, "-c") != 0)
                continue;
            const char *script = json_string_value(json_array_get(argv, i + 1)) ?: "";
            for (const char *e = strstr(script, "exit"); e != NULL; e = strstr(e + 4, "exit")) {
                const char *d = e + 4;
                size_t n;
                int64_t v;
                while (*d == ' ' || *d == '\t')
                    d++;
                n = strspn(d, "0123456789");
                if ((e == script || strchr(" \t;&|(\n", e[-1]) != NULL) && n > 0 && n < 10 &&
                    fg_parse_int64(d, n, 0, INT32_MAX, &v) == FG_OK)
                    code = v % 256;
            }
            break;
        }
    }
    json_decref(argv);
    return code;
}

/* The pod's exit status: the first container whose command fails, else 0. */
static int64_t command_exit_code(json_t *p) {
    size_t i;
    json_t *ctr;
    json_array_foreach(jget(p, "spec.containers"), i, ctr) {
        int64_t code = container_exit_code(ctr);
        if (code != 0)
            return code;
    }
    return 0;
}

static void kubelet(ks_cluster_t *c, json_t *p, const snap_t *nodes, int64_t now) {
    const char *phase = jstr(p, "status.phase") ?: "Pending";
    const char *nn = jstr(p, "spec.nodeName");
    const char *node_ip = "10.0.0.2";
    for (size_t i = 0; i < nodes->n; i++) {
        if (nn != NULL && strcmp(jstr(nodes->json[i], "metadata.name") ?: "", nn) == 0)
            node_ip = jstr(json_array_get(jget(nodes->json[i], "status.addresses"), 0), "address")
                          ?: node_ip;
    }
    if (strcmp(phase, "Pending") == 0) {
        int64_t sched = transition_ms(p, "PodScheduled");
        if (sched >= 0 && now >= sched + c->timing.start_ms)
            start_pod(c, p, node_ip);
        return;
    }
    if (strcmp(phase, "Running") == 0 && jget(p, "metadata.deletionTimestamp") == NULL)
        restart_changed(c, p);
    if (strcmp(phase, "Running") != 0 || !runs_to_end(p))
        return;
    const char *run = annotation(p, "kubesim.io/run-ms");
    const char *code = annotation(p, "kubesim.io/exit-code");
    int64_t run_ms = c->timing.run_ms, exit_code = 0;
    if (run != NULL)
        fg_parse_int64(run, strlen(run), 0, INT32_MAX, &run_ms);
    if (code != NULL)
        fg_parse_int64(code, strlen(code), 0, 255, &exit_code);
    else
        exit_code = command_exit_code(p);
    int64_t started = parse_ts(jstr(p, "status.startTime"));
    if (started >= 0 && now >= started + run_ms)
        finish_pod(c, p, (int)exit_code);
}

/* ---- ReplicaSets, Deployments ------------------------------------------------ */

/* The pods (or ReplicaSets, Jobs) of snapshot s controlled by owner; rvs (may be NULL) gets
 * their resourceVersions. */
static size_t owned(snap_t *s, json_t *owner, const char *kind, json_t **out, int64_t *rvs,
                    size_t max) {
    const char *uid = jstr(owner, "metadata.uid");
    size_t n = 0;
    if (s->cuid == NULL || strcmp(s->cuid_kind, kind) != 0) {
        free(s->cuid);
        s->cuid = fg_xcalloc(s->n + 1, sizeof(*s->cuid));
        s->cuid_kind = kind;
        for (size_t i = 0; i < s->n; i++)
            s->cuid[i] = controller_uid(s->json[i], kind);
    }
    for (size_t i = 0; i < s->n && n < max; i++) {
        const char *u = s->cuid[i];
        if (u != NULL && uid != NULL && strcmp(u, uid) == 0) {
            if (rvs != NULL)
                rvs[n] = s->objs[i]->rv;
            out[n++] = s->json[i];
        }
    }
    return n;
}

static uint64_t memo_hash(const char *uid) {
    uint64_t h = 1469598103934665603ULL;
    for (; *uid != '\0'; uid++)
        h = (h ^ (unsigned char)*uid) * 1099511628211ULL;
    return h % MEMO_BUCKETS;
}

static memo_t *memo_find(ks_ctrl_t *k, const char *uid) {
    for (memo_t *m = k->memo[memo_hash(uid)]; m != NULL; m = m->next)
        if (strcmp(m->uid, uid) == 0)
            return m;
    return NULL;
}

/* Whether the last pass over uid made no call and saw these versions (then skip this one). */
static bool settled(ks_cluster_t *c, const char *uid, const int64_t *rvs, size_t n) {
    memo_t *m = c->ctrl != NULL && uid != NULL ? memo_find(c->ctrl, uid) : NULL;
    if (m == NULL)
        return false;
    m->pass = c->ctrl->pass;
    return m->rvs != NULL && m->n == n && memcmp(m->rvs, rvs, n * sizeof(*rvs)) == 0;
}

/* Records a pass over uid that saw rvs: quiet (no call made) or not. */
static void memo_note(ks_cluster_t *c, const char *uid, const int64_t *rvs, size_t n, bool quiet) {
    ks_ctrl_t *k = c->ctrl;
    if (k == NULL || uid == NULL)
        return;
    memo_t *m = memo_find(k, uid);
    if (m == NULL) {
        uint64_t b = memo_hash(uid);
        m = fg_xcalloc(1, sizeof(*m));
        m->uid = fg_xstrdup(uid);
        m->next = k->memo[b];
        k->memo[b] = m;
    }
    free(m->rvs);
    m->rvs = NULL;
    m->n = 0;
    m->pass = k->pass;
    if (quiet) {
        m->rvs = fg_xcalloc(n + 1, sizeof(*m->rvs));
        memcpy(m->rvs, rvs, n * sizeof(*rvs));
        m->n = n;
    }
}

/* Drops the entries of objects the last pass did not see (all of them when all is set). */
static void memo_sweep(ks_ctrl_t *k, bool all) {
    for (size_t b = 0; b < MEMO_BUCKETS; b++) {
        memo_t **pp = &k->memo[b];
        while (*pp != NULL) {
            memo_t *m = *pp;
            if (all || m->pass != k->pass) {
                *pp = m->next;
                free(m->uid);
                free(m->rvs);
                free(m);
            } else {
                pp = &m->next;
            }
        }
    }
}

static json_t *pod_from_template(json_t *tmpl, json_t *owner, const char *api_version,
                                 const char *kind, json_t *extra_labels) {
    json_t *tmeta = jget(tmpl, "metadata");
    json_t *meta = json_is_object(tmeta) ? json_deep_copy(tmeta) : json_object();
    json_t *pod = json_pack("{s:s, s:s, s:o, s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                            meta, "spec", jget(tmpl, "spec"));
    char gen[300];
    snprintf(gen, sizeof(gen), "%.240s-", jstr(owner, "metadata.name"));
    json_object_set_new(meta, "generateName", json_string(gen));
    json_object_set_new(meta, "ownerReferences", owner_ref(owner, api_version, kind));
    if (extra_labels != NULL) {
        json_t *labels = json_object_get(meta, "labels");
        if (labels == NULL) {
            labels = json_object();
            json_object_set_new(meta, "labels", labels);
        }
        json_object_update(labels, extra_labels);
    }
    return pod;
}

/* One controller pass over owner: what it controls in snapshot s (mine[0..n)) and their
 * resourceVersions after owner's (rvs). pass_begin answers false (nothing to free) when the last
 * pass saw the same versions and made no call; else pass_end records the pass and frees. */
typedef struct {
    json_t **mine;
    int64_t *rvs;
    size_t n;
    const char *uid;
    uint64_t calls; /* api_calls when the pass began */
} pass_t;

static bool pass_begin(ks_cluster_t *c, json_t *owner, int64_t owner_rv, snap_t *s,
                       const char *kind, pass_t *p) {
    p->mine = fg_xcalloc(s->n + 1, sizeof(*p->mine));
    p->rvs = fg_xcalloc(s->n + 2, sizeof(*p->rvs));
    p->n = owned(s, owner, kind, p->mine, p->rvs + 1, s->n);
    p->uid = jstr(owner, "metadata.uid");
    p->calls = api_calls;
    p->rvs[0] = owner_rv;
    if (!settled(c, p->uid, p->rvs, p->n + 1))
        return true;
    free(p->rvs);
    free(p->mine);
    return false;
}

static void pass_end(ks_cluster_t *c, pass_t *p) {
    memo_note(c, p->uid, p->rvs, p->n + 1, api_calls == p->calls);
    free(p->rvs);
    free(p->mine);
}

static void reconcile_rs(ks_cluster_t *c, json_t *rs, int64_t rs_rv, snap_t *pods) {
    if (jget(rs, "metadata.deletionTimestamp") != NULL)
        return; /* being deleted (orphan finalizer): the GC finishes it */
    pass_t pass;
    if (!pass_begin(c, rs, rs_rv, pods, "ReplicaSet", &pass))
        return;
    json_t **mine = pass.mine;
    size_t n = pass.n, active = 0, ready = 0;
    char path[512], msg[400];
    for (size_t i = 0; i < n; i++) {
        if (!pod_terminal(mine[i])) {
            active++;
            ready += pod_ready(mine[i]);
        }
    }
    int64_t want = jint(rs, "spec.replicas", 1);
    const char *ns = jstr(rs, "metadata.namespace");
    for (int64_t k = (int64_t)active; k < want; k++) {
        json_t *pod =
            pod_from_template(jget(rs, "spec.template"), rs, "apps/v1", "ReplicaSet", NULL);
        json_t *made = NULL;
        obj_path(path, sizeof(path), "/api/v1", ns, "pods", NULL, NULL);
        if (api(c, "POST", path, "application/json", pod, MANAGER_CM, &made) == 201) {
            snprintf(msg, sizeof(msg), "Created pod: %s", jstr(made, "metadata.name"));
            emit_event(c, rs, "ReplicaSet", "apps/v1", "Normal", "SuccessfulCreate",
                       "replicaset-controller", msg);
        }
        json_decref(made);
        json_decref(pod);
    }
    /* scale down: not-ready pods first, then the newest */
    for (int64_t extra = (int64_t)active - want; extra > 0; extra--) {
        json_t *victim = NULL;
        for (size_t i = n; i-- > 0;) {
            if (mine[i] == NULL || pod_terminal(mine[i]))
                continue;
            if (victim == NULL || (!pod_ready(mine[i]) && pod_ready(victim)))
                victim = mine[i];
        }
        if (victim == NULL)
            break;
        for (size_t i = 0; i < n; i++)
            if (mine[i] == victim)
                mine[i] = NULL;
        snprintf(msg, sizeof(msg), "Stopping container %s",
                 jstr(json_array_get(jget(victim, "spec.containers"), 0), "name") ?: "");
        emit_event(c, victim, "Pod", "v1", "Normal", "Killing", "kubelet", msg);
        obj_path(path, sizeof(path), "/api/v1", ns, "pods", jstr(victim, "metadata.name"), NULL);
        api(c, "DELETE", path, NULL, NULL, MANAGER_CM, NULL);
        snprintf(msg, sizeof(msg), "Deleted pod: %s", jstr(victim, "metadata.name"));
        emit_event(c, rs, "ReplicaSet", "apps/v1", "Normal", "SuccessfulDelete",
                   "replicaset-controller", msg);
        active--;
        if (pod_ready(victim))
            ready--;
    }
    int64_t gen = jint(rs, "metadata.generation", 1);
    if (jint(rs, "status.replicas", -1) != (int64_t)active ||
        jint(rs, "status.readyReplicas", -1) != (int64_t)ready ||
        jint(rs, "status.observedGeneration", -1) != gen)
        merge_patch(c, "/apis/apps/v1", rs, "replicasets", "status",
                    json_pack("{s:{s:I, s:I, s:I, s:I, s:I}}", "status", "replicas",
                              (json_int_t)active, "fullyLabeledReplicas", (json_int_t)active,
                              "readyReplicas", (json_int_t)ready, "availableReplicas",
                              (json_int_t)ready, "observedGeneration", (json_int_t)gen),
                    MANAGER_CM);
    pass_end(c, &pass);
}

/* maxSurge / maxUnavailable: an int or "25%" of replicas, rounded up (surge) or down. */
static int64_t int_or_percent(json_t *v, int64_t replicas, bool round_up, int64_t dflt) {
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    int64_t pct = 0;
    if (s == NULL || strlen(s) < 2 || s[strlen(s) - 1] != '%' ||
        fg_parse_int64(s, strlen(s) - 1, 0, 100, &pct) != FG_OK)
        return dflt;
    return round_up ? (replicas * pct + 99) / 100 : replicas * pct / 100;
}

static void strip_nulls(json_t *j) {
    const char *k;
    json_t *v;
    void *tmp;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach_safe(j, tmp, k, v) {
            if (json_is_null(v))
                json_object_del(j, k);
            else
                strip_nulls(v);
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) strip_nulls(v);
    }
}

/* A pod template without what does not make two templates different (new reference): the
 * pod-template-hash label and null members (a client's `creationTimestamp: null`), as the
 * deployment controller's EqualIgnoreHash compares them. */
static json_t *canonical_template(json_t *tmpl) {
    json_t *t = json_is_object(tmpl) ? json_deep_copy(tmpl) : json_object();
    strip_nulls(t);
    json_t *meta = json_object_get(t, "metadata");
    json_object_del(json_object_get(meta, "labels"), "pod-template-hash");
    if (json_object_size(json_object_get(meta, "labels")) == 0)
        json_object_del(meta, "labels");
    if (json_object_size(meta) == 0)
        json_object_del(t, "metadata");
    return t;
}

static bool same_template(json_t *a, json_t *b) {
    json_t *ca = canonical_template(a), *cb = canonical_template(b);
    bool eq = json_equal(ca, cb);
    json_decref(ca);
    json_decref(cb);
    return eq;
}

/* The deployment.kubernetes.io/revision annotation of o (0 when absent). */
static int64_t revision_of(json_t *o) {
    const char *s = json_string_value(
        json_object_get(jget(o, "metadata.annotations"), "deployment.kubernetes.io/revision"));
    int64_t v = 0;
    if (s == NULL || fg_parse_int64(s, strlen(s), 0, INT64_MAX, &v) != FG_OK)
        return 0;
    return v;
}

static void set_revision(ks_cluster_t *c, json_t *o, const char *plural, int64_t rev) {
    char text[24];
    snprintf(text, sizeof(text), "%lld", (long long)rev);
    merge_patch(c, "/apis/apps/v1", o, plural, NULL,
                json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                          "deployment.kubernetes.io/revision", text),
                MANAGER_CM);
}

/* The hash of the canonical template (key order and nulls do not change it). */
static void template_hash(json_t *tmpl, char *out, size_t len) {
    json_t *canon = canonical_template(tmpl);
    char *s = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    size_t n = s ? strlen(s) : 0;
    json_decref(canon);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    free(s);
    static const char DIG[] = "bcdfghjklmnpqrstvwxz2456789";
    size_t k = 0;
    for (; k < 10 && k + 1 < len; k++, h /= 27)
        out[k] = DIG[h % 27];
    out[k] = '\0';
}

static void scale_rs(ks_cluster_t *c, json_t *dep, json_t *rs, int64_t to) {
    char msg[400];
    int64_t from = jint(rs, "spec.replicas", 0);
    if (from == to)
        return;
    merge_patch(c, "/apis/apps/v1", rs, "replicasets", NULL,
                json_pack("{s:{s:I}}", "spec", "replicas", (json_int_t)to), MANAGER_CM);
    snprintf(msg, sizeof(msg), "Scaled %s replica set %s from %lld to %lld",
             to > from ? "up" : "down", jstr(rs, "metadata.name"), (long long)from, (long long)to);
    emit_event(c, dep, "Deployment", "apps/v1", "Normal", "ScalingReplicaSet",
               "deployment-controller", msg);
}

static void create_rs(ks_cluster_t *c, json_t *dep, const char *hash, int64_t replicas,
                      int64_t revision) {
    char name[300], path[512], rev[24], msg[400];
    snprintf(name, sizeof(name), "%.240s-%s", jstr(dep, "metadata.name"), hash);
    snprintf(rev, sizeof(rev), "%lld", (long long)revision);
    json_t *tmpl = json_deep_copy(jget(dep, "spec.template"));
    json_t *tmeta = json_object_get(tmpl, "metadata");
    if (tmeta == NULL) {
        tmeta = json_object();
        json_object_set_new(tmpl, "metadata", tmeta);
    }
    json_t *labels = json_object_get(tmeta, "labels");
    if (labels == NULL) {
        labels = json_object();
        json_object_set_new(tmeta, "labels", labels);
    }
    json_object_set_new(labels, "pod-template-hash", json_string(hash));
    json_t *sel = json_deep_copy(jget(dep, "spec.selector"));
    json_t *ml = json_object_get(sel, "matchLabels");
    if (json_is_object(ml))
        json_object_set_new(ml, "pod-template-hash", json_string(hash));
    json_t *rs = json_pack("{s:s, s:s, s:{s:s, s:O, s:{s:s}, s:o}, s:{s:I, s:o, s:o}}",
                           "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", name,
                           "labels", labels, "annotations", "deployment.kubernetes.io/revision",
                           rev, "ownerReferences", owner_ref(dep, "apps/v1", "Deployment"), "spec",
                           "replicas", (json_int_t)replicas, "selector", sel, "template", tmpl);
    obj_path(path, sizeof(path), "/apis/apps/v1", jstr(dep, "metadata.namespace"), "replicasets",
             NULL, NULL);
    if (api(c, "POST", path, "application/json", rs, MANAGER_CM, NULL) == 201) {
        snprintf(msg, sizeof(msg), "Scaled up replica set %s from 0 to %lld", name,
                 (long long)replicas);
        emit_event(c, dep, "Deployment", "apps/v1", "Normal", "ScalingReplicaSet",
                   "deployment-controller", msg);
    }
    json_decref(rs);
}

static void reconcile_deployment(ks_cluster_t *c, json_t *dep, int64_t dep_rv, snap_t *rss) {
    if (jget(dep, "metadata.deletionTimestamp") != NULL)
        return; /* being deleted (orphan finalizer): the GC finishes it */
    char hash[16], ts[32];
    pass_t pass;
    if (!pass_begin(c, dep, dep_rv, rss, "Deployment", &pass))
        return;
    json_t **mine = pass.mine;
    size_t n = pass.n;
    int64_t replicas = jint(dep, "spec.replicas", 1);
    bool paused = json_is_true(jget(dep, "spec.paused"));
    bool recreate = strcmp(jstr(dep, "spec.strategy.type") ?: "", "Recreate") == 0;
    int64_t surge = recreate ? 0
                             : int_or_percent(jget(dep, "spec.strategy.rollingUpdate.maxSurge"),
                                              replicas, true, 1);
    int64_t unavail = recreate
                          ? replicas
                          : int_or_percent(jget(dep, "spec.strategy.rollingUpdate.maxUnavailable"),
                                           replicas, false, 0);
    if (surge == 0 && unavail == 0)
        unavail = 1;
    template_hash(jget(dep, "spec.template"), hash, sizeof(hash));
    json_t *new_rs = NULL;
    int64_t total = 0, old_total = 0, available = 0, ready = 0, status_replicas = 0, maxrev = 0;
    for (size_t i = 0; i < n; i++) {
        if (revision_of(mine[i]) > maxrev)
            maxrev = revision_of(mine[i]);
    }
    for (size_t i = 0; i < n; i++) {
        /* the ReplicaSet whose template is the Deployment's, whatever its name: a rollback
         * (kubectl rollout undo) brings an old template back and reuses its ReplicaSet */
        if (new_rs == NULL &&
            same_template(jget(dep, "spec.template"), jget(mine[i], "spec.template")))
            new_rs = mine[i];
        else
            old_total += jint(mine[i], "spec.replicas", 0);
        total += jint(mine[i], "spec.replicas", 0);
        available += jint(mine[i], "status.availableReplicas", 0);
        ready += jint(mine[i], "status.readyReplicas", 0);
        status_replicas += jint(mine[i], "status.replicas", 0);
    }
    if (!paused) {
        if (new_rs == NULL) {
            int64_t start = old_total == 0 ? replicas
                            : recreate
                                ? 0
                                : (replicas + surge - total > 0 ? replicas + surge - total : 0);
            if (start > replicas)
                start = replicas;
            create_rs(c, dep, hash, start, maxrev + 1);
            maxrev++;
        } else {
            if (revision_of(new_rs) < maxrev) /* reused: it becomes the newest revision */
                set_revision(c, new_rs, "replicasets", ++maxrev);
            int64_t cur = jint(new_rs, "spec.replicas", 0);
            int64_t target = cur;
            if (cur > replicas)
                target = replicas;
            else if (cur < replicas && (!recreate || old_total == 0)) {
                int64_t room = replicas + surge - total;
                target = cur + (room < replicas - cur ? room : replicas - cur);
                if (target < cur)
                    target = cur;
            }
            scale_rs(c, dep, new_rs, target);
        }
        /* old ReplicaSets down as far as availability allows */
        int64_t can_down = available - (replicas - unavail);
        for (size_t i = 0; i < n; i++) {
            if (mine[i] == new_rs)
                continue;
            int64_t cur = jint(mine[i], "spec.replicas", 0);
            int64_t unready = cur - jint(mine[i], "status.readyReplicas", 0);
            int64_t down = unready > 0 ? unready : 0;
            if (can_down > 0)
                down += can_down;
            if (down > cur)
                down = cur;
            if (down > 0) {
                scale_rs(c, dep, mine[i], cur - down);
                can_down -= down;
            }
        }
    }
    if (!paused && maxrev > 0 && revision_of(dep) != maxrev)
        set_revision(c, dep, "deployments", maxrev);
    int64_t updated = new_rs ? jint(new_rs, "status.replicas", 0) : 0;
    int64_t gen = jint(dep, "metadata.generation", 1);
    bool complete = updated == replicas && status_replicas == replicas && available == replicas;
    now_ts(c, ts, sizeof(ts));
    const char *preason = paused     ? "DeploymentPaused"
                          : complete ? "NewReplicaSetAvailable"
                                     : "ReplicaSetUpdated";
    char pmsg[400];
    if (new_rs != NULL)
        snprintf(pmsg, sizeof(pmsg), "ReplicaSet \"%s\" %s.", jstr(new_rs, "metadata.name"),
                 complete ? "has successfully progressed" : "is progressing");
    else
        snprintf(pmsg, sizeof(pmsg), "ReplicaSet \"%s-%s\" %s.", jstr(dep, "metadata.name"), hash,
                 complete ? "has successfully progressed" : "is progressing");
    json_t *conds = json_pack(
        "[{s:s, s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Available",
        "status", available >= replicas - unavail ? "True" : "False", "lastUpdateTime", ts,
        "lastTransitionTime", ts, "reason",
        available >= replicas - unavail ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
        "message",
        available >= replicas - unavail ? "Deployment has minimum availability."
                                        : "Deployment does not have minimum availability.",
        "type", "Progressing", "status", paused ? "Unknown" : "True", "lastUpdateTime", ts,
        "lastTransitionTime", ts, "reason", preason, "message",
        paused ? "Deployment is paused" : pmsg);
    bool changed = jint(dep, "status.observedGeneration", -1) != gen ||
                   jint(dep, "status.replicas", -1) != status_replicas ||
                   jint(dep, "status.updatedReplicas", -1) != updated ||
                   jint(dep, "status.readyReplicas", -1) != ready ||
                   jint(dep, "status.availableReplicas", -1) != available ||
                   strcmp(jstr(json_array_get(jget(dep, "status.conditions"), 1), "reason") ?: "",
                          preason) != 0;
    if (changed) {
        json_t *st =
            json_pack("{s:{s:I, s:I, s:I, s:I, s:I, s:o}}", "status", "observedGeneration",
                      (json_int_t)gen, "replicas", (json_int_t)status_replicas, "updatedReplicas",
                      (json_int_t)updated, "readyReplicas", (json_int_t)ready, "availableReplicas",
                      (json_int_t)available, "conditions", conds);
        if (status_replicas > available)
            json_object_set_new(json_object_get(st, "status"), "unavailableReplicas",
                                json_integer(status_replicas - available));
        replace_status(c, "/apis/apps/v1", dep, "deployments",
                       json_incref(json_object_get(st, "status")), MANAGER_CM);
        json_decref(st);
    } else {
        json_decref(conds);
    }
    pass_end(c, &pass);
}

/* ---- Jobs, CronJobs ---------------------------------------------------------- */

static bool job_finished(json_t *job) {
    size_t i;
    json_t *cond;
    json_array_foreach(jget(job, "status.conditions"), i, cond) {
        const char *t = json_string_value(json_object_get(cond, "type")) ?: "";
        if ((strcmp(t, "Complete") == 0 || strcmp(t, "Failed") == 0) &&
            strcmp(json_string_value(json_object_get(cond, "status")) ?: "", "True") == 0)
            return true;
    }
    return false;
}

/* A suspended Job, as the job controller has it: its active pods deleted (finished ones keep
 * counting), status.active gone and the Suspended condition True (JobSuspended). */
static void suspend_job(ks_cluster_t *c, json_t *job, snap_t *pods) {
    char ts[32], path[512];
    json_t **mine = fg_xcalloc(pods->n + 1, sizeof(*mine));
    size_t n = owned(pods, job, "Job", mine, NULL, pods->n);
    for (size_t i = 0; i < n; i++) {
        if (pod_terminal(mine[i]) || jget(mine[i], "metadata.deletionTimestamp") != NULL)
            continue;
        obj_path(path, sizeof(path), "/api/v1", jstr(job, "metadata.namespace"), "pods",
                 jstr(mine[i], "metadata.name"), NULL);
        api(c, "DELETE", path, NULL, NULL, MANAGER_CM, NULL);
    }
    free(mine);
    json_t *conds = jget(job, "status.conditions");
    bool marked = false;
    size_t i;
    json_t *cond;
    json_array_foreach(conds, i, cond) {
        marked = marked || (strcmp(jstr(cond, "type") ?: "", "Suspended") == 0 &&
                            strcmp(jstr(cond, "status") ?: "", "True") == 0);
    }
    if (marked && jint(job, "status.active", 0) == 0)
        return;
    now_ts(c, ts, sizeof(ts));
    json_t *status = json_deep_copy(jget(job, "status"));
    if (!json_is_object(status)) {
        json_decref(status);
        status = json_object();
    }
    json_object_del(status, "active");
    json_object_set_new(status, "conditions",
                        json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Suspended", "status",
                                  "True", "lastProbeTime", ts, "lastTransitionTime", ts, "reason",
                                  "JobSuspended", "message", "Job suspended"));
    replace_status(c, "/apis/batch/v1", job, "jobs", status, MANAGER_CM);
    emit_event(c, job, "Job", "batch/v1", "Normal", "Suspended", "job-controller", "Job suspended");
}

static void reconcile_job(ks_cluster_t *c, json_t *job, snap_t *pods) {
    char ts[32], path[512], msg[400];
    /* a Job being deleted (orphan finalizer) makes no more pods, as the job controller */
    if (job_finished(job) || jget(job, "metadata.deletionTimestamp") != NULL)
        return;
    if (json_is_true(jget(job, "spec.suspend"))) {
        suspend_job(c, job, pods);
        return;
    }
    json_t **mine = fg_xcalloc(pods->n + 1, sizeof(*mine));
    size_t n = owned(pods, job, "Job", mine, NULL, pods->n);
    int64_t active = 0, succeeded = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        const char *ph = jstr(mine[i], "status.phase") ?: "Pending";
        if (strcmp(ph, "Succeeded") == 0)
            succeeded++;
        else if (strcmp(ph, "Failed") == 0)
            failed++;
        else
            active++;
    }
    int64_t completions = jint(job, "spec.completions", 1);
    int64_t parallelism = jint(job, "spec.parallelism", 1);
    int64_t backoff = jint(job, "spec.backoffLimit", 6);
    now_ts(c, ts, sizeof(ts));
    const char *start = jstr(job, "status.startTime");
    json_t *status = json_pack("{s:s, s:I, s:I, s:I, s:i, s:{}}", "startTime", start ? start : ts,
                               "succeeded", (json_int_t)succeeded, "failed", (json_int_t)failed,
                               "ready", (json_int_t)0, "terminating", 0, "uncountedTerminatedPods");
    if (succeeded >= completions) {
        json_object_set_new(status, "completionTime", json_string(ts));
        json_object_set_new(status, "conditions",
                            json_pack("[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s, s:s}]",
                                      "type", "SuccessCriteriaMet", "status", "True",
                                      "lastProbeTime", ts, "lastTransitionTime", ts, "type",
                                      "Complete", "status", "True", "lastProbeTime", ts,
                                      "lastTransitionTime", ts, "reason", "CompletionsReached",
                                      "message", "Reached expected number of succeeded pods"));
        emit_event(c, job, "Job", "batch/v1", "Normal", "Completed", "job-controller",
                   "Job completed");
    } else if (failed > backoff) {
        json_object_set_new(status, "conditions",
                            json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Failed",
                                      "status", "True", "lastProbeTime", ts, "lastTransitionTime",
                                      ts, "reason", "BackoffLimitExceeded", "message",
                                      "Job has reached the specified backoff limit"));
        emit_event(c, job, "Job", "batch/v1", "Warning", "BackoffLimitExceeded", "job-controller",
                   "Job has reached the specified backoff limit");
        for (size_t i = 0; i < n; i++) {
            if (pod_terminal(mine[i]))
                continue;
            obj_path(path, sizeof(path), "/api/v1", jstr(job, "metadata.namespace"), "pods",
                     jstr(mine[i], "metadata.name"), NULL);
            api(c, "DELETE", path, NULL, NULL, MANAGER_CM, NULL);
        }
        active = 0;
    } else {
        int64_t want = completions - succeeded - active;
        if (want > parallelism - active)
            want = parallelism - active;
        json_t *labels = json_pack(
            "{s:s, s:s, s:s, s:s}", "batch.kubernetes.io/job-name", jstr(job, "metadata.name"),
            "job-name", jstr(job, "metadata.name"), "controller-uid", jstr(job, "metadata.uid"),
            "batch.kubernetes.io/controller-uid", jstr(job, "metadata.uid"));
        for (int64_t k = 0; k < want; k++) {
            json_t *pod =
                pod_from_template(jget(job, "spec.template"), job, "batch/v1", "Job", labels);
            json_t *made = NULL;
            obj_path(path, sizeof(path), "/api/v1", jstr(job, "metadata.namespace"), "pods", NULL,
                     NULL);
            if (api(c, "POST", path, "application/json", pod, MANAGER_CM, &made) == 201) {
                snprintf(msg, sizeof(msg), "Created pod: %s", jstr(made, "metadata.name"));
                emit_event(c, job, "Job", "batch/v1", "Normal", "SuccessfulCreate",
                           "job-controller", msg);
                active++;
            }
            json_decref(made);
            json_decref(pod);
        }
        json_decref(labels);
    }
    if (active > 0)
        json_object_set_new(status, "active", json_integer(active));
    bool changed = jint(job, "status.active", 0) != active ||
                   jint(job, "status.succeeded", -1) != succeeded ||
                   jint(job, "status.failed", -1) != failed ||
                   json_object_get(status, "conditions") != NULL || start == NULL;
    if (changed)
        replace_status(c, "/apis/batch/v1", job, "jobs", status, MANAGER_CM);
    else
        json_decref(status);
    free(mine);
}

/* Whether value v matches one cron field ("*", "*\/n", "a", "a-b", "a-b/n", lists). */
static bool cron_field(const char *f, int v) {
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", f);
    char *save = NULL;
    for (char *part = strtok_r(buf, ",", &save); part != NULL; part = strtok_r(NULL, ",", &save)) {
        int64_t lo = 0, hi = 1000, step = 1;
        char *slash = strchr(part, '/');
        if (slash != NULL) {
            *slash = '\0';
            if (fg_parse_int64(slash + 1, strlen(slash + 1), 1, 1000, &step) != FG_OK)
                return false;
        }
        if (strcmp(part, "*") != 0) {
            char *dash = strchr(part, '-');
            if (dash != NULL) {
                *dash = '\0';
                if (fg_parse_int64(part, strlen(part), 0, 1000, &lo) != FG_OK ||
                    fg_parse_int64(dash + 1, strlen(dash + 1), 0, 1000, &hi) != FG_OK)
                    return false;
            } else {
                if (fg_parse_int64(part, strlen(part), 0, 1000, &lo) != FG_OK)
                    return false;
                hi = slash != NULL ? 1000 : lo;
            }
        }
        if (v >= lo && v <= hi && (v - lo) % step == 0)
            return true;
    }
    return false;
}

/* Whether the minute starting at unix time t (UTC) matches a 5-field schedule or @macro. */
static bool cron_matches(const char *sched, time_t t) {
    static const struct {
        const char *macro, *expr;
    } MACROS[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                  {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
                  {"@hourly", "0 * * * *"}};
    char buf[160];
    for (size_t i = 0; i < sizeof(MACROS) / sizeof(MACROS[0]); i++) {
        if (strcmp(sched, MACROS[i].macro) == 0)
            sched = MACROS[i].expr;
    }
    snprintf(buf, sizeof(buf), "%s", sched);
    char *f[5], *save = NULL;
    size_t n = 0;
    for (char *p = strtok_r(buf, " \t", &save); p != NULL && n < 5;
         p = strtok_r(NULL, " \t", &save))
        f[n++] = p;
    if (n != 5)
        return false;
    struct tm tm;
    gmtime_r(&t, &tm);
    return cron_field(f[0], tm.tm_min) && cron_field(f[1], tm.tm_hour) &&
           cron_field(f[2], tm.tm_mday) && cron_field(f[3], tm.tm_mon + 1) &&
           cron_field(f[4], tm.tm_wday);
}

static void reconcile_cronjob(ks_cluster_t *c, json_t *cj, int64_t now) {
    char path[512], name[300], ts[32], msg[400];
    if (json_is_true(jget(cj, "spec.suspend")))
        return;
    const char *sched = jstr(cj, "spec.schedule");
    int64_t last = parse_ts(jstr(cj, "status.lastScheduleTime"));
    if (last < 0)
        last = parse_ts(jstr(cj, "metadata.creationTimestamp"));
    if (sched == NULL || last < 0)
        return;
    int64_t from = last / 60000 + 1, to = now / 60000, due = -1;
    if (to - from > MAX_CRON_LOOKBACK_MIN)
        from = to - MAX_CRON_LOOKBACK_MIN;
    for (int64_t m = to; m >= from; m--) {
        if (cron_matches(sched, (time_t)(m * 60))) {
            due = m;
            break;
        }
    }
    if (due < 0)
        return;
    snprintf(name, sizeof(name), "%.200s-%lld", jstr(cj, "metadata.name"), (long long)due);
    json_t *spec = jget(cj, "spec.jobTemplate.spec");
    json_t *job = json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:o}, s:O}", "apiVersion", "batch/v1",
                            "kind", "Job", "metadata", "name", name, "labels", "kubesim.io/cronjob",
                            jstr(cj, "metadata.name"), "ownerReferences",
                            owner_ref(cj, "batch/v1", "CronJob"), "spec", spec);
    /* the job template's labels and annotations go onto the Job, as the cronjob controller's
     * getJobFromTemplate2 copies them */
    json_t *jmeta = jget(job, "metadata");
    if (json_is_object(jget(cj, "spec.jobTemplate.metadata.labels")))
        json_object_update(json_object_get(jmeta, "labels"),
                           jget(cj, "spec.jobTemplate.metadata.labels"));
    if (json_is_object(jget(cj, "spec.jobTemplate.metadata.annotations")))
        json_object_set_new(jmeta, "annotations",
                            json_deep_copy(jget(cj, "spec.jobTemplate.metadata.annotations")));
    obj_path(path, sizeof(path), "/apis/batch/v1", jstr(cj, "metadata.namespace"), "jobs", NULL,
             NULL);
    json_t *made = NULL;
    int code = api(c, "POST", path, "application/json", job, MANAGER_CM, &made);
    json_decref(job);
    ts_of(due * 60000, ts, sizeof(ts));
    if (code == 201) {
        snprintf(msg, sizeof(msg), "Created job %s", name);
        emit_event(c, cj, "CronJob", "batch/v1", "Normal", "SuccessfulCreate", "cronjob-controller",
                   msg);
        merge_patch(c, "/apis/batch/v1", cj, "cronjobs", "status",
                    json_pack("{s:{s:s, s:[{s:s, s:s, s:s, s:s, s:s}]}}", "status",
                              "lastScheduleTime", ts, "active", "kind", "Job", "namespace",
                              jstr(cj, "metadata.namespace"), "name", name, "uid",
                              jstr(made, "metadata.uid"), "apiVersion", "batch/v1"),
                    MANAGER_CM);
    } else if (code == 409) {
        merge_patch(c, "/apis/batch/v1", cj, "cronjobs", "status",
                    json_pack("{s:{s:s}}", "status", "lastScheduleTime", ts), MANAGER_CM);
    }
    json_decref(made);
}

/* ---- HorizontalPodAutoscalers ------------------------------------------------------ */

/* The averageUtilization of resource `name` in an HPA's metric list (path: "resource.target"
 * for spec.metrics, "resource.current" for status.currentMetrics), or -1. */
static int64_t hpa_utilization(json_t *list, const char *name, const char *path) {
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        if (strcmp(jstr(m, "type") ?: "", "Resource") == 0 &&
            strcmp(jstr(m, "resource.name") ?: "", name) == 0)
            return jint(jget(m, path), "averageUtilization", -1);
    }
    return -1;
}

/* HorizontalPodAutoscaler -> its Deployment's replicas, as the HPA controller does with what the
 * metrics pipeline reports. kubesim measures nothing, so the utilization of each resource
 * metric is read from the HPA's own status.currentMetrics, which a test writes through /status
 * as the pipeline would feed the controller. desired = ceil(replicas x utilization / target),
 * the largest over the metrics, within minReplicas..maxReplicas; a scale waits for its
 * direction's behavior.*.stabilizationWindowSeconds (down 300, up 0 by default) since the last
 * one. Status: currentReplicas, desiredReplicas, lastScaleTime; event SuccessfulRescale. */
static void reconcile_hpa(ks_cluster_t *c, json_t *hpa, const snap_t *deps, int64_t now) {
    const char *kind = jstr(hpa, "spec.scaleTargetRef.kind"),
               *target = jstr(hpa, "spec.scaleTargetRef.name"),
               *ns = jstr(hpa, "metadata.namespace");
    if (kind == NULL || strcmp(kind, "Deployment") != 0 || target == NULL || ns == NULL)
        return;
    json_t *dep = NULL;
    for (size_t i = 0; i < deps->n && dep == NULL; i++)
        if (strcmp(jstr(deps->json[i], "metadata.name") ?: "", target) == 0 &&
            strcmp(jstr(deps->json[i], "metadata.namespace") ?: "", ns) == 0)
            dep = deps->json[i];
    if (dep == NULL || jget(dep, "metadata.deletionTimestamp") != NULL)
        return;
    int64_t cur = jint(dep, "spec.replicas", 1), minr = jint(hpa, "spec.minReplicas", 1),
            maxr = jint(hpa, "spec.maxReplicas", 1), desired = -1;
    size_t i;
    json_t *m;
    json_array_foreach(jget(hpa, "spec.metrics"), i, m) {
        const char *name = jstr(m, "resource.name");
        int64_t want = name ? jint(jget(m, "resource.target"), "averageUtilization", -1) : -1;
        int64_t at =
            name ? hpa_utilization(jget(hpa, "status.currentMetrics"), name, "resource.current")
                 : -1;
        if (want <= 0 || at < 0)
            continue;
        int64_t base = cur > 0 ? cur : 1, d = (base * at + want - 1) / want;
        desired = d > desired ? d : desired;
    }
    if (desired < 0)
        desired = cur;
    desired = desired < minr ? minr : desired > maxr ? maxr : desired;
    int64_t last = parse_ts(jstr(hpa, "status.lastScaleTime"));
    int64_t window = desired < cur
                         ? jint(hpa, "spec.behavior.scaleDown.stabilizationWindowSeconds", 300)
                         : jint(hpa, "spec.behavior.scaleUp.stabilizationWindowSeconds", 0);
    char ts[32], msg[200];
    json_t *st =
        json_pack("{s:I,s:I}", "currentReplicas", (json_int_t)jint(dep, "status.replicas", 0),
                  "desiredReplicas", (json_int_t)desired);
    if (desired != cur && (last < 0 || now - last >= window * 1000)) {
        merge_patch(c, "/apis/apps/v1", dep, "deployments", NULL,
                    json_pack("{s:{s:I}}", "spec", "replicas", (json_int_t)desired), MANAGER_CM);
        now_ts(c, ts, sizeof(ts));
        json_object_set_new(st, "lastScaleTime", json_string(ts));
        snprintf(msg, sizeof(msg), "New size: %lld; reason: %s", (long long)desired,
                 desired > cur ? "cpu resource utilization (percentage of request) above target"
                               : "All metrics below target");
        emit_event(c, hpa, "HorizontalPodAutoscaler", "autoscaling/v2", "Normal",
                   "SuccessfulRescale", "horizontal-pod-autoscaler", msg);
    } else if (jint(hpa, "status.desiredReplicas", -1) == desired &&
               jint(hpa, "status.currentReplicas", -1) == jint(dep, "status.replicas", 0)) {
        json_decref(st);
        return; /* nothing new to say */
    }
    merge_patch(c, "/apis/autoscaling/v2", hpa, "horizontalpodautoscalers", "status",
                json_pack("{s:o}", "status", st), MANAGER_CM);
}

/* ---- the pass ---------------------------------------------------------------- */

/* Events older than the TTL go, as the API server expires them. */
static void expire_events(ks_cluster_t *c, int64_t now) {
    snap_t evs;
    char path[512];
    snap(c, "Event", &evs);
    for (size_t i = 0; i < evs.n; i++) {
        int64_t last = parse_ts(jstr(evs.json[i], "lastTimestamp"));
        int64_t ttl = c->timing.event_ttl_ms > 0 ? c->timing.event_ttl_ms : EVENT_TTL_MS;
        if (last < 0 || now - last < ttl)
            continue;
        obj_path(path, sizeof(path), "/api/v1", jstr(evs.json[i], "metadata.namespace"), "events",
                 jstr(evs.json[i], "metadata.name"), NULL);
        api(c, "DELETE", path, NULL, NULL, MANAGER_CM, NULL);
    }
    snap_free(&evs);
}

void ks_ctrl_tick(ks_cluster_t *c) {
    snap_t nodes, pods, rss, deps, jobs, cjs;
    int64_t now = ks_now_ms(c);
    if (c->ctrl != NULL)
        c->ctrl->pass++;
    ks_gc_run(c);
    snap(c, "Node", &nodes);
    snap(c, "CronJob", &cjs);
    for (size_t i = 0; i < cjs.n; i++)
        reconcile_cronjob(c, cjs.json[i], now);
    snap(c, "Deployment", &deps);
    snap_t hpas;
    snap(c, "HorizontalPodAutoscaler", &hpas);
    for (size_t i = 0; i < hpas.n; i++)
        reconcile_hpa(c, hpas.json[i], &deps, now);
    snap_free(&hpas);
    if (hpas.n > 0) { /* the Deployments as the scaling left them */
        snap_free(&deps);
        snap(c, "Deployment", &deps);
    }
    snap(c, "ReplicaSet", &rss);
    for (size_t i = 0; i < deps.n; i++)
        reconcile_deployment(c, deps.json[i], deps.objs[i]->rv, &rss);
    snap_free(&rss);
    snap(c, "ReplicaSet", &rss);
    snap(c, "Pod", &pods);
    for (size_t i = 0; i < rss.n; i++)
        reconcile_rs(c, rss.json[i], rss.objs[i]->rv, &pods);
    snap(c, "Job", &jobs);
    for (size_t i = 0; i < jobs.n; i++)
        reconcile_job(c, jobs.json[i], &pods);
    snap_free(&pods);
    snap(c, "Pod", &pods);
    fit_t *fits = node_fits(&nodes, &pods);
    for (size_t i = 0; i < pods.n; i++) {
        json_t *p = pods.json[i];
        if (pod_terminal(p))
            continue;
        if (jstr(p, "spec.nodeName") == NULL)
            schedule(c, p, fits, nodes.n);
        else
            kubelet(c, p, &nodes, now);
    }
    free(fits);
    int64_t gc_ms = c->timing.event_ttl_ms > 0 && c->timing.event_ttl_ms < EVENT_GC_MS
                        ? c->timing.event_ttl_ms
                        : EVENT_GC_MS;
    if (c->ctrl != NULL && now - c->ctrl->last_event_gc_ms >= gc_ms) {
        expire_events(c, now);
        c->ctrl->last_event_gc_ms = now;
    }
    if (c->ctrl != NULL && now - c->ctrl->last_heartbeat_ms >= c->timing.heartbeat_ms) {
        heartbeat(c, &nodes);
        c->ctrl->last_heartbeat_ms = now;
    }
    snap_free(&pods);
    snap_free(&rss);
    snap_free(&deps);
    snap_free(&jobs);
    snap_free(&cjs);
    snap_free(&nodes);
    if (c->ctrl != NULL)
        memo_sweep(c->ctrl, false);
}

static void *ctrl_main(void *arg) {
    ks_cluster_t *c = arg;
    ks_ctrl_t *k = c->ctrl;
    int64_t seen = -1;
    uint64_t last_full = 0;
    pthread_mutex_lock(&k->mu);
    while (!k->stop && !c->stopping) {
        pthread_mutex_unlock(&k->mu);
        int64_t rv = ks_store_rv(c->store);
        uint64_t now = fg_now_ns();
        /* a pass when something changed, else a slower one for timers (starts, run ends, cron) */
        if (rv != seen || now - last_full >= (uint64_t)IDLE_MS * 1000000ULL) {
            /* seen is taken before the pass: its own writes bring one more pass, so chains
             * (ReplicaSet -> pod -> scheduled -> running) advance a tick a step; a pass that
             * writes nothing settles */
            seen = rv;
            ks_ctrl_tick(c);
            last_full = now;
        }
        pthread_mutex_lock(&k->mu);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!k->stop)
            pthread_cond_timedwait(&k->cv, &k->mu, &ts);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

int ks_ctrl_start(ks_cluster_t *c, const ks_node_spec_t *nodes) {
    ks_ctrl_t *k = fg_xcalloc(1, sizeof(*k));
    pthread_mutex_init(&k->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    k->last_heartbeat_ms = ks_now_ms(c);
    k->last_event_gc_ms = ks_now_ms(c);
    c->ctrl = k;
    if (nodes != NULL && nodes->count > 0)
        create_nodes(c, nodes);
    if (pthread_create(&k->thread, NULL, ctrl_main, c) != 0) {
        c->ctrl = NULL;
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        free(k);
        return FG_EIO;
    }
    return FG_OK;
}

void ks_ctrl_stop(ks_cluster_t *c) {
    ks_ctrl_t *k = c->ctrl;
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    c->ctrl = NULL;
    memo_sweep(k, true);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
}
