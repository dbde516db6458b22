/* api/reconcile.c: the reconciler's pass over apps: every app keeps the placement its last write
 * recorded, and moves when a cluster of it goes bad.
 *
 * Run by fed/'s reconciler thread in the one replica holding its lease, every period. Each write
 * of an app records on every Deployment it leaves the shards it meant ({cluster: replicas},
 * annotation fleetgate.io/shards) and, as labels the cache keeps, a hash of spec and shards
 * (fleetgate.io/write), the cluster's share and the number of shards (appspec.h, as_mark). The
 * pass reads the cache, and looks closer at an app when:
 *   - its Deployments carry different writes (a write reached some clusters only),
 *   - it has fewer or more Deployments than its shards (one deleted, or a move that did not
 *     finish), or a Deployment's replicas differ from its share (unless a scaler drives it),
 *   - one of its clusters went bad: unreachable for RC_DOWN_PERIODS passes in a row, or drained
 *     (synced, and no ready, schedulable node left).
 * Only a state that lasted RC_SETTLE_MS is acted on: a create, delete or move in flight ends
 * (or times out) sooner, so the pass never finishes a write a user is still making or undoing.
 * It then reads the app's Deployments from the clusters, takes the newest write's spec and
 * shards (fleetgate.io/spec-at), and, when none of those clusters is bad, applies that recorded
 * placement again; otherwise it places the app afresh over its good clusters plus the other good
 * clusters of the zones that lost one (every good cluster, when that does not fit), and moves
 * the replicas: a POST where newly chosen, a merge patch where kept (a PUT of the whole
 * Deployment where the cluster missed the newest write), a DELETE where dropped. Patches and PUTs
 * carry the resourceVersion read, so a user's write in between wins and the next pass looks
 * again. A cluster that cannot be reached keeps its Deployment until it is back; then it is one
 * too many and goes. An app whose delete began (fleetgate.io/deleting, set on every Deployment
 * before any is deleted) is deleted where it is left, never made again. Stopped apps
 * (fleetgate.io/stopped) and apps written before these labels existed are left alone.
 *
 * What depends on an app or is placed like one rides on the same pass (same lease, same settle
 * time): the scalers fleetgate made for an app follow it when the pass moves it, and are put
 * back where the app runs when they are found elsewhere (sc_follow_at); cron jobs with a
 * CronJob missing, left over or edited by hand are repaired from their recorded spec and
 * placement, and a cron job delete that did not finish is finished (cron_pass, cj_repair);
 * the runs cron jobs start on schedule are admitted to the tier's quota (admit_pass).
 *
 * After a SIGHUP (core/live.c), a settled app whose Deployments were built from other sidecar
 * definitions than the catalogue's (AS_SIDECARS_LABEL) is written again whole, and one running
 * where its placement no longer admits it (cluster labels or zone changed) is moved; a settled
 * cron job whose CronJobs' templates were built from other sidecar definitions is repaired with
 * the catalogue's; at most reconciler.rollout_max_apps of those in any
 * reconciler.rollout_interval_s (rollout, cron_rollout).
 */
#include "api_internal.h"
#include "appspec.h"
#include "workload.h"

#include "fleetgate/cache.h"
#include "fleetgate/fed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define RC_DOWN_PERIODS  3    /* passes a cluster must stay unreachable before its apps move */
#define RC_DEADLINE_MS   5000 /* a cluster's time to answer the pass's reads and writes */
#define RC_SETTLE_MS     (RC_DEADLINE_MS + 2000)
#define RC_REQUESTED_BY  "fleetgate-reconciler"
#define RC_MAX_APPS_PASS 100 /* apps read from the clusters per pass (the rest: next pass) */
/* How long a scheduled cron run waits for its Job in every cluster of its cron job before it is
 * admitted or held with the Jobs it has: a cluster whose controller missed the minute (down,
 * or its clock a minute apart) never makes its share, and the others must not wait forever. */
#define RC_RUN_WHOLE_MS 30000
#define MANAGED_BY      "app.kubernetes.io/managed-by"

struct rc_apps {
    fg_api_t *api;
    int64_t period_ms;
    int64_t down_since[FG_FED_MAX_CLUSTERS]; /* Unix ms first seen unreachable; 0: reachable */
    json_t *pending; /* "project/app" -> Unix ms its state was first seen needing work */
    uint64_t writes; /* writes applied */
    /* the apps rolled to a changed catalogue or moved off a cluster that no longer admits them:
     * the Unix ms each was done, newest last, at most reconciler.rollout_max_apps kept */
    int64_t *rolled;
    size_t nrolled;
    json_t *gone_told; /* "app:project/name/sidecar" (or "cron job:...") already logged as gone
                        * from the catalogue */
};

/* One cached Deployment of an app. */
typedef struct {
    bool held, stopped, scaled, deleting;
    int64_t desired, share, shards;
    char write[17];
    char sidecars[17]; /* AS_SIDECARS_LABEL: what its sidecars were built from ("" none) */
} shard_t;

typedef struct {
    char project[64], name[256];
    shard_t at[FG_FED_MAX_CLUSTERS];
    json_t
        *scalers; /* fleetgate's scalers of the app: {name: [indices of clusters with its HPA]} */
    json_t *spec; /* its last write's spec as the cache shows it (fleetgateSpec), or NULL */
} app_t;

typedef struct {
    const fg_fed_cluster_t *cl; /* the registry's clusters, configuration order */
    size_t n;
    bool down[FG_FED_MAX_CLUSTERS]; /* unreachable now: nothing is sent there */
    bool bad[FG_FED_MAX_CLUSTERS];  /* unreachable long enough, or drained: apps move away */
} fleet_t;

struct rc_apps *rc_apps_new(fg_api_t *api, int64_t period_ms) {
    struct rc_apps *r = fg_xcalloc(1, sizeof *r);
    r->api = api;
    r->period_ms = period_ms;
    r->pending = json_object();
    r->gone_told = json_object();
    return r;
}

void rc_apps_free(struct rc_apps *r) {
    if (r == NULL)
        return;
    json_decref(r->pending);
    json_decref(r->gone_told);
    free(r->rolled);
    free(r);
}

/* ---- what the cache shows --------------------------------------------------------------- */

