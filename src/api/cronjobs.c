/* api/cronjobs.c: cron jobs through the write path apps and job sets take (writes.h,
 * workload.h): create, replace and merge patch (If-Match), delete, suspend, resume, and trigger.
 *
 * A cron job is one CronJob per cluster its job template's placement picks, each with that
 * cluster's share of the template's completions and parallelism (as a job set's), the same
 * schedule, and labelled fleetgate.io/cronjob. Each cluster's cronjob controller starts its
 * share of a run at the scheduled minute under the same name (<cron job>-<minute>), so a run is
 * one job set over those clusters. The spec as accepted is kept in fleetgate.io/spec on every
 * CronJob: replace and patch start from it.
 *
 * A trigger starts one run now: a Job in every cluster holding the cron job, made from that
 * cluster's job template and owned by its CronJob (as `kubectl create job --from=cronjob/x`),
 * named <cron job>-<10 characters: the time in ms and two of the request's id, base 36>, so two
 * triggers in the same second are two runs, not one; it is charged to the tier's quota as a job
 * set, and the concurrency policy applies (Forbid: 409 while a run is in progress; Replace: the
 * running ones are deleted first).
 */
#include "jobspec.h"
#include "workload.h"
#include "writes.h"

#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CRONJOBS "cronjobs"

/* The configuration (its sidecar catalogue). */
static const fg_config_t *cfg_of(fg_req_t *req) {
    return api_live_cfg(req); /* the catalogue as the request found it (SIGHUP may change it) */
}
/* ---- reading what is there ------------------------------------------------------------- */

static int reply_cronjob(fg_req_t *req, const char *project, const char *name, unsigned status,
                         json_t *placement, json_t *outcomes) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found = 0;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "cronjob", CRONJOBS, project, name, NULL, objs, &found) ||
        found == 0) {
        json_decref(placement);
        json_decref(outcomes);
        return found == 0
                   ? fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                      "cron job %s was written but is not in the cache yet", name)
                   : FG_OK;
    }
    json_t *o = rd_present_cronjob(&c, objs);
    rd_objs_free(objs, c.nparts);
    if (placement)
        json_object_set_new(o, "placement", placement);
    json_object_set_new(o, "outcomes", outcomes);
    char version[80], location[256];
    snprintf(version, sizeof version, "%s", rd_str(o, "version"));
    snprintf(location, sizeof location, "/v1/projects/%s/cronjobs/%s", project, name);
    return wr_reply(req, status, o, version, status == 201 ? location : NULL);
}

/* A cron job's CronJobs as the cache holds them; 404 when there are none, 412 on If-Match. */
typedef struct {
    rd_ctx_t c;
    json_t *objs[RD_MAX_CLUSTERS];
    const char *project, *name;
    char path[256], coll[256];
} cron_t;

static bool cron_or_reply(fg_req_t *req, cron_t *j) {
    size_t found;
    j->project = fg_req_param(req, "project");
    j->name = fg_req_param(req, "cronjob");
    if (!rd_get_or_reply(&j->c, req, "cronjob", CRONJOBS, j->project, j->name, NULL, j->objs,
                         &found))
        return false;
    snprintf(j->coll, sizeof j->coll, "/apis/batch/v1/namespaces/%s/cronjobs", j->project);
    snprintf(j->path, sizeof j->path, "%s/%s", j->coll, j->name);
    if (found == 0) {
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no cron job %s in project %s", j->name,
                         j->project);
        rd_objs_free(j->objs, j->c.nparts);
        return false;
    }
    json_t *cur = rd_present_cronjob(&j->c, j->objs);
    bool ok = wr_if_match_or_reply(req, rd_str(cur, "version"));
    json_decref(cur);
    if (!ok)
        rd_objs_free(j->objs, j->c.nparts);
    return ok;
}

/* One write a holding cluster (path and body shared). */
static size_t cron_writes(const cron_t *j, fg_kube_method_t m, const char *path, const json_t *body,
                          fg_fed_write_t *w) {
    size_t n = 0;
    for (size_t i = 0; i < j->c.nparts; i++)
        if (j->objs[i])
            w[n++] = (fg_fed_write_t){.cluster = j->c.parts[i].conf->name,
                                      .method = m,
                                      .path = path,
                                      .body = body,
                                      .absent_ok = m == FG_KUBE_DELETE};
    return n;
}

/* The annotations of a write: the spec as accepted, the placement, who asked. */
static json_t *cron_annotations(fg_req_t *req, const json_t *spec, const json_t *explain) {
    json_t *a = json_object();
    char *s = fg_json_dumps(spec, NULL), *e = fg_json_dumps(explain, NULL);
    json_object_set_new(a, "fleetgate.io/spec", json_string(s));
    json_object_set_new(a, FG_KUBE_PLACEMENT_ANNOTATION, json_string(e));
    free(s);
    free(e);
    char at[24]; /* which CronJob holds the newest write, when a write reached some only */
    snprintf(at, sizeof at, "%lld", (long long)fg_wall_ms());
    json_object_set_new(a, AS_SPEC_AT_ANN, json_string(at));
    wr_stamp(req, a);
    return a;
}

