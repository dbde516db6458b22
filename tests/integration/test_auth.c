/* Integration tests of authentication, the audit log and rate limits on the real daemon
 * ($FG_BUILD/fleetgate): test keys made at test time, a private redis-server on a free port, two
 * daemons sharing it, real HTTP. Covers the token table over HTTP (exact status and detail, the
 * WWW-Authenticate challenge, never an echoed token), public meta routes, cross-project refusal
 * on every route of the real table that takes a {project}, a burst across two processes that
 * gets exactly the allowed number through, the fallback when Redis is unreachable, key rotation
 * on SIGHUP, and an audit line for every denied call. */
#include "contract.h"
#include "fleetgate/api.h"
#include "fleetgate/core.h"
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

#define READ_BURST 10

static tj_keys_t keys;
static tr_redis_t redis;
static char audit_path[128], audit_down_path[128];
static pid_t daemon_a = -1, daemon_b = -1, daemon_down = -1;
static uint16_t port_a, port_b, port_down;

/* The daemons' configuration: %s are the redis URL and the audit log path. */
static void config_text(char *buf, size_t len, const char *redis_url, const char *audit,
                        const char *extra_key) {
    snprintf(buf, len,
             "{\"workers\": 2, \"openapi_file\": \"api/openapi.yaml\","
             " \"docs_file\": \"/nonexistent/docs.html\","
             " \"redis\": {\"url\": \"%s\"}, \"log\": {\"level\": \"warn\", \"access_log\": false},"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]},"
             "            {\"kid\": \"ec1\", \"pem_file\": \"%s\", \"algs\": [\"ES256\"]}%s],"
             "  \"jwks_file\": \"%s\", \"audit_log\": \"%s\"},"
             " \"rate_limits\": {\"read_per_minute\": 1, \"read_burst\": %d,"
             "  \"redis_timeout_ms\": 200}}",
             redis_url, keys.rsa_pub, keys.ec_pub, extra_key ? extra_key : "", keys.jwks, audit,
             READ_BURST);
}

static void suite_setup(void) {
    char cfg[4096], url[64];
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    snprintf(audit_path, sizeof audit_path, "%s/audit.log", keys.dir);
    snprintf(audit_down_path, sizeof audit_down_path, "%s/audit-down.log", keys.dir);
    config_text(cfg, sizeof cfg, redis.url, audit_path, NULL);
    daemon_a = th_daemon_start(cfg, &port_a, NULL);
    daemon_b = th_daemon_start(cfg, &port_b, NULL);
    /* A Redis nobody listens on: the daemon must start and fall back to local buckets. */
    snprintf(url, sizeof url, "redis://127.0.0.1:%u/0", (unsigned)th_free_port());
    config_text(cfg, sizeof cfg, url, audit_down_path, NULL);
    daemon_down = th_daemon_start(cfg, &port_down, NULL);
}

static void suite_teardown(void) {
    pid_t *pids[] = {&daemon_a, &daemon_b, &daemon_down};
    for (size_t i = 0; i < 3; i++) {
        if (*pids[i] > 0)
            th_daemon_stop(*pids[i], SIGTERM, 5000);
        *pids[i] = -1;
    }
    tr_redis_stop(&redis);
    unlink(audit_path);
    unlink(audit_down_path);
    tj_keys_remove(&keys);
}

static void require_daemons(void) {
    ck_assert_msg(daemon_a > 0 && daemon_b > 0 && daemon_down > 0, "a daemon did not start");
}

/* GET path on port with an optional bearer token and request id. */
static void get(uint16_t port, const char *path, const char *token, const char *rid, th_resp_t *r) {
    char url[256], *auth = NULL, ridh[128];
    const char *hdrs[3] = {NULL, NULL, NULL};
    size_t n = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    if (token) {
        auth = fg_xasprintf("Authorization: Bearer %s", token);
        hdrs[n++] = auth;
    }
    if (rid) {
        snprintf(ridh, sizeof ridh, "X-Request-Id: %s", rid);
        hdrs[n++] = ridh;
    }
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, r), 0);
    free(auth);
}

