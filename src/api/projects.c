/* api/projects.c: creating, changing and deleting projects (admin).
 *
 * A project is a namespace of its name in every member cluster (DESIGN.md): its labels are the
 * namespace's (plus app.kubernetes.io/managed-by), its description and tier quotas are
 * annotations (fleetgate.io/description, fleetgate.io/quota-<tier>-<resource>, read back by
 * kube/translate.c), and every write stamps who asked and the request id. A write goes to every
 * cluster at once; when one fails the answer is 502/504 naming it, the others keep the change,
 * and repeating the request converges (a create completes in the clusters that lack the
 * namespace; a patch is the same patch again). The answer is read back from the cache after the
 * informers applied the write, so it is what a GET on any replica shows.
 */
#include "writes.h"

#include "fleetgate/kube.h"

#include <stdio.h>
#include <string.h>

#define MANAGED_BY "app.kubernetes.io/managed-by"

static const char *const project_members[] = {"name",     "description", "labels",  "quotas",
                                              "phase",    "clusters",    "version", "createdAt",
                                              "outcomes", NULL};
static const char *const name_required[] = {"name", NULL};

/* The tiers as the API names them and as the annotations do. */
static const struct {
    const char *api, *annotation;
} tiers[] = {{"Reserved", "reserved"}, {"OnDemand", "ondemand"}, {"Preemptible", "preemptible"}};

static const char *const tier_members[] = {"Reserved", "OnDemand", "Preemptible", NULL};
static const char *const tier_quota_members[] = {"limits", "usage", NULL};
static const char *const limits_required[] = {"limits", NULL};
static const char *const quota_members[] = {"cpu", "memory", "pods", NULL};

static void validate_quota(vd_t *v, const json_t *q, const char *ptr) {
    char p[VD_PTR_MAX];
    if (!vd_object(v, q, ptr, quota_members, NULL))
        return;
    vd_quantity(v, json_object_get(q, "cpu"), vd_ptr(p, ptr, "cpu"), true, NULL);
    vd_quantity(v, json_object_get(q, "memory"), vd_ptr(p, ptr, "memory"), false, NULL);
    vd_int(v, json_object_get(q, "pods"), vd_ptr(p, ptr, "pods"), 0, 1000000);
}

/* The whole body against the contract's Project (read-only members are ignored). */
static void validate_project(vd_t *v, const json_t *p) {
    char ptr[VD_PTR_MAX], tp[VD_PTR_MAX];
    if (!vd_object(v, p, "", project_members, name_required))
        return;
    vd_dns_label(v, json_object_get(p, "name"), "/name", 63);
    vd_string(v, json_object_get(p, "description"), "/description", 0, 1024);
    vd_labels(v, json_object_get(p, "labels"), "/labels");
    const json_t *quotas = json_object_get(p, "quotas");
    if (quotas == NULL || !vd_object(v, quotas, "/quotas", tier_members, NULL))
        return;
    for (size_t t = 0; t < sizeof tiers / sizeof tiers[0]; t++) {
        const json_t *tq = json_object_get(quotas, tiers[t].api);
        if (tq == NULL)
            continue;
        vd_ptr(tp, "/quotas", tiers[t].api);
        if (vd_object(v, tq, tp, tier_quota_members, limits_required))
            validate_quota(v, json_object_get(tq, "limits"), vd_ptr(ptr, tp, "limits"));
    }
}

/* The namespace's labels and annotations for a (valid) project; with previous (the project as
 * it is), what the project no longer has is set to null, for a merge patch. */
