/* Integration tests of the read APIs (issue 5): the built daemon with a private redis-server,
 * the cache filled exactly as cache/SCHEMA.md section 2 says (tests/support/testcache.h), real
 * tokens, real HTTP. Every answer of an implemented route is checked against api/openapi.yaml.
 * Three member clusters: east-a and east-b in zone-a, west-c in zone-b. */
#include "contract.h"
#include "fleetgate/core.h"
#include "testcache.h"
#include "testhttp.h"
#include "testjwt.h"
#include "testredis.h"
#include "testmain.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The simplified objects below are printf templates kept beside the test that uses them. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

static tr_redis_t redis;
static tj_keys_t keys;
static tc_t cache;
static pid_t daemon_pid;
static uint16_t port;
static char *viewer; /* viewer of shop only */
static char *admin;  /* platform admin */
static int64_t now_ms;

static const char *const clusters[][2] = {
    {"east-a", "zone-a"}, {"east-b", "zone-a"}, {"west-c", "zone-b"}};

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

static void setup(void) {
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    ck_assert_int_eq(tc_open(&cache, redis.url), 0);
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\"}, \"cache\": {\"enabled\": false},"
             " \"log\": {\"level\": \"error\", \"access_log\": false},"
             " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
             " \"clusters\": ["
             "  {\"name\": \"east-a\", \"zone\": \"zone-a\", \"region\": \"test-1\","
             "   \"url\": \"http://127.0.0.1:9\"},"
             "  {\"name\": \"west-c\", \"zone\": \"zone-b\", \"region\": \"test-1\","
             "   \"url\": \"http://127.0.0.1:9\"},"
             "  {\"name\": \"east-b\", \"zone\": \"zone-a\", \"region\": \"test-1\","
             "   \"url\": \"http://127.0.0.1:9\"}],"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             "  \"audit_log\": \"%s/audit.log\"},"
             " \"rate_limits\": {\"enabled\": false}}",
             redis.url, keys.rsa_pub, keys.dir);
    char log[160];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = th_daemon_start(cfg, &port, log);
    ck_assert_int_gt(daemon_pid, 0);
    viewer = token("vera", "\"projects\": {\"shop\": \"viewer\"}");
    admin = token("ada", "\"groups\": [\"fleetgate-admins\"]");
    now_ms = fg_wall_ms();
}

static void teardown(void) {
    /* A clean exit: under the sanitizers a leak or a memory error makes it non-zero. */
    int status = th_daemon_stop(daemon_pid, SIGTERM, 5000);
    char path[192], text[8192] = "";
    snprintf(path, sizeof path, "%s/daemon.log", keys.dir);
    FILE *f = status != 0 ? fopen(path, "r") : NULL;
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    unlink(path);
    tc_close(&cache);
    tr_redis_stop(&redis);
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    unlink(path);
    tj_keys_remove(&keys);
    free(viewer);
    free(admin);
    ck_assert_msg(status == 0, "the daemon exited with %d:\n%s", status, text);
}

/* Every cluster healthy and synced, as after the informers' first sync. */
static void all_synced(void) {
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(tc_cluster(&cache, clusters[i][0], clusters[i][1], "Healthy", now_ms, ""),
                         0);
        ck_assert_int_eq(tc_sync_all(&cache, clusters[i][0], "1000", now_ms), 0);
    }
}

static void put_pod(const char *project, size_t cl, const char *name, const char *app,
                    const char *phase, const char *labels) {
    char *j =
        tc_pod_json(project, clusters[cl][0], clusters[cl][1], name, app, phase, labels, "101");
    ck_assert_int_eq(tc_put(&cache, "pod", clusters[cl][0], project, name, j), 0);
    free(j);
}

/* GET path with tok (NULL: none) and extra header (NULL: none); checks the answer against the
 * contract when check is set. */
static long get_as(const char *path, const char *tok, const char *extra, bool check, th_resp_t *r) {
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    char *auth = tok ? fg_xasprintf("Authorization: Bearer %s", tok) : NULL;
    const char *hdrs[3] = {NULL, NULL, NULL};
    size_t n = 0;
    if (auth)
        hdrs[n++] = auth;
    if (extra)
        hdrs[n++] = extra;
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, r), 0);
    free(auth);
    if (check) {
        char err[2048];
        const char *q = strchr(path, '?');
        char *p = q ? fg_xstrndup(path, (size_t)(q - path)) : fg_xstrdup(path);
        int rc = contract_check_headers("GET", p, r->status, r->headers, r->body, r->len, err,
                                        sizeof err);
        ck_assert_msg(rc == CONTRACT_VALID, "GET %s -> %ld: %s\n%s", path, r->status, err, r->body);
        free(p);
    }
    return r->status;
}

static json_t *body_json(const th_resp_t *r) {
    json_t *j = NULL;
    ck_assert_msg(fg_json_load(r->body, r->len, &j, NULL, 0) == FG_OK, "%s", r->body);
    return j;
}