static json_t *parse(const fg_redis_reply_t *rep) {
    size_t len;
    const char *text = fg_redis_reply_str(rep, &len);
    json_t *o = NULL;
    if (text == NULL || fg_json_load(text, len, &o, NULL, 0) != FG_OK || !json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Files the cached app o of cluster c into apps (by "project/name" in index). */
static void file_app(const json_t *o, size_t c, app_t **apps, size_t *napps, json_t *index) {
    const json_t *labels = json_object_get(o, "labels");
    const char *name = json_string_value(json_object_get(o, "name")),
               *project = json_string_value(json_object_get(o, "project")),
               *by = json_string_value(json_object_get(labels, MANAGED_BY));
    if (name == NULL || project == NULL || by == NULL || strcmp(by, "fleetgate") != 0 ||
        json_object_get(o, "deletionTime") != NULL || strlen(project) >= 64 || strlen(name) >= 256)
        return;
    char key[330];
    snprintf(key, sizeof key, "%s/%s", project, name);
    json_t *at = json_object_get(index, key);
    size_t i;
    if (at == NULL) {
        *apps = fg_xrealloc(*apps, (*napps + 1) * sizeof **apps);
        i = (*napps)++;
        memset(&(*apps)[i], 0, sizeof **apps);
        snprintf((*apps)[i].project, sizeof(*apps)[i].project, "%s", project);
        snprintf((*apps)[i].name, sizeof(*apps)[i].name, "%s", name);
        json_object_set_new(index, key, json_integer((json_int_t)i));
    } else {
        i = (size_t)json_integer_value(at);
    }
    shard_t *s = &(*apps)[i].at[c];
    const char *w = json_string_value(json_object_get(labels, AS_WRITE_LABEL));
    const char *stopped = json_string_value(json_object_get(labels, AS_STOPPED_LABEL)),
               *deleting = json_string_value(json_object_get(labels, AS_DELETING_LABEL));
    s->held = true;
    s->stopped = stopped != NULL && strcmp(stopped, "true") == 0;
    s->deleting = deleting != NULL && strcmp(deleting, "true") == 0;
    s->desired = json_integer_value(json_object_get(json_object_get(o, "replicas"), "desired"));
    s->share = as_label_int(labels, AS_SHARE_LABEL);
    s->shards = as_label_int(labels, AS_SHARDS_LABEL);
    snprintf(s->write, sizeof s->write, "%s", w ? w : "");
    const char *sc = json_string_value(json_object_get(labels, AS_SIDECARS_LABEL)),
               *spec = json_string_value(json_object_get(o, "fleetgateSpec"));
    snprintf(s->sidecars, sizeof s->sidecars, "%s", sc ? sc : "");
    if ((*apps)[i].spec == NULL && spec) {
        json_t *j = NULL;
        if (fg_json_load(spec, strlen(spec), &j, NULL, 0) == FG_OK && json_is_object(j))
            (*apps)[i].spec = j;
        else
            json_decref(j);
    }
}

/* Marks the apps a scaler of cluster c targets (their replicas are the scaler's to set), and
 * files the scalers fleetgate made under their app (they follow it when it moves). */
static void file_scaler(const json_t *o, size_t c, app_t *apps, const json_t *index) {
    const json_t *t = json_object_get(o, "target");
    const char *kind = json_string_value(json_object_get(t, "kind")),
               *name = json_string_value(json_object_get(t, "name")),
               *project = json_string_value(json_object_get(o, "project")),
               *scaler = json_string_value(json_object_get(o, "name")),
               *by = json_string_value(json_object_get(json_object_get(o, "labels"), MANAGED_BY));
    char key[330];
    if (kind == NULL || name == NULL || project == NULL || strcmp(kind, "Deployment") != 0)
        return;
    snprintf(key, sizeof key, "%s/%s", project, name);
    const json_t *at = json_object_get(index, key);
    if (at == NULL)
        return;
    app_t *a = &apps[json_integer_value(at)];
    a->at[c].scaled = true;
    if (scaler == NULL || by == NULL || strcmp(by, "fleetgate") != 0 ||
        json_object_get(o, "deletionTime") != NULL)
        return;
    if (a->scalers == NULL)
        a->scalers = json_object();
    json_t *held = json_object_get(a->scalers, scaler);
    if (held == NULL)
        json_object_set_new(a->scalers, scaler, held = json_array());
    json_array_append_new(held, json_integer((json_int_t)c));
}

/* Every managed app the cache shows, one entry an app (*apps: free()). FG_OK or FG_EIO. */
static int read_apps(struct rc_apps *r, size_t n, app_t **apps, size_t *napps) {
    const fg_config_t *cfg = r->api->cfg;
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    int rc = FG_OK;
    *apps = NULL;
    *napps = 0;
    for (size_t c = 0; c < n; c++)
        fg_redis_batch_addv(b, "SMEMBERS", fg_cache_key_scopes(&k, "app", cfg->clusters[c].name),
                            NULL);
    if (fg_redis_batch_run(r->api->redis, b, NULL, 0) != FG_OK) {
        fg_redis_batch_free(b);
        return FG_EIO;
    }
    fg_redis_batch_t *h = fg_redis_batch_new();
    size_t *owner = NULL, nh = 0;
    for (size_t c = 0; c < n; c++) {
        const fg_redis_reply_t *scopes = fg_redis_batch_reply(b, c);
        for (size_t j = 0; j < fg_redis_reply_len(scopes); j++) {
            size_t len;
            const char *p = fg_redis_reply_str(fg_redis_reply_at(scopes, j), &len);
            char project[64];
            if (p == NULL || len >= sizeof project)
                continue;
            snprintf(project, sizeof project, "%.*s", (int)len, p);
            owner = fg_xrealloc(owner, (nh + 2) * sizeof *owner);
            owner[nh++] = c;
            owner[nh++] = c;
            fg_redis_batch_addv(h, "HGETALL",
                                fg_cache_key_objects(&k, "app", cfg->clusters[c].name, project),
                                NULL);
            fg_redis_batch_addv(h, "HGETALL",
                                fg_cache_key_objects(&k, "scaler", cfg->clusters[c].name, project),
                                NULL);
        }
    }
    json_t *index = json_object();
    if (nh > 0 && fg_redis_batch_run(r->api->redis, h, NULL, 0) != FG_OK)
        rc = FG_EIO;
    for (size_t pass = 0; rc == FG_OK && pass < 2; pass++) /* apps, then their scalers */
        for (size_t i = pass; i < nh; i += 2) {
            const fg_redis_reply_t *hash = fg_redis_batch_reply(h, i);
            for (size_t j = 1; j < fg_redis_reply_len(hash); j += 2) {
                json_t *o = parse(fg_redis_reply_at(hash, j));
                if (o && pass == 0)
                    file_app(o, owner[i], apps, napps, index);
                else if (o)
                    file_scaler(o, owner[i], *apps, index);
                json_decref(o);
            }
        }
    json_decref(index);
    free(owner);
    fg_redis_batch_free(h);
    fg_redis_batch_free(b);
    return rc;
}

/* Whether the app's cached state is not what its last write meant, or it sits in a bad cluster. */
static bool needs_work(const app_t *a, const fleet_t *f) {
    size_t held = 0;
    int64_t shards = -1;
    const char *write = NULL;
    bool differ = false, bad = false;
    for (size_t c = 0; c < f->n; c++) {
        const shard_t *s = &a->at[c];
        if (!s->held)
            continue;
        held++;
        if (s->deleting)
            return true; /* a delete some cluster failed: finish it */
        if (s->stopped || s->write[0] == '\0' || s->shards < 0 || s->share < 0)
            return false; /* stopped, or written before the labels: left alone */
        differ = differ || (write && strcmp(write, s->write) != 0) ||
                 (shards >= 0 && shards != s->shards) || (!s->scaled && s->desired != s->share);
        write = s->write;
        shards = s->shards;
        bad = bad || f->bad[c];
    }
    return held > 0 && (differ || (int64_t)held != shards || bad);
}

/* ---- scalers follow their app ----------------------------------------------------------- */

/* Puts every scaler of app a where the app is now (want[c]): its HPAs' clusters as the cache
 * shows them are where its accepted spec is read (the reachable ones) and where one is deleted
 * when the app left. Returns the number of scalers written. */
static size_t follow_scalers(struct rc_apps *r, const fleet_t *f, const app_t *a,
                             const bool *want) {
    const char *at[FG_FED_MAX_CLUSTERS];
    size_t n = 0, done = 0;
    for (size_t c = 0; c < f->n; c++)
        if (want[c])
            at[n++] = f->cl[c].name;
    const char *name;
    json_t *held;
    json_object_foreach(a->scalers, name, held) {
        const char *have[FG_FED_MAX_CLUSTERS];
        size_t nh = 0, i;
        json_t *c;
        json_array_foreach(held, i, c) {
            size_t k = (size_t)json_integer_value(c);
            if (k < f->n && !f->down[k])
                have[nh++] = f->cl[k].name;
        }
        int failed = sc_follow_at(r->api, a->project, name, have, nh, at, n, RC_REQUESTED_BY);
        if (failed >= 0) {
            r->writes++;
            done++;
        }
    }
    return done;
}

/* Whether a scaler of app a (settled: not needing work itself) has its HPAs somewhere other
 * than the app's Deployments: one deleted by hand, or a move it missed. Left for later while
 * any of those clusters is unreachable (nothing could be read or deleted there). */
static bool scalers_astray(const app_t *a, const fleet_t *f) {
    const char *name;
    json_t *held;
    json_object_foreach(a->scalers, name, held) {
        bool at[FG_FED_MAX_CLUSTERS] = {false};
        size_t i;
        json_t *c;
        json_array_foreach(held, i, c) {
            size_t k = (size_t)json_integer_value(c);
            if (k < f->n)
                at[k] = true;
        }
        bool differ = false;
        for (size_t k = 0; k < f->n; k++) {
            if ((at[k] || a->at[k].held) && f->down[k])
                return false;
            if (a->at[k].held && (a->at[k].stopped || a->at[k].write[0] == '\0'))
                return false; /* stopped, or written before the labels: left alone */
            differ = differ || at[k] != a->at[k].held;
        }
        if (differ)
            return true;
    }
    return false;
}

/* ---- acting on one app ------------------------------------------------------------------ */

static int64_t ann_int(const json_t *obj, const char *key) {
    const char *s = json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
    int64_t v = -1;
    if (s == NULL || fg_parse_int64(s, strlen(s), 0, INT64_MAX, &v) != FG_OK)
        return -1;
    return v;
}

static const char *ann_str(const json_t *obj, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), key));
}

