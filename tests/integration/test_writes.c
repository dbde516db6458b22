/* Integration tests of the write path over HTTP: the daemon with its informers, a private
 * redis-server and kubesim with three clusters in two zones (c0, c1 in zone-a; c2 in zone-b),
 * real tokens (admin, developer, viewer), every answer checked against the contract, and
 * kubesim's own objects and request counters checked for what reached which cluster. */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testmain.h"
#include "testredis.h"
#include "teststack.h"
#include "contract.h"

#include <check.h>
#include <hiredis.h>
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
    static const char *const extra[] = {"--nodes", "2", "--pod-start-ms", "0", NULL};
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
             "  \"cpu\": \"50m\", \"memory\": \"64Mi\", \"ports\": [\"admin:9901\"],"
             "  \"env\": [\"LOG_LEVEL=warn\"]}, {\"name\": \"app\", \"image\": \"x:1\"}]}",
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

/* The namespace as kubesim holds it in cluster i (a new reference, NULL when absent). */
static json_t *ks_namespace(int i, const char *name) {
    char path[128];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s", name);
    return tk_call(&ks, i, "GET", path, NULL, &o) == 200 ? o : (json_decref(o), NULL);
}

static const char *ann(const json_t *o, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "annotations"), key));
}

START_TEST(project_create_writes_every_cluster_and_reads_back) {
    th_resp_t r;
    ck_assert_int_eq(
        call("POST", "/v1/projects", admin, shop_body, "X-Request-Id: create-shop-1", true, &r),
        201);
    json_t *p = body_json(&r);
    char loc[128];
    ck_assert_str_eq(th_header(&r, "Location", loc, sizeof loc), "/v1/projects/shop");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(p, "quotas"), "OnDemand"), "limits"),
            "cpu")),
        "8");
    ck_assert_int_eq(json_array_size(json_object_get(p, "clusters")), 3);
    ck_assert_int_eq(json_array_size(json_object_get(p, "outcomes")), 3);
    json_decref(p);
    th_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tk_requests(&ks, i, "create"), 1);
        json_t *ns = ks_namespace(i, "shop");
        ck_assert_ptr_nonnull(ns);
        ck_assert_str_eq(ann(ns, "fleetgate.io/requested-by"), "ada");
        ck_assert_str_eq(ann(ns, "fleetgate.io/request-id"), "create-shop-1");
        ck_assert_str_eq(ann(ns, "fleetgate.io/quota-ondemand-memory"), "16Gi");
        ck_assert_str_eq(ann(ns, "fleetgate.io/quota-ondemand-pods"), "20");
        ck_assert_str_eq(ann(ns, "fleetgate.io/quota-reserved-cpu"), "500m");
        json_decref(ns);
    }
    /* Read your write: the GET right after, no sleep. */
    ck_assert_int_eq(call("GET", "/v1/projects/shop", viewer, NULL, NULL, true, &r), 200);
    p = body_json(&r);
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(p, "quotas"), "OnDemand"), "limits"),
            "pods")),
        20);
    ck_assert_str_eq(json_string_value(json_object_get(p, "description")), "the shop");
    json_decref(p);
    th_resp_free(&r);
    /* Again: it exists. */
    ck_assert_int_eq(call("POST", "/v1/projects", admin, shop_body, NULL, true, &r), 409);
    th_resp_free(&r);
}
END_TEST

START_TEST(project_patch_with_if_match) {
    create_shop();
    th_resp_t r;
    ck_assert_int_eq(call("GET", "/v1/projects/shop", admin, NULL, NULL, true, &r), 200);
    char etag[128], hdr[160];
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    const char *patch = "{\"description\": \"the new shop\","
                        " \"labels\": {\"team\": null, \"tier\": \"gold\"},"
                        " \"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": \"12\"}},"
                        " \"Reserved\": null}}";
    snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop", admin, patch, hdr, true, &r), 200);
    json_t *p = body_json(&r);
    th_resp_free(&r);
    json_t *q = json_object_get(p, "quotas");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(q, "OnDemand"), "limits"), "cpu")),
                     "12");
    ck_assert_ptr_null(json_object_get(q, "Reserved"));
    ck_assert_ptr_null(json_object_get(json_object_get(p, "labels"), "team"));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "labels"), "tier")),
                     "gold");
    ck_assert_str_eq(json_string_value(json_object_get(p, "description")), "the new shop");
    json_decref(p);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_requests(&ks, i, "patch"), 1);
    /* The same If-Match again is stale now: 412, nothing sent. */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop", admin, patch, hdr, true, &r), 412);
    th_resp_free(&r);
    ck_assert_int_eq(tk_requests(&ks, 0, "patch"), 1);
    /* A patch whose result breaks the schema: 422 pointing into the result. */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop", admin,
                          "{\"name\": \"other\", \"quotas\": {\"Gold\": {}}}", NULL, true, &r),
                     422);
    ck_assert_msg(strstr(r.body, "\"pointer\":\"/quotas/Gold\"") != NULL, "%s", r.body);
    th_resp_free(&r);
}
END_TEST

START_TEST(project_invalid_body_lists_every_field_and_writes_nothing) {
    th_resp_t r;
    const char *bad =
        "{\"name\": \"Shop_1\", \"labels\": {\"fleetgate.io/x\": \"y\"},"
        " \"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": \"lots\", \"pods\": -1}}},"
        " \"colour\": \"red\"}";
    ck_assert_int_eq(call("POST", "/v1/projects", admin, bad, NULL, true, &r), 422);
    json_t *p = body_json(&r);
    th_resp_free(&r);
    static const char *const pointers[] = {"/colour", "/name", "/labels/fleetgate.io~1x",
                                           "/quotas/OnDemand/limits/cpu",
                                           "/quotas/OnDemand/limits/pods"};
    json_t *errors = json_object_get(p, "errors");
    ck_assert_msg(json_array_size(errors) == 5, "%s", fg_json_dumps(p, NULL));
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(errors, i), "pointer")),
                         pointers[i]);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(errors, 3), "detail")),
                     "must be a CPU quantity such as 500m or 2 (got \"lots\")");
    json_decref(p);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_requests(&ks, i, "create"), 0);
    /* Not JSON at all: 415 / 400 before the handler. */
    ck_assert_int_eq(call("POST", "/v1/projects", admin, "{", NULL, true, &r), 400);
    th_resp_free(&r);
}
END_TEST

