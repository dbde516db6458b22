/* api/scalers.c: what scalers (HorizontalPodAutoscalers, one per cluster of an app) impose on
 * the other writes: a manual scale of an app must stay within the bounds of every scaler that
 * targets it, summed over the clusters its HPAs are in, since the HPAs would undo a scale past
 * them (or scale back from below) at their next sync. Read from the cache, so an HPA made with
 * kubectl counts as much as one fleetgate made. */
#include "workload.h"

#include <stdio.h>
#include <string.h>

/* The reads of every cluster's cached scalers of project, added to b; the index of the first. */
static size_t scalers_add(const fg_api_t *api, const char *project, fg_redis_batch_t *b) {
    size_t at = fg_redis_batch_len(b);
    fg_cache_key_t k;
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "scaler", api->cfg->clusters[i].name, project),
                            NULL);
    return at;
}

/* The scalers targeting app's Deployment among those scalers_add read (from index at of b):
 * {name: {"min", "max", "clusters": [..]}} summed over clusters (a new reference). */
static json_t *scalers_read(fg_req_t *req, const char *app, const fg_redis_batch_t *b, size_t at) {
    fg_api_t *api = fg_req_app(req);
    json_t *found = json_object();
    for (size_t i = 0; i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, at + i);
        for (size_t r = 1; r < fg_redis_reply_len(h); r += 2) {
            json_t *o = rd_parse_object(fg_redis_reply_at(h, r), fg_req_id(req));
            const json_t *target = json_object_get(o, "target");
            const char *name = rd_str(o, "name"), *kind = rd_str(target, "kind"),
                       *to = rd_str(target, "name");
            if (name && kind && to && strcmp(kind, "Deployment") == 0 && strcmp(to, app) == 0) {
                json_t *sum = json_object_get(found, name);
                if (sum == NULL) {
                    sum = json_pack("{s:I,s:I,s:[]}", "min", (json_int_t)0, "max", (json_int_t)0,
                                    "clusters");
                    json_object_set_new(found, name, sum);
                }
                json_object_set_new(
                    sum, "min", json_integer(rd_int(sum, "min", 0) + rd_int(o, "minReplicas", 1)));
                json_object_set_new(
                    sum, "max", json_integer(rd_int(sum, "max", 0) + rd_int(o, "maxReplicas", 1)));
                json_array_append_new(json_object_get(sum, "clusters"),
                                      json_string(api->cfg->clusters[i].name));
            }
            json_decref(o);
        }
    }
    return found;
}

/* The scalers targeting app's Deployment, from the cache (scalers_read's), or NULL when Redis
 * failed. */
static json_t *scalers_of(fg_req_t *req, const char *project, const char *app) {
    fg_api_t *api = fg_req_app(req);
    fg_redis_batch_t *b = fg_redis_batch_new();
    size_t at = scalers_add(api, project, b);
    char why[128];
    json_t *found = fg_redis_batch_run(api->redis, b, why, sizeof why) == FG_OK
                        ? scalers_read(req, app, b, at)
                        : NULL;
    fg_redis_batch_free(b);
    return found;
}

size_t sc_bounds_add(fg_req_t *req, const char *project, fg_redis_batch_t *b) {
    return scalers_add(fg_req_app(req), project, b);
}

bool sc_bounds_read_or_reply(fg_req_t *req, const char *app, int64_t replicas,
                             const fg_redis_batch_t *b, size_t at) {
    json_t *bounds = scalers_read(req, app, b, at);
    bool ok = true;
    const char *name;
    json_t *sum;
    json_object_foreach(bounds, name, sum) {
        int64_t lo = rd_int(sum, "min", 0), hi = rd_int(sum, "max", 0);
        size_t n = json_array_size(json_object_get(sum, "clusters"));
        if (ok && (replicas < lo || replicas > hi)) {
            fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                             "app %s is autoscaled by scaler %s between %lld and %lld replicas "
                             "(over %zu clusters): %lld is outside those bounds, and the scaler "
                             "would undo it; change the scaler's minReplicas/maxReplicas or "
                             "delete it first",
                             app, name, (long long)lo, (long long)hi, n, (long long)replicas);
            ok = false;
        }
    }
    json_decref(bounds);
    return ok;
}

