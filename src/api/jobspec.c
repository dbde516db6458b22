/* api/jobspec.c: a job set as the API takes it (the contract's JobSet) checked whole, the
 * division of its work over clusters, and the Job each chosen cluster gets: labels (the job
 * set's, fleetgate.io/jobset, app.kubernetes.io/managed-by, fleetgate.io/tier, also on the
 * pods), the annotations of the write (fleetgate.io/spec, fleetgate.io/placement, who asked),
 * its share of completions and parallelism, and FLEETGATE_INDEX_OFFSET in every container. */
#include "jobspec.h"

#include <stdio.h>
#include <string.h>

static const char *const js_members[] = {"name",      "project",   "labels",   "owner",
                                         "spec",      "status",    "version",  "createdAt",
                                         "updatedAt", "placement", "outcomes", NULL};
static const char *const js_required[] = {"name", "spec", NULL};
static const char *const spec_members[] = {"completions",
                                           "parallelism",
                                           "completionMode",
                                           "backoffLimit",
                                           "activeDeadlineSeconds",
                                           "ttlSecondsAfterFinished",
                                           "restartPolicy",
                                           "suspend",
                                           "tier",
                                           "placement",
                                           "containers",
                                           "sidecars",
                                           NULL};
static const char *const spec_required[] = {"containers", NULL};
static const char *const modes[] = {"NonIndexed", "Indexed", NULL};
static const char *const restart_policies[] = {"Never", "OnFailure", NULL};

/* The spec's numbers (js_number_t order): member, bounds, default. */
static const struct {
    const char *member;
    int64_t lo, hi, dflt;
} numbers[] = {
    {"completions", 1, 100000, 1},
    {"parallelism", 0, 10000, 1},
    {"backoffLimit", 0, 1000, 6},
    {"activeDeadlineSeconds", 1, JS_SECONDS_MAX, -1},
    {"ttlSecondsAfterFinished", 0, JS_SECONDS_MAX, -1},
};

int64_t js_number(const json_t *spec, js_number_t i) {
    const json_t *n = json_object_get(spec, numbers[i].member);
    return json_is_integer(n) ? json_integer_value(n) : numbers[i].dflt;
}

void js_validate_spec(vd_t *v, const json_t *spec, const char *ptr) {
    char p[VD_PTR_MAX];
    if (spec == NULL || !vd_object(v, spec, ptr, spec_members, spec_required))
        return;
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        vd_int(v, json_object_get(spec, numbers[i].member), vd_ptr(p, ptr, numbers[i].member),
               numbers[i].lo, numbers[i].hi);
    vd_enum(v, json_object_get(spec, "completionMode"), vd_ptr(p, ptr, "completionMode"), modes);
    vd_enum(v, json_object_get(spec, "restartPolicy"), vd_ptr(p, ptr, "restartPolicy"),
            restart_policies);
    vd_bool(v, json_object_get(spec, "suspend"), vd_ptr(p, ptr, "suspend"));
    as_validate_pod_parts(v, spec, ptr);
}

void js_validate(vd_t *v, const json_t *js) {
    if (!vd_object(v, js, "", js_members, js_required))
        return;
    vd_dns_label(v, json_object_get(js, "name"), "/name", 63);
    vd_labels(v, json_object_get(js, "labels"), "/labels");
    js_validate_spec(v, json_object_get(js, "spec"), "/spec");
}

void js_split(int64_t total, const int64_t *w, size_t n, int64_t wsum, int64_t *out) {
    int64_t given = 0, rem[FG_FED_MAX_CLUSTERS];
    for (size_t i = 0; i < n; i++) {
        out[i] = total * w[i] / wsum;
        rem[i] = total * w[i] % wsum;
        given += out[i];
    }
    for (; given < total; given++) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (rem[i] > rem[best])
                best = i;
        out[best]++;
        rem[best] = -1;
    }
}

