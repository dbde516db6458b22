/* kubesim admin API: stats counts by verb and reset, faults (error rate, down, latency, bad
 * bodies), cut-watches ending open streams, compact turning old RVs into 410, seeding and churn. */
#include <stdio.h>
#include <time.h>

#include "ks_test.h"
#include "testmain.h"

static int64_t stat_of(ks_cluster_t *c, const char *group, const char *key) {
    call_t r;
    call(c, "GET", "/_kubesim/stats", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 200);
    json_t *v = json_object_get(json_object_get(r.json, group), key);
    ck_assert_msg(json_is_integer(v), "%s.%s missing", group, key);
    int64_t n = json_integer_value(v);
    call_free(&r);
    return n;
}

static int code_of(ks_cluster_t *c, const char *method, const char *url, const char *body) {
    call_t r;
    call(c, method, url, body ? "application/json" : NULL, body, &r);
    int code = r.resp.drop ? -1 : r.resp.code;
    call_free(&r);
    return code;
}

START_TEST(stats_count_requests_by_verb_and_reset) {
    ks_cluster_t *c = test_cluster(100);
    make_pod(c, "default", "p1", "{\"app\":\"a\"}", "n1");
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/pods", NULL), 200);
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/namespaces/default/pods?limit=1", NULL), 200);
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/namespaces/default/pods/p1", NULL), 200);
    ck_assert_int_eq(code_of(c, "PATCH", "/api/v1/namespaces/default/pods/p1", "{}"), 415);
    ck_assert_int_eq(code_of(c, "DELETE", "/api/v1/namespaces/default/pods/p1", NULL), 200);
    call_t w;
    call(c, "GET", "/api/v1/pods?watch=1", NULL, NULL, &w);
    call_free(&w);
    ck_assert_int_eq(stat_of(c, "requests", "list"), 2);
    ck_assert_int_eq(stat_of(c, "requests", "watch"), 1);
    ck_assert_int_eq(stat_of(c, "requests", "get"), 1);
    ck_assert_int_eq(stat_of(c, "requests", "create"), 1);
    ck_assert_int_eq(stat_of(c, "requests", "patch"), 1);
    ck_assert_int_eq(stat_of(c, "requests", "delete"), 1);
    ck_assert_int_eq(stat_of(c, "requests", "update"), 0);
    ck_assert_int_eq(stat_of(c, "objects", "namespaces"), 4);
    ck_assert_int_eq(stat_of(c, "objects", "pods"), 0);
    call_t r;
    call(c, "GET", "/_kubesim/stats", NULL, NULL, &r);
    ck_assert_str_eq(jstr(r.json, "cluster", NULL), "test");
    ck_assert_ptr_nonnull(jstr(r.json, "resourceVersion", NULL));
    call_free(&r);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/stats/reset", NULL), 200);
    ck_assert_int_eq(stat_of(c, "requests", "list"), 0);
    ck_assert_int_eq(stat_of(c, "requests", "create"), 0);
    ks_cluster_free(c);
}
END_TEST

START_TEST(admin_needs_the_token_and_known_routes) {
    ks_cluster_t *c = test_cluster(100);
    ks_req_t req = {.method = "GET", .path = "/_kubesim/stats", .authorization = "Bearer no"};
    ks_resp_t resp;
    ks_handle(c, &req, &resp);
    ck_assert_int_eq(resp.code, 401);
    ks_resp_free(&resp);
    ck_assert_int_eq(code_of(c, "GET", "/_kubesim/nope", NULL), 404);
    ck_assert_int_eq(code_of(c, "DELETE", "/_kubesim/faults", NULL), 405);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/faults", "{\"errorRate\":2}"), 400);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/faults", "{\"errorStatus\":200}"), 400);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/faults", "{\"down\":1}"), 400);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/faults", "[1]"), 400);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/seed", "{\"pods\":-1}"), 400);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/churn", "{\"namespace\":\"A B\"}"), 400);
    ks_cluster_free(c);
}
END_TEST