/* Labels one cluster's CronJob with the number of clusters the write put the cron job in, so
 * the reconciler sees one missing from the cache alone (as apps' AS_SHARDS_LABEL). */
static void cj_mark_shards(json_t *cronjob, size_t shards) {
    char n[24];
    snprintf(n, sizeof n, "%zu", shards);
    json_object_set_new(json_object_get(json_object_get(cronjob, "metadata"), "labels"),
                        AS_SHARDS_LABEL, json_string(n));
}

/* Places the job template (min(parallelism, completions) pods, at least one) over every
 * cluster or those in only; false when it replied. */
static bool place_template_or_reply(fg_req_t *req, const json_t *tmpl, const bool *only,
                                    fg_fed_cluster_t *cl, fg_fed_placement_t *p) {
    int64_t c = js_number(tmpl, JS_COMPLETIONS), par = js_number(tmpl, JS_PARALLELISM);
    int64_t placed = par < c ? par : c;
    return place_or_reply(req, tmpl, placed > 0 ? placed : 1, only, cl, p);
}

/* ---- create ---------------------------------------------------------------------------- */

int fg_api_create_cronjob(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    json_t *cj = fg_req_json(req), *proj = NULL, *explain = NULL, *ann = NULL;
    json_t *objs_new[FG_FED_MAX_CLUSTERS] = {NULL};
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    int rc = FG_OK;
    vd_t v;
    vd_init(&v);
    cj_validate(&v, cj);
    as_validate_sidecars_at(&v, json_object_get(json_object_get(cj, "spec"), "jobTemplate"),
                            cfg_of(req), "/spec/jobTemplate");
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    const char *name = json_string_value(json_object_get(cj, "name"));
    const json_t *spec = json_object_get(cj, "spec"), *tmpl = json_object_get(spec, "jobTemplate");
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    fg_fed_placement_t p;
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    proj = project_or_reply(req, project);
    if (proj == NULL ||
        !rd_get_or_reply(&c, req, "cronjob", CRONJOBS, project, name, NULL, objs, &found))
        goto out;
    rd_objs_free(objs, c.nparts);
    if (found > 0) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT, "cron job %s exists already in project %s",
                              name, project);
        goto out;
    }
    if (!place_template_or_reply(req, tmpl, NULL, placed_over, &p))
        goto out;
    int64_t comp[FG_FED_MAX_CLUSTERS], par[FG_FED_MAX_CLUSTERS], off[FG_FED_MAX_CLUSTERS];
    const char *cluster[FG_FED_MAX_CLUSTERS];
    size_t k = js_shares(tmpl, &p, comp, par, off, cluster);
    char what[192], path[256], one[400];
    snprintf(what, sizeof what, "create CronJob %s/%s in %zu clusters", project, name, k);
    if (!wr_audit_or_reply(req, what))
        goto out;
    explain = fg_fed_explain(&p, fg_wall_ms());
    ann = cron_annotations(req, spec, explain);
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/cronjobs", project);
    for (n = 0; n < k; n++) {
        objs_new[n] = cj_cronjob(cj, project, comp[n], par[n], off[n], ann, cfg_of(req));
        cj_mark_shards(objs_new[n], k);
        w[n] = (fg_fed_write_t){
            .cluster = cluster[n], .method = FG_KUBE_POST, .path = path, .body = objs_new[n]};
    }
    snprintf(one, sizeof one, "%s/%s?propagationPolicy=Background", path, name);
    fg_api_t *api = fg_req_app(req);
    if (fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o) > 0) {
        js_roll_back(req, w, o, n, one);
        wr_reply_failure(req, w, o, n, "; the clusters that created it deleted it again");
        goto out;
    }
    wr_wait_applied(req, w, o, n, "cronjob", CRONJOBS, project, name, false);
    rc =
        reply_cronjob(req, project, name, 201, json_incref(explain), fg_fed_outcomes_json(w, o, n));
out:
    fg_fed_outcomes_clear(o, n);
    for (size_t i = 0; i < n; i++)
        json_decref(objs_new[i]);
    vd_free(&v);
    json_decref(proj);
    json_decref(explain);
    json_decref(ann);
    return rc;
}

/* ---- replace and patch ----------------------------------------------------------------- */

/* The cron job as last accepted: {name, labels, spec} from fleetgate.io/spec on its live
 * CronJobs (a new reference), or NULL when none carries one (not made by fleetgate). */