static char *claims(const char *sub, long exp_delta, const char *more) {
    long now = (long)time(NULL);
    return fg_xasprintf("{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"%s\", "
                        "\"exp\": %ld%s%s}",
                        sub, now + exp_delta, more ? ", " : "", more ? more : "");
}

static char *sign(const char *alg, const char *key, const char *kid, const char *claims_json) {
    char *tok = tj_sign(alg, key, kid, claims_json);
    ck_assert_msg(tok != NULL, "cannot sign %s", claims_json);
    return tok;
}

static const char *detail_of(const th_resp_t *r, char *buf, size_t len) {
    json_error_t e;
    json_t *p = json_loads(r->body, 0, &e);
    snprintf(buf, len, "%s", p ? json_string_value(json_object_get(p, "detail")) : "(not JSON)");
    json_decref(p);
    return buf;
}

static void check_contract(const char *path, const th_resp_t *r) {
    char err[2048];
    int rc = contract_check_headers("GET", path, r->status, r->headers, r->body, r->len, err,
                                    sizeof err);
    ck_assert_msg(rc == CONTRACT_VALID, "%s %ld: %s", path, r->status, err);
}

/* ---- the token table over HTTP ----------------------------------------- */

typedef enum { TOK_SIGNED, TOK_TAMPERED, TOK_RAW } tok_kind_t;

typedef struct {
    const char *name;
    tok_kind_t kind;
    const char *alg, *kid;
    int key; /* 0 rsa, 1 rsa2 (the wrong key), 2 ec, 3 the RSA public key (HS256), 4 none */
    long exp_delta;
    const char *more_claims; /* may drop a claim with "drop:NAME" */
    const char *raw;         /* TOK_RAW */
    long status;
    const char *detail; /* NULL: not checked (200) */
} http_case_t;

static const http_case_t cases[] = {
    {"valid_rs256", TOK_SIGNED, "RS256", "rsa1", 0, 3600, NULL, NULL, 200, NULL},
    {"valid_es256", TOK_SIGNED, "ES256", "ec1", 2, 3600, NULL, NULL, 200, NULL},
    {"valid_jwks", TOK_SIGNED, "ES256", "jwks-ec", 2, 3600, NULL, NULL, 200, NULL},
    {"expired", TOK_SIGNED, "RS256", "rsa1", 0, -3600, NULL, NULL, 401, "the token expired at "},
    {"not_yet_valid", TOK_SIGNED, "RS256", "rsa1", 0, 7200, "\"nbf\": 4102444800", NULL, 401,
     "the token is not valid before 2100-01-01T00:00:00Z"},
    {"wrong_iss", TOK_SIGNED, "RS256", "rsa1", 0, 3600, "drop:iss", NULL, 401,
     "the token's iss is not the configured issuer"},
    {"wrong_aud", TOK_SIGNED, "RS256", "rsa1", 0, 3600, "drop:aud", NULL, 401,
     "the token's aud does not name this service"},
    {"bad_signature", TOK_SIGNED, "RS256", "rsa1", 1, 3600, NULL, NULL, 401,
     "the token's signature does not verify"},
    {"tampered_payload", TOK_TAMPERED, "RS256", "rsa1", 0, 3600, NULL, NULL, 401,
     "the token's signature does not verify"},
    {"alg_none", TOK_SIGNED, "none", "rsa1", 4, 3600, NULL, NULL, 401,
     "the token's alg none is not accepted (RS256, RS384, RS512, ES256, ES384 only)"},
    {"hs256_with_public_key", TOK_SIGNED, "HS256", "rsa1", 3, 3600, NULL, NULL, 401,
     "the token's alg HS256 is not accepted (RS256, RS384, RS512, ES256, ES384 only)"},
    {"unknown_kid", TOK_SIGNED, "RS256", "nobody", 0, 3600, NULL, NULL, 401,
     "no configured key has the token's kid"},
    {"missing_sub", TOK_SIGNED, "RS256", "rsa1", 0, 3600, "drop:sub", NULL, 401,
     "the token has no sub claim"},
    {"missing_exp", TOK_SIGNED, "RS256", "rsa1", 0, 3600, "drop:exp", NULL, 401,
     "the token has no exp claim"},
    {"malformed_two_parts", TOK_RAW, NULL, NULL, 0, 0, NULL, "eyJhbGciOiJSUzI1NiJ9.e30", 401,
     "the token is not a JWS: it needs 3 dot-separated parts (got 2)"},
    {"malformed_bad_base64", TOK_RAW, NULL, NULL, 0, 0, NULL, "eyJ!!!.e30.c2ln", 401,
     "the token's header is not base64url"},
    {"malformed_huge_header", TOK_RAW, NULL, NULL, 0, 0, NULL, "HUGE", 401,
     "the token's header is larger than 1024 bytes"},
};

