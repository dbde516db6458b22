/* api/apps.c: creating, scaling, pausing, resuming, restarting, stopping and deleting apps.
 *
 * An app is one Deployment per chosen cluster (appspec.c builds it). A create validates the
 * body, checks the project and its tier quota, places the replicas (fed/: `?dryRun=true` stops
 * here and answers the explanation), audits the intent (fail closed), creates the Deployments
 * at once, waits until the cache shows them and answers what a GET shows. When a cluster fails
 * a create, the Deployments the others made are deleted again (rollback) and the answer says
 * so: a create is all or nothing. A verb or scale that fails in one cluster keeps what the
 * others applied (each is idempotent, so the same request again converges) and the answer
 * names the failing cluster.
 */
#include "appspec.h"
#include "workload.h"
#include "writes.h"

#include "fleetgate/kube.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define DEPLOYMENTS "deployments"

/* The configuration (the sidecar catalogue). */
static const fg_config_t *cfg_of(fg_req_t *req) {
    return api_live_cfg(req); /* the catalogue as the request found it (SIGHUP may change it) */
}

/* ---- reading what is there ------------------------------------------------------------- */

/* The project as presented (a new reference), or NULL when it replied 404 / 503. */
json_t *project_or_reply(fg_req_t *req, const char *project) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", project, NULL, objs, &found))
        return NULL;
    json_t *p = found ? rd_present_project(&c, objs) : NULL;
    rd_objs_free(objs, c.nparts);
    if (p == NULL)
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no project %s", project);
    return p;
}

#define QUOTA_TTL_MS 60000 /* a reservation outlives its write until the cache shows it */
/* How long the tier's usage read from the cache is kept in Redis for the next writes (any
 * replica). An app written meanwhile is counted by its reservation; one changed outside
 * fleetgate, or a job set that finished, is seen at most this late. */
#define QUOTA_USAGE_KEEP_MS 1000

static const struct {
    const char *res;
    bool milli;
} quota_rows[3] = {{"cpu", true}, {"memory", false}, {"pods", false}};

/* What replicas of an app (spec, or a cached app's containers) take: {cpu, memory, pods}. */
static void demand(const json_t *containers, int64_t replicas, int64_t out[3]) {
    const json_t *c;
    size_t i;
    out[0] = out[1] = 0;
    out[2] = replicas;
    json_array_foreach(containers, i, c) {
        const json_t *r = json_object_get(json_object_get(c, "resources"), "requests");
        for (size_t k = 0; k < 2; k++) {
            const char *q = json_string_value(json_object_get(r, quota_rows[k].res));
            int64_t n = 0;
            if (q && fg_kube_quantity_parse(q, strlen(q), quota_rows[k].milli, &n) == FG_OK)
                out[k] += n * replicas;
        }
    }
}

/* by_name ({name: [cpu, memory, pods]}) as a table of uses (names copied). */
static fg_cache_quota_use_t *uses_of(const json_t *by_name, size_t *nuses) {
    fg_cache_quota_use_t *uses = fg_xcalloc(json_object_size(by_name) + 1, sizeof *uses);
    const char *name;
    json_t *sum;
    *nuses = 0;
    json_object_foreach((json_t *)by_name, name, sum) {
        fg_cache_quota_use_t *u = &uses[(*nuses)++];
        u->app = fg_xstrdup(name);
        for (size_t r = 0; r < 3; r++)
            u->amount[r] = json_integer_value(json_array_get(sum, r));
    }
    return uses;
}

static void uses_free(fg_cache_quota_use_t *uses, size_t n) {
    for (size_t i = 0; i < n; i++)
        free((char *)uses[i].app);
    free(uses);
}

/* What the cache shows of the tier's apps in the project, one entry an app (summed over
 * clusters). false (why said) when Redis could not be read. */
static bool tier_usage(fg_api_t *api, const char *rid, const char *project, const char *tier,
                       fg_cache_quota_use_t **uses, size_t *nuses, char *why, size_t len) {
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "app", api->cfg->clusters[i].name, project),
                            NULL);
    if (fg_redis_batch_run(api->redis, b, why, len) != FG_OK) {
        fg_redis_batch_free(b);
        return false;
    }
    json_t *by_name = json_object();
    for (size_t i = 0; i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, i);
        for (size_t j = 1; j < fg_redis_reply_len(h); j += 2) {
            json_t *a = rd_parse_object(fg_redis_reply_at(h, j), rid);
            const char *name = rd_str(a, "name"),
                       *t = rd_str(json_object_get(a, "labels"), AS_TIER_LABEL);
            /* an app whose delete began only ever goes (the reconciler finishes it): free */
            bool going = rd_str(json_object_get(a, "labels"), AS_DELETING_LABEL) != NULL;
            if (a && name && !going && strcmp(t ? t : "OnDemand", tier) == 0) {
                int64_t d[3];
                demand(json_object_get(a, "containers"),
                       rd_int(json_object_get(a, "replicas"), "desired", 1), d);
                json_t *sum = json_object_get(by_name, name);
                if (sum == NULL) {
                    sum = json_pack("[I,I,I]", (json_int_t)0, (json_int_t)0, (json_int_t)0);
                    json_object_set_new(by_name, name, sum);
                }
                for (size_t r = 0; r < 3; r++)
                    json_array_set_new(
                        sum, r, json_integer(json_integer_value(json_array_get(sum, r)) + d[r]));
            }
            json_decref(a);
        }
    }
    fg_redis_batch_free(b);
    *uses = uses_of(by_name, nuses);
    json_decref(by_name);
    return true;
}

/* The tier's limits in the presented project (limit[r] < 0: none on that resource); false
 * when the tier has no quota there. */
static bool tier_limits(const json_t *project, const char *tier, int64_t limit[3]) {
    const json_t *lim =
        json_object_get(json_object_get(json_object_get(project, "quotas"), tier), "limits");
    if (lim == NULL)
        return false;
    for (size_t r = 0; r < 3; r++) {
        const json_t *q = json_object_get(lim, quota_rows[r].res);
        const char *s = json_string_value(q);
        limit[r] = json_is_integer(q) ? json_integer_value(q) : -1;
        if (s && fg_kube_quantity_parse(s, strlen(s), quota_rows[r].milli, &limit[r]) != FG_OK)
            limit[r] = -1;
    }
    return true;
}

/* The refusal's detail: tier, resource, would-be usage and quota. */
static void exceeded_why(const fg_cache_quota_verdict_t *v, const char *tier, const char *project,
                         char *why, size_t len) {
    const char *unit = quota_rows[v->resource].milli ? "m" : "";
    snprintf(why, len, "tier %s of project %s: %s would be %lld%s of a quota of %lld%s", tier,
             project, quota_rows[v->resource].res, (long long)v->would_be, unit,
             (long long)v->limit, unit);
}

/* ---- the limits a write last read, for the next create's guarded reserve ----------------
 *
 * A create sends its quota reservation with its first reads, before it has read the project,
 * with the tier's limits as this replica last read them (by any create or scale of the
 * project) and the versions of the project's objects they came from: the script reserves only
 * when those versions still stand (cache/quota_reserve.lua's guarded form), else the create
 * reads and reserves as before. Direct-mapped by (project, tier); a slot another pair took over
 * is simply a miss. */
