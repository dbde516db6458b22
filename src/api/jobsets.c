/* api/jobsets.c: creating, suspending, resuming and deleting job sets (parallel run-to-finish
 * work), through the write path apps take (writes.h, workload.h: placement, tier quotas,
 * audit before apply, fan-out, read your writes, Idempotency-Key).
 *
 * A job set is one Job per chosen cluster, labelled fleetgate.io/jobset. Placement places
 * min(parallelism, completions) pods (at least one); each chosen cluster gets the share of
 * completions and of parallelism in proportion to the pods placed there (largest remainders,
 * so the sums are the spec's). The tier's quota is charged with the pods that run at once
 * (min(parallelism, completions) times the pod's requests) while the job set runs: the write
 * reserves it (the name "jobset/<name>" in fg:q) until the cache shows the Jobs, then the cache
 * counts it for as long as a Job is neither finished nor suspended, so finishing, suspending or
 * deleting frees it. A create that fails in one cluster is deleted again in the others (all or
 * nothing).
 */
#include "jobspec.h"
#include "workload.h"
#include "writes.h"

#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOBS "jobs"

/* The configuration (its sidecar catalogue). */
static const fg_config_t *cfg_of(fg_req_t *req) {
    return api_live_cfg(req); /* the catalogue as the request found it (SIGHUP may change it) */
}

/* Answers the job set as the cache shows it, with the write's placement and outcomes. When
 * the cache shows its Jobs in at least `cached` clusters, the reservation of spec's tier is
 * dropped (spec not NULL): from now on the cache counts the job set. */
int js_reply(fg_req_t *req, const char *project, const char *name, unsigned status,
             json_t *placement, json_t *outcomes, const json_t *spec, size_t cached) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found = 0;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "jobset", JOBS, project, name, NULL, objs, &found) ||
        found == 0) {
        json_decref(placement);
        json_decref(outcomes);
        return found == 0
                   ? fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                      "job set %s was written but is not in the cache yet", name)
                   : FG_OK;
    }
    if (spec && found >= cached) {
        char qname[96];
        JS_QUOTA_NAME(qname, name);
        quota_release(req, project, spec, qname);
    }
    json_t *o = rd_present_jobset(&c, objs);
    rd_objs_free(objs, c.nparts);
    if (placement)
        json_object_set_new(o, "placement", placement);
    json_object_set_new(o, "outcomes", outcomes);
    char version[80], location[256];
    snprintf(version, sizeof version, "%s", rd_str(o, "version"));
    snprintf(location, sizeof location, "/v1/projects/%s/jobsets/%s", project, name);
    return wr_reply(req, status, o, version, status == 201 ? location : NULL);
}

/* Deletes what a failed create made, so a create is all or nothing. */
void js_roll_back(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *o, size_t n,
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

static bool absent_or_reply(fg_req_t *req, const char *project, const char *name) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "jobset", JOBS, project, name, NULL, objs, &found))
        return false;
    rd_objs_free(objs, c.nparts);
    if (found > 0)
        fg_reply_problem(req, FG_PROBLEM_CONFLICT, "job set %s exists already in project %s", name,
                         project);
    return found == 0;
}

/* `?dryRun=true`: the placement, each chosen cluster's share and the job set as sent (200);
 * nothing written, no quota held. */
static int reply_dry_run(fg_req_t *req, const json_t *js, const fg_fed_placement_t *p) {
    const json_t *spec = json_object_get(js, "spec");
    int64_t comp[FG_FED_MAX_CLUSTERS], par[FG_FED_MAX_CLUSTERS], off[FG_FED_MAX_CLUSTERS];
    const char *cluster[FG_FED_MAX_CLUSTERS];
    size_t k = js_shares(spec, p, comp, par, off, cluster);
    json_t *shares = json_array();
    for (size_t i = 0; i < k; i++)
        json_array_append_new(shares,
                              json_pack("{s:s,s:I,s:I,s:I}", "cluster", cluster[i], "completions",
                                        (json_int_t)comp[i], "parallelism", (json_int_t)par[i],
                                        "indexOffset", (json_int_t)off[i]));
    json_t *echo = json_pack("{s:O,s:O}", "name", json_object_get(js, "name"), "spec", spec);
    if (json_object_get(js, "labels"))
        json_object_set(echo, "labels", json_object_get(js, "labels"));
    return fg_reply_json(req, 200,
                         json_pack("{s:b,s:o,s:o,s:o}", "dryRun", 1, "placement",
                                   fg_fed_explain(p, fg_wall_ms()), "shares", shares, "jobSet",
                                   echo));
}

