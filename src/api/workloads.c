/* api/workloads.c: the reads of apps, job sets, cron jobs and scalers, from the cache alone.
 *
 * A workload of one name may run in several member clusters (one Deployment, Job, CronJob or HPA
 * per chosen cluster); the API shows it once, aggregated: counts summed, the status split per
 * cluster and (apps) per zone, each cluster's part marked Current or Stale. One row per kind
 * (kinds[]) names its cache kind, its Kubernetes resource, its path parameter, its presenter and
 * the filters it takes; the list and get handlers are shared.
 */
#include "api_internal.h"
#include "appspec.h"
#include "reads.h"

#include <stdio.h>
#include <string.h>

typedef json_t *(*present_fn)(const rd_ctx_t *c, json_t *const *objs);

typedef struct {
    const char *kind;     /* cache kind, also the path parameter naming one ({app}) */
    const char *resource; /* its sync state's resource */
    const char *noun;     /* for problems: "app", "job set", ... */
    present_fn present;
    const char *const *phases; /* values of the phase filter; NULL: no phase filter */
    unsigned filters;          /* BY_*: the list's other filters (besides labelSelector) */
} kind_row_t;

enum { BY_CLUSTER = 1u << 0, BY_ZONE = 1u << 1, BY_APP = 1u << 2 };

typedef struct {
    const kind_row_t *k;
    const rd_selector_t *selector;
    const char *phase;
    const char *app;
} filter_t;

/* ---- shared bits -------------------------------------------------------- */

static const json_t *first_of(const rd_ctx_t *c, json_t *const *objs) {
    for (size_t i = 0; i < c->nparts; i++)
        if (objs[i])
            return objs[i];
    return NULL;
}

/* The fields every workload starts with: name, project, labels, version, createdAt (the oldest
 * cluster's). */
static json_t *identity(const rd_ctx_t *c, json_t *const *objs) {
    const json_t *f = first_of(c, objs);
    json_t *o = json_object();
    rd_copy(o, "name", f, "name");
    rd_copy(o, "project", f, "project");
    if (json_is_object(json_object_get(f, "labels")))
        rd_copy(o, "labels", f, "labels");
    char version[80];
    rd_group_version(c, objs, version, sizeof version);
    json_object_set_new(o, "version", json_string(version));
    const char *created = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *t = objs[i] ? rd_str(objs[i], "creationTime") : NULL;
        if (t && (created == NULL || strcmp(t, created) < 0))
            created = t;
    }
    if (created)
        json_object_set_new(o, "createdAt", json_string(created));
    return o;
}