START_TEST(project_roles) {
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", dev, shop_body, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects", viewer, shop_body, NULL, true, &r), 403);
    th_resp_free(&r);
    create_shop();
    ck_assert_int_eq(
        call("PATCH", "/v1/projects/shop", dev, "{\"description\": \"x\"}", NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop", dev, NULL, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(tk_requests(&ks, 0, "patch") + tk_requests(&ks, 0, "delete"), 0);
}
END_TEST

START_TEST(project_delete_refused_while_workloads_remain) {
    create_shop();
    const char *dep =
        "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"metadata\": {\"name\": "
        "\"web\"}, \"spec\": {\"replicas\": 0, \"selector\": {\"matchLabels\": {\"app\": "
        "\"web\"}}, \"template\": {\"metadata\": {\"labels\": {\"app\": \"web\"}}, \"spec\": "
        "{\"containers\": [{\"name\": \"c\", \"image\": \"nginx:1\"}]}}}}";
    ck_assert_int_eq(
        tk_call(&ks, 2, "POST", "/apis/apps/v1/namespaces/shop/deployments", dep, NULL), 201);
    th_resp_t r;
    for (int i = 0; i < 200; i++) {
        long s = call("GET", "/v1/projects/shop/apps/web", admin, NULL, NULL, false, &r);
        th_resp_free(&r);
        if (s == 200)
            break;
        ts_sleep_ms(20);
    }
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop", admin, NULL, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "project shop still has 1 apps; delete them first") != NULL, "%s",
                  r.body);
    th_resp_free(&r);
    ck_assert_int_eq(
        tk_call(&ks, 2, "DELETE", "/apis/apps/v1/namespaces/shop/deployments/web", NULL, NULL),
        200);
    for (int i = 0; i < 200; i++) {
        long s = call("GET", "/v1/projects/shop/apps/web", admin, NULL, NULL, false, &r);
        th_resp_free(&r);
        if (s == 404)
            break;
        ts_sleep_ms(20);
    }
    ck_assert_int_eq(
        call("DELETE", "/v1/projects/shop", admin, NULL, "If-Match: \"stale\"", true, &r), 412);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop", admin, NULL, NULL, true, &r), 204);
    th_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tk_requests(&ks, i, "delete"), i == 2 ? 2 : 1);
        ck_assert_ptr_null(ks_namespace(i, "shop"));
    }
    ck_assert_int_eq(call("GET", "/v1/projects/shop", admin, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
}
END_TEST

/* One cluster refusing writes: 502 naming it, the others keep the namespace, and the same
 * request again (once the cluster is back) completes it. */
START_TEST(project_create_partial_failure_then_retry_converges) {
    ck_assert_int_eq(tk_faults(&ks, 1, "{\"errorRate\": 1, \"errorStatus\": 503}"), 0);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin, shop_body, NULL, true, &r), 502);
    json_t *p = body_json(&r);
    th_resp_free(&r);
    json_t *cl = json_object_get(p, "clusters");
    ck_assert_int_eq(json_array_size(cl), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cl, 1), "outcome")),
                     "Failed");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(cl, 1), "status")), 503);
    ck_assert_msg(strstr(json_string_value(json_object_get(p, "detail")),
                         "1 of 3 clusters failed the write: c1 answered 503") != NULL,
                  "%s", json_string_value(json_object_get(p, "detail")));
    json_decref(p);
    ck_assert_int_eq(tk_faults(&ks, 1, "{}"), 0);
    ck_assert_int_eq(call("POST", "/v1/projects", admin, shop_body, NULL, true, &r), 201);
    th_resp_free(&r);
    for (int i = 0; i < 3; i++) {
        json_t *ns = ks_namespace(i, "shop");
        ck_assert_ptr_nonnull(ns);
        json_decref(ns);
    }
}
END_TEST

/* A project whose namespace is missing in a cluster (added later, or down at the create) gets
 * it from the reconciler; a namespace fleetgate does not manage is left alone. */
START_TEST(reconciler_creates_missing_namespaces) {
    const char *managed = "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": "
                          "{\"name\": \"legacy\", \"labels\": {\"app.kubernetes.io/managed-by\": "
                          "\"fleetgate\", \"team\": \"old\"}, \"annotations\": "
                          "{\"fleetgate.io/quota-ondemand-cpu\": \"3\"}}}";
    const char *foreign = "{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": "
                          "{\"name\": \"kube-extra\"}}";
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tk_call(&ks, i, "POST", "/api/v1/namespaces", managed, NULL), 201);
        ck_assert_int_eq(tk_call(&ks, i, "POST", "/api/v1/namespaces", foreign, NULL), 201);
    }
    json_t *ns = NULL;
    for (int i = 0; i < 250 && ns == NULL; i++) {
        ns = ks_namespace(2, "legacy");
        if (ns == NULL)
            ts_sleep_ms(40);
    }
    ck_assert_msg(ns != NULL, "the reconciler did not create the namespace in c2");
    ck_assert_str_eq(ann(ns, "fleetgate.io/quota-ondemand-cpu"), "3");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(ns, "metadata"), "labels"), "team")),
                     "old");
    json_decref(ns);
    ck_assert_ptr_null(ks_namespace(2, "kube-extra"));
}
END_TEST

/* The intent is audited before the change, the outcome after. */
START_TEST(project_writes_are_audited_before_and_after) {
    create_shop();
    char path[160], text[16384] = "";
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    char *intent = strstr(text, "\"outcome\":\"intent\"");
    ck_assert_msg(intent != NULL, "%s", text);
    ck_assert_msg(strstr(intent, "\"outcome\":\"ok\",\"status\":201") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "\"intent\":\"create namespace shop in 3 clusters\"") != NULL, "%s",
                  text);
}
END_TEST

/* ---- apps ------------------------------------------------------------------------------ */

