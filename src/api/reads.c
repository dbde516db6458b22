/* api/reads.c: the machinery every read API shares (see reads.h): the member clusters' parts
 * of an answer, parameters, keyset cursors and the merge walk over the sorted indexes, ETags.
 *
 * The walk: each part's index fg:i:{kind}:{cluster}:{scope} is a zset of names (score 0) read
 * with ZRANGEBYLEX in batches of limit+1 from just after the cursor. The batches are merged in
 * (name, cluster) order; a batch that runs dry while its index has more is refilled before the
 * merge goes on, so the order is exact. A round loads the objects of at most one page (HMGET
 * per cluster, one pipeline), filters and presents them; rounds repeat until the page is full,
 * the indexes end, or SCAN_BUDGET names were examined (a filter that matches little: the page is
 * short and its cursor goes on from where the scan stopped). The cursor is the last (name,
 * cluster) examined, base64url-encoded: objects inserted or deleted elsewhere never shift it.
 */
#include "reads.h"

#include "fleetgate/auth.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT_DEFAULT  100
#define LIMIT_MAX      1000
#define SCAN_BUDGET    20000 /* names examined by one page at most */
#define CURSOR_MAX     1024
#define SELECTOR_MAX   1024
#define SELECTOR_REQS  32
#define SELECTOR_VALS  32
#define OBJECT_MAX     (4u << 20)
#define CURSOR_VERSION '1'
#define BODY_MAX       (64u << 20) /* a page of 1000 objects of 64 KiB at most */

static const char *const state_names[] = {
    [RD_CURRENT] = "Current",
    [RD_STALE] = "Stale",
    [RD_MISSING] = "Missing",
};

const char *rd_state_name(rd_state_t s) {
    return state_names[s];
}

/* ---- problems ----------------------------------------------------------- */

bool rd_cluster_param_or_reply(fg_req_t *req, const char **out) {
    if (!rd_label_param_or_reply(req, "cluster", out))
        return false;
    if (*out == NULL)
        return true;
    /* An unknown name would filter every cluster out and answer an empty 200: a typo must not
     * look like "nothing there". */
    const fg_config_t *cfg = ((fg_api_t *)fg_req_app(req))->cfg;
    for (size_t i = 0; i < cfg->nclusters; i++)
        if (strcmp(cfg->clusters[i].name, *out) == 0)
            return true;
    rd_reply_invalid_param(req, "cluster", "names no member cluster (got \"%s\")", *out);
    return false;
}

static int reply_problem_doc(fg_req_t *req, json_t *p) {
    size_t len;
    char *text = fg_json_dumps(p, &len);
    unsigned status = (unsigned)json_integer_value(json_object_get(p, "status"));
    json_decref(p);
    return fg_reply_take(req, status, "application/problem+json", text, len);
}