/* The latest (or earliest) of objs[*][key] as a JSON string, or null. */
static json_t *time_over(const rd_ctx_t *c, json_t *const *objs, const char *key, bool latest) {
    const char *best = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        const char *t = objs[i] ? rd_str(objs[i], key) : NULL;
        if (t && (best == NULL || (strcmp(t, best) > 0) == latest))
            best = t;
    }
    return best ? json_string(best) : json_null();
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* maxSurge / maxUnavailable: an integer >= 0 or "N%" (N up to 3 digits). */
static bool rollout_value_ok(const json_t *v) {
    if (json_is_integer(v))
        return json_integer_value(v) >= 0;
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0;
    if (n < 2 || n > 4 || s[n - 1] != '%')
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* ---- apps --------------------------------------------------------------- */

static json_t *replica_counts(int64_t desired, int64_t ready, int64_t updated, int64_t available) {
    return json_pack("{s:I,s:I,s:I,s:I}", "desired", (json_int_t)desired, "ready",
                     (json_int_t)ready, "updated", (json_int_t)updated, "available",
                     (json_int_t)available);
}

static const char *const app_phases[] = {"Pending", "Running", "Progressing", "Degraded",
                                         "Paused",  "Stopped", NULL};

/* One cluster's entry of an app's status.clusters, with where it stands against the last write
 * (when that is known). */
static json_t *app_cluster(const rd_ctx_t *c, size_t i, const int64_t v[4],
                           const as_standing_t *st) {
    json_t *e =
        json_pack("{s:s,s:s,s:o,s:s}", "cluster", c->parts[i].conf->name, "zone",
                  c->parts[i].conf->zone, "replicas", replica_counts(v[0], v[1], v[2], v[3]),
                  "state", fg_cache_freshness_name(c->parts[i].fresh.state));
    if (st->known && st->placed[i] >= 0)
        json_object_set_new(e, "placed", json_integer(st->placed[i]));
    if (st->known)
        json_object_set_new(e, "reconcile", json_string(st->pending[i] ? "Pending" : "Done"));
    return e;
}

/* The Reconciled condition: whether every cluster holds the app's last write, and which do not
 * (as many names as the message holds). */
static json_t *reconciled_condition(const rd_ctx_t *c, const as_standing_t *st) {
    char msg[512] = "every cluster holds the app's last write";
    if (st->npending > 0) {
        size_t len = (size_t)snprintf(msg, sizeof msg,
                                      "the reconciler is applying the app's last write in:");
        for (size_t i = 0, told = 0; i < c->nparts; i++) {
            if (!st->pending[i])
                continue;
            const char *name = c->parts[i].conf->name;
            if (len + strlen(name) + 32 >= sizeof msg) {
                snprintf(msg + len, sizeof msg - len, " and %zu more", st->npending - told);
                break;
            }
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s", told ? "," : "", name);
            told++;
        }
    }
    return json_pack("{s:s,s:s,s:s,s:s}", "type", "Reconciled", "status",
                     st->npending ? "False" : "True", "reason",
                     st->npending ? "ReconcilePending" : "AsPlaced", "message", msg);
}

/* The SidecarsAvailable condition (False, SidecarRemoved) when the app asks for a sidecar the
 * catalogue as the request found it no longer holds: the app keeps running its last definition
 * (README, "Reloading the config"), and says so. NULL otherwise, or when there is no request. */
static json_t *sidecar_condition(const rd_ctx_t *c, const json_t *app) {
    const char *text = rd_str(app, "fleetgateSpec");
    json_t *spec = NULL, *cond = NULL;
    /* only apps with sidecars pay for the parse */
    if (c->req == NULL || text == NULL || strstr(text, "\"sidecars\"") == NULL ||
        fg_json_load(text, strlen(text), &spec, NULL, 0) != FG_OK)
        return NULL;
    const char *gone = as_sidecar_missing(spec, api_live_cfg(c->req));
    if (gone)
        cond = json_pack("{s:s,s:s,s:s,s:s++}", "type", "SidecarsAvailable", "status", "False",
                         "reason", "SidecarRemoved", "message", "sidecar ", gone,
                         " is no longer in the catalogue: the app keeps running its last "
                         "definition of it");
    json_decref(spec);
    return cond;
}

json_t *rd_present_app(const rd_ctx_t *c, json_t *const *objs) {
    json_t *o = identity(c, objs);
    rd_hide_managed_labels(o);
    const json_t *f = first_of(c, objs);
    int64_t t[4] = {0, 0, 0, 0};
    bool paused = false, stale = false, behind = false;
    json_t *clusters = json_array(), *zones = json_array();
    int64_t ztot[RD_MAX_CLUSTERS][4];
    const char *znames[RD_MAX_CLUSTERS];
    size_t nz = 0;
    as_standing_t st;
    as_standing(c, objs, &st);
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *a = objs[i];
        if (a == NULL && st.known && st.placed[i] >= 0) { /* placed there, not made yet */
            const int64_t none[4] = {0, 0, 0, 0};
            json_array_append_new(clusters, app_cluster(c, i, none, &st));
        }
        if (a == NULL)
            continue;
        const json_t *r = json_object_get(a, "replicas");
        int64_t v[4] = {rd_int(r, "desired", 1), rd_int(r, "ready", 0), rd_int(r, "updated", 0),
                        rd_int(r, "available", 0)};
        const char *zone = c->parts[i].conf->zone;
        size_t z = 0;
        while (z < nz && strcmp(znames[z], zone) != 0)
            z++;
        if (z == nz) {
            znames[nz] = zone;
            memset(ztot[nz++], 0, sizeof ztot[0]);
        }
        for (size_t k = 0; k < 4; k++) {
            v[k] = v[k] < 0 ? 0 : v[k];
            t[k] += v[k];
            ztot[z][k] += v[k];
        }
        paused = paused || json_is_true(json_object_get(a, "paused"));
        stale = stale || c->parts[i].fresh.state == FG_FRESH_STALE;
        behind = behind || rd_int(a, "observedGeneration", 0) < rd_int(a, "generation", 0);
        json_array_append_new(clusters, app_cluster(c, i, v, &st));
    }
    for (size_t z = 0; z < nz; z++)
        json_array_append_new(
            zones, json_pack("{s:s,s:o}", "zone", znames[z], "replicas",
                             replica_counts(ztot[z][0], ztot[z][1], ztot[z][2], ztot[z][3])));
    /* every replica ready and updated, and every cluster holding the last write */
    bool settled = !behind && st.npending == 0 && t[1] >= t[0] && t[2] >= t[0] && t[3] >= t[0];
    const char *phase = t[0] == 0   ? "Stopped"
                        : paused    ? "Paused"
                        : stale     ? "Degraded"
                        : settled   ? "Running"
                        : t[1] == 0 ? "Pending"
                                    : "Progressing";
    json_t *spec = json_pack("{s:I,s:o}", "replicas", (json_int_t)clamp(t[0], 0, 1000),
                             "containers", rd_spec_containers(json_object_get(f, "containers")));
    const json_t *strategy = json_object_get(f, "strategy");
    json_t *rollout = json_object();
    if (rollout_value_ok(json_object_get(strategy, "maxSurge")))
        rd_copy(rollout, "maxSurge", strategy, "maxSurge");
    if (rollout_value_ok(json_object_get(strategy, "maxUnavailable")))
        rd_copy(rollout, "maxUnavailable", strategy, "maxUnavailable");
    if (json_object_size(rollout))
        json_object_set_new(spec, "rollout", rollout);
    else
        json_decref(rollout);
    json_object_set_new(o, "spec", spec);
    json_object_set_new(o, "status",
                        json_pack("{s:s,s:o,s:o,s:o,s:o}", "phase", phase, "replicas",
                                  replica_counts(t[0], t[1], t[2], t[3]), "clusters", clusters,
                                  "zones", zones, "lastRolloutAt",
                                  time_over(c, objs, "restartedAt", true)));
    json_t *conds = json_array(), *gone = sidecar_condition(c, f);
    if (st.known)
        json_array_append_new(conds, reconciled_condition(c, &st));
    if (gone)
        json_array_append_new(conds, gone);
    if (json_array_size(conds))
        json_object_set_new(json_object_get(o, "status"), "conditions", conds);
    else
        json_decref(conds);
    return o;
}

