/* Integration tests of the workload writes of issue 14 over HTTP: pod delete and
 * restart-container, job sets. The daemon with its informers, a private redis-server and kubesim
 * with three clusters in two zones (c0, c1 in zone-a; c2 in zone-b), real tokens (admin,
 * developer, viewer), every answer checked against the contract, kubesim's own objects and
 * request counters checked for what reached which cluster. */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testmain.h"
#include "testredis.h"
#include "teststack.h"
#include "contract.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static tr_redis_t redis;
static tj_keys_t keys;
static tk_sim_t ks;
static pid_t daemon_pid;
static uint16_t port;
static char *admin, *dev, *viewer;
static char daemon_cfg[8192]; /* the configuration, for a second replica */

/* One call; with check the answer must be one the contract declares. Returns the status. */
static long call(const char *method, const char *path, const char *tok, const char *body,
                 const char *extra, bool check, th_resp_t *r) {
    return ts_call(port, method, path, tok, body, extra, check, r);
}

static json_t *body_json(const th_resp_t *r) {
    json_t *j = NULL;
    ck_assert_msg(fg_json_load(r->body, r->len, &j, NULL, 0) == FG_OK, "%s", r->body);
    return j;
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    static const char *const extra[] = {"--nodes", "2", "--pod-start-ms", "0", "--job-run-ms",
                                        "400",     NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    char *cfg = daemon_cfg, cl[2048];
    ts_clusters_json(&ks, true, cl, sizeof cl);
    snprintf(cfg, sizeof daemon_cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\"},"
             " \"log\": {\"level\": \"error\", \"access_log\": false},"
             " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
             " \"clusters\": [%s],"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             "  \"audit_log\": \"%s/audit.log\"},"
             " \"rate_limits\": {\"enabled\": false},"
             " \"sidecars\": [{\"name\": \"envoy\", \"image\": \"envoyproxy/envoy:v1.30\","
             "  \"cpu\": \"50m\", \"memory\": \"64Mi\"}]}",
             redis.url, cl, keys.rsa_pub, keys.dir);
    char log[160];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = th_daemon_start(cfg, &port, log);
    ck_assert_int_gt(daemon_pid, 0);
    admin = ts_token(&keys, "ada", "\"groups\": [\"fleetgate-admins\"]");
    dev = ts_token(&keys, "dev", "\"projects\": {\"shop\": \"developer\"}");
    viewer = ts_token(&keys, "vera", "\"projects\": {\"shop\": \"viewer\"}");
    ts_wait_ready(port, 300);
}

static void teardown(void) {
    int status = th_daemon_stop(daemon_pid, SIGTERM, 5000);
    char text[8192];
    ts_log_if_failed(status, keys.dir, text, sizeof text);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    free(admin);
    free(dev);
    free(viewer);
    ck_assert_msg(status == 0, "the daemon exited with %d:\n%s", status, text);
}

static const char *const shop_body =
    "{\"name\": \"shop\", \"description\": \"the shop\", \"labels\": {\"team\": \"checkout\"},"
    " \"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": \"8\", \"memory\": \"16Gi\", \"pods\": "
    "20}},"
    " \"Reserved\": {\"limits\": {\"cpu\": \"500m\"}}}}";

static void create_shop(void) {
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin, shop_body, NULL, true, &r), 201);
    th_resp_free(&r);
}

/* Polls GET path (viewer) until pred holds on its JSON, at most ms; returns the last body (a new
 * reference, NULL when never 200). */
typedef bool (*pred_fn)(const json_t *o, const void *arg);

static json_t *poll_get(const char *path, pred_fn pred, const void *arg, int ms) {
    json_t *last = NULL;
    for (int waited = 0; waited <= ms; waited += 50) {
        th_resp_t r;
        long s = call("GET", path, viewer, NULL, NULL, false, &r);
        if (s == 200) {
            json_decref(last);
            last = body_json(&r);
        }
        th_resp_free(&r);
        if (last && pred(last, arg))
            return last;
        ts_sleep_ms(50);
    }
    return last;
}

static const char *audit_text(char *buf, size_t len) {
    char path[192];
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        buf[fread(buf, 1, len - 1, f)] = '\0';
        fclose(f);
    }
    return buf;
}

/* ---- pods ---------------------------------------------------------------------------------- */

static void create_app(const char *name, int replicas, const char *containers) {
    char *body = fg_xasprintf("{\"name\": \"%s\", \"spec\": {\"replicas\": %d, \"placement\": "
                              "{\"policy\": \"Pack\"}, \"containers\": %s}}",
                              name, replicas, containers);
    th_resp_t r;
    char path[128];
    snprintf(path, sizeof path, "/v1/projects/shop/apps");
    ck_assert_int_eq(call("POST", path, dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
}

static bool running_pods(const json_t *o, const void *arg) {
    size_t want = *(const size_t *)arg, n = 0, i;
    json_t *p;
    json_array_foreach(json_object_get(o, "items"), i, p) {
        n += strcmp(json_string_value(json_object_get(p, "phase")), "Running") == 0;
    }
    return n == want;
}

/* The first running pod of app (a new reference). */
static json_t *running_pod(const char *app) {
    char path[160];
    size_t one = 1;
    snprintf(path, sizeof path, "/v1/projects/shop/pods?app=%s", app);
    json_t *list = poll_get(path, running_pods, &one, 10000);
    ck_assert_msg(list && running_pods(list, &one), "no running pod of %s", app);
    json_t *p = json_incref(json_array_get(json_object_get(list, "items"), 0));
    json_decref(list);
    return p;
}

static const json_t *container_of(const json_t *pod, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(pod, "containers"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return c;
    }
    return NULL;
}

static long restarts_of(const json_t *pod, const char *container) {
    return (long)json_integer_value(json_object_get(container_of(pod, container), "restarts"));
}

typedef struct {
    const char *container;
    long restarts;
} restarts_t;

static bool has_restarts(const json_t *pod, const void *arg) {
    const restarts_t *want = arg;
    return restarts_of(pod, want->container) == want->restarts;
}

static const char *const two_containers =
    "[{\"name\": \"app\", \"image\": \"nginx:1.25\", \"resources\": {\"requests\": {\"cpu\": "
    "\"100m\", \"memory\": \"64Mi\"}}}, {\"name\": \"side\", \"image\": "
    "\"registry.example.net/shop/side:2\", \"resources\": {\"requests\": {\"cpu\": \"50m\", "
    "\"memory\": \"32Mi\"}}}]";

/* The pod as kubesim holds it in its cluster (a new reference). */
static json_t *ks_pod(const json_t *pod) {
    const char *cluster = json_string_value(json_object_get(pod, "cluster"));
    char path[256];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/shop/pods/%s",
             json_string_value(json_object_get(pod, "name")));
    ck_assert_int_eq(tk_call(&ks, cluster[1] - '0', "GET", path, NULL, &o), 200);
    return o;
}

static const char *ks_image(const json_t *pod, const char *container) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "name")), container) == 0)
            return json_string_value(json_object_get(c, "image"));
    }
    return NULL;
}