#define LIMITS_SLOTS       128
#define LIMITS_VERSION_MAX 32

typedef struct {
    char key[96]; /* "{project}/{tier}"; "" when empty */
    int64_t limit[3];
    size_t n; /* clusters, in the configuration's order */
    char version[RD_MAX_CLUSTERS][LIMITS_VERSION_MAX];
} limits_seen_t;

static limits_seen_t limits_seen[LIMITS_SLOTS];
static pthread_mutex_t limits_mu = PTHREAD_MUTEX_INITIALIZER;

static limits_seen_t *limits_slot(const char *project, const char *tier, char *key, size_t len) {
    snprintf(key, len, "%s/%s", project, tier);
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return &limits_seen[h % LIMITS_SLOTS];
}

/* Notes the tier's limits of project as just read: objs[i] is the project's object in the
 * configuration's cluster i (c's parts, unfiltered), proj its presentation. */
static void limits_note(const rd_ctx_t *c, json_t *const *objs, const json_t *proj,
                        const char *project, const char *tier) {
    limits_seen_t seen = {0};
    char key[sizeof seen.key];
    limits_seen_t *slot = limits_slot(project, tier, key, sizeof key);
    if (!tier_limits(proj, tier, seen.limit) || c->nparts > RD_MAX_CLUSTERS)
        return;
    seen.n = c->nparts;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *v = objs[i] ? rd_str(objs[i], "version") : "";
        if (v == NULL || strlen(v) >= LIMITS_VERSION_MAX)
            return;
        snprintf(seen.version[i], LIMITS_VERSION_MAX, "%s", v);
    }
    snprintf(seen.key, sizeof seen.key, "%s", key);
    pthread_mutex_lock(&limits_mu);
    *slot = seen;
    pthread_mutex_unlock(&limits_mu);
}

/* The tier's limits of project as last noted (a copy in *out); false when none were. */
static bool limits_recall(const char *project, const char *tier, limits_seen_t *out) {
    char key[sizeof out->key];
    limits_seen_t *slot = limits_slot(project, tier, key, sizeof key);
    pthread_mutex_lock(&limits_mu);
    bool hit = strcmp(slot->key, key) == 0;
    if (hit)
        *out = *slot;
    pthread_mutex_unlock(&limits_mu);
    return hit;
}

void quota_demand(const json_t *containers, int64_t pods, int64_t out[3]) {
    demand(containers, pods, out);
}

/* quota_reserve_at with the tier's running job sets already read (js_tier_usage's by_name:
 * running_read), or NULL to read them here. */
static int quota_reserve_with(fg_api_t *api, const char *rid, const json_t *project,
                              const char *tier, const char *app, const int64_t want[3], bool keep,
                              const json_t *running_read, quota_verdict_t *out) {
    const char *name = json_string_value(json_object_get(project, "name"));
    memset(out, 0, sizeof *out);
    int64_t limit[3];
    if (!tier_limits(project, tier, limit)) {
        snprintf(out->why, sizeof out->why,
                 "tier %s of project %s has no quota: the tier may not be used", tier, name);
        return QUOTA_NO_TIER;
    }
    fg_cache_quota_use_t *uses = NULL, *jobs = NULL;
    size_t nuses = 0, njobs = 0;
    fg_cache_quota_verdict_t v = {0};
    int rc = FG_OK, verdict = QUOTA_FITS;
    /* Running job sets are read every time (they finish on their own, and a finished one frees
     * its quota at once); the apps' usage is the one some write kept in Redis less than
     * QUOTA_USAGE_KEEP_MS ago, and only when there is none is every app of the tier read from
     * the cache (and kept for the next writes). */
    json_t *running = running_read ? json_deep_copy(running_read) : json_object();
    bool ok = running_read ||
              js_tier_usage(api, rid, name, tier, app, running, out->why, sizeof out->why);
    jobs = uses_of(running, &njobs);
    json_decref(running);
    if (ok) {
        rc = fg_cache_quota_reserve(api->redis, name, tier, app, want, limit, QUOTA_TTL_MS, jobs,
                                    njobs, NULL, 0, 0, &v);
        if (rc == FG_OK && v.need_uses) {
            ok = tier_usage(api, rid, name, tier, &uses, &nuses, out->why, sizeof out->why);
            if (ok)
                rc = fg_cache_quota_reserve(api->redis, name, tier, app, want, limit, QUOTA_TTL_MS,
                                            jobs, njobs, uses, nuses, QUOTA_USAGE_KEEP_MS, &v);
        }
    }
    if (!ok) {
        FG_LOG(FG_LOG_ERROR, rid, "quota of %s/%s: %s", name, tier, out->why);
        verdict = QUOTA_UNREAD;
    } else if (rc != FG_OK || v.need_uses) {
        snprintf(out->why, sizeof out->why,
                 "the quota of tier %s cannot be checked: redis is unavailable", tier);
        verdict = QUOTA_UNAVAILABLE;
    } else if (!v.reserved) {
        exceeded_why(&v, tier, name, out->why, sizeof out->why);
        verdict = QUOTA_EXCEEDED;
    } else if (!keep) {
        fg_cache_quota_release(api->redis, name, tier, app);
    }
    uses_free(uses, nuses);
    uses_free(jobs, njobs);
    return verdict;
}

int quota_reserve_at(fg_api_t *api, const char *rid, const json_t *project, const char *tier,
                     const char *app, const int64_t want[3], bool keep, quota_verdict_t *out) {
    return quota_reserve_with(api, rid, project, tier, app, want, keep, NULL, out);
}

static bool quota_with_or_reply(fg_req_t *req, const json_t *project, const json_t *spec,
                                const char *app, int64_t replicas, bool keep,
                                const json_t *running);

/* What replicas of the app take of the quota: its containers' requests and its sidecars'. */
static void app_want(fg_req_t *req, const json_t *spec, int64_t replicas, int64_t want[3]) {
    json_t *all = json_deep_copy(json_object_get(spec, "containers")),
           *sidecars = as_sidecar_containers(spec, cfg_of(req));
    json_array_extend(all, sidecars); /* the sidecars' requests count as the app's */
    demand(all, replicas, want);
    json_decref(all);
    json_decref(sidecars);
}

/* The tier's quota, checked and reserved atomically across replicas (cache/quota_reserve.lua):
 * the tier must have a quota in the project, and this app's replicas plus every other app of the
 * tier (in the cache, or reserved by a write in flight) must fit. keep false: check only (a dry
 * run). 409 quota-exceeded naming tier, resource, would-be usage and quota. */
bool quota_or_reply(fg_req_t *req, const json_t *project, const json_t *spec, const char *app,
                    int64_t replicas, bool keep) {
    return quota_with_or_reply(req, project, spec, app, replicas, keep, NULL);
}

/* quota_or_reply with the tier's running job sets already read (NULL: read them here). */
static bool quota_with_or_reply(fg_req_t *req, const json_t *project, const json_t *spec,
                                const char *app, int64_t replicas, bool keep,
                                const json_t *running) {
    int64_t want[3];
    app_want(req, spec, replicas, want);
    quota_verdict_t v;
    switch (quota_reserve_with(fg_req_app(req), fg_req_id(req), project, as_tier(spec), app, want,
                               keep, running, &v)) {
        case QUOTA_FITS:
            return true;
        case QUOTA_NO_TIER:
        case QUOTA_EXCEEDED:
            fg_reply_problem(req, FG_PROBLEM_QUOTA_EXCEEDED, "%s", v.why);
            return false;
        default:
            fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", v.why);
            return false;
    }
}