/* ---- the scaler writes ----------------------------------------------------------------------
 *
 * A scaler is one HorizontalPodAutoscaler (autoscaling/v2) per cluster holding the app's
 * Deployment, named as the scaler, with the scaler's minReplicas and maxReplicas divided evenly
 * over those clusters (largest remainders, so the sums are the spec's and the app as a whole
 * stays within them), the CPU and memory utilization targets as Resource metrics and the
 * cool-down windows as behavior.scaleUp/scaleDown.stabilizationWindowSeconds. The spec as
 * accepted is kept in fleetgate.io/spec on every HPA. Writing a scaler (create, PUT, PATCH) and
 * moving its app (sc_follow, after an app's placement changed) put the HPAs where the app's
 * Deployments are: POST where one is missing, PUT where it is, DELETE where the app left. */

#define SCALERS "horizontalpodautoscalers"

static const char *const sc_members[] = {"name",    "project",   "labels",    "spec",     "status",
                                         "version", "createdAt", "updatedAt", "outcomes", NULL};
static const char *const sc_required[] = {"name", "spec", NULL};
static const char *const sc_spec_members[] = {"app",      "minReplicas", "maxReplicas", "targets",
                                              "cooldown", "schedules",   NULL};
static const char *const sc_spec_required[] = {"app", "minReplicas", "maxReplicas", "targets",
                                               NULL};
static const char *const target_members[] = {"cpuUtilization", "memoryUtilization", NULL};
static const char *const cooldown_members[] = {"scaleUpSeconds", "scaleDownSeconds", NULL};

void sc_validate(vd_t *v, const json_t *sc) {
    char p[VD_PTR_MAX];
    if (!vd_object(v, sc, "", sc_members, sc_required))
        return;
    vd_dns_label(v, json_object_get(sc, "name"), "/name", 63);
    vd_labels(v, json_object_get(sc, "labels"), "/labels");
    const json_t *spec = json_object_get(sc, "spec");
    if (spec == NULL || !vd_object(v, spec, "/spec", sc_spec_members, sc_spec_required))
        return;
    vd_dns_label(v, json_object_get(spec, "app"), "/spec/app", 63);
    const json_t *lo = json_object_get(spec, "minReplicas"),
                 *hi = json_object_get(spec, "maxReplicas");
    if (vd_int(v, lo, "/spec/minReplicas", 0, 1000) &&
        vd_int(v, hi, "/spec/maxReplicas", 1, 1000) && lo && hi &&
        json_integer_value(lo) > json_integer_value(hi))
        vd_add(v, "/spec/minReplicas", "must not be above maxReplicas (%lld > %lld)",
               (long long)json_integer_value(lo), (long long)json_integer_value(hi));
    const json_t *t = json_object_get(spec, "targets");
    if (t && vd_object(v, t, "/spec/targets", target_members, NULL)) {
        if (json_object_size(t) == 0)
            vd_add(v, "/spec/targets", "needs at least one of cpuUtilization, memoryUtilization");
        for (size_t i = 0; target_members[i]; i++)
            vd_int(v, json_object_get(t, target_members[i]),
                   vd_ptr(p, "/spec/targets", target_members[i]), 1, 100);
    }
    const json_t *c = json_object_get(spec, "cooldown");
    if (c && vd_object(v, c, "/spec/cooldown", cooldown_members, NULL))
        for (size_t i = 0; cooldown_members[i]; i++)
            vd_int(v, json_object_get(c, cooldown_members[i]),
                   vd_ptr(p, "/spec/cooldown", cooldown_members[i]), 0, 3600);
    const json_t *s = json_object_get(spec, "schedules");
    if (s && (!json_is_array(s) || json_array_size(s) > 0))
        vd_add(v, "/spec/schedules",
               "scheduled bounds are not supported by this fleetgate yet (send none or [])");
}