START_TEST(faults_fail_requests_and_down_drops_them) {
    ks_cluster_t *c = test_cluster(100);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/faults",
                             "{\"latencyMs\":0,\"errorRate\":1.0,\"errorStatus\":429}"),
                     200);
    call_t r;
    call(c, "GET", "/api/v1/pods", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 429);
    ck_assert_str_eq(jstr(r.json, "kind", NULL), "Status");
    ck_assert_str_eq(jstr(r.json, "reason", NULL), "TooManyRequests");
    call_free(&r);
    call(c, "GET", "/_kubesim/faults", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "errorStatus")), 429);
    ck_assert(json_number_value(json_object_get(r.json, "errorRate")) == 1.0);
    ck_assert(json_is_false(json_object_get(r.json, "down")));
    call_free(&r);
    /* errorRate 0.5: some fail, some pass */
    code_of(c, "POST", "/_kubesim/faults", "{\"errorRate\":0.5,\"errorStatus\":500}");
    int fails = 0;
    for (int i = 0; i < 200; i++)
        fails += code_of(c, "GET", "/api/v1/pods", NULL) == 500;
    ck_assert_msg(fails > 50 && fails < 150, "fails %d of 200", fails);
    /* down: Kubernetes paths get no answer, admin paths still work, and it comes back */
    code_of(c, "POST", "/_kubesim/faults", "{\"down\":true}");
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/pods", NULL), -1);
    ck_assert_int_eq(code_of(c, "GET", "/version", NULL), -1);
    ck_assert_int_eq(code_of(c, "GET", "/_kubesim/stats", NULL), 200);
    code_of(c, "POST", "/_kubesim/faults", "{}");
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/pods", NULL), 200);
    /* latency */
    code_of(c, "POST", "/_kubesim/faults", "{\"latencyMs\":150}");
    uint64_t t0 = fg_now_ns();
    ck_assert_int_eq(code_of(c, "GET", "/api/v1/pods", NULL), 200);
    ck_assert_uint_ge(fg_now_ns() - t0, 150000000ULL);
    ks_cluster_free(c);
}
END_TEST

START_TEST(cut_watches_ends_every_open_watch) {
    ks_cluster_t *c = test_cluster(100);
    call_t w1, w2;
    call(c, "GET", "/api/v1/pods?watch=1", NULL, NULL, &w1);
    call(c, "GET", "/api/v1/namespaces?watch=1&resourceVersion=1", NULL, NULL, &w2);
    ck_assert_ptr_nonnull(w1.resp.watch);
    ck_assert_ptr_nonnull(w2.resp.watch);
    fg_buf_t b;
    fg_buf_init(&b, 1 << 20);
    ck_assert_int_eq(ks_watch_next(w1.resp.watch, &b, 10), FG_OK);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/cut-watches", NULL), 200);
    ck_assert_int_eq(ks_watch_next(w1.resp.watch, &b, 10), FG_ENOENT);
    ck_assert_int_eq(ks_watch_next(w2.resp.watch, &b, 10), FG_ENOENT);
    /* a watch started after the cut runs */
    call_t w3;
    call(c, "GET", "/api/v1/pods?watch=1", NULL, NULL, &w3);
    ck_assert_int_eq(ks_watch_next(w3.resp.watch, &b, 10), FG_OK);
    fg_buf_free(&b);
    call_free(&w1);
    call_free(&w2);
    call_free(&w3);
    ks_cluster_free(c);
}
END_TEST