void quota_release(fg_req_t *req, const char *project, const json_t *spec, const char *app) {
    fg_api_t *api = fg_req_app(req);
    fg_cache_quota_release(api->redis, project, as_tier(spec), app);
}

void quota_forget(fg_req_t *req, const char *project, const char *tier, const char *name,
                  const fg_fed_outcome_t *o, size_t n) {
    size_t applied = 0;
    for (size_t i = 0; i < n; i++)
        applied += o[i].outcome == FG_FED_APPLIED;
    if (applied == 0)
        return; /* failed everywhere: nothing went, nothing is freed */
    fg_api_t *api = fg_req_app(req);
    if (fg_cache_quota_forget(api->redis, project, tier ? tier : "OnDemand", name, QUOTA_TTL_MS) !=
        FG_OK)
        FG_LOG(FG_LOG_WARN, fg_req_id(req),
               "the quota of %s/%s is freed only when the cache shows the delete: redis refused",
               project, name);
}

/* place_or_reply without the reply: FG_OK with *p; FG_EIO when the registry cannot be read
 * (why says so); FG_ERR when the replicas do not fit (p->failure says why). Reads Redis when the
 * registry snapshot is stale. cl and p as place_or_reply's. */
static int place_in(fg_api_t *api, const json_t *spec, int64_t replicas, const bool *only,
                    fg_fed_cluster_t *cl, fg_fed_placement_t *p, char *why, size_t whylen) {
    const fg_fed_registry_t *reg = NULL;
    if (fg_fed_registry_get(api->fed, false, &reg, why, whylen) != FG_OK)
        return FG_EIO;
    size_t n, k = 0;
    const fg_fed_cluster_t *all = fg_fed_registry_clusters(reg, &n);
    for (size_t i = 0; i < n; i++)
        if (only == NULL || only[i])
            cl[k++] = all[i];
    as_request_t r;
    as_request(spec, replicas, api->cfg, &r);
    int rc = fg_fed_place(cl, k, &r.req, p);
    for (size_t i = 0; i < k; i++) { /* the snapshot goes: nothing may point into it */
        cl[i].nodes = NULL;
        cl[i].nnodes = 0;
    }
    fg_fed_registry_release(reg);
    return rc == FG_OK ? FG_OK : FG_ERR;
}

/* The answer to a place_in that failed with rc: 503, or 409 with the explanation. */
static void place_failed(fg_req_t *req, int rc, const fg_fed_placement_t *p, const char *why) {
    if (rc == FG_EIO) {
        fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", why);
        return;
    }
    json_t *ext = json_pack("{s:o}", "placement", fg_fed_explain(p, fg_wall_ms()));
    fg_reply_problem_ext(req, FG_PROBLEM_PLACEMENT_FAILED, ext, "%s", p->failure);
}

/* Places replicas of spec over every cluster, or only over those marked in only (placement
 * then keeps the app where it is). FG_OK with *p; false when it replied (409 with the
 * explanation, 503). p's verdicts point into cl, the caller's table of FG_FED_MAX_CLUSTERS
 * (names and zones into the configuration), so cl must live as long as p is read; the nodes
 * in it are not to be read after (their registry snapshot is released). */
bool place_or_reply(fg_req_t *req, const json_t *spec, int64_t replicas, const bool *only,
                    fg_fed_cluster_t *cl, fg_fed_placement_t *p) {
    char why[256] = "";
    int rc = place_in(fg_req_app(req), spec, replicas, only, cl, p, why, sizeof why);
    if (rc != FG_OK)
        place_failed(req, rc, p, why);
    return rc == FG_OK;
}

static bool dry_run(fg_req_t *req) {
    const char *d = fg_req_query(req, "dryRun");
    return d && strcmp(d, "true") == 0;
}

static int reply_dry_run(fg_req_t *req, const json_t *app, const fg_fed_placement_t *p) {
    json_t *a = json_pack("{s:O,s:O}", "name", json_object_get(app, "name"), "spec",
                          json_object_get(app, "spec"));
    if (json_object_get(app, "labels"))
        json_object_set(a, "labels", json_object_get(app, "labels"));
    return fg_reply_json(req, 200,
                         json_pack("{s:b,s:o,s:o}", "dryRun", 1, "placement",
                                   fg_fed_explain(p, fg_wall_ms()), "app", a));
}

static int reply_presented(fg_req_t *req, json_t *o, const char *project, const char *name,
                           unsigned status, json_t *placement, json_t *outcomes);

/* Answers the app as the cache shows it, with the write's placement and outcomes. */
static int reply_app(fg_req_t *req, const char *project, const char *name, unsigned status,
                     json_t *placement, json_t *outcomes) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "app", DEPLOYMENTS, project, name, NULL, objs, &found) ||
        found == 0) {
        json_decref(placement);
        json_decref(outcomes);
        return found == 0 ? fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                             "app %s was written but is not in the cache yet", name)
                          : FG_OK;
    }
    json_t *o = rd_present_app(&c, objs);
    rd_objs_free(objs, c.nparts);
    return reply_presented(req, o, project, name, status, placement, outcomes);
}

/* The app reply_app_kept answers (a new reference), or NULL when a write's cluster has no part
 * in c or no kept object. */
static json_t *app_kept(const rd_ctx_t *c, json_t *const *was, const fg_fed_write_t *w,
                        json_t *const *kept, size_t n) {
    json_t *objs[RD_MAX_CLUSTERS];
    for (size_t j = 0; j < c->nparts; j++)
        objs[j] = was ? was[j] : NULL;
    for (size_t i = 0; i < n; i++) {
        const rd_part_t *part = rd_part(c, w[i].cluster);
        if (part == NULL || kept[i] == NULL)
            return NULL;
        objs[part - c->parts] = kept[i];
    }
    return rd_present_app(c, objs);
}

/* The same without reading the cache back, when every write was written through (kept[i]: what
 * the cache now shows for write i): the app's objects are those of c (what the cache showed
 * before the write, was[]) with each written cluster's replaced by its kept one. Falls back to
 * reply_app when a write's cluster has no part in c. */
static int reply_app_kept(fg_req_t *req, const rd_ctx_t *c, json_t *const *was,
                          const fg_fed_write_t *w, json_t *const *kept, size_t n,
                          const char *project, const char *name, unsigned status, json_t *placement,
                          json_t *outcomes) {
    json_t *o = app_kept(c, was, w, kept, n);
    if (o == NULL)
        return reply_app(req, project, name, status, placement, outcomes);
    return reply_presented(req, o, project, name, status, placement, outcomes);
}

static int reply_presented(fg_req_t *req, json_t *o, const char *project, const char *name,
                           unsigned status, json_t *placement, json_t *outcomes) {
    if (placement)
        json_object_set_new(o, "placement", placement);
    json_object_set_new(o, "outcomes", outcomes);
    char version[80], location[256];
    snprintf(version, sizeof version, "%s", rd_str(o, "version"));
    snprintf(location, sizeof location, "/v1/projects/%s/apps/%s", project, name);
    return wr_reply(req, status, o, version, status == 201 ? location : NULL);
}

