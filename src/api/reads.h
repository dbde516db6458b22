/* api/reads.h: what the read handlers (pods.c, workloads.c, platform.c) share: each member
 * cluster's part of an answer (Current / Stale / Missing, judged by cache/), query parameters
 * (limit, cursor, label selector), one-round-trip reads of objects (reads.c), the keyset walk over
 * the per-cluster sorted indexes (walk.c), the item cache (icache.c), presenters' helpers
 * (present.c), ETag / If-None-Match, and the problems they send. Not part of any public surface.
 *
 * Helpers named *_or_reply send the problem themselves and return false; the handler then
 * returns FG_OK at once.
 */
#ifndef FLEETGATE_API_READS_H
#define FLEETGATE_API_READS_H

#include "api_internal.h"
#include "fleetgate/cache.h"
#include "selector.h"

#define RD_MAX_CLUSTERS 64  /* the configuration allows at most 64 member clusters */
#define RD_NAME_MAX     253 /* a DNS-1123 subdomain */

/* One member cluster's part of an answer: what the cache holds of it (Current / Stale /
 * Missing, judged by cache/ from fg:cluster and fg:sync). */
typedef struct {
    const fg_cluster_conf_t *conf; /* borrowed from the configuration */
    fg_cache_freshness_t fresh;
} rd_part_t;

/* One read: the request, what it reads, and the clusters in scope (after the cluster and zone
 * filters), sorted by name. */
typedef struct {
    fg_req_t *req;
    fg_api_t *api;
    const char *kind;     /* fleetgate's kind name: "pod", "app", ... */
    const char *resource; /* the Kubernetes resource its sync state is kept under */
    const char *scope;    /* the project, or "_" for cluster-scoped kinds */
    rd_part_t parts[RD_MAX_CLUSTERS];
    size_t nparts;
} rd_ctx_t;

/* Turns an object group into a list item: objs[i] is the object of parts[i] (borrowed; NULL when
 * that cluster has none), name the group's name. Returns a new reference, or NULL to leave the
 * group out (a filter did not match). */
typedef json_t *(*rd_present_fn)(const rd_ctx_t *c, const char *name, json_t *const *objs,
                                 void *arg);

/* ---- set-up ------------------------------------------------------------- */

/* Fills c for a read of kind/resource in scope, over the configured clusters that pass the
 * cluster and zone filters (NULL: no filter), and reads each one's state from Redis. */
bool rd_begin_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                       const char *scope, const char *cluster, const char *zone);
/* The `clusters` member of a list answer (a new reference). */
json_t *rd_parts_json(const rd_ctx_t *c);

/* ---- parameters --------------------------------------------------------- */

/* limit: 1..1000, 100 when absent (422 naming `limit` otherwise). */
bool rd_limit_or_reply(fg_req_t *req, size_t *limit);
/* An optional query parameter that must be a DNS-1123 label (cluster, zone is free text up to 63,
 * app); NULL when absent. */
bool rd_label_param_or_reply(fg_req_t *req, const char *name, const char **out);
/* The optional `cluster` parameter: a DNS-1123 label naming a configured member cluster (422
 * otherwise: an unknown name must not answer an empty list). */
bool rd_cluster_param_or_reply(fg_req_t *req, const char **out);
/* An optional parameter whose value must be one of values (NULL-terminated). */
bool rd_enum_param_or_reply(fg_req_t *req, const char *name, const char *const *values,
                            const char **out);
/* An object name from the path (the route's last {param}): a DNS-1123 subdomain, else 422. The
 * get helpers below check theirs, and the {project} of every read. */
bool rd_name_or_reply(fg_req_t *req, const char *name);
/* labelSelector into *out (NULL when absent); free with rd_selector_free (selector.h). */
bool rd_selector_or_reply(fg_req_t *req, rd_selector_t **out);

/* The `cursor` parameter: *have false when absent; name and cluster (at least RD_NAME_MAX + 1
 * and 64 bytes) of the last item of the previous page otherwise. */
bool rd_cursor_or_reply(fg_req_t *req, char *name, char *cluster, bool *have);

/* ---- Redis -------------------------------------------------------------- */

/* fg_redis_batch_run, answering 503 redis-unavailable (with the reason) when Redis cannot. */
bool rd_batch_or_reply(fg_req_t *req, fg_api_t *api, fg_redis_batch_t *b);
/* A cached object (an HGET/HMGET element) parsed: a new reference, or NULL when it is absent
 * (deleted meanwhile) or not a JSON object (logged with req_id: the cache is damaged). */