START_TEST(pod_restart_container_in_place) {
    create_shop();
    create_app("web", 1, two_containers);
    json_t *pod = running_pod("web");
    const char *name = json_string_value(json_object_get(pod, "name"));
    const char *ip = json_string_value(json_object_get(pod, "podIP"));
    ck_assert_ptr_nonnull(ip);
    ck_assert_int_eq(restarts_of(pod, "app"), 0);
    char path[256], get[256], etag[128], hdr[160];
    snprintf(path, sizeof path, "/v1/projects/shop/pods/%s:restart-container", name);
    snprintf(get, sizeof get, "/v1/projects/shop/pods/%s", name);
    th_resp_t r;
    for (long round = 1; round <= 2; round++) {
        ck_assert_int_eq(call("GET", get, viewer, NULL, NULL, true, &r), 200);
        ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
        th_resp_free(&r);
        snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
        ck_assert_int_eq(call("POST", path, dev, "{\"container\": \"app\"}", hdr, true, &r), 200);
        json_t *answer = body_json(&r);
        th_resp_free(&r);
        ck_assert_str_eq(json_string_value(json_object_get(answer, "name")), name);
        json_decref(answer);
        /* The kubelet restarts it: this container's count +1, the other's unchanged, the same
         * pod and IP. */
        restarts_t want = {"app", round};
        json_t *now = poll_get(get, has_restarts, &want, 5000);
        ck_assert_msg(now && has_restarts(now, &want), "app restarts not %ld", round);
        ck_assert_int_eq(restarts_of(now, "side"), 0);
        ck_assert_str_eq(json_string_value(json_object_get(now, "podIP")), ip);
        ck_assert_str_eq(json_string_value(json_object_get(now, "phase")), "Running");
        json_decref(now);
        json_t *kp = ks_pod(pod);
        const char *image = ks_image(kp, "app");
        if (round == 1) /* the same image pinned to its running digest */
            ck_assert_msg(strncmp(image, "nginx:1.25@sha256:", 18) == 0, "%s", image);
        else /* and back to the spelling as written */
            ck_assert_str_eq(image, "nginx:1.25");
        ck_assert_str_eq(ks_image(kp, "side"), "registry.example.net/shop/side:2");
        json_decref(kp);
    }
    /* The old ETag is stale now: 412, nothing written. */
    long updates =
        tk_requests(&ks, json_string_value(json_object_get(pod, "cluster"))[1] - '0', "update");
    ck_assert_int_eq(call("POST", path, dev, "{\"container\": \"app\"}", hdr, true, &r), 412);
    th_resp_free(&r);
    /* Refusals, each before anything is written. */
    ck_assert_int_eq(call("POST", path, dev, "{\"container\": \"db\"}", NULL, true, &r), 422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/container\"") && strstr(r.body, "app, side"), "%s",
                  r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", path, dev, "{\"container\": 5, \"now\": true}", NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/now\"") &&
                      strstr(r.body, "\"pointer\":\"/container\""),
                  "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", path, viewer, "{\"container\": \"app\"}", NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/pods/nope-1:restart-container", dev,
                          "{\"container\": \"app\"}", NULL, true, &r),
                     404);
    th_resp_free(&r);
    ck_assert_int_eq(
        tk_requests(&ks, json_string_value(json_object_get(pod, "cluster"))[1] - '0', "update"),
        updates);
    /* Idempotency-Key: the retry answers again and restarts nothing more. */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(call("POST", path, dev, "{\"container\": \"side\"}",
                              "Idempotency-Key: restart-side-1", true, &r),
                         200);
        th_resp_free(&r);
    }
    restarts_t side = {"side", 1};
    json_t *now = poll_get(get, has_restarts, &side, 5000);
    ck_assert_msg(now && has_restarts(now, &side), "side restarts not 1");
    ts_sleep_ms(300);
    json_decref(now);
    now = poll_get(get, has_restarts, &side, 0);
    ck_assert_int_eq(restarts_of(now, "side"), 1);
    ck_assert_int_eq(restarts_of(now, "app"), 2);
    json_decref(now);
    char text[65536];
    ck_assert_msg(strstr(audit_text(text, sizeof text), "restart container app of Pod shop/"), "%s",
                  text);
    json_decref(pod);
}
END_TEST

typedef struct {
    const char *gone;
} replaced_t;

static bool replaced(const json_t *o, const void *arg) {
    const replaced_t *w = arg;
    size_t i, n = 0;
    json_t *p;
    json_array_foreach(json_object_get(o, "items"), i, p) {
        if (strcmp(json_string_value(json_object_get(p, "name")), w->gone) == 0)
            return false;
        n++;
    }
    return n == 1;
}

START_TEST(pod_delete_is_replaced_by_its_app) {
    create_shop();
    create_app("web", 1, two_containers);
    json_t *pod = running_pod("web");
    const char *name = json_string_value(json_object_get(pod, "name"));
    char path[256], hdr[64];
    th_resp_t r;
    snprintf(path, sizeof path, "/v1/projects/shop/pods/%s?gracePeriodSeconds=abc", name);
    ck_assert_int_eq(call("DELETE", path, dev, NULL, NULL, true, &r), 422);
    ck_assert_msg(strstr(r.body, "gracePeriodSeconds"), "%s", r.body);
    th_resp_free(&r);
    snprintf(path, sizeof path, "/v1/projects/shop/pods/%s?gracePeriodSeconds=0", name);
    ck_assert_int_eq(call("DELETE", path, viewer, NULL, NULL, true, &r), 403);
    th_resp_free(&r);
    snprintf(hdr, sizeof hdr, "If-Match: \"1\"");
    ck_assert_int_eq(call("DELETE", path, dev, NULL, hdr, true, &r), 412);
    th_resp_free(&r);
    long deletes = tk_requests(&ks, 0, "delete") + tk_requests(&ks, 1, "delete") +
                   tk_requests(&ks, 2, "delete");
    ck_assert_int_eq(call("DELETE", path, dev, NULL, NULL, true, &r), 202);
    json_t *a = body_json(&r);
    th_resp_free(&r);
    ck_assert(json_is_true(json_object_get(a, "replaced")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "owner"), "kind")),
                     "App");
    ck_assert_int_eq(json_integer_value(json_object_get(a, "gracePeriodSeconds")), 0);
    ck_assert_msg(strstr(json_string_value(json_object_get(a, "message")), "replacement"), "%s",
                  json_string_value(json_object_get(a, "message")));
    json_decref(a);
    ck_assert_int_eq(tk_requests(&ks, 0, "delete") + tk_requests(&ks, 1, "delete") +
                         tk_requests(&ks, 2, "delete"),
                     deletes + 1);
    /* Read your writes: the pod is gone from a GET right after. */
    snprintf(path, sizeof path, "/v1/projects/shop/pods/%s", name);
    ck_assert_int_eq(call("GET", path, viewer, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
    /* The app's controller replaces it. */
    replaced_t w = {name};
    json_t *list = poll_get("/v1/projects/shop/pods?app=web", replaced, &w, 10000);
    ck_assert_msg(list && replaced(list, &w), "the pod was not replaced");
    json_decref(list);
    char text[65536];
    ck_assert_msg(strstr(audit_text(text, sizeof text), "delete Pod shop/"), "%s", text);
    json_decref(pod);
}
END_TEST

/* ---- job sets ------------------------------------------------------------------------------ */

static const char *ann(const json_t *o, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "annotations"), key));
}

/* A job set over the two env=prod clusters (c0, c2). */
static char *jobset_body(const char *name, int completions, int parallelism, const char *command,
                         const char *more) {
    return fg_xasprintf(
        "{\"name\": \"%s\", \"labels\": {\"team\": \"search\"}, \"spec\": {\"completions\": %d, "
        "\"parallelism\": %d, \"backoffLimit\": 0%s, \"placement\": {\"clusterSelector\": "
        "{\"matchLabels\": {\"env\": \"prod\"}}}, \"containers\": [{\"name\": \"work\", "
        "\"image\": \"registry.example.net/shop/reindex:2\", \"command\": %s, \"resources\": "
        "{\"requests\": {\"cpu\": \"100m\", \"memory\": \"64Mi\"}}}]}}",
        name, completions, parallelism, more ? more : "", command);
}

static const char *phase_of(const json_t *js) {
    return json_string_value(json_object_get(json_object_get(js, "status"), "phase"));
}

static bool has_phase(const json_t *js, const void *arg) {
    return strcmp(phase_of(js), (const char *)arg) == 0;
}

static long pods_count(const json_t *js, const char *what) {
    return (long)json_integer_value(
        json_object_get(json_object_get(json_object_get(js, "status"), "pods"), what));
}

/* The Job as kubesim holds it in cluster i (a new reference, NULL when absent). */
static json_t *ks_job(int i, const char *name) {
    char path[192];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/shop/jobs/%s", name);
    if (tk_call(&ks, i, "GET", path, NULL, &o) == 200)
        return o;
    json_decref(o);
    return NULL;
}

static long job_spec(const json_t *job, const char *key) {
    return (long)json_integer_value(json_object_get(json_object_get(job, "spec"), key));
}

/* The pods usage of tier OnDemand in shop as the quota sees it: a create of a job set needing
 * 21 pods (the quota is 20) is refused with "pods would be <usage + 21>". */
static long quota_pods_used(void) {
    char *body = jobset_body("probe", 21, 21, "[\"true\"]", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r), 409);
    const char *at = strstr(r.body, "pods would be ");
    ck_assert_msg(at != NULL, "%s", r.body);
    long n = strtol(at + 14, NULL, 10);
    th_resp_free(&r);
    free(body);
    return n - 21;
}