static ssize_t fleet_index(const fleet_t *f, const char *cluster) {
    for (size_t c = 0; c < f->n; c++)
        if (strcmp(f->cl[c].name, cluster) == 0)
            return (ssize_t)c;
    return -1;
}

/* The app's newest write as the clusters hold it: the app body (name, user labels, spec), the
 * spec's text and its shards; NULL when no Deployment could be read or none carries one. */
static json_t *newest_write(const fg_fed_outcome_t *live, size_t n, const char **spec_text,
                            json_t **shards, const json_t **obj) {
    ssize_t best = -1;
    for (size_t i = 0; i < n; i++)
        if (live[i].outcome == FG_FED_APPLIED && live[i].object &&
            ann_str(live[i].object, AS_SPEC_ANN) && ann_str(live[i].object, AS_SHARDS_ANN) &&
            (best < 0 ||
             ann_int(live[i].object, AS_SPEC_AT_ANN) > ann_int(live[best].object, AS_SPEC_AT_ANN)))
            best = (ssize_t)i;
    if (best < 0)
        return NULL;
    const json_t *o = live[best].object, *meta = json_object_get(o, "metadata");
    const char *st = ann_str(o, AS_SPEC_ANN), *sh = ann_str(o, AS_SHARDS_ANN);
    json_t *spec = NULL;
    *shards = NULL;
    if (fg_json_load(st, strlen(st), &spec, NULL, 0) != FG_OK || !json_is_object(spec) ||
        fg_json_load(sh, strlen(sh), shards, NULL, 0) != FG_OK || !json_is_object(*shards)) {
        json_decref(spec);
        json_decref(*shards);
        *shards = NULL;
        return NULL;
    }
    json_t *labels = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(meta, "labels"), k, v) {
        if (strncmp(k, "fleetgate.io/", 13) != 0 && strcmp(k, AS_NAME_LABEL) != 0 &&
            strcmp(k, MANAGED_BY) != 0) /* what as_deployment adds, as reads hide it */
            json_object_set(labels, k, v);
    }
    *spec_text = st;
    *obj = o;
    return json_pack("{s:O,s:o,s:o}", "name", json_object_get(meta, "name"), "labels", labels,
                     "spec", spec);
}

/* Where the app goes when a cluster of its shards went bad: placed afresh over its good
 * clusters plus the other good clusters of the zones that lost one, or over every good cluster
 * when that does not fit. {cluster: share} and *explain (new references), or NULL. */
static json_t *replace_shards(const fleet_t *f, const fg_config_t *cfg, const json_t *spec,
                              const json_t *shards, json_t **explain) {
    fg_fed_cluster_t cand[FG_FED_MAX_CLUSTERS];
    fg_fed_placement_t p;
    as_request_t req;
    as_request(spec, json_integer_value(json_object_get(spec, "replicas")), cfg, &req);
    for (int widen = 0; widen < 2; widen++) {
        size_t k = 0;
        for (size_t c = 0; c < f->n; c++) {
            if (f->bad[c])
                continue;
            bool keep = widen || json_object_get(shards, f->cl[c].name) != NULL;
            const char *name;
            json_t *v;
            json_object_foreach((json_t *)shards, name, v) {
                ssize_t b = fleet_index(f, name);
                keep = keep || (b >= 0 && f->bad[b] && strcmp(f->cl[b].zone, f->cl[c].zone) == 0);
            }
            if (keep)
                cand[k++] = f->cl[c];
        }
        if (k == 0 || fg_fed_place(cand, k, &req.req, &p) != FG_OK)
            continue;
        json_t *out = json_object();
        for (size_t i = 0; i < p.nverdicts; i++)
            if (p.verdicts[i].chosen)
                json_object_set_new(out, p.verdicts[i].cluster->name,
                                    json_integer(p.verdicts[i].replicas));
        *explain = fg_fed_explain(&p, fg_wall_ms());
        return out;
    }
    return NULL;
}

/* The annotations and labels of the reconciler's write of one cluster. */
static json_t *write_meta(const char *spec_text, const json_t *target, const char *placement,
                          const char *cluster, const char *rv) {
    /* now, not the spec's time: this write's shards are the newest record of the app */
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)fg_wall_ms());
    json_t *ann = json_pack("{s:s,s:s,s:s,s:s}", AS_SPEC_ANN, spec_text, AS_SPEC_AT_ANN, at,
                            "fleetgate.io/requested-by", RC_REQUESTED_BY, "fleetgate.io/request-id",
                            "reconciler");
    if (placement)
        json_object_set_new(ann, FG_KUBE_PLACEMENT_ANNOTATION, json_string(placement));
    json_t *meta = json_pack("{s:o}", "annotations", ann);
    as_mark(meta, target, cluster);
    if (rv)
        json_object_set_new(meta, "resourceVersion", json_string(rv));
    return meta;
}

/* Deletes what is left of an app whose delete began (fleetgate.io/deleting on a Deployment). */
static void finish_delete(struct rc_apps *r, const fleet_t *f, const app_t *a) {
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t out[FG_FED_MAX_CLUSTERS];
    char path[384];
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/deployments/%s", a->project, a->name);
    size_t n = 0;
    for (size_t c = 0; c < f->n; c++)
        if (a->at[c].held && !f->down[c])
            w[n++] = (fg_fed_write_t){.cluster = f->cl[c].name,
                                      .method = FG_KUBE_DELETE,
                                      .path = path,
                                      .absent_ok = true};
    if (n == 0)
        return;
    size_t failed = fg_fed_write_all(r->api->fed, w, n, RC_DEADLINE_MS, out);
    r->writes += n - failed;
    FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
           "reconciler: app %s/%s: its delete finished in %zu of %zu clusters", a->project, a->name,
           n - failed, n);
    fg_fed_outcomes_clear(out, n);
}

static bool deleting(const app_t *a, const fleet_t *f) {
    for (size_t c = 0; c < f->n; c++)
        if (a->at[c].held && a->at[c].deleting)
            return true;
    return false;
}

/* roll: every Deployment is written whole with cfg's catalogue (it changed); f->bad may mark
 * clusters that no longer admit the app (labels, zone), which it then leaves. */