static json_t *namespace_metadata(fg_req_t *req, const json_t *p, const json_t *previous) {
    json_t *labels = json_object(), *ann = json_object();
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(previous, "labels"), k, val)
        json_object_set_new(labels, k, json_null());
    json_object_foreach(json_object_get(p, "labels"), k, val) json_object_set(labels, k, val);
    json_object_set_new(labels, MANAGED_BY, json_string("fleetgate"));
    const json_t *d = json_object_get(p, "description");
    json_object_set_new(ann, "fleetgate.io/description",
                        d ? json_incref((json_t *)d) : json_null());
    for (size_t t = 0; t < sizeof tiers / sizeof tiers[0]; t++) {
        const json_t *lim =
            json_object_get(json_object_get(json_object_get(p, "quotas"), tiers[t].api), "limits");
        for (size_t r = 0; quota_members[r]; r++) {
            char key[96];
            snprintf(key, sizeof key, "fleetgate.io/quota-%s-%s", tiers[t].annotation,
                     quota_members[r]);
            const json_t *q = json_object_get(lim, quota_members[r]);
            if (json_is_integer(q))
                json_object_set_new(ann, key,
                                    json_sprintf("%lld", (long long)json_integer_value(q)));
            else
                json_object_set_new(ann, key, q ? json_incref((json_t *)q) : json_null());
        }
    }
    if (previous == NULL) { /* a create: nulls mean nothing */
        json_t *clean = json_object();
        json_object_foreach(ann, k, val) if (!json_is_null(val)) json_object_set(clean, k, val);
        json_decref(ann);
        ann = clean;
    }
    wr_stamp(req, ann);
    return json_pack("{s:s,s:o,s:o}", "name", json_string_value(json_object_get(p, "name")),
                     "labels", labels, "annotations", ann);
}

/* The writes of one body to the clusters (only those holding the namespace when holding is
 * not NULL). */
static size_t project_writes(const rd_ctx_t *c, json_t *const *holding, fg_kube_method_t m,
                             const char *path, const json_t *body, fg_fed_write_t *w) {
    size_t n = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        if (holding && holding[i] == NULL)
            continue;
        w[n++] = (fg_fed_write_t){.cluster = c->parts[i].conf->name,
                                  .method = m,
                                  .path = path,
                                  .body = body,
                                  .exists_ok = m == FG_KUBE_POST,
                                  .absent_ok = m == FG_KUBE_DELETE};
    }
    return n;
}

/* Reads the project back from the cache and answers it with the write's outcomes. */
static int reply_project(fg_req_t *req, const char *name, unsigned status, json_t *outcomes) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", name, NULL, objs, &found)) {
        json_decref(outcomes);
        return FG_OK;
    }
    if (found == 0) { /* deleted meanwhile, or the cache is behind: say what was done */
        json_decref(outcomes);
        return fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                "project %s was written but is not in the cache yet; retry the GET",
                                name);
    }
    json_t *o = rd_present_project(&c, objs);
    rd_objs_free(objs, c.nparts);
    json_object_set_new(o, "outcomes", outcomes);
    char location[128], version[80];
    snprintf(location, sizeof location, "/v1/projects/%s", name);
    snprintf(version, sizeof version, "%s", rd_str(o, "version"));
    return wr_reply(req, status, o, version, status == 201 ? location : NULL);
}