size_t js_shares(const json_t *spec, const fg_fed_placement_t *p, int64_t *comp, int64_t *par,
                 int64_t *offset, const char **cluster) {
    int64_t w[FG_FED_MAX_CLUSTERS], wsum = 0;
    size_t n = 0;
    for (size_t i = 0; i < p->nverdicts; i++)
        if (p->verdicts[i].chosen && p->verdicts[i].replicas > 0) {
            cluster[n] = p->verdicts[i].cluster->name;
            w[n] = p->verdicts[i].replicas;
            wsum += w[n++];
        }
    js_split(js_number(spec, JS_COMPLETIONS), w, n, wsum, comp);
    js_split(js_number(spec, JS_PARALLELISM), w, n, wsum, par);
    for (size_t i = 0; i < n; i++)
        offset[i] = i == 0 ? 0 : offset[i - 1] + comp[i - 1];
    return n;
}

/* The object labels of a job set's or cron job's Jobs: the caller's, then fleetgate's. */
static json_t *object_labels(const json_t *own, const char *key, const char *name,
                             const char *tier) {
    json_t *labels = json_object();
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)own, k, val) json_object_set(labels, k, val); /* read only */
    json_object_set_new(labels, key, json_string(name));
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("fleetgate"));
    json_object_set_new(labels, AS_TIER_LABEL, json_string(tier));
    return labels;
}

json_t *js_job_spec(const json_t *spec, const char *key, const char *name, int64_t completions,
                    int64_t parallelism, int64_t offset, const fg_config_t *cfg) {
    const char *tier = as_tier(spec),
               *policy = json_string_value(json_object_get(spec, "restartPolicy"));
    char off[24];
    snprintf(off, sizeof off, "%lld", (long long)offset);
    json_t *env = json_pack("[{s:s,s:s}]", "name", JS_INDEX_ENV, "value", off);
    json_t *pod = as_pod_spec(spec, env, cfg);
    json_decref(env);
    json_object_set_new(pod, "restartPolicy", json_string(policy ? policy : "Never"));
    json_t *jspec =
        json_pack("{s:I,s:I,s:b,s:I,s:{s:{s:{s:s,s:s}},s:o}}", "completions",
                  (json_int_t)completions, "parallelism", (json_int_t)parallelism, "suspend",
                  json_is_true(json_object_get(spec, "suspend")), "backoffLimit",
                  (json_int_t)js_number(spec, JS_BACKOFF_LIMIT), "template", "metadata", "labels",
                  key, name, AS_TIER_LABEL, tier, "spec", pod);
    const char *mode = json_string_value(json_object_get(spec, "completionMode"));
    if (mode)
        json_object_set_new(jspec, "completionMode", json_string(mode));
    for (js_number_t i = JS_ACTIVE_DEADLINE; i < JS_NNUMBERS; i++)
        if (js_number(spec, i) >= 0)
            json_object_set_new(jspec, numbers[i].member, json_integer(js_number(spec, i)));
    return jspec;
}

json_t *js_job(const json_t *js, const char *project, int64_t completions, int64_t parallelism,
               int64_t offset, json_t *annotations, const fg_config_t *cfg) {
    const char *name = json_string_value(json_object_get(js, "name"));
    const json_t *spec = json_object_get(js, "spec");
    json_t *labels = object_labels(json_object_get(js, "labels"), JS_LABEL, name, as_tier(spec));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:O},s:o}", "apiVersion", "batch/v1", "kind", "Job",
                     "metadata", "name", name, "namespace", project, "labels", labels,
                     "annotations", annotations, "spec",
                     js_job_spec(spec, JS_LABEL, name, completions, parallelism, offset, cfg));
}

/* ---- cron jobs ------------------------------------------------------------------------------ */

static const char *const cj_members[] = {"name",      "project",  "labels",    "spec",
                                         "status",    "version",  "createdAt", "updatedAt",
                                         "placement", "outcomes", NULL};