/* The HPA of one cluster's share (a new reference). */
static json_t *sc_hpa(const json_t *sc, const char *project, int64_t lo, int64_t hi,
                      json_t *annotations) {
    const json_t *spec = json_object_get(sc, "spec"), *t = json_object_get(spec, "targets"),
                 *c = json_object_get(spec, "cooldown");
    json_t *labels = json_is_object(json_object_get(sc, "labels"))
                         ? json_deep_copy(json_object_get(sc, "labels"))
                         : json_object();
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("fleetgate"));
    json_t *metrics = json_array();
    static const char *const res[] = {"cpu", "memory"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(t, target_members[i]))
            json_array_append_new(
                metrics, json_pack("{s:s,s:{s:s,s:{s:s,s:O}}}", "type", "Resource", "resource",
                                   "name", res[i], "target", "type", "Utilization",
                                   "averageUtilization", json_object_get(t, target_members[i])));
    const json_t *up = json_object_get(c, "scaleUpSeconds"),
                 *down = json_object_get(c, "scaleDownSeconds");
    json_t *behavior = json_pack("{s:{s:I},s:{s:I}}", "scaleUp", "stabilizationWindowSeconds",
                                 (json_int_t)(up ? json_integer_value(up) : 0), "scaleDown",
                                 "stabilizationWindowSeconds",
                                 (json_int_t)(down ? json_integer_value(down) : 300));
    return json_pack("{s:s,s:s,s:{s:O,s:s,s:o,s:O},s:{s:{s:s,s:s,s:O},s:I,s:I,s:o,s:o}}",
                     "apiVersion", "autoscaling/v2", "kind", "HorizontalPodAutoscaler", "metadata",
                     "name", json_object_get(sc, "name"), "namespace", project, "labels", labels,
                     "annotations", annotations, "spec", "scaleTargetRef", "apiVersion", "apps/v1",
                     "kind", "Deployment", "name", json_object_get(spec, "app"), "minReplicas",
                     (json_int_t)lo, "maxReplicas", (json_int_t)hi, "metrics", metrics, "behavior",
                     behavior);
}

static int reply_scaler(fg_req_t *req, const char *project, const char *name, unsigned status,
                        json_t *outcomes) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found = 0;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "scaler", SCALERS, project, name, NULL, objs, &found) ||
        found == 0) {
        json_decref(outcomes);
        return found == 0
                   ? fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                      "scaler %s was written but is not in the cache yet", name)
                   : FG_OK;
    }
    json_t *o = rd_present_scaler(&c, objs);
    rd_objs_free(objs, c.nparts);
    json_object_set_new(o, "outcomes", outcomes);
    char version[80], location[256];
    snprintf(version, sizeof version, "%s", rd_str(o, "version"));
    snprintf(location, sizeof location, "/v1/projects/%s/scalers/%s", project, name);
    return wr_reply(req, status, o, version, status == 201 ? location : NULL);
}

/* The clusters holding app's Deployments (configuration order), their number into *n; false
 * when it replied 503. */
static bool app_clusters_or_reply(fg_req_t *req, const char *project, const char *app,
                                  const char **out, size_t *n) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    *n = 0;
    if (!rd_get_or_reply(&c, req, "app", "deployments", project, app, NULL, objs, &found))
        return false;
    for (size_t i = 0; i < c.nparts; i++)
        if (objs[i])
            out[(*n)++] = c.parts[i].conf->name;
    rd_objs_free(objs, c.nparts);
    return true;
}

/* The HPA writes that put scaler sc (valid) in the n clusters at[] where its app is: POST where
 * live[] (its HPAs as the clusters lw names answered, NULL objects where none) has none, PUT
 * (with the resourceVersion read) where it has one, DELETE where the app is no more. The bodies
 * carry annotations ann. Shared by the scaler's own writes and by the app reconciler's moves. */
typedef struct {
    char coll[256], one[400];
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    json_t *bodies[FG_FED_MAX_CLUSTERS];
    size_t n, nbodies;
} sc_plan_t;

