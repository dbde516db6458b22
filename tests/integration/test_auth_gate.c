/* Integration tests of the gate on a real HTTP server in this process, with a route table of
 * project routes like the ones later issues add (read, list, write, logs, exec, admin): each
 * role against each permission, cross-project refusal, the list charge per item, the audit line
 * of every mutating and denied call, and fail-closed auditing (503 when the line cannot be
 * written). Tokens are signed with libjwt by keys made at test time; no Redis (per-process
 * buckets). */
#include "fleetgate/auth.h"
#include "testhttp.h"
#include "testjwt.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int h_ok(fg_req_t *req) {
    return fg_reply_json(req, 200, json_pack("{s:s}", "route", fg_req_route_name(req)));
}

/* A list of 250 items: charged per item beyond the gate's one read. */
static int h_list(fg_req_t *req) {
    fg_auth_charge_items(req, 250);
    return fg_reply_json(req, 200, json_pack("{s:i}", "items", 250));
}

/* What a list handler of projects does: it shows only those the caller may read. */
static int h_visible(fg_req_t *req) {
    static const char *const all[] = {"blog", "secret", "shop"};
    json_t *items = json_array();
    for (size_t i = 0; i < 3; i++) {
        if (fg_auth_req_can(req, all[i], FG_PERM_READ))
            json_array_append_new(items, json_string(all[i]));
    }
    return fg_reply_json(req, 200, json_pack("{s:o}", "items", items));
}

#define R(m, p, h, pm, rt)                                                                         \
    { .method = m, .pattern = p, .handler = h, .body = FG_BODY_NONE, .perm = pm, .rate = rt }

static const fg_route_t routes[] = {
    R("GET", "/healthz", h_ok, FG_PERM_PUBLIC, FG_RATE_NONE),
    R("GET", "/v1/projects/{project}/things", h_ok, FG_PERM_READ, FG_RATE_DEFAULT),
    R("POST", "/v1/projects/{project}/things", h_ok, FG_PERM_WRITE, FG_RATE_DEFAULT),
    R("GET", "/v1/projects/{project}/items", h_list, FG_PERM_READ, FG_RATE_LIST),
    R("GET", "/v1/projects/{project}/pods/{pod}/logs", h_ok, FG_PERM_LOGS, FG_RATE_READ),
    R("POST", "/v1/projects/{project}/pods/{pod}/exec", h_ok, FG_PERM_EXEC, FG_RATE_WRITE),
    R("POST", "/v1/projects", h_ok, FG_PERM_ADMIN, FG_RATE_DEFAULT),
    R("GET", "/v1/visible", h_visible, FG_PERM_AUTHENTICATED, FG_RATE_READ),
    R("GET", "/v1/forgot-perm", h_ok, 0, FG_RATE_READ), /* no perm declared: admin */
};

typedef struct {
    fg_config_t *cfg;
    fg_auth_t *auth;
    fg_http_server_t *srv;
    char base[64];
} gate_server_t;

static tj_keys_t keys;
static char audit_path[128];
static gate_server_t gs;

static void server_start(gate_server_t *g, const char *audit) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             " \"leeway_s\": 0,"
             " \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             " \"audit_log\": \"%s\"},"
             " \"rate_limits\": {\"read_burst\": 1000, \"read_per_minute\": 1,"
             "  \"list_item_cost_milli\": 100}}",
             keys.rsa_pub, audit);
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    ck_assert_msg(fg_config_load_text("t.json", text, strlen(text), &g->cfg, &errs) == FG_OK, "%s",
                  errs.data);
    ck_assert_msg(fg_auth_new(&g->auth, g->cfg, NULL, &errs) == FG_OK, "%s", errs.data);
    fg_buf_free(&errs);
    fg_http_options_t o = {.host = "127.0.0.1",
                           .port = 0,
                           .workers = 2,
                           .max_body_bytes = 1024,
                           .max_connections = 64,
                           .connection_timeout_s = 5,
                           .gate = fg_auth_gate,
                           .seal = fg_auth_seal,
                           .gate_ctx = g->auth};
    ck_assert_int_eq(fg_http_server_start(&g->srv, &o, routes, sizeof routes / sizeof routes[0]),
                     FG_OK);
    snprintf(g->base, sizeof g->base, "http://127.0.0.1:%u", (unsigned)fg_http_server_port(g->srv));
}