static const char *const cj_spec_members[] = {"schedule",
                                              "timeZone",
                                              "concurrencyPolicy",
                                              "startingDeadlineSeconds",
                                              "suspend",
                                              "successfulRunsToKeep",
                                              "failedRunsToKeep",
                                              "jobTemplate",
                                              NULL};
static const char *const cj_spec_required[] = {"schedule", "jobTemplate", NULL};
static const char *const cj_policies[] = {"Allow", "Forbid", "Replace", NULL};
static const char *const cj_macros[] = {"@hourly",  "@daily",  "@midnight", "@weekly",
                                        "@monthly", "@yearly", "@annually", NULL};

/* One cron field: items "*", "a" or "a-b" (within lo..hi), each maybe "/step" (step 1..hi),
 * separated by commas. */
static bool cron_field_ok(const char *f, size_t n, int64_t lo, int64_t hi) {
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && f[end] != ',')
            end++;
        const char *item = f + i, *slash = memchr(item, '/', end - i);
        size_t len = slash ? (size_t)(slash - item) : end - i;
        int64_t a, b, step;
        if (slash && fg_parse_int64(slash + 1, (size_t)(f + end - slash - 1), 1, hi > 0 ? hi : 1,
                                    &step) != FG_OK)
            return false;
        if (!(len == 1 && item[0] == '*')) {
            const char *dash = memchr(item, '-', len);
            size_t alen = dash ? (size_t)(dash - item) : len;
            if (fg_parse_int64(item, alen, lo, hi, &a) != FG_OK)
                return false;
            if (dash && (fg_parse_int64(dash + 1, len - alen - 1, lo, hi, &b) != FG_OK || b < a))
                return false;
        }
        if (end == n)
            return true;
        i = end + 1;
        if (i == n)
            return false; /* a trailing comma */
    }
    return false;
}

bool cj_schedule_ok(const char *s) {
    static const int64_t bounds[5][2] = {{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}};
    for (size_t i = 0; cj_macros[i]; i++)
        if (strcmp(s, cj_macros[i]) == 0)
            return true;
    size_t nf = 0, i = 0, n = strlen(s);
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t')
            i++;
        if (nf == 5 || !cron_field_ok(s + start, i - start, bounds[nf][0], bounds[nf][1]))
            return false;
        nf++;
    }
    return nf == 5;
}

void cj_validate(vd_t *v, const json_t *cj) {
    char p[VD_PTR_MAX];
    if (!vd_object(v, cj, "", cj_members, js_required))
        return;
    vd_dns_label(v, json_object_get(cj, "name"), "/name", 52);
    vd_labels(v, json_object_get(cj, "labels"), "/labels");
    const json_t *spec = json_object_get(cj, "spec");
    if (spec == NULL || !vd_object(v, spec, "/spec", cj_spec_members, cj_spec_required))
        return;
    const json_t *sched = json_object_get(spec, "schedule");
    if (vd_string(v, sched, "/spec/schedule", 1, 128) && sched &&
        !cj_schedule_ok(json_string_value(sched)))
        vd_add(v, "/spec/schedule",
               "must be five cron fields (minute 0-59, hour 0-23, day 1-31, month 1-12, weekday "
               "0-7; *, a-b, lists, /step) or @hourly, @daily, @weekly, @monthly, @yearly");
    const json_t *tz = json_object_get(spec, "timeZone");
    if (vd_string(v, tz, "/spec/timeZone", 1, 64) && tz) {
        const char *t = json_string_value(tz);
        bool ok = (t[0] >= 'A' && t[0] <= 'Z') || (t[0] >= 'a' && t[0] <= 'z') || t[0] == '_';
        for (const char *c = t; ok && *c; c++)
            ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '/' || *c == '+' || *c == '-';
        if (!ok || strstr(t, "//") || t[strlen(t) - 1] == '/')
            vd_add(v, "/spec/timeZone", "must be an IANA time zone such as Europe/Paris");
    }
    vd_enum(v, json_object_get(spec, "concurrencyPolicy"), "/spec/concurrencyPolicy", cj_policies);
    vd_int(v, json_object_get(spec, "startingDeadlineSeconds"), "/spec/startingDeadlineSeconds", 1,
           JS_SECONDS_MAX);
    vd_bool(v, json_object_get(spec, "suspend"), "/spec/suspend");
    vd_int(v, json_object_get(spec, "successfulRunsToKeep"), "/spec/successfulRunsToKeep", 0, 100);
    vd_int(v, json_object_get(spec, "failedRunsToKeep"), "/spec/failedRunsToKeep", 0, 100);
    js_validate_spec(v, json_object_get(spec, "jobTemplate"), vd_ptr(p, "/spec", "jobTemplate"));
}