static void reconcile_app(struct rc_apps *r, const fleet_t *f, const app_t *a,
                          const fg_config_t *cfg, bool roll) {
    if (deleting(a, f)) {
        finish_delete(r, f, a);
        return;
    }
    fg_fed_t *fed = r->api->fed;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS], out[FG_FED_MAX_CLUSTERS];
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL}, *shards = NULL, *target = NULL, *explain = NULL;
    ssize_t live_of[FG_FED_MAX_CLUSTERS];
    char path[384], coll[160];
    snprintf(coll, sizeof coll, "/apis/apps/v1/namespaces/%s/deployments", a->project);
    snprintf(path, sizeof path, "%s/%s", coll, a->name);
    size_t n = 0, nw = 0;
    for (size_t c = 0; c < f->n; c++) {
        live_of[c] = -1;
        if (a->at[c].held && !f->down[c]) {
            live_of[c] = (ssize_t)n;
            w[n++] =
                (fg_fed_write_t){.cluster = f->cl[c].name, .method = FG_KUBE_GET, .path = path};
        }
    }
    memset(live, 0, sizeof live);
    fg_fed_write_all(fed, w, n, RC_DEADLINE_MS, live);
    const char *spec_text = NULL, *placement = NULL;
    const json_t *newest = NULL;
    json_t *app = newest_write(live, n, &spec_text, &shards, &newest);
    if (app == NULL)
        goto out;
    placement = ann_str(newest, FG_KUBE_PLACEMENT_ANNOTATION);
    bool moved = false;
    const char *name;
    json_t *v;
    json_object_foreach(shards, name, v) {
        ssize_t c = fleet_index(f, name);
        moved = moved || c < 0 || f->bad[c];
    }
    char *explain_text = NULL;
    target = moved ? replace_shards(f, cfg, json_object_get(app, "spec"), shards, &explain)
                   : json_incref(shards);
    if (target == NULL) {
        FG_LOG(FG_LOG_WARN, NULL, "reconciler: app %s/%s: nowhere to move it", a->project, a->name);
        goto out;
    }
    if (explain)
        placement = explain_text = fg_json_dumps(explain, NULL);
    char hash[17];
    as_write_hash(spec_text, target, hash);
    const char *newest_write_label = json_string_value(json_object_get(
        json_object_get(json_object_get(newest, "metadata"), "labels"), AS_WRITE_LABEL));
    if (newest_write_label == NULL)
        newest_write_label = "";
    json_object_foreach(target, name, v) {
        ssize_t c = fleet_index(f, name);
        if (c < 0 || f->down[c])
            continue; /* back later: the next pass finds it short */
        const shard_t *s = &a->at[c];
        int64_t share = json_integer_value(v);
        if (!roll && s->held && strcmp(s->write, hash) == 0 && (s->desired == share || s->scaled))
            continue;
        const json_t *mine = live_of[c] >= 0 ? live[live_of[c]].object : NULL;
        const char *rv = json_string_value(
            json_object_get(json_object_get(mine, "metadata"), "resourceVersion"));
        if (s->held && mine == NULL)
            continue; /* could not be read: next pass */
        json_t *meta = write_meta(spec_text, target, placement, name, rv);
        w[nw] = (fg_fed_write_t){.cluster = f->cl[c].name, .path = path};
        if (roll || !s->held || strcmp(s->write, newest_write_label) != 0) {
            /* the whole Deployment: a new cluster, one that missed the newest write, or a
             * catalogue change */
            bodies[nw] =
                as_deployment(app, a->project, share, json_object_get(meta, "annotations"), cfg);
            as_keep_gone_sidecars(bodies[nw], mine ? mine : newest, as_deployment_template,
                                  json_object_get(app, "spec"), cfg);
            json_t *dm = json_object_get(bodies[nw], "metadata");
            as_mark(dm, target, name);
            if (rv)
                json_object_set_new(dm, "resourceVersion", json_string(rv));
            w[nw].method = s->held ? FG_KUBE_PUT : FG_KUBE_POST;
            w[nw].path = s->held ? path : coll;
            w[nw].exists_ok = !s->held;
            json_decref(meta);
        } else {
            bodies[nw] =
                json_pack("{s:o,s:{s:I}}", "metadata", meta, "spec", "replicas", (json_int_t)share);
            w[nw].method = FG_KUBE_PATCH;
        }
        w[nw].body = bodies[nw];
        nw++;
    }
    for (size_t c = 0; c < f->n; c++)
        if (a->at[c].held && !f->down[c] && json_object_get(target, f->cl[c].name) == NULL)
            w[nw++] = (fg_fed_write_t){.cluster = f->cl[c].name,
                                       .method = FG_KUBE_DELETE,
                                       .path = path,
                                       .absent_ok = true};
    if (nw > 0) {
        size_t failed = fg_fed_write_all(fed, w, nw, RC_DEADLINE_MS, out);
        bool shown[FG_FED_MAX_CLUSTERS];
        fg_fed_write_through(fed, w, out, nw, shown);
        r->writes += nw - failed;
        char what[512];
        bool timed_out;
        fg_fed_outcomes_summary(w, out, nw, what, sizeof what, &timed_out);
        FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
               "reconciler: app %s/%s: %s %zu writes, %zu applied%s%s", a->project, a->name,
               moved  ? "moved by"
               : roll ? "rolled to the changed sidecar catalogue by"
                      : "recorded placement applied again by",
               nw, nw - failed, failed ? "; " : "", failed ? what : "");
        fg_fed_outcomes_clear(out, nw);
    }
    if (moved && a->scalers) { /* its scalers go where the app went (the next pass retries) */
        bool want[FG_FED_MAX_CLUSTERS] = {false};
        json_object_foreach(target, name, v) {
            ssize_t c = fleet_index(f, name);
            if (c >= 0)
                want[c] = true;
        }
        follow_scalers(r, f, a, want);
    }
    free(explain_text);
out:
    fg_fed_outcomes_clear(live, n);
    for (size_t i = 0; i < nw; i++)
        json_decref(bodies[i]);
    json_decref(app);
    json_decref(shards);
    json_decref(target);
    json_decref(explain);
}

/* ---- cron jobs ------------------------------------------------------------------------- *
 *
 * The same pass looks at the cron jobs fleetgate made (their CronJobs labelled AS_SHARDS_LABEL):
 * one whose CronJobs the cache shows in a number of clusters other than its last write's, or
 * with schedules, concurrency policies or time zones that differ between clusters, is repaired
 * from what its CronJobs record (cj_repair) once that lasted RC_SETTLE_MS; one whose delete
 * began (AS_DELETING_LABEL on a CronJob) is deleted where it is left. */

typedef struct {
    bool held, deleting;
    int64_t shards;
    char what[256];    /* schedule, policy and time zone: equal in every cluster */
    char sidecars[17]; /* AS_SIDECARS_LABEL: what its sidecars were built from ("" none) */
} cron_shard_t;

typedef struct {
    char project[64], name[256];
    cron_shard_t at[FG_FED_MAX_CLUSTERS];
    json_t *spec; /* its last write's spec (fleetgateSpec: the cron job's "spec" member) when
                   * it uses sidecars, or NULL */
} cron_t;

