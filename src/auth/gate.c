/* auth/gate.c: the dispatcher's gate and seal, the verified-token cache, and key reloads.
 *
 * The gate runs before a matched route's handler: the route's permission (public routes pass
 * untouched), the bearer token (verified, or found in the cache), the caller's role in the
 * route's {project}, then the rate limit. Each refusal replies itself (401 with
 * WWW-Authenticate, 403, 429 with Retry-After). The seal runs just before any reply of a gated
 * request leaves: it adds RateLimit-Limit/-Remaining/-Reset and writes the audit line of a
 * mutating call (any method but GET/HEAD/OPTIONS) or a refused one (401/403/429). When a mutating
 * call cannot be audited its reply becomes 503 (fail closed); and while the audit log is known
 * to fail, mutating calls are refused by the gate before their handler acts.
 *
 * The token cache is a fixed array indexed by a keyed 64-bit hash of the token (a random seed per
 * process), holding the token itself for an exact comparison, one entry per slot (a newer token
 * takes the slot over), behind striped mutexes. An entry holds a principal reference and
 * serves only while now < exp and the key set is the one that verified it (a reload bumps the
 * generation, so removed keys stop working at once). After the keyed hash matched, the bytes are
 * compared with memcmp: a token reaches that comparison only when its keyed hash equals the
 * cached one's (which nobody outside can aim at, the seed being secret), so how long the
 * comparison takes tells nothing that the hash did not.
 *
 * Refused tokens are remembered too (the refusal cache): a forged token costs a full signature
 * verification (an RS256 verify is about 400 us), and a client repeating one would make the
 * gate pay it every time. The same keyed hash finds a slot of a small fixed table (REFUSED_SLOTS)
 * holding the token's exact bytes, the key-set generation and the refusal's text for at most
 * REFUSED_TTL_MS. Only refusals that hold whatever the clock does are remembered (not an nbf
 * still ahead), and only for the exact bytes and key set that were refused, so which tokens
 * are refused does not change: a valid token is never answered from it.
 *
 * Refusals are kept cheap: a client address that caused more than rate_limits.refusal_burst
 * refusals (401, 403) lately gets 429 before its token is even looked at, and identical refusals
 * are folded in the audit log (fg_audit_refusal). Client-supplied fields of an audit line
 * (path, subject, project) are cut at AUDIT_FIELD_MAX bytes, named in "truncated", and bytes
 * that are not UTF-8 are shown as \xNN: a line is never dropped for its content.
 *
 * Key set swaps: readers take a reference under a mutex held for two instructions, and only on
 * a cache miss; the old set is freed by whichever request lets it go last.
 */
#include "auth_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CACHE_STRIPES   64
#define REFUSED_SLOTS   1024 /* power of two */
#define REFUSED_TTL_MS  10000
#define AUDIT_FIELD_MAX 1024 /* bytes of one client-supplied field in an audit line */

/* A verified token: found by a keyed 64-bit hash of its bytes, then compared whole, so a lookup
 * costs a pass over the token, not a SHA-256 of it. */
typedef struct {
    uint64_t h;  /* fg_hash64 of the token under the cache's random seed */
    char *token; /* the token's bytes (owned) */
    size_t len;
    fg_principal_t *p; /* NULL: empty */
    uint64_t gen;
} centry_t;

/* A refused token: its exact bytes, the key set that refused it, and the refusal's text. */
typedef struct {
    uint64_t h;
    char *token; /* owned; NULL: empty */
    size_t len;
    uint64_t gen;
    int64_t until_ms; /* monotonic */
    char why[256];
} rentry_t;

struct fg_auth {
    const fg_config_t *conf;
    pthread_mutex_t ks_mu;
    fg_keyset_t *ks;
    atomic_uint_fast64_t gen;
    centry_t *cache;
    size_t cache_mask;   /* entries - 1; no cache when entries is 0 */
    uint64_t cache_seed; /* random: nobody outside can aim tokens at one slot */
    pthread_mutex_t cache_mu[CACHE_STRIPES];
    rentry_t *refused; /* REFUSED_SLOTS entries, with the cache (same seed, same stripes) */
    fg_audit_t *audit;
    fg_ratelimit_t *rl;
    fg_metric_t *m_denied, *m_audit_fail, *m_cache, *m_fallback;
};