static const char *const quota_project =
    "{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": \"4\", \"memory\": "
    "\"64Gi\", \"pods\": 40}}}}";

static void create_quota_project(void) {
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin, quota_project, NULL, true, &r), 201);
    th_resp_free(&r);
}

static char *app_body(const char *name, int replicas, const char *placement, const char *extra) {
    return fg_xasprintf("{\"name\": \"%s\", \"labels\": {\"team\": \"checkout\"}, \"spec\": "
                        "{\"replicas\": %d, \"placement\": %s, \"containers\": [{\"name\": "
                        "\"app\", \"image\": \"registry.example.net/shop/web:1.42.0\", "
                        "\"env\": [{\"name\": \"LOG_LEVEL\", \"value\": \"info\"}], "
                        "\"ports\": [{\"name\": \"http\", \"containerPort\": 8080}], "
                        "\"resources\": {\"requests\": {\"cpu\": \"100m\", \"memory\": "
                        "\"128Mi\"}}}]%s}}",
                        name, replicas, placement, extra ? extra : "");
}

/* spec.replicas of the Deployment in cluster i (-1 when it has none). */
static long ks_replicas(int i, const char *app, json_t **dep) {
    char path[192];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/shop/deployments/%s", app);
    if (tk_call(&ks, i, "GET", path, NULL, &o) != 200) {
        json_decref(o);
        return -1;
    }
    long n = (long)json_integer_value(json_object_get(json_object_get(o, "spec"), "replicas"));
    if (dep)
        *dep = o;
    else
        json_decref(o);
    return n;
}

static long desired(const char *app) {
    th_resp_t r;
    char path[128];
    snprintf(path, sizeof path, "/v1/projects/shop/apps/%s", app);
    if (call("GET", path, viewer, NULL, NULL, false, &r) != 200) {
        th_resp_free(&r);
        return -1;
    }
    json_t *a = body_json(&r);
    th_resp_free(&r);
    long n = (long)json_integer_value(
        json_object_get(json_object_get(json_object_get(a, "status"), "replicas"), "desired"));
    json_decref(a);
    return n;
}

START_TEST(app_create_spread_and_read_your_writes) {
    create_quota_project();
    char *body = app_body("web", 6, "{\"policy\": \"Spread\"}", NULL);
    th_resp_t r;
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps", dev, body, "X-Request-Id: mk-web", true, &r), 201);
    json_t *a = body_json(&r);
    th_resp_free(&r);
    ck_assert_int_eq(json_array_size(json_object_get(a, "outcomes")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "placement"), "policy")),
                     "Spread");
    json_decref(a);
    /* One cluster a zone: c0 or c1 in zone-a (3 replicas), c2 in zone-b (3). */
    long c0 = ks_replicas(0, "web", NULL), c1 = ks_replicas(1, "web", NULL);
    json_t *dep = NULL;
    ck_assert_int_eq(ks_replicas(2, "web", &dep), 3);
    ck_assert_msg((c0 == 3 && c1 == -1) || (c0 == -1 && c1 == 3), "c0 %ld c1 %ld", c0, c1);
    ck_assert_int_eq(tk_requests(&ks, 2, "create"), 2); /* the namespace, the Deployment */
    ck_assert_int_eq(tk_requests(&ks, c0 == 3 ? 1 : 0, "create"), 1); /* the namespace only */
    ck_assert_str_eq(ann(dep, "fleetgate.io/requested-by"), "dev");
    ck_assert_str_eq(ann(dep, "fleetgate.io/request-id"), "mk-web");
    ck_assert_ptr_nonnull(strstr(ann(dep, "fleetgate.io/placement"), "\"policy\":\"Spread\""));
    json_decref(dep);
    /* Read your writes: the GET right after, 200 times, shows it. */
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(desired("web"), 6);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 409);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* Read your writes without the watch: with the replica that runs the informers stopped
 * (SIGSTOP: no watch event reaches the cache), a second replica without informers creates and
 * scales an app, and its answer and a GET right after show the change: the write put what the
 * clusters answered into the cache itself (write-through). */
START_TEST(app_read_your_writes_without_the_watch) {
    create_quota_project();
    char cfg[sizeof daemon_cfg + 64], *at = strstr(daemon_cfg, "\"rate_limits\"");
    ck_assert_ptr_nonnull(at);
    snprintf(cfg, sizeof cfg, "%.*s\"cache\": {\"enabled\": false}, %s", (int)(at - daemon_cfg),
             daemon_cfg, at);
    uint16_t port2, port1 = port;
    pid_t second = th_daemon_start(cfg, &port2, NULL);
    ck_assert_int_gt(second, 0);
    ck_assert_int_eq(kill(daemon_pid, SIGSTOP), 0);
    port = port2;
    char *body = app_body("still", 4, "{\"policy\": \"Spread\"}", NULL);
    th_resp_t r;
    long st = call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r);
    json_t *a = st == 201 ? body_json(&r) : NULL;
    long shown = a ? (long)json_integer_value(json_object_get(
                         json_object_get(json_object_get(a, "status"), "replicas"), "desired"))
                   : -1;
    th_resp_free(&r);
    json_decref(a);
    long got = desired("still");
    long scaled = call("POST", "/v1/projects/shop/apps/still:scale", dev, "{\"replicas\": 2}", NULL,
                       true, &r);
    th_resp_free(&r);
    long after = desired("still");
    port = port1;
    kill(daemon_pid, SIGCONT);
    ck_assert_int_eq(th_daemon_stop(second, SIGTERM, 5000), 0);
    ck_assert_int_eq(st, 201);
    ck_assert_int_eq(shown, 4);
    ck_assert_int_eq(got, 4);
    ck_assert_int_eq(scaled, 200);
    ck_assert_int_eq(after, 2);
    free(body);
}
END_TEST