/* ---- create ---------------------------------------------------------------------------- */

/* The annotations of every Deployment of one write: the spec, the placement, who and which. */
static json_t *app_annotations(fg_req_t *req, const json_t *spec, const json_t *explain) {
    json_t *a = json_object();
    char *s = fg_json_dumps(spec, NULL), *p = explain ? fg_json_dumps(explain, NULL) : NULL;
    json_object_set_new(a, AS_SPEC_ANN, json_string(s));
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)fg_wall_ms());
    json_object_set_new(a, AS_SPEC_AT_ANN, json_string(at));
    if (p)
        json_object_set_new(a, FG_KUBE_PLACEMENT_ANNOTATION, json_string(p));
    free(s);
    free(p);
    wr_stamp(req, a);
    return a;
}

/* {cluster: replicas} of the clusters placement chose (as_mark records it). A new reference. */
static json_t *chosen_shards(const fg_fed_placement_t *p) {
    json_t *sh = json_object();
    for (size_t i = 0; i < p->nverdicts; i++)
        if (p->verdicts[i].chosen)
            json_object_set_new(sh, p->verdicts[i].cluster->name,
                                json_integer(p->verdicts[i].replicas));
    return sh;
}

/* Deletes what a failed create made, so a create is all or nothing. */
static void roll_back(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *o, size_t n,
                      const char *path) {
    fg_fed_write_t del[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t out[FG_FED_MAX_CLUSTERS];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (o[i].outcome == FG_FED_APPLIED)
            del[k++] = (fg_fed_write_t){
                .cluster = w[i].cluster, .method = FG_KUBE_DELETE, .path = path, .absent_ok = true};
    fg_api_t *api = fg_req_app(req);
    if (k > 0 && fg_fed_write_all(api->fed, del, k, WR_CLUSTER_DEADLINE_MS, out) > 0)
        FG_LOG(FG_LOG_ERROR, fg_req_id(req), "create: rolling back %s failed in a cluster", path);
    fg_fed_outcomes_clear(out, k);
}

/* What a create (or a scale) reads before it places, in one round trip: the project (*proj, 404
 * when there is none), the app's Deployments (c, *found: how many clusters hold one; not read when
 * c is NULL) and the tier's running job sets but app's for the quota (*running, as js_tier_usage
 * counts them). In two halves, so that work that needs no Redis overlaps the round trip:
 * first_reads_send sends (false when it replied: nothing is pending), first_reads_recv reads
 * (false when it replied); in between, this thread makes no Redis call.
 *
 * A create or a scale also sends its quota reservation with these reads (want not NULL),
 * guarded by the limits this replica last read (limits_recall). f->decided says whether the
 * script decided (f->verdict: reserved, or refused; *proj is then NULL, the project being known
 * to exist); when it did not, the write reserves after (write_quota_or_reply). A scale
 * (scale_to >= 0) also reads the scalers of app name, and first_reads_recv refuses a count
 * outside their bounds (sc_bounds_read_or_reply) before anything else. */
typedef struct {
    fg_redis_batch_t *b;
    rd_ctx_t pc;
    rd_at_t pat, at;
    size_t jobs, quota_at, scalers_at;
    int64_t scale_to;
    bool decided;
    fg_cache_quota_verdict_t verdict;
} first_reads_t;

static bool first_reads_send(fg_req_t *req, const char *project, const char *name, const char *tier,
                             const int64_t *want, rd_ctx_t *c, int64_t scale_to, first_reads_t *f) {
    fg_api_t *api = fg_req_app(req);
    char why[256];
    f->b = fg_redis_batch_new();
    f->quota_at = SIZE_MAX;
    f->scale_to = scale_to;
    f->scalers_at = scale_to >= 0 ? sc_bounds_add(req, project, f->b) : SIZE_MAX;
    f->decided = false;
    memset(&f->verdict, 0, sizeof f->verdict);
    bool ok =
        rd_get_add_or_reply(&f->pc, req, "project", "namespaces", "_", project, f->b, &f->pat) &&
        (c == NULL || rd_get_add_or_reply(c, req, "app", DEPLOYMENTS, project, name, f->b, &f->at));
    f->jobs = ok ? js_tier_usage_add(api, project, f->b) : 0;
    limits_seen_t seen;
    if (ok && want && limits_recall(project, tier, &seen) && seen.n == f->pc.nparts) {
        const char *clusters[RD_MAX_CLUSTERS], *versions[RD_MAX_CLUSTERS];
        for (size_t i = 0; i < seen.n; i++) {
            clusters[i] = f->pc.parts[i].conf->name;
            versions[i] = seen.version[i];
        }
        fg_cache_quota_guard_t g = {clusters, versions, seen.n};
        f->quota_at = fg_cache_quota_reserve_add(f->b, project, tier, name, want, seen.limit,
                                                 QUOTA_TTL_MS, &g);
    }
    if (ok && fg_redis_batch_send(api->redis, f->b, why, sizeof why) != FG_OK) {
        FG_LOG(FG_LOG_ERROR, fg_req_id(req), "read %s: %s", fg_req_path(req), why);
        fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", why);
        ok = false;
    }
    if (!ok) {
        fg_redis_batch_free(f->b);
        f->b = NULL;
    }
    return ok;
}

static bool first_reads_recv(fg_req_t *req, first_reads_t *f, const char *project, const char *name,
                             const char *tier, json_t **proj, rd_ctx_t *c, size_t *found,
                             json_t **running) {
    fg_api_t *api = fg_req_app(req);
    json_t *pobjs[RD_MAX_CLUSTERS], *objs[RD_MAX_CLUSTERS];
    size_t pfound;
    char why[256];
    bool ok = fg_redis_batch_recv(api->redis, f->b, why, sizeof why) == FG_OK;
    if (!ok) {
        FG_LOG(FG_LOG_ERROR, fg_req_id(req), "read %s: %s", fg_req_path(req), why);
        fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "%s", why);
    }
    /* the scaler's bounds first, as a scale answered them before it read anything else */
    if (ok && f->scalers_at != SIZE_MAX)
        ok = sc_bounds_read_or_reply(req, name, f->scale_to, f->b, f->scalers_at);
    if (ok) {
        f->decided = f->quota_at != SIZE_MAX &&
                     fg_cache_quota_reserve_read(f->b, f->quota_at, &f->verdict) == FG_OK &&
                     !f->verdict.need_uses;
        /* When the script decided, it found the project's objects at the versions noted with
         * its limits (limits_note: the project existed): the project exists, its limits are
         * noted already, and nothing needs its objects decoded (*proj stays NULL). */
        *proj = NULL;
        if (!f->decided) {
            rd_get_read(&f->pc, f->b, &f->pat, pobjs, &pfound);
            *proj = pfound ? rd_present_project(&f->pc, pobjs) : NULL;
            if (*proj)
                limits_note(&f->pc, pobjs, *proj, project, tier);
            rd_objs_free(pobjs, f->pc.nparts);
        }
        if (c) {
            rd_get_read(c, f->b, &f->at, objs, found);
            rd_objs_free(objs, c->nparts);
        }
        *running = json_object();
        js_tier_usage_read(api, fg_req_id(req), tier, name, f->b, f->jobs, *running);
        if (*proj == NULL && !f->decided) {
            fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no project %s", project);
            ok = false;
        }
    }
    fg_redis_batch_free(f->b);
    f->b = NULL;
    return ok;
}