static void server_stop(gate_server_t *g) {
    fg_http_server_free(g->srv);
    fg_auth_free(g->auth);
    fg_config_free(g->cfg);
    memset(g, 0, sizeof *g);
}

/* Keys once for the suite (RSA key generation is the slow part); a server per test. */
static void suite_setup(void) {
    ck_assert_int_eq(tj_keys_make(&keys), 0);
}

static void suite_teardown(void) {
    tj_keys_remove(&keys);
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    snprintf(audit_path, sizeof audit_path, "%s/audit.log", keys.dir);
    unlink(audit_path);
    server_start(&gs, audit_path);
}

static void teardown(void) {
    server_stop(&gs);
    fg_metrics_reset();
    unlink(audit_path);
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

static long call(const gate_server_t *g, const char *method, const char *path, const char *tok,
                 const char *rid, th_resp_t *out) {
    char url[256], ridh[96];
    char *auth = fg_xasprintf("Authorization: Bearer %s", tok ? tok : "");
    snprintf(url, sizeof url, "%s%s", g->base, path);
    snprintf(ridh, sizeof ridh, "X-Request-Id: %s", rid ? rid : "r");
    const char *hdrs[] = {auth, ridh, NULL};
    th_resp_t r;
    ck_assert_int_eq(th_request(method, url, tok ? hdrs : hdrs + 1, NULL, -1, 0, &r), 0);
    free(auth);
    long status = r.status;
    if (out)
        *out = r;
    else
        th_resp_free(&r);
    return status;
}

/* ---- each role against each permission --------------------------------- */

typedef struct {
    const char *method, *path;
    long viewer, developer, operator_, admin, other; /* other: operator of another project */
} perm_row_t;

static const perm_row_t perm_rows[] = {
    {"GET", "/v1/projects/shop/things", 200, 200, 200, 200, 403},
    {"POST", "/v1/projects/shop/things", 403, 200, 200, 200, 403},
    {"GET", "/v1/projects/shop/pods/p1/logs", 403, 200, 200, 200, 403},
    {"POST", "/v1/projects/shop/pods/p1/exec", 403, 403, 200, 200, 403},
    {"POST", "/v1/projects", 403, 403, 403, 200, 403},
    {"GET", "/v1/forgot-perm", 403, 403, 403, 200, 403},
    {"GET", "/v1/visible", 200, 200, 200, 200, 200},
    {"GET", "/healthz", 200, 200, 200, 200, 200},
};

START_TEST(roles_against_permissions) {
    char *t[5] = {token("vic", "\"projects\": {\"shop\": \"viewer\"}"),
                  token("dev", "\"projects\": {\"shop\": \"developer\"}"),
                  token("opa", "\"projects\": {\"shop\": \"operator\"}"),
                  token("adm", "\"groups\": [\"fleetgate-admins\"]"),
                  token("eve", "\"projects\": {\"blog\": \"operator\"}")};
    for (size_t i = 0; i < sizeof perm_rows / sizeof perm_rows[0]; i++) {
        const perm_row_t *row = &perm_rows[i];
        long want[5] = {row->viewer, row->developer, row->operator_, row->admin, row->other};
        for (size_t k = 0; k < 5; k++) {
            long got = call(&gs, row->method, row->path, t[k], NULL, NULL);
            ck_assert_msg(got == want[k], "%s %s as %zu: %ld, want %ld", row->method, row->path, k,
                          got, want[k]);
        }
    }
    for (size_t k = 0; k < 5; k++)
        free(t[k]);
}
END_TEST

START_TEST(forbidden_detail_names_role_and_project) {
    char *t = token("vic", "\"projects\": {\"shop\": \"viewer\"}");
    th_resp_t r;
    json_error_t e;
    ck_assert_int_eq(call(&gs, "POST", "/v1/projects/shop/things", t, "f1", &r), 403);
    json_t *p = json_loads(r.body, 0, &e);
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "this needs the role developer in project shop (you hold viewer)");
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")),
                     "urn:fleetgate:problem:forbidden");
    json_decref(p);
    th_resp_free(&r);
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/secret/things", t, "f2", &r), 403);
    p = json_loads(r.body, 0, &e);
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "you hold no role in project secret (viewer needed)");
    json_decref(p);
    th_resp_free(&r);
    free(t);
}
END_TEST