static void file_cron(const json_t *o, size_t c, cron_t **crons, size_t *n, json_t *index) {
    const json_t *labels = json_object_get(o, "labels");
    const char *name = json_string_value(json_object_get(o, "name")),
               *project = json_string_value(json_object_get(o, "project")),
               *by = json_string_value(json_object_get(labels, MANAGED_BY)),
               *deleting = json_string_value(json_object_get(labels, AS_DELETING_LABEL));
    if (name == NULL || project == NULL || by == NULL || strcmp(by, "fleetgate") != 0 ||
        json_object_get(o, "deletionTime") != NULL || strlen(project) >= 64 || strlen(name) >= 256)
        return;
    char key[330];
    snprintf(key, sizeof key, "%s/%s", project, name);
    json_t *at = json_object_get(index, key);
    size_t i;
    if (at == NULL) {
        *crons = fg_xrealloc(*crons, (*n + 1) * sizeof **crons);
        i = (*n)++;
        memset(&(*crons)[i], 0, sizeof **crons);
        snprintf((*crons)[i].project, sizeof(*crons)[i].project, "%s", project);
        snprintf((*crons)[i].name, sizeof(*crons)[i].name, "%s", name);
        json_object_set_new(index, key, json_integer((json_int_t)i));
    } else {
        i = (size_t)json_integer_value(at);
    }
    cron_shard_t *s = &(*crons)[i].at[c];
    const char *sched = json_string_value(json_object_get(o, "schedule")),
               *policy = json_string_value(json_object_get(o, "concurrencyPolicy")),
               *tz = json_string_value(json_object_get(o, "timeZone"));
    const char *sc = json_string_value(json_object_get(labels, AS_SIDECARS_LABEL)),
               *spec = json_string_value(json_object_get(o, "fleetgateSpec"));
    s->held = true;
    s->deleting = deleting != NULL && strcmp(deleting, "true") == 0;
    s->shards = as_label_int(labels, AS_SHARDS_LABEL);
    snprintf(s->what, sizeof s->what, "%s|%s|%s", sched ? sched : "", policy ? policy : "",
             tz ? tz : "");
    snprintf(s->sidecars, sizeof s->sidecars, "%s", sc ? sc : "");
    if (sc && spec && (*crons)[i].spec == NULL) { /* decoded only for one that uses sidecars */
        json_t *j = NULL;
        if (fg_json_load(spec, strlen(spec), &j, NULL, 0) == FG_OK && json_is_object(j))
            (*crons)[i].spec = j;
        else
            json_decref(j);
    }
}

static void crons_free(cron_t *crons, size_t n) {
    for (size_t i = 0; i < n; i++)
        json_decref(crons[i].spec);
    free(crons);
}

/* Every cron job fleetgate made as the cache shows it (*crons: crons_free). FG_OK or FG_EIO. */
static int read_crons(struct rc_apps *r, size_t n, cron_t **crons, size_t *ncrons) {
    const fg_config_t *cfg = r->api->cfg;
    fg_redis_batch_t *b = fg_redis_batch_new(), *h = fg_redis_batch_new();
    fg_cache_key_t k;
    size_t *owner = NULL, nh = 0;
    int rc = FG_OK;
    *crons = NULL;
    *ncrons = 0;
    for (size_t c = 0; c < n; c++)
        fg_redis_batch_addv(b, "SMEMBERS",
                            fg_cache_key_scopes(&k, "cronjob", cfg->clusters[c].name), NULL);
    if (fg_redis_batch_run(r->api->redis, b, NULL, 0) != FG_OK)
        rc = FG_EIO;
    for (size_t c = 0; rc == FG_OK && c < n; c++) {
        const fg_redis_reply_t *scopes = fg_redis_batch_reply(b, c);
        for (size_t j = 0; j < fg_redis_reply_len(scopes); j++) {
            size_t len;
            const char *p = fg_redis_reply_str(fg_redis_reply_at(scopes, j), &len);
            char project[64];
            if (p == NULL || len >= sizeof project)
                continue;
            snprintf(project, sizeof project, "%.*s", (int)len, p);
            owner = fg_xrealloc(owner, (nh + 1) * sizeof *owner);
            owner[nh++] = c;
            fg_redis_batch_addv(h, "HGETALL",
                                fg_cache_key_objects(&k, "cronjob", cfg->clusters[c].name, project),
                                NULL);
        }
    }
    json_t *index = json_object();
    if (rc == FG_OK && nh > 0 && fg_redis_batch_run(r->api->redis, h, NULL, 0) != FG_OK)
        rc = FG_EIO;
    for (size_t i = 0; rc == FG_OK && i < nh; i++) {
        const fg_redis_reply_t *hash = fg_redis_batch_reply(h, i);
        for (size_t j = 1; j < fg_redis_reply_len(hash); j += 2) {
            json_t *o = parse(fg_redis_reply_at(hash, j));
            if (o)
                file_cron(o, owner[i], crons, ncrons, index);
            json_decref(o);
        }
    }
    json_decref(index);
    free(owner);
    fg_redis_batch_free(h);
    fg_redis_batch_free(b);
    return rc;
}

/* Whether the cron job's CronJobs are not what its last write made: some deleting, fewer or more
 * than its shards, or different schedules. Ones written before the label are left alone. */
static bool cron_needs_work(const cron_t *cj, const fleet_t *f) {
    size_t held = 0;
    int64_t shards = -1;
    const char *what = NULL;
    bool differ = false;
    for (size_t c = 0; c < f->n; c++) {
        const cron_shard_t *s = &cj->at[c];
        if (!s->held)
            continue;
        held++;
        if (s->deleting)
            return true;
        if (s->shards < 0)
            return false;
        differ =
            differ || (shards >= 0 && shards != s->shards) || (what && strcmp(what, s->what) != 0);
        shards = s->shards;
        what = s->what;
    }
    return held > 0 && (differ || (int64_t)held != shards);
}

static void reconcile_cron(struct rc_apps *r, const fleet_t *f, const cron_t *cj,
                           const fg_config_t *cfg) {
    const char *have[FG_FED_MAX_CLUSTERS], *up[FG_FED_MAX_CLUSTERS];
    size_t nh = 0, nu = 0;
    bool deleting = false;
    for (size_t c = 0; c < f->n; c++) {
        if (!f->down[c])
            up[nu++] = f->cl[c].name;
        if (cj->at[c].held && !f->down[c])
            have[nh++] = f->cl[c].name;
        deleting = deleting || (cj->at[c].held && cj->at[c].deleting);
    }
    if (!deleting) {
        int n = cj_repair(r->api, cfg, cj->project, cj->name, have, nh, up, nu, RC_REQUESTED_BY);
        r->writes += n > 0 ? (uint64_t)n : 0;
        return;
    }
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t out[FG_FED_MAX_CLUSTERS];
    char path[400];
    snprintf(path, sizeof path,
             "/apis/batch/v1/namespaces/%s/cronjobs/%s?propagationPolicy=Background", cj->project,
             cj->name);
    for (size_t i = 0; i < nh; i++)
        w[i] = (fg_fed_write_t){
            .cluster = have[i], .method = FG_KUBE_DELETE, .path = path, .absent_ok = true};
    if (nh == 0)
        return;
    size_t failed = fg_fed_write_all(r->api->fed, w, nh, RC_DEADLINE_MS, out);
    bool shown[FG_FED_MAX_CLUSTERS];
    fg_fed_write_through(r->api->fed, w, out, nh, shown);
    r->writes += nh - failed;
    FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
           "reconciler: cron job %s/%s: its delete finished in %zu of %zu clusters", cj->project,
           cj->name, nh - failed, nh);
    fg_fed_outcomes_clear(out, nh);
}

static bool cron_rollout(struct rc_apps *r, const fleet_t *f, const cron_t *cj,
                         const fg_config_t *cfg);

/* Acts on what needs work once that lasted RC_SETTLE_MS (pending: this pass's record), and rolls
 * a settled cron job built from another sidecar catalogue than cfg's (cron_rollout). */
static size_t cron_pass(struct rc_apps *r, const fleet_t *f, int64_t now, json_t *pending,
                        size_t acted, const fg_config_t *cfg) {
    cron_t *crons = NULL;
    size_t n = 0;
    if (read_crons(r, f->n, &crons, &n) == FG_OK)
        for (size_t i = 0; i < n; i++) {
            if (!cron_needs_work(&crons[i], f)) {
                if (acted < RC_MAX_APPS_PASS && cron_rollout(r, f, &crons[i], cfg))
                    acted++;
                continue;
            }
            char key[340];
            snprintf(key, sizeof key, "cronjob:%s/%s", crons[i].project, crons[i].name);
            json_t *since = json_object_get(r->pending, key);
            int64_t first = since ? json_integer_value(since) : now;
            json_object_set_new(pending, key, json_integer(first));
            if (now - first >= RC_SETTLE_MS && acted < RC_MAX_APPS_PASS) {
                reconcile_cron(r, f, &crons[i], cfg);
                acted++;
                json_object_del(pending, key);
            }
        }
    crons_free(crons, n);
    return acted;
}