static const char *cluster_state(const json_t *list, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(list, "clusters"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return json_string_value(json_object_get(c, "state"));
    }
    return NULL;
}

/* Names of a list page's items, "name@cluster" for pods, joined with spaces. */
static void names(const json_t *list, bool with_cluster, char *out, size_t outlen) {
    size_t i, used = 0;
    json_t *it;
    out[0] = '\0';
    json_array_foreach(json_object_get(list, "items"), i, it) {
        const char *c = json_string_value(json_object_get(it, "cluster"));
        used += (size_t)snprintf(out + used, outlen - used, "%s%s%s%s", used ? " " : "",
                                 json_string_value(json_object_get(it, "name")),
                                 with_cluster ? "@" : "", with_cluster && c ? c : "");
    }
}

/* ---- pods ---------------------------------------------------------------- */

START_TEST(pods_list_filters_and_get) {
    all_synced();
    put_pod("shop", 0, "web-1", "web", "Running",
            "{\"team\": \"checkout\", \"track\": \"stable\"}");
    put_pod("shop", 1, "web-1", "web", "Running",
            "{\"team\": \"checkout\", \"track\": \"canary\"}");
    put_pod("shop", 2, "web-2", "web", "Pending", "{\"team\": \"checkout\"}");
    put_pod("shop", 0, "batch-9", NULL, "Succeeded", NULL);
    put_pod("blog", 0, "other", "x", "Running", NULL);
    th_resp_t r;
    char got[1024];

    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, true, &r), 200);
    json_t *j = body_json(&r);
    names(j, true, got, sizeof got);
    ck_assert_str_eq(got, "batch-9@east-a web-1@east-a web-1@east-b web-2@west-c");
    ck_assert(json_is_null(json_object_get(j, "cursor")));
    ck_assert_str_eq(cluster_state(j, "east-a"), "Current");
    json_decref(j);
    th_resp_free(&r);

    static const struct {
        const char *query, *want;
    } cases[] = {
        {"phase=Running", "web-1@east-a web-1@east-b"},
        {"app=web&zone=zone-a", "web-1@east-a web-1@east-b"},
        {"cluster=west-c", "web-2@west-c"},
        {"labelSelector=track%20in%20(canary,beta)", "web-1@east-b"},
        {"labelSelector=team=checkout,track!=canary", "web-1@east-a web-2@west-c"},
        {"labelSelector=!team", "batch-9@east-a"},
        {"labelSelector=track", "web-1@east-a web-1@east-b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/projects/shop/pods?%s", cases[i].query);
        ck_assert_int_eq(get_as(path, viewer, NULL, false, &r), 200);
        j = body_json(&r);
        names(j, true, got, sizeof got);
        ck_assert_msg(strcmp(got, cases[i].want) == 0, "%s: got %s", cases[i].query, got);
        json_decref(j);
        th_resp_free(&r);
    }

    /* A name in one cluster: found; in two: 409 until ?cluster= names one. */
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-2", viewer, NULL, true, &r), 200);
    char etag[128];
    ck_assert_str_eq(th_header(&r, "ETag", etag, sizeof etag), "\"101\"");
    j = body_json(&r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "zone")), "zone-b");
    ck_assert_str_eq(json_string_value(json_object_get(j, "podIP")), "10.1.2.3");
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1", viewer, NULL, true, &r), 409);
    ck_assert_ptr_nonnull(strstr(r.body, "east-a, east-b"));
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1?cluster=east-b", viewer, NULL, true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/nope", viewer, NULL, true, &r), 404);
    ck_assert_ptr_nonnull(strstr(r.body, "no pod nope in project shop"));
    th_resp_free(&r);

    /* A pod first presented by a GET is still found by the filters of a list (the item cache
     * keeps what they look at from either path). */
    put_pod("shop", 2, "fresh-1", "api", "Running", "{\"team\": \"search\"}");
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/fresh-1", viewer, NULL, true, &r), 200);
    th_resp_free(&r);
    static const struct {
        const char *query, *want;
    } after_get[] = {
        {"phase=Running&cluster=west-c", "fresh-1@west-c"},
        {"app=api", "fresh-1@west-c"},
        {"labelSelector=team=search", "fresh-1@west-c"},
    };
    for (size_t i = 0; i < sizeof after_get / sizeof after_get[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/projects/shop/pods?%s", after_get[i].query);
        ck_assert_int_eq(get_as(path, viewer, NULL, false, &r), 200);
        j = body_json(&r);
        names(j, true, got, sizeof got);
        ck_assert_msg(strcmp(got, after_get[i].want) == 0, "%s: got %s", after_get[i].query, got);
        json_decref(j);
        th_resp_free(&r);
    }
}
END_TEST