static json_t *accepted(const cron_t *j, const fg_fed_outcome_t *live, size_t n) {
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
        json_t *cur = json_pack("{s:s,s:o}", "name", j->name, "spec", spec);
        json_t *labels = json_deep_copy(json_object_get(meta, "labels"));
        if (json_is_object(labels)) {
            const char *k;
            json_t *val;
            void *tmp;
            json_object_foreach_safe(labels, tmp, k, val) {
                if (strncmp(k, "fleetgate.io/", 13) == 0 ||
                    strcmp(k, "app.kubernetes.io/managed-by") == 0)
                    json_object_del(labels, k);
            }
            if (json_object_size(labels))
                json_object_set(cur, "labels", labels);
        }
        json_decref(labels);
        return cur;
    }
    return NULL;
}

/* Writes next (valid, same name) over the clusters: placed afresh when the template's placement
 * changed, else over the clusters holding it; PUT where kept (with the live resourceVersion),
 * POST where newly chosen, DELETE where dropped. */
static int replace_with(fg_req_t *req, cron_t *j, const json_t *next, const json_t *prev,
                        const fg_fed_write_t *lw, const fg_fed_outcome_t *live, size_t nlive) {
    const json_t *spec = json_object_get(next, "spec"),
                 *tmpl = json_object_get(spec, "jobTemplate");
    const json_t *old_pl =
        json_object_get(json_object_get(json_object_get(prev, "spec"), "jobTemplate"), "placement");
    bool stay = json_equal(json_object_get(tmpl, "placement"), old_pl) ||
                (json_object_get(tmpl, "placement") == NULL && old_pl == NULL);
    bool only[FG_FED_MAX_CLUSTERS] = {false};
    fg_api_t *api = fg_req_app(req);
    for (size_t i = 0; i < api->cfg->nclusters && i < FG_FED_MAX_CLUSTERS; i++) {
        const rd_part_t *part = rd_part(&j->c, api->cfg->clusters[i].name);
        only[i] = part && j->objs[part - j->c.parts] != NULL;
    }
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL}, *explain = NULL, *ann = NULL;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    fg_fed_placement_t p;
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    int rc = FG_OK;
    char del[300];
    snprintf(del, sizeof del, "%s?propagationPolicy=Background", j->path);
    if (!place_template_or_reply(req, tmpl, stay ? only : NULL, placed_over, &p) ||
        !wr_audit_or_reply(req, "replace the cron job's CronJobs"))
        return FG_OK;
    int64_t comp[FG_FED_MAX_CLUSTERS], par[FG_FED_MAX_CLUSTERS], off[FG_FED_MAX_CLUSTERS];
    const char *cluster[FG_FED_MAX_CLUSTERS];
    size_t k = js_shares(tmpl, &p, comp, par, off, cluster);
    explain = fg_fed_explain(&p, fg_wall_ms());
    ann = cron_annotations(req, spec, explain);
    for (size_t i = 0; i < j->c.nparts; i++) { /* every cluster chosen or holding it */
        const char *name = j->c.parts[i].conf->name;
        size_t s = 0;
        while (s < k && strcmp(cluster[s], name) != 0)
            s++;
        bool holds = j->objs[i] != NULL;
        if (s == k && !holds)
            continue;
        w[n] = (fg_fed_write_t){.cluster = name, .path = j->path};
        if (s < k) {
            bodies[n] = cj_cronjob(next, j->project, comp[s], par[s], off[s], ann, cfg_of(req));
            cj_mark_shards(bodies[n], k);
            w[n].body = bodies[n];
            w[n].method = holds ? FG_KUBE_PUT : FG_KUBE_POST;
            w[n].path = holds ? j->path : j->coll;
            for (size_t l = 0; holds && l < nlive; l++) /* the version replaced */
                if (strcmp(lw[l].cluster, name) == 0)
                    json_object_set(json_object_get(bodies[n], "metadata"), "resourceVersion",
                                    json_object_get(json_object_get(live[l].object, "metadata"),
                                                    "resourceVersion"));
        } else {
            w[n].method = FG_KUBE_DELETE;
            w[n].path = del;
            w[n].absent_ok = true;
        }
        n++;
    }
    if (wr_fanout_or_reply(req, w, n, o)) {
        wr_wait_applied(req, w, o, n, "cronjob", CRONJOBS, j->project, j->name, false);
        rc = reply_cronjob(req, j->project, j->name, 200, NULL, fg_fed_outcomes_json(w, o, n));
    }
    fg_fed_outcomes_clear(o, n);
    for (size_t i = 0; i < n; i++)
        json_decref(bodies[i]);
    json_decref(explain);
    json_decref(ann);
    return rc;
}

/* PUT takes the body as the new cron job; PATCH merges the body into the cron job as last
 * accepted. Both start from the live CronJobs. */