json_t *cj_cronjob(const json_t *cj, const char *project, int64_t completions, int64_t parallelism,
                   int64_t offset, json_t *annotations, const fg_config_t *cfg) {
    const char *name = json_string_value(json_object_get(cj, "name"));
    const json_t *spec = json_object_get(cj, "spec"), *tmpl = json_object_get(spec, "jobTemplate");
    const char *tier = as_tier(tmpl),
               *policy = json_string_value(json_object_get(spec, "concurrencyPolicy"));
    json_t *labels = object_labels(json_object_get(cj, "labels"), CJ_LABEL, name, tier);
    if (json_array_size(json_object_get(tmpl, "sidecars")) > 0) {
        /* what its sidecars were built from, as a Deployment's: the reconciler rolls it when
         * the catalogue changes (rc_apps_pass) */
        char digest[17];
        as_sidecars_digest(tmpl, cfg, digest);
        json_object_set_new(labels, AS_SIDECARS_LABEL, json_string(digest));
    }
    const json_t *keep_ok = json_object_get(spec, "successfulRunsToKeep"),
                 *keep_failed = json_object_get(spec, "failedRunsToKeep");
    json_t *cspec = json_pack(
        "{s:O,s:s,s:b,s:I,s:I,s:{s:{s:{s:s,s:s,s:s}},s:o}}", "schedule",
        json_object_get(spec, "schedule"), "concurrencyPolicy", policy ? policy : "Forbid",
        "suspend", json_is_true(json_object_get(spec, "suspend")), "successfulJobsHistoryLimit",
        (json_int_t)(keep_ok ? json_integer_value(keep_ok) : 3), "failedJobsHistoryLimit",
        (json_int_t)(keep_failed ? json_integer_value(keep_failed) : 1), "jobTemplate", "metadata",
        "labels", CJ_LABEL, name, "app.kubernetes.io/managed-by", "fleetgate", AS_TIER_LABEL, tier,
        "spec", js_job_spec(tmpl, CJ_LABEL, name, completions, parallelism, offset, cfg));
    /* Scheduled runs are charged to the quota: one the template lets run starts suspended,
     * and the reconciler admits it (CJ_ADMISSION_ANNOTATION). */
    json_t *jt = json_object_get(cspec, "jobTemplate");
    if (!json_is_true(json_object_get(tmpl, "suspend"))) {
        json_object_set_new(json_object_get(jt, "spec"), "suspend", json_true());
        json_object_set_new(json_object_get(jt, "metadata"), "annotations",
                            json_pack("{s:s}", CJ_ADMISSION_ANNOTATION, "quota"));
    }
    if (json_object_get(spec, "timeZone"))
        json_object_set(cspec, "timeZone", json_object_get(spec, "timeZone"));
    if (json_object_get(spec, "startingDeadlineSeconds"))
        json_object_set(cspec, "startingDeadlineSeconds",
                        json_object_get(spec, "startingDeadlineSeconds"));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:O},s:o}", "apiVersion", "batch/v1", "kind",
                     "CronJob", "metadata", "name", name, "namespace", project, "labels", labels,
                     "annotations", annotations, "spec", cspec);
}