/* The quota of a create or a scale: what the script sent with the first reads decided, else
 * reserved now (quota_with_or_reply; proj is only read then). */
static bool write_quota_or_reply(fg_req_t *req, const first_reads_t *f, const char *project,
                                 const json_t *proj, const json_t *spec, const char *name,
                                 int64_t replicas, const json_t *running) {
    if (!f->decided)
        return quota_with_or_reply(req, proj, spec, name, replicas, !dry_run(req), running);
    if (f->verdict.reserved)
        return true;
    char why[256];
    exceeded_why(&f->verdict, as_tier(spec), project, why, sizeof why);
    fg_reply_problem(req, FG_PROBLEM_QUOTA_EXCEEDED, "%s", why);
    return false;
}

int fg_api_create_app(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    json_t *app = fg_req_json(req), *proj = NULL, *explain = NULL, *ann = NULL, *shards = NULL,
           *running = NULL;
    json_t *deps[FG_FED_MAX_CLUSTERS] = {NULL};
    char *texts[FG_FED_MAX_CLUSTERS] = {NULL};
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    int rc = FG_OK;
    vd_t v;
    vd_init(&v);
    as_validate(&v, app);
    as_validate_sidecars(&v, json_object_get(app, "spec"), cfg_of(req));
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    const char *name = json_string_value(json_object_get(app, "name"));
    const json_t *spec = json_object_get(app, "spec");
    int64_t replicas = json_integer_value(json_object_get(spec, "replicas"));
    size_t found;
    rd_ctx_t c;
    fg_api_t *api = fg_req_app(req);
    fg_fed_placement_t p;
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    char why[256] = "", what[160], path[256], one[320];
    /* Placement needs nothing the first reads bring, so it comes first (its registry may read
     * Redis), and the Deployments are built and serialized while the reads' round trip is on
     * its way (sent as serialized: a write's bodies are then on the wire at once). What
     * the reads find is answered first, as before: 404, then 409 for an app that exists. */
    int placed = place_in(api, spec, replicas, NULL, placed_over, &p, why, sizeof why);
    int64_t want[3];
    app_want(req, spec, replicas, want);
    first_reads_t f;
    if (!first_reads_send(req, project, name, as_tier(spec),
                          placed == FG_OK && !dry_run(req) ? want : NULL, &c, -1, &f))
        goto out;
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/deployments", project);
    if (placed == FG_OK && !dry_run(req)) {
        explain = fg_fed_explain(&p, fg_wall_ms());
        ann = app_annotations(req, spec, explain);
        shards = chosen_shards(&p);
        for (size_t i = 0; i < p.nverdicts; i++) {
            if (!p.verdicts[i].chosen)
                continue;
            deps[n] = as_deployment(app, project, p.verdicts[i].replicas, ann, cfg_of(req));
            as_mark(json_object_get(deps[n], "metadata"), shards, p.verdicts[i].cluster->name);
            texts[n] = fg_json_dumps(deps[n], NULL);
            w[n] = (fg_fed_write_t){.cluster = p.verdicts[i].cluster->name,
                                    .method = FG_KUBE_POST,
                                    .path = path,
                                    .body = deps[n],
                                    .text = texts[n]};
            o[n].object = NULL; /* out: clears n outcomes, also when no write went */
            o[n].item = NULL;
            n++;
        }
    }
    bool read =
        first_reads_recv(req, &f, project, name, as_tier(spec), &proj, &c, &found, &running);
    if ((!read || found > 0) && f.decided && f.verdict.reserved)
        quota_release(req, project, spec, name); /* reserved for a create that ends here */
    if (!read)
        goto out;
    if (found > 0) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT, "app %s exists already in project %s", name,
                              project);
        goto out;
    }
    if (placed != FG_OK) {
        place_failed(req, placed, &p, why);
        goto out;
    }
    if (!write_quota_or_reply(req, &f, project, proj, spec, name, replicas, running))
        goto out;
    if (dry_run(req)) {
        rc = reply_dry_run(req, app, &p);
        goto out;
    }
    snprintf(what, sizeof what, "create Deployment %s/%s in %zu clusters", project, name,
             p.nchosen);
    if (!wr_audit_or_reply(req, what)) {
        quota_release(req, project, spec, name);
        goto out;
    }
    snprintf(one, sizeof one, "%s/%s", path, name);
    if (fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o) > 0) {
        /* the watch shows what the clusters made and the rollback deleted */
        roll_back(req, w, o, n, one);
        quota_release(req, project, spec, name);
        wr_reply_failure(req, w, o, n, "; the clusters that created it deleted it again");
        goto out;
    }
    /* Every answer is written through (read your writes) in one round trip once the last came,
     * as a verb's are: written through as each came, the first answers' Redis work competed
     * with the clusters still creating theirs (the README's create figures). The answer is
     * made while Redis runs it; it is sent as made when the cache shows every cluster's
     * Deployment, else made again from what it shows. */
    json_t *kept[FG_FED_MAX_CLUSTERS] = {NULL};
    bool shown[FG_FED_MAX_CLUSTERS] = {false};
    fg_fed_through_t *last = fg_fed_write_through_begin(api->fed, w, o, n, NULL, kept);
    json_t *made = app_kept(&c, NULL, w, kept, n);
    char version[80] = "", *text = NULL, location[256];
    size_t len = 0;
    if (made) {
        json_object_set_new(made, "placement", json_incref(explain));
        json_object_set_new(made, "outcomes", fg_fed_outcomes_json(w, o, n));
        snprintf(version, sizeof version, "%s", rd_str(made, "version"));
        text = fg_json_dumps(made, &len);
        fg_req_release_later(req, made);
    }
    fg_fed_write_through_end(last, shown, kept);
    snprintf(location, sizeof location, "/v1/projects/%s/apps/%s", project, name);
    if (wr_wait_shown(req, w, o, n, "app", DEPLOYMENTS, project, name, false, shown) && text) {
        rc = wr_reply_text(req, 201, text, len, version, location);
    } else {
        free(text);
        rc =
            reply_app(req, project, name, 201, json_incref(explain), fg_fed_outcomes_json(w, o, n));
    }
    wr_release_later(req, o, kept, n);
out:
    /* the Deployments, the answers and the rest are freed after the reply went out */
    fg_fed_outcomes_clear(o, n);
    for (size_t i = 0; i < n; i++) {
        fg_req_release_later(req, deps[i]);
        free(texts[i]);
    }
    vd_free(&v);
    fg_req_release_later(req, proj);
    fg_req_release_later(req, running);
    fg_req_release_later(req, explain);
    fg_req_release_later(req, ann);
    fg_req_release_later(req, shards);
    return rc;
}

/* ---- changes to an app that exists --------------------------------------------------------- */