START_TEST(jobset_runs_to_succeeded_over_two_clusters) {
    create_shop();
    char *body = jobset_body("reindex", 12, 4, "[\"true\"]", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body,
                          "X-Request-Id: create-reindex-1", true, &r),
                     201);
    char loc[128];
    ck_assert_str_eq(th_header(&r, "Location", loc, sizeof loc),
                     "/v1/projects/shop/jobsets/reindex");
    json_t *js = body_json(&r);
    th_resp_free(&r);
    json_t *spec = json_object_get(js, "spec");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "completions")), 12);
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "parallelism")), 4);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(js, "status"), "clusters")),
                     2);
    ck_assert_int_eq(json_array_size(json_object_get(js, "outcomes")), 2);
    ck_assert_ptr_null(json_object_get(js, "labels")
                           ? json_object_get(json_object_get(js, "labels"), "fleetgate.io/jobset")
                           : NULL);
    json_decref(js);
    free(body);
    /* One Job in each prod cluster with half the work; none in c1. */
    static const int prod[] = {0, 2};
    for (size_t i = 0; i < 2; i++) {
        json_t *job = ks_job(prod[i], "reindex");
        ck_assert_ptr_nonnull(job);
        ck_assert_int_eq(job_spec(job, "completions"), 6);
        ck_assert_int_eq(job_spec(job, "parallelism"), 2);
        ck_assert_str_eq(ann(job, "fleetgate.io/request-id"), "create-reindex-1");
        json_decref(job);
    }
    ck_assert_ptr_null(ks_job(1, "reindex"));
    /* While it runs its pods are charged to the tier: 2 for each cluster whose share still runs
     * (4 at once). A loaded machine may have finished one share, or both, already. */
    long used = quota_pods_used();
    json_t *now = poll_get("/v1/projects/shop/jobsets/reindex", has_phase, "Succeeded", 0);
    if (!has_phase(now, "Succeeded"))
        ck_assert_msg(used == 4 || used == 2, "pods charged while running: %ld", used);
    json_decref(now);
    /* Runs to Succeeded: 12 pods succeeded, 6 in each cluster, each cluster Succeeded. */
    json_t *done = poll_get("/v1/projects/shop/jobsets/reindex", has_phase, "Succeeded", 30000);
    ck_assert_msg(done && has_phase(done, "Succeeded"), "not Succeeded: %s",
                  done ? phase_of(done) : "(none)");
    ck_assert_int_eq(pods_count(done, "succeeded"), 12);
    ck_assert_int_eq(pods_count(done, "active"), 0);
    size_t i;
    json_t *cl;
    json_array_foreach(json_object_get(json_object_get(done, "status"), "clusters"), i, cl) {
        ck_assert_str_eq(json_string_value(json_object_get(cl, "phase")), "Succeeded");
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(cl, "pods"), "succeeded")), 6);
    }
    ck_assert_ptr_nonnull(
        json_string_value(json_object_get(json_object_get(done, "status"), "completedAt")));
    json_decref(done);
    /* Released when finished: usage 0, exactly. */
    ck_assert_int_eq(quota_pods_used(), 0);
    char text[65536];
    ck_assert_msg(strstr(audit_text(text, sizeof text), "create Job shop/reindex in 2 clusters"),
                  "%s", text);
}
END_TEST

START_TEST(jobset_with_failing_pods_ends_failed_with_reason) {
    create_shop();
    char *body = jobset_body("broken", 4, 2, "[\"sh\", \"-c\", \"echo oops; exit 3\"]", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    json_t *js = poll_get("/v1/projects/shop/jobsets/broken", has_phase, "Failed", 20000);
    ck_assert_msg(js && has_phase(js, "Failed"), "not Failed");
    json_t *conds = json_object_get(json_object_get(js, "status"), "conditions");
    ck_assert_int_ge(json_array_size(conds), 1);
    json_t *c0 = json_array_get(conds, 0);
    ck_assert_str_eq(json_string_value(json_object_get(c0, "type")), "Failed");
    ck_assert_str_eq(json_string_value(json_object_get(c0, "reason")), "BackoffLimitExceeded");
    ck_assert_msg(strncmp(json_string_value(json_object_get(c0, "message")), "cluster c", 9) == 0,
                  "%s", json_string_value(json_object_get(c0, "message")));
    ck_assert_int_ge(pods_count(js, "failed"), 1);
    json_decref(js);
    /* Checked by the contract too, and the quota is free again. */
    ck_assert_int_eq(call("GET", "/v1/projects/shop/jobsets/broken", viewer, NULL, NULL, true, &r),
                     200);
    th_resp_free(&r);
    /* the job set is Failed once one cluster's part failed; the other's pods run until its own
     * part fails too, and are charged until then */
    long used = quota_pods_used();
    for (int waited = 0; used != 0 && waited < 15000; waited += 250) {
        ts_sleep_ms(250);
        used = quota_pods_used();
    }
    ck_assert_int_eq(used, 0);
}
END_TEST

/* The pods kubesim holds in cluster i for Job name. */
static long ks_job_pods(int i, const char *name) {
    char path[256];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/shop/pods?labelSelector=job-name%%3D%s", name);
    ck_assert_int_eq(tk_call(&ks, i, "GET", path, NULL, &o), 200);
    long n = (long)json_array_size(json_object_get(o, "items"));
    json_decref(o);
    return n;
}

START_TEST(jobset_suspend_stops_and_resume_restarts_pods) {
    create_shop();
    /* 20 completions a cluster, one pod at a time, 400 ms each: it cannot finish in one
     * cluster before the suspend, even on a loaded machine under ASan. */
    char *body = jobset_body("batch", 40, 2, "[\"true\"]", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r), 201);
    char etag[128], hdr[160];
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    free(body);
    /* The version moves with the Jobs' status (pods start and finish), as a Kubernetes
     * object's does: the create's is stale by now. */
    snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets/batch:suspend", dev, NULL, NULL, true, &r), 200);
    json_t *js = body_json(&r);
    th_resp_free(&r);
    ck_assert(json_is_true(json_object_get(json_object_get(js, "spec"), "suspend")));
    json_decref(js);
    /* The create's If-Match is stale now. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets/batch:resume", dev, NULL, hdr, true, &r), 412);
    th_resp_free(&r);
    js = poll_get("/v1/projects/shop/jobsets/batch", has_phase, "Suspended", 5000);
    ck_assert_msg(js && has_phase(js, "Suspended"), "not Suspended");
    long succeeded = pods_count(js, "succeeded");
    json_decref(js);
    /* No pod is made while suspended: the pods stay as they are. */
    ts_sleep_ms(300);
    long before = ks_job_pods(0, "batch") + ks_job_pods(2, "batch");
    ts_sleep_ms(1200);
    ck_assert_int_eq(ks_job_pods(0, "batch") + ks_job_pods(2, "batch"), before);
    js = poll_get("/v1/projects/shop/jobsets/batch", has_phase, "Suspended", 0);
    ck_assert_int_eq(pods_count(js, "succeeded"), succeeded);
    ck_assert_int_eq(pods_count(js, "active"), 0);
    json_decref(js);
    ck_assert_int_lt(succeeded, 40);
    ck_assert_int_eq(quota_pods_used(), 0); /* a suspended job set holds no quota */
    /* Resume: pods are made again until it succeeds. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets/batch:resume", dev, NULL, NULL, true, &r), 200);
    th_resp_free(&r);
    js = poll_get("/v1/projects/shop/jobsets/batch", has_phase, "Succeeded", 60000);
    ck_assert_msg(js && has_phase(js, "Succeeded"), "not Succeeded after resume");
    ck_assert_int_eq(pods_count(js, "succeeded"), 40);
    json_decref(js);
    ck_assert_int_eq(quota_pods_used(), 0);
}
END_TEST

static long creates(void) {
    return tk_requests(&ks, 0, "create") + tk_requests(&ks, 1, "create") +
           tk_requests(&ks, 2, "create");
}

static json_t *ks_cron(int i, const char *name);

/* Managed sidecars from the platform's catalogue, as apps take them: injected after the job's
 * containers in every cluster's Job (and a cron job's template); unknown or repeated names are
 * 422 with their pointers, and nothing is created. */
START_TEST(jobset_and_cronjob_take_catalogue_sidecars) {
    create_shop();
    th_resp_t r;
    long before = creates();
    char *bad = jobset_body("side", 2, 2, "[\"true\"]",
                            ", \"sidecars\": [\"istio\", \"envoy\", \"envoy\", \"work\"]");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, bad, NULL, true, &r), 422);
    static const char *const pointers[] = {"/spec/sidecars/0", "/spec/sidecars/2",
                                           "/spec/sidecars/3"};
    for (size_t i = 0; i < 3; i++) {
        char want[64];
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointers[i]);
        ck_assert_msg(strstr(r.body, want), "%s missing: %s", pointers[i], r.body);
    }
    ck_assert_msg(strstr(r.body, "no managed sidecar istio"), "%s", r.body);
    th_resp_free(&r);
    free(bad);
    ck_assert_int_eq(creates(), before);
    char *body = jobset_body("side", 2, 2, "[\"true\"]", ", \"sidecars\": [\"envoy\"]");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    for (int i = 0; i < 3; i += 2) {
        json_t *job = ks_job(i, "side");
        ck_assert_ptr_nonnull(job);
        const json_t *cs = json_object_get(
            json_object_get(json_object_get(json_object_get(job, "spec"), "template"), "spec"),
            "containers");
        ck_assert_int_eq(json_array_size(cs), 2);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cs, 0), "name")), "work");
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cs, 1), "name")),
                         "envoy");
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cs, 1), "image")),
                         "envoyproxy/envoy:v1.30");
        json_decref(job);
    }
    /* A cron job's template: the pointer is the template's. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs", dev,
             "{\"name\": \"c\", \"spec\": {\"schedule\": \"@hourly\", \"jobTemplate\": "
             "{\"sidecars\": [\"istio\"], \"containers\": [{\"name\": \"w\", \"image\": "
             "\"x:1\"}]}}}",
             NULL, true, &r),
        422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/spec/jobTemplate/sidecars/0\""), "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs", dev,
             "{\"name\": \"c\", \"spec\": {\"schedule\": \"@hourly\", \"jobTemplate\": "
             "{\"sidecars\": [\"envoy\"], \"placement\": {\"clusterSelector\": "
             "{\"matchLabels\": {\"env\": \"dev\"}}}, \"containers\": [{\"name\": \"w\", "
             "\"image\": \"x:1\"}]}}}",
             NULL, true, &r),
        201);
    th_resp_free(&r);
    json_t *cj = ks_cron(1, "c");
    ck_assert_ptr_nonnull(cj);
    const json_t *cs = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(cj, "spec"),
                                                                        "jobTemplate"),
                                                        "spec"),
                                        "template"),
                        "spec"),
        "containers");
    ck_assert_int_eq(json_array_size(cs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cs, 1), "name")), "envoy");
    json_decref(cj);
}
END_TEST

START_TEST(jobset_refusals_idempotency_and_delete) {
    create_shop();
    th_resp_t r;
    long before = creates();
    const char *bad =
        "{\"name\": \"Bad_Name\", \"spec\": {\"completions\": 0, \"parallelism\": -1, "
        "\"restartPolicy\": \"Always\", \"tier\": \"Gold\", \"containers\": [], \"colour\": 1}}";
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, bad, NULL, true, &r), 422);
    static const char *const pointers[] = {
        "/name",      "/spec/completions", "/spec/parallelism", "/spec/restartPolicy",
        "/spec/tier", "/spec/containers",  "/spec/colour"};
    for (size_t i = 0; i < sizeof pointers / sizeof pointers[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointers[i]);
        ck_assert_msg(strstr(r.body, want), "%s missing: %s", pointers[i], r.body);
    }
    th_resp_free(&r);
    char *body = jobset_body("once", 2, 2, "[\"sleep\", \"1\"]", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", viewer, body, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(creates(), before);
    /* Dry run: the placement and each cluster's share, nothing written, no quota held. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets?dryRun=true", dev, body, NULL, true, &r), 200);
    json_t *dr = body_json(&r);
    th_resp_free(&r);
    ck_assert(json_is_true(json_object_get(dr, "dryRun")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(dr, "jobSet"), "name")),
                     "once");
    ck_assert_ptr_nonnull(json_object_get(json_object_get(dr, "placement"), "clusters"));
    long sum = 0;
    size_t si;
    json_t *share;
    json_array_foreach(json_object_get(dr, "shares"), si, share) {
        sum += (long)json_integer_value(json_object_get(share, "completions"));
    }
    ck_assert_int_gt(json_array_size(json_object_get(dr, "shares")), 0);
    ck_assert_int_eq(sum, 2);
    json_decref(dr);
    ck_assert_int_eq(creates(), before);
    ck_assert_int_eq(quota_pods_used(), 0);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets?dryRun=true", viewer, body, NULL, true, &r), 403);
    th_resp_free(&r);
    /* Idempotency-Key: the retry answers the same and creates nothing more. */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body,
                              "Idempotency-Key: once-1", true, &r),
                         201);
        th_resp_free(&r);
    }
    ck_assert_int_eq(creates(), before + 2);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r), 409);
    th_resp_free(&r);
    /* Quota: more pods at once than the tier holds. */
    char *big = jobset_body("big", 30, 30, "[\"true\"]", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, big, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "quota"), "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets?dryRun=true", dev, big, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "quota"), "%s", r.body);
    th_resp_free(&r);
    free(big);
    ck_assert_int_eq(creates(), before + 2);
    /* Delete: stale If-Match 412, viewer 403, then 204 and gone from a GET right after. */
    ck_assert_int_eq(
        call("DELETE", "/v1/projects/shop/jobsets/once", dev, NULL, "If-Match: \"nope\"", true, &r),
        412);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/jobsets/once", viewer, NULL, NULL, true, &r),
                     403);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/jobsets/once", dev, NULL, NULL, true, &r),
                     204);
    th_resp_free(&r);
    ck_assert_int_eq(call("GET", "/v1/projects/shop/jobsets/once", viewer, NULL, NULL, true, &r),
                     404);
    th_resp_free(&r);
    ck_assert_ptr_null(ks_job(0, "once"));
    ck_assert_ptr_null(ks_job(2, "once"));
    /* Its pods go with it (background propagation). */
    for (int i = 0; i < 100 && ks_job_pods(0, "once") + ks_job_pods(2, "once") > 0; i++)
        ts_sleep_ms(50);
    ck_assert_int_eq(ks_job_pods(0, "once") + ks_job_pods(2, "once"), 0);
    ck_assert_int_eq(quota_pods_used(), 0);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/jobsets/once", dev, NULL, NULL, true, &r),
                     404);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets/once:suspend", dev, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* ---- cron jobs ----------------------------------------------------------------------------- */