static int change_cron(fg_req_t *req, bool merge) {
    cron_t j;
    if (!cron_or_reply(req, &j))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS];
    size_t n = cron_writes(&j, FG_KUBE_GET, j.path, NULL, w);
    json_t *cur = NULL, *next = NULL;
    int rc = FG_OK;
    vd_t v;
    vd_init(&v);
    memset(live, 0, sizeof live);
    if (!wr_fanout_or_reply(req, w, n, live))
        goto out;
    cur = accepted(&j, live, n);
    if (cur == NULL) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                              "cron job %s was not made by fleetgate (no fleetgate.io/spec): it "
                              "cannot be replaced or patched here",
                              j.name);
        goto out;
    }
    next = merge ? fg_json_merge_patch(cur, fg_req_json(req)) : json_incref(fg_req_json(req));
    cj_validate(&v, next);
    as_validate_sidecars_at(&v, json_object_get(json_object_get(next, "spec"), "jobTemplate"),
                            cfg_of(req), "/spec/jobTemplate");
    const char *name = json_string_value(json_object_get(next, "name"));
    if (vd_ok(&v) && strcmp(name, j.name) != 0)
        vd_add(&v, "/name", "must be the cron job's name, %s (a cron job cannot be renamed)",
               j.name);
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    rc = replace_with(req, &j, next, cur, w, live, n);
out:
    vd_free(&v);
    fg_fed_outcomes_clear(live, n);
    json_decref(cur);
    json_decref(next);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

int fg_api_replace_cronjob(fg_req_t *req) {
    return change_cron(req, false);
}

int fg_api_patch_cronjob(fg_req_t *req) {
    return change_cron(req, true);
}

/* ---- delete, suspend, resume ---------------------------------------------------------------- */

int fg_api_delete_cronjob(fg_req_t *req) {
    cron_t j;
    if (!cron_or_reply(req, &j))
        return FG_OK;
    char path[300];
    snprintf(path, sizeof path, "%s?propagationPolicy=Background", j.path);
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    /* marked everywhere first: a delete some cluster then fails is finished by the reconciler,
     * which would otherwise make the deleted ones again */
    json_t *mark = json_pack("{s:{s:{s:s}}}", "metadata", "labels", AS_DELETING_LABEL, "true");
    size_t n = cron_writes(&j, FG_KUBE_PATCH, j.path, mark, w);
    int rc = FG_OK;
    memset(o, 0, sizeof o);
    bool marked = wr_audit_or_reply(req, "delete the cron job's CronJobs and their runs") &&
                  wr_fanout_or_reply(req, w, n, o);
    fg_fed_outcomes_clear(o, n);
    json_decref(mark);
    n = marked ? cron_writes(&j, FG_KUBE_DELETE, path, NULL, w) : 0;
    bool deleted = marked && wr_fanout_or_reply(req, w, n, o);
    if (marked) /* its runs go with it (propagation): their quota is free now */
        js_forget_cron_runs(req, j.project, j.name, o, n);
    if (deleted) {
        wr_wait_applied(req, w, o, n, "cronjob", CRONJOBS, j.project, j.name, true);
        rc = fg_reply_static(req, 204, "application/json", "", 0);
    }
    fg_fed_outcomes_clear(o, n);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

static int set_suspend(fg_req_t *req, bool suspend) {
    cron_t j;
    if (!cron_or_reply(req, &j))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    json_t *patch =
        json_pack("{s:{s:b},s:{s:{}}}", "spec", "suspend", suspend, "metadata", "annotations");
    wr_stamp(req, json_object_get(json_object_get(patch, "metadata"), "annotations"));
    size_t n = cron_writes(&j, FG_KUBE_PATCH, j.path, patch, w);
    int rc = FG_OK;
    memset(o, 0, sizeof o);
    if (wr_audit_or_reply(req, suspend ? "suspend the cron job's CronJobs"
                                       : "resume the cron job's CronJobs") &&
        wr_fanout_or_reply(req, w, n, o)) {
        wr_wait_applied(req, w, o, n, "cronjob", CRONJOBS, j.project, j.name, false);
        rc = reply_cronjob(req, j.project, j.name, 200, NULL, fg_fed_outcomes_json(w, o, n));
    }
    fg_fed_outcomes_clear(o, n);
    json_decref(patch);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

int fg_api_suspend_cronjob(fg_req_t *req) {
    return set_suspend(req, true);
}

int fg_api_resume_cronjob(fg_req_t *req) {
    return set_suspend(req, false);
}

/* ---- trigger ------------------------------------------------------------------------------- */

/* The runs of cron job name in progress (job sets it owns, neither finished): their names into
 * runs (a new array). false when it replied 503. */
static bool runs_in_progress_or_reply(fg_req_t *req, const char *project, const char *name,
                                      json_t **runs) {
    fg_api_t *api = fg_req_app(req);
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "jobset", api->cfg->clusters[i].name, project),
                            NULL);
    bool ok = rd_batch_or_reply(req, api, b);
    json_t *seen = json_object();
    for (size_t i = 0; ok && i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, i);
        for (size_t r = 1; r < fg_redis_reply_len(h); r += 2) {
            json_t *o = rd_parse_object(fg_redis_reply_at(h, r), fg_req_id(req));
            const char *owner = rd_str(o, "cronjob"), *state = rd_str(o, "state"),
                       *run = rd_str(o, "name");
            if (run && owner && strcmp(owner, name) == 0 && state &&
                strcmp(state, "Complete") != 0 && strcmp(state, "Failed") != 0)
                json_object_set_new(seen, run, json_true());
            json_decref(o);
        }
    }
    fg_redis_batch_free(b);
    *runs = json_array();
    const char *run;
    json_t *val;
    json_object_foreach(seen, run, val) json_array_append_new(*runs, json_string(run));
    json_decref(seen);
    return ok;
}