/* ---- scheduled cron runs admitted to the tier's quota ------------------------------------ *
 *
 * A cron job's template is written suspended (CJ_ADMISSION_ANNOTATION "quota", jobspec.h), so
 * each run the clusters' cronjob controllers start waits. Each pass takes the runs waiting (a
 * Job suspended with that annotation in one of their clusters), oldest first, and reserves what
 * the whole run takes (min(parallelism, completions) pods of its shards, summed) under the run's
 * job set name, atomically with every write (quota_reserve_at). A run that fits is unsuspended
 * in its clusters and marked "admitted"; the others stay suspended and carry why
 * (CJ_HELD_ANNOTATION), which the job set shows (phase Pending, condition Admitted False,
 * QuotaExceeded). Once the cache shows an admitted run unsuspended it counts itself in the usage,
 * and its reservation is dropped. */

typedef struct {
    bool held, waiting, admitted, suspended;
    char note[512]; /* CJ_HELD_ANNOTATION as the Job has it */
} run_shard_t;

typedef struct {
    char project[64], name[256], tier[32], created[40], cron[256];
    int64_t want[3];
    run_shard_t at[FG_FED_MAX_CLUSTERS];
} run_t;

static void file_run(const json_t *o, size_t c, run_t **runs, size_t *n, json_t *index) {
    const char *name = json_string_value(json_object_get(o, "name")),
               *project = json_string_value(json_object_get(o, "project")),
               *adm = json_string_value(json_object_get(o, "admission")),
               *tier =
                   json_string_value(json_object_get(json_object_get(o, "labels"), AS_TIER_LABEL)),
               *state = json_string_value(json_object_get(o, "state"));
    if (name == NULL || project == NULL || adm == NULL || json_object_get(o, "cronjob") == NULL ||
        json_object_get(o, "deletionTime") != NULL || strlen(project) >= 64 || strlen(name) >= 256)
        return;
    char key[330];
    snprintf(key, sizeof key, "%s/%s", project, name);
    json_t *at = json_object_get(index, key);
    size_t i;
    if (at == NULL) {
        *runs = fg_xrealloc(*runs, (*n + 1) * sizeof **runs);
        i = (*n)++;
        memset(&(*runs)[i], 0, sizeof **runs);
        snprintf((*runs)[i].project, sizeof(*runs)[i].project, "%s", project);
        snprintf((*runs)[i].name, sizeof(*runs)[i].name, "%s", name);
        snprintf((*runs)[i].tier, sizeof(*runs)[i].tier, "%s", tier ? tier : "OnDemand");
        snprintf((*runs)[i].cron, sizeof(*runs)[i].cron, "%s",
                 json_string_value(json_object_get(o, "cronjob"))
                     ? json_string_value(json_object_get(o, "cronjob"))
                     : "");
        json_object_set_new(index, key, json_integer((json_int_t)i));
    } else {
        i = (size_t)json_integer_value(at);
    }
    run_t *r = &(*runs)[i];
    const char *created = json_string_value(json_object_get(o, "creationTime"));
    if (created && (r->created[0] == '\0' || strcmp(created, r->created) < 0))
        snprintf(r->created, sizeof r->created, "%s", created);
    const json_t *jp = json_object_get(o, "parallelism"), *jc = json_object_get(o, "completions");
    int64_t par = json_is_integer(jp) ? json_integer_value(jp) : 1,
            comp = json_is_integer(jc) ? json_integer_value(jc) : 1, d[3];
    quota_demand(json_object_get(o, "containers"), par < comp ? par : comp, d);
    for (size_t k = 0; k < 3; k++)
        r->want[k] += d[k];
    run_shard_t *s = &r->at[c];
    const char *note = json_string_value(json_object_get(o, "quotaHeld"));
    s->held = true;
    s->suspended = state && strcmp(state, "Suspended") == 0;
    s->waiting = strcmp(adm, "quota") == 0 && s->suspended;
    s->admitted = strcmp(adm, "admitted") == 0;
    snprintf(s->note, sizeof s->note, "%s", note ? note : "");
}

/* Every scheduled run of fleetgate's cron jobs as the cache shows it (*runs: free()). */
static int read_runs(struct rc_apps *r, size_t n, run_t **runs, size_t *nruns) {
    const fg_config_t *cfg = r->api->cfg;
    fg_redis_batch_t *b = fg_redis_batch_new(), *h = fg_redis_batch_new();
    fg_cache_key_t k;
    size_t *owner = NULL, nh = 0;
    int rc = FG_OK;
    *runs = NULL;
    *nruns = 0;
    for (size_t c = 0; c < n; c++)
        fg_redis_batch_addv(b, "SMEMBERS", fg_cache_key_scopes(&k, "jobset", cfg->clusters[c].name),
                            NULL);
    if (fg_redis_batch_run(r->api->redis, b, NULL, 0) != FG_OK)
        rc = FG_EIO;
    for (size_t c = 0; rc == FG_OK && c < n; c++) {
        const fg_redis_reply_t *scopes = fg_redis_batch_reply(b, c);
        for (size_t j = 0; j < fg_redis_reply_len(scopes); j++) {
            size_t len;
            const char *p = fg_redis_reply_str(fg_redis_reply_at(scopes, j), &len);
            char project[64];
            if (p == NULL || len >= sizeof project)
                continue;
            snprintf(project, sizeof project, "%.*s", (int)len, p);
            owner = fg_xrealloc(owner, (nh + 1) * sizeof *owner);
            owner[nh++] = c;
            fg_redis_batch_addv(h, "HGETALL",
                                fg_cache_key_objects(&k, "jobset", cfg->clusters[c].name, project),
                                NULL);
        }
    }
    json_t *index = json_object();
    if (rc == FG_OK && nh > 0 && fg_redis_batch_run(r->api->redis, h, NULL, 0) != FG_OK)
        rc = FG_EIO;
    for (size_t i = 0; rc == FG_OK && i < nh; i++) {
        const fg_redis_reply_t *hash = fg_redis_batch_reply(h, i);
        for (size_t j = 1; j < fg_redis_reply_len(hash); j += 2) {
            json_t *o = parse(fg_redis_reply_at(hash, j));
            if (o)
                file_run(o, owner[i], runs, nruns, index);
            json_decref(o);
        }
    }
    json_decref(index);
    free(owner);
    fg_redis_batch_free(h);
    fg_redis_batch_free(b);
    return rc;
}

/* The project as presented, from the cache (a new reference; NULL when not there). */
static json_t *cached_project(struct rc_apps *r, const char *name) {
    rd_ctx_t c = {.api = r->api, .kind = "project", .resource = "namespaces", .scope = "_"};
    const fg_config_t *cfg = r->api->cfg;
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    for (size_t i = 0; i < cfg->nclusters && c.nparts < RD_MAX_CLUSTERS; i++) {
        c.parts[c.nparts++].conf = &cfg->clusters[i];
        fg_redis_batch_addv(
            b, "HGET", fg_cache_key_objects(&k, "project", cfg->clusters[i].name, "_"), name, NULL);
    }
    json_t *objs[RD_MAX_CLUSTERS] = {0}, *p = NULL;
    size_t found = 0;
    if (fg_redis_batch_run(r->api->redis, b, NULL, 0) == FG_OK)
        for (size_t i = 0; i < c.nparts; i++)
            found += (objs[i] = parse(fg_redis_batch_reply(b, i))) != NULL;
    if (found)
        p = rd_present_project(&c, objs);
    for (size_t i = 0; i < c.nparts; i++)
        json_decref(objs[i]);
    fg_redis_batch_free(b);
    return p;
}