static char *cron_body(const char *name, const char *schedule, const char *policy) {
    return fg_xasprintf(
        "{\"name\": \"%s\", \"labels\": {\"team\": \"search\"}, \"spec\": {\"schedule\": \"%s\", "
        "\"concurrencyPolicy\": \"%s\", \"jobTemplate\": {\"completions\": 2, \"parallelism\": 2, "
        "\"placement\": {\"clusterSelector\": {\"matchLabels\": {\"env\": \"prod\"}}}, "
        "\"containers\": [{\"name\": \"report\", \"image\": "
        "\"registry.example.net/shop/report:1\", "
        "\"command\": [\"true\"], \"resources\": {\"requests\": {\"cpu\": \"100m\", \"memory\": "
        "\"64Mi\"}}}]}}}",
        name, schedule, policy);
}

/* The CronJob kubesim holds in cluster i (a new reference, NULL when absent). */
static json_t *ks_cron(int i, const char *name) {
    char path[192];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/shop/cronjobs/%s", name);
    if (tk_call(&ks, i, "GET", path, NULL, &o) == 200)
        return o;
    json_decref(o);
    return NULL;
}

static const char *ks_schedule(int i, const char *name, char *buf, size_t len) {
    json_t *cj = ks_cron(i, name);
    snprintf(buf, len, "%s",
             cj ? json_string_value(json_object_get(json_object_get(cj, "spec"), "schedule"))
                : "(none)");
    json_decref(cj);
    return buf;
}

/* Sets kubesim's clocks (but skip's; -1: none) seconds ahead of the wall; returns the minute
 * (Unix time / 60) they now show, whose run a cron job "* * * * *" starts next (kubesim names
 * it {cron}-{minute}). */