START_TEST(app_pack_with_selector_and_dry_run) {
    create_quota_project();
    char *body = app_body("api", 4,
                          "{\"policy\": \"Pack\", \"clusterSelector\": {\"matchLabels\": "
                          "{\"env\": \"dev\"}}}",
                          NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps?dryRun=true", dev, body, NULL, true, &r),
                     200);
    json_t *d = body_json(&r);
    th_resp_free(&r);
    json_t *v = json_object_get(json_object_get(d, "placement"), "clusters");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(v, 0), "filter")),
                     "ClusterSelector");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(v, 1), "replicas")), 4);
    json_decref(d);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_requests(&ks, i, "create"), 1); /* the namespace only */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(0, "api", NULL), -1);
    ck_assert_int_eq(ks_replicas(1, "api", NULL), 4);
    ck_assert_int_eq(ks_replicas(2, "api", NULL), -1);
    /* Nowhere to go: 409 with the explanation. */
    char *nowhere = app_body("lost", 1, "{\"zones\": [\"zone-x\"]}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, nowhere, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "urn:fleetgate:problem:placement-failed") != NULL, "%s", r.body);
    ck_assert_msg(strstr(r.body, "3 refused by Zone") != NULL, "%s", r.body);
    th_resp_free(&r);
    free(nowhere);
    free(body);
}
END_TEST

START_TEST(app_verbs_and_delete) {
    create_quota_project();
    char *body = app_body("web", 6, "{}", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    int za = ks_replicas(0, "web", NULL) >= 0 ? 0 : 1; /* zone-a's chosen cluster */
    /* scale, with a dry run first */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:scale?dryRun=true", dev,
                          "{\"replicas\": 4}", NULL, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), 3);
    long gets = tk_requests(&ks, 2, "get");
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps/web:scale", dev, "{\"replicas\": 4}", NULL, true, &r),
        200);
    th_resp_free(&r);
    /* the spec came from the cache (fleetgateSpec): one fan-out, the patches, no reads */
    ck_assert_int_eq(tk_requests(&ks, 2, "get"), gets);
    ck_assert_int_eq(ks_replicas(za, "web", NULL), 2);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), 2);
    ck_assert_int_eq(desired("web"), 4);
    ck_assert_int_eq(tk_requests(&ks, 1 - za, "patch"), 0); /* never the other cluster */
    /* over the quota's 40 pods */
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/apps/web:scale", dev, "{\"replicas\": 41}", NULL, true, &r),
        409);
    ck_assert_msg(strstr(r.body, "tier OnDemand of project shop: cpu would be 4100m of a quota of "
                                 "4000m") != NULL,
                  "%s", r.body);
    th_resp_free(&r);
    /* stop, then resume brings the replicas back */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:stop", dev, NULL, NULL, true, &r),
                     200);
    ck_assert_msg(strstr(r.body, "\"phase\":\"Stopped\"") != NULL, "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), 0);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:resume", dev, NULL, NULL, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), 2);
    ck_assert_int_eq(desired("web"), 4);
    /* pause, restart */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:pause", dev, NULL, NULL, true, &r),
                     200);
    ck_assert_msg(strstr(r.body, "\"phase\":\"Paused\"") != NULL, "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:restart", dev, NULL, NULL, true, &r),
                     200);
    th_resp_free(&r);
    json_t *dep = NULL;
    ks_replicas(2, "web", &dep);
    ck_assert(json_is_true(json_object_get(json_object_get(dep, "spec"), "paused")));
    ck_assert_ptr_nonnull(json_object_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(dep, "spec"), "template"), "metadata"),
            "annotations"),
        "kubectl.kubernetes.io/restartedAt"));
    json_decref(dep);
    /* a stale If-Match: 412 */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/web:resume", dev, NULL,
                          "If-Match: \"nope\"", true, &r),
                     412);
    th_resp_free(&r);
    /* delete everywhere */
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/apps/web", dev, NULL, NULL, true, &r), 204);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(za, "web", NULL), -1);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), -1);
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/web", dev, NULL, NULL, true, &r), 404);
    th_resp_free(&r);
}
END_TEST

START_TEST(app_refusals) {
    create_quota_project();
    th_resp_t r;
    char *body = app_body("web", 2, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", viewer, body, NULL, true, &r), 403);
    th_resp_free(&r);
    char *other = ts_token(&keys, "olga", "\"projects\": {\"blog\": \"developer\"}");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", other, body, NULL, true, &r), 403);
    th_resp_free(&r);
    free(other);
    free(body);
    body = app_body("Web_1", 5000, "{\"policy\": \"Wide\"}",
                    ", \"sidecars\": [\"istio\", \"envoy\", \"envoy\", \"app\"]");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 422);
    static const char *const pointers[] = {"\"/name\"",
                                           "\"/spec/replicas\"",
                                           "\"/spec/placement/policy\"",
                                           "\"/spec/sidecars/0\"",
                                           "no managed sidecar istio in the platform's catalogue",
                                           "names sidecar envoy a second time",
                                           "is the name of container /spec/containers/0"};
    for (size_t i = 0; i < sizeof pointers / sizeof pointers[0]; i++)
        ck_assert_msg(strstr(r.body, pointers[i]) != NULL, "%s: %s", pointers[i], r.body);
    th_resp_free(&r);
    free(body);
    body = fg_xasprintf("{\"name\": \"batch\", \"spec\": {\"replicas\": 1, \"tier\": "
                        "\"Preemptible\", \"containers\": [{\"name\": \"c\", \"image\": \"x\"}]}}");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "tier Preemptible of project shop has no quota") != NULL, "%s",
                  r.body);
    th_resp_free(&r);
    free(body);
    ck_assert_int_eq(call("POST", "/v1/projects/nope/apps", admin, "{}", NULL, true, &r), 422);
    th_resp_free(&r);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_requests(&ks, i, "create"), 1); /* the namespace only */
}
END_TEST

/* A sidecar of the catalogue is injected into every Deployment of the app (after its own
 * containers), its requests count in the quota, and a GET shows it among the containers. */