int fg_api_create_jobset(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    json_t *js = fg_req_json(req), *proj = NULL, *explain = NULL, *ann = NULL;
    json_t *jobs[FG_FED_MAX_CLUSTERS] = {NULL};
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    int rc = FG_OK;
    vd_t v;
    vd_init(&v);
    js_validate(&v, js);
    as_validate_sidecars_at(&v, json_object_get(js, "spec"), cfg_of(req), "/spec");
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    const char *name = json_string_value(json_object_get(js, "name"));
    const json_t *spec = json_object_get(js, "spec");
    int64_t completions = js_number(spec, JS_COMPLETIONS),
            parallelism = js_number(spec, JS_PARALLELISM);
    int64_t placed = parallelism < completions ? parallelism : completions;
    bool suspended = json_is_true(json_object_get(spec, "suspend"));
    const char *d = fg_req_query(req, "dryRun");
    bool dry = d && strcmp(d, "true") == 0;
    char qname[96], what[192], path[256], one[400];
    JS_QUOTA_NAME(qname, name);
    fg_fed_placement_t p;
    fg_fed_cluster_t placed_over[FG_FED_MAX_CLUSTERS];
    proj = project_or_reply(req, project);
    if (proj == NULL || !absent_or_reply(req, project, name) ||
        !place_or_reply(req, spec, placed > 0 ? placed : 1, NULL, placed_over, &p) ||
        (!suspended && !quota_or_reply(req, proj, spec, qname, placed, !dry)))
        goto out;
    if (dry) {
        rc = reply_dry_run(req, js, &p);
        goto out;
    }
    int64_t comp[FG_FED_MAX_CLUSTERS], par[FG_FED_MAX_CLUSTERS], off[FG_FED_MAX_CLUSTERS];
    const char *cluster[FG_FED_MAX_CLUSTERS];
    size_t k = js_shares(spec, &p, comp, par, off, cluster);
    snprintf(what, sizeof what, "create Job %s/%s in %zu clusters", project, name, k);
    if (!wr_audit_or_reply(req, what)) {
        quota_release(req, project, spec, qname);
        goto out;
    }
    explain = fg_fed_explain(&p, fg_wall_ms());
    ann = json_object();
    char *s = fg_json_dumps(spec, NULL), *e = fg_json_dumps(explain, NULL);
    json_object_set_new(ann, "fleetgate.io/spec", json_string(s));
    json_object_set_new(ann, FG_KUBE_PLACEMENT_ANNOTATION, json_string(e));
    free(s);
    free(e);
    wr_stamp(req, ann);
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", project);
    for (n = 0; n < k; n++) {
        jobs[n] = js_job(js, project, comp[n], par[n], off[n], ann, cfg_of(req));
        w[n] = (fg_fed_write_t){
            .cluster = cluster[n], .method = FG_KUBE_POST, .path = path, .body = jobs[n]};
    }
    snprintf(one, sizeof one, "%s/%s?propagationPolicy=Background", path, name);
    fg_api_t *api = fg_req_app(req);
    if (fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, o) > 0) {
        js_roll_back(req, w, o, n, one);
        quota_release(req, project, spec, qname);
        wr_reply_failure(req, w, o, n, "; the clusters that created it deleted it again");
        goto out;
    }
    wr_wait_applied(req, w, o, n, "jobset", JOBS, project, name, false);
    rc = js_reply(req, project, name, 201, json_incref(explain), fg_fed_outcomes_json(w, o, n),
                  spec, n);
out:
    fg_fed_outcomes_clear(o, n);
    for (size_t i = 0; i < n; i++)
        json_decref(jobs[i]);
    vd_free(&v);
    json_decref(proj);
    json_decref(explain);
    json_decref(ann);
    return rc;
}

/* ---- changes to a job set that exists ---------------------------------------------------- */

/* A job set's Jobs as the cache holds them; 404 when there are none, 412 on If-Match. */
typedef struct {
    rd_ctx_t c;
    json_t *objs[RD_MAX_CLUSTERS];
    const char *project, *name;
    char path[256];
} jobset_t;

static bool jobset_or_reply(fg_req_t *req, jobset_t *j) {
    size_t found;
    j->project = fg_req_param(req, "project");
    j->name = fg_req_param(req, "jobset");
    if (!rd_get_or_reply(&j->c, req, "jobset", JOBS, j->project, j->name, NULL, j->objs, &found))
        return false;
    snprintf(j->path, sizeof j->path, "/apis/batch/v1/namespaces/%s/jobs/%s", j->project, j->name);
    if (found == 0) {
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no job set %s in project %s", j->name,
                         j->project);
        rd_objs_free(j->objs, j->c.nparts);
        return false;
    }
    json_t *cur = rd_present_jobset(&j->c, j->objs);
    bool ok = wr_if_match_or_reply(req, rd_str(cur, "version"));
    json_decref(cur);
    if (!ok)
        rd_objs_free(j->objs, j->c.nparts);
    return ok;
}