/* What the gate knows of one request; freed with it. */
typedef struct {
    fg_auth_t *auth;
    fg_principal_t *principal;
    char *project;
    char reason[160];   /* why it was refused, for the audit line */
    bool reason_varies; /* the reason holds numbers that change call to call (429s) */
    bool has_rate;
    fg_rate_result_t rate;
    fg_stream_lease_t *lease;
} reqstate_t;

static void reqstate_free(void *ptr) {
    reqstate_t *st = ptr;
    if (st->lease)
        fg_ratelimit_stream_release(st->auth->rl, st->lease);
    fg_principal_release(st->principal);
    free(st->project);
    free(st);
}

/* ---- lifecycle --------------------------------------------------------- */

static void register_metrics(fg_auth_t *a) {
    static const char *const reason[] = {"reason", NULL};
    static const char *const result[] = {"result", NULL};
    a->m_denied =
        fg_metrics_register("fleetgate_auth_denied_total", "Calls refused by the gate, by reason.",
                            FG_METRIC_COUNTER, reason);
    a->m_audit_fail =
        fg_metrics_register("fleetgate_audit_write_failures_total",
                            "Audit lines that could not be written (mutating calls so refused).",
                            FG_METRIC_COUNTER, NULL);
    fg_metric_add(a->m_audit_fail, NULL, 0);
    a->m_cache = fg_metrics_register("fleetgate_auth_token_cache_total",
                                     "Token checks: served from the cache (hit), refused from the "
                                     "refusal cache (refused), verified (miss).",
                                     FG_METRIC_COUNTER, result);
    a->m_fallback = fg_metrics_register(
        "fleetgate_ratelimit_local_decisions_total",
        "Rate-limit decisions taken by per-process buckets because Redis could not answer.",
        FG_METRIC_COUNTER, NULL);
    fg_metric_add(a->m_fallback, NULL, 0);
}

int fg_auth_new(fg_auth_t **out, const fg_config_t *conf, fg_redis_t *redis, fg_buf_t *errs) {
    fg_auth_t *a = fg_xcalloc(1, sizeof *a);
    int rc = FG_OK;
    a->conf = conf;
    pthread_mutex_init(&a->ks_mu, NULL);
    for (int i = 0; i < CACHE_STRIPES; i++)
        pthread_mutex_init(&a->cache_mu[i], NULL);
    atomic_init(&a->gen, 1);
    if (conf->auth.token_cache_entries > 0) {
        size_t n = 1;
        while (n < (size_t)conf->auth.token_cache_entries)
            n <<= 1;
        a->cache = fg_xcalloc(n, sizeof *a->cache);
        a->cache_mask = n - 1;
        a->refused = fg_xcalloc(REFUSED_SLOTS, sizeof *a->refused);
        fg_random_bytes(&a->cache_seed, sizeof a->cache_seed);
    }
    if (fg_keyset_load(&a->ks, &conf->auth, errs) != FG_OK) {
        rc = FG_EINVAL;
        goto out;
    }
    if (fg_audit_open(&a->audit, conf->auth.audit_log) != FG_OK) {
        fg_buf_appendf(errs, "auth.audit_log: cannot open %s\n", conf->auth.audit_log);
        rc = FG_EIO;
        goto out;
    }
    if (conf->rate.enabled)
        fg_ratelimit_new(&a->rl, &conf->rate, redis);
    register_metrics(a);
out:
    if (rc != FG_OK) {
        fg_auth_free(a);
        return rc;
    }
    *out = a;
    return FG_OK;
}