int rd_reply_invalid_param(fg_req_t *req, const char *param, const char *fmt, ...) {
    char detail[512], full[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%s %s", param, detail);
    json_t *p = fg_problem_new(FG_PROBLEM_INVALID, full, fg_req_id(req), fg_req_path(req));
    json_object_set_new(p, "errors",
                        json_pack("[{s:s,s:s}]", "parameter", param, "detail", detail));
    return reply_problem_doc(req, p);
}

/* Cleans a client's value for a detail: printable ASCII, at most 64 bytes. */
static void shown(const char *v, char *out, size_t outlen) {
    size_t j = 0;
    for (size_t i = 0; v[i] && j + 4 < outlen && i < 64; i++)
        out[j++] = (v[i] >= 0x20 && v[i] < 0x7f && v[i] != '"') ? v[i] : '?';
    if (strlen(v) > 64 && j + 4 < outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
}

/* ---- Redis -------------------------------------------------------------- */

bool rd_pipeline_or_reply(fg_req_t *req, fg_api_t *api, size_t n, const size_t *argcs,
                          const char *const *const *argvs, fg_redis_reply_t **outs) {
    char why[256];
    if (fg_redis_pipeline(api->redis, n, argcs, argvs, outs, why, sizeof why) == FG_OK)
        return true;
    FG_LOG(FG_LOG_ERROR, fg_req_id(req), "read %s: %s", fg_req_path(req), why);
    fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", why);
    return false;
}

static void free_replies(fg_redis_reply_t **reps, size_t n) {
    for (size_t i = 0; i < n; i++) {
        fg_redis_reply_free(reps[i]);
        reps[i] = NULL;
    }
}

/* The value of field in an HGETALL reply, copied into out ("" when absent). */
const char *rd_hfield(const fg_redis_reply_t *h, const char *field, char *out, size_t outlen) {
    out[0] = '\0';
    for (size_t i = 0; i + 1 < fg_redis_reply_len(h); i += 2) {
        size_t klen, vlen;
        const char *k = fg_redis_reply_str(fg_redis_reply_at(h, i), &klen);
        const char *v = fg_redis_reply_str(fg_redis_reply_at(h, i + 1), &vlen);
        if (k && v && klen == strlen(field) && memcmp(k, field, klen) == 0) {
            snprintf(out, outlen, "%.*s", (int)vlen, v);
            break;
        }
    }
    return out;
}

int64_t rd_hfield_int(const fg_redis_reply_t *h, const char *field) {
    char v[32];
    int64_t n = 0;
    rd_hfield(h, field, v, sizeof v);
    if (v[0] && fg_parse_int64(v, strlen(v), 0, INT64_MAX, &n) != FG_OK)
        n = 0;
    return n;
}

/* ---- parts -------------------------------------------------------------- */

static int cmp_parts(const void *a, const void *b) {
    return strcmp(((const rd_part_t *)a)->conf->name, ((const rd_part_t *)b)->conf->name);
}

static void part_from(rd_part_t *p, const fg_redis_reply_t *cl, const fg_redis_reply_t *sync) {
    char state[32], health[32];
    rd_hfield(sync, "state", state, sizeof state);
    rd_hfield(sync, "rv", p->rv, sizeof p->rv);
    int64_t ev = rd_hfield_int(sync, "lastEventMs"), synced = rd_hfield_int(sync, "lastSyncMs");
    p->applied_ms = ev > synced ? ev : synced;
    rd_hfield(cl, "health", health, sizeof health);
    if (fg_redis_reply_len(sync) == 0 || (strcmp(state, "Syncing") == 0 && synced == 0)) {
        p->state = RD_MISSING;
        p->rv[0] = '\0';
        snprintf(p->reason, sizeof p->reason, "%s",
                 fg_redis_reply_len(sync) ? "its first sync is in progress"
                                          : "it has not been synced");
        if (strcmp(health, "Unreachable") == 0) {
            char err[200];
            rd_hfield(cl, "lastError", err, sizeof err);
            snprintf(p->reason, sizeof p->reason, "it has not been synced: unreachable%s%s",
                     err[0] ? ": " : "", err);
        }
        return;
    }
    if (strcmp(health, "Unreachable") == 0) {
        p->state = RD_STALE;
        p->stale_since_ms = rd_hfield_int(cl, "lastContactMs");
        if (p->stale_since_ms == 0)
            p->stale_since_ms = p->applied_ms;
        char err[200];
        rd_hfield(cl, "lastError", err, sizeof err);
        snprintf(p->reason, sizeof p->reason, "unreachable%s%s", err[0] ? ": " : "", err);
        return;
    }
    if (strcmp(state, "Synced") != 0) {
        /* Its watch is not live (failed and backing off: Lagging; a relist running: Relisting),
         * so what is cached is the cluster as of the last change applied, even while the
         * cluster still answers some requests. */
        char err[200];
        p->state = RD_STALE;
        p->stale_since_ms = p->applied_ms;
        rd_hfield(sync, "lastError", err, sizeof err);
        snprintf(p->reason, sizeof p->reason, "its watch is not live (%s)%s%s", state,
                 err[0] ? ": " : "", err);
        return;
    }
    p->state = RD_CURRENT;
}

static json_t *parse_object(const fg_redis_reply_t *v, const char *req_id);

static bool name_chars_ok(const char *s, size_t n, size_t max);

/* The {project} of a namespaced read must be a DNS-1123 label (422 naming it otherwise). */
static bool scope_or_reply(fg_req_t *req, const char *scope) {
    if (strcmp(scope, "_") == 0 || fg_is_dns1123_label(scope, strlen(scope)))
        return true;
    char s[80];
    shown(scope, s, sizeof s);
    rd_reply_invalid_param(req, "project",
                           "must be a DNS-1123 label: lower-case letters, digits and -, at most 63 "
                           "(got \"%s\")",
                           s);
    return false;
}

bool rd_name_or_reply(fg_req_t *req, const char *name) {
    size_t n = strlen(name);
    bool ok = name_chars_ok(name, n, RD_NAME_MAX) && name[0] != '-' && name[0] != '.' &&
              name[n - 1] != '-' && name[n - 1] != '.';
    if (ok)
        return true;
    char s[80];
    const fg_route_t *route = fg_req_route(req);
    const char *pattern = route ? route->pattern : "", *brace = strrchr(pattern, '{');
    char param[32] = "name";
    if (brace && strchr(brace, '}'))
        snprintf(param, sizeof param, "%.*s", (int)(strchr(brace, '}') - brace - 1), brace + 1);
    shown(name, s, sizeof s);
    rd_reply_invalid_param(req, param,
                           "must be a DNS-1123 name: lower-case letters, digits, - and ., at most "
                           "253 (got \"%s\")",
                           s);
    return false;
}

/* One round trip: each part's fg:cluster and fg:sync hashes, and with name its object. */
static bool begin(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                  const char *scope, const char *cluster, const char *zone, const char *name,
                  json_t **objs, size_t *found) {
    memset(c, 0, sizeof *c);
    c->req = req;
    c->api = fg_req_app(req);
    c->kind = kind;
    c->resource = resource;
    c->scope = scope;
    if (!scope_or_reply(req, scope) || (name && !rd_name_or_reply(req, name)))
        return false;
    const fg_config_t *cfg = c->api->cfg;
    for (size_t i = 0; i < cfg->nclusters && c->nparts < RD_MAX_CLUSTERS; i++) {
        const fg_cluster_conf_t *cc = &cfg->clusters[i];
        if ((cluster && strcmp(cluster, cc->name) != 0) || (zone && strcmp(zone, cc->zone) != 0))
            continue;
        c->parts[c->nparts++].conf = cc;
    }
    qsort(c->parts, c->nparts, sizeof c->parts[0], cmp_parts);
    if (found)
        *found = 0;
    if (c->nparts == 0)
        return true;

    size_t per = name ? 3 : 2, n = per * c->nparts;
    char(*keys)[160] = fg_xcalloc(n, sizeof *keys);
    const char *(*argv)[3] = fg_xcalloc(n, sizeof *argv);
    const char *const *argvs[3 * RD_MAX_CLUSTERS];
    size_t argcs[3 * RD_MAX_CLUSTERS];
    fg_redis_reply_t *reps[3 * RD_MAX_CLUSTERS];
    for (size_t i = 0; i < c->nparts; i++) {
        const char *cl = c->parts[i].conf->name;
        snprintf(keys[per * i], sizeof keys[0], "fg:cluster:%s", cl);
        snprintf(keys[per * i + 1], sizeof keys[0], "fg:sync:%s:%s", cl, resource);
        argv[per * i][0] = argv[per * i + 1][0] = "HGETALL";
        argcs[per * i] = argcs[per * i + 1] = 2;
        if (name) {
            snprintf(keys[per * i + 2], sizeof keys[0], "fg:o:%s:%s:%s", kind, cl, scope);
            argv[per * i + 2][0] = "HGET";
            argv[per * i + 2][2] = name;
            argcs[per * i + 2] = 3;
        }
    }
    for (size_t i = 0; i < n; i++) {
        argv[i][1] = keys[i];
        argvs[i] = argv[i];
    }
    bool ok = rd_pipeline_or_reply(req, c->api, n, argcs, argvs, reps);
    if (ok) {
        for (size_t i = 0; i < c->nparts; i++) {
            part_from(&c->parts[i], reps[per * i], reps[per * i + 1]);
            if (!name)
                continue;
            /* A cluster never synced contributes nothing, even a leftover. */
            objs[i] = c->parts[i].state == RD_MISSING
                          ? NULL
                          : parse_object(reps[per * i + 2], fg_req_id(req));
            *found += objs[i] != NULL;
        }
        free_replies(reps, n);
    }
    free(keys);
    free(argv);
    return ok;
}

bool rd_begin_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                       const char *scope, const char *cluster, const char *zone) {
    return begin(c, req, kind, resource, scope, cluster, zone, NULL, NULL, NULL);
}

bool rd_get_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                     const char *scope, const char *name, const char *only_cluster, json_t **objs,
                     size_t *found) {
    for (size_t i = 0; i < RD_MAX_CLUSTERS; i++)
        objs[i] = NULL;
    return begin(c, req, kind, resource, scope, only_cluster, NULL, name, objs, found);
}

json_t *rd_time_or_null(int64_t ms) {
    if (ms <= 0)
        return json_null();
    char t[40];
    fg_format_time_ms(ms, t, sizeof t);
    return json_string(t);
}