static long long move_clocks_but(int seconds, int skip) {
    /* The three clusters are moved one after the other and their controllers tick each on its
     * own: a move that lands just before a minute's end could have one cluster start the run of
     * that minute and another the next one's (a run in one cluster only). Land clear of it. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long at_ms = ((long long)now.tv_sec + seconds) % 60 * 1000 + now.tv_nsec / 1000000;
    if (at_ms > 57000)
        ts_sleep_ms((int)(61000 - at_ms));
    char body[64];
    snprintf(body, sizeof body, "{\"offsetSeconds\": %d}", seconds);
    for (int i = 0; i < 3; i++)
        if (i != skip)
            ck_assert_int_eq(tk_call(&ks, i, "POST", "/_kubesim/clock", body, NULL), 200);
    return ((long long)time(NULL) + seconds) / 60;
}

static long long move_clocks(int seconds) {
    return move_clocks_but(seconds, -1);
}

/* The job sets cron job cron started, as the list shows them. */
static size_t runs_of(const json_t *list, const char *cron) {
    size_t n = 0, i;
    json_t *js;
    json_array_foreach(json_object_get(list, "items"), i, js) {
        const json_t *owner = json_object_get(js, "owner");
        n += json_is_object(owner) &&
             strcmp(json_string_value(json_object_get(owner, "name")), cron) == 0;
    }
    return n;
}

/* At least *arg runs of nightly, the first one in both of its clusters. */
static bool has_runs(const json_t *list, const void *arg) {
    const json_t *first = json_array_get(json_object_get(list, "items"), 0);
    return runs_of(list, "nightly") >= *(const size_t *)arg &&
           json_array_size(json_object_get(json_object_get(first, "status"), "clusters")) == 2;
}

static bool all_runs_succeeded(const json_t *list, const void *arg) {
    (void)arg;
    size_t i;
    json_t *js;
    json_array_foreach(json_object_get(list, "items"), i, js) {
        if (!has_phase(js, "Succeeded"))
            return false;
    }
    return true;
}

START_TEST(cronjob_runs_suspends_triggers_and_changes) {
    create_shop();
    th_resp_t r;
    char *body = cron_body("nightly", "* * * * *", "Allow"), buf[64], etag[128], hdr[160];
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, body, NULL, true, &r), 201);
    json_t *cj = body_json(&r);
    th_resp_free(&r);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cj, "spec"), "schedule")),
                     "* * * * *");
    ck_assert_int_eq(json_array_size(json_object_get(cj, "outcomes")), 2);
    json_decref(cj);
    free(body);
    /* One CronJob in each prod cluster, with half the template's work. */
    for (int i = 0; i < 3; i += 2) {
        json_t *k = ks_cron(i, "nightly");
        ck_assert_ptr_nonnull(k);
        json_t *jt =
            json_object_get(json_object_get(json_object_get(k, "spec"), "jobTemplate"), "spec");
        ck_assert_int_eq(json_integer_value(json_object_get(jt, "completions")), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(jt, "parallelism")), 1);
        json_decref(k);
    }
    ck_assert_ptr_null(ks_cron(1, "nightly"));
    /* kubesim's clock passes a minute: the run starts in both clusters, as one job set. */
    move_clocks(61);
    size_t one = 1;
    json_t *list = poll_get("/v1/projects/shop/jobsets", has_runs, &one, 10000);
    ck_assert_msg(list && runs_of(list, "nightly") >= 1, "no scheduled run");
    json_t *run = json_array_get(json_object_get(list, "items"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(run, "status"), "clusters")),
                     2);
    json_decref(list);
    list = poll_get("/v1/projects/shop/jobsets", all_runs_succeeded, NULL, 10000);
    ck_assert_msg(list && all_runs_succeeded(list, NULL), "the run did not succeed");
    size_t scheduled = runs_of(list, "nightly");
    json_decref(list);
    /* Suspended, a passing minute starts nothing. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/nightly:suspend", dev, NULL, NULL, true, &r), 200);
    cj = body_json(&r);
    th_resp_free(&r);
    ck_assert(json_is_true(json_object_get(json_object_get(cj, "status"), "suspended")));
    json_decref(cj);
    move_clocks(61 + 120);
    ts_sleep_ms(1500);
    list = poll_get("/v1/projects/shop/jobsets", all_runs_succeeded, NULL, 0);
    ck_assert_int_eq(runs_of(list, "nightly"), scheduled);
    json_decref(list);
    /* Trigger runs now, even suspended; twice in the same second is two runs. */
    char names[2][96];
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(
            call("POST", "/v1/projects/shop/cronjobs/nightly:trigger", dev, NULL, NULL, true, &r),
            201);
        json_t *js = body_json(&r);
        char loc[160];
        snprintf(names[t], sizeof names[t], "%s", json_string_value(json_object_get(js, "name")));
        snprintf(buf, sizeof buf, "/v1/projects/shop/jobsets/%s", names[t]);
        ck_assert_str_eq(th_header(&r, "Location", loc, sizeof loc), buf);
        th_resp_free(&r);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(js, "owner"), "kind")),
                         "CronJob");
        ck_assert_int_eq(strncmp(names[t], "nightly-", 8), 0);
        json_decref(js);
    }
    ck_assert_str_ne(names[0], names[1]);
    snprintf(buf, sizeof buf, "/v1/projects/shop/jobsets/%s", names[1]);
    json_t *done = poll_get(buf, has_phase, "Succeeded", 10000);
    ck_assert_msg(done && has_phase(done, "Succeeded"), "the triggered run did not succeed");
    ck_assert_int_eq(pods_count(done, "succeeded"), 2);
    json_decref(done);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/nightly:resume", dev, NULL, NULL, true, &r), 200);
    th_resp_free(&r);
    /* Replace with If-Match: the schedule changes in every cluster; the old ETag is then stale. */
    ck_assert_int_eq(
        call("GET", "/v1/projects/shop/cronjobs/nightly", viewer, NULL, NULL, true, &r), 200);
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
    body = cron_body("nightly", "*/5 * * * *", "Forbid");
    ck_assert_int_eq(call("PUT", "/v1/projects/shop/cronjobs/nightly", dev, body, hdr, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_str_eq(ks_schedule(0, "nightly", buf, sizeof buf), "*/5 * * * *");
    ck_assert_str_eq(ks_schedule(2, "nightly", buf, sizeof buf), "*/5 * * * *");
    ck_assert_int_eq(call("PUT", "/v1/projects/shop/cronjobs/nightly", dev, body, hdr, true, &r),
                     412);
    th_resp_free(&r);
    free(body);
    /* Merge patch: only the schedule; a bad one is 422 naming it. */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/cronjobs/nightly", dev,
                          "{\"spec\": {\"schedule\": \"0 * * * *\"}}", NULL, true, &r),
                     200);
    cj = body_json(&r);
    th_resp_free(&r);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(cj, "spec"), "concurrencyPolicy")),
        "Forbid");
    json_decref(cj);
    ck_assert_str_eq(ks_schedule(0, "nightly", buf, sizeof buf), "0 * * * *");
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/cronjobs/nightly", dev,
                          "{\"spec\": {\"schedule\": \"61 * * * *\"}}", NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/spec/schedule\""), "%s", r.body);
    th_resp_free(&r);
    ck_assert_str_eq(ks_schedule(0, "nightly", buf, sizeof buf), "0 * * * *");
    /* Forbid: a trigger while a run is in progress (here a run of a suspended template) is
     * refused. A run the schedule started while it was every minute (a minute may pass since
     * the resume) finishes first: only the triggered one is then in progress. */
    list = poll_get("/v1/projects/shop/jobsets", all_runs_succeeded, NULL, 15000);
    ck_assert_msg(list && all_runs_succeeded(list, NULL), "a scheduled run did not finish");
    json_decref(list);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/cronjobs/nightly", dev,
                          "{\"spec\": {\"jobTemplate\": {\"suspend\": true}}}", NULL, true, &r),
                     200);
    th_resp_free(&r);
    long trig =
        call("POST", "/v1/projects/shop/cronjobs/nightly:trigger", dev, NULL, NULL, true, &r);
    ck_assert_msg(trig == 201, "trigger: %ld %s", trig, r.body);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/nightly:trigger", dev, NULL, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "Forbid"), "%s", r.body);
    th_resp_free(&r);
    char text[65536];
    ck_assert_msg(strstr(audit_text(text, sizeof text), "trigger CronJob shop/nightly"), "%s",
                  text);
    /* Delete: gone everywhere, 404 right after. */
    ck_assert_int_eq(
        call("DELETE", "/v1/projects/shop/cronjobs/nightly", dev, NULL, NULL, true, &r), 204);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("GET", "/v1/projects/shop/cronjobs/nightly", viewer, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
    ck_assert_ptr_null(ks_cron(0, "nightly"));
    ck_assert_ptr_null(ks_cron(2, "nightly"));
}
END_TEST

START_TEST(cronjob_refusals) {
    create_shop();
    th_resp_t r;
    long before = creates();
    const char *bad = "{\"name\": \"a-name-that-is-far-too-long-for-a-cron-job-to-carry-x\", "
                      "\"spec\": {\"schedule\": \"* * *\", \"concurrencyPolicy\": \"Sometimes\", "
                      "\"timeZone\": \"Not A Zone\", \"jobTemplate\": {\"containers\": []}}}";
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, bad, NULL, true, &r), 422);
    static const char *const pointers[] = {"/name", "/spec/schedule", "/spec/concurrencyPolicy",
                                           "/spec/timeZone", "/spec/jobTemplate/containers"};
    for (size_t i = 0; i < sizeof pointers / sizeof pointers[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\"pointer\":\"%s\"", pointers[i]);
        ck_assert_msg(strstr(r.body, want), "%s missing: %s", pointers[i], r.body);
    }
    th_resp_free(&r);
    char *body = cron_body("weekly", "@weekly", "Forbid");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", viewer, body, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(creates(), before);
    for (int i = 0; i < 2; i++) { /* Idempotency-Key: created once */
        ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, body,
                              "Idempotency-Key: weekly-1", true, &r),
                         201);
        th_resp_free(&r);
    }
    ck_assert_int_eq(creates(), before + 2);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, body, NULL, true, &r), 409);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/weekly:trigger", viewer, NULL, NULL, true, &r),
        403);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs/weekly:trigger", dev, NULL,
                          "If-Match: \"stale\"", true, &r),
                     412);
    th_resp_free(&r);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/none:trigger", dev, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/cronjobs/weekly", dev,
                          "{\"name\": \"other\"}", NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/name\""), "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(creates(), before + 2);
    free(body);
}
END_TEST

/* ---- scalers: a manual scale within their bounds --------------------------------------------- */

static bool scaler_max(const json_t *sc, const void *arg) {
    return json_integer_value(json_object_get(json_object_get(sc, "spec"), "maxReplicas")) ==
           *(const long *)arg;
}