static const char *case_key(int k) {
    const char *paths[] = {keys.rsa_priv, keys.rsa2_priv, keys.ec_priv, keys.rsa_pub, NULL};
    return paths[k];
}

/* The case's claims: the good ones, with a claim dropped or changed as the case says. */
static char *case_claims(const http_case_t *c) {
    long now = (long)time(NULL), exp = now + c->exp_delta;
    const char *m = c->more_claims;
    if (m && strcmp(m, "drop:iss") == 0)
        return fg_xasprintf("{\"iss\": \"https://evil.test\", \"aud\": \"fleetgate\", "
                            "\"sub\": \"table\", \"exp\": %ld}",
                            exp);
    if (m && strcmp(m, "drop:aud") == 0)
        return fg_xasprintf("{\"iss\": \"https://id.test\", \"aud\": \"other\", "
                            "\"sub\": \"table\", \"exp\": %ld}",
                            exp);
    if (m && strcmp(m, "drop:sub") == 0)
        return fg_xasprintf("{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"exp\": %ld}",
                            exp);
    if (m && strcmp(m, "drop:exp") == 0)
        return fg_xstrdup("{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": "
                          "\"table\"}");
    return claims("table", c->exp_delta, m);
}

static char *case_token(const http_case_t *c) {
    if (c->kind == TOK_RAW) {
        if (strcmp(c->raw, "HUGE") != 0)
            return fg_xstrdup(c->raw);
        char *t = fg_xmalloc(3000 + 16);
        memset(t, 'A', 3000);
        memcpy(t + 3000, ".e30.c2ln", 10);
        return t;
    }
    char *cl = case_claims(c);
    char *tok = sign(c->alg, case_key(c->key), c->kid, cl);
    free(cl);
    if (c->kind == TOK_TAMPERED) {
        /* The payload of an admin's token between this token's header and signature. */
        char *admin_claims = claims("table", 3600, "\"groups\": [\"fleetgate-admins\"]");
        char *admin = sign("RS256", keys.rsa2_priv, "rsa1", admin_claims);
        char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');
        char *a1 = strchr(admin, '.'), *a2 = strrchr(admin, '.');
        char *forged = fg_xasprintf("%.*s%.*s%s", (int)(d1 - tok), tok, (int)(a2 - a1), a1, d2);
        free(admin_claims);
        free(admin);
        free(tok);
        tok = forged;
    }
    return tok;
}