/* "<cron job>-<ms since the epoch, base 36, 8 characters><2 of the request id's hash>". */
static void run_name(fg_req_t *req, const char *cron, char *out, size_t len) {
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    char suffix[11];
    uint64_t ms = (uint64_t)fg_wall_ms(), h = fg_hash64(fg_req_id(req), strlen(fg_req_id(req)), 3);
    for (int i = 7; i >= 0; i--, ms /= 36)
        suffix[i] = digits[ms % 36];
    suffix[8] = digits[h % 36];
    suffix[9] = digits[(h / 36) % 36];
    suffix[10] = '\0';
    snprintf(out, len, "%s-%s", cron, suffix);
}

/* The Job of a run in one cluster, from its live CronJob (a new reference). */
static json_t *run_job(fg_req_t *req, const json_t *cron, const char *project, const char *run) {
    const json_t *tmpl = json_object_get(json_object_get(cron, "spec"), "jobTemplate");
    const json_t *meta = json_object_get(cron, "metadata"),
                 *tmeta = json_object_get(tmpl, "metadata");
    json_t *labels = json_is_object(json_object_get(tmeta, "labels"))
                         ? json_deep_copy(json_object_get(tmeta, "labels"))
                         : json_object();
    json_t *ann = json_is_object(json_object_get(tmeta, "annotations"))
                      ? json_deep_copy(json_object_get(tmeta, "annotations"))
                      : json_object();
    json_object_set_new(labels, JS_LABEL, json_string(run));
    json_object_set_new(ann, "cronjob.kubernetes.io/instantiate", json_string("manual"));
    wr_stamp(req, ann);
    json_t *spec = json_deep_copy(json_object_get(tmpl, "spec"));
    const char *adm = json_string_value(json_object_get(ann, CJ_ADMISSION_ANNOTATION));
    if (adm && strcmp(adm, "quota") == 0) { /* a trigger is charged already: it runs at once */
        json_object_set_new(spec, "suspend", json_false());
        json_object_set_new(ann, CJ_ADMISSION_ANNOTATION, json_string("admitted"));
    }
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:o,s:[{s:s,s:s,s:O,s:O,s:b,s:b}]},s:o}",
                     "apiVersion", "batch/v1", "kind", "Job", "metadata", "name", run, "namespace",
                     project, "labels", labels, "annotations", ann, "ownerReferences", "apiVersion",
                     "batch/v1", "kind", "CronJob", "name", json_object_get(meta, "name"), "uid",
                     json_object_get(meta, "uid"), "controller", 1, "blockOwnerDeletion", 1, "spec",
                     spec);
}

/* The job template's spec as accepted (for the quota: containers, tier), with the live
 * templates' completions and parallelism summed (a new reference). */
static json_t *template_spec(const fg_fed_outcome_t *live, size_t n) {
    json_t *spec = NULL;
    int64_t comp = 0, par = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = live[i].object;
        const json_t *js =
            json_object_get(json_object_get(json_object_get(o, "spec"), "jobTemplate"), "spec");
        comp += json_integer_value(json_object_get(js, "completions"));
        par += json_integer_value(json_object_get(js, "parallelism"));
        const char *s = json_string_value(json_object_get(
            json_object_get(json_object_get(o, "metadata"), "annotations"), "fleetgate.io/spec"));
        json_t *full = NULL;
        if (spec == NULL && s && fg_json_load(s, strlen(s), &full, NULL, 0) == FG_OK &&
            json_is_object(json_object_get(full, "jobTemplate")))
            spec = json_deep_copy(json_object_get(full, "jobTemplate"));
        json_decref(full);
    }
    if (spec == NULL)
        spec = json_pack("{s:[]}", "containers");
    json_object_set_new(spec, "completions", json_integer(comp));
    json_object_set_new(spec, "parallelism", json_integer(par));
    return spec;
}

/* The concurrency policy: Forbid refuses while a run is in progress (409), Replace deletes the
 * runs in progress first. false when it replied. */