START_TEST(app_sidecars_injected_from_the_catalogue) {
    create_quota_project();
    char *body = app_body("mesh", 2, "{\"policy\": \"Pack\"}", ", \"sidecars\": [\"envoy\"]");
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    json_t *dep = NULL;
    for (int i = 0; i < 3 && dep == NULL; i++)
        if (ks_replicas(i, "mesh", &dep) < 0)
            dep = NULL;
    ck_assert_ptr_nonnull(dep);
    const json_t *tmpl = json_object_get(json_object_get(dep, "spec"), "template"),
                 *cs = json_object_get(json_object_get(tmpl, "spec"), "containers"),
                 *sc = json_array_get(cs, 1);
    ck_assert_int_eq(json_array_size(cs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(sc, "name")), "envoy");
    ck_assert_str_eq(json_string_value(json_object_get(sc, "image")), "envoyproxy/envoy:v1.30");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(sc, "resources"), "requests"), "cpu")),
                     "50m");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(sc, "ports"), 0), "containerPort")),
                     9901);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(sc, "env"), 0), "value")),
        "warn");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(tmpl, "metadata"), "annotations"),
                         "fleetgate.io/sidecars")),
                     "envoy");
    json_decref(dep);
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/mesh", viewer, NULL, NULL, true, &r), 200);
    ck_assert_msg(strstr(r.body, "envoyproxy/envoy:v1.30") != NULL, "%s", r.body);
    th_resp_free(&r);
    /* the quota counts the sidecar: 4 cpu, 2 x (100m + 50m) used; 26 more replicas of 150m fit
     * (3.9 cpu in all), 27 do not */
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/mesh:scale?dryRun=true", dev,
                          "{\"replicas\": 26}", NULL, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/mesh:scale?dryRun=true", dev,
                          "{\"replicas\": 27}", NULL, true, &r),
                     409);
    ck_assert_msg(strstr(r.body, "cpu would be 4050m of a quota of 4000m") != NULL, "%s", r.body);
    th_resp_free(&r);
}
END_TEST

static const char *image_of(const json_t *dep) {
    return json_string_value(json_object_get(
        json_array_get(
            json_object_get(
                json_object_get(json_object_get(json_object_get(dep, "spec"), "template"), "spec"),
                "containers"),
            0),
        "image"));
}

START_TEST(app_replace_and_patch) {
    create_quota_project();
    char *body = app_body("web", 4, "{}", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
    int za = ks_replicas(0, "web", NULL) >= 0 ? 0 : 1;
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/web", dev, NULL, NULL, true, &r), 200);
    char etag[128], hdr[160];
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
    const char *patch = "{\"spec\": {\"containers\": [{\"name\": \"app\", \"image\": "
                        "\"registry.example.net/shop/web:1.43.0\", \"resources\": {\"requests\": "
                        "{\"cpu\": \"100m\"}}}]}}";
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/apps/web", dev, patch, hdr, true, &r), 200);
    th_resp_free(&r);
    json_t *dep = NULL;
    ck_assert_int_eq(ks_replicas(2, "web", &dep), 2);
    ck_assert_str_eq(image_of(dep), "registry.example.net/shop/web:1.43.0");
    json_decref(dep);
    ck_assert_int_eq(ks_replicas(za, "web", NULL), 2);
    ck_assert_int_eq(tk_requests(&ks, 2, "update"), 1);
    /* the ETag before the change is stale now */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/apps/web", dev, patch, hdr, true, &r), 412);
    th_resp_free(&r);
    /* a placement change moves the replicas: all to zone-b */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/apps/web", dev,
                          "{\"spec\": {\"placement\": {\"zones\": [\"zone-b\"]}}}", NULL, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(2, "web", NULL), 4);
    ck_assert_int_eq(ks_replicas(za, "web", NULL), -1);
    /* the body of a GET goes back with PUT */
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/web", dev, NULL, NULL, true, &r), 200);
    char *got = fg_xstrdup(r.body);
    th_resp_free(&r);
    ck_assert_int_eq(call("PUT", "/v1/projects/shop/apps/web", dev, got, NULL, true, &r), 200);
    th_resp_free(&r);
    free(got);
    ck_assert_int_eq(desired("web"), 4);
    /* a PUT cannot rename */
    body = app_body("other", 1, "{}", NULL);
    ck_assert_int_eq(call("PUT", "/v1/projects/shop/apps/web", dev, body, NULL, true, &r), 422);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* A cluster refusing the create: 502 naming it, and the Deployment the other got is deleted. */
START_TEST(app_create_failure_rolls_back) {
    create_quota_project();
    ck_assert_int_eq(tk_faults(&ks, 2, "{\"errorRate\": 1, \"errorStatus\": 500}"), 0);
    char *body = app_body("web", 2, "{}", NULL);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 502);
    ck_assert_msg(strstr(r.body, "c2 answered 500") != NULL, "%s", r.body);
    ck_assert_msg(strstr(r.body, "deleted it again") != NULL, "%s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(ks_replicas(0, "web", NULL), -1);
    ck_assert_int_eq(ks_replicas(1, "web", NULL), -1);
    ck_assert_int_eq(tk_faults(&ks, 2, "{}"), 0);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* A create reserves its quota along with its first reads, by the limits this replica read
 * last (the guarded reserve): those must be the project's own. Lowered, the next create is
 * held to the new limit; a create of an app that exists is refused as such and holds nothing. */
START_TEST(quota_create_follows_a_changed_limit) {
    create_quota_project(); /* cpu 4 */
    th_resp_t r;
    static const char *const names[] = {"web", "api"};
    for (size_t i = 0; i < 2; i++) { /* the second one goes the guarded way */
        char *body = app_body(names[i], 2, "{}", NULL);
        ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
        th_resp_free(&r);
        free(body);
    }
    char *body = app_body("api", 3, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "app api exists already") != NULL, "%s", r.body);
    th_resp_free(&r);
    free(body);
    /* 500m: web and api hold 2 x 200m, so two more replicas of 100m do not fit, one does */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop", admin,
                          "{\"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": \"500m\"}}}}", NULL,
                          true, &r),
                     200);
    th_resp_free(&r);
    /* the tier's usage as a write keeps it for the next ones (at most 1 s), so the create
     * below is decided by the reserve sent with its reads, whose limits are now stale */
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    ck_assert(rc != NULL && rc->err == 0);
    redisReply *rep = redisCommand(rc, "SET fg:qu:shop:OnDemand %s PX 30000",
                                   "web,200,268435456,2;api,200,268435456,2");
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    redisFree(rc);
    body = app_body("db", 2, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 409);
    ck_assert_msg(strstr(r.body, "tier OnDemand of project shop: cpu would be 600m of a quota of "
                                 "500m") != NULL,
                  "%s", r.body);
    th_resp_free(&r);
    free(body);
    body = app_body("db", 1, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 201);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* ---- quotas: two replicas racing for the last units ---------------------------------------- */