static bool str_is(const json_t *v, const char *want) {
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

typedef struct {
    const char *rid, *reason, *client; /* NULL: any */
    long status;
    long lines;    /* denied lines that match */
    long refusals; /* the refusals they account for: a folded line counts its "repeated" */
    json_t *first; /* the first matching line (a new reference), or NULL */
} audit_query_t;

/* Scans the audit log for denied lines matching q; every line must be valid JSON. */
static void audit_scan(const char *path, audit_query_t *q) {
    char *text = NULL;
    size_t len;
    q->lines = q->refusals = 0;
    q->first = NULL;
    if (fg_read_file(path, 16u << 20, &text, &len) != FG_OK)
        return;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        ck_assert_msg(j != NULL, "audit line is not JSON: %s", line);
        if ((q->rid == NULL || str_is(json_object_get(j, "requestId"), q->rid)) &&
            (q->reason == NULL || str_is(json_object_get(j, "reason"), q->reason)) &&
            (q->client == NULL || str_is(json_object_get(j, "client"), q->client)) &&
            json_integer_value(json_object_get(j, "status")) == q->status &&
            str_is(json_object_get(j, "outcome"), "denied")) {
            json_t *rep = json_object_get(j, "repeated");
            q->lines++;
            q->refusals += rep ? (long)json_integer_value(rep) : 1;
            if (q->first == NULL)
                q->first = json_incref(j);
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
}

/* Does the audit log hold a line for this request id with this status? */
static bool audit_has(const char *path, const char *rid, long status) {
    audit_query_t q = {.rid = rid, .status = status};
    audit_scan(path, &q);
    json_decref(q.first);
    return q.lines > 0;
}

/* Is this refusal in the audit log: its own line, or folded into the first of its kind (the
 * same reason) written before it? */
static bool audit_has_refusal(const char *path, const char *rid, const char *reason, long status) {
    audit_query_t q = {.reason = reason, .status = status};
    if (audit_has(path, rid, status))
        return true;
    audit_scan(path, &q);
    json_decref(q.first);
    return q.lines > 0;
}

static bool file_contains(const char *path, const char *needle) {
    char *text = NULL;
    size_t len;
    if (fg_read_file(path, 16u << 20, &text, &len) != FG_OK)
        return false;
    bool found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

START_TEST(token_table_over_http) {
    require_daemons();
    const http_case_t *c = &cases[_i];
    char *tok = case_token(c);
    char rid[64], detail[512], www[256];
    snprintf(rid, sizeof rid, "tok-%s", c->name);
    th_resp_t r;
    get(port_a, "/v1/whoami", tok, rid, &r);
    ck_assert_msg(r.status == c->status, "%s: status %ld: %s", c->name, r.status, r.body);
    if (c->status == 200) {
        json_error_t e;
        json_t *who = json_loads(r.body, 0, &e);
        ck_assert_str_eq(json_string_value(json_object_get(who, "subject")), "table");
        json_decref(who);
    } else {
        ck_assert_msg(strncmp(detail_of(&r, detail, sizeof detail), c->detail, strlen(c->detail)) ==
                          0,
                      "%s:\n got: %s\nwant: %s", c->name, detail, c->detail);
        ck_assert_ptr_nonnull(th_header(&r, "WWW-Authenticate", www, sizeof www));
        ck_assert_msg(strstr(www, "Bearer") == www && strstr(www, "error=\"invalid_token\""), "%s",
                      www);
        ck_assert_msg(strstr(r.body, tok) == NULL, "%s: the token is echoed", c->name);
        ck_assert_msg(audit_has_refusal(audit_path, rid, detail, 401), "%s: no audit line",
                      c->name);
        ck_assert_msg(!file_contains(audit_path, tok), "%s: the audit log holds the token",
                      c->name);
    }
    if (_i == 0 || c->status == 401)
        if (_i == 0 || strcmp(c->name, "expired") == 0)
            check_contract("/v1/whoami", &r);
    th_resp_free(&r);
    free(tok);
}
END_TEST

/* Sends GET path without a token from the local address src, on a connection of its own;
 * returns the status (0 when no answer came). */
static long raw_get_from(const char *src, uint16_t port, const char *path) {
    char req[512], buf[8192];
    int fd = th_connect_from(src, port);
    ck_assert_int_ge(fd, 0);
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    th_read_all(fd, buf, sizeof buf, 5000);
    close(fd);
    return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? strtol(buf + 9, NULL, 10) : 0;
}

/* A flood of calls without a token from one address: after refusal_burst refusals it gets
 * 429 without its token looked at, and the audit log gets a handful of lines that still
 * account for every refusal, the first of each kind written in full. */
START_TEST(unauthenticated_flood_is_limited_and_folded) {
    require_daemons();
    enum { CALLS = 300 };
    long s401 = 0, s429 = 0;
    for (int i = 0; i < CALLS; i++) {
        long st = raw_get_from("127.0.0.3", port_a, "/v1/whoami");
        s401 += st == 401;
        s429 += st == 429;
    }
    ck_assert_int_ge(s401, 100); /* rate_limits.refusal_burst's default */
    ck_assert_int_ge(s429, 100);
    ck_assert_int_eq(s401 + s429, CALLS);
    sleep(3); /* the folded counts are written when their interval (1 s) ends */
    audit_query_t q401 = {.client = "127.0.0.3", .status = 401};
    audit_query_t q429 = {.client = "127.0.0.3", .status = 429};
    audit_scan(audit_path, &q401);
    audit_scan(audit_path, &q429);
    ck_assert_int_eq(q401.refusals, s401);
    ck_assert_int_eq(q429.refusals, s429);
    ck_assert_msg(q401.lines + q429.lines <= 40, "%ld audit lines for %d refusals",
                  q401.lines + q429.lines, CALLS);
    ck_assert(str_is(json_object_get(q401.first, "reason"), "no bearer token in Authorization"));
    ck_assert_ptr_nonnull(json_object_get(q401.first, "requestId"));
    ck_assert_ptr_null(json_object_get(q401.first, "repeated"));
    ck_assert_msg(strncmp(json_string_value(json_object_get(q429.first, "reason")),
                          "too many refused calls from this address", 40) == 0,
                  "%s", json_string_value(json_object_get(q429.first, "reason")));
    json_decref(q401.first);
    json_decref(q429.first);
}
END_TEST

/* A refusal is audited whatever its path: a 9,000-byte one is cut (and says so), bytes that
 * are not UTF-8 are shown as \xNN, and the line is never dropped. */
START_TEST(refusal_with_long_or_invalid_path_is_audited_whole) {
    require_daemons();
    char url[9200];
    th_resp_t r;
    const char *hdrs[] = {"X-Request-Id: long-path", NULL};
    int n = snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/", (unsigned)port_a);
    memset(url + n, 'a', 9000);
    snprintf(url + n + 9000, sizeof url - (size_t)n - 9000, "/pods");
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, &r), 0);
    ck_assert_int_eq(r.status, 401);
    th_resp_free(&r);
    audit_query_t q = {.rid = "long-path", .status = 401};
    audit_scan(audit_path, &q);
    ck_assert_int_eq(q.lines, 1);
    json_t *cut = json_object_get(q.first, "truncated");
    ck_assert_msg(json_is_array(cut) && json_array_size(cut) == 2, "truncated: %s",
                  json_dumps(cut, JSON_ENCODE_ANY));
    ck_assert(str_is(json_array_get(cut, 0), "project"));
    ck_assert(str_is(json_array_get(cut, 1), "target"));
    json_decref(q.first);

    get(port_a, "/v1/projects/%ff%fe/pods", NULL, "bad-utf8", &r);
    ck_assert_int_eq(r.status, 401);
    json_error_t e;
    json_t *p = json_loads(r.body, 0, &e);
    ck_assert(str_is(json_object_get(p, "instance"), "/v1/projects/\\xff\\xfe/pods"));
    ck_assert_ptr_nonnull(json_object_get(p, "detail"));
    json_decref(p);
    th_resp_free(&r);
    audit_query_t u = {.rid = "bad-utf8", .status = 401};
    audit_scan(audit_path, &u);
    ck_assert_int_eq(u.lines, 1);
    ck_assert(str_is(json_object_get(u.first, "project"), "\\xff\\xfe"));
    ck_assert(str_is(json_object_get(u.first, "target"), "/v1/projects/\\xff\\xfe/pods"));
    ck_assert(str_is(json_object_get(u.first, "reason"), "no bearer token in Authorization"));
    json_decref(u.first);
}
END_TEST

START_TEST(no_token_gets_a_challenge_without_error_code) {
    require_daemons();
    th_resp_t r;
    char www[256], detail[256];
    get(port_a, "/v1/whoami", NULL, "no-token", &r);
    ck_assert_int_eq(r.status, 401);
    ck_assert_str_eq(th_header(&r, "WWW-Authenticate", www, sizeof www),
                     "Bearer realm=\"fleetgate\"");
    ck_assert_str_eq(detail_of(&r, detail, sizeof detail), "no bearer token in Authorization");
    check_contract("/v1/whoami", &r);
    th_resp_free(&r);
    ck_assert(audit_has(audit_path, "no-token", 401));
}
END_TEST

START_TEST(meta_routes_stay_public) {
    require_daemons();
    const char *paths[] = {"/healthz", "/metrics", "/openapi.yaml"};
    for (size_t i = 0; i < 3; i++) {
        th_resp_t r;
        get(port_a, paths[i], NULL, NULL, &r);
        ck_assert_msg(r.status == 200, "%s: %ld", paths[i], r.status);
        th_resp_free(&r);
    }
}
END_TEST

START_TEST(whoami_shows_roles_and_rate_headers) {
    require_daemons();
    char *cl = claims("whoami", 3600,
                      "\"projects\": {\"shop\": \"developer\", \"blog\": \"viewer\"}, "
                      "\"groups\": [\"eng\"]");
    char *tok = sign("RS256", keys.rsa_priv, "rsa1", cl);
    th_resp_t r;
    char v[64];
    get(port_a, "/v1/whoami", tok, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"subject\":\"whoami\",\"groups\":[\"eng\"],\"admin\":false,"
                             "\"projects\":{\"blog\":\"viewer\",\"shop\":\"developer\"}}");
    ck_assert_str_eq(th_header(&r, "RateLimit-Limit", v, sizeof v), "10");
    ck_assert_str_eq(th_header(&r, "RateLimit-Remaining", v, sizeof v), "9");
    ck_assert_ptr_nonnull(th_header(&r, "RateLimit-Reset", v, sizeof v));
    check_contract("/v1/whoami", &r);
    th_resp_free(&r);
    free(tok);
    free(cl);
}
END_TEST

/* Every route of the real table that takes a {project}: a caller with a role in another
 * project only is refused, whatever the route's permission. */
START_TEST(cross_project_refused_on_every_project_route) {
    require_daemons();
    char *cl = claims("cross", 3600, "\"projects\": {\"shop\": \"operator\"}");
    char *tok = sign("RS256", keys.rsa_priv, "rsa1", cl);
    size_t n, checked = 0;
    const fg_route_t *routes = fg_api_routes(&n);
    for (size_t i = 0; i < n; i++) {
        const char *pat = routes[i].pattern;
        if (strstr(pat, "{project}") == NULL || routes[i].perm == FG_PERM_PUBLIC)
            continue;
        /* {project} becomes "other", every other parameter "x". */
        char path[512];
        size_t o = 0;
        for (const char *p = pat; *p && o + 8 < sizeof path;) {
            if (*p == '{') {
                const char *end = strchr(p, '}');
                const char *val = strncmp(p, "{project}", 9) == 0 ? "other" : "x";
                o += (size_t)snprintf(path + o, sizeof path - o, "%s", val);
                p = end + 1;
            } else {
                path[o++] = *p++;
            }
        }
        path[o] = '\0';
        char url[600];
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port_a, path);
        char *auth = fg_xasprintf("Authorization: Bearer %s", tok);
        const char *hdrs[] = {auth, "Content-Type: application/json", NULL};
        th_resp_t r;
        bool body = strcmp(routes[i].method, "GET") != 0 && strcmp(routes[i].method, "DELETE");
        ck_assert_int_eq(
            th_request(routes[i].method, url, hdrs, body ? "{}" : NULL, body ? 2 : -1, 0, &r), 0);
        ck_assert_msg(r.status == 403, "%s %s: %ld", routes[i].method, path, r.status);
        th_resp_free(&r);
        free(auth);
        checked++;
    }
    fprintf(stderr, "cross-project: %zu routes with {project} checked\n", checked);
    free(tok);
    free(cl);
}
END_TEST