/* An app's Deployments as the cache holds them; 404 when there are none, 412 on If-Match. */
typedef struct {
    rd_ctx_t c;
    json_t *objs[RD_MAX_CLUSTERS];
    const char *project, *name;
    char path[256];
} app_t;

static bool app_or_reply(fg_req_t *req, app_t *a) {
    size_t found;
    a->project = fg_req_param(req, "project");
    a->name = fg_req_param(req, "app");
    if (!rd_get_or_reply(&a->c, req, "app", DEPLOYMENTS, a->project, a->name, NULL, a->objs,
                         &found))
        return false;
    snprintf(a->path, sizeof a->path, "/apis/apps/v1/namespaces/%s/deployments/%s", a->project,
             a->name);
    if (found == 0) {
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no app %s in project %s", a->name, a->project);
        rd_objs_free(a->objs, a->c.nparts);
        return false;
    }
    json_t *cur = rd_present_app(&a->c, a->objs);
    bool ok = wr_if_match_or_reply(req, rd_str(cur, "version"));
    json_decref(cur);
    if (!ok)
        rd_objs_free(a->objs, a->c.nparts);
    return ok;
}

/* One write a holding cluster (the same method and body), or one body each (bodies[i] for the
 * i-th holding cluster). */
static size_t app_writes(const app_t *a, fg_kube_method_t m, json_t *const *bodies,
                         fg_fed_write_t *w) {
    size_t n = 0;
    for (size_t i = 0; i < a->c.nparts; i++) {
        if (a->objs[i] == NULL)
            continue;
        w[n] = (fg_fed_write_t){.cluster = a->c.parts[i].conf->name,
                                .method = m,
                                .path = a->path,
                                .body = bodies ? bodies[n] : NULL,
                                .absent_ok = m == FG_KUBE_DELETE};
        n++;
    }
    return n;
}

/* Sends the writes, waits for the cache and answers the app (200), or the failure. */
static int apply_and_reply(fg_req_t *req, app_t *a, fg_fed_write_t *w, size_t n,
                           json_t *placement) {
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    json_t *kept[FG_FED_MAX_CLUSTERS];
    bool shown[FG_FED_MAX_CLUSTERS];
    fg_api_t *api = fg_req_app(req);
    int rc = FG_OK;
    n = n < FG_FED_MAX_CLUSTERS ? n : FG_FED_MAX_CLUSTERS;
    /* All the answers are written through in one round trip once the last came (as a
     * create's): the clusters answer a change of a few fields within a millisecond of each
     * other, so a round trip each buys no time, and one costs fewer wake-ups (at 200 scales/s:
     * 1-7% of fleetgate's CPU per scale and about 3% of Redis's, within the noise of a shared
     * machine). */
    size_t failed = fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o);
    fg_fed_write_through_keep(api->fed, w, o, n, shown, kept);
    if (failed > 0)
        wr_reply_failure(req, w, o, n, NULL);
    else if (wr_wait_shown(req, w, o, n, "app", DEPLOYMENTS, a->project, a->name, false, shown))
        rc = reply_app_kept(req, &a->c, a->objs, w, kept, n, a->project, a->name, 200,
                            json_incref(placement), fg_fed_outcomes_json(w, o, n));
    else
        rc = reply_app(req, a->project, a->name, 200, json_incref(placement),
                       fg_fed_outcomes_json(w, o, n));
    wr_release_later(req, o, kept, n); /* large: freed after the reply went out */
    return rc;
}

/* The tier the cache shows the app in (NULL: the label is missing, OnDemand). */
static const char *app_tier(const app_t *a) {
    for (size_t i = 0; i < a->c.nparts; i++)
        if (a->objs[i] && rd_str(json_object_get(a->objs[i], "labels"), AS_TIER_LABEL))
            return rd_str(json_object_get(a->objs[i], "labels"), AS_TIER_LABEL);
    return NULL;
}

int fg_api_delete_app(fg_req_t *req) {
    app_t a;
    if (!app_or_reply(req, &a))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    /* Marked first, then deleted: a delete that some cluster failed is completed by the
     * reconciler (a marked app only ever goes), never undone by it. */
    json_t *mark = json_pack("{s:{s:{s:s}}}", "metadata", "labels", AS_DELETING_LABEL, "true");
    json_t *marks[FG_FED_MAX_CLUSTERS];
    size_t n = app_writes(&a, FG_KUBE_PATCH, NULL, w);
    for (size_t i = 0; i < n; i++)
        marks[i] = mark;
    app_writes(&a, FG_KUBE_PATCH, marks, w);
    int rc = FG_OK;
    memset(o, 0, sizeof o);
    bool marked =
        wr_audit_or_reply(req, "delete the app's Deployments") && wr_fanout_or_reply(req, w, n, o);
    fg_fed_outcomes_clear(o, n);
    app_writes(&a, FG_KUBE_DELETE, NULL, w);
    bool deleted = marked && wr_fanout_or_reply(req, w, n, o);
    if (marked)
        quota_forget(req, a.project, app_tier(&a), a.name, o, n);
    if (deleted) {
        wr_wait_applied(req, w, o, n, "app", DEPLOYMENTS, a.project, a.name, true);
        rc = fg_reply_static(req, 204, "application/json", "", 0);
    }
    fg_fed_outcomes_clear(o, n);
    json_decref(mark);
    rd_objs_free(a.objs, a.c.nparts);
    return rc;
}

/* The verbs: each a merge patch of every holding Deployment, built from what the cache shows
 * of it (desired: its spec.replicas) and, for resume, from the Deployment itself (the replicas
 * stop remembered in an annotation, which the cache does not keep). */
typedef json_t *(*verb_patch_fn)(fg_req_t *req, const json_t *cached, const json_t *live);

static json_t *stamped(fg_req_t *req, json_t *patch) {
    json_t *meta = json_object_get(patch, "metadata");
    if (meta == NULL) {
        meta = json_object();
        json_object_set_new(patch, "metadata", meta);
    }
    json_t *ann = json_object_get(meta, "annotations");
    if (ann == NULL) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    wr_stamp(req, ann);
    return patch;
}

static json_t *patch_pause(fg_req_t *req, const json_t *cached, const json_t *live) {
    (void)cached, (void)live;
    return stamped(req, json_pack("{s:{s:b}}", "spec", "paused", 1));
}

static json_t *patch_restart(fg_req_t *req, const json_t *cached, const json_t *live) {
    (void)cached, (void)live;
    char now[40];
    fg_format_time_ms(fg_wall_ms(), now, sizeof now);
    return stamped(req, json_pack("{s:{s:{s:{s:{s:s}}}}}", "spec", "template", "metadata",
                                  "annotations", "kubectl.kubernetes.io/restartedAt", now));
}

static json_t *patch_stop(fg_req_t *req, const json_t *cached, const json_t *live) {
    (void)live;
    int64_t desired = rd_int(json_object_get(cached, "replicas"), "desired", 1);
    json_t *p = json_pack("{s:{s:i},s:{s:{s:s}}}", "spec", "replicas", 0, "metadata", "labels",
                          AS_STOPPED_LABEL, "true");
    if (desired > 0) { /* a stopped app keeps what it had before the first stop */
        char n[24];
        snprintf(n, sizeof n, "%lld", (long long)desired);
        json_object_set_new(json_object_get(p, "metadata"), "annotations",
                            json_pack("{s:s}", "fleetgate.io/stopped-replicas", n));
    }
    return stamped(req, p);
}