typedef struct {
    uint16_t port;
    int i;
    long status;
} racer_t;

static void *race_one(void *arg) {
    racer_t *r = arg;
    char url[128],
        *body = fg_xasprintf("{\"name\": \"r%d\", \"spec\": {\"replicas\": 1, \"containers\": "
                             "[{\"name\": \"c\", \"image\": \"nginx:1\"}]}}",
                             r->i);
    char *auth = fg_xasprintf("Authorization: Bearer %s", dev);
    const char *hdrs[] = {auth, "Content-Type: application/json", NULL};
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/shop/apps", (unsigned)r->port);
    th_resp_t resp;
    r->status =
        th_request("POST", url, hdrs, body, (long)strlen(body), 0, &resp) == 0 ? resp.status : -1;
    th_resp_free(&resp);
    free(auth);
    free(body);
    return NULL;
}

START_TEST(quota_holds_across_two_replicas) {
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin,
                          "{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                          "{\"pods\": 5}}}}",
                          NULL, true, &r),
                     201);
    th_resp_free(&r);
    /* A second replica on the same Redis and clusters. */
    uint16_t port2;
    pid_t second = th_daemon_start(daemon_cfg, &port2, NULL);
    ck_assert_int_gt(second, 0);
    enum { N = 40 };
    racer_t racers[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        racers[i] = (racer_t){.port = i % 2 ? port2 : port, .i = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_one, &racers[i]), 0);
    }
    int created = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        created += racers[i].status == 201;
        refused += racers[i].status == 409;
    }
    ck_assert_int_eq(th_daemon_stop(second, SIGTERM, 5000), 0);
    char seen[512] = "";
    for (int i = 0, len = 0; i < N && len < (int)sizeof seen - 8; i++)
        len += snprintf(seen + len, sizeof seen - (size_t)len, " %ld", racers[i].status);
    ck_assert_msg(created == 5 && refused == N - 5, "created %d, refused %d:%s", created, refused,
                  seen);
    long deps = 0;
    for (int i = 0; i < 3; i++) {
        json_t *s = NULL;
        ck_assert_int_eq(tk_call(&ks, i, "GET", "/_kubesim/stats", NULL, &s), 200);
        deps +=
            (long)json_integer_value(json_object_get(json_object_get(s, "objects"), "deployments"));
        json_decref(s);
    }
    ck_assert_int_eq(deps, 5);
    /* the refusal names tier, resource, would-be usage and quota */
    char *body = app_body("one-more", 1, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r), 409);
    ck_assert_msg(
        strstr(r.body, "tier OnDemand of project shop: pods would be 6 of a quota of 5") != NULL,
        "%s", r.body);
    th_resp_free(&r);
    free(body);
}
END_TEST

/* ---- the reconciler for apps ---------------------------------------------------------------- */

/* Waits (bounded) until the app's Deployments in kubesim hold want[i] replicas (-1: none). */
static bool converges(const char *app, const long want[3], int seconds, long got[3]) {
    for (int t = 0; t < seconds * 5; t++) {
        bool same = true;
        for (int i = 0; i < 3; i++) {
            got[i] = ks_replicas(i, app, NULL);
            same = same && got[i] == want[i];
        }
        if (same)
            return true;
        ts_sleep_ms(200);
    }
    return false;
}

/* c0 or c1 (zone-a) and c2 (zone-b) hold 2 replicas each of a new app; returns the zone-a one. */
static int create_spread_app(const char *name) {
    char *body = app_body(name, 4, "{\"policy\": \"Spread\"}", NULL);
    th_resp_t r;
    long st = 0;
    /* 503 means "try again" (a client retries it): under ASan on a loaded machine a Redis call
     * can pass its 250 ms deadline; what is tested here is the reconciler, not that */
    for (int i = 0; i < 5 && st != 201; i++) {
        if (i > 0)
            ts_sleep_ms(300);
        st = call("POST", "/v1/projects/shop/apps", dev, body, NULL, true, &r);
        ck_assert_msg(st == 201 || st == 503, "%ld: %s", st, r.body);
        th_resp_free(&r);
    }
    ck_assert_int_eq(st, 201);
    free(body);
    int x = ks_replicas(0, name, NULL) == 2 ? 0 : 1;
    ck_assert_int_eq(ks_replicas(x, name, NULL), 2);
    ck_assert_int_eq(ks_replicas(2, name, NULL), 2);
    return x;
}