/* While a cluster has not synced (after Redis lost its data, say), a pod not found elsewhere
 * may exist there: 503 naming the cluster, not a 404 that a client would believe. */
START_TEST(pod_get_is_503_not_404_while_a_cluster_is_missing) {
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(tc_cluster(&cache, clusters[i][0], clusters[i][1], "Healthy", now_ms, ""),
                         0);
        ck_assert_int_eq(tc_sync_all(&cache, clusters[i][0], "1000", now_ms), 0);
    }
    put_pod("shop", 0, "here-1", "web", "Running", NULL);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/here-1", viewer, NULL, true, &r), 200);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/gone-1", viewer, NULL, true, &r), 503);
    ck_assert_msg(strstr(r.body, "urn:fleetgate:problem:not-ready") &&
                      strstr(r.body, "cannot be looked up in cluster west-c"),
                  "%s", r.body);
    char v[16];
    ck_assert_str_eq(th_header(&r, "Retry-After", v, sizeof v), "5");
    th_resp_free(&r);
    /* Naming a synced cluster makes the absence known. */
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/gone-1?cluster=east-a", viewer, NULL, true, &r),
                     404);
    th_resp_free(&r);
    ck_assert_int_eq(tc_cluster(&cache, "west-c", "zone-b", "Healthy", now_ms, ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, "west-c", "1000", now_ms), 0);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/gone-1", viewer, NULL, true, &r), 404);
    th_resp_free(&r);
}
END_TEST

START_TEST(unknown_cluster_is_422_not_an_empty_list) {
    all_synced();
    static const char *const paths[] = {"/v1/projects/shop/pods?cluster=nowhere",
                                        "/v1/projects/shop/pods/web-1?cluster=nowhere",
                                        "/v1/projects/shop/apps?cluster=nowhere"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        th_resp_t r;
        ck_assert_msg(get_as(paths[i], viewer, NULL, true, &r) == 422, "%s: %ld", paths[i],
                      r.status);
        ck_assert_msg(strstr(r.body, "cluster names no member cluster (got \\\"nowhere\\\")"), "%s",
                      r.body);
        th_resp_free(&r);
    }
}
END_TEST