static json_t *patch_resume(fg_req_t *req, const json_t *cached, const json_t *live) {
    (void)cached;
    json_t *p = json_pack("{s:{s:b},s:{s:{s:n}}}", "spec", "paused", 0, "metadata", "labels",
                          AS_STOPPED_LABEL);
    const char *s = json_string_value(
        json_object_get(json_object_get(json_object_get(live, "metadata"), "annotations"),
                        "fleetgate.io/stopped-replicas"));
    int64_t n;
    if (s && fg_parse_int64(s, strlen(s), 0, 1000, &n) == FG_OK) {
        json_object_set_new(json_object_get(p, "spec"), "replicas", json_integer(n));
        json_object_set_new(json_object_get(p, "metadata"), "annotations",
                            json_pack("{s:n}", "fleetgate.io/stopped-replicas"));
    }
    return stamped(req, p);
}

static const struct {
    const char *verb;
    verb_patch_fn patch;
    bool needs_live; /* reads the Deployments first */
} verbs[] = {
    {"pause", patch_pause, false},
    {"resume", patch_resume, true},
    {"restart", patch_restart, false},
    {"stop", patch_stop, false},
};

static int verb(fg_req_t *req, size_t v) {
    app_t a;
    if (!app_or_reply(req, &a))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL};
    size_t n = app_writes(&a, FG_KUBE_GET, NULL, w);
    int rc = FG_OK;
    memset(live, 0, sizeof live);
    if (verbs[v].needs_live && !wr_fanout_or_reply(req, w, n, live))
        goto out;
    char what[64];
    snprintf(what, sizeof what, "%s the app's Deployments", verbs[v].verb);
    if (!wr_audit_or_reply(req, what))
        goto out;
    for (size_t i = 0, k = 0; i < a.c.nparts; i++)
        if (a.objs[i]) {
            bodies[k] = verbs[v].patch(req, a.objs[i], live[k].object);
            k++;
        }
    app_writes(&a, FG_KUBE_PATCH, bodies, w);
    rc = apply_and_reply(req, &a, w, n, NULL);
out:
    fg_fed_outcomes_clear(live, n);
    for (size_t i = 0; i < n; i++)
        json_decref(bodies[i]);
    rd_objs_free(a.objs, a.c.nparts);
    return rc;
}

int fg_api_pause_app(fg_req_t *req) {
    return verb(req, 0);
}

int fg_api_resume_app(fg_req_t *req) {
    return verb(req, 1);
}

int fg_api_restart_app(fg_req_t *req) {
    return verb(req, 2);
}

int fg_api_stop_app(fg_req_t *req) {
    return verb(req, 3);
}

/* ---- scale ------------------------------------------------------------------------------------
 */

static const char *const scale_members[] = {"replicas", NULL};

/* The spec the app was created with (its Deployments' fleetgate.io/spec), or one made from the
 * cache for an app fleetgate did not create. A new reference. */
static json_t *current_spec(const app_t *a, const fg_fed_outcome_t *live, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_object_get(
            json_object_get(json_object_get(live[i].object, "metadata"), "annotations"),
            "fleetgate.io/spec"));
        json_t *spec = NULL;
        if (s && fg_json_load(s, strlen(s), &spec, NULL, 0) == FG_OK && json_is_object(spec))
            return spec;
        json_decref(spec);
    }
    json_t *app = rd_present_app(&a->c, a->objs);
    json_t *spec = json_incref(json_object_get(app, "spec"));
    json_decref(app);
    return spec;
}

/* The spec of the app's last write as the cache keeps it (its Deployments' fleetgate.io/spec,
 * which write-through stores as soon as the write answers), when every Deployment holds the same
 * one; NULL otherwise (a write that reached only some clusters, an app fleetgate did not write):
 * then the Deployments are read. A new reference. */
static json_t *cached_spec(const app_t *a) {
    const char *text = NULL;
    for (size_t i = 0; i < a->c.nparts; i++) {
        if (a->objs[i] == NULL)
            continue;
        const char *s = json_string_value(json_object_get(a->objs[i], "fleetgateSpec"));
        if (s == NULL || (text && strcmp(text, s) != 0))
            return NULL;
        text = s;
    }
    json_t *spec = NULL;
    if (text && fg_json_load(text, strlen(text), &spec, NULL, 0) == FG_OK && json_is_object(spec))
        return spec;
    json_decref(spec);
    return NULL;
}

int fg_api_scale_app(fg_req_t *req) {
    const json_t *body = fg_req_json(req);
    vd_t v;
    vd_init(&v);
    if (vd_object(&v, body, "", scale_members, scale_members))
        vd_int(&v, json_object_get(body, "replicas"), "/replicas", 0, 1000);
    if (!vd_ok(&v)) {
        vd_reply(req, &v);
        vd_free(&v);
        return FG_OK;
    }
    vd_free(&v);
    int64_t replicas = json_integer_value(json_object_get(body, "replicas"));
    app_t a;
    if (!app_or_reply(req, &a))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL}, *spec = NULL, *proj = NULL, *explain = NULL,
           *shards = NULL, *running = NULL;
    size_t n = app_writes(&a, FG_KUBE_GET, NULL, w);
    int rc = FG_OK;
    bool only[FG_FED_MAX_CLUSTERS] = {false}, reserved = false;
    memset(live, 0, sizeof live);
    spec = cached_spec(&a);
    if (spec == NULL && !wr_fanout_or_reply(req, w, n, live))
        goto out;
    if (spec == NULL)
        spec = current_spec(&a, live, n);
    json_object_set_new(spec, "replicas", json_integer(replicas));
    fg_api_t *api = fg_req_app(req);
    for (size_t i = 0; i < api->cfg->nclusters && i < FG_FED_MAX_CLUSTERS; i++)
        for (size_t j = 0; j < n; j++)
            only[i] = only[i] || strcmp(api->cfg->clusters[i].name, w[j].cluster) == 0;
    /* As a create: placed first (it needs nothing the reads bring), then one round trip reads
     * the scalers' bounds, the project and the running job sets, and reserves the quota when
     * this replica knows the tier's limits; what the reads find is answered first. */
    fg_fed_placement_t p;
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    char why[256] = "";
    int placed = place_in(api, spec, replicas, only, placed_over, &p, why, sizeof why);
    int64_t want[3];
    app_want(req, spec, replicas, want);
    first_reads_t f;
    if (!first_reads_send(req, a.project, a.name, as_tier(spec),
                          placed == FG_OK && !dry_run(req) ? want : NULL, NULL, replicas, &f))
        goto out;
    bool read =
        first_reads_recv(req, &f, a.project, a.name, as_tier(spec), &proj, NULL, NULL, &running);
    reserved = f.decided && f.verdict.reserved;
    if (!read)
        goto out;
    if (placed != FG_OK) {
        place_failed(req, placed, &p, why);
        goto out;
    }
    if (!write_quota_or_reply(req, &f, a.project, proj, spec, a.name, replicas, running))
        goto out;
    if (dry_run(req)) { /* nothing reserved */
        json_t *app = json_pack("{s:s,s:O}", "name", a.name, "spec", spec);
        rc = reply_dry_run(req, app, &p);
        json_decref(app);
        goto out;
    }
    reserved = true;
    if (!wr_audit_or_reply(req, "scale the app's Deployments"))
        goto out;
    reserved = false; /* the clusters take it from here: kept until the cache shows it */
    explain = fg_fed_explain(&p, fg_wall_ms());
    shards = json_object(); /* every holder keeps its Deployment, some at 0 */
    for (size_t j = 0; j < n; j++) {
        int64_t share = 0;
        for (size_t i = 0; i < p.nverdicts; i++)
            if (strcmp(p.verdicts[i].cluster->name, w[j].cluster) == 0)
                share = p.verdicts[i].replicas;
        json_object_set_new(shards, w[j].cluster, json_integer(share));
    }
    /* one annotations object shared by every patch (as_mark sets the same shards in each) */
    json_t *ann = app_annotations(req, spec, explain);
    for (size_t j = 0; j < n; j++) {
        bodies[j] =
            json_pack("{s:{s:O},s:{s:I}}", "metadata", "annotations", ann, "spec", "replicas",
                      json_integer_value(json_object_get(shards, w[j].cluster)));
        as_mark(json_object_get(bodies[j], "metadata"), shards, w[j].cluster);
    }
    json_decref(ann);
    app_writes(&a, FG_KUBE_PATCH, bodies, w);
    rc = apply_and_reply(req, &a, w, n, explain);