json_t *rd_parts_json(const rd_ctx_t *c) {
    json_t *a = json_array();
    for (size_t i = 0; i < c->nparts; i++) {
        const rd_part_t *p = &c->parts[i];
        json_t *o = json_pack(
            "{s:s,s:s,s:o,s:o,s:o}", "name", p->conf->name, "state", state_names[p->state],
            "staleSince", p->state == RD_STALE ? rd_time_or_null(p->stale_since_ms) : json_null(),
            "resourceVersion", p->rv[0] ? json_string(p->rv) : json_null(), "lastAppliedAt",
            rd_time_or_null(p->applied_ms));
        if (p->state != RD_CURRENT && p->reason[0])
            json_object_set_new(o, "reason", json_string(p->reason));
        json_array_append_new(a, o);
    }
    return a;
}

const rd_part_t *rd_part(const rd_ctx_t *c, const char *cluster) {
    for (size_t i = 0; i < c->nparts; i++)
        if (strcmp(c->parts[i].conf->name, cluster) == 0)
            return &c->parts[i];
    return NULL;
}

/* ---- parameters --------------------------------------------------------- */

bool rd_limit_or_reply(fg_req_t *req, size_t *limit) {
    const char *v = fg_req_query(req, "limit");
    int64_t n = LIMIT_DEFAULT;
    if (v && fg_parse_int64(v, strlen(v), 1, LIMIT_MAX, &n) != FG_OK) {
        char s[80];
        shown(v, s, sizeof s);
        rd_reply_invalid_param(req, "limit", "must be between 1 and %d (got %s)", LIMIT_MAX, s);
        return false;
    }
    *limit = (size_t)n;
    return true;
}

bool rd_label_param_or_reply(fg_req_t *req, const char *name, const char **out) {
    const char *v = fg_req_query(req, name);
    *out = NULL;
    if (v == NULL)
        return true;
    if (!fg_is_dns1123_label(v, strlen(v))) {
        char s[80];
        shown(v, s, sizeof s);
        rd_reply_invalid_param(req, name,
                               "must be a DNS-1123 label: lower-case letters, digits and -, at "
                               "most 63 (got \"%s\")",
                               s);
        return false;
    }
    *out = v;
    return true;
}

bool rd_enum_param_or_reply(fg_req_t *req, const char *name, const char *const *values,
                            const char **out) {
    const char *v = fg_req_query(req, name);
    *out = NULL;
    if (v == NULL)
        return true;
    for (size_t i = 0; values[i]; i++)
        if (strcmp(v, values[i]) == 0) {
            *out = values[i];
            return true;
        }
    char s[80], list[256] = "";
    shown(v, s, sizeof s);
    for (size_t i = 0, used = 0; values[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", values[i]);
    rd_reply_invalid_param(req, name, "must be one of %s (got \"%s\")", list, s);
    return false;
}

/* ---- label selectors ---------------------------------------------------- */

typedef enum { SEL_EQ, SEL_NEQ, SEL_IN, SEL_NOTIN, SEL_EXISTS, SEL_NOTEXISTS } sel_op_t;

typedef struct {
    sel_op_t op;
    char *key;
    char *vals[SELECTOR_VALS];
    size_t nvals;
} sel_req_t;

struct rd_selector {
    sel_req_t reqs[SELECTOR_REQS];
    size_t nreqs;
};

void rd_selector_free(rd_selector_t *s) {
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nreqs; i++) {
        free(s->reqs[i].key);
        for (size_t j = 0; j < s->reqs[i].nvals; j++)
            free(s->reqs[i].vals[j]);
    }
    free(s);
}

static bool key_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '/';
}

static const char *skip_ws(const char *p) {
    while (*p == ' ')
        p++;
    return p;
}

/* A key or value token: [A-Za-z0-9._/-]*, at most 317 bytes. */
static const char *token(const char *p, char **out) {
    const char *s = p;
    while (key_char(*p))
        p++;
    if (p - s > 317)
        return NULL;
    *out = fg_xstrndup(s, (size_t)(p - s));
    return p;
}

/* Parses one requirement at p; returns the position after it, or NULL (why set). */
static const char *parse_req(const char *p, sel_req_t *r, const char **why) {
    p = skip_ws(p);
    bool neg = *p == '!';
    if (neg)
        p = skip_ws(p + 1);
    p = token(p, &r->key);
    if (p == NULL || r->key[0] == '\0') {
        *why = "a requirement needs a label key";
        return NULL;
    }
    p = skip_ws(p);
    if (neg || *p == ',' || *p == '\0') {
        r->op = neg ? SEL_NOTEXISTS : SEL_EXISTS;
        return p;
    }
    if (p[0] == '!' && p[1] == '=') {
        r->op = SEL_NEQ;
        p += 2;
    } else if (p[0] == '=' && p[1] == '=') {
        r->op = SEL_EQ;
        p += 2;
    } else if (p[0] == '=') {
        r->op = SEL_EQ;
        p += 1;
    } else if (strncmp(p, "notin", 5) == 0 && (p[5] == ' ' || p[5] == '(')) {
        r->op = SEL_NOTIN;
        p += 5;
    } else if (strncmp(p, "in", 2) == 0 && (p[2] == ' ' || p[2] == '(')) {
        r->op = SEL_IN;
        p += 2;
    } else {
        *why = "expected =, ==, !=, in or notin after the key";
        return NULL;
    }
    p = skip_ws(p);
    if (r->op == SEL_EQ || r->op == SEL_NEQ) {
        p = token(p, &r->vals[0]);
        if (p == NULL) {
            *why = "a label value is too long";
            return NULL;
        }
        r->nvals = 1;
        return skip_ws(p);
    }
    if (*p != '(') {
        *why = "in and notin need a (value, ...) list";
        return NULL;
    }
    p = skip_ws(p + 1);
    for (;;) {
        if (r->nvals == SELECTOR_VALS) {
            *why = "too many values in a set";
            return NULL;
        }
        p = token(p, &r->vals[r->nvals]);
        if (p == NULL) {
            *why = "a label value is too long";
            return NULL;
        }
        r->nvals++;
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
            continue;
        }
        if (*p == ')')
            return skip_ws(p + 1);
        *why = "a set must end with )";
        return NULL;
    }
}

bool rd_selector_or_reply(fg_req_t *req, rd_selector_t **out) {
    const char *v = fg_req_query(req, "labelSelector");
    *out = NULL;
    if (v == NULL)
        return true;
    const char *why = NULL;
    rd_selector_t *s = fg_xcalloc(1, sizeof *s);
    const char *p = v;
    if (strlen(v) == 0 || strlen(v) > SELECTOR_MAX)
        why = "must be 1 to 1024 characters";
    while (why == NULL) {
        if (s->nreqs == SELECTOR_REQS) {
            why = "has too many requirements";
            break;
        }
        p = parse_req(p, &s->reqs[s->nreqs++], &why);
        if (p == NULL)
            break;
        if (*p == '\0')
            break;
        if (*p != ',') {
            why = "requirements must be separated by commas";
            break;
        }
        p++;
    }
    if (why) {
        char shownv[80];
        shown(v, shownv, sizeof shownv);
        rd_reply_invalid_param(req, "labelSelector", "is not a label selector: %s (got \"%s\")",
                               why, shownv);
        rd_selector_free(s);
        return false;
    }
    *out = s;
    return true;
}