json_t *rd_parse_object(const fg_redis_reply_t *v, const char *req_id);
/* The same for cached bytes already in hand. */
json_t *rd_parse_cached(const char *s, size_t len, const char *req_id);
/* Unix ms as an RFC 3339 JSON string; null for 0. */
json_t *rd_time_or_null(int64_t ms);

/* ---- the walk ----------------------------------------------------------- */

/* What a list filter looks at in a presented item; the item cache keeps it beside the item. */
typedef struct {
    char phase[16]; /* status phase ("" when none) */
    char app[64];   /* the app it belongs to ("" when none) */
    char *labels;   /* its labels as compact JSON text, NULL when none (owned) */
} rd_facts_t;

/* Whether an item with these facts passes the request's filters. */
typedef bool (*rd_match_fn)(const rd_facts_t *facts, void *arg);

/* Answers one page of a list: reads the `cursor` parameter, walks the per-cluster indexes
 * fg:i:{kind}:{cluster}:{scope} of the parts that are not Missing in (name, cluster) order,
 * loading at most a page of objects at a time (HMGET), and hands each group to present. With
 * by_name, one group holds a name's objects from every cluster (apps, projects); otherwise each
 * (name, cluster) is a group of its own (pods). Sends the answer (200 with ETag, or 304) or the
 * problem. Always returns FG_OK (the handler's return value).
 * match NULL: present filters (returns NULL to leave a group out). match set (kinds whose item
 * depends on the object's bytes alone, one object per group): present never filters, items may
 * come from the item cache (icache.c), and match decides on their facts. */
int rd_list_reply(rd_ctx_t *c, bool by_name, rd_match_fn match, size_t limit, rd_present_fn present,
                  void *arg);

/* rd_begin_or_reply for a get, in the same round trip: also loads the object name of every part
 * (objs[i] for parts[i], new references or NULL; objs holds RD_MAX_CLUSTERS), over the parts of
 * only_cluster when it is not NULL. *found counts them. */
bool rd_get_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                     const char *scope, const char *name, const char *only_cluster, json_t **objs,
                     size_t *found);
void rd_objs_free(json_t **objs, size_t n);
/* rd_get_or_reply in two halves, so that several reads (and other commands) share one round
 * trip: _add checks scope and name (false when it replied 422) and adds the get's commands to b,
 * at saying where; once b ran, _read fills c, objs (RD_MAX_CLUSTERS) and *found from it. */
typedef struct {
    const char *name;
    size_t first[RD_MAX_CLUSTERS], obj[RD_MAX_CLUSTERS];
} rd_at_t;
bool rd_get_add_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *resource,
                         const char *scope, const char *name, fg_redis_batch_t *b, rd_at_t *at);
void rd_get_read(rd_ctx_t *c, const fg_redis_batch_t *b, const rd_at_t *at, json_t **objs,
                 size_t *found);
/* After a get found nothing in c's clusters: true when every one of them is synced for resource,
 * so "not found" is the truth; otherwise (a cluster never synced, or its data lost with
 * Redis's) whether `what` exists there is unknown, and this replies 503 not-ready naming the
 * cluster, with Retry-After. */
bool rd_absence_known_or_reply(rd_ctx_t *c, const char *resource, const char *what);

/* A get that shows no part states, in one round trip: the cached bytes of name in every part
 * (raws[i], lens[i] for parts[i]: new strings the caller frees, or NULL), over the parts of
 * only_cluster when it is not NULL. *found counts them. With prep (pods only): when the pod
 * mirror holds every part, the object is in exactly one, and the answer made from it is
 * attached there (rd_attach_prepared), *prep is that answer (a reference the caller lets go
 * of), *found is 1 and no raw is copied; otherwise *prep is NULL. */
bool rd_get_raw_or_reply(rd_ctx_t *c, fg_req_t *req, const char *kind, const char *scope,
                         const char *name, const char *only_cluster, char **raws, size_t *lens,
                         size_t *found, fg_prepared_t **prep);
/* Keeps prep (the answer made from raw, the pod name of part i of a get) with the mirror's copy
 * of raw, for the next GET of it. */
void rd_attach_prepared(const rd_ctx_t *c, size_t i, const char *name, const char *raw, size_t len,
                        fg_prepared_t *prep);
/* Sends prep (its tag is the quoted ETag) as the 200 answer, or 304 on If-None-Match. */
int rd_reply_prepared_etag(fg_req_t *req, fg_prepared_t *prep);

/* ---- the item cache (icache.c) ------------------------------------------ */