/* ---- job sets ----------------------------------------------------------- */

static const char *const jobset_phases[] = {"Pending",   "Running", "Suspended",
                                            "Succeeded", "Failed",  NULL};

static const char *job_phase(const json_t *j) {
    static const struct {
        const char *state, *phase;
    } map[] = {{"Complete", "Succeeded"},
               {"Failed", "Failed"},
               {"Suspended", "Suspended"},
               {"Running", "Running"}};
    const char *s = rd_str(j, "state");
    for (size_t i = 0; s && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i].state) == 0)
            return map[i].phase;
    return "Pending";
}

static json_t *job_counts(int64_t active, int64_t succeeded, int64_t failed) {
    return json_pack("{s:I,s:I,s:I}", "active", (json_int_t)active, "succeeded",
                     (json_int_t)succeeded, "failed", (json_int_t)failed);
}

/* Why the job set failed: one Failed condition a failed cluster's Job, its reason and its
 * message prefixed with the cluster. */
static json_t *failed_shards(const rd_ctx_t *c, json_t *const *objs) {
    json_t *out = json_array();
    for (size_t i = 0; i < c->nparts; i++) {
        if (objs[i] == NULL || strcmp(job_phase(objs[i]), "Failed") != 0)
            continue;
        const json_t *cond = NULL, *k;
        size_t j;
        json_array_foreach(json_object_get(objs[i], "conditions"), j, k) {
            const char *t = rd_str(k, "type");
            if (t && (strcmp(t, "Failed") == 0 || strcmp(t, "FailureTarget") == 0))
                cond = k;
        }
        const char *reason = rd_str(cond, "reason"), *msg = rd_str(cond, "message");
        char text[1024];
        snprintf(text, sizeof text, "cluster %s: %.900s", c->parts[i].conf->name,
                 msg ? msg : "its Job failed");
        json_t *o = json_pack("{s:s,s:s,s:s}", "type", "Failed", "status", "True", "message", text);
        if (reason)
            json_object_set_new(o, "reason", rd_string_cut(reason, 128));
        rd_copy(o, "lastTransitionAt", cond, "since");
        json_array_append_new(out, o);
    }
    return out;
}