bool rd_selector_match(const rd_selector_t *s, const json_t *labels) {
    if (s == NULL)
        return true;
    for (size_t i = 0; i < s->nreqs; i++) {
        const sel_req_t *r = &s->reqs[i];
        const json_t *lv = json_is_object(labels) ? json_object_get(labels, r->key) : NULL;
        const char *have = json_string_value(lv);
        bool in = false;
        for (size_t j = 0; have && j < r->nvals; j++)
            in = in || strcmp(have, r->vals[j]) == 0;
        bool ok = false;
        switch (r->op) {
            case SEL_EXISTS:
                ok = have != NULL;
                break;
            case SEL_NOTEXISTS:
                ok = have == NULL;
                break;
            case SEL_EQ:
            case SEL_IN:
                ok = in;
                break;
            case SEL_NEQ:
            case SEL_NOTIN:
                ok = !in;
                break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* ---- cursors ------------------------------------------------------------ */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void b64url(const unsigned char *in, size_t n, char *out) {
    size_t j = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[j++] = b64[(v >> 18) & 63];
        out[j++] = b64[(v >> 12) & 63];
        if (i + 1 < n)
            out[j++] = b64[(v >> 6) & 63];
        if (i + 2 < n)
            out[j++] = b64[v & 63];
    }
    out[j] = '\0';
}

static int b64val(char ch) {
    const char *p = ch ? strchr(b64, ch) : NULL;
    return p ? (int)(p - b64) : -1;
}

/* Decodes base64url without padding; returns the length, or -1. */
static long unb64url(const char *in, unsigned char *out, size_t outlen) {
    size_t n = strlen(in), j = 0;
    if (n % 4 == 1)
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        int v[4] = {0, 0, 0, 0};
        size_t k = 0;
        for (; k < 4 && i + k < n; k++)
            if ((v[k] = b64val(in[i + k])) < 0)
                return -1;
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        for (size_t b = 0; b + 1 < k; b++) {
            if (j >= outlen)
                return -1;
            out[j++] = (unsigned char)(w >> (16 - 8 * b));
        }
    }
    return (long)j;
}

static bool name_chars_ok(const char *s, size_t n, size_t max) {
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

/* cursor = base64url("1" name "|" cluster). */
void rd_cursor_encode(const char *name, const char *cluster, char *out, size_t outlen) {
    char raw[RD_NAME_MAX + 70];
    int n = snprintf(raw, sizeof raw, "%c%s|%s", CURSOR_VERSION, name, cluster);
    if (n < 0 || (size_t)n >= sizeof raw || outlen < 4 * sizeof raw / 3 + 4) {
        out[0] = '\0';
        return;
    }
    b64url((const unsigned char *)raw, (size_t)n, out);
}

bool rd_cursor_or_reply(fg_req_t *req, char *name, char *cluster, bool *have) {
    const char *v = fg_req_query(req, "cursor");
    *have = false;
    if (v == NULL)
        return true;
    unsigned char raw[CURSOR_MAX];
    long n = strlen(v) <= CURSOR_MAX ? unb64url(v, raw, sizeof raw - 1) : -1;
    const char *why = "is not a cursor this API gave";
    if (n > 2 && raw[0] == CURSOR_VERSION) {
        raw[n] = '\0';
        const char *s = (const char *)raw + 1;
        const char *bar = memchr(s, '|', (size_t)n - 1);
        if (bar && name_chars_ok(s, (size_t)(bar - s), RD_NAME_MAX) &&
            (bar[1] == '\0' || fg_is_dns1123_label(bar + 1, strlen(bar + 1)))) {
            memcpy(name, s, (size_t)(bar - s));
            name[bar - s] = '\0';
            snprintf(cluster, 64, "%s", bar + 1);
            *have = true;
            return true;
        }
    }
    char s[80];
    shown(v, s, sizeof s);
    rd_reply_invalid_param(req, "cursor", "%s (got \"%s\")", why, s);
    return false;
}

/* ---- the walk ----------------------------------------------------------- */

typedef struct {
    fg_redis_reply_t *rep; /* the current batch of names */
    size_t pos, n;
    bool done;                  /* the index holds nothing past this batch */
    char from[RD_NAME_MAX + 2]; /* ZRANGEBYLEX min for the next batch */
} stream_t;

typedef struct {
    size_t part;
    const char *name; /* borrowed from the stream's batch */
    size_t len;
    size_t slot; /* index into the part's HMGET */
} cand_t;

static const char *head(const stream_t *s, size_t *len) {
    return fg_redis_reply_str(fg_redis_reply_at(s->rep, s->pos), len);
}

static int cmp_name(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    return r ? r : (alen < blen ? -1 : alen > blen);
}

/* Refills every stream whose batch is used up and whose index may hold more. */
static bool refill_or_reply(rd_ctx_t *c, stream_t *st, size_t batch) {
    const char *argv[RD_MAX_CLUSTERS][7];
    const char *const *argvs[RD_MAX_CLUSTERS];
    size_t argcs[RD_MAX_CLUSTERS], which[RD_MAX_CLUSTERS], n = 0;
    char keys[RD_MAX_CLUSTERS][160], count[24];
    fg_redis_reply_t *reps[RD_MAX_CLUSTERS];
    snprintf(count, sizeof count, "%zu", batch);
    for (size_t i = 0; i < c->nparts; i++) {
        if (st[i].done || st[i].pos < st[i].n)
            continue;
        snprintf(keys[n], sizeof keys[n], "fg:i:%s:%s:%s", c->kind, c->parts[i].conf->name,
                 c->scope);
        const char *a[7] = {"ZRANGEBYLEX", keys[n], st[i].from, "+", "LIMIT", "0", count};
        memcpy(argv[n], a, sizeof a);
        argvs[n] = argv[n];
        argcs[n] = 7;
        which[n++] = i;
    }
    if (n == 0)
        return true;
    if (!rd_pipeline_or_reply(c->req, c->api, n, argcs, argvs, reps))
        return false;
    for (size_t k = 0; k < n; k++) {
        stream_t *s = &st[which[k]];
        fg_redis_reply_free(s->rep);
        s->rep = reps[k];
        s->pos = 0;
        s->n = fg_redis_reply_len(s->rep);
        s->done = s->n < batch;
        if (s->n) {
            size_t len;
            const char *last = fg_redis_reply_str(fg_redis_reply_at(s->rep, s->n - 1), &len);
            snprintf(s->from, sizeof s->from, "(%.*s", (int)(len < RD_NAME_MAX ? len : RD_NAME_MAX),
                     last ? last : "");
        }
    }
    return true;
}

/* Picks the next group in (name, cluster) order into cands (one candidate per part of the group);
 * returns how many, 0 when every stream has ended or one needs a refill first (*refill). */
static size_t pick(const rd_ctx_t *c, stream_t *st, bool by_name, cand_t *cands, bool *refill) {
    *refill = false;
    for (size_t i = 0; i < c->nparts; i++)
        if (st[i].pos >= st[i].n && !st[i].done) {
            *refill = true;
            return 0;
        }
    size_t best = SIZE_MAX, blen = 0;
    const char *bname = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        if (st[i].pos >= st[i].n)
            continue;
        size_t len;
        const char *h = head(&st[i], &len);
        if (bname == NULL || cmp_name(h, len, bname, blen) < 0) {
            best = i, bname = h, blen = len;
        }
    }
    if (bname == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = best; i < c->nparts; i++) {
        size_t len;
        if (st[i].pos >= st[i].n)
            continue;
        const char *h = head(&st[i], &len);
        if (cmp_name(h, len, bname, blen) != 0)
            continue;
        cands[n++] = (cand_t){.part = i, .name = h, .len = len};
        st[i].pos++;
        if (!by_name)
            break; /* parts are sorted by cluster name, so the first is the smallest */
    }
    return n;
}

typedef struct {
    cand_t *cands;
    size_t ncands;
    size_t *group_start; /* candidates of group g: [group_start[g], group_start[g+1]) */
    size_t ngroups;
} round_t;

/* Loads the objects of a round's candidates: reps[p] is part p's HMGET (NULL when none). */
static bool load_or_reply(rd_ctx_t *c, round_t *r, fg_redis_reply_t **reps) {
    size_t per[RD_MAX_CLUSTERS] = {0};
    for (size_t k = 0; k < r->ncands; k++)
        r->cands[k].slot = per[r->cands[k].part]++;
    const char **argv[RD_MAX_CLUSTERS];
    size_t argcs[RD_MAX_CLUSTERS], which[RD_MAX_CLUSTERS], n = 0;
    char keys[RD_MAX_CLUSTERS][160];
    for (size_t p = 0; p < c->nparts; p++) {
        reps[p] = NULL;
        if (per[p] == 0)
            continue;
        snprintf(keys[p], sizeof keys[p], "fg:o:%s:%s:%s", c->kind, c->parts[p].conf->name,
                 c->scope);
        argv[n] = fg_xcalloc(per[p] + 2, sizeof(char *));
        argv[n][0] = "HMGET";
        argv[n][1] = keys[p];
        argcs[n] = per[p] + 2;
        which[n++] = p;
    }
    /* Names are NUL-free but not NUL-terminated in the batch: copy them for the argv. */
    char **copies = fg_xcalloc(r->ncands, sizeof(char *));
    for (size_t k = 0; k < r->ncands; k++) {
        copies[k] = fg_xstrndup(r->cands[k].name, r->cands[k].len);
        for (size_t j = 0; j < n; j++)
            if (which[j] == r->cands[k].part)
                argv[j][2 + r->cands[k].slot] = copies[k];
    }
    fg_redis_reply_t *out[RD_MAX_CLUSTERS];
    bool ok = rd_pipeline_or_reply(c->req, c->api, n, argcs, (const char *const *const *)argv, out);
    for (size_t j = 0; ok && j < n; j++)
        reps[which[j]] = out[j];
    for (size_t j = 0; j < n; j++)
        free(argv[j]);
    for (size_t k = 0; k < r->ncands; k++)
        free(copies[k]);
    free(copies);
    return ok;
}

static json_t *parse_object(const fg_redis_reply_t *v, const char *req_id) {
    size_t len;
    const char *s = v ? fg_redis_reply_str(v, &len) : NULL;
    if (s == NULL || fg_redis_reply_type(v) != FG_REDIS_STRING || len > OBJECT_MAX)
        return NULL; /* deleted between the index read and this one */
    json_t *o = NULL;
    char err[160];
    if (fg_json_load(s, len, &o, err, sizeof err) != FG_OK || !json_is_object(o)) {
        FG_LOG(FG_LOG_ERROR, req_id, "cache: an object is not a JSON object: %s", err);
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the item cache -------------------------------------------------------
 *
 * Presenting an object (parse the cached JSON, build the API's, serialise it) costs far more than
 * moving its bytes, and a page does it hundreds of times for objects that mostly did not change
 * since the last page that showed them. For kinds whose item depends on the object alone (pods),
 * the presented text is kept per object, keyed by a 128-bit hash of the cached bytes it came from:
 * a changed object has other bytes, so another key, and is presented afresh. Direct-mapped,
 * ICACHE_SLOTS entries of at most ICACHE_ITEM_MAX bytes (bounded memory), a mutex per stripe.
 */
#define ICACHE_SLOTS    16384
#define ICACHE_STRIPES  64
#define ICACHE_ITEM_MAX 4096

typedef struct {
    uint64_t h1, h2;
    char *text;
    size_t len;
    char etag[72];    /* the object's ETag value (its version) */
    rd_facts_t facts; /* what list filters look at (labels owned) */
} icache_ent_t;

static icache_ent_t icache[ICACHE_SLOTS];
static pthread_mutex_t icache_mu[ICACHE_STRIPES] = {[0 ... ICACHE_STRIPES - 1] =
                                                        PTHREAD_MUTEX_INITIALIZER};

static uint64_t hash64(const void *data, size_t n, uint64_t h);

/* Appends the cached text of (h1, h2) to b, its ETag value to etag and its facts to facts (may
 * be NULL; facts->labels is then a new string the caller frees); false when absent. */
static bool icache_get(uint64_t h1, uint64_t h2, fg_buf_t *b, char *etag, size_t etaglen,
                       rd_facts_t *facts) {
    size_t slot = h1 % ICACHE_SLOTS;
    pthread_mutex_t *mu = &icache_mu[slot % ICACHE_STRIPES];
    bool hit = false;
    pthread_mutex_lock(mu);
    icache_ent_t *e = &icache[slot];
    if (e->text && e->h1 == h1 && e->h2 == h2) {
        hit = fg_buf_append(b, e->text, e->len) == FG_OK;
        if (etag)
            snprintf(etag, etaglen, "%s", e->etag);
        if (facts) {
            *facts = e->facts;
            facts->labels = e->facts.labels ? fg_xstrdup(e->facts.labels) : NULL;
        }
    }
    pthread_mutex_unlock(mu);
    return hit;
}

static void icache_put(uint64_t h1, uint64_t h2, const char *text, size_t len, const char *etag,
                       const rd_facts_t *facts) {
    if (len > ICACHE_ITEM_MAX)
        return;
    size_t slot = h1 % ICACHE_SLOTS;
    char *copy = fg_xstrndup(text, len), *old, *old_labels;
    char *labels = facts && facts->labels ? fg_xstrdup(facts->labels) : NULL;
    pthread_mutex_t *mu = &icache_mu[slot % ICACHE_STRIPES];
    pthread_mutex_lock(mu);
    icache_ent_t *e = &icache[slot];
    old = e->text;
    old_labels = e->facts.labels;
    *e = (icache_ent_t){.h1 = h1, .h2 = h2, .text = copy, .len = len};
    snprintf(e->etag, sizeof e->etag, "%s", etag ? etag : "");
    if (facts)
        e->facts = *facts;
    e->facts.labels = labels;
    pthread_mutex_unlock(mu);
    free(old);
    free(old_labels);
}

static void raw_key(const char *raw, size_t len, uint64_t *h1, uint64_t *h2) {
    *h1 = hash64(raw, len, 0x243f6a8885a308d3ull);
    *h2 = hash64(raw, len, 0x13198a2e03707344ull);
}

bool rd_icache_get(const char *raw, size_t len, fg_buf_t *text, char *etag, size_t etaglen) {
    uint64_t h1, h2;
    raw_key(raw, len, &h1, &h2);
    return icache_get(h1, h2, text, etag, etaglen, NULL);
}

void rd_icache_put(const char *raw, size_t len, const char *text, size_t tlen, const char *etag) {
    uint64_t h1, h2;
    raw_key(raw, len, &h1, &h2);
    icache_put(h1, h2, text, tlen, etag, NULL);
}

/* The facts of a presented item: its phase, app and labels. */
static void facts_of(const json_t *item, rd_facts_t *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->phase, sizeof f->phase, "%s", rd_str(item, "phase") ? rd_str(item, "phase") : "");
    snprintf(f->app, sizeof f->app, "%s", rd_str(item, "app") ? rd_str(item, "app") : "");
    json_t *labels = json_object_get(item, "labels");
    f->labels = json_is_object(labels) ? fg_json_dumps(labels, NULL) : NULL;
}

/* Presents one group and appends its text to items; false when it was left out. With match
 * (one object per group), the item may come from the item cache and is kept when match says so. */
static bool append_item(rd_ctx_t *c, const cand_t *cands, size_t from, size_t to,
                        fg_redis_reply_t **reps, const char *name, rd_match_fn match,
                        rd_present_fn present, void *arg, bool first, fg_buf_t *items) {
    uint64_t h1 = 0, h2 = 0;
    size_t mark = items->len;
    bool cacheable = match && to - from == 1, keep = false;
    rd_facts_t facts = {.labels = NULL};
    char *text = NULL;
    if (!first && fg_buf_append(items, ",", 1) != FG_OK)
        return false;
    if (cacheable) {
        size_t len;
        const fg_redis_reply_t *v = fg_redis_reply_at(reps[cands[from].part], cands[from].slot);
        const char *raw = v ? fg_redis_reply_str(v, &len) : NULL;
        if (raw == NULL)
            goto out; /* deleted between the index read and this one */
        raw_key(raw, len, &h1, &h2);
        if (icache_get(h1, h2, items, NULL, 0, &facts)) {
            keep = match(&facts, arg);
            goto out;
        }
    }
    json_t *objs[RD_MAX_CLUSTERS] = {NULL};
    bool any = false;
    for (size_t k = from; k < to; k++) {
        objs[cands[k].part] =
            parse_object(fg_redis_reply_at(reps[cands[k].part], cands[k].slot), fg_req_id(c->req));
        any = any || objs[cands[k].part];
    }
    json_t *item = any ? present(c, name, objs, arg) : NULL;
    rd_objs_free(objs, c->nparts);
    size_t len = 0;
    text = item ? fg_json_dumps(item, &len) : NULL;
    char etag[72];
    snprintf(etag, sizeof etag, "%s", rd_str(item, "version") ? rd_str(item, "version") : "");
    if (cacheable && item)
        facts_of(item, &facts);
    json_decref(item);
    if (text == NULL)
        goto out;
    if (cacheable)
        icache_put(h1, h2, text, len, etag, &facts); /* its version: a get may use it */
    keep = (!cacheable || match(&facts, arg)) && fg_buf_append(items, text, len) == FG_OK;
out:
    if (!keep) {
        items->len = mark;
        items->data[mark] = '\0';
    }
    free(facts.labels);
    free(text);
    return keep;
}

int rd_list_reply(rd_ctx_t *c, bool by_name, rd_match_fn match, size_t limit, rd_present_fn present,
                  void *arg) {
    char cname[RD_NAME_MAX + 1], ccluster[64];
    bool have_cursor;
    if (!rd_cursor_or_reply(c->req, cname, ccluster, &have_cursor))
        return FG_OK;
    stream_t st[RD_MAX_CLUSTERS];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < c->nparts; i++) {
        if (c->parts[i].state == RD_MISSING) {
            st[i].done = true; /* never synced: nothing of it is served */
            continue;
        }
        if (!have_cursor)
            snprintf(st[i].from, sizeof st[i].from, "-");
        else
            snprintf(st[i].from, sizeof st[i].from, "%c%s",
                     !by_name && strcmp(c->parts[i].conf->name, ccluster) > 0 ? '[' : '(', cname);
    }
    fg_buf_t body;
    fg_buf_init(&body, BODY_MAX);
    fg_buf_append(&body, "{\"items\":[", 10);
    size_t nitems = 0, scanned = 0;
    size_t batch = limit + 1;
    cand_t *cands = fg_xcalloc(limit * (by_name ? c->nparts : 1) + c->nparts, sizeof *cands);
    size_t *gstart = fg_xcalloc(limit + 2, sizeof *gstart);
    char last_name[RD_NAME_MAX + 1] = "", last_cluster[64] = "";
    bool more = true, failed = false;
    while (nitems < limit && scanned < SCAN_BUDGET) {
        round_t r = {.cands = cands, .group_start = gstart};
        /* Collect up to a page's worth of groups, refilling batches as they run dry. */
        while (r.ngroups < limit - nitems) {
            bool refill;
            size_t n = pick(c, st, by_name, cands + r.ncands, &refill);
            if (n == 0 && refill) {
                /* A refill frees the batches the candidates point into: end the round first. */
                if (r.ncands > 0)
                    break;
                if (!refill_or_reply(c, st, batch)) {
                    failed = true;
                    break;
                }
                continue;
            }
            if (n == 0) {
                more = false;
                break;
            }
            gstart[r.ngroups++] = r.ncands;
            r.ncands += n;
        }
        if (failed)
            break;
        gstart[r.ngroups] = r.ncands;
        if (r.ngroups == 0)
            break;
        fg_redis_reply_t *reps[RD_MAX_CLUSTERS];
        if (!load_or_reply(c, &r, reps)) {
            failed = true;
            break;
        }
        size_t g = 0;
        for (; g < r.ngroups && nitems < limit; g++) {
            cand_t *first = &cands[gstart[g]];
            snprintf(last_name, sizeof last_name, "%.*s", (int)first->len, first->name);
            snprintf(last_cluster, sizeof last_cluster, "%s",
                     by_name ? "" : c->parts[first->part].conf->name);
            scanned++;
            if (append_item(c, cands, gstart[g], gstart[g + 1], reps, last_name, match, present,
                            arg, nitems == 0, &body))
                nitems++;
        }
        if (g < r.ngroups)
            more = true; /* the page filled before the round's last group */
        for (size_t p = 0; p < c->nparts; p++)
            fg_redis_reply_free(reps[p]);
        if (!more)
            break;
    }
    if (!failed && more && nitems == limit) {
        /* The page is full: is anything left past it? */
        bool left = false;
        for (size_t i = 0; i < c->nparts; i++)
            left = left || st[i].pos < st[i].n || !st[i].done;
        more = left;
    }
    for (size_t i = 0; i < c->nparts; i++)
        fg_redis_reply_free(st[i].rep);
    free(cands);
    free(gstart);
    if (failed) {
        fg_buf_free(&body);
        return FG_OK; /* the problem was sent */
    }
    char cursor[2 * CURSOR_MAX] = "";
    if (more && last_name[0])
        rd_cursor_encode(last_name, last_cluster, cursor, sizeof cursor);
    json_t *parts = rd_parts_json(c);
    char *ptext = fg_json_dumps(parts, NULL);
    json_decref(parts);
    int rc = fg_buf_appendf(&body, "],\"cursor\":%s%s%s,\"clusters\":%s}", cursor[0] ? "\"" : "",
                            cursor[0] ? cursor : "null", cursor[0] ? "\"" : "", ptext);
    free(ptext);
    if (rc != FG_OK) {
        fg_buf_free(&body);
        return fg_reply_problem(c->req, FG_PROBLEM_INTERNAL, "the page is larger than %u bytes",
                                (unsigned)BODY_MAX);
    }
    fg_auth_charge_items(c->req, nitems);
    size_t len;
    char *text = fg_buf_steal(&body, &len);
    return rd_reply_text_etag(c->req, text, len, NULL);
}

/* ---- gets --------------------------------------------------------------- */

void rd_objs_free(json_t **objs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_decref(objs[i]);
        objs[i] = NULL;
    }
}

bool rd_get_raw_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *scope,
                         const char *name, const char *only_cluster, char **raws, size_t *lens,
                         size_t *found) {
    /* No memset of c: its parts table is large and a get fills only what it uses. */
    c->nparts = 0;
    c->resource = NULL;
    c->req = req;
    c->api = fg_req_app(req);
    c->kind = kind;
    c->scope = scope;
    *found = 0;
    if (!scope_or_reply(req, scope) || !rd_name_or_reply(req, name))
        return false;
    const fg_config_t *cfg = c->api->cfg;
    for (size_t i = 0; i < cfg->nclusters && c->nparts < RD_MAX_CLUSTERS; i++)
        if (only_cluster == NULL || strcmp(only_cluster, cfg->clusters[i].name) == 0)
            c->parts[c->nparts++] = (rd_part_t){.conf = &cfg->clusters[i], .state = RD_CURRENT};
    qsort(c->parts, c->nparts, sizeof c->parts[0], cmp_parts);
    const char *argv[RD_MAX_CLUSTERS][3];
    const char *const *argvs[RD_MAX_CLUSTERS];
    size_t argcs[RD_MAX_CLUSTERS];
    char keys[RD_MAX_CLUSTERS][160];
    fg_redis_reply_t *reps[RD_MAX_CLUSTERS];
    for (size_t i = 0; i < c->nparts; i++) {
        raws[i] = NULL;
        snprintf(keys[i], sizeof keys[i], "fg:o:%s:%s:%s", kind, c->parts[i].conf->name, scope);
        argv[i][0] = "HGET";
        argv[i][1] = keys[i];
        argv[i][2] = name;
        argvs[i] = argv[i];
        argcs[i] = 3;
    }
    if (c->nparts == 0)
        return true;
    /* The mirror answers when it holds every cluster's part (present or known absent). */
    fg_redis_mirror_t *mirror = c->api->pod_mirror;
    size_t held = 0;
    if (mirror && strcmp(kind, "pod") == 0) {
        while (held < c->nparts &&
               fg_redis_mirror_get(mirror, keys[held], name, &raws[held], &lens[held]) == FG_OK)
            held++;
        if (held == c->nparts) {
            for (size_t i = 0; i < c->nparts; i++)
                *found += raws[i] != NULL;
            return true;
        }
        for (size_t i = 0; i < held; i++) {
            free(raws[i]);
            raws[i] = NULL;
        }
    } else {
        mirror = NULL;
    }
    uint64_t seq = fg_redis_mirror_begin(mirror);
    if (!rd_pipeline_or_reply(req, c->api, c->nparts, argcs, argvs, reps))
        return false;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *v = fg_redis_reply_type(reps[i]) == FG_REDIS_STRING
                            ? fg_redis_reply_str(reps[i], &lens[i])
                            : NULL;
        if (v && lens[i] <= OBJECT_MAX) {
            raws[i] = fg_xstrndup(v, lens[i]);
            ++*found;
        }
        if (fg_redis_reply_type(reps[i]) == FG_REDIS_NIL || raws[i])
            fg_redis_mirror_put(mirror, keys[i], name, seq, raws[i], raws[i] ? lens[i] : 0);
    }
    free_replies(reps, c->nparts);
    return true;
}