/* One write a holding cluster, with body (may be NULL). */
static size_t jobset_writes(const jobset_t *j, fg_kube_method_t m, const char *path,
                            const json_t *body, fg_fed_write_t *w) {
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

/* The pods a job set runs at once: min(parallelism, completions). */
static int64_t running_at_once(const json_t *spec) {
    int64_t p = json_integer_value(json_object_get(spec, "parallelism")),
            c = json_integer_value(json_object_get(spec, "completions"));
    return p < c ? p : c;
}

/* The job set's spec as the cache shows it, enough for its quota: containers, tier,
 * parallelism over every cluster (a new reference). */
static json_t *cached_spec(const jobset_t *j) {
    json_t *shown = rd_present_jobset(&j->c, j->objs);
    json_t *spec = json_incref(json_object_get(shown, "spec"));
    const char *tier = NULL;
    for (size_t i = 0; i < j->c.nparts && tier == NULL; i++)
        if (j->objs[i])
            tier = rd_str(json_object_get(j->objs[i], "labels"), AS_TIER_LABEL);
    if (tier)
        json_object_set_new(spec, "tier", json_string(tier));
    json_decref(shown);
    return spec;
}

int fg_api_delete_jobset(fg_req_t *req) {
    jobset_t j;
    if (!jobset_or_reply(req, &j))
        return FG_OK;
    char path[300], qname[96];
    snprintf(path, sizeof path, "%s?propagationPolicy=Background", j.path);
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = jobset_writes(&j, FG_KUBE_DELETE, path, NULL, w);
    int rc = FG_OK;
    memset(o, 0, sizeof o);
    if (wr_audit_or_reply(req, "delete the job set's Jobs and their pods")) {
        bool deleted = wr_fanout_or_reply(req, w, n, o);
        json_t *spec = cached_spec(&j);
        JS_QUOTA_NAME(qname, j.name);
        quota_forget(req, j.project, as_tier(spec), qname, o, n);
        json_decref(spec);
        if (deleted) {
            wr_wait_applied(req, w, o, n, "jobset", JOBS, j.project, j.name, true);
            rc = fg_reply_static(req, 204, "application/json", "", 0);
        }
    }
    fg_fed_outcomes_clear(o, n);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

/* Suspend or resume: spec.suspend on every Job. A resume charges the quota again (a suspended
 * job set holds none). */
static int set_suspend(fg_req_t *req, bool suspend) {
    jobset_t j;
    if (!jobset_or_reply(req, &j))
        return FG_OK;
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    json_t *patch =
        json_pack("{s:{s:b},s:{s:{}}}", "spec", "suspend", suspend, "metadata", "annotations");
    wr_stamp(req, json_object_get(json_object_get(patch, "metadata"), "annotations"));
    /* a scheduled cron run is the user's from now on: the reconciler no longer admits it */
    json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "annotations"),
                        CJ_ADMISSION_ANNOTATION, json_null());
    json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "annotations"),
                        CJ_HELD_ANNOTATION, json_null());
    json_t *spec = cached_spec(&j), *proj = NULL;
    size_t n = jobset_writes(&j, FG_KUBE_PATCH, j.path, patch, w);
    int rc = FG_OK;
    char qname[96];
    JS_QUOTA_NAME(qname, j.name);
    memset(o, 0, sizeof o);
    if (!suspend) {
        proj = project_or_reply(req, j.project);
        if (proj == NULL || !quota_or_reply(req, proj, spec, qname, running_at_once(spec), true))
            goto out;
    }
    if (!wr_audit_or_reply(req,
                           suspend ? "suspend the job set's Jobs" : "resume the job set's Jobs"))
        goto release;
    if (!wr_fanout_or_reply(req, w, n, o))
        goto release;
    wr_wait_applied(req, w, o, n, "jobset", JOBS, j.project, j.name, false);
    rc = js_reply(req, j.project, j.name, 200, NULL, fg_fed_outcomes_json(w, o, n),
                  suspend ? NULL : spec, n);
    goto out;
release:
    if (!suspend)
        quota_release(req, j.project, spec, qname);
out:
    fg_fed_outcomes_clear(o, n);
    json_decref(patch);
    json_decref(spec);
    json_decref(proj);
    rd_objs_free(j.objs, j.c.nparts);
    return rc;
}

int fg_api_suspend_jobset(fg_req_t *req) {
    return set_suspend(req, true);
}

int fg_api_resume_jobset(fg_req_t *req) {
    return set_suspend(req, false);
}

/* ---- the tier's usage ---------------------------------------------------------------------- */