START_TEST(bad_parameters_are_422_naming_them) {
    all_synced();
    static const struct {
        const char *query, *param;
    } cases[] = {
        {"cursor=!!!", "cursor"},
        {"cursor=bm90LWEtY3Vyc29y", "cursor"}, /* base64 of "not-a-cursor" */
        {"limit=0", "limit"},
        {"limit=1001", "limit"},
        {"limit=ten", "limit"},
        {"phase=Sleeping", "phase"},
        {"cluster=East_A", "cluster"},
        {"labelSelector=a%20in%20b", "labelSelector"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        th_resp_t r;
        snprintf(path, sizeof path, "/v1/projects/shop/pods?%s", cases[i].query);
        ck_assert_int_eq(get_as(path, viewer, NULL, i < 3, &r), 422);
        json_t *j = body_json(&r);
        json_t *e = json_array_get(json_object_get(j, "errors"), 0);
        ck_assert_msg(strcmp(json_string_value(json_object_get(e, "parameter")), cases[i].param) ==
                          0,
                      "%s: %s", cases[i].query, r.body);
        json_decref(j);
        th_resp_free(&r);
    }
    /* Names in the path break the naming rules: 422 naming the path parameter. */
    static const struct {
        const char *path, *param;
    } paths[] = {
        {"/v1/projects/shop/pods/Web_1", "pod"},
        {"/v1/projects/shop/apps/-web", "app"},
        {"/v1/projects/Shop_Front/pods", "project"},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        th_resp_t r;
        ck_assert_int_eq(get_as(paths[i].path, admin, NULL, true, &r), 422);
        json_t *j = body_json(&r);
        json_t *e = json_array_get(json_object_get(j, "errors"), 0);
        ck_assert_msg(strcmp(json_string_value(json_object_get(e, "parameter")), paths[i].param) ==
                          0,
                      "%s: %s", paths[i].path, r.body);
        json_decref(j);
        th_resp_free(&r);
    }
}
END_TEST

/* Paging while objects are inserted and deleted between pages: every object present from the
 * first page to the last is seen exactly once, in order; nothing repeats. */
START_TEST(paging_while_changing_neither_skips_nor_repeats) {
    all_synced();
    char name[64];
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof name, "p-%03d", i * 10);
        put_pod("shop", (size_t)i % 3, name, "web", "Running", NULL);
    }
    /* The same name in two clusters: two items, in cluster order. */
    put_pod("shop", 2, "p-100", "web", "Running", NULL);
    char seen[128][80];
    size_t nseen = 0;
    char cursor[1100] = "";
    int pages = 0, inserted = 0;
    for (;;) {
        char path[1300];
        th_resp_t r;
        snprintf(path, sizeof path, "/v1/projects/shop/pods?limit=7%s%s",
                 cursor[0] ? "&cursor=" : "", cursor);
        ck_assert_int_eq(get_as(path, viewer, NULL, pages < 2, &r), 200);
        json_t *j = body_json(&r);
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(j, "items"), i, it) {
            ck_assert_uint_lt(nseen, 128);
            snprintf(seen[nseen++], sizeof seen[0], "%s\001%s",
                     json_string_value(json_object_get(it, "name")),
                     json_string_value(json_object_get(it, "cluster")));
        }
        ck_assert_uint_le(json_array_size(json_object_get(j, "items")), 7);
        const char *next = json_string_value(json_object_get(j, "cursor"));
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        json_decref(j);
        th_resp_free(&r);
        pages++;
        if (!next)
            break;
        /* Between pages: delete one object behind the cursor and one ahead of it, insert one
         * behind (must not show) and one ahead (must show). */
        int at = pages * 70;
        snprintf(name, sizeof name, "p-%03d", at - 60);
        tc_del(&cache, "pod", clusters[(at / 10 - 6) % 3][0], "shop", name, "web");
        snprintf(name, sizeof name, "p-%03d", at + 100);
        tc_del(&cache, "pod", clusters[(at / 10 + 10) % 3][0], "shop", name, "web");
        snprintf(name, sizeof name, "p-%03d-x", at - 50);
        put_pod("shop", 0, name, "web", "Running", NULL);
        snprintf(name, sizeof name, "p-%03d-y", at + 150);
        put_pod("shop", 1, name, "web", "Running", NULL);
        inserted++;
    }
    /* Sorted strictly by (name, cluster) (\001 sorts before any name byte): no repeats, no
     * disorder. */
    for (size_t i = 1; i < nseen; i++)
        ck_assert_msg(strcmp(seen[i - 1], seen[i]) < 0, "%s then %s", seen[i - 1], seen[i]);
    /* Every object that lived through the whole walk was seen. */
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof name, "p-%03d", i * 10);
        bool deleted = false;
        for (int p = 1; p <= pages; p++)
            deleted = deleted || i * 10 == p * 70 - 60 || i * 10 == p * 70 + 100;
        if (deleted)
            continue;
        char want[80];
        snprintf(want, sizeof want, "%s\001%s", name, clusters[i % 3][0]);
        bool found = false;
        for (size_t k = 0; k < nseen; k++)
            found = found || strcmp(seen[k], want) == 0;
        ck_assert_msg(found, "%s was skipped", want);
    }
    /* Inserted ahead of the cursor: seen; behind it: not. */
    for (int p = 1; p < pages; p++) {
        char ahead[80], behind[80];
        snprintf(ahead, sizeof ahead, "p-%03d-y\001east-b", p * 70 + 150);
        snprintf(behind, sizeof behind, "p-%03d-x\001east-a", p * 70 - 50);
        bool a = false, b = false;
        for (size_t k = 0; k < nseen; k++) {
            a = a || strcmp(seen[k], ahead) == 0;
            b = b || strcmp(seen[k], behind) == 0;
        }
        if (p * 70 + 150 < 600)
            ck_assert_msg(a, "%s (inserted ahead) was not seen", ahead);
        ck_assert_msg(!b, "%s (inserted behind) was seen", behind);
    }
    ck_assert_int_ge(pages, 8);
    ck_assert_int_gt(inserted, 0);
}
END_TEST

/* ---- partial results ------------------------------------------------------ */