bool rd_absence_known_or_reply(rd_ctx_t *c, const char *resource, const char *what) {
    const char *argv[2 * RD_MAX_CLUSTERS][2];
    const char *const *argvs[2 * RD_MAX_CLUSTERS];
    size_t argcs[2 * RD_MAX_CLUSTERS];
    char keys[2 * RD_MAX_CLUSTERS][160];
    fg_redis_reply_t *reps[2 * RD_MAX_CLUSTERS];
    char missing[512] = "";
    size_t used = 0;
    const char *reason = "";
    if (c->nparts == 0)
        return true;
    for (size_t i = 0; i < 2 * c->nparts; i++) {
        const char *cl = c->parts[i / 2].conf->name;
        if (i % 2 == 0)
            snprintf(keys[i], sizeof keys[i], "fg:cluster:%s", cl);
        else
            snprintf(keys[i], sizeof keys[i], "fg:sync:%s:%s", cl, resource);
        argv[i][0] = "HGETALL";
        argv[i][1] = keys[i];
        argvs[i] = argv[i];
        argcs[i] = 2;
    }
    if (!rd_pipeline_or_reply(c->req, c->api, 2 * c->nparts, argcs, argvs, reps))
        return false;
    for (size_t i = 0; i < c->nparts; i++) {
        part_from(&c->parts[i], reps[2 * i], reps[2 * i + 1]);
        if (c->parts[i].state == RD_MISSING && used < sizeof missing) {
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s",
                                     used ? ", " : "", c->parts[i].conf->name);
            reason = c->parts[i].reason;
        }
    }
    free_replies(reps, 2 * c->nparts);
    if (missing[0] == '\0')
        return true;
    fg_req_add_header(c->req, "Retry-After", "5");
    fg_reply_problem(c->req, FG_PROBLEM_NOT_READY,
                     "%s cannot be looked up in cluster %s (%s); retry when it has synced", what,
                     missing, reason);
    return false;
}