static json_t *present_jobset(const rd_ctx_t *c, json_t *const *objs) {
    json_t *o = identity(c, objs);
    rd_hide_managed_labels(o);
    const json_t *f = first_of(c, objs);
    const char *cron = rd_str(f, "cronjob");
    json_object_set_new(
        o, "owner", cron ? json_pack("{s:s,s:s}", "kind", "CronJob", "name", cron) : json_null());
    int64_t act = 0, ok = 0, bad = 0, completions = 0, parallelism = 0;
    size_t n = 0, nsucc = 0, nsusp = 0, nfail = 0, nrun = 0;
    bool suspend = false;
    const char *held = NULL;
    json_t *clusters = json_array();
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *j = objs[i];
        if (j == NULL)
            continue;
        const char *ph = job_phase(j), *adm = rd_str(j, "admission");
        /* a scheduled cron run waiting for the quota (api/jobspec.h) is pending, not
         * suspended: its spec did not ask for it */
        bool waiting = adm && strcmp(adm, "quota") == 0 && strcmp(ph, "Suspended") == 0;
        if (waiting) {
            ph = "Pending";
            held = held ? held : rd_str(j, "quotaHeld");
        }
        n++;
        nsucc += strcmp(ph, "Succeeded") == 0;
        nsusp += strcmp(ph, "Suspended") == 0;
        nfail += strcmp(ph, "Failed") == 0;
        nrun += strcmp(ph, "Running") == 0;
        int64_t a = rd_int(j, "active", 0), s = rd_int(j, "succeeded", 0),
                fl = rd_int(j, "failed", 0);
        act += a, ok += s, bad += fl;
        completions += rd_int(j, "completions", 1);
        parallelism += rd_int(j, "parallelism", 1);
        if (!waiting)
            suspend = suspend || json_is_true(json_object_get(j, "suspend"));
        json_array_append_new(
            clusters, json_pack("{s:s,s:s,s:s,s:o}", "cluster", c->parts[i].conf->name, "zone",
                                c->parts[i].conf->zone, "phase", ph, "pods", job_counts(a, s, fl)));
    }
    const char *phase = nfail        ? "Failed"
                        : nsucc == n ? "Succeeded"
                        : nrun       ? "Running"
                        : nsusp == n ? "Suspended"
                                     : "Pending";
    json_t *spec = json_pack("{s:o,s:I,s:I,s:b}", "containers",
                             rd_spec_containers(json_object_get(f, "containers")), "completions",
                             (json_int_t)clamp(completions, 1, 100000), "parallelism",
                             (json_int_t)clamp(parallelism, 0, 10000), "suspend", suspend);
    const char *mode = rd_str(f, "completionMode");
    if (mode && (strcmp(mode, "NonIndexed") == 0 || strcmp(mode, "Indexed") == 0))
        json_object_set_new(spec, "completionMode", json_string(mode));
    if (json_is_integer(json_object_get(f, "backoffLimit")))
        json_object_set_new(spec, "backoffLimit",
                            json_integer(clamp(rd_int(f, "backoffLimit", 6), 0, 1000)));
    if (rd_int(f, "activeDeadlineSeconds", 0) >= 1)
        rd_copy(spec, "activeDeadlineSeconds", f, "activeDeadlineSeconds");
    json_object_set_new(o, "spec", spec);
    bool finished = strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
    json_t *status = json_pack(
        "{s:s,s:o,s:o,s:o,s:o}", "phase", phase, "pods", job_counts(act, ok, bad), "startedAt",
        time_over(c, objs, "startTime", false), "completedAt",
        finished ? time_over(c, objs, "completionTime", true) : json_null(), "clusters", clusters);
    json_t *failures = failed_shards(c, objs);
    if (held && strcmp(phase, "Pending") == 0) /* held by the reconciler for the tier's quota */
        json_array_append_new(failures, json_pack("{s:s,s:s,s:s,s:o}", "type", "Admitted", "status",
                                                  "False", "reason", "QuotaExceeded", "message",
                                                  rd_string_cut(held, 1000)));
    if (json_array_size(failures))
        json_object_set_new(status, "conditions", failures);
    else
        json_decref(failures);
    json_object_set_new(o, "status", status);
    return o;
}