/* An item's key: a 128-bit hash of the cached object bytes it was presented from. */
typedef struct {
    uint64_t h1, h2;
} rd_icache_key_t;

rd_icache_key_t rd_icache_key(const char *raw, size_t len);
/* Appends the presented text cached under k to text, its ETag value to etag (may be NULL) and
 * its facts to facts (may be NULL; facts->labels is then a new string the caller frees); false
 * when none is cached. */
bool rd_icache_get(rd_icache_key_t k, fg_buf_t *text, char *etag, size_t etaglen,
                   rd_facts_t *facts);
/* Caches text, etag and facts (may be NULL) under k (copied). */
void rd_icache_put(rd_icache_key_t k, const char *text, size_t len, const char *etag,
                   const rd_facts_t *facts);
/* The facts list filters look at in a presented item (facts->labels: a new string). */
void rd_facts_of(const json_t *item, rd_facts_t *f);

/* ---- replies ------------------------------------------------------------ */

/* Sends body (stolen) with ETag: etag_value quoted when given, otherwise a hash of the body;
 * answers 304 instead when If-None-Match names it. */
int rd_reply_etag(fg_req_t *req, json_t *body, const char *etag_value);
/* rd_reply_etag for a body already serialised (text is taken). */
int rd_reply_text_etag(fg_req_t *req, char *text, size_t len, const char *etag_value);
/* 422 invalid with errors [{parameter, detail}]. */
int rd_reply_invalid_param(fg_req_t *req, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A version for an object made of several clusters' objects: a hash of (cluster, version). */
void rd_group_version(const rd_ctx_t *c, json_t *const *objs, char *out, size_t outlen);

/* ---- small JSON helpers for presenters ---------------------------------- */

/* Copies src[key] into dst[as] when it is present and not null. */
void rd_copy(json_t *dst, const char *as, const json_t *src, const char *key);
/* src[key] as an integer (dflt when absent or not an integer). */
int64_t rd_int(const json_t *src, const char *key, int64_t dflt);
/* src[key] as a string (NULL when absent). */
const char *rd_str(const json_t *src, const char *key);
/* A string cut to at most max bytes on a UTF-8 boundary (a new reference). */
json_t *rd_string_cut(const char *s, size_t max);
/* src[key] as a string, or JSON null. */
json_t *rd_str_or_null(const json_t *src, const char *key);
/* Copies src[key] into dst[as] when it is a quantity the API's CpuQuantity (cpu) or
 * MemoryQuantity pattern accepts; other spellings are left out. */
void rd_copy_quantity(json_t *dst, const char *as, const json_t *src, const char *key, bool cpu);
/* The API's Resources ({requests, limits} of cpu and memory) from a simplified one. */
json_t *rd_resources(const json_t *src);
/* The API's Container list ({name, image, resources}) from simplified containers. */
json_t *rd_spec_containers(const json_t *list);
/* A project as the API shows it, from its namespaces (objs[i] of parts[i], NULL when absent;
 * at least one present): a new reference (platform.c). */
json_t *rd_present_project(const rd_ctx_t *c, json_t *const *objs);
/* Removes from o's labels those fleetgate writes for itself (app.kubernetes.io/name and
 * /managed-by, fleetgate.io/...), so the body of a GET can be sent back with PUT. */
void rd_hide_managed_labels(json_t *o);
/* An app as the API shows it, from its Deployments (the same convention; workloads.c). */
json_t *rd_present_app(const rd_ctx_t *c, json_t *const *objs);
/* The API's JobSet of a job set's cached Jobs (workloads.c). A new reference. */
json_t *rd_present_jobset(const rd_ctx_t *c, json_t *const *objs);
/* The API's CronJob of a cron job's cached CronJobs (workloads.c). A new reference. */
json_t *rd_present_cronjob(const rd_ctx_t *c, json_t *const *objs);
/* The API's Scaler of a scaler's cached HPAs (workloads.c). A new reference. */
json_t *rd_present_scaler(const rd_ctx_t *c, json_t *const *objs);
/* The API's Pod of a cached (simplified) pod (pods.c). A new reference. */
json_t *rd_present_pod(const json_t *cached);
/* An app, job set, cron job or scaler (kind: its cache kind, "app"...) as GET answers it, from
 * its objects of c's parts (workloads.c); NULL for another kind. */
json_t *rd_present_workload(const char *kind, const rd_ctx_t *c, json_t *const *objs);
/* The part of c whose cluster is named (NULL when none). */
const rd_part_t *rd_part(const rd_ctx_t *c, const char *cluster);

#endif
