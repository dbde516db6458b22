/* api/reads.c: the machinery every read API shares (see reads.h): the member clusters' parts
 * of an answer (judged by cache/ from fg:cluster and fg:sync), one-round-trip gets, query
 * parameters and the problems they send, ETags and If-None-Match. The list walk is walk.c, the
 * item cache icache.c, label selectors selector.c, cursors cursor.c, presenters' helpers
 * present.c.
 */
#include "reads.h"

#include "cursor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT_DEFAULT 100
#define LIMIT_MAX     1000
#define OBJECT_MAX    (4u << 20)

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

int rd_reply_invalid_param(fg_req_t *req, const char *param, const char *fmt, ...) {
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_t *errors = json_pack("{s:[{s:s,s:s}]}", "errors", "parameter", param, "detail", detail);
    return fg_reply_problem_ext(req, FG_PROBLEM_INVALID, errors, "%s %s", param, detail);
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

/* Refuses a value of param with 422: "<param> <rule> (got "<value, cleaned>")". Returns false. */
static bool refuse(fg_req_t *req, const char *param, const char *value, const char *rule) {
    char s[80];
    shown(value, s, sizeof s);
    rd_reply_invalid_param(req, param, "%s (got \"%s\")", rule, s);
    return false;
}

#define RULE_LABEL "must be a DNS-1123 label: lower-case letters, digits and -, at most 63"
#define RULE_NAME  "must be a DNS-1123 name: lower-case letters, digits, - and ., at most 253"

/* ---- Redis -------------------------------------------------------------- */

bool rd_batch_or_reply(fg_req_t *req, fg_api_t *api, fg_redis_batch_t *b) {
    char why[256];
    if (fg_redis_batch_run(api->redis, b, why, sizeof why) == FG_OK)
        return true;
    FG_LOG(FG_LOG_ERROR, fg_req_id(req), "read %s: %s", fg_req_path(req), why);
    fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", why);
    return false;
}

/* ---- parts -------------------------------------------------------------- */

static int cmp_parts(const void *a, const void *b) {
    return strcmp(((const rd_part_t *)a)->conf->name, ((const rd_part_t *)b)->conf->name);
}

/* Judges a part from its fg:cluster and fg:sync replies (cache/ says what they mean). */
static void part_from(rd_part_t *p, const fg_redis_reply_t *cl, const fg_redis_reply_t *sync) {
    fg_cache_cluster_t health;
    fg_cache_sync_t state;
    fg_cache_cluster_read(cl, &health);
    fg_cache_sync_read(sync, &state);
    fg_cache_freshness_judge(&health, &state, &p->fresh);
}

/* The {project} of a namespaced read must be a DNS-1123 label (422 naming it otherwise). */
static bool scope_or_reply(fg_req_t *req, const char *scope) {
    if (strcmp(scope, "_") == 0 || fg_is_dns1123_label(scope, strlen(scope)))
        return true;
    return refuse(req, "project", scope, RULE_LABEL);
}

bool rd_name_or_reply(fg_req_t *req, const char *name) {
    size_t n = strlen(name);
    bool ok = fg_is_dns1123_chars(name, n, RD_NAME_MAX) && name[0] != '-' && name[0] != '.' &&
              name[n - 1] != '-' && name[n - 1] != '.';
    if (ok)
        return true;
    /* the parameter is the route's last {param} */
    const fg_route_t *route = fg_req_route(req);
    const char *pattern = route ? route->pattern : "", *brace = strrchr(pattern, '{');
    char param[32] = "name";
    if (brace && strchr(brace, '}'))
        snprintf(param, sizeof param, "%.*s", (int)(strchr(brace, '}') - brace - 1), brace + 1);
    return refuse(req, param, name, RULE_NAME);
}

/* The first half of a read: checks scope and name (422), takes the parts in scope and adds each
 * part's fg:cluster and fg:sync hashes, and with name its object, to b (at says where). false
 * when it replied. */
static bool begin_add(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                      const char *scope, const char *cluster, const char *zone, const char *name,
                      fg_redis_batch_t *b, rd_at_t *at) {
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
    at->name = name;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *cl = c->parts[i].conf->name;
        fg_cache_key_t k;
        at->first[i] = fg_cache_batch_add_state(b, cl, resource);
        if (name)
            at->obj[i] = fg_redis_batch_addv(b, "HGET", fg_cache_key_objects(&k, kind, cl, scope),
                                             name, NULL);
    }
    return true;
}