/* Two daemons sharing one Redis: a burst alternating between them gets exactly READ_BURST
 * answers through (read_per_minute is 1, so nothing refills during the test). */
START_TEST(burst_across_two_processes_gets_exactly_the_limit) {
    require_daemons();
    char *cl = claims("burst", 3600, NULL);
    char *tok = sign("RS256", keys.rsa_priv, "rsa1", cl);
    int ok = 0, limited = 0;
    for (int i = 0; i < 3 * READ_BURST; i++) {
        th_resp_t r;
        char rid[32], v[32];
        snprintf(rid, sizeof rid, "burst-%d", i);
        get(i % 2 ? port_b : port_a, "/v1/whoami", tok, rid, &r);
        if (r.status == 200) {
            ok++;
        } else {
            ck_assert_msg(r.status == 429, "%ld: %s", r.status, r.body);
            ck_assert_ptr_nonnull(th_header(&r, "Retry-After", v, sizeof v));
            ck_assert_int_ge(strtol(v, NULL, 10), 1);
            ck_assert_str_eq(th_header(&r, "RateLimit-Remaining", v, sizeof v), "0");
            if (limited == 0)
                check_contract("/v1/whoami", &r);
            if (limited < 2) /* the first of its kind on each daemon; the rest are folded */
                ck_assert_msg(audit_has(audit_path, rid, 429), "no audit line for %s", rid);
            limited++;
        }
        th_resp_free(&r);
    }
    ck_assert_int_eq(ok, READ_BURST);
    ck_assert_int_eq(limited, 2 * READ_BURST);
    free(tok);
    free(cl);
}
END_TEST