json_t *rd_present_jobset(const rd_ctx_t *c, json_t *const *objs) {
    return present_jobset(c, objs);
}

static json_t *present_cronjob(const rd_ctx_t *c, json_t *const *objs);
static json_t *present_scaler(const rd_ctx_t *c, json_t *const *objs);

json_t *rd_present_scaler(const rd_ctx_t *c, json_t *const *objs) {
    return present_scaler(c, objs);
}

json_t *rd_present_cronjob(const rd_ctx_t *c, json_t *const *objs) {
    return present_cronjob(c, objs);
}

/* ---- cron jobs ---------------------------------------------------------- */

static json_t *present_cronjob(const rd_ctx_t *c, json_t *const *objs) {
    static const char *const policies[] = {"Allow", "Forbid", "Replace"};
    json_t *o = identity(c, objs);
    rd_hide_managed_labels(o);
    const json_t *f = first_of(c, objs);
    const char *schedule = rd_str(f, "schedule");
    json_t *spec = json_pack("{s:s,s:b,s:{s:o}}", "schedule", schedule ? schedule : "@daily",
                             "suspend", json_is_true(json_object_get(f, "suspend")), "jobTemplate",
                             "containers", rd_spec_containers(json_object_get(f, "containers")));
    rd_copy(spec, "timeZone", f, "timeZone");
    const char *policy = rd_str(f, "concurrencyPolicy");
    for (size_t i = 0; policy && i < 3; i++)
        if (strcmp(policy, policies[i]) == 0)
            json_object_set_new(spec, "concurrencyPolicy", json_string(policy));
    json_object_set_new(o, "spec", spec);
    json_t *active = json_array(), *clusters = json_array();
    bool suspended = true;
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *cj = objs[i];
        if (cj == NULL)
            continue;
        suspended = suspended && json_is_true(json_object_get(cj, "suspend"));
        size_t k;
        json_t *name;
        json_array_foreach(json_object_get(cj, "active"), k, name) {
            if (json_is_string(name))
                json_array_append(active, name);
        }
        json_array_append_new(clusters,
                              json_pack("{s:s,s:s,s:o}", "cluster", c->parts[i].conf->name, "zone",
                                        c->parts[i].conf->zone, "lastScheduleAt",
                                        rd_str_or_null(cj, "lastScheduleTime")));
    }
    json_object_set_new(o, "status",
                        json_pack("{s:b,s:o,s:o,s:o,s:o,s:o}", "suspended", suspended, "active",
                                  active, "lastScheduleAt",
                                  time_over(c, objs, "lastScheduleTime", true), "lastSuccessfulAt",
                                  time_over(c, objs, "lastSuccessfulTime", true), "nextScheduleAt",
                                  json_null(), "clusters", clusters));
    return o;
}

/* ---- scalers ------------------------------------------------------------ */