static bool concurrency_or_reply(fg_req_t *req, const cron_t *j, const json_t *live_cron) {
    const char *policy =
        json_string_value(json_object_get(json_object_get(live_cron, "spec"), "concurrencyPolicy"));
    json_t *runs = NULL;
    if (policy == NULL || strcmp(policy, "Allow") == 0)
        return true;
    if (!runs_in_progress_or_reply(req, j->project, j->name, &runs))
        return false;
    bool ok = true;
    if (json_array_size(runs) > 0 && strcmp(policy, "Forbid") == 0) {
        char *names = fg_json_dumps(runs, NULL);
        fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                         "cron job %s has a run in progress (%.200s) and its concurrencyPolicy "
                         "is Forbid",
                         j->name, names);
        free(names);
        ok = false;
    }
    for (size_t r = 0; ok && r < json_array_size(runs); r++) { /* Replace */
        char path[400];
        snprintf(path, sizeof path,
                 "/apis/batch/v1/namespaces/%s/jobs/%s?propagationPolicy=Background", j->project,
                 json_string_value(json_array_get(runs, r)));
        fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
        fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
        size_t n = cron_writes(j, FG_KUBE_DELETE, path, NULL, w);
        ok = wr_fanout_or_reply(req, w, n, o);
        fg_fed_outcomes_clear(o, n);
    }
    json_decref(runs);
    return ok;
}

int fg_api_trigger_cronjob(fg_req_t *req) {
    cron_t j;
    if (!cron_or_reply(req, &j))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS], o[FG_FED_MAX_CLUSTERS];
    json_t *jobs[FG_FED_MAX_CLUSTERS] = {NULL}, *tmpl = NULL, *proj = NULL;
    size_t n = cron_writes(&j, FG_KUBE_GET, j.path, NULL, w);
    int rc = FG_OK;
    bool reserved = false;
    char run[96], qname[128], what[256], coll[256], one[400];
    memset(live, 0, sizeof live);
    memset(o, 0, sizeof o);
    run_name(req, j.name, run, sizeof run);
    JS_QUOTA_NAME(qname, run);
    if (!wr_fanout_or_reply(req, w, n, live) || !concurrency_or_reply(req, &j, live[0].object))
        goto out;
    tmpl = template_spec(live, n);
    int64_t comp = json_integer_value(json_object_get(tmpl, "completions")),
            par = json_integer_value(json_object_get(tmpl, "parallelism"));
    proj = project_or_reply(req, j.project);
    if (proj == NULL || !quota_or_reply(req, proj, tmpl, qname, par < comp ? par : comp, true))
        goto out;
    reserved = true;
    snprintf(what, sizeof what, "trigger CronJob %s/%s: create Job %s in %zu clusters", j.project,
             j.name, run, n);
    if (!wr_audit_or_reply(req, what))
        goto out;
    snprintf(coll, sizeof coll, "/apis/batch/v1/namespaces/%s/jobs", j.project);
    for (size_t i = 0; i < n; i++) {
        jobs[i] = run_job(req, live[i].object, j.project, run);
        w[i] = (fg_fed_write_t){
            .cluster = w[i].cluster, .method = FG_KUBE_POST, .path = coll, .body = jobs[i]};
    }
    snprintf(one, sizeof one, "%s/%s?propagationPolicy=Background", coll, run);
    fg_api_t *api = fg_req_app(req);
    if (fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o) > 0) {
        js_roll_back(req, w, o, n, one);
        wr_reply_failure(req, w, o, n, "; the clusters that created it deleted it again");
        goto out;
    }
    wr_wait_applied(req, w, o, n, "jobset", "jobs", j.project, run, false);
    reserved = false; /* js_reply drops it once the cache shows the run */
    rc = js_reply(req, j.project, run, 201, NULL, fg_fed_outcomes_json(w, o, n), tmpl, n);
out:
    if (reserved)
        quota_release(req, j.project, tmpl, qname);
    fg_fed_outcomes_clear(live, n);
    fg_fed_outcomes_clear(o, n);
    for (size_t i = 0; i < n; i++)
        json_decref(jobs[i]);
    json_decref(tmpl);
    json_decref(proj);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

/* ---- the reconciler's repair ----------------------------------------------------------------
 *
 * A cron job whose CronJobs the cache shows in fewer or more clusters than its last write
 * labelled (AS_SHARDS_LABEL), or with different schedules, concurrency policies or time zones
 * in different clusters (one edited by hand), is written again from what its CronJobs carry:
 * the spec as accepted (fleetgate.io/spec) over the clusters its recorded placement chose
 * (fleetgate.io/placement), each with its share. POST where one is missing, PUT (with the
 * resourceVersion read) where one drifted, DELETE where one is left outside the placement. A
 * CronJob's suspend is its own (suspend/resume write it alone): kept as the cluster has it, and
 * a re-made one takes that of the others. */