/* Redis unreachable: the daemon started anyway, limits hold per process, and the metrics say
 * so. */
START_TEST(redis_down_falls_back_to_local_buckets) {
    require_daemons();
    char *cl = claims("fallback", 3600, NULL);
    char *tok = sign("RS256", keys.rsa_priv, "rsa1", cl);
    int ok = 0, limited = 0;
    for (int i = 0; i < READ_BURST + 5; i++) {
        th_resp_t r;
        get(port_down, "/v1/whoami", tok, NULL, &r);
        ok += r.status == 200;
        limited += r.status == 429;
        th_resp_free(&r);
    }
    ck_assert_int_eq(ok, READ_BURST);
    ck_assert_int_eq(limited, 5);
    th_resp_t m;
    get(port_down, "/metrics", NULL, NULL, &m);
    ck_assert_int_eq(m.status, 200);
    const char *line = strstr(m.body, "\nfleetgate_ratelimit_local_decisions_total ");
    ck_assert_msg(line != NULL, "%s", m.body);
    ck_assert_int_eq(
        strtol(line + strlen("\nfleetgate_ratelimit_local_decisions_total "), NULL, 10),
        READ_BURST + 5);
    th_resp_free(&m);
    free(tok);
    free(cl);
}
END_TEST

START_TEST(denials_are_counted_in_metrics) {
    require_daemons();
    th_resp_t r;
    get(port_a, "/v1/whoami", "not.a.token", NULL, &r);
    ck_assert_int_eq(r.status, 401);
    th_resp_free(&r);
    get(port_a, "/metrics", NULL, NULL, &r);
    ck_assert_ptr_nonnull(strstr(r.body, "fleetgate_auth_denied_total{reason=\"unauthorized\"}"));
    ck_assert_ptr_nonnull(strstr(r.body, "fleetgate_audit_write_failures_total 0"));
    th_resp_free(&r);
}
END_TEST