START_TEST(scale_outside_a_scalers_bounds_is_refused) {
    create_shop();
    th_resp_t r;
    char *body = fg_xasprintf("{\"name\": \"web\", \"spec\": {\"replicas\": 4, \"placement\": "
                              "{\"clusterSelector\": {\"matchLabels\": {\"env\": \"prod\"}}}, "
                              "\"containers\": %s}}",
                              two_containers);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    /* An HPA in each cluster of the app, made as kubectl would (1..5 each: 2..10 in all). */
    const char *hpa = "{\"apiVersion\": \"autoscaling/v2\", \"kind\": \"HorizontalPodAutoscaler\", "
                      "\"metadata\": {\"name\": \"web\"}, \"spec\": {\"scaleTargetRef\": "
                      "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"name\": \"web\"}, "
                      "\"minReplicas\": 1, \"maxReplicas\": 5, \"metrics\": [{\"type\": "
                      "\"Resource\", \"resource\": {\"name\": \"cpu\", \"target\": {\"type\": "
                      "\"Utilization\", \"averageUtilization\": 70}}}]}}";
    for (int i = 0; i < 3; i += 2)
        ck_assert_int_eq(tk_call(&ks, i, "POST",
                                 "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers",
                                 hpa, NULL),
                         201);
    long ten = 10;
    json_t *sc = poll_get("/v1/projects/shop/scalers/web", scaler_max, &ten, 5000);
    ck_assert_msg(sc && scaler_max(sc, &ten), "the scaler is not in the cache");
    json_decref(sc);
    long patches = tk_requests(&ks, 0, "patch") + tk_requests(&ks, 2, "patch");
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps/web:scale", dev, "{\"replicas\": 12}", NULL, true, &r),
        409);
    ck_assert_msg(strstr(r.body, "scaler web between 2 and 10 replicas") &&
                      strstr(r.body, "12 is outside"),
                  "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:scale?dryRun=true", dev,
                          "{\"replicas\": 1}", NULL, true, &r),
                     409);
    th_resp_free(&r);
    ck_assert_int_eq(tk_requests(&ks, 0, "patch") + tk_requests(&ks, 2, "patch"), patches);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps/web:scale", dev, "{\"replicas\": 6}", NULL, true, &r),
        200);
    json_t *a = body_json(&r);
    th_resp_free(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(a, "status"), "replicas"), "desired")),
                     6);
    json_decref(a);
}
END_TEST

static long desired_of(const json_t *a, const void *arg) {
    (void)arg;
    return (long)json_integer_value(
        json_object_get(json_object_get(json_object_get(a, "status"), "replicas"), "desired"));
}

static bool app_desired(const json_t *a, const void *arg) {
    return desired_of(a, NULL) == *(const long *)arg;
}

/* What a metrics pipeline reports: the app's CPU at pct of its requests, in cluster i. */
static void cpu_load(int i, int pct) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"status\": {\"currentMetrics\": [{\"type\": \"Resource\", \"resource\": {\"name\": "
             "\"cpu\", \"current\": {\"averageUtilization\": %d}}}]}}",
             pct);
    ck_assert_int_eq(
        tk_call(&ks, i, "PATCH",
                "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web/status", body,
                NULL),
        200);
}

static json_t *ks_hpa(int i) {
    json_t *o = NULL;
    if (tk_call(&ks, i, "GET", "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web",
                NULL, &o) == 200)
        return o;
    json_decref(o);
    return NULL;
}

START_TEST(scaler_keeps_the_app_within_bounds_and_follows_it) {
    create_shop();
    th_resp_t r;
    char *body = fg_xasprintf("{\"name\": \"web\", \"spec\": {\"replicas\": 2, \"placement\": "
                              "{\"clusterSelector\": {\"matchLabels\": {\"env\": \"prod\"}}}, "
                              "\"containers\": %s}}",
                              two_containers);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    const char *scaler =
        "{\"name\": \"web\", \"labels\": {\"team\": \"shop\"}, \"spec\": {\"app\": "
        "\"web\", \"minReplicas\": 2, \"maxReplicas\": 6, \"targets\": "
        "{\"cpuUtilization\": 50}, \"cooldown\": {\"scaleUpSeconds\": 0, "
        "\"scaleDownSeconds\": 0}}}";
    ck_assert_int_eq(call("POST", "/v1/projects/shop/scalers", viewer, scaler, NULL, true, &r),
                     403);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/scalers", dev, scaler, NULL, true, &r), 201);
    json_t *sc = body_json(&r);
    th_resp_free(&r);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(sc, "spec"), "minReplicas")), 2);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(sc, "spec"), "maxReplicas")), 6);
    json_decref(sc);
    /* One HPA in each of the app's clusters with half the bounds; none in c1. */
    for (int i = 0; i < 3; i += 2) {
        json_t *h = ks_hpa(i);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(h, "spec"), "minReplicas")), 1);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(h, "spec"), "maxReplicas")), 3);
        json_decref(h);
    }
    ck_assert_ptr_null(ks_hpa(1));
    /* Load goes up: the app grows to the scaler's max over all clusters, and no further. */
    cpu_load(0, 400);
    cpu_load(2, 400);
    long want = 6;
    json_t *a = poll_get("/v1/projects/shop/apps/web", app_desired, &want, 10000);
    ck_assert_msg(a && app_desired(a, &want), "app not at 6: %ld", a ? desired_of(a, NULL) : -1);
    json_decref(a);
    /* Load falls: down to the scaler's min. */
    cpu_load(0, 5);
    cpu_load(2, 5);
    want = 2;
    a = poll_get("/v1/projects/shop/apps/web", app_desired, &want, 10000);
    ck_assert_msg(a && app_desired(a, &want), "app not at 2: %ld", a ? desired_of(a, NULL) : -1);
    json_decref(a);
    /* A manual scale past max is refused. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps/web:scale", dev, "{\"replicas\": 7}", NULL, true, &r),
        409);
    th_resp_free(&r);
    /* Merge patch with If-Match: a new max, divided again. */
    char etag[128], hdr[160];
    ck_assert_int_eq(call("GET", "/v1/projects/shop/scalers/web", viewer, NULL, NULL, true, &r),
                     200);
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/scalers/web", dev,
                          "{\"spec\": {\"maxReplicas\": 8}}", hdr, true, &r),
                     200);
    th_resp_free(&r);
    json_t *h = ks_hpa(2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(h, "spec"), "maxReplicas")),
                     4);
    json_decref(h);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/scalers/web", dev,
                          "{\"spec\": {\"maxReplicas\": 9}}", "If-Match: \"stale\"", true, &r),
                     412);
    th_resp_free(&r);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/scalers/web", dev,
                          "{\"spec\": {\"minReplicas\": 9, \"schedules\": [{\"name\": \"x\"}]}}",
                          NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/spec/minReplicas\"") &&
                      strstr(r.body, "\"pointer\":\"/spec/schedules\""),
                  "%s", r.body);
    th_resp_free(&r);
    /* The app moves to c1 (env=dev): its scaler follows (an HPA there with all the bounds, none
     * left behind). */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/apps/web", dev,
                          "{\"spec\": {\"placement\": {\"clusterSelector\": {\"matchLabels\": "
                          "{\"env\": \"dev\"}}}}}",
                          NULL, true, &r),
                     200);
    th_resp_free(&r);
    h = ks_hpa(1);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(h, "spec"), "minReplicas")),
                     2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(h, "spec"), "maxReplicas")),
                     8);
    json_decref(h);
    ck_assert_ptr_null(ks_hpa(0));
    ck_assert_ptr_null(ks_hpa(2));
    /* Refusals on create: no such app; fewer min replicas than the app's clusters. */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/scalers", dev,
                          "{\"name\": \"x\", \"spec\": {\"app\": \"nope\", \"minReplicas\": 1, "
                          "\"maxReplicas\": 2, \"targets\": {\"memoryUtilization\": 80}}}",
                          NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/spec/app\""), "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/scalers", dev,
                          "{\"name\": \"x\", \"spec\": {\"app\": \"web\", \"minReplicas\": 3, "
                          "\"maxReplicas\": 2, \"targets\": {}}}",
                          NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/spec/targets\""), "%s", r.body);
    th_resp_free(&r);
    /* Delete: the HPAs go. */
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/scalers/web", dev, NULL, NULL, true, &r),
                     204);
    th_resp_free(&r);
    ck_assert_ptr_null(ks_hpa(1));
    ck_assert_int_eq(call("GET", "/v1/projects/shop/scalers/web", viewer, NULL, NULL, true, &r),
                     404);
    th_resp_free(&r);
}
END_TEST