void fg_auth_free(fg_auth_t *a) {
    if (a == NULL)
        return;
    for (size_t i = 0; a->cache && i <= a->cache_mask; i++) {
        fg_principal_release(a->cache[i].p);
        free(a->cache[i].token);
    }
    free(a->cache);
    for (size_t i = 0; a->refused && i < REFUSED_SLOTS; i++)
        free(a->refused[i].token);
    free(a->refused);
    for (int i = 0; i < CACHE_STRIPES; i++)
        pthread_mutex_destroy(&a->cache_mu[i]);
    fg_keyset_release(a->ks);
    pthread_mutex_destroy(&a->ks_mu);
    fg_audit_close(a->audit);
    fg_ratelimit_free(a->rl);
    free(a);
}

int fg_auth_reload(fg_auth_t *a, fg_buf_t *errs) {
    fg_keyset_t *fresh = NULL;
    if (fg_keyset_load(&fresh, &a->conf->auth, errs) != FG_OK)
        return FG_EINVAL;
    pthread_mutex_lock(&a->ks_mu);
    fg_keyset_t *old = a->ks;
    a->ks = fresh;
    atomic_fetch_add(&a->gen, 1); /* cached verifications by the old keys stop serving */
    pthread_mutex_unlock(&a->ks_mu);
    fg_keyset_release(old);
    if (fg_audit_reopen(a->audit) != FG_OK) {
        fg_buf_appendf(errs, "auth.audit_log: cannot reopen %s\n", a->conf->auth.audit_log);
        return FG_EIO;
    }
    return FG_OK;
}

/* ---- verified-token cache ---------------------------------------------- */

/* A cached principal (a new reference) for this token, or NULL. */
static fg_principal_t *cache_get(fg_auth_t *a, uint64_t h, const char *token, size_t len,
                                 int64_t now, uint64_t gen) {
    if (a->cache == NULL)
        return NULL;
    size_t i = (size_t)(h & a->cache_mask);
    fg_principal_t *p = NULL;
    pthread_mutex_lock(&a->cache_mu[i % CACHE_STRIPES]);
    centry_t *e = &a->cache[i];
    if (e->p && e->gen == gen && now < e->p->exp && e->h == h && e->len == len &&
        memcmp(e->token, token, len) == 0) {
        p = e->p;
        fg_principal_retain(p);
    }
    pthread_mutex_unlock(&a->cache_mu[i % CACHE_STRIPES]);
    return p;
}

static void cache_put(fg_auth_t *a, uint64_t h, const char *token, size_t len, fg_principal_t *p,
                      int64_t now, uint64_t gen) {
    if (a->cache == NULL || now >= p->exp)
        return; /* inside the leeway after exp: verified, never remembered */
    size_t i = (size_t)(h & a->cache_mask);
    char *copy = fg_xstrndup(token, len), *old_token;
    fg_principal_t *old;
    fg_principal_retain(p);
    pthread_mutex_lock(&a->cache_mu[i % CACHE_STRIPES]);
    centry_t *e = &a->cache[i];
    old = e->p;
    old_token = e->token;
    *e = (centry_t){.h = h, .token = copy, .len = len, .p = p, .gen = gen};
    pthread_mutex_unlock(&a->cache_mu[i % CACHE_STRIPES]);
    fg_principal_release(old);
    free(old_token);
}

/* ---- refusal cache ------------------------------------------------------ */

/* True, with the refusal's text in why, when these exact bytes were refused by this key set in
 * the last REFUSED_TTL_MS. */
static bool refused_get(fg_auth_t *a, uint64_t h, const char *token, size_t len, uint64_t gen,
                        char *why, size_t whylen) {
    if (a->refused == NULL)
        return false;
    size_t i = (size_t)((h >> 32) & (REFUSED_SLOTS - 1));
    int64_t now = (int64_t)(fg_now_ns() / 1000000);
    bool found = false;
    pthread_mutex_lock(&a->cache_mu[i % CACHE_STRIPES]);
    rentry_t *e = &a->refused[i];
    if (e->token && e->gen == gen && now < e->until_ms && e->h == h && e->len == len &&
        memcmp(e->token, token, len) == 0) {
        snprintf(why, whylen, "%s", e->why);
        found = true;
    }
    pthread_mutex_unlock(&a->cache_mu[i % CACHE_STRIPES]);
    return found;
}