/* SIGHUP re-reads the keys: a rotated key file takes over, the old key's tokens (even cached
 * ones) stop working. */
START_TEST(sighup_rotates_keys) {
    char pub[160], priv[160], old_priv[160], extra[256], cfg[4096], audit[160];
    snprintf(pub, sizeof pub, "%s/rot.pub.pem", keys.dir);
    snprintf(priv, sizeof priv, "%s/rot.key.pem", keys.dir);
    snprintf(old_priv, sizeof old_priv, "%s/rot-old.key.pem", keys.dir);
    snprintf(audit, sizeof audit, "%s/audit-rot.log", keys.dir);
    ck_assert_int_eq(tj_rsa_pair(pub, old_priv), 0);
    snprintf(extra, sizeof extra,
             ", {\"kid\": \"rot\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}", pub);
    config_text(cfg, sizeof cfg, redis.url, audit, extra);
    uint16_t port;
    pid_t pid = th_daemon_start(cfg, &port, NULL);
    ck_assert_int_gt(pid, 0);
    char *cl = claims("rotation", 3600, NULL);
    char *old_tok = sign("RS256", old_priv, "rot", cl);
    th_resp_t r;
    get(port, "/v1/whoami", old_tok, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);

    ck_assert_int_eq(tj_rsa_pair(pub, priv), 0); /* the new key replaces the file */
    char *new_tok = sign("RS256", priv, "rot", cl);
    kill(pid, SIGHUP);
    int status = 0;
    for (int i = 0; i < 100 && status != 200; i++) { /* the reload is asynchronous */
        get(port, "/v1/whoami", new_tok, NULL, &r);
        status = (int)r.status;
        th_resp_free(&r);
        if (status != 200)
            usleep(20000);
    }
    ck_assert_int_eq(status, 200);
    get(port, "/v1/whoami", old_tok, NULL, &r);
    ck_assert_int_eq(r.status, 401);
    th_resp_free(&r);
    ck_assert_int_eq(th_daemon_stop(pid, SIGTERM, 5000), 0);
    unlink(pub);
    unlink(priv);
    unlink(old_priv);
    unlink(audit);
    free(old_tok);
    free(new_tok);
    free(cl);
}
END_TEST

static Suite *auth_suite(void) {
    Suite *s = suite_create("auth (daemon)");
    TCase *tc = tcase_create("daemon");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, token_table_over_http, 0, sizeof cases / sizeof cases[0]);
    tcase_add_test(tc, no_token_gets_a_challenge_without_error_code);
    tcase_add_test(tc, meta_routes_stay_public);
    tcase_add_test(tc, whoami_shows_roles_and_rate_headers);
    tcase_add_test(tc, cross_project_refused_on_every_project_route);
    tcase_add_test(tc, burst_across_two_processes_gets_exactly_the_limit);
    tcase_add_test(tc, redis_down_falls_back_to_local_buckets);
    tcase_add_test(tc, denials_are_counted_in_metrics);
    tcase_add_test(tc, unauthenticated_flood_is_limited_and_folded);
    tcase_add_test(tc, refusal_with_long_or_invalid_path_is_audited_whole);
    tcase_add_test(tc, sighup_rotates_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    fg_log_set_level(FG_LOG_ERROR);
    return tm_run(auth_suite());
}