int fg_api_create_project(fg_req_t *req) {
    const json_t *body = fg_req_json(req);
    vd_t v;
    vd_init(&v);
    validate_project(&v, body);
    if (!vd_ok(&v)) {
        vd_reply(req, &v);
        vd_free(&v);
        return FG_OK;
    }
    vd_free(&v);
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", name, NULL, objs, &found))
        return FG_OK;
    rd_objs_free(objs, c.nparts);
    if (found == c.nparts && found > 0)
        return fg_reply_problem(req, FG_PROBLEM_CONFLICT, "project %s exists already", name);
    char what[128];
    snprintf(what, sizeof what, "create namespace %s in %zu clusters", name, c.nparts);
    if (!wr_audit_or_reply(req, what))
        return FG_OK;
    json_t *ns = json_pack("{s:s,s:s,s:o}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           namespace_metadata(req, body, NULL));
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t out[FG_FED_MAX_CLUSTERS];
    size_t n = project_writes(&c, NULL, FG_KUBE_POST, "/api/v1/namespaces", ns, w);
    int rc = FG_OK;
    if (wr_fanout_or_reply(req, w, n, out)) {
        wr_wait_applied(req, w, out, n, "project", "namespaces", "_", name, false);
        rc = reply_project(req, name, 201, fg_fed_outcomes_json(w, out, n));
    }
    fg_fed_outcomes_clear(out, n);
    json_decref(ns);
    return rc;
}

int fg_api_update_project(fg_req_t *req) {
    const char *name = fg_req_param(req, "project");
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", name, NULL, objs, &found))
        return FG_OK;
    int rc = FG_OK;
    json_t *cur = NULL, *next = NULL, *meta = NULL, *patch = NULL;
    vd_t v;
    vd_init(&v);
    if (found == 0) {
        rc = fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no project %s", name);
        goto out;
    }
    cur = rd_present_project(&c, objs);
    if (!wr_if_match_or_reply(req, rd_str(cur, "version")))
        goto out;
    next = fg_json_merge_patch(cur, fg_req_json(req));
    validate_project(&v, next);
    if (vd_ok(&v) && !json_equal(json_object_get(next, "name"), json_object_get(cur, "name")))
        vd_add(&v, "/name", "a project cannot be renamed (got \"%.63s\")",
               json_string_value(json_object_get(next, "name")));
    if (!vd_ok(&v)) {
        rc = vd_reply(req, &v);
        goto out;
    }
    if (!wr_audit_or_reply(req, "patch the project's namespaces"))
        goto out;
    meta = namespace_metadata(req, next, cur);
    patch = json_pack("{s:O}", "metadata", meta);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s", name);
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = project_writes(&c, objs, FG_KUBE_PATCH, path, patch, w);
    if (wr_fanout_or_reply(req, w, n, o)) {
        wr_wait_applied(req, w, o, n, "project", "namespaces", "_", name, false);
        rc = reply_project(req, name, 200, fg_fed_outcomes_json(w, o, n));
    }
    fg_fed_outcomes_clear(o, n);
out:
    vd_free(&v);
    rd_objs_free(objs, c.nparts);
    json_decref(cur);
    json_decref(next);
    json_decref(meta);
    json_decref(patch);
    return rc;
}

/* The workloads a project still holds, as "2 apps, 1 cron job" ("" when none). */
static bool workloads_or_reply(fg_req_t *req, const rd_ctx_t *c, const char *project, char *out,
                               size_t outlen) {
    static const struct {
        fg_kind_t kind;
        const char *what;
    } kinds[] = {{FG_KIND_APP, "apps"},
                 {FG_KIND_JOBSET, "job sets"},
                 {FG_KIND_CRONJOB, "cron jobs"},
                 {FG_KIND_SCALER, "scalers"}};
    enum { NK = sizeof kinds / sizeof kinds[0] };
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    for (size_t i = 0; i < c->nparts; i++)
        for (size_t j = 0; j < NK; j++)
            fg_redis_batch_addv(b, "ZCARD",
                                fg_cache_key_index(&k, fg_kube_kind_info(kinds[j].kind)->name,
                                                   c->parts[i].conf->name, project),
                                NULL);
    bool ok = rd_batch_or_reply(req, c->api, b);
    size_t len = 0;
    out[0] = '\0';
    for (size_t j = 0; ok && j < NK; j++) {
        int64_t n = 0;
        for (size_t i = 0; i < c->nparts; i++)
            n += fg_redis_reply_int(fg_redis_batch_reply(b, i * NK + j));
        if (n > 0 && len < outlen)
            len += (size_t)snprintf(out + len, outlen - len, "%s%lld %s", len ? ", " : "",
                                    (long long)n, kinds[j].what);
    }
    fg_redis_batch_free(b);
    return ok;
}

int fg_api_delete_project(fg_req_t *req) {
    const char *name = fg_req_param(req, "project");
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", name, NULL, objs, &found))
        return FG_OK;
    int rc = FG_OK;
    json_t *cur = NULL;
    char left[256];
    if (found == 0) {
        rc = fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no project %s", name);
        goto out;
    }
    cur = rd_present_project(&c, objs);
    if (!wr_if_match_or_reply(req, rd_str(cur, "version")) ||
        !workloads_or_reply(req, &c, name, left, sizeof left))
        goto out;
    if (left[0]) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                              "project %s still has %s; delete them first", name, left);
        goto out;
    }
    if (!wr_audit_or_reply(req, "delete the project's namespaces"))
        goto out;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s", name);
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    size_t n = project_writes(&c, objs, FG_KUBE_DELETE, path, NULL, w);
    if (wr_fanout_or_reply(req, w, n, o)) {
        wr_wait_applied(req, w, o, n, "project", "namespaces", "_", name, true);
        rc = fg_reply_static(req, 204, "application/json", "", 0);
    }
    fg_fed_outcomes_clear(o, n);
out:
    rd_objs_free(objs, c.nparts);
    json_decref(cur);
    return rc;
}