static void refused_put(fg_auth_t *a, uint64_t h, const char *token, size_t len, uint64_t gen,
                        const char *why) {
    if (a->refused == NULL)
        return;
    size_t i = (size_t)((h >> 32) & (REFUSED_SLOTS - 1));
    char *copy = fg_xstrndup(token, len), *old;
    int64_t now = (int64_t)(fg_now_ns() / 1000000);
    pthread_mutex_lock(&a->cache_mu[i % CACHE_STRIPES]);
    rentry_t *e = &a->refused[i];
    old = e->token;
    e->h = h;
    e->token = copy;
    e->len = len;
    e->gen = gen;
    e->until_ms = now + REFUSED_TTL_MS;
    snprintf(e->why, sizeof e->why, "%s", why);
    pthread_mutex_unlock(&a->cache_mu[i % CACHE_STRIPES]);
    free(old);
}

/* Verifies token (from the cache when it can). FG_OK with *out, or FG_EINVAL with why. */
static int authenticate(fg_auth_t *a, const char *token, size_t len, fg_principal_t **out,
                        char *why, size_t whylen) {
    int64_t now = fg_wall_ms() / 1000;
    uint64_t gen = atomic_load(&a->gen);
    static const char *const hit[] = {"hit"}, *const miss[] = {"miss"},
                             *const refused[] = {"refused"};
    if (len > FG_TOKEN_MAX_BYTES) {
        snprintf(why, whylen, "the token is longer than %d bytes", FG_TOKEN_MAX_BYTES);
        return FG_EINVAL;
    }
    uint64_t h = a->cache ? fg_hash64(token, len, a->cache_seed) : 0;
    fg_principal_t *p = cache_get(a, h, token, len, now, gen);
    if (p) {
        fg_metric_add(a->m_cache, hit, 1);
        *out = p;
        return FG_OK;
    }
    if (refused_get(a, h, token, len, gen, why, whylen)) {
        fg_metric_add(a->m_cache, refused, 1);
        return FG_EINVAL;
    }
    fg_metric_add(a->m_cache, miss, 1);
    pthread_mutex_lock(&a->ks_mu);
    fg_keyset_t *ks = a->ks;
    atomic_fetch_add(&ks->refs, 1);
    gen = atomic_load(&a->gen);
    pthread_mutex_unlock(&a->ks_mu);
    bool lasting = false;
    int rc =
        fg_token_verify_lasting(ks, &a->conf->auth, token, len, now, &p, why, whylen, &lasting);
    fg_keyset_release(ks);
    if (rc != FG_OK) {
        if (lasting)
            refused_put(a, h, token, len, gen, why);
        return rc;
    }
    cache_put(a, h, token, len, p, now, gen);
    *out = p;
    return FG_OK;
}

/* ---- the gate ---------------------------------------------------------- */

static int deny(fg_req_t *req, reqstate_t *st, fg_problem_t kind, const char *reason) {
    static const char *const names[] = {"unauthorized", "forbidden", "rate_limited"};
    const char *label[1] = {kind == FG_PROBLEM_UNAUTHORIZED ? names[0]
                            : kind == FG_PROBLEM_FORBIDDEN  ? names[1]
                                                            : names[2]};
    fg_metric_add(st->auth->m_denied, label, 1);
    snprintf(st->reason, sizeof st->reason, "%s", reason);
    st->reason_varies = kind == FG_PROBLEM_RATE_LIMITED;
    if (kind != FG_PROBLEM_RATE_LIMITED && st->auth->rl)
        fg_ratelimit_refusal_charge(st->auth->rl, fg_req_client_addr(req));
    /* The access line and the audit line already say it; a rate-limited flood stays quiet. */
    if (kind != FG_PROBLEM_RATE_LIMITED)
        FG_LOG(FG_LOG_INFO, fg_req_id(req), "%s %s refused: %s", fg_req_method(req),
               fg_req_route_name(req), reason);
    fg_reply_problem(req, kind, "%s", reason);
    return FG_ERR;
}