static bool cron_schedule_is(int i, const char *name, const char *want, int seconds) {
    char buf[128];
    for (int t = 0; t < seconds * 5; t++) {
        if (strcmp(ks_schedule(i, name, buf, sizeof buf), want) == 0)
            return true;
        ts_sleep_ms(200);
    }
    return false;
}

/* The reconciler repairs a cron job's CronJobs: one deleted by hand is made again (its share,
 * its schedule), one whose schedule was edited by hand gets the cron job's back, and a delete
 * that marked the CronJobs but did not finish is finished. */
START_TEST(cronjob_repaired_by_the_reconciler) {
    create_shop();
    th_resp_t r;
    char *body = cron_body("nightly", "0 3 * * *", "Forbid"), buf[128];
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    ck_assert_str_eq(ks_schedule(0, "nightly", buf, sizeof buf), "0 3 * * *");
    ck_assert_str_eq(ks_schedule(1, "nightly", buf, sizeof buf), "(none)");
    ck_assert_int_eq(
        tk_call(&ks, 2, "DELETE", "/apis/batch/v1/namespaces/shop/cronjobs/nightly", NULL, NULL),
        200);
    ck_assert_msg(cron_schedule_is(2, "nightly", "0 3 * * *", 30), "c2: %s",
                  ks_schedule(2, "nightly", buf, sizeof buf));
    json_t *cj = ks_cron(2, "nightly");
    ck_assert_str_eq(ann(cj, "fleetgate.io/requested-by"), "fleetgate-reconciler");
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(cj, "spec"), "jobTemplate"), "spec"),
            "completions")),
        1);
    json_decref(cj);
    ck_assert_str_eq(ks_schedule(1, "nightly", buf, sizeof buf), "(none)");
    /* kubectl edit in one cluster: the cron job's schedule comes back. */
    ck_assert_int_eq(tk_call(&ks, 0, "PATCH", "/apis/batch/v1/namespaces/shop/cronjobs/nightly",
                             "{\"spec\": {\"schedule\": \"*/5 * * * *\"}}", NULL),
                     200);
    ck_assert_msg(cron_schedule_is(0, "nightly", "0 3 * * *", 30), "c0: %s",
                  ks_schedule(0, "nightly", buf, sizeof buf));
    /* The read shows one cron job with its schedule. */
    ck_assert_int_eq(
        call("GET", "/v1/projects/shop/cronjobs/nightly", viewer, NULL, NULL, true, &r), 200);
    ck_assert_msg(strstr(r.body, "0 3 * * *"), "%s", r.body);
    th_resp_free(&r);
    /* A delete whose mark reached c0 only (its DELETEs failed): the reconciler finishes it. */
    ck_assert_int_eq(tk_call(&ks, 0, "PATCH", "/apis/batch/v1/namespaces/shop/cronjobs/nightly",
                             "{\"metadata\": {\"labels\": {\"fleetgate.io/deleting\": \"true\"}}}",
                             NULL),
                     200);
    bool gone = false;
    for (int t = 0; t < 150 && !gone; t++) {
        gone = strcmp(ks_schedule(0, "nightly", buf, sizeof buf), "(none)") == 0 &&
               strcmp(ks_schedule(2, "nightly", buf, sizeof buf), "(none)") == 0;
        if (!gone)
            ts_sleep_ms(200);
    }
    ck_assert_msg(gone, "the marked cron job was not deleted everywhere");
}
END_TEST

/* The bounds of scaler web's HPA in cluster i (false when it has none). */
static bool hpa_bounds(int i, long *lo, long *hi) {
    json_t *h = ks_hpa(i);
    if (h == NULL)
        return false;
    *lo = (long)json_integer_value(json_object_get(json_object_get(h, "spec"), "minReplicas"));
    *hi = (long)json_integer_value(json_object_get(json_object_get(h, "spec"), "maxReplicas"));
    json_decref(h);
    return true;
}

/* Waits (bounded) until the HPAs of scaler web are want_lo[i]..want_hi[i] in cluster i (-1: no
 * HPA there). */
static bool hpas_converge(const long want_lo[3], const long want_hi[3], int seconds, long got[3]) {
    for (int t = 0; t < seconds * 5; t++) {
        bool same = true;
        for (int i = 0; i < 3; i++) {
            long lo = -1, hi = -1;
            if (!hpa_bounds(i, &lo, &hi))
                lo = hi = -1;
            got[i] = lo * 100 + hi;
            same = same && lo == want_lo[i] && hi == want_hi[i];
        }
        if (same)
            return true;
        ts_sleep_ms(200);
    }
    return false;
}

/* The app reconciler moves an app off a drained cluster: its scaler follows (an HPA where the
 * app went, with the bounds divided again, none left behind), without any request; an HPA
 * deleted by hand where the app runs is made again. */