START_TEST(compact_makes_old_resource_versions_expire) {
    ks_cluster_t *c = test_cluster(1000);
    make_pod(c, "default", "p1", "{\"app\":\"a\"}", "n1");
    make_pod(c, "default", "p2", "{\"app\":\"a\"}", "n1");
    ck_assert_int_eq(
        code_of(c, "GET", "/api/v1/pods?resourceVersion=2&resourceVersionMatch=Exact", NULL), 200);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/compact", NULL), 200);
    call_t r;
    call(c, "GET", "/api/v1/pods?resourceVersion=2&resourceVersionMatch=Exact", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 410);
    ck_assert_str_eq(jstr(r.json, "reason", NULL), "Expired");
    call_free(&r);
    call(c, "GET", "/api/v1/pods?watch=1&resourceVersion=3", NULL, NULL, &r);
    char *out = watch_read(r.resp.watch, 1, 5);
    ck_assert_msg(strstr(out, "\"type\":\"ERROR\"") && strstr(out, "\"code\":410"), "%s", out);
    free(out);
    call_free(&r);
    /* the current RV still watches */
    char url[128];
    snprintf(url, sizeof(url), "/api/v1/pods?watch=1&resourceVersion=%lld",
             (long long)ks_store_rv(c->store));
    call(c, "GET", url, NULL, NULL, &r);
    make_pod(c, "default", "p3", "{\"app\":\"a\"}", "n1");
    out = watch_read(r.resp.watch, 1, 5);
    ck_assert_msg(strstr(out, "\"type\":\"ADDED\"") && strstr(out, "p3"), "%s", out);
    free(out);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

START_TEST(seed_makes_nodes_pods_and_owners) {
    ks_cluster_t *c = test_cluster(100);
    ck_assert_int_eq(
        code_of(c, "POST", "/_kubesim/seed", "{\"namespace\":\"demo\",\"nodes\":5,\"pods\":40}"),
        200);
    ck_assert_int_eq(stat_of(c, "objects", "nodes"), 5);
    ck_assert_int_eq(stat_of(c, "objects", "pods"), 40);
    ck_assert_int_eq(stat_of(c, "objects", "replicasets"), 4);
    ck_assert_int_eq(stat_of(c, "objects", "deployments"), 4);
    call_t r;
    call(c, "GET", "/api/v1/namespaces/demo/pods?labelSelector=app%3Dsvc-00001&limit=3", NULL, NULL,
         &r);
    ck_assert_int_eq(r.resp.code, 200);
    json_t *items = json_object_get(r.json, "items");
    ck_assert_int_eq(json_array_size(items), 3);
    json_t *p = json_array_get(items, 0);
    json_t *meta = json_object_get(p, "metadata");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(meta, "ownerReferences"), 0), "kind")),
                     "ReplicaSet");
    ck_assert_int_eq(json_array_size(json_object_get(meta, "managedFields")), 2);
    ck_assert_str_eq(jstr(p, "status", "phase"), "Running");
    ck_assert_ptr_nonnull(jstr(p, "spec", "nodeName"));
    call_free(&r);
    call(c, "GET", "/api/v1/nodes?labelSelector=node.kubernetes.io%2Finstance-type", NULL, NULL,
         &r);
    ck_assert_int_eq(json_array_size(json_object_get(r.json, "items")), 5);
    call_free(&r);
    /* pods without nodes anywhere is refused */
    ks_cluster_t *c2 = test_cluster(100);
    ck_assert_int_eq(code_of(c2, "POST", "/_kubesim/seed", "{\"pods\":3}"), 400);
    ks_cluster_free(c2);
    ks_cluster_free(c);
}
END_TEST

START_TEST(churn_mutates_pods_until_stopped) {
    ks_cluster_t *c = test_cluster(100000);
    code_of(c, "POST", "/_kubesim/seed", "{\"namespace\":\"demo\",\"nodes\":2,\"pods\":20}");
    int64_t rv0 = ks_store_rv(c->store);
    ck_assert_int_eq(
        code_of(c, "POST", "/_kubesim/churn", "{\"perMinute\":60000,\"namespace\":\"demo\"}"), 200);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300000000L};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(code_of(c, "POST", "/_kubesim/churn", "{\"perMinute\":0}"), 200);
    int64_t rv1 = ks_store_rv(c->store);
    ck_assert_msg(rv1 - rv0 >= 50, "only %lld mutations", (long long)(rv1 - rv0));
    nanosleep(&ts, NULL);
    ck_assert_int_eq(ks_store_rv(c->store), rv1);
    ck_assert_int_eq(stat_of(c, "objects", "pods"), 20);
    ks_cluster_free(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kubesim_admin");
    TCase *tc = tcase_create("admin");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stats_count_requests_by_verb_and_reset);
    tcase_add_test(tc, admin_needs_the_token_and_known_routes);
    tcase_add_test(tc, faults_fail_requests_and_down_drops_them);
    tcase_add_test(tc, cut_watches_ends_every_open_watch);
    tcase_add_test(tc, compact_makes_old_resource_versions_expire);
    tcase_add_test(tc, seed_makes_nodes_pods_and_owners);
    tcase_add_test(tc, churn_mutates_pods_until_stopped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