START_TEST(cluster_parts_current_stale_missing) {
    ck_assert_int_eq(tc_cluster(&cache, "east-a", "zone-a", "Healthy", now_ms, ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, "east-a", "500", now_ms), 0);
    /* east-b: synced once, then unreachable: its last state is served, as stale. */
    ck_assert_int_eq(tc_sync_all(&cache, "east-b", "700", now_ms - 60000), 0);
    ck_assert_int_eq(tc_cluster(&cache, "east-b", "zone-a", "Unreachable", now_ms - 30000,
                                "connect: connection refused"),
                     0);
    /* west-c: its first list is still running: nothing of it is served. */
    ck_assert_int_eq(tc_sync(&cache, "west-c", "pods", "Syncing", "", 0, 0, 0), 0);
    put_pod("shop", 0, "a-1", "web", "Running", NULL);
    put_pod("shop", 1, "b-1", "web", "Running", NULL);
    put_pod("shop", 2, "c-1", "web", "Running", NULL);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, true, &r), 200);
    json_t *j = body_json(&r);
    char got[256];
    names(j, true, got, sizeof got);
    ck_assert_str_eq(got, "a-1@east-a b-1@east-b");
    ck_assert_str_eq(cluster_state(j, "east-a"), "Current");
    ck_assert_str_eq(cluster_state(j, "east-b"), "Stale");
    ck_assert_str_eq(cluster_state(j, "west-c"), "Missing");
    json_t *b = json_array_get(json_object_get(j, "clusters"), 1);
    ck_assert_str_eq(json_string_value(json_object_get(b, "resourceVersion")), "700");
    ck_assert_ptr_nonnull(json_string_value(json_object_get(b, "staleSince")));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(b, "reason")), "refused"));
    json_t *c = json_array_get(json_object_get(j, "clusters"), 2);
    ck_assert(json_is_null(json_object_get(c, "resourceVersion")));
    json_decref(j);
    th_resp_free(&r);

    /* east-a still answers, but its pods watch fails (503s) and backs off: Lagging. The list
     * must not call it Current: Stale since its last applied change, with the watch's error. */
    ck_assert_int_eq(tc_sync(&cache, "east-a", "pods", "Lagging", "500", 1, now_ms - 5000, 0), 0);
    const char *hset[] = {"HSET", "fg:sync:east-a:pods", "lastError", "503 Service Unavailable",
                          NULL};
    ck_assert_int_eq(tc_cmd(&cache, hset), 0);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, true, &r), 200);
    j = body_json(&r);
    ck_assert_str_eq(cluster_state(j, "east-a"), "Stale");
    json_t *a = json_array_get(json_object_get(j, "clusters"), 0);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(a, "staleSince")));
    ck_assert_str_eq(json_string_value(json_object_get(a, "reason")),
                     "its watch is not live (Lagging): 503 Service Unavailable");
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(tc_sync(&cache, "east-a", "pods", "Synced", "500", 1, now_ms, now_ms), 0);

    /* The app's status says which of its clusters' parts is stale. */
    const char *app = "{\"name\":\"web\",\"project\":\"shop\",\"cluster\":\"%s\",\"zone\":\"%s\","
                      "\"uid\":\"u\",\"version\":\"%s\",\"creationTime\":\"2026-11-22T09:00:00Z\","
                      "\"replicas\":{\"desired\":2,\"current\":2,\"ready\":2,\"updated\":2,"
                      "\"available\":2,\"unavailable\":0},\"paused\":false,"
                      "\"containers\":[{\"name\":\"main\",\"image\":\"registry.test/web:1\"}],"
                      "\"generation\":3,\"observedGeneration\":3}";
    char buf[1024];
    snprintf(buf, sizeof buf, app, "east-a", "zone-a", "11");
    ck_assert_int_eq(tc_put(&cache, "app", "east-a", "shop", "web", buf), 0);
    snprintf(buf, sizeof buf, app, "east-b", "zone-a", "12");
    ck_assert_int_eq(tc_put(&cache, "app", "east-b", "shop", "web", buf), 0);
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/web", viewer, NULL, true, &r), 200);
    j = body_json(&r);
    json_t *st = json_object_get(j, "status");
    ck_assert_str_eq(json_string_value(json_object_get(st, "phase")), "Degraded");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(st, "replicas"), "ready")),
                     4);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(st, "clusters"), 1), "state")),
                     "Stale");
    json_decref(j);
    th_resp_free(&r);
}
END_TEST

/* ---- ETags ---------------------------------------------------------------- */

START_TEST(etag_and_if_none_match) {
    all_synced();
    put_pod("shop", 0, "web-1", "web", "Running", NULL);
    th_resp_t r;
    char etag[128], inm[160], etag2[128];
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, false, &r), 200);
    ck_assert_ptr_nonnull(th_header(&r, "ETag", etag, sizeof etag));
    th_resp_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, inm, true, &r), 304);
    ck_assert_uint_eq(r.len, 0);
    th_resp_free(&r);
    /* A change makes a new page: 200 with another ETag. */
    put_pod("shop", 1, "web-2", "web", "Running", NULL);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, inm, false, &r), 200);
    ck_assert_str_ne(th_header(&r, "ETag", etag2, sizeof etag2), etag);
    th_resp_free(&r);
    /* One object: its version. */
    ck_assert_int_eq(
        get_as("/v1/projects/shop/pods/web-1", viewer, "If-None-Match: \"101\"", true, &r), 304);
    th_resp_free(&r);
    ck_assert_int_eq(
        get_as("/v1/projects/shop/pods/web-1", viewer, "If-None-Match: \"100\"", false, &r), 200);
    th_resp_free(&r);
    /* The pod changes (a new version): the list and the get show it, never a cached copy. */
    char *j = tc_pod_json("shop", "east-a", "zone-a", "web-1", "web", "Failed", NULL, "102");
    ck_assert_int_eq(tc_put(&cache, "pod", "east-a", "shop", "web-1", j), 0);
    free(j);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, false, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"phase\":\"Failed\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"version\":\"102\""));
    th_resp_free(&r);
    /* The pod mirror learns of the change from Redis's invalidation message: on a loaded
     * machine that can take a moment (cache/mirror.c's one staleness window), so the GET may
     * ask again, for a bounded time; it must never keep the old copy. */
    for (int tries = 0;; tries++) {
        ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1", viewer, NULL, false, &r), 200);
        th_header(&r, "ETag", etag2, sizeof etag2);
        if (strcmp(etag2, "\"102\"") == 0 || tries == 40)
            break;
        th_resp_free(&r);
        usleep(25 * 1000);
    }
    ck_assert_str_eq(etag2, "\"102\"");
    ck_assert_ptr_nonnull(strstr(r.body, "\"phase\":\"Failed\""));
    th_resp_free(&r);
}
END_TEST