static void sc_plan(sc_plan_t *pl, const char *project, const json_t *sc, const char *const *at,
                    size_t n, const fg_fed_write_t *lw, const fg_fed_outcome_t *live, size_t nlive,
                    json_t *ann) {
    const json_t *spec = json_object_get(sc, "spec");
    const char *name = json_string_value(json_object_get(sc, "name"));
    int64_t lo = json_integer_value(json_object_get(spec, "minReplicas")),
            hi = json_integer_value(json_object_get(spec, "maxReplicas"));
    int64_t w[FG_FED_MAX_CLUSTERS], los[FG_FED_MAX_CLUSTERS], his[FG_FED_MAX_CLUSTERS];
    for (size_t i = 0; i < n; i++)
        w[i] = 1;
    js_split(lo, w, n, (int64_t)n, los);
    js_split(hi, w, n, (int64_t)n, his);
    snprintf(pl->coll, sizeof pl->coll, "/apis/autoscaling/v2/namespaces/%s/%s", project, SCALERS);
    snprintf(pl->one, sizeof pl->one, "%s/%s", pl->coll, name);
    pl->n = pl->nbodies = 0;
    for (size_t i = 0; i < n; i++) { /* the app's clusters: POST or PUT */
        const json_t *cur = NULL;
        for (size_t l = 0; l < nlive; l++)
            if (strcmp(lw[l].cluster, at[i]) == 0)
                cur = live[l].object;
        json_t *b = pl->bodies[pl->nbodies++] = sc_hpa(sc, project, los[i], his[i], ann);
        if (cur)
            json_object_set(json_object_get(b, "metadata"), "resourceVersion",
                            json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        pl->w[pl->n++] = (fg_fed_write_t){.cluster = at[i],
                                          .method = cur ? FG_KUBE_PUT : FG_KUBE_POST,
                                          .path = cur ? pl->one : pl->coll,
                                          .body = b};
    }
    for (size_t l = 0; l < nlive && pl->n < FG_FED_MAX_CLUSTERS; l++) { /* the app left: DELETE */
        bool kept = false;
        for (size_t i = 0; i < n; i++)
            kept = kept || strcmp(lw[l].cluster, at[i]) == 0;
        if (!kept && live[l].object)
            pl->w[pl->n++] = (fg_fed_write_t){.cluster = lw[l].cluster,
                                              .method = FG_KUBE_DELETE,
                                              .path = pl->one,
                                              .absent_ok = true};
    }
}

static void sc_plan_free(sc_plan_t *pl) {
    for (size_t i = 0; i < pl->nbodies; i++)
        json_decref(pl->bodies[i]);
}

/* Why scaler sc cannot be put over n clusters of its app (into v): no app, or fewer minReplicas
 * than clusters (a HorizontalPodAutoscaler does not scale to zero). */
static void sc_fits(vd_t *v, const json_t *sc, const char *project, size_t n) {
    const json_t *spec = json_object_get(sc, "spec");
    const char *app = json_string_value(json_object_get(spec, "app"));
    if (n == 0)
        vd_add(v, "/spec/app", "no app %s in project %s", app, project);
    else if (json_integer_value(json_object_get(spec, "minReplicas")) < (int64_t)n)
        vd_add(v, "/spec/minReplicas",
               "must be at least %zu: one replica in each of app %s's %zu clusters (a "
               "HorizontalPodAutoscaler does not scale to zero)",
               n, app, n);
}

/* Writes scaler sc (valid) over its app's clusters now: live[] are its HPAs as their clusters
 * answered (NULL objects where none), in the order of the clusters lw names. Answers (status)
 * when reply is set; otherwise only logs a failure. */
static int apply_scaler(fg_req_t *req, const char *project, const json_t *sc,
                        const fg_fed_write_t *lw, const fg_fed_outcome_t *live, size_t nlive,
                        unsigned status, bool reply) {
    const json_t *spec = json_object_get(sc, "spec");
    const char *name = json_string_value(json_object_get(sc, "name")),
               *app = json_string_value(json_object_get(spec, "app"));
    const char *at[FG_FED_MAX_CLUSTERS];
    size_t n;
    if (!app_clusters_or_reply(req, project, app, at, &n))
        return FG_OK;
    vd_t v;
    vd_init(&v);
    sc_fits(&v, sc, project, n);
    if (!vd_ok(&v)) {
        int rc = reply ? vd_reply(req, &v) : FG_OK;
        vd_free(&v);
        return rc;
    }
    vd_free(&v);
    json_t *ann = json_object();
    char *text = fg_json_dumps(spec, NULL);
    json_object_set_new(ann, "fleetgate.io/spec", json_string(text));
    free(text);
    wr_stamp(req, ann);
    sc_plan_t pl;
    sc_plan(&pl, project, sc, at, n, lw, live, nlive, ann);
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    int rc = FG_OK;
    fg_api_t *api = fg_req_app(req);
    memset(o, 0, sizeof o);
    if (!reply) {
        if (fg_fed_write_all(api->fed, pl.w, pl.n, WR_CLUSTER_DEADLINE_MS, o) > 0)
            FG_LOG(FG_LOG_ERROR, fg_req_id(req),
                   "scaler %s did not follow app %s into every cluster", name, app);
    } else if (wr_fanout_or_reply(req, pl.w, pl.n, o)) {
        wr_wait_applied(req, pl.w, o, pl.n, "scaler", SCALERS, project, name, false);
        rc = reply_scaler(req, project, name, status, fg_fed_outcomes_json(pl.w, o, pl.n));
    }
    fg_fed_outcomes_clear(o, pl.n);
    sc_plan_free(&pl);
    json_decref(ann);
    return rc;
}

/* The scaler's HPAs as the cache holds them; 404 when there are none, 412 on If-Match. */
typedef struct {
    rd_ctx_t c;
    json_t *objs[RD_MAX_CLUSTERS];
    const char *project, *name;
    char path[256];
} scaler_t;

static bool scaler_or_reply(fg_req_t *req, scaler_t *s) {
    size_t found;
    s->project = fg_req_param(req, "project");
    s->name = fg_req_param(req, "scaler");
    if (!rd_get_or_reply(&s->c, req, "scaler", SCALERS, s->project, s->name, NULL, s->objs, &found))
        return false;
    snprintf(s->path, sizeof s->path, "/apis/autoscaling/v2/namespaces/%s/%s/%s", s->project,
             SCALERS, s->name);
    if (found == 0) {
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no scaler %s in project %s", s->name,
                         s->project);
        rd_objs_free(s->objs, s->c.nparts);
        return false;
    }
    json_t *cur = rd_present_scaler(&s->c, s->objs);
    bool ok = wr_if_match_or_reply(req, rd_str(cur, "version"));
    json_decref(cur);
    if (!ok)
        rd_objs_free(s->objs, s->c.nparts);
    return ok;
}