static int cmp_runs(const void *a, const void *b) {
    const run_t *x = a, *y = b;
    int d = strcmp(x->created, y->created);
    return d ? d : strcmp(x->name, y->name);
}

/* Sends patch to the run's shards that are waiting (up clusters only); the number applied. */
static size_t patch_waiting(struct rc_apps *r, const fleet_t *f, const run_t *run,
                            const json_t *patch, const char *note) {
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t out[FG_FED_MAX_CLUSTERS];
    char path[400];
    size_t n = 0;
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", run->project, run->name);
    for (size_t c = 0; c < f->n; c++)
        if (run->at[c].waiting && !f->down[c] && (note == NULL || strcmp(note, run->at[c].note)))
            w[n++] = (fg_fed_write_t){
                .cluster = f->cl[c].name, .method = FG_KUBE_PATCH, .path = path, .body = patch};
    if (n == 0)
        return 0;
    size_t failed = fg_fed_write_all(r->api->fed, w, n, RC_DEADLINE_MS, out);
    bool shown[FG_FED_MAX_CLUSTERS];
    fg_fed_write_through(r->api->fed, w, out, n, shown);
    fg_fed_outcomes_clear(out, n);
    r->writes += n - failed;
    return n - failed;
}

static void admit_pass(struct rc_apps *r, const fleet_t *f) {
    run_t *runs = NULL;
    size_t n = 0, looked = 0;
    int64_t now = fg_wall_ms();
    if (read_runs(r, f->n, &runs, &n) != FG_OK) {
        free(runs);
        return;
    }
    if (n > 1)
        qsort(runs, n, sizeof *runs, cmp_runs);
    /* a run is whole once its Jobs are in every cluster holding its cron job: the clusters'
     * controllers start them each on its own, and half a run must not take the quota (unless
     * the rest has not come in RC_RUN_WHOLE_MS: then it is judged with the Jobs it has, and a
     * share that comes later is admitted with the whole run's demand, the reservation replaced) */
    cron_t *crons = NULL;
    size_t ncrons = 0;
    json_t *shards = json_object();
    if (read_crons(r, f->n, &crons, &ncrons) == FG_OK)
        for (size_t i = 0; i < ncrons; i++) {
            size_t held = 0;
            for (size_t c = 0; c < f->n; c++)
                held += crons[i].at[c].held;
            char key[330];
            snprintf(key, sizeof key, "%s/%s", crons[i].project, crons[i].name);
            json_object_set_new(shards, key, json_integer((json_int_t)held));
        }
    crons_free(crons, ncrons);
    json_t *projects = json_object();
    fg_redis_batch_t *drop = fg_redis_batch_new();
    size_t ndrop = 0;
    for (size_t i = 0; i < n; i++) {
        run_t *run = &runs[i];
        bool waiting = false, suspended = false;
        for (size_t c = 0; c < f->n; c++) {
            waiting = waiting || run->at[c].waiting;
            suspended = suspended || (run->at[c].held && run->at[c].suspended);
        }
        char qname[300];
        JS_QUOTA_NAME(qname, run->name);
        if (!waiting) {
            if (!suspended) { /* admitted and shown running (or done): it counts itself now */
                fg_cache_key_t k;
                fg_redis_batch_addv(drop, "HDEL", fg_cache_key_quota(&k, run->project, run->tier),
                                    qname, NULL);
                ndrop++;
            }
            continue;
        }
        char key[330];
        size_t have = 0;
        snprintf(key, sizeof key, "%s/%s", run->project, run->cron);
        for (size_t c = 0; c < f->n; c++)
            have += run->at[c].held;
        int64_t created = 0;
        bool young = fg_parse_time_ms(run->created, strlen(run->created), &created) != FG_OK ||
                     now - created < RC_RUN_WHOLE_MS;
        if (((json_int_t)have < json_integer_value(json_object_get(shards, key)) && young) ||
            looked++ >= RC_MAX_APPS_PASS)
            continue;
        json_t *proj = json_object_get(projects, run->project);
        if (proj == NULL) {
            proj = cached_project(r, run->project);
            if (proj == NULL)
                continue;
            json_object_set_new(projects, run->project, proj);
        }
        quota_verdict_t v;
        int verdict = quota_reserve_at(r->api, NULL, proj, run->tier, qname, run->want, true, &v);
        if (verdict == QUOTA_FITS) {
            json_t *patch =
                json_pack("{s:{s:{s:s,s:n,s:s}},s:{s:b}}", "metadata", "annotations",
                          CJ_ADMISSION_ANNOTATION, "admitted", CJ_HELD_ANNOTATION,
                          "fleetgate.io/requested-by", RC_REQUESTED_BY, "spec", "suspend", 0);
            size_t done = patch_waiting(r, f, run, patch, NULL);
            json_decref(patch);
            FG_LOG(FG_LOG_INFO, NULL,
                   "reconciler: cron run %s/%s fits tier %s's quota: started in %zu clusters",
                   run->project, run->name, run->tier, done);
        } else if (verdict == QUOTA_NO_TIER || verdict == QUOTA_EXCEEDED) {
            json_t *patch =
                json_pack("{s:{s:{s:s}}}", "metadata", "annotations", CJ_HELD_ANNOTATION, v.why);
            if (patch_waiting(r, f, run, patch, v.why) > 0)
                FG_LOG(FG_LOG_INFO, NULL, "reconciler: cron run %s/%s held: %s", run->project,
                       run->name, v.why);
            json_decref(patch);
        }
    }
    if (ndrop > 0)
        (void)fg_redis_batch_run(r->api->redis, drop, NULL, 0);
    fg_redis_batch_free(drop);
    json_decref(shards);
    json_decref(projects);
    free(runs);
}

/* ---- the pass --------------------------------------------------------------------------- */

/* ---- a changed catalogue or cluster labels: rolled at a bounded rate ----------------------------
 */

/* Whether one more app may be rolled or moved now: fewer than reconciler.rollout_max_apps were
 * in the last reconciler.rollout_interval_s. */
static bool roll_allowed(struct rc_apps *r, int64_t now) {
    const fg_config_t *cfg = r->api->cfg;
    size_t max = (size_t)cfg->reconciler.rollout_max_apps;
    if (max == 0)
        max = 5; /* a configuration made without the parser (tests) */
    int64_t window =
        cfg->reconciler.rollout_interval_s > 0 ? cfg->reconciler.rollout_interval_s * 1000 : 10000;
    size_t recent = 0;
    for (size_t i = 0; i < r->nrolled; i++)
        recent += r->rolled[i] > now - window;
    return recent < max;
}

static void roll_done(struct rc_apps *r) {
    size_t max = r->api->cfg->reconciler.rollout_max_apps > 0
                     ? (size_t)r->api->cfg->reconciler.rollout_max_apps
                     : 5;
    if (r->nrolled == max) {
        memmove(r->rolled, r->rolled + 1, (max - 1) * sizeof *r->rolled);
        r->nrolled--;
    }
    r->rolled = fg_xrealloc(r->rolled, max * sizeof *r->rolled);
    /* after the writes: every write of this roll is older than this mark */
    r->rolled[r->nrolled++] = fg_wall_ms();
}

/* The clusters holding a (settled) app that its placement no longer admits (their labels or
 * zone changed), marked bad in out (a copy of f); false when there are none. */
static bool refused_now(const fleet_t *f, const app_t *a, const fg_config_t *cfg, fleet_t *out) {
    as_request_t req;
    fg_fed_placement_t p;
    memset(&p, 0, sizeof p);
    as_request(a->spec, json_integer_value(json_object_get(a->spec, "replicas")), cfg, &req);
    if (fg_fed_place(f->cl, f->n, &req.req, &p) == FG_EINVAL)
        return false; /* ENOENT fills the verdicts too */
    bool any = false;
    *out = *f;
    for (size_t c = 0; c < f->n && c < p.nverdicts; c++)
        if (a->at[c].held && (p.verdicts[c].filter == FG_FED_FILTER_ZONE ||
                              p.verdicts[c].filter == FG_FED_FILTER_SELECTOR)) {
            out->bad[c] = true;
            any = true;
        }
    return any;
}