START_TEST(scaler_follows_an_app_the_reconciler_moves) {
    create_shop();
    th_resp_t r;
    char *body = fg_xasprintf("{\"name\": \"web\", \"spec\": {\"replicas\": 4, \"placement\": "
                              "{\"policy\": \"Spread\"}, \"containers\": %s}}",
                              two_containers);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    json_t *d = NULL;
    int x = tk_call(&ks, 0, "GET", "/apis/apps/v1/namespaces/shop/deployments/web", NULL, &d) == 200
                ? 0
                : 1,
        y = 1 - x;
    json_decref(d);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/scalers", dev,
                          "{\"name\": \"web\", \"spec\": {\"app\": \"web\", \"minReplicas\": 3, "
                          "\"maxReplicas\": 7, \"targets\": {\"cpuUtilization\": 50}}}",
                          NULL, true, &r),
                     201);
    th_resp_free(&r);
    long lo[3] = {-1, -1, 1}, hi[3] = {-1, -1, 3}, got[3];
    lo[x] = 2;
    hi[x] = 4;
    ck_assert_msg(hpas_converge(lo, hi, 5, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
    /* Every node of cluster x cordoned: the reconciler moves the app to y, and the scaler with
     * it. */
    json_t *nodes = NULL;
    ck_assert_int_eq(tk_call(&ks, x, "GET", "/api/v1/nodes", NULL, &nodes), 200);
    size_t i;
    json_t *node;
    json_array_foreach(json_object_get(nodes, "items"), i, node) {
        char path[256];
        snprintf(path, sizeof path, "/api/v1/nodes/%s",
                 json_string_value(json_object_get(json_object_get(node, "metadata"), "name")));
        ck_assert_int_eq(
            tk_call(&ks, x, "PATCH", path, "{\"spec\": {\"unschedulable\": true}}", NULL), 200);
    }
    json_decref(nodes);
    lo[y] = lo[x];
    hi[y] = hi[x];
    lo[x] = hi[x] = -1;
    ck_assert_msg(hpas_converge(lo, hi, 45, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
    d = NULL;
    ck_assert_int_eq(
        tk_call(&ks, y, "GET", "/apis/apps/v1/namespaces/shop/deployments/web", NULL, &d), 200);
    json_decref(d);
    json_t *h = ks_hpa(y);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(h, "metadata"), "annotations"),
                         "fleetgate.io/requested-by")),
                     "fleetgate-reconciler");
    json_decref(h);
    /* The scaler as read: both bounds still the spec's, summed over the app's clusters. */
    ck_assert_int_eq(call("GET", "/v1/projects/shop/scalers/web", viewer, NULL, NULL, true, &r),
                     200);
    json_t *sc = body_json(&r);
    th_resp_free(&r);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(sc, "spec"), "minReplicas")), 3);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(sc, "spec"), "maxReplicas")), 7);
    json_decref(sc);
    /* An HPA deleted by hand where the app runs comes back. */
    ck_assert_int_eq(tk_call(&ks, 2, "DELETE",
                             "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web",
                             NULL, NULL),
                     200);
    ck_assert_msg(hpas_converge(lo, hi, 30, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
}
END_TEST

/* Whether run name's Job in cluster i is suspended (kubesim's own object). */
static bool ks_job_suspended(int i, const char *name) {
    char path[256];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/shop/jobs/%s", name);
    bool s = tk_call(&ks, i, "GET", path, NULL, &o) == 200 &&
             json_is_true(json_object_get(json_object_get(o, "spec"), "suspend"));
    json_decref(o);
    return s;
}

START_TEST(cronjob_runs_are_charged_to_the_quota) {
    create_shop();
    th_resp_t r;
    /* Reserved has 500m of CPU; a run takes 2 x 200m over c0 and c2: it fits once. */
    char *body = fg_xasprintf(
        "{\"name\": \"tally\", \"spec\": {\"schedule\": \"* * * * *\", \"concurrencyPolicy\": "
        "\"Allow\", \"jobTemplate\": {\"completions\": 2, \"parallelism\": 2, \"tier\": "
        "\"Reserved\", \"placement\": {\"clusterSelector\": {\"matchLabels\": {\"env\": "
        "\"prod\"}}}, \"containers\": [{\"name\": \"count\", \"image\": "
        "\"registry.example.net/shop/count:1\", \"command\": [\"true\"], \"resources\": "
        "{\"requests\": {\"cpu\": \"200m\", \"memory\": \"32Mi\"}}}]}}}");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    /* The first scheduled run fits: the reconciler starts it and it succeeds. */
    char path[192];
    snprintf(path, sizeof path, "/v1/projects/shop/jobsets/tally-%lld", move_clocks(61));
    json_t *first = poll_get(path, has_phase, "Succeeded", 20000);
    ck_assert_msg(first && has_phase(first, "Succeeded"), "the first run did not succeed: %s",
                  first ? phase_of(first) : "(none)");
    json_decref(first);
    /* A job set takes 200m of the tier (200 completions one at a time, minutes of work): the
     * next run (400m) no longer fits and is held, suspended in its clusters, the job set
     * Pending saying why. The finished run's reservation is dropped by the reconciler's next
     * pass (2 s), so the job set may have to wait that long. */
    body = fg_xasprintf(
        "{\"name\": \"ledger\", \"spec\": {\"completions\": 200, \"parallelism\": 1, \"tier\": "
        "\"Reserved\", \"containers\": [{\"name\": \"l\", \"image\": "
        "\"registry.example.net/shop/ledger:1\", \"command\": [\"true\"], \"resources\": "
        "{\"requests\": {\"cpu\": \"200m\", \"memory\": \"32Mi\"}}}]}}");
    long st = 0;
    for (int waited = 0; waited <= 6000; waited += 250) {
        st = call("POST", "/v1/projects/shop/jobsets", dev, body, NULL, true, &r);
        bool quota = st == 409 && strstr(r.body, "quota-exceeded");
        th_resp_free(&r);
        if (!quota)
            break;
        ts_sleep_ms(250);
    }
    ck_assert_int_eq(st, 201);
    free(body);
    /* the run of the minute the clocks now show (one that started while the clocks stood at
     * +61 came before the job set, and may have run) */
    char name2[128];
    snprintf(name2, sizeof name2, "tally-%lld", move_clocks(61 + 60));
    /* its reason is written by the reconciler's next look once both clusters hold it: wait */
    const json_t *cond = NULL;
    json_t *held = NULL;
    snprintf(path, sizeof path, "/v1/projects/shop/jobsets/%s", name2);
    for (int waited = 0; waited < 20000 && cond == NULL; waited += 200) {
        json_decref(held);
        held = poll_get(path, has_phase, "Pending", 0);
        cond = json_array_get(json_object_get(json_object_get(held, "status"), "conditions"), 0);
        if (cond == NULL)
            ts_sleep_ms(200);
    }
    char *shown = held ? json_dumps(held, JSON_COMPACT) : NULL;
    ck_assert_msg(cond, "the held run %s says nothing: %s", name2, shown ? shown : "(none)");
    free(shown);
    ck_assert_str_eq(phase_of(held), "Pending");
    ck_assert_str_eq(json_string_value(json_object_get(cond, "type")), "Admitted");
    ck_assert_str_eq(json_string_value(json_object_get(cond, "status")), "False");
    ck_assert_str_eq(json_string_value(json_object_get(cond, "reason")), "QuotaExceeded");
    /* (600m, or more while another run of a passing minute holds its share) */
    const char *msg = json_string_value(json_object_get(cond, "message"));
    ck_assert_msg(strstr(msg, "tier Reserved of project shop: cpu would be ") &&
                      strstr(msg, "m of a quota of 500m"),
                  "%s", msg);
    ck_assert_int_eq(pods_count(held, "active") + pods_count(held, "succeeded"), 0);
    json_decref(held);
    ck_assert(ks_job_suspended(0, name2) && ks_job_suspended(2, name2));
    ts_sleep_ms(2500); /* another pass: still held */
    ck_assert(ks_job_suspended(0, name2) && ks_job_suspended(2, name2));
    /* A trigger is refused as before. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/tally:trigger", dev, NULL, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "quota-exceeded"), "%s", r.body);
    th_resp_free(&r);
    /* The job set is suspended: the quota frees, the held run is started and succeeds. */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/jobsets/ledger:suspend", dev, NULL, NULL, true, &r), 200);
    th_resp_free(&r);
    json_t *done = poll_get(path, has_phase, "Succeeded", 30000);
    ck_assert_msg(done && has_phase(done, "Succeeded"), "the held run was not released: %s",
                  done ? phase_of(done) : "(none)");
    ck_assert_int_eq(pods_count(done, "succeeded"), 2);
    ck_assert_ptr_null(json_object_get(json_object_get(done, "status"), "conditions"));
    json_decref(done);
}
END_TEST

/* A run whose Job one cluster never makes (its controller missed the minute: here its clock
 * stands two minutes behind) is not held forever: after RC_RUN_WHOLE_MS (30 s) the reconciler
 * admits it with the Job it has, and it runs to Succeeded in that cluster alone. */
START_TEST(cron_run_one_cluster_never_made_is_admitted_with_what_it_has) {
    create_shop();
    th_resp_t r;
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs", dev,
             "{\"name\": \"tally\", \"spec\": {\"schedule\": \"* * * * *\", \"jobTemplate\": "
             "{\"completions\": 2, \"parallelism\": 2, \"tier\": \"Reserved\", \"placement\": "
             "{\"clusterSelector\": {\"matchLabels\": {\"env\": \"prod\"}}}, \"containers\": "
             "[{\"name\": \"count\", \"image\": \"registry.example.net/shop/count:1\", "
             "\"command\": [\"true\"], \"resources\": {\"requests\": {\"cpu\": \"200m\"}}}]}}}",
             NULL, true, &r),
        201);
    th_resp_free(&r);
    ck_assert_int_eq(tk_call(&ks, 2, "POST", "/_kubesim/clock", "{\"offsetSeconds\": -120}", NULL),
                     200);
    char run[64], path[192];
    snprintf(run, sizeof run, "tally-%lld", move_clocks_but(61, 2));
    snprintf(path, sizeof path, "/v1/projects/shop/jobsets/%s", run);
    /* held while the other cluster may still make its share: c0's Job waits, suspended */
    json_t *js = poll_get(path, has_phase, "Pending", 10000);
    ck_assert_msg(js && has_phase(js, "Pending"), "no run in c0: %s", js ? phase_of(js) : "(none)");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(js, "status"), "clusters")),
                     1);
    json_decref(js);
    ck_assert(ks_job_suspended(0, run));
    /* then admitted with the Job it has */
    js = poll_get(path, has_phase, "Succeeded", 45000);
    ck_assert_msg(js && has_phase(js, "Succeeded"), "the run was never admitted: %s",
                  js ? phase_of(js) : "(none)");
    ck_assert_int_eq(pods_count(js, "succeeded"), 1);
    json_decref(js);
}
END_TEST

static Suite *jobs_suite(void) {
    Suite *s = suite_create("jobs");
    TCase *tp = tcase_create("pods");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_set_timeout(tp, 120);
    tcase_add_test(tp, pod_restart_container_in_place);
    tcase_add_test(tp, pod_delete_is_replaced_by_its_app);
    suite_add_tcase(s, tp);
    TCase *tj = tcase_create("jobsets");
    tcase_add_checked_fixture(tj, setup, teardown);
    tcase_set_timeout(tj, 120);
    tcase_add_test(tj, jobset_runs_to_succeeded_over_two_clusters);
    tcase_add_test(tj, jobset_with_failing_pods_ends_failed_with_reason);
    tcase_add_test(tj, jobset_suspend_stops_and_resume_restarts_pods);
    tcase_add_test(tj, jobset_refusals_idempotency_and_delete);
    tcase_add_test(tj, jobset_and_cronjob_take_catalogue_sidecars);
    suite_add_tcase(s, tj);
    TCase *tc = tcase_create("cronjobs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cronjob_runs_suspends_triggers_and_changes);
    tcase_add_test(tc, cronjob_refusals);
    tcase_add_test(tc, cronjob_repaired_by_the_reconciler);
    suite_add_tcase(s, tc);
    TCase *tq = tcase_create("cronquota");
    tcase_add_checked_fixture(tq, setup, teardown);
    tcase_set_timeout(tq, 120);
    tcase_add_test(tq, cronjob_runs_are_charged_to_the_quota);
    tcase_add_test(tq, cron_run_one_cluster_never_made_is_admitted_with_what_it_has);
    suite_add_tcase(s, tq);
    TCase *ts = tcase_create("scalers");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_set_timeout(ts, 120);
    tcase_add_test(ts, scale_outside_a_scalers_bounds_is_refused);
    tcase_add_test(ts, scaler_keeps_the_app_within_bounds_and_follows_it);
    tcase_add_test(ts, scaler_follows_an_app_the_reconciler_moves);
    suite_add_tcase(s, ts);
    return s;
}

int main(void) {
    return tm_run(jobs_suite());
}