/* A client address that caused too many refusals is refused before its token is parsed. */
static int refusals_limit(fg_req_t *req, reqstate_t *st) {
    fg_rate_result_t res;
    char why[160];
    if (st->auth->rl == NULL ||
        fg_ratelimit_refusal_check(st->auth->rl, fg_req_client_addr(req), &res) == FG_OK)
        return FG_OK;
    st->rate = res;
    st->has_rate = true;
    snprintf(why, sizeof why, "too many refused calls from this address lately; retry in %llds",
             (long long)res.retry_after_s);
    return deny(req, st, FG_PROBLEM_RATE_LIMITED, why);
}

static int unauthorized(fg_req_t *req, reqstate_t *st, bool token_sent, const char *why) {
    /* RFC 6750 §3: the error code only when a token was sent. */
    fg_req_add_header(req, "WWW-Authenticate",
                      token_sent ? "Bearer realm=\"fleetgate\", error=\"invalid_token\""
                                 : "Bearer realm=\"fleetgate\"");
    return deny(req, st, FG_PROBLEM_UNAUTHORIZED, why);
}

static int forbidden(fg_req_t *req, reqstate_t *st, const fg_route_t *route, fg_perm_t perm) {
    char why[160];
    const char *project = st->project;
    fg_role_t need = fg_perm_role(perm);
    if (perm == FG_PERM_ADMIN || project == NULL)
        snprintf(why, sizeof why, "%s %s needs the platform admin role", fg_req_method(req),
                 route->pattern);
    else if (fg_principal_role(st->principal, project) == FG_ROLE_NONE)
        snprintf(why, sizeof why, "you hold no role in project %s (%s needed)", project,
                 fg_role_name(need));
    else
        snprintf(why, sizeof why, "this needs the role %s in project %s (you hold %s)",
                 fg_role_name(need), project,
                 fg_role_name(fg_principal_role(st->principal, project)));
    return deny(req, st, FG_PROBLEM_FORBIDDEN, why);
}

/* The bearer token in the Authorization header: FG_OK with *tok and *len, FG_ENOENT when there
 * is none (or another scheme). */
static int bearer(const char *h, const char **tok, size_t *len) {
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return FG_ENOENT;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (n == 0)
        return FG_ENOENT;
    *tok = h;
    *len = n;
    return FG_OK;
}

/* A browser's WebSocket cannot send Authorization: Kubernetes' convention puts the token in an
 * offered subprotocol (fg_ws_bearer_protocol), base64url-encoded. Only on a WebSocket upgrade;
 * the decoded token goes into *owned (the caller frees it). FG_ENOENT when none is offered,
 * FG_EINVAL when it does not decode to a token. */
static int ws_bearer(const fg_req_t *req, char **owned, const char **tok, size_t *len) {
    const char *upgrade = fg_req_header(req, "Upgrade"), *b64;
    size_t n;
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    if (upgrade == NULL || strcasestr(upgrade, "websocket") == NULL ||
        fg_ws_bearer_protocol(fg_req_header(req, "Sec-WebSocket-Protocol"), &b64, &n) != FG_OK)
        return FG_ENOENT;
    if (fg_b64url_decode(b64, n, &raw, &rawlen) != FG_OK)
        return FG_EINVAL;
    bool printable = rawlen > 0;
    for (size_t i = 0; i < rawlen; i++)
        printable = printable && raw[i] > ' ' && raw[i] < 0x7f; /* a JWT is printable ASCII */
    if (!printable) {
        free(raw);
        return FG_EINVAL;
    }
    *owned = (char *)raw;
    *tok = *owned;
    *len = rawlen;
    return FG_OK;
}