/* Whether the live CronJob differs from body in what a write of fleetgate sets. */
static bool cron_drifted(const json_t *live, const json_t *body) {
    static const char *const fields[] = {"schedule", "concurrencyPolicy", "timeZone",
                                         "startingDeadlineSeconds", NULL};
    const json_t *ls = json_object_get(live, "spec"), *bs = json_object_get(body, "spec");
    for (size_t i = 0; fields[i]; i++) {
        const json_t *a = json_object_get(ls, fields[i]), *b = json_object_get(bs, fields[i]);
        if ((a == NULL) != (b == NULL) || (a && !json_equal(a, b)))
            return true;
    }
    /* built from another sidecar catalogue than the one the body was (AS_SIDECARS_LABEL) */
    const char *lsc = json_string_value(
                   json_object_get(json_object_get(json_object_get(live, "metadata"), "labels"),
                                   AS_SIDECARS_LABEL)),
               *bsc = json_string_value(
                   json_object_get(json_object_get(json_object_get(body, "metadata"), "labels"),
                                   AS_SIDECARS_LABEL));
    if ((lsc == NULL) != (bsc == NULL) || (lsc && strcmp(lsc, bsc) != 0))
        return true;
    static const char *const numbers[] = {"completions", "parallelism", NULL};
    const json_t *lj = json_object_get(json_object_get(ls, "jobTemplate"), "spec"),
                 *bj = json_object_get(json_object_get(bs, "jobTemplate"), "spec");
    for (size_t i = 0; numbers[i]; i++)
        if (json_integer_value(json_object_get(lj, numbers[i])) !=
            json_integer_value(json_object_get(bj, numbers[i])))
            return true;
    return false;
}