/* What parallelism pods of containers request: {cpu milli, memory bytes, pods}. */
static void demand(const json_t *containers, int64_t pods, int64_t out[3]) {
    const json_t *c;
    size_t i;
    out[0] = out[1] = 0;
    out[2] = pods;
    json_array_foreach(containers, i, c) {
        const json_t *r = json_object_get(json_object_get(c, "resources"), "requests");
        const char *cpu = json_string_value(json_object_get(r, "cpu")),
                   *mem = json_string_value(json_object_get(r, "memory"));
        int64_t q = 0;
        if (cpu && fg_kube_quantity_parse(cpu, strlen(cpu), true, &q) == FG_OK)
            out[0] += q * pods;
        q = 0;
        if (mem && fg_kube_quantity_parse(mem, strlen(mem), false, &q) == FG_OK)
            out[1] += q * pods;
    }
}

size_t js_tier_usage_add(fg_api_t *api, const char *project, fg_redis_batch_t *b) {
    size_t first = fg_redis_batch_len(b);
    fg_cache_key_t k;
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "jobset", api->cfg->clusters[i].name, project),
                            NULL);
    return first;
}

bool js_tier_usage(fg_api_t *api, const char *rid, const char *project, const char *tier,
                   const char *skip, json_t *by_name, char *why, size_t len) {
    fg_redis_batch_t *b = fg_redis_batch_new();
    size_t first = js_tier_usage_add(api, project, b);
    bool ok = fg_redis_batch_run(api->redis, b, why, len) == FG_OK;
    if (ok)
        js_tier_usage_read(api, rid, tier, skip, b, first, by_name);
    fg_redis_batch_free(b);
    return ok;
}

void js_tier_usage_read(fg_api_t *api, const char *rid, const char *tier, const char *skip,
                        const fg_redis_batch_t *b, size_t first, json_t *by_name) {
    for (size_t i = 0; i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, first + i);
        for (size_t j = 1; j < fg_redis_reply_len(h); j += 2) {
            json_t *o = rd_parse_object(fg_redis_reply_at(h, j), rid);
            const char *name = rd_str(o, "name"), *state = rd_str(o, "state"),
                       *t = rd_str(json_object_get(o, "labels"), AS_TIER_LABEL);
            char qname[96];
            if (name)
                JS_QUOTA_NAME(qname, name);
            bool running = state && strcmp(state, "Complete") != 0 &&
                           strcmp(state, "Failed") != 0 && strcmp(state, "Suspended") != 0;
            if (o && name && running && strcmp(t ? t : "OnDemand", tier) == 0 &&
                strcmp(qname, skip) != 0) {
                int64_t d[3];
                int64_t par = rd_int(o, "parallelism", 1), comp = rd_int(o, "completions", 1);
                demand(json_object_get(o, "containers"), par < comp ? par : comp, d);
                json_t *sum = json_object_get(by_name, qname);
                if (sum == NULL) {
                    sum = json_pack("[I,I,I]", (json_int_t)0, (json_int_t)0, (json_int_t)0);
                    json_object_set_new(by_name, qname, sum);
                }
                for (size_t r = 0; r < 3; r++)
                    json_array_set_new(
                        sum, r, json_integer(json_integer_value(json_array_get(sum, r)) + d[r]));
            }
            json_decref(o);
        }
    }
}

void js_forget_cron_runs(fg_req_t *req, const char *project, const char *cron,
                         const fg_fed_outcome_t *o, size_t n) {
    fg_api_t *api = fg_req_app(req);
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    char why[256];
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "jobset", api->cfg->clusters[i].name, project),
                            NULL);
    bool ok = fg_redis_batch_run(api->redis, b, why, sizeof why) == FG_OK;
    json_t *seen = json_object(); /* a run held by several clusters is forgotten once */
    for (size_t i = 0; ok && i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, i);
        for (size_t j = 1; j < fg_redis_reply_len(h); j += 2) {
            json_t *js = rd_parse_object(fg_redis_reply_at(h, j), fg_req_id(req));
            const json_t *labels = json_object_get(js, "labels");
            const char *name = rd_str(js, "name"), *of = rd_str(labels, CJ_LABEL);
            char qname[128];
            if (name && of && strcmp(of, cron) == 0 && json_object_get(seen, name) == NULL) {
                json_object_set_new(seen, name, json_true());
                JS_QUOTA_NAME(qname, name);
                quota_forget(req, project, rd_str(labels, AS_TIER_LABEL), qname, o, n);
            }
            json_decref(js);
        }
    }
    if (!ok)
        FG_LOG(FG_LOG_WARN, fg_req_id(req),
               "the runs of cron job %s/%s free their quota when the cache shows them gone: %s",
               project, cron, why);
    json_decref(seen);
    fg_redis_batch_free(b);
}