START_TEST(lists_show_only_the_callers_projects) {
    char *t = token("dev", "\"projects\": {\"shop\": \"developer\", \"blog\": \"viewer\"}");
    char *a = token("adm", "\"groups\": [\"fleetgate-admins\"]");
    th_resp_t r;
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, &r), 200);
    ck_assert_str_eq(r.body, "{\"items\":[\"blog\",\"shop\"]}");
    th_resp_free(&r);
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", a, NULL, &r), 200);
    ck_assert_str_eq(r.body, "{\"items\":[\"blog\",\"secret\",\"shop\"]}");
    th_resp_free(&r);
    free(t);
    free(a);
}
END_TEST

/* A list of 250 items at 0.1 read each costs 25 reads: the next answer says so. */
START_TEST(list_is_charged_per_item) {
    char *t = token("lister", "\"projects\": {\"shop\": \"viewer\"}");
    th_resp_t r;
    char v[32];
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/shop/things", t, NULL, &r), 200);
    ck_assert_str_eq(th_header(&r, "RateLimit-Remaining", v, sizeof v), "999");
    th_resp_free(&r);
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/shop/items", t, NULL, &r), 200);
    /* 1 for the get, 1 for the list's gate, 24 more for its items */
    ck_assert_str_eq(th_header(&r, "RateLimit-Remaining", v, sizeof v), "974");
    th_resp_free(&r);
    free(t);
}
END_TEST

/* ---- the verified-token cache ------------------------------------------ */

static long metric(const char *name_and_labels) {
    fg_buf_t m;
    fg_buf_init(&m, 1 << 20);
    fg_metrics_render(&m);
    const char *at = strstr(m.data, name_and_labels);
    long v = at ? strtol(at + strlen(name_and_labels), NULL, 10) : -1;
    fg_buf_free(&m);
    return v;
}

/* A token is verified once and then served from the cache, but never past its exp. */
START_TEST(cached_token_never_outlives_its_exp) {
    char cl[256];
    snprintf(cl, sizeof cl,
             "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"brief\", "
             "\"exp\": %ld}",
             (long)time(NULL) + 2);
    char *t = tj_sign("RS256", keys.rsa_priv, "rsa1", cl);
    long hits = metric("fleetgate_auth_token_cache_total{result=\"hit\"} ");
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, NULL), 200);
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, NULL), 200);
    ck_assert_int_eq(metric("fleetgate_auth_token_cache_total{result=\"hit\"} "),
                     hits < 0 ? 1 : hits + 1);
    sleep(3); /* past exp; the leeway is 0 here */
    th_resp_t r;
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, &r), 401);
    ck_assert_ptr_nonnull(strstr(r.body, "the token expired at "));
    th_resp_free(&r);
    free(t);
}
END_TEST

/* The cache compares whole tokens: a cached token with one byte changed is verified afresh (and
 * refused), and does not displace the good one's answer. */
START_TEST(cache_never_serves_a_token_that_differs) {
    char *t = token("exact", "\"projects\": {\"shop\": \"viewer\"}");
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, NULL), 200);
    long misses = metric("fleetgate_auth_token_cache_total{result=\"miss\"} ");
    size_t n = strlen(t);
    char *forged = fg_xstrdup(t);
    forged[n - 2] = forged[n - 2] == 'A' ? 'B' : 'A'; /* inside the signature */
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, NULL), 401);
    ck_assert_int_eq(metric("fleetgate_auth_token_cache_total{result=\"miss\"} "), misses + 1);
    forged[n - 2] = '\0'; /* a prefix of the cached token */
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, NULL), 401);
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, NULL), 200);
    free(forged);
    free(t);
}
END_TEST