/* Logs once that what (an app, a cron job) uses a sidecar the catalogue no longer holds. */
static void tell_gone_once(struct rc_apps *r, const char *what, const char *project,
                           const char *name, const char *gone) {
    char key[420];
    snprintf(key, sizeof key, "%s:%s/%s/%s", what, project, name, gone);
    if (json_object_get(r->gone_told, key) != NULL)
        return;
    json_object_set_new(r->gone_told, key, json_true());
    FG_LOG(FG_LOG_WARN, NULL,
           "reconciler: %s %s/%s uses sidecar %s, which the catalogue no longer holds: it keeps "
           "running with its last definition and is not rolled",
           what, project, name, gone);
}

/* A settled app whose Deployments were built from another catalogue than cfg's, or that runs
 * where its placement no longer admits it: rewritten (roll) or moved, when the rate allows.
 * true when it acted (or must wait for the rate). A sidecar gone from the catalogue is kept as
 * it runs, and said once. */
static bool rollout(struct rc_apps *r, const fleet_t *f, const app_t *a, const fg_config_t *cfg) {
    if (a->spec == NULL)
        return false;
    for (size_t c = 0; c < f->n; c++)
        if (a->at[c].held && (a->at[c].stopped || f->down[c]))
            return false; /* stopped, or a cluster out of reach: left for later */
    fleet_t moved;
    bool move = refused_now(f, a, cfg, &moved), roll = false;
    const char *gone = as_sidecar_missing(a->spec, cfg);
    char want[17];
    as_sidecars_digest(a->spec, cfg, want);
    for (size_t c = 0; c < f->n; c++)
        roll = roll || (a->at[c].held && a->at[c].sidecars[0] && strcmp(a->at[c].sidecars, want));
    if (roll && gone) {
        tell_gone_once(r, "app", a->project, a->name, gone);
        roll = false;
    }
    if (!move && !roll)
        return false;
    int64_t now = fg_wall_ms();
    if (!roll_allowed(r, now))
        return true; /* the next pass, as the rate allows */
    reconcile_app(r, move ? &moved : f, a, cfg, !move);
    roll_done(r);
    return true;
}

/* A settled cron job whose CronJobs were built from another catalogue than cfg's: repaired from
 * what they record (cj_repair, with cfg's catalogue), when the rate allows; true when it acted
 * (or must wait for the rate). A sidecar gone from the catalogue is kept as it runs, and said
 * once, as an app's. */
static bool cron_rollout(struct rc_apps *r, const fleet_t *f, const cron_t *cj,
                         const fg_config_t *cfg) {
    const json_t *tmpl = json_object_get(cj->spec, "jobTemplate");
    if (tmpl == NULL)
        return false; /* no sidecars, or written before the label */
    const char *have[FG_FED_MAX_CLUSTERS], *up[FG_FED_MAX_CLUSTERS];
    size_t nh = 0, nu = 0;
    char want[17];
    as_sidecars_digest(tmpl, cfg, want);
    bool roll = false;
    for (size_t c = 0; c < f->n; c++) {
        const cron_shard_t *s = &cj->at[c];
        if (s->held && (s->deleting || f->down[c]))
            return false; /* its delete finishes first; a cluster out of reach: later */
        roll = roll || (s->held && s->sidecars[0] && strcmp(s->sidecars, want) != 0);
        if (s->held)
            have[nh++] = f->cl[c].name;
        if (!f->down[c])
            up[nu++] = f->cl[c].name;
    }
    const char *gone = as_sidecar_missing(tmpl, cfg);
    if (roll && gone) {
        tell_gone_once(r, "cron job", cj->project, cj->name, gone);
        return false;
    }
    if (!roll)
        return false;
    if (!roll_allowed(r, fg_wall_ms()))
        return true; /* the next pass, as the rate allows */
    int n = cj_repair(r->api, cfg, cj->project, cj->name, have, nh, up, nu, RC_REQUESTED_BY);
    r->writes += n > 0 ? (uint64_t)n : 0;
    FG_LOG(FG_LOG_INFO, NULL,
           "reconciler: cron job %s/%s rolled to the changed sidecar catalogue by %d writes",
           cj->project, cj->name, n);
    roll_done(r);
    return true;
}

void rc_apps_pass(void *ud) {
    struct rc_apps *r = ud;
    const fg_fed_registry_t *reg = NULL;
    char why[256];
    if (fg_fed_registry_get(r->api->fed, false, &reg, why, sizeof why) != FG_OK)
        return;
    fleet_t f = {0};
    f.cl = fg_fed_registry_clusters(reg, &f.n);
    int64_t now = fg_wall_ms();
    for (size_t c = 0; c < f.n && c < FG_FED_MAX_CLUSTERS; c++) {
        f.down[c] = !f.cl[c].reachable;
        if (!f.down[c])
            r->down_since[c] = 0;
        else if (r->down_since[c] == 0)
            r->down_since[c] = now;
        f.bad[c] = (f.down[c] && now - r->down_since[c] >= RC_DOWN_PERIODS * r->period_ms) ||
                   (!f.down[c] && f.cl[c].synced && f.cl[c].nnodes == 0);
    }
    app_t *apps = NULL;
    size_t napps = 0, acted = 0;
    json_t *pending = json_object();
    fg_live_t *live = fg_live_acquire(); /* the catalogue as the last SIGHUP left it */
    const fg_config_t *cfg = live ? fg_live_config(live) : r->api->cfg;
    if (read_apps(r, f.n, &apps, &napps) == FG_OK) {
        for (size_t i = 0; i < napps; i++) {
            char key[340];
            if (!needs_work(&apps[i], &f)) {
                if (deleting(&apps[i], &f))
                    continue;
                if (rollout(r, &f, &apps[i], cfg))
                    continue;
                /* a settled app whose scalers are elsewhere: they follow, once that lasted */
                if (!scalers_astray(&apps[i], &f))
                    continue;
                snprintf(key, sizeof key, "scaler:%s/%s", apps[i].project, apps[i].name);
                json_t *since = json_object_get(r->pending, key);
                int64_t first = since ? json_integer_value(since) : now;
                json_object_set_new(pending, key, json_integer(first));
                if (now - first >= RC_SETTLE_MS && acted < RC_MAX_APPS_PASS) {
                    bool want[FG_FED_MAX_CLUSTERS];
                    for (size_t c = 0; c < f.n; c++)
                        want[c] = apps[i].at[c].held;
                    follow_scalers(r, &f, &apps[i], want);
                    acted++;
                    json_object_del(pending, key);
                }
                continue;
            }
            snprintf(key, sizeof key, "%s/%s", apps[i].project, apps[i].name);
            json_t *since = json_object_get(r->pending, key);
            int64_t first = since ? json_integer_value(since) : now;
            json_object_set_new(pending, key, json_integer(first));
            if (now - first >= RC_SETTLE_MS && acted < RC_MAX_APPS_PASS) {
                reconcile_app(r, &f, &apps[i], cfg, false);
                acted++;
                json_object_del(pending, key); /* looked at again from scratch */
            }
        }
        acted = cron_pass(r, &f, now, pending, acted, cfg);
        admit_pass(r, &f);
        json_decref(r->pending);
        r->pending = pending;
        pending = NULL;
    }
    json_decref(pending);
    for (size_t i = 0; i < napps; i++) {
        json_decref(apps[i].scalers);
        json_decref(apps[i].spec);
    }
    free(apps);
    fg_live_release(live);
    fg_fed_registry_release(reg);
}