static size_t scaler_writes(const scaler_t *s, fg_kube_method_t m, fg_fed_write_t *w) {
    size_t n = 0;
    for (size_t i = 0; i < s->c.nparts; i++)
        if (s->objs[i])
            w[n++] = (fg_fed_write_t){.cluster = s->c.parts[i].conf->name,
                                      .method = m,
                                      .path = s->path,
                                      .absent_ok = m == FG_KUBE_DELETE};
    return n;
}

int fg_api_create_scaler(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    const json_t *sc = fg_req_json(req);
    vd_t v;
    vd_init(&v);
    sc_validate(&v, sc);
    if (!vd_ok(&v)) {
        int rc = vd_reply(req, &v);
        vd_free(&v);
        return rc;
    }
    vd_free(&v);
    const char *name = json_string_value(json_object_get(sc, "name"));
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "scaler", SCALERS, project, name, NULL, objs, &found))
        return FG_OK;
    rd_objs_free(objs, c.nparts);
    if (found > 0)
        return fg_reply_problem(req, FG_PROBLEM_CONFLICT, "scaler %s exists already in project %s",
                                name, project);
    char what[200];
    snprintf(what, sizeof what, "create HorizontalPodAutoscaler %s/%s for app %s", project, name,
             json_string_value(json_object_get(json_object_get(sc, "spec"), "app")));
    if (!wr_audit_or_reply(req, what))
        return FG_OK;
    return apply_scaler(req, project, sc, NULL, NULL, 0, 201, true);
}