static fg_rl_class_t rl_class(const fg_req_t *req, const fg_route_t *route) {
    return fg_route_is_write(route, fg_req_method(req)) ? FG_RL_WRITE : FG_RL_READ;
}

static int rate_limit(fg_req_t *req, reqstate_t *st, const fg_route_t *route) {
    fg_auth_t *a = st->auth;
    const char *sub = fg_principal_subject(st->principal);
    fg_rate_result_t res;
    if (a->rl == NULL || route->rate == FG_RATE_NONE)
        return FG_OK;
    fg_ratelimit_charge(a->rl, rl_class(req, route), sub, st->project, 1000, false, &res);
    if (res.local)
        fg_metric_add(a->m_fallback, NULL, 1);
    st->rate = res;
    st->has_rate = true;
    if (!res.allowed) {
        char why[160];
        snprintf(why, sizeof why, "over the %s rate limit of %lld calls in a burst; retry in %llds",
                 rl_class(req, route) == FG_RL_WRITE ? "write" : "read", (long long)res.limit,
                 (long long)res.retry_after_s);
        return deny(req, st, FG_PROBLEM_RATE_LIMITED, why);
    }
    if (route->rate == FG_RATE_STREAM &&
        fg_ratelimit_stream_acquire(a->rl, sub, &st->lease, &res) != FG_OK) {
        char why[160];
        st->rate = res;
        snprintf(why, sizeof why, "you hold the %lld concurrent streams allowed; retry in %llds",
                 (long long)res.limit, (long long)res.retry_after_s);
        return deny(req, st, FG_PROBLEM_RATE_LIMITED, why);
    }
    return FG_OK;
}

int fg_auth_gate(fg_req_t *req) {
    fg_auth_t *a = fg_req_gate_ctx(req);
    const fg_route_t *route = fg_req_route(req);
    fg_perm_t perm = route->perm;
    const char *tok;
    size_t len;
    char why[256];
    if (perm == FG_PERM_METRICS)
        perm = a->conf->auth.metrics_public ? FG_PERM_PUBLIC : FG_PERM_ADMIN;
    if (perm == FG_PERM_PUBLIC)
        return FG_OK;

    reqstate_t *st = fg_xcalloc(1, sizeof *st);
    st->auth = a;
    const char *project = fg_req_param(req, "project");
    st->project = project ? fg_xstrdup(project) : NULL;
    fg_req_set_principal(req, NULL, st, reqstate_free);

    if (refusals_limit(req, st) != FG_OK)
        return FG_ERR;
    char *ws_tok = NULL;
    if (bearer(fg_req_header(req, "Authorization"), &tok, &len) != FG_OK) {
        int wrc = ws_bearer(req, &ws_tok, &tok, &len);
        if (wrc == FG_EINVAL)
            return unauthorized(req, st, true,
                                "the " FG_WS_BEARER_PREFIX "* subprotocol does not hold a token "
                                "in base64url");
        if (wrc != FG_OK)
            return unauthorized(req, st, false, "no bearer token in Authorization");
    }
    int arc = authenticate(a, tok, len, &st->principal, why, sizeof why);
    if (ws_tok)
        explicit_bzero(ws_tok, len);
    free(ws_tok);
    if (arc != FG_OK)
        return unauthorized(req, st, true, why);
    fg_req_set_principal(req, fg_principal_subject(st->principal), st, reqstate_free);
    if (!fg_auth_can(st->principal, st->project, perm))
        return forbidden(req, st, route, perm);
    if (rate_limit(req, st, route) != FG_OK)
        return FG_ERR;
    if (fg_http_method_is_mutating(fg_req_method(req)) && fg_audit_failing(a->audit) &&
        fg_audit_reopen(a->audit) != FG_OK) {
        /* Fail closed before the handler acts, not only after. */
        fg_metric_add(a->m_audit_fail, NULL, 1);
        fg_reply_problem(req, FG_PROBLEM_AUDIT_UNAVAILABLE,
                         "the audit log cannot be written, so the call is refused");
        return FG_ERR;
    }
    return FG_OK;
}