/* ---- Redis down, readiness ---------------------------------------------- */

START_TEST(redis_down_is_503_and_not_ready) {
    all_synced();
    th_resp_t r;
    ck_assert_int_eq(get_as("/readyz", NULL, NULL, true, &r), 200);
    ck_assert_str_eq(r.body, "{\"status\":\"ready\",\"checks\":{\"server\":\"ok\",\"redis\":\"ok\","
                             "\"cluster:east-a\":\"ok\",\"cluster:west-c\":\"ok\","
                             "\"cluster:east-b\":\"ok\"}}");
    th_resp_free(&r);
    tc_close(&cache);
    tr_redis_stop(&redis);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", viewer, NULL, true, &r), 503);
    json_t *j = body_json(&r);
    ck_assert_str_eq(json_string_value(json_object_get(j, "type")),
                     "urn:fleetgate:problem:redis-unavailable");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "detail")), "redis: "));
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/web", viewer, NULL, true, &r), 503);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/readyz", NULL, NULL, true, &r), 503);
    j = body_json(&r);
    ck_assert_str_ne(json_string_value(json_object_get(json_object_get(j, "checks"), "redis")),
                     "ok");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "detail")), "redis: "));
    json_decref(j);
    th_resp_free(&r);
}
END_TEST

START_TEST(readyz_waits_for_first_sync_not_for_unreachable) {
    ck_assert_int_eq(tc_cluster(&cache, "east-a", "zone-a", "Healthy", now_ms, ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, "east-a", "5", now_ms), 0);
    ck_assert_int_eq(tc_cluster(&cache, "east-b", "zone-a", "Unreachable", 0, "dial: refused"), 0);
    ck_assert_int_eq(tc_cluster(&cache, "west-c", "zone-b", "Healthy", now_ms, ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, "west-c", "5", now_ms), 0);
    ck_assert_int_eq(tc_sync(&cache, "west-c", "pods", "Syncing", "", 0, 0, 0), 0);
    th_resp_t r;
    ck_assert_int_eq(get_as("/readyz", NULL, NULL, true, &r), 503);
    json_t *j = body_json(&r);
    json_t *checks = json_object_get(j, "checks");
    ck_assert_str_eq(json_string_value(json_object_get(checks, "cluster:west-c")),
                     "first sync not finished: pods");
    ck_assert_str_eq(json_string_value(json_object_get(checks, "cluster:east-b")),
                     "unreachable: dial: refused");
    ck_assert_str_eq(json_string_value(json_object_get(checks, "cluster:east-a")), "ok");
    json_decref(j);
    th_resp_free(&r);
    /* The first sync ends; the unreachable cluster is reported and not waited on. */
    ck_assert_int_eq(tc_sync(&cache, "west-c", "pods", "Synced", "9", 3, now_ms, now_ms), 0);
    ck_assert_int_eq(get_as("/readyz", NULL, NULL, true, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"cluster:east-b\":\"unreachable: dial: refused\""));
    th_resp_free(&r);
}
END_TEST

/* ---- authorization ---------------------------------------------------------- */

START_TEST(other_projects_are_refused_and_hidden) {
    all_synced();
    const char *ns = "{\"name\":\"%s\",\"cluster\":\"%s\",\"zone\":\"%s\",\"uid\":\"u\","
                     "\"version\":\"%s\",\"creationTime\":\"2026-11-20T09:00:00Z\","
                     "\"labels\":{\"team\":\"%s\"},\"phase\":\"Active\","
                     "\"quota\":{\"reserved\":{\"cpu\":\"100\",\"memory\":\"200Gi\"}}}";
    const char *projects[] = {"blog", "shop", "zoo"};
    char buf[1024];
    for (size_t p = 0; p < 3; p++)
        for (size_t c = 0; c < 3; c++) {
            snprintf(buf, sizeof buf, ns, projects[p], clusters[c][0], clusters[c][1], "7",
                     projects[p]);
            ck_assert_int_eq(tc_put(&cache, "project", clusters[c][0], "_", projects[p], buf), 0);
        }
    put_pod("blog", 0, "secret", "x", "Running", NULL);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/blog/pods", viewer, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/blog/pods/secret", viewer, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/blog", viewer, NULL, true, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods", NULL, NULL, true, &r), 401);
    th_resp_free(&r);

    char got[256];
    ck_assert_int_eq(get_as("/v1/projects", viewer, NULL, true, &r), 200);
    json_t *j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "shop");
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects?limit=2", admin, NULL, true, &r), 200);
    j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "blog shop");
    ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "cursor")));
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects?labelSelector=team%3Dzoo", admin, NULL, false, &r), 200);
    j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "zoo");
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop", viewer, NULL, true, &r), 200);
    j = body_json(&r);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "clusters")), 3);
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(j, "quotas"), "Reserved"), "limits"),
            "memory")),
        "200Gi");
    json_decref(j);
    th_resp_free(&r);
}
END_TEST