/* The averageUtilization of the cpu or memory Resource metric in list (under field), or -1. */
static int64_t utilization(const json_t *list, const char *resource, const char *field) {
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        const char *name = rd_str(m, "name");
        if (name && strcmp(name, resource) == 0)
            return rd_int(json_object_get(m, field), "averageUtilization", -1);
    }
    return -1;
}

/* cool[key]: the stabilization window of one scaling direction, when it has one (0..3600 s). */
static void cooldown(json_t *cool, const char *key, const json_t *direction) {
    const json_t *w = json_object_get(direction, "stabilizationWindowSeconds");
    if (json_is_integer(w))
        json_object_set_new(cool, key, json_integer(clamp(json_integer_value(w), 0, 3600)));
}

static json_t *present_scaler(const rd_ctx_t *c, json_t *const *objs) {
    json_t *o = identity(c, objs);
    rd_hide_managed_labels(o);
    const json_t *f = first_of(c, objs);
    int64_t minr = 0, maxr = 0, cur = 0, want = 0;
    json_t *clusters = json_array();
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *s = objs[i];
        if (s == NULL)
            continue;
        minr += rd_int(s, "minReplicas", 1);
        maxr += rd_int(s, "maxReplicas", 1);
        int64_t a = rd_int(s, "currentReplicas", 0), d = rd_int(s, "desiredReplicas", 0);
        cur += a, want += d;
        json_array_append_new(clusters,
                              json_pack("{s:s,s:s,s:I,s:I}", "cluster", c->parts[i].conf->name,
                                        "zone", c->parts[i].conf->zone, "currentReplicas",
                                        (json_int_t)a, "desiredReplicas", (json_int_t)d));
    }
    json_t *targets = json_object(), *util = json_object();
    static const struct {
        const char *resource, *target, *measured;
    } res[] = {{"cpu", "cpuUtilization", "cpu"}, {"memory", "memoryUtilization", "memory"}};
    for (size_t k = 0; k < 2; k++) {
        int64_t t = utilization(json_object_get(f, "metrics"), res[k].resource, "target");
        if (t >= 1 && t <= 100)
            json_object_set_new(targets, res[k].target, json_integer(t));
        int64_t m = utilization(json_object_get(f, "currentMetrics"), res[k].resource, "current");
        if (m >= 0)
            json_object_set_new(util, res[k].measured, json_integer(m));
    }
    const json_t *target = json_object_get(f, "target");
    json_t *spec =
        json_pack("{s:s,s:I,s:I,s:o}", "app", rd_str(target, "name") ? rd_str(target, "name") : "",
                  "minReplicas", (json_int_t)clamp(minr, 0, 1000), "maxReplicas",
                  (json_int_t)clamp(maxr, 1, 1000), "targets", targets);
    const json_t *behavior = json_object_get(f, "behavior");
    json_t *cool = json_object();
    cooldown(cool, "scaleUpSeconds", json_object_get(behavior, "scaleUp"));
    cooldown(cool, "scaleDownSeconds", json_object_get(behavior, "scaleDown"));
    if (json_object_size(cool))
        json_object_set_new(spec, "cooldown", cool);
    else
        json_decref(cool);
    json_object_set_new(o, "spec", spec);
    json_t *status =
        json_pack("{s:I,s:I,s:o,s:o,s:o}", "currentReplicas", (json_int_t)cur, "desiredReplicas",
                  (json_int_t)want, "activeSchedule", json_null(), "lastScaledAt",
                  time_over(c, objs, "lastScaleTime", true), "clusters", clusters);
    if (json_object_size(util))
        json_object_set_new(status, "utilization", util);
    else
        json_decref(util);
    json_object_set_new(o, "status", status);
    return o;
}

/* ---- the table and the shared handlers ---------------------------------- */

enum { K_APP, K_JOBSET, K_CRONJOB, K_SCALER };

/* One row a kind: its cache kind, resource, noun, presenter, phases and filters. */
#define KIND(kind_, resource_, noun_, present_, phases_, filters_)                                 \
    {                                                                                              \
        .kind = kind_, .resource = resource_, .noun = noun_, .present = present_,                  \
        .phases = phases_, .filters = filters_                                                     \
    }