/* ---- ETags -------------------------------------------------------------- */

/* A 64-bit hash of bytes (8 at a time, then a final mix); two seeds give 128 bits. */
static uint64_t hash64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    const uint64_t m = 0x9e3779b97f4a7c15ull;
    h ^= n * m;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ (w * m)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ (w * m)) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

/* Whether If-None-Match names etag (a quoted string) or is "*". */
static bool none_match_hit(const char *inm, const char *etag) {
    if (inm == NULL)
        return false;
    size_t elen = strlen(etag);
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2; /* weak comparison, as RFC 9110 asks for If-None-Match */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        if (len == elen && memcmp(p, etag, len) == 0)
            return true;
        if (end == NULL)
            break;
        p = end;
    }
    return false;
}

/* Sends text (taken) as the 200 answer with its ETag, or 304. */
int rd_reply_text_etag(fg_req_t *req, char *text, size_t len, const char *etag_value) {
    char etag[160];
    if (etag_value)
        snprintf(etag, sizeof etag, "\"%s\"", etag_value);
    else
        snprintf(etag, sizeof etag, "\"%016llx%016llx\"",
                 (unsigned long long)hash64(text, len, 0xcbf29ce484222325ull),
                 (unsigned long long)hash64(text, len, 0x84222325cbf29ce4ull));
    fg_req_add_header(req, "ETag", etag);
    if (none_match_hit(fg_req_header(req, "If-None-Match"), etag)) {
        free(text);
        return fg_reply_static(req, 304, "application/json", "", 0);
    }
    return fg_reply_take(req, 200, "application/json", text, len);
}