/* ---- the other kinds ------------------------------------------------------ */

START_TEST(workloads_and_clusters_follow_the_contract) {
    all_synced();
    const char *app = "{\"name\":\"%s\",\"project\":\"shop\",\"cluster\":\"%s\",\"zone\":\"%s\","
                      "\"uid\":\"u\",\"version\":\"%s\",\"creationTime\":\"2026-11-22T09:00:00Z\","
                      "\"labels\":{\"team\":\"checkout\"},"
                      "\"replicas\":{\"desired\":3,\"current\":3,\"ready\":%d,\"updated\":3,"
                      "\"available\":%d,\"unavailable\":0},\"paused\":false,"
                      "\"strategy\":{\"type\":\"RollingUpdate\",\"maxSurge\":\"25%%\","
                      "\"maxUnavailable\":0},"
                      "\"containers\":[{\"name\":\"main\",\"image\":\"registry.test/web:1\","
                      "\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"128Mi\"}}}],"
                      "\"revision\":4,\"generation\":3,\"observedGeneration\":3}";
    char buf[2048];
    snprintf(buf, sizeof buf, app, "web", "east-a", "zone-a", "11", 3, 3);
    ck_assert_int_eq(tc_put(&cache, "app", "east-a", "shop", "web", buf), 0);
    snprintf(buf, sizeof buf, app, "web", "west-c", "zone-b", "31", 1, 1);
    ck_assert_int_eq(tc_put(&cache, "app", "west-c", "shop", "web", buf), 0);
    snprintf(buf, sizeof buf, app, "api", "east-b", "zone-a", "21", 3, 3);
    ck_assert_int_eq(tc_put(&cache, "app", "east-b", "shop", "api", buf), 0);
    const char *job = "{\"name\":\"train\",\"project\":\"shop\",\"cluster\":\"%s\","
                      "\"zone\":\"%s\",\"uid\":\"u\",\"version\":\"%s\","
                      "\"creationTime\":\"2026-11-22T09:00:00Z\",\"cronjob\":\"nightly\","
                      "\"state\":\"%s\",\"parallelism\":2,\"completions\":4,"
                      "\"completionMode\":\"NonIndexed\",\"backoffLimit\":6,\"suspend\":false,"
                      "\"active\":1,\"ready\":1,\"succeeded\":2,\"failed\":0,"
                      "\"startTime\":\"2026-11-22T09:00:01Z\","
                      "\"containers\":[{\"name\":\"main\",\"image\":\"registry.test/train:2\"}]}";
    snprintf(buf, sizeof buf, job, "east-a", "zone-a", "41", "Running");
    ck_assert_int_eq(tc_put(&cache, "jobset", "east-a", "shop", "train", buf), 0);
    snprintf(buf, sizeof buf, job, "west-c", "zone-b", "42", "Complete");
    ck_assert_int_eq(tc_put(&cache, "jobset", "west-c", "shop", "train", buf), 0);
    ck_assert_int_eq(
        tc_put(&cache, "cronjob", "east-a", "shop", "nightly",
               "{\"name\":\"nightly\",\"project\":\"shop\",\"cluster\":\"east-a\","
               "\"zone\":\"zone-a\",\"uid\":\"u\",\"version\":\"51\","
               "\"creationTime\":\"2026-11-01T00:00:00Z\",\"schedule\":\"0 3 * * *\","
               "\"timeZone\":\"Europe/Paris\",\"concurrencyPolicy\":\"Forbid\",\"suspend\":false,"
               "\"lastScheduleTime\":\"2026-11-22T02:00:00Z\",\"active\":[\"train\"],"
               "\"containers\":[{\"name\":\"main\",\"image\":\"registry.test/train:2\"}]}"),
        0);
    ck_assert_int_eq(
        tc_put(&cache, "scaler", "east-a", "shop", "web",
               "{\"name\":\"web\",\"project\":\"shop\",\"cluster\":\"east-a\",\"zone\":\"zone-a\","
               "\"uid\":\"u\",\"version\":\"61\",\"creationTime\":\"2026-11-01T00:00:00Z\","
               "\"target\":{\"kind\":\"Deployment\",\"name\":\"web\"},\"minReplicas\":2,"
               "\"maxReplicas\":10,\"currentReplicas\":3,\"desiredReplicas\":3,"
               "\"metrics\":[{\"type\":\"Resource\",\"name\":\"cpu\",\"target\":{\"type\":"
               "\"Utilization\",\"averageUtilization\":70}}],"
               "\"currentMetrics\":[{\"type\":\"Resource\",\"name\":\"cpu\",\"current\":"
               "{\"averageUtilization\":55}}],"
               "\"behavior\":{\"scaleDown\":{\"stabilizationWindowSeconds\":300}}}"),
        0);
    ck_assert_int_eq(
        tc_put(&cache, "node", "east-a", "_", "n-1",
               "{\"name\":\"n-1\",\"cluster\":\"east-a\",\"zone\":\"zone-a\",\"uid\":\"u\","
               "\"version\":\"1\",\"ready\":true,\"kubeletVersion\":\"v1.31.2\","
               "\"capacityUnits\":{\"cpuMilli\":8000,\"memoryBytes\":34359738368,\"gpu\":0,"
               "\"pods\":110},\"allocatableUnits\":{\"cpuMilli\":7500,\"memoryBytes\":"
               "32212254720,\"gpu\":0,\"pods\":110}}"),
        0);
    static const char *const paths[] = {
        "/v1/projects/shop/apps",
        "/v1/projects/shop/apps/web",
        "/v1/projects/shop/jobsets",
        "/v1/projects/shop/jobsets/train",
        "/v1/projects/shop/cronjobs",
        "/v1/projects/shop/cronjobs/nightly",
        "/v1/projects/shop/scalers",
        "/v1/projects/shop/scalers/web",
        "/v1/clusters",
        "/v1/clusters/east-a",
        "/v1/projects/shop/apps/nope",
        "/v1/clusters/nowhere",
    };
    th_resp_t r;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        long want = i >= 10 ? 404 : 200;
        ck_assert_int_eq(get_as(paths[i], viewer, NULL, true, &r), want);
        th_resp_free(&r);
    }
    /* Aggregates: the app over its clusters and zones. */
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/web", viewer, NULL, false, &r), 200);
    json_t *j = body_json(&r);
    json_t *st = json_object_get(j, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "spec"), "replicas")),
                     6);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(st, "replicas"), "ready")),
                     4);
    ck_assert_str_eq(json_string_value(json_object_get(st, "phase")), "Progressing");
    ck_assert_uint_eq(json_array_size(json_object_get(st, "zones")), 2);
    json_decref(j);
    th_resp_free(&r);
    /* Filters on aggregated kinds. */
    char got[256];
    ck_assert_int_eq(get_as("/v1/projects/shop/apps?phase=Running", viewer, NULL, false, &r), 200);
    j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "api");
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/jobsets/train", viewer, NULL, false, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"phase\":\"Running\""));
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/clusters/east-a", viewer, NULL, false, &r), 200);
    j = body_json(&r);
    json_t *cap = json_object_get(j, "capacity");
    ck_assert_int_eq(json_integer_value(json_object_get(cap, "nodes")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cap, "cpu"), "capacity")),
                     "8");
    ck_assert_str_eq(json_string_value(json_object_get(j, "health")), "Healthy");
    ck_assert_uint_eq(json_array_size(json_object_get(j, "sync")), 8);
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/clusters?zone=zone-a&limit=1", viewer, NULL, false, &r), 200);
    j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "east-a");
    char path[1200];
    snprintf(path, sizeof path, "/v1/clusters?zone=zone-a&limit=1&cursor=%s",
             json_string_value(json_object_get(j, "cursor")));
    json_decref(j);
    th_resp_free(&r);
    ck_assert_int_eq(get_as(path, viewer, NULL, false, &r), 200);
    j = body_json(&r);
    names(j, false, got, sizeof got);
    ck_assert_str_eq(got, "east-b");
    ck_assert(json_is_null(json_object_get(j, "cursor")));
    json_decref(j);
    th_resp_free(&r);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("reads");
    TCase *tc = tcase_create("reads");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pods_list_filters_and_get);
    tcase_add_test(tc, bad_parameters_are_422_naming_them);
    tcase_add_test(tc, pod_get_is_503_not_404_while_a_cluster_is_missing);
    tcase_add_test(tc, unknown_cluster_is_422_not_an_empty_list);
    tcase_add_test(tc, paging_while_changing_neither_skips_nor_repeats);
    tcase_add_test(tc, cluster_parts_current_stale_missing);
    tcase_add_test(tc, etag_and_if_none_match);
    tcase_add_test(tc, redis_down_is_503_and_not_ready);
    tcase_add_test(tc, readyz_waits_for_first_sync_not_for_unreachable);
    tcase_add_test(tc, other_projects_are_refused_and_hidden);
    tcase_add_test(tc, workloads_and_clusters_follow_the_contract);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