static const kind_row_t kinds[] = {
    [K_APP] = KIND("app", "deployments", "app", rd_present_app, app_phases, BY_CLUSTER | BY_ZONE),
    [K_JOBSET] =
        KIND("jobset", "jobs", "job set", present_jobset, jobset_phases, BY_CLUSTER | BY_ZONE),
    [K_CRONJOB] = KIND("cronjob", "cronjobs", "cron job", present_cronjob, NULL, BY_CLUSTER),
    [K_SCALER] = KIND("scaler", "horizontalpodautoscalers", "scaler", present_scaler, NULL, BY_APP),
};

static json_t *list_item(const rd_ctx_t *c, const char *name, json_t *const *objs, void *arg) {
    const filter_t *f = arg;
    (void)name;
    const json_t *first = first_of(c, objs);
    if (!rd_selector_match(f->selector, json_object_get(first, "labels")))
        return NULL;
    json_t *item = f->k->present(c, objs);
    const char *phase = rd_str(json_object_get(item, "status"), "phase");
    const char *app = rd_str(json_object_get(item, "spec"), "app");
    if ((f->phase && (phase == NULL || strcmp(phase, f->phase) != 0)) ||
        (f->app && (app == NULL || strcmp(app, f->app) != 0))) {
        json_decref(item);
        return NULL;
    }
    return item;
}

static int list_kind(fg_req_t *req, const kind_row_t *k) {
    size_t limit;
    const char *cluster = NULL, *zone = NULL;
    filter_t f = {.k = k};
    rd_selector_t *sel = NULL;
    rd_ctx_t c;
    if (!rd_limit_or_reply(req, &limit) ||
        ((k->filters & BY_CLUSTER) && !rd_cluster_param_or_reply(req, &cluster)) ||
        ((k->filters & BY_ZONE) && !rd_label_param_or_reply(req, "zone", &zone)) ||
        ((k->filters & BY_APP) && !rd_label_param_or_reply(req, "app", &f.app)) ||
        (k->phases && !rd_enum_param_or_reply(req, "phase", k->phases, &f.phase)) ||
        !rd_selector_or_reply(req, &sel))
        return FG_OK;
    f.selector = sel;
    if (rd_begin_or_reply(&c, req, k->kind, k->resource, fg_req_param(req, "project"), cluster,
                          zone))
        rd_list_reply(&c, true, NULL, limit, list_item, &f);
    rd_selector_free(sel);
    return FG_OK;
}

static int get_kind(fg_req_t *req, const kind_row_t *k) {
    const char *project = fg_req_param(req, "project"), *name = fg_req_param(req, k->kind);
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, k->kind, k->resource, project, name, NULL, objs, &found))
        return FG_OK;
    if (found == 0)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no %s %s in project %s", k->noun, name,
                                project);
    json_t *item = k->present(&c, objs);
    rd_objs_free(objs, c.nparts);
    char etag[80];
    snprintf(etag, sizeof etag, "%s", rd_str(item, "version"));
    return rd_reply_etag(req, item, etag);
}

/* The two handlers of a kind's routes (routes.c names them). */
#define KIND_HANDLERS(k, list_fn, get_fn)                                                          \
    int list_fn(fg_req_t *req) {                                                                   \
        return list_kind(req, &kinds[k]);                                                          \
    }                                                                                              \
    int get_fn(fg_req_t *req) {                                                                    \
        return get_kind(req, &kinds[k]);                                                           \
    }

KIND_HANDLERS(K_APP, fg_api_list_apps, fg_api_get_app)
KIND_HANDLERS(K_JOBSET, fg_api_list_jobsets, fg_api_get_jobset)
KIND_HANDLERS(K_CRONJOB, fg_api_list_cronjobs, fg_api_get_cronjob)
KIND_HANDLERS(K_SCALER, fg_api_list_scalers, fg_api_get_scaler)

json_t *rd_present_workload(const char *kind, const rd_ctx_t *c, json_t *const *objs) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].kind, kind) == 0)
            return kinds[i].present(c, objs);
    return NULL;
}
