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

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char *token(const char *sub, const char *more) {
    char cl[512];
    snprintf(cl, sizeof cl,
             "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"%s\", "
             "\"exp\": %ld, %s}",
             sub, (long)time(NULL) + 3600, more);
    char *t = tj_sign("RS256", keys.rsa_priv, "rsa1", cl);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* One call; with check the answer must be one the contract declares. Returns the status. */
static long call(const char *method, const char *path, const char *tok, const char *body,
                 const char *extra, bool check, th_resp_t *r) {
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    char *auth = tok ? fg_xasprintf("Authorization: Bearer %s", tok) : NULL;
    const char *hdrs[5] = {NULL};
    size_t n = 0;
    if (auth)
        hdrs[n++] = auth;
    if (body)
        hdrs[n++] = strcmp(method, "PATCH") == 0 ? "Content-Type: application/merge-patch+json"
                                                 : "Content-Type: application/json";
    if (extra)
        hdrs[n++] = extra;
    ck_assert_int_eq(th_request(method, url, hdrs, body, body ? (long)strlen(body) : -1, 0, r), 0);
    free(auth);
    if (check) {
        char err[4096];
        char *p = fg_xstrdup(path);
        p[strcspn(p, "?")] = '\0';
        int rc = contract_check_headers(method, p, r->status, r->headers, r->body, r->len, err,
                                        sizeof err);
        ck_assert_msg(rc == CONTRACT_VALID, "%s %s -> %ld: %s\n%s", method, path, r->status, err,
                      r->body);
        free(p);
    }
    return r->status;
}

static json_t *body_json(const th_resp_t *r) {
    json_t *j = NULL;
    ck_assert_msg(fg_json_load(r->body, r->len, &j, NULL, 0) == FG_OK, "%s", r->body);
    return j;
}

static void wait_ready(void) {
    for (int i = 0; i < 300; i++) {
        th_resp_t r;
        long s = call("GET", "/readyz", NULL, NULL, NULL, false, &r);
        th_resp_free(&r);
        if (s == 200)
            return;
        sleep_ms(50);
    }
    ck_abort_msg("the daemon did not become ready");
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    static const char *const extra[] = {"--nodes", "2", "--pod-start-ms", "0", NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    char *cfg = daemon_cfg, cl[3][512];
    static const char *const zones[] = {"zone-a", "zone-a", "zone-b"};
    for (int i = 0; i < 3; i++)
        snprintf(cl[i], sizeof cl[i],
                 "{\"name\": \"c%d\", \"zone\": \"%s\", \"region\": \"r1\", \"url\": \"%s\","
                 " \"token_file\": \"%s\", \"ca_file\": \"%s\", \"labels\": [\"env=%s\"]}",
                 i, zones[i], tk_url(&ks, i), ks.token_file, ks.ca_file, i == 1 ? "dev" : "prod");
    snprintf(cfg, sizeof daemon_cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\"},"
             " \"log\": {\"level\": \"error\", \"access_log\": false},"
             " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
             " \"clusters\": [%s, %s, %s],"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             "  \"audit_log\": \"%s/audit.log\"},"
             " \"rate_limits\": {\"enabled\": false}}",
             redis.url, cl[0], cl[1], cl[2], keys.rsa_pub, keys.dir);
    char log[160];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = th_daemon_start(cfg, &port, log);
    ck_assert_int_gt(daemon_pid, 0);
    admin = token("ada", "\"groups\": [\"fleetgate-admins\"]");
    dev = token("dev", "\"projects\": {\"shop\": \"developer\"}");
    viewer = token("vera", "\"projects\": {\"shop\": \"viewer\"}");
    wait_ready();
}

static void teardown(void) {
    int status = th_daemon_stop(daemon_pid, SIGTERM, 5000);
    char path[192], text[8192] = "";
    snprintf(path, sizeof path, "%s/daemon.log", keys.dir);
    FILE *f = status != 0 ? fopen(path, "r") : NULL;
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
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
        sleep_ms(50);
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
    sleep_ms(300);
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

static Suite *jobs_suite(void) {
    Suite *s = suite_create("jobs");
    TCase *tp = tcase_create("pods");
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_set_timeout(tp, 120);
    tcase_add_test(tp, pod_restart_container_in_place);
    tcase_add_test(tp, pod_delete_is_replaced_by_its_app);
    suite_add_tcase(s, tp);
    return s;
}

int main(void) {
    return tm_run(jobs_suite());
}