int cj_repair(fg_api_t *api, const fg_config_t *cfg, const char *project, const char *name,
              const char *const *have, size_t nhave, const char *const *up, size_t nup,
              const char *who) {
    cron_t j = {.project = project, .name = name};
    snprintf(j.coll, sizeof j.coll, "/apis/batch/v1/namespaces/%s/cronjobs", project);
    snprintf(j.path, sizeof j.path, "%s/%s", j.coll, name);
    char del[300];
    snprintf(del, sizeof del, "%s?propagationPolicy=Background", j.path);
    fg_fed_write_t lw[FG_FED_MAX_CLUSTERS], w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t live[FG_FED_MAX_CLUSTERS], o[FG_FED_MAX_CLUSTERS];
    json_t *bodies[FG_FED_MAX_CLUSTERS] = {NULL}, *placement = NULL, *ann = NULL;
    size_t nl = 0, n = 0, k = 0, i;
    for (i = 0; i < nhave && nl < FG_FED_MAX_CLUSTERS; i++)
        lw[nl++] = (fg_fed_write_t){.cluster = have[i], .method = FG_KUBE_GET, .path = j.path};
    memset(live, 0, sizeof live);
    memset(o, 0, sizeof o);
    fg_fed_write_all(api->fed, lw, nl, WR_CLUSTER_DEADLINE_MS, live);
    /* the newest write the CronJobs hold (fleetgate.io/spec-at), with its spec and placement */
    const json_t *first = NULL;
    size_t best = 0;
    int64_t best_at = -2;
    for (i = 0; i < nl; i++) {
        const json_t *a =
            json_object_get(json_object_get(live[i].object, "metadata"), "annotations");
        const char *t = json_string_value(json_object_get(a, AS_SPEC_AT_ANN));
        int64_t at = -1;
        if (t == NULL || fg_parse_int64(t, strlen(t), 0, INT64_MAX, &at) != FG_OK)
            at = -1;
        if (live[i].object && json_object_get(a, FG_KUBE_PLACEMENT_ANNOTATION) && at > best_at) {
            best = i;
            best_at = at;
            first = live[i].object;
        }
    }
    json_t *cj = first ? accepted(&j, &live[best], 1) : NULL;
    const char *pl = cj ? json_string_value(json_object_get(
                              json_object_get(json_object_get(first, "metadata"), "annotations"),
                              FG_KUBE_PLACEMENT_ANNOTATION))
                        : NULL;
    if (pl == NULL || fg_json_load(pl, strlen(pl), &placement, NULL, 0) != FG_OK ||
        !json_is_array(json_object_get(placement, "clusters"))) {
        FG_LOG(FG_LOG_WARN, NULL,
               "%s: cron job %s/%s not repaired: no CronJob of it could be read with its spec "
               "and placement",
               who, project, name);
        n = 0;
        goto out;
    }
    /* the shares of the recorded placement, as js_shares makes them */
    const json_t *tmpl = json_object_get(json_object_get(cj, "spec"), "jobTemplate");
    const char *chosen[FG_FED_MAX_CLUSTERS];
    int64_t wt[FG_FED_MAX_CLUSTERS], wsum = 0, comp[FG_FED_MAX_CLUSTERS], par[FG_FED_MAX_CLUSTERS],
                                     off[FG_FED_MAX_CLUSTERS];
    json_t *v;
    json_array_foreach(json_object_get(placement, "clusters"), i, v) {
        const char *c = json_string_value(json_object_get(v, "cluster"));
        int64_t r = json_integer_value(json_object_get(v, "replicas"));
        if (c && json_is_true(json_object_get(v, "chosen")) && r > 0 && k < FG_FED_MAX_CLUSTERS) {
            chosen[k] = c;
            wt[k] = r;
            wsum += wt[k++];
        }
    }
    if (k == 0)
        goto out;
    js_split(js_number(tmpl, JS_COMPLETIONS), wt, k, wsum, comp);
    js_split(js_number(tmpl, JS_PARALLELISM), wt, k, wsum, par);
    for (i = 0; i < k; i++)
        off[i] = i == 0 ? 0 : off[i - 1] + comp[i - 1];
    ann = json_object();
    char *text = fg_json_dumps(json_object_get(cj, "spec"), NULL);
    json_object_set_new(ann, "fleetgate.io/spec", json_string(text));
    json_object_set_new(ann, FG_KUBE_PLACEMENT_ANNOTATION, json_string(pl));
    if (best_at >= 0) /* the record's own time: a user's later write stays the newer */
        json_object_set(
            ann, AS_SPEC_AT_ANN,
            json_object_get(json_object_get(json_object_get(first, "metadata"), "annotations"),
                            AS_SPEC_AT_ANN));
    json_object_set_new(ann, "fleetgate.io/requested-by", json_string(who));
    json_object_set_new(ann, "fleetgate.io/request-id", json_string(who));
    free(text);
    const json_t *suspend = json_object_get(json_object_get(first, "spec"), "suspend");
    for (i = 0; i < k; i++) {
        bool reachable = false;
        for (size_t u = 0; u < nup; u++)
            reachable = reachable || strcmp(up[u], chosen[i]) == 0;
        if (!reachable)
            continue; /* back later: the next pass finds it short */
        const json_t *cur = NULL;
        bool held = false;
        for (size_t l = 0; l < nl; l++)
            if (strcmp(lw[l].cluster, chosen[i]) == 0) {
                held = true;
                cur = live[l].object;
            }
        if (held && cur == NULL)
            continue; /* could not be read: next pass */
        json_t *b = cj_cronjob(cj, project, comp[i], par[i], off[i], ann, cfg);
        as_keep_gone_sidecars(b, cur ? cur : first, as_cronjob_template, tmpl, cfg);
        cj_mark_shards(b, k);
        const json_t *own =
            cur ? json_object_get(json_object_get(cur, "spec"), "suspend") : suspend;
        json_object_set_new(json_object_get(b, "spec"), "suspend", json_boolean(json_is_true(own)));
        if (cur && !cron_drifted(cur, b)) {
            json_decref(b);
            continue;
        }
        if (cur)
            json_object_set(json_object_get(b, "metadata"), "resourceVersion",
                            json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        bodies[n] = b;
        w[n++] = (fg_fed_write_t){.cluster = chosen[i],
                                  .method = cur ? FG_KUBE_PUT : FG_KUBE_POST,
                                  .path = cur ? j.path : j.coll,
                                  .body = b,
                                  .exists_ok = cur == NULL};
    }
    for (size_t l = 0; l < nl && n < FG_FED_MAX_CLUSTERS; l++) { /* outside the placement */
        bool kept = false;
        for (i = 0; i < k; i++)
            kept = kept || strcmp(lw[l].cluster, chosen[i]) == 0;
        if (!kept && live[l].object)
            w[n++] = (fg_fed_write_t){
                .cluster = lw[l].cluster, .method = FG_KUBE_DELETE, .path = del, .absent_ok = true};
    }
    if (n > 0) {
        size_t failed = fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o);
        bool shown[FG_FED_MAX_CLUSTERS];
        fg_fed_write_through(api->fed, w, o, n, shown);
        char what[512];
        bool timed_out;
        fg_fed_outcomes_summary(w, o, n, what, sizeof what, &timed_out);
        FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
               "%s: cron job %s/%s repaired over its %zu clusters: %zu writes, %zu applied%s%s",
               who, project, name, k, n, n - failed, failed ? "; " : "", failed ? what : "");
    }
out:
    fg_fed_outcomes_clear(o, n);
    fg_fed_outcomes_clear(live, nl);
    for (i = 0; i < FG_FED_MAX_CLUSTERS; i++)
        json_decref(bodies[i]);
    json_decref(cj);
    json_decref(placement);
    json_decref(ann);
    return (int)n;
}