/* A cluster drained (every node cordoned) loses its share to the other cluster of its zone. */
START_TEST(reconciler_moves_apps_off_a_drained_cluster) {
    create_quota_project();
    int x = create_spread_app("web"), y = 1 - x;
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
    long want[3] = {-1, -1, 2}, got[3];
    want[y] = 2;
    ck_assert_msg(converges("web", want, 40, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
    ck_assert_int_eq(desired("web"), 4);
    th_resp_t r;
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/web", viewer, NULL, NULL, true, &r), 200);
    th_resp_free(&r);
}
END_TEST

/* A cluster that stays unreachable loses its share to the other cluster of its zone; once it is
 * back, its Deployment is one too many and goes. */
START_TEST(reconciler_moves_apps_off_an_unreachable_cluster) {
    create_quota_project();
    int x = create_spread_app("svc"), y = 1 - x;
    ck_assert_int_eq(tk_faults(&ks, x, "{\"down\": true}"), 0);
    bool moved = false;
    for (int t = 0; t < 250 && !moved; t++) {
        moved = ks_replicas(y, "svc", NULL) == 2 && ks_replicas(2, "svc", NULL) == 2;
        if (!moved)
            ts_sleep_ms(200);
    }
    ck_assert_int_eq(tk_faults(&ks, x, "{\"down\": false}"), 0);
    ck_assert_msg(moved, "c%d %ld c2 %ld", y, ks_replicas(y, "svc", NULL),
                  ks_replicas(2, "svc", NULL));
    long want[3] = {-1, -1, 2}, got[3];
    want[y] = 2;
    ck_assert_msg(converges("svc", want, 60, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
}
END_TEST

/* A delete that one cluster failed (503) is completed by the reconciler, never undone. */
START_TEST(reconciler_finishes_a_failed_delete) {
    create_quota_project();
    create_spread_app("gone");
    ck_assert_int_eq(tk_faults(&ks, 2, "{\"errorRate\": 1, \"errorStatus\": 503}"), 0);
    th_resp_t r;
    long st = call("DELETE", "/v1/projects/shop/apps/gone", dev, NULL, NULL, true, &r);
    th_resp_free(&r);
    ck_assert_int_eq(tk_faults(&ks, 2, "{}"), 0);
    ck_assert_int_eq(st, 502);
    long want[3] = {-1, -1, -1}, got[3];
    ck_assert_msg(converges("gone", want, 40, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
}
END_TEST

/* What happened to the Deployments behind fleetgate's back (one deleted, one scaled) is undone:
 * the placement the last write recorded is applied again. */
START_TEST(reconciler_restores_the_recorded_placement) {
    create_quota_project();
    int x = create_spread_app("api");
    ck_assert_int_eq(
        tk_call(&ks, 2, "DELETE", "/apis/apps/v1/namespaces/shop/deployments/api", NULL, NULL),
        200);
    ck_assert_int_eq(tk_call(&ks, x, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/api",
                             "{\"spec\": {\"replicas\": 5}}", NULL),
                     200);
    long want[3] = {-1, -1, 2}, got[3];
    want[x] = 2;
    ck_assert_msg(converges("api", want, 40, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
    json_t *dep = NULL;
    ck_assert_int_eq(ks_replicas(2, "api", &dep), 2);
    ck_assert_str_eq(ann(dep, "fleetgate.io/requested-by"), "fleetgate-reconciler");
    json_decref(dep);
    /* a stopped app is left at 0 */
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps/api:stop", dev, NULL, NULL, true, &r),
                     200);
    th_resp_free(&r);
    ts_sleep_ms(9000); /* past the settle time */
    long zero[3] = {-1, -1, 0};
    zero[x] = 0;
    ck_assert_msg(converges("api", zero, 1, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
}
END_TEST

/* The app as a viewer reads it (contract-checked; a new reference). */
static json_t *get_app(const char *name) {
    char path[160];
    th_resp_t r;
    snprintf(path, sizeof path, "/v1/projects/shop/apps/%s", name);
    ck_assert_int_eq(call("GET", path, viewer, NULL, NULL, true, &r), 200);
    json_t *app = body_json(&r);
    th_resp_free(&r);
    return app;
}

/* The status.clusters entry of cluster (borrowed from app; NULL when absent). */
static const json_t *app_part(const json_t *app, const char *cluster) {
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(json_object_get(app, "status"), "clusters"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "cluster")), cluster) == 0)
            return e;
    }
    return NULL;
}

/* The Reconciled condition of app (borrowed; NULL when absent). */
static const json_t *reconciled(const json_t *app) {
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(app, "status"), "conditions"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), "Reconciled") == 0)
            return c;
    }
    return NULL;
}

/* Asserts the part of cluster: its placed replicas and reconcile state. */
static void assert_part(const json_t *app, const char *cluster, long placed, const char *state) {
    const json_t *e = app_part(app, cluster);
    ck_assert_msg(e != NULL, "no part for %s", cluster);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "placed")), placed);
    ck_assert_str_eq(json_string_value(json_object_get(e, "reconcile")), state);
}

/* A scale that one cluster refused (503) answers 502 with each cluster's outcome; the app's
 * status shows that cluster pending, with what the write placed there, until the reconciler
 * applies the recorded placement once the cluster answers again. */
START_TEST(reconciler_completes_a_partial_scale_shown_in_status) {
    create_quota_project();
    int x = create_spread_app("pay");
    char cx[8];
    snprintf(cx, sizeof cx, "c%d", x);
    json_t *app = get_app("pay");
    assert_part(app, cx, 2, "Done");
    assert_part(app, "c2", 2, "Done");
    ck_assert_str_eq(json_string_value(json_object_get(reconciled(app), "status")), "True");
    json_decref(app);

    ck_assert_int_eq(tk_faults(&ks, 2, "{\"errorRate\": 1, \"errorStatus\": 503}"), 0);
    th_resp_t r;
    long st =
        call("POST", "/v1/projects/shop/apps/pay:scale", dev, "{\"replicas\": 6}", NULL, true, &r);
    ck_assert_msg(st == 502, "%ld: %s", st, r.body);
    ck_assert_msg(strstr(r.body, "c2") != NULL, "%s", r.body);
    th_resp_free(&r);
    app = get_app("pay");
    assert_part(app, cx, 3, "Done");
    assert_part(app, "c2", 3, "Pending");
    const json_t *cond = reconciled(app);
    ck_assert_str_eq(json_string_value(json_object_get(cond, "status")), "False");
    ck_assert_str_eq(json_string_value(json_object_get(cond, "reason")), "ReconcilePending");
    ck_assert_msg(strstr(json_string_value(json_object_get(cond, "message")), "c2") != NULL, "%s",
                  json_string_value(json_object_get(cond, "message")));
    ck_assert_str_ne(json_string_value(json_object_get(json_object_get(app, "status"), "phase")),
                     "Running");
    json_decref(app);

    ck_assert_int_eq(tk_faults(&ks, 2, "{}"), 0);
    long want[3] = {-1, -1, 3}, got[3];
    want[x] = 3;
    ck_assert_msg(converges("pay", want, 40, got), "c0 %ld c1 %ld c2 %ld", got[0], got[1], got[2]);
    bool done = false;
    for (int t = 0; t < 100 && !done; t++) { /* the watch brings the reconciler's write */
        app = get_app("pay");
        const json_t *e = app_part(app, "c2");
        done = e && strcmp(json_string_value(json_object_get(e, "reconcile")), "Done") == 0;
        if (done) {
            assert_part(app, cx, 3, "Done");
            assert_part(app, "c2", 3, "Done");
            ck_assert_str_eq(json_string_value(json_object_get(reconciled(app), "status")), "True");
        }
        json_decref(app);
        if (!done)
            ts_sleep_ms(100);
    }
    ck_assert(done);
}
END_TEST