/* The second half, once b ran: judges each part and, with a name, parses its object. */
static void begin_read(rd_ctx_t *c, const fg_redis_batch_t *b, const rd_at_t *at, json_t **objs,
                       size_t *found) {
    if (found)
        *found = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        part_from(&c->parts[i], fg_redis_batch_reply(b, at->first[i]),
                  fg_redis_batch_reply(b, at->first[i] + 1));
        if (!at->name)
            continue;
        /* A cluster never synced contributes nothing, even a leftover. */
        objs[i] = c->parts[i].fresh.state == FG_FRESH_MISSING
                      ? NULL
                      : rd_parse_object(fg_redis_batch_reply(b, at->obj[i]), fg_req_id(c->req));
        *found += objs[i] != NULL;
    }
}

/* One round trip: each part's fg:cluster and fg:sync hashes, and with name its object. */
static bool begin(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                  const char *scope, const char *cluster, const char *zone, const char *name,
                  json_t **objs, size_t *found) {
    if (found)
        *found = 0;
    fg_redis_batch_t *b = fg_redis_batch_new();
    rd_at_t at;
    bool ok = begin_add(c, req, kind, resource, scope, cluster, zone, name, b, &at);
    if (ok && c->nparts > 0) {
        ok = rd_batch_or_reply(req, c->api, b);
        if (ok)
            begin_read(c, b, &at, objs, found);
    }
    fg_redis_batch_free(b);
    return ok;
}

bool rd_get_add_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                         const char *scope, const char *name, fg_redis_batch_t *b, rd_at_t *at) {
    return begin_add(c, req, kind, resource, scope, NULL, NULL, name, b, at);
}

void rd_get_read(rd_ctx_t *c, const fg_redis_batch_t *b, const rd_at_t *at, json_t **objs,
                 size_t *found) {
    for (size_t i = 0; i < RD_MAX_CLUSTERS; i++)
        objs[i] = NULL;
    begin_read(c, b, at, objs, found);
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
        const fg_cache_freshness_t *f = &p->fresh;
        json_t *o =
            json_pack("{s:s,s:s,s:o,s:o,s:o}", "name", p->conf->name, "state",
                      fg_cache_freshness_name(f->state), "staleSince",
                      f->state == FG_FRESH_STALE ? rd_time_or_null(f->stale_since_ms) : json_null(),
                      "resourceVersion", f->rv[0] ? json_string(f->rv) : json_null(),
                      "lastAppliedAt", rd_time_or_null(f->applied_ms));
        if (f->state != FG_FRESH_CURRENT && f->reason[0])
            json_object_set_new(o, "reason", json_string(f->reason));
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
    if (!fg_is_dns1123_label(v, strlen(v)))
        return refuse(req, name, v, RULE_LABEL);
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
    char rule[300] = "must be one of ";
    for (size_t i = 0, used = strlen(rule); values[i] && used < sizeof rule; i++)
        used += (size_t)snprintf(rule + used, sizeof rule - used, "%s%s", i ? ", " : "", values[i]);
    return refuse(req, name, v, rule);
}

/* ---- parameters: selectors and cursors ---------------------------------- */

bool rd_selector_or_reply(fg_req_t *req, rd_selector_t **out) {
    const char *v = fg_req_query(req, "labelSelector");
    const char *why = NULL;
    *out = NULL;
    if (v == NULL || rd_selector_parse(v, out, &why) == FG_OK)
        return true;
    char rule[160];
    snprintf(rule, sizeof rule, "is not a label selector: %s", why);
    return refuse(req, "labelSelector", v, rule);
}

bool rd_cursor_or_reply(fg_req_t *req, char *name, char *cluster, bool *have) {
    const char *v = fg_req_query(req, "cursor");
    *have = false;
    if (v == NULL)
        return true;
    if (rd_cursor_decode(v, name, RD_NAME_MAX + 1, cluster, 64) == FG_OK) {
        *have = true;
        return true;
    }
    return refuse(req, "cursor", v, "is not a cursor this API gave");
}