/* The scaler as last accepted ({name, labels, spec} from fleetgate.io/spec on a live HPA), or
 * NULL (a new reference). */
static json_t *scaler_accepted(const char *name, const fg_fed_outcome_t *live, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const json_t *meta = json_object_get(live[i].object, "metadata");
        const char *s = json_string_value(
            json_object_get(json_object_get(meta, "annotations"), "fleetgate.io/spec"));
        json_t *spec = NULL;
        if (s == NULL || fg_json_load(s, strlen(s), &spec, NULL, 0) != FG_OK ||
            !json_is_object(spec)) {
            json_decref(spec);
            continue;
        }
        json_t *cur = json_pack("{s:s,s:o}", "name", name, "spec", spec);
        json_t *labels = json_deep_copy(json_object_get(meta, "labels"));
        json_object_del(labels, "app.kubernetes.io/managed-by");
        if (json_object_size(labels))
            json_object_set(cur, "labels", labels);
        json_decref(labels);
        return cur;
    }
    return NULL;
}

static int change_scaler(fg_req_t *req, bool merge) {
    scaler_t s;
    if (!scaler_or_reply(req, &s))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
    size_t n = scaler_writes(&s, FG_KUBE_GET, w);
    json_t *cur = NULL, *next = NULL;
    int rc = FG_OK;
    vd_t v;
    vd_init(&v);
    memset(live, 0, sizeof live);
    if (!wr_fanout_or_reply(req, w, n, live))
        goto out;
    cur = scaler_accepted(s.name, live, n);
    if (cur == NULL) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                              "scaler %s was not made by fleetgate (no fleetgate.io/spec): it "
                              "cannot be replaced or patched here",
                              s.name);
        goto out;
    }
    next = merge ? fg_json_merge_patch(cur, fg_req_json(req)) : json_incref(fg_req_json(req));
    sc_validate(&v, next);
    if (vd_ok(&v) && strcmp(json_string_value(json_object_get(next, "name")), s.name) != 0)
        vd_add(&v, "/name", "must be the scaler's name, %s (a scaler cannot be renamed)", s.name);
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    if (wr_audit_or_reply(req, "replace the scaler's HorizontalPodAutoscalers"))
        rc = apply_scaler(req, s.project, next, w, live, n, 200, true);
out:
    vd_free(&v);
    fg_fed_outcomes_clear(live, n);
    json_decref(cur);
    json_decref(next);
    rd_objs_free(s.objs, s.c.nparts);
    return rc;
}

int fg_api_replace_scaler(fg_req_t *req) {
    return change_scaler(req, false);
}

int fg_api_patch_scaler(fg_req_t *req) {
    return change_scaler(req, true);
}

int fg_api_delete_scaler(fg_req_t *req) {
    scaler_t s;
    if (!scaler_or_reply(req, &s))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = scaler_writes(&s, FG_KUBE_DELETE, w);
    int rc = FG_OK;
    memset(o, 0, sizeof o);
    if (wr_audit_or_reply(req, "delete the scaler's HorizontalPodAutoscalers") &&
        wr_fanout_or_reply(req, w, n, o)) {
        wr_wait_applied(req, w, o, n, "scaler", SCALERS, s.project, s.name, true);
        rc = fg_reply_static(req, 204, "application/json", "", 0);
    }
    fg_fed_outcomes_clear(o, n);
    rd_objs_free(s.objs, s.c.nparts);
    return rc;
}