/* ---- the seal ---------------------------------------------------------- */

static void add_rate_headers(fg_req_t *req, const reqstate_t *st, unsigned status) {
    char v[FG_INT_CHARS];
    fg_format_i64(st->rate.limit, v);
    fg_req_add_header(req, "RateLimit-Limit", v);
    fg_format_i64(st->rate.remaining > 0 ? st->rate.remaining : 0, v);
    fg_req_add_header(req, "RateLimit-Remaining", v);
    fg_format_i64(st->rate.reset_s > 0 ? st->rate.reset_s : 0, v);
    fg_req_add_header(req, "RateLimit-Reset", v);
    if (status == 429) {
        fg_format_i64(st->rate.retry_after_s > 0 ? st->rate.retry_after_s : 1, v);
        fg_req_add_header(req, "Retry-After", v);
    }
}

static const char *outcome_of(unsigned status) {
    if (status == 401 || status == 403 || status == 429)
        return "denied";
    return status < 400 ? "ok" : "failed";
}

/* Sets key to v (NULL: null) cut and cleaned; a cut field is named in the array cut. */
static void set_clean(json_t *line, json_t *cut, const char *key, const char *v) {
    bool was_cut = false;
    if (v == NULL) {
        json_object_set_new(line, key, json_null());
        return;
    }
    json_object_set_new(line, key, fg_json_string_clean(v, strlen(v), AUDIT_FIELD_MAX, &was_cut));
    if (was_cut)
        json_array_append_new(cut, json_string(key));
}

static json_t *audit_line(const fg_req_t *req, const reqstate_t *st, unsigned status) {
    char ts[40];
    json_t *cut = json_array();
    fg_format_time_ms(fg_wall_ms(), ts, sizeof ts);
    json_t *line = json_object();
    json_object_set_new(line, "time", json_string(ts));
    json_object_set_new(line, "requestId", json_string(fg_req_id(req)));
    set_clean(line, cut, "principal", st->principal ? fg_principal_subject(st->principal) : NULL);
    set_clean(line, cut, "project", st->project);
    set_clean(line, cut, "route", fg_req_route_name(req));
    set_clean(line, cut, "verb", fg_req_method(req));
    set_clean(line, cut, "target", fg_req_path(req));
    json_object_set_new(line, "client", json_string(fg_req_client_addr(req)));
    json_object_set_new(line, "outcome", json_string(outcome_of(status)));
    json_object_set_new(line, "status", json_integer(status));
    if (st->reason[0])
        set_clean(line, cut, "reason", st->reason);
    if (json_array_size(cut) > 0)
        json_object_set_new(line, "truncated", cut);
    else
        json_decref(cut);
    return line;
}

/* What makes two refusals the same for folding: who, from where, what, and why (a 429's
 * reason holds its wait, so it is left out). */
static void refusal_kind(const fg_req_t *req, const reqstate_t *st, unsigned status, char *out,
                         size_t len) {
    snprintf(out, len, "%u|%s|%s|%s|%s|%.200s|%.200s", status, fg_req_client_addr(req),
             fg_req_method(req), fg_req_route_name(req), st->reason_varies ? "" : st->reason,
             st->principal ? fg_principal_subject(st->principal) : "",
             st->project ? st->project : "");
}

int fg_auth_seal(fg_req_t *req, unsigned status) {
    reqstate_t *st = fg_req_gate_state(req);
    if (st == NULL)
        return FG_OK; /* a public route, or refused before the gate (404, 405, 413) */
    if (st->has_rate)
        add_rate_headers(req, st, status);
    bool mutating = fg_http_method_is_mutating(fg_req_method(req));
    bool denied = status == 401 || status == 403 || status == 429;
    if (!mutating && !denied)
        return FG_OK;
    char kind[768];
    if (denied) {
        /* A repeat is only counted: no line is built for it (the cost of a flood's refusal). */
        refusal_kind(req, st, status, kind, sizeof kind);
        if (fg_audit_fold(st->auth->audit, kind))
            return FG_OK;
    }
    json_t *line = audit_line(req, st, status);
    int rc = denied ? fg_audit_refusal(st->auth->audit, line, kind)
                    : fg_audit_write(st->auth->audit, line);
    json_decref(line);
    if (rc == FG_OK)
        return FG_OK;
    fg_metric_add(st->auth->m_audit_fail, NULL, 1);
    /* A refusal goes out anyway (it changed nothing); a change is refused. */
    return denied ? FG_OK : FG_EIO;
}