/* ---- gets --------------------------------------------------------------- */

json_t *rd_parse_object(const fg_redis_reply_t *v, const char *req_id) {
    size_t len;
    const char *s = v ? fg_redis_reply_str(v, &len) : NULL;
    if (s == NULL || fg_redis_reply_type(v) != FG_REDIS_STRING || len > OBJECT_MAX)
        return NULL; /* deleted between the index read and this one */
    return rd_parse_cached(s, len, req_id);
}

json_t *rd_parse_cached(const char *s, size_t len, const char *req_id) {
    json_t *o = NULL;
    char err[160] = "";
    if (fg_json_load(s, len, &o, err, sizeof err) != FG_OK || !json_is_object(o)) {
        FG_LOG(FG_LOG_ERROR, req_id, "cache: an object is not a JSON object: %s", err);
        json_decref(o);
        return NULL;
    }
    return o;
}

void rd_objs_free(json_t **objs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_decref(objs[i]);
        objs[i] = NULL;
    }
}

/* The answer attached to the one part that holds the pod, when the mirror holds every part. */
static bool prepared_of(fg_redis_mirror_t *mirror, const rd_ctx_t *c, const fg_cache_key_t *keys,
                        const char *name, fg_prepared_t **prep) {
    fg_prepared_t *found = NULL;
    size_t present = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        bool here = false;
        fg_prepared_t *p = NULL;
        if (fg_redis_mirror_peek(mirror, keys[i].s, name, &here, &p) != FG_OK) {
            fg_prepared_unref(found);
            return false;
        }
        present += here;
        if (p && found == NULL)
            found = p;
        else
            fg_prepared_unref(p);
    }
    if (present != 1 || found == NULL) {
        fg_prepared_unref(found);
        return false;
    }
    *prep = found;
    return true;
}

void rd_attach_prepared(const rd_ctx_t *c, size_t i, const char *name, const char *raw, size_t len,
                        fg_prepared_t *prep) {
    fg_cache_key_t key;
    if (c->api->pod_mirror == NULL || strcmp(c->kind, "pod") != 0)
        return;
    fg_cache_key_objects(&key, c->kind, c->parts[i].conf->name, c->scope);
    fg_redis_mirror_attach(c->api->pod_mirror, key.s, name, raw, len, prep);
}