/* ---- Idempotency-Key ------------------------------------------------------------------------ */

static long creates(void) {
    long n = 0;
    for (int i = 0; i < 3; i++)
        n += tk_requests(&ks, i, "create");
    return n;
}

START_TEST(idempotent_create_answers_once_across_replicas) {
    create_quota_project();
    char *body = app_body("web", 2, "{}", NULL);
    th_resp_t r;
    const char *key = "Idempotency-Key: 8e4c1a52-51f0-4d8e-9f7e-3d1c2b0a9f11";
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, key, true, &r), 201);
    char *first = fg_xstrdup(r.body);
    th_resp_free(&r);
    long before = creates();
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, key, true, &r), 201);
    ck_assert_str_eq(r.body, first);
    th_resp_free(&r);
    /* another replica answers the same */
    uint16_t port2, port1 = port;
    pid_t second = th_daemon_start(daemon_cfg, &port2, NULL);
    ck_assert_int_gt(second, 0);
    port = port2;
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, key, true, &r), 201);
    ck_assert_str_eq(r.body, first);
    th_resp_free(&r);
    port = port1;
    ck_assert_int_eq(th_daemon_stop(second, SIGTERM, 5000), 0);
    ck_assert_int_eq(creates(), before);
    /* the same key with another body */
    char *other = app_body("api", 2, "{}", NULL);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, other, key, true, &r), 422);
    ck_assert_msg(strstr(r.body, "\"header\":\"Idempotency-Key\"") != NULL, "%s", r.body);
    th_resp_free(&r);
    free(other);
    free(first);
    free(body);
}
END_TEST

/* The client sends, the connection drops before the answer, the client retries with its key:
 * one app, created once. */
START_TEST(idempotent_retry_after_dropped_connection) {
    create_quota_project();
    char *body = app_body("web", 2, "{}", NULL);
    char *req = fg_xasprintf("POST /v1/projects/shop/apps HTTP/1.1\r\nHost: x\r\nAuthorization: "
                             "Bearer %s\r\nContent-Type: application/json\r\nIdempotency-Key: "
                             "k-1\r\nContent-Length: %zu\r\n\r\n%s",
                             dev, strlen(body), body);
    int fd = th_connect(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    close(fd);
    free(req);
    long before = creates();
    th_resp_t r;
    long status = 409;
    for (int i = 0; i < 200 && status == 409; i++) {
        status =
            call("POST", "/v1/projects/shop/apps", dev, body, "Idempotency-Key: k-1", true, &r);
        th_resp_free(&r);
        if (status == 409)
            ts_sleep_ms(20);
    }
    ck_assert_int_eq(status, 201);
    json_t *dep = NULL;
    long total = 0;
    for (int i = 0; i < 3; i++) {
        long n = ks_replicas(i, "web", &dep);
        total += n > 0 ? n : 0;
        json_decref(dep);
        dep = NULL;
    }
    ck_assert_int_eq(total, 2);
    ck_assert_int_le(creates() - before, 2); /* the dropped request's Deployments, once */
    free(body);
}
END_TEST

static Suite *writes_suite(void) {
    Suite *s = suite_create("writes");
    TCase *tc = tcase_create("projects");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, project_create_writes_every_cluster_and_reads_back);
    tcase_add_test(tc, project_patch_with_if_match);
    tcase_add_test(tc, project_invalid_body_lists_every_field_and_writes_nothing);
    tcase_add_test(tc, project_roles);
    tcase_add_test(tc, project_delete_refused_while_workloads_remain);
    tcase_add_test(tc, project_create_partial_failure_then_retry_converges);
    tcase_add_test(tc, project_writes_are_audited_before_and_after);
    tcase_add_test(tc, reconciler_creates_missing_namespaces);
    suite_add_tcase(s, tc);
    TCase *ta = tcase_create("apps");
    tcase_add_checked_fixture(ta, setup, teardown);
    tcase_set_timeout(ta, 120);
    tcase_add_test(ta, app_create_spread_and_read_your_writes);
    tcase_add_test(ta, app_sidecars_injected_from_the_catalogue);
    tcase_add_test(ta, app_read_your_writes_without_the_watch);
    tcase_add_test(ta, app_pack_with_selector_and_dry_run);
    tcase_add_test(ta, app_verbs_and_delete);
    tcase_add_test(ta, app_refusals);
    tcase_add_test(ta, app_replace_and_patch);
    tcase_add_test(ta, app_create_failure_rolls_back);
    suite_add_tcase(s, ta);
    TCase *tr = tcase_create("reconcile");
    tcase_add_checked_fixture(tr, setup, teardown);
    tcase_set_timeout(tr, 120);
    tcase_add_test(tr, reconciler_moves_apps_off_a_drained_cluster);
    tcase_add_test(tr, reconciler_moves_apps_off_an_unreachable_cluster);
    tcase_add_test(tr, reconciler_finishes_a_failed_delete);
    tcase_add_test(tr, reconciler_restores_the_recorded_placement);
    tcase_add_test(tr, reconciler_completes_a_partial_scale_shown_in_status);
    suite_add_tcase(s, tr);
    TCase *tq = tcase_create("quota");
    tcase_add_checked_fixture(tq, setup, teardown);
    tcase_set_timeout(tq, 120);
    tcase_add_test(tq, quota_create_follows_a_changed_limit);
    tcase_add_test(tq, quota_holds_across_two_replicas);
    tcase_add_test(tq, idempotent_create_answers_once_across_replicas);
    tcase_add_test(tq, idempotent_retry_after_dropped_connection);
    suite_add_tcase(s, tq);
    return s;
}

int main(void) {
    return tm_run(writes_suite());
}