/* ---- for handlers ------------------------------------------------------ */

/* The seal's line comes after the change; this one comes before it, so a change that cannot be
 * audited never reaches a cluster (DESIGN.md, "The write path"). */
int fg_auth_audit_intent(fg_req_t *req, const char *what) {
    reqstate_t *st = fg_req_gate_state(req);
    if (st == NULL)
        return FG_OK;
    json_t *line = audit_line(req, st, 0);
    json_object_set_new(line, "outcome", json_string("intent"));
    json_object_del(line, "status");
    if (what)
        json_object_set_new(line, "intent", json_string(what));
    int rc = fg_audit_write(st->auth->audit, line);
    json_decref(line);
    if (rc != FG_OK)
        fg_metric_add(st->auth->m_audit_fail, NULL, 1);
    return rc;
}

const fg_principal_t *fg_auth_principal(const fg_req_t *req) {
    const reqstate_t *st = fg_req_gate_state(req);
    return st ? st->principal : NULL;
}

bool fg_auth_req_can(const fg_req_t *req, const char *project, fg_perm_t perm) {
    return fg_auth_can(fg_auth_principal(req), project, perm);
}

void fg_auth_charge_items(fg_req_t *req, size_t nitems) {
    reqstate_t *st = fg_req_gate_state(req);
    if (st == NULL || !st->has_rate || st->principal == NULL)
        return;
    int64_t cost = (int64_t)nitems * st->auth->conf->rate.list_item_cost_milli - 1000;
    if (cost <= 0)
        return; /* the gate's one read covers it */
    fg_rate_result_t res;
    fg_ratelimit_charge(st->auth->rl, FG_RL_READ, fg_principal_subject(st->principal), st->project,
                        cost, true, &res);
    res.allowed = true; /* this answer is already computed: the next calls wait */
    st->rate = res;
}

int fg_auth_audit_session(const fg_req_t *req, unsigned status, const json_t *session) {
    const reqstate_t *st = fg_req_gate_state(req);
    if (st == NULL)
        return FG_OK;
    json_t *line = audit_line(req, st, status);
    json_object_set_new(line, "verb", json_string("session"));
    json_object_set(line, "session", (json_t *)(uintptr_t)session);
    int rc = fg_audit_write(st->auth->audit, line);
    json_decref(line);
    if (rc != FG_OK)
        fg_metric_add(st->auth->m_audit_fail, NULL, 1);
    return rc;
}

int fg_auth_renew_stream(const fg_req_t *req) {
    const reqstate_t *st = fg_req_gate_state(req);
    if (st == NULL || st->lease == NULL)
        return FG_OK;
    return fg_ratelimit_stream_renew(st->auth->rl, st->lease);
}

int fg_auth_stream_renew_s(const fg_req_t *req) {
    const reqstate_t *st = fg_req_gate_state(req);
    int64_t s = st ? st->auth->conf->rate.stream_lease_s / 3 : 20;
    return s < 1 ? 1 : (int)s;
}

json_t *fg_auth_session_line(const fg_req_t *req) {
    const reqstate_t *st = fg_req_gate_state(req);
    json_t *line = st ? audit_line(req, st, 101) : json_object();
    json_object_set_new(line, "verb", json_string("session"));
    return line;
}

int fg_auth_write_audit(fg_auth_t *a, const json_t *line) {
    int rc = fg_audit_write(a->audit, line);
    if (rc != FG_OK)
        fg_metric_add(a->m_audit_fail, NULL, 1);
    return rc;
}