/* A refused token is remembered by its exact bytes: a forged token sent again gets the same 401
 * and detail without another verification, while the valid token it was forged from is still
 * verified and admitted. A refusal the clock may lift (nbf ahead) is not remembered, and a key
 * reload forgets every refusal. */
START_TEST(refused_token_is_remembered_by_its_exact_bytes) {
    static const char *const miss = "fleetgate_auth_token_cache_total{result=\"miss\"} ",
                             *const refused =
                                 "fleetgate_auth_token_cache_total{result=\"refused\"} ";
    char *t = token("negative", "\"projects\": {\"shop\": \"viewer\"}");
    size_t n = strlen(t);
    char *forged = fg_xstrdup(t);
    forged[n - 2] = forged[n - 2] == 'A' ? 'B' : 'A'; /* inside the signature */
    long misses = metric(miss);
    misses = misses < 0 ? 0 : misses;
    for (int i = 0; i < 5; i++) {
        th_resp_t r;
        ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, &r), 401);
        ck_assert_ptr_nonnull(strstr(r.body, "the token's signature does not verify"));
        th_resp_free(&r);
    }
    ck_assert_int_eq(metric(miss), misses + 1); /* verified once */
    ck_assert_int_eq(metric(refused), 4);
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", t, NULL, NULL), 200);
    ck_assert_int_eq(metric(miss), misses + 2);
    forged[n - 1] = '\0'; /* one byte shorter: other bytes, verified afresh */
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, NULL), 401);
    ck_assert_int_eq(metric(miss), misses + 3);
    ck_assert_int_eq(metric(refused), 4);

    /* Not valid yet: refused every time by a verification, since time alone may admit it. */
    char *early = token("early", "\"nbf\": 4102444800");
    for (int i = 0; i < 2; i++) {
        th_resp_t r;
        ck_assert_int_eq(call(&gs, "GET", "/v1/visible", early, NULL, &r), 401);
        ck_assert_ptr_nonnull(strstr(r.body, "the token is not valid before"));
        th_resp_free(&r);
    }
    ck_assert_int_eq(metric(miss), misses + 5);
    ck_assert_int_eq(metric(refused), 4);

    /* A reload of the keys forgets the refusals: the forged token is verified again. */
    forged[n - 1] = t[n - 1];
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, NULL), 401);
    ck_assert_int_eq(metric(refused), 5);
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 12);
    ck_assert_int_eq(fg_auth_reload(gs.auth, &errs), FG_OK);
    fg_buf_free(&errs);
    ck_assert_int_eq(call(&gs, "GET", "/v1/visible", forged, NULL, NULL), 401);
    ck_assert_int_eq(metric(miss), misses + 6);
    ck_assert_int_eq(metric(refused), 5);
    free(early);
    free(forged);
    free(t);
}
END_TEST

/* ---- audit ------------------------------------------------------------- */

static json_t *audit_line(const char *rid) {
    char *text = NULL;
    size_t len;
    json_t *found = NULL;
    ck_assert_int_eq(fg_read_file(audit_path, 1 << 20, &text, &len), FG_OK);
    for (char *line = text; line && *line && !found;) {
        char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl); /* whole lines only */
        *nl = '\0';
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        ck_assert_msg(j != NULL, "not JSON: %s", line);
        const char *id = json_string_value(json_object_get(j, "requestId"));
        if (id && strcmp(id, rid) == 0)
            found = j;
        else
            json_decref(j);
        line = nl + 1;
    }
    free(text);
    return found;
}