int rd_reply_etag(fg_req_t *req, json_t *body, const char *etag_value) {
    size_t len;
    char *text = fg_json_dumps(body, &len);
    json_decref(body);
    return rd_reply_text_etag(req, text, len, etag_value);
}

void rd_group_version(const rd_ctx_t *c, json_t *const *objs, char *out, size_t outlen) {
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    size_t n = 0;
    const char *only = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *v = objs[i] ? rd_str(objs[i], "version") : NULL;
        if (v == NULL)
            continue;
        only = v;
        n++;
        const char *cl = c->parts[i].conf->name;
        h1 = hash64(cl, strlen(cl) + 1, h1);
        h1 = hash64(v, strlen(v) + 1, h1);
        h2 = hash64(cl, strlen(cl) + 1, h2);
        h2 = hash64(v, strlen(v) + 1, h2);
    }
    if (n == 1 && strlen(only) <= 64 && name_chars_ok(only, strlen(only), 64)) {
        snprintf(out, outlen, "%s", only); /* one cluster: the object's own resourceVersion */
        return;
    }
    snprintf(out, outlen, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

/* ---- JSON helpers ------------------------------------------------------- */

void rd_copy(json_t *dst, const char *as, const json_t *src, const char *key) {
    json_t *v = json_object_get(src, key);
    if (v && !json_is_null(v))
        json_object_set(dst, as, v);
}

int64_t rd_int(const json_t *src, const char *key, int64_t dflt) {
    json_t *v = json_object_get(src, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

const char *rd_str(const json_t *src, const char *key) {
    return json_string_value(json_object_get(src, key));
}

json_t *rd_string_cut(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n <= max)
        return json_string(s);
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--; /* never cut inside a UTF-8 sequence */
    return json_stringn(s, max);
}

json_t *rd_str_or_null(const json_t *src, const char *key) {
    const char *s = rd_str(src, key);
    return s ? json_string(s) : json_null();
}

static bool digits(const char **p) {
    const char *s = *p;
    while (**p >= '0' && **p <= '9')
        (*p)++;
    return *p > s;
}

static bool quantity_ok(const char *v, bool cpu) {
    static const char *const suffixes[] = {"",  "Ki", "Mi", "Gi", "Ti", "Pi",
                                           "k", "M",  "G",  "T",  "P",  NULL};
    const char *p = v;
    if (strlen(v) > 32 || !digits(&p))
        return false;
    if (cpu) {
        if (*p == 'm')
            return p[1] == '\0';
        if (*p == '.') {
            const char *f = ++p;
            return digits(&p) && p - f <= 3 && *p == '\0';
        }
        return *p == '\0';
    }
    for (size_t i = 0; suffixes[i]; i++)
        if (strcmp(p, suffixes[i]) == 0)
            return true;
    return false;
}

void rd_copy_quantity(json_t *dst, const char *as, const json_t *src, const char *key, bool cpu) {
    const char *v = rd_str(src, key);
    if (v && quantity_ok(v, cpu))
        json_object_set_new(dst, as, json_string(v));
}

static json_t *amounts(const json_t *src) {
    json_t *o = json_object();
    rd_copy_quantity(o, "cpu", src, "cpu", true);
    rd_copy_quantity(o, "memory", src, "memory", false);
    return o;
}

json_t *rd_resources(const json_t *src) {
    json_t *o = json_object();
    if (json_is_object(json_object_get(src, "requests")))
        json_object_set_new(o, "requests", amounts(json_object_get(src, "requests")));
    if (json_is_object(json_object_get(src, "limits")))
        json_object_set_new(o, "limits", amounts(json_object_get(src, "limits")));
    return o;
}

json_t *rd_spec_containers(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *name = rd_str(c, "name"), *image = rd_str(c, "image");
        if (name == NULL || image == NULL || image[0] == '\0')
            continue;
        json_t *o = json_pack("{s:s,s:s}", "name", name, "image", image);
        if (json_is_object(json_object_get(c, "resources")))
            json_object_set_new(o, "resources", rd_resources(json_object_get(c, "resources")));
        json_array_append_new(out, o);
    }
    return out;
}