bool rd_get_raw_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *scope,
                         const char *name, const char *only_cluster, char **raws, size_t *lens,
                         size_t *found, fg_prepared_t **prep) {
    /* No memset of c: its parts table is large and a get fills only what it uses. */
    c->nparts = 0;
    c->resource = NULL;
    c->req = req;
    c->api = fg_req_app(req);
    c->kind = kind;
    c->scope = scope;
    *found = 0;
    if (prep)
        *prep = NULL;
    if (!scope_or_reply(req, scope) || !rd_name_or_reply(req, name))
        return false;
    const fg_config_t *cfg = c->api->cfg;
    for (size_t i = 0; i < cfg->nclusters && c->nparts < RD_MAX_CLUSTERS; i++)
        if (only_cluster == NULL || strcmp(only_cluster, cfg->clusters[i].name) == 0)
            c->parts[c->nparts++] = (rd_part_t){.conf = &cfg->clusters[i]};
    qsort(c->parts, c->nparts, sizeof c->parts[0], cmp_parts);
    fg_cache_key_t keys[RD_MAX_CLUSTERS];
    for (size_t i = 0; i < c->nparts; i++) {
        raws[i] = NULL;
        fg_cache_key_objects(&keys[i], kind, c->parts[i].conf->name, scope);
    }
    if (c->nparts == 0)
        return true;
    /* The mirror answers when it holds every cluster's part (present or known absent). */
    fg_redis_mirror_t *mirror = c->api->pod_mirror;
    size_t held = 0;
    if (mirror && strcmp(kind, "pod") == 0) {
        if (prep && prepared_of(mirror, c, keys, name, prep)) {
            for (size_t i = 0; i < c->nparts; i++)
                lens[i] = 0;
            *found = 1;
            return true;
        }
        while (held < c->nparts &&
               fg_redis_mirror_get(mirror, keys[held].s, name, &raws[held], &lens[held]) == FG_OK)
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
    fg_redis_batch_t *b = fg_redis_batch_new();
    for (size_t i = 0; i < c->nparts; i++)
        fg_redis_batch_addv(b, "HGET", keys[i].s, name, NULL);
    bool ok = rd_batch_or_reply(req, c->api, b);
    for (size_t i = 0; ok && i < c->nparts; i++) {
        const fg_redis_reply_t *rep = fg_redis_batch_reply(b, i);
        const char *v =
            fg_redis_reply_type(rep) == FG_REDIS_STRING ? fg_redis_reply_str(rep, &lens[i]) : NULL;
        if (v && lens[i] <= OBJECT_MAX) {
            raws[i] = fg_xstrndup(v, lens[i]);
            ++*found;
        }
        if (fg_redis_reply_type(rep) == FG_REDIS_NIL || raws[i])
            fg_redis_mirror_put(mirror, keys[i].s, name, seq, raws[i], raws[i] ? lens[i] : 0);
    }
    fg_redis_batch_free(b);
    return ok;
}

bool rd_absence_known_or_reply(rd_ctx_t *c, const char *resource, const char *what) {
    size_t first[RD_MAX_CLUSTERS];
    char missing[512] = "";
    size_t used = 0;
    const char *reason = "";
    if (c->nparts == 0)
        return true;
    fg_redis_batch_t *b = fg_redis_batch_new();
    for (size_t i = 0; i < c->nparts; i++)
        first[i] = fg_cache_batch_add_state(b, c->parts[i].conf->name, resource);
    bool ok = rd_batch_or_reply(c->req, c->api, b);
    for (size_t i = 0; ok && i < c->nparts; i++) {
        part_from(&c->parts[i], fg_redis_batch_reply(b, first[i]),
                  fg_redis_batch_reply(b, first[i] + 1));
        if (c->parts[i].fresh.state == FG_FRESH_MISSING && used < sizeof missing) {
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s",
                                     used ? ", " : "", c->parts[i].conf->name);
            reason = c->parts[i].fresh.reason;
        }
    }
    if (ok && missing[0]) {
        fg_req_add_header(c->req, "Retry-After", "5");
        fg_reply_problem(c->req, FG_PROBLEM_NOT_READY,
                         "%s cannot be looked up in cluster %s (%s); retry when it has synced",
                         what, missing, reason);
        ok = false;
    }
    fg_redis_batch_free(b);
    return ok && missing[0] == '\0';
}

/* ---- ETags -------------------------------------------------------------- */

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
                 (unsigned long long)fg_hash64(text, len, 0xcbf29ce484222325ull),
                 (unsigned long long)fg_hash64(text, len, 0x84222325cbf29ce4ull));
    fg_req_add_header(req, "ETag", etag);
    if (none_match_hit(fg_req_header(req, "If-None-Match"), etag)) {
        free(text);
        return fg_reply_static(req, 304, "application/json", "", 0);
    }
    return fg_reply_take(req, 200, "application/json", text, len);
}

int rd_reply_prepared_etag(fg_req_t *req, fg_prepared_t *prep) {
    fg_req_add_header(req, "ETag", prep->tag);
    if (none_match_hit(fg_req_header(req, "If-None-Match"), prep->tag))
        return fg_reply_static(req, 304, "application/json", "", 0);
    return fg_reply_prepared(req, 200, "application/json", prep);
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
        h1 = fg_hash64(cl, strlen(cl) + 1, h1);
        h1 = fg_hash64(v, strlen(v) + 1, h1);
        h2 = fg_hash64(cl, strlen(cl) + 1, h2);
        h2 = fg_hash64(v, strlen(v) + 1, h2);
    }
    if (n == 1 && strlen(only) <= 64 && fg_is_dns1123_chars(only, strlen(only), 64)) {
        snprintf(out, outlen, "%s", only); /* one cluster: the object's own resourceVersion */
        return;
    }
    snprintf(out, outlen, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}