void sc_follow(fg_req_t *req, const char *project, const char *app) {
    json_t *scalers = scalers_of(req, project, app);
    const char *name;
    json_t *sum;
    json_object_foreach(scalers, name, sum) {
        fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
        fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
        char path[256];
        size_t n = 0, i;
        json_t *cl;
        snprintf(path, sizeof path, "/apis/autoscaling/v2/namespaces/%s/%s/%s", project, SCALERS,
                 name);
        json_array_foreach(json_object_get(sum, "clusters"), i, cl) {
            if (n < FG_FED_MAX_CLUSTERS)
                w[n++] = (fg_fed_write_t){
                    .cluster = json_string_value(cl), .method = FG_KUBE_GET, .path = path};
        }
        fg_api_t *api = fg_req_app(req);
        memset(live, 0, sizeof live);
        fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, live);
        json_t *sc = scaler_accepted(name, live, n);
        if (sc)
            apply_scaler(req, project, sc, w, live, n, 0, false);
        json_decref(sc);
        fg_fed_outcomes_clear(live, n);
    }
    json_decref(scalers);
}

int sc_follow_at(fg_api_t *api, const char *project, const char *name, const char *const *have,
                 size_t nhave, const char *const *at, size_t n, const char *who) {
    fg_fed_write_t lw[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS], o[FG_FED_MAX_CLUSTERS];
    char path[256];
    snprintf(path, sizeof path, "/apis/autoscaling/v2/namespaces/%s/%s/%s", project, SCALERS, name);
    size_t nl = 0;
    for (size_t i = 0; i < nhave && nl < FG_FED_MAX_CLUSTERS; i++)
        lw[nl++] = (fg_fed_write_t){.cluster = have[i], .method = FG_KUBE_GET, .path = path};
    memset(live, 0, sizeof live);
    memset(o, 0, sizeof o);
    fg_fed_write_all(api->fed, lw, nl, WR_CLUSTER_DEADLINE_MS, live);
    json_t *sc = scaler_accepted(name, live, nl);
    int failed = -1;
    vd_t v;
    vd_init(&v);
    if (sc)
        sc_fits(&v, sc, project, n);
    if (sc == NULL || !vd_ok(&v)) {
        /* not fleetgate's (no accepted spec read), or it cannot be divided over the app's new
         * clusters: left as it is, said in the log */
        FG_LOG(FG_LOG_WARN, NULL, "%s: scaler %s/%s cannot follow its app over %zu clusters: %s",
               who, project, name, n,
               sc ? json_string_value(json_object_get(json_array_get(v.errors, 0), "detail"))
                  : "its spec (fleetgate.io/spec) could not be read from any cluster");
    } else {
        json_t *ann = json_object();
        char *text = fg_json_dumps(json_object_get(sc, "spec"), NULL);
        json_object_set_new(ann, "fleetgate.io/spec", json_string(text));
        json_object_set_new(ann, "fleetgate.io/requested-by", json_string(who));
        json_object_set_new(ann, "fleetgate.io/request-id", json_string(who));
        free(text);
        sc_plan_t pl;
        sc_plan(&pl, project, sc, at, n, lw, live, nl, ann);
        failed = (int)fg_fed_write_all(api->fed, pl.w, pl.n, WR_CLUSTER_DEADLINE_MS, o);
        bool shown[FG_FED_MAX_CLUSTERS];
        fg_fed_write_through(api->fed, pl.w, o, pl.n, shown);
        char what[512];
        bool timed_out;
        fg_fed_outcomes_summary(pl.w, o, pl.n, what, sizeof what, &timed_out);
        FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
               "%s: scaler %s/%s follows its app into %zu clusters: %zu writes, %zu applied%s%s",
               who, project, name, n, pl.n, pl.n - (size_t)failed, failed ? "; " : "",
               failed ? what : "");
        fg_fed_outcomes_clear(o, pl.n);
        sc_plan_free(&pl);
        json_decref(ann);
    }
    vd_free(&v);
    json_decref(sc);
    fg_fed_outcomes_clear(live, nl);
    return failed;
}