START_TEST(audit_has_mutating_and_denied_calls_not_reads) {
    char *t = token("dev", "\"projects\": {\"shop\": \"developer\"}");
    ck_assert_int_eq(call(&gs, "POST", "/v1/projects/shop/things", t, "a-write", NULL), 200);
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/shop/things", t, "a-read", NULL), 200);
    ck_assert_int_eq(call(&gs, "POST", "/v1/projects/other/things", t, "a-forbidden", NULL), 403);
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/shop/things", "x.y.z", "a-badtoken", NULL),
                     401);
    ck_assert_int_eq(call(&gs, "GET", "/v1/projects/shop/things", NULL, "a-notoken", NULL), 401);

    json_t *w = audit_line("a-write");
    ck_assert_ptr_nonnull(w);
    ck_assert_str_eq(json_string_value(json_object_get(w, "principal")), "dev");
    ck_assert_str_eq(json_string_value(json_object_get(w, "project")), "shop");
    ck_assert_str_eq(json_string_value(json_object_get(w, "route")),
                     "/v1/projects/{project}/things");
    ck_assert_str_eq(json_string_value(json_object_get(w, "verb")), "POST");
    ck_assert_str_eq(json_string_value(json_object_get(w, "target")), "/v1/projects/shop/things");
    ck_assert_str_eq(json_string_value(json_object_get(w, "outcome")), "ok");
    ck_assert_int_eq(json_integer_value(json_object_get(w, "status")), 200);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(w, "time")));
    json_decref(w);

    ck_assert_ptr_null(audit_line("a-read")); /* reads that pass are not audited */

    json_t *f = audit_line("a-forbidden");
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(json_string_value(json_object_get(f, "outcome")), "denied");
    ck_assert_int_eq(json_integer_value(json_object_get(f, "status")), 403);
    ck_assert_str_eq(json_string_value(json_object_get(f, "project")), "other");
    json_decref(f);

    const char *unauth[] = {"a-badtoken", "a-notoken"};
    for (size_t i = 0; i < 2; i++) {
        json_t *u = audit_line(unauth[i]);
        ck_assert_msg(u != NULL, "no line for %s", unauth[i]);
        ck_assert(json_is_null(json_object_get(u, "principal")));
        ck_assert_int_eq(json_integer_value(json_object_get(u, "status")), 401);
        json_decref(u);
    }
    /* Never the token. */
    char *text = NULL;
    size_t len;
    ck_assert_int_eq(fg_read_file(audit_path, 1 << 20, &text, &len), FG_OK);
    ck_assert_ptr_null(strstr(text, t));
    ck_assert_ptr_null(strstr(text, "x.y.z"));
    free(text);
    free(t);
}
END_TEST

/* The audit log cannot be written: a change is refused with 503 audit-unavailable, counted in
 * the metrics; reads and refusals still answer. */
START_TEST(audit_failure_refuses_changes) {
    gate_server_t full;
    server_start(&full, "/dev/full");
    char *t = token("dev", "\"projects\": {\"shop\": \"developer\"}");
    th_resp_t r;
    char v[32];
    ck_assert_int_eq(call(&full, "POST", "/v1/projects/shop/things", t, "full-1", &r), 503);
    ck_assert_ptr_nonnull(strstr(r.body, "urn:fleetgate:problem:audit-unavailable"));
    ck_assert_ptr_null(th_header(&r, "RateLimit-Remaining", v, sizeof v));
    th_resp_free(&r);
    ck_assert_int_eq(call(&full, "GET", "/v1/projects/shop/things", t, NULL, NULL), 200);
    ck_assert_int_eq(call(&full, "GET", "/v1/projects/other/things", t, NULL, NULL), 403);
    fg_buf_t m;
    fg_buf_init(&m, 1 << 20);
    fg_metrics_render(&m);
    ck_assert_msg(strstr(m.data, "fleetgate_audit_write_failures_total 2") != NULL, "%s", m.data);
    fg_buf_free(&m);
    free(t);
    server_stop(&full);
}
END_TEST

static Suite *gate_suite(void) {
    Suite *s = suite_create("auth gate");
    TCase *tc = tcase_create("gate");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, roles_against_permissions);
    tcase_add_test(tc, forbidden_detail_names_role_and_project);
    tcase_add_test(tc, lists_show_only_the_callers_projects);
    tcase_add_test(tc, list_is_charged_per_item);
    tcase_add_test(tc, cached_token_never_outlives_its_exp);
    tcase_add_test(tc, cache_never_serves_a_token_that_differs);
    tcase_add_test(tc, refused_token_is_remembered_by_its_exact_bytes);
    tcase_add_test(tc, audit_has_mutating_and_denied_calls_not_reads);
    tcase_add_test(tc, audit_failure_refuses_changes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(gate_suite());
}