out:
    if (reserved) /* reserved for a scale that ends here */
        quota_release(req, a.project, spec, a.name);
    fg_fed_outcomes_clear(live, n);
    for (size_t i = 0; i < n; i++)
        json_decref(bodies[i]);
    json_decref(spec);
    json_decref(proj);
    json_decref(running);
    json_decref(explain);
    json_decref(shards);
    rd_objs_free(a.objs, a.c.nparts);
    return rc;
}

/* ---- replace and patch -------------------------------------------------------------------- */

/* Writes a whole new app over the clusters. When its placement changed it is placed afresh, so
 * a cluster newly chosen gets a Deployment (POST), one still chosen is replaced (PUT: a rolling
 * update when the pod template changed), and one no longer chosen loses its Deployment
 * (DELETE); otherwise it is placed over the clusters that hold it (an app does not wander
 * because its own pods made its cluster fuller). */
static int replace_with(fg_req_t *req, app_t *a, const json_t *app, const json_t *old_spec) {
    vd_t v;
    vd_init(&v);
    as_validate(&v, app);
    as_validate_sidecars(&v, json_object_get(app, "spec"), cfg_of(req));
    const char *name = json_string_value(json_object_get(app, "name"));
    if (vd_ok(&v) && strcmp(name, a->name) != 0)
        vd_add(&v, "/name", "must be the app's name, %s (an app cannot be renamed)", a->name);
    if (!vd_ok(&v)) {
        int rc = vd_reply(req, &v);
        vd_free(&v);
        return rc;
    }
    vd_free(&v);
    const json_t *spec = json_object_get(app, "spec");
    int64_t replicas = json_integer_value(json_object_get(spec, "replicas"));
    json_t *proj = project_or_reply(req, a->project), *explain = NULL, *ann = NULL, *shards = NULL;
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL};
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    int rc = FG_OK;
    fg_fed_placement_t p;
    bool only[FG_FED_MAX_CLUSTERS] = {false},
         stay = json_equal(json_object_get(spec, "placement"),
                           json_object_get(old_spec, "placement")) ||
                (json_object_get(spec, "placement") == NULL &&
                 json_object_get(old_spec, "placement") == NULL);
    fg_api_t *api = fg_req_app(req);
    for (size_t i = 0; i < api->cfg->nclusters && i < FG_FED_MAX_CLUSTERS; i++) {
        const rd_part_t *part = rd_part(&a->c, api->cfg->clusters[i].name);
        only[i] = part && a->objs[part - a->c.parts] != NULL;
    }
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    if (proj == NULL || !place_or_reply(req, spec, replicas, stay ? only : NULL, placed_over, &p) ||
        !quota_or_reply(req, proj, spec, a->name, replicas, true) ||
        !wr_audit_or_reply(req, "replace the app's Deployments"))
        goto out;
    explain = fg_fed_explain(&p, fg_wall_ms());
    ann = app_annotations(req, spec, explain);
    shards = chosen_shards(&p);
    char coll[256];
    snprintf(coll, sizeof coll, "/apis/apps/v1/namespaces/%s/deployments", a->project);
    for (size_t i = 0; i < p.nverdicts; i++) {
        const fg_fed_verdict_t *vd = &p.verdicts[i];
        const rd_part_t *part = rd_part(&a->c, vd->cluster->name);
        bool holds = part && a->objs[part - a->c.parts] != NULL;
        if (!vd->chosen && !holds)
            continue;
        w[n] = (fg_fed_write_t){.cluster = vd->cluster->name, .path = a->path};
        if (vd->chosen) {
            bodies[n] = as_deployment(app, a->project, vd->replicas, ann, cfg_of(req));
            as_mark(json_object_get(bodies[n], "metadata"), shards, vd->cluster->name);
            w[n].body = bodies[n];
            w[n].method = holds ? FG_KUBE_PUT : FG_KUBE_POST;
            w[n].path = holds ? a->path : coll;
        } else {
            w[n].method = FG_KUBE_DELETE;
            w[n].absent_ok = true;
        }
        n++;
    }
    rc = apply_and_reply(req, a, w, n, explain);
    if (!stay) /* the app moved: its scalers follow */
        sc_follow(req, a->project, a->name);
out:
    for (size_t i = 0; i < n; i++)
        json_decref(bodies[i]);
    json_decref(proj);
    json_decref(explain);
    json_decref(ann);
    json_decref(shards);
    return rc;
}

/* PUT takes the body as the new app; PATCH merges the body into the app as it is (its spec
 * as last written, fleetgate.io/spec on its Deployments). Both start from the live Deployments. */
static int change_app(fg_req_t *req, bool merge) {
    app_t a;
    if (!app_or_reply(req, &a))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
    size_t n = app_writes(&a, FG_KUBE_GET, NULL, w);
    json_t *cur = NULL, *next = NULL;
    int rc = FG_OK;
    memset(live, 0, sizeof live);
    if (wr_fanout_or_reply(req, w, n, live)) {
        json_t *shown = rd_present_app(&a.c, a.objs);
        cur = json_pack("{s:s,s:o}", "name", a.name, "spec", current_spec(&a, live, n));
        if (json_object_get(shown, "labels"))
            json_object_set(cur, "labels", json_object_get(shown, "labels"));
        json_decref(shown);
        next = merge ? fg_json_merge_patch(cur, fg_req_json(req)) : json_incref(fg_req_json(req));
        rc = replace_with(req, &a, next, json_object_get(cur, "spec"));
    }
    fg_fed_outcomes_clear(live, n);
    json_decref(cur);
    json_decref(next);
    rd_objs_free(a.objs, a.c.nparts);
    return rc;
}

int fg_api_replace_app(fg_req_t *req) {
    return change_app(req, false);
}

int fg_api_patch_app(fg_req_t *req) {
    return change_app(req, true);
}
