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

void js_validate(vd_t *v, const json_t *js) {
    char p[VD_PTR_MAX];
    if (!vd_object(v, js, "", js_members, js_required))
        return;
    vd_dns_label(v, json_object_get(js, "name"), "/name", 63);
    vd_labels(v, json_object_get(js, "labels"), "/labels");
    const json_t *spec = json_object_get(js, "spec");
    if (spec == NULL || !vd_object(v, spec, "/spec", spec_members, spec_required))
        return;
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        vd_int(v, json_object_get(spec, numbers[i].member), vd_ptr(p, "/spec", numbers[i].member),
               numbers[i].lo, numbers[i].hi);
    vd_enum(v, json_object_get(spec, "completionMode"), "/spec/completionMode", modes);
    vd_enum(v, json_object_get(spec, "restartPolicy"), "/spec/restartPolicy", restart_policies);
    vd_bool(v, json_object_get(spec, "suspend"), "/spec/suspend");
    as_validate_pod_parts(v, spec, "/spec");
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

json_t *js_job(const json_t *js, const char *project, int64_t completions, int64_t parallelism,
               int64_t offset, json_t *annotations) {
    const char *name = json_string_value(json_object_get(js, "name"));
    const json_t *spec = json_object_get(js, "spec");
    const char *tier = as_tier(spec),
               *policy = json_string_value(json_object_get(spec, "restartPolicy"));
    json_t *labels = json_object();
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(js, "labels"), k, val) json_object_set(labels, k, val);
    json_object_set_new(labels, JS_LABEL, json_string(name));
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("fleetgate"));
    json_object_set_new(labels, AS_TIER_LABEL, json_string(tier));
    char off[24];
    snprintf(off, sizeof off, "%lld", (long long)offset);
    json_t *env = json_pack("[{s:s,s:s}]", "name", JS_INDEX_ENV, "value", off);
    json_t *pod = as_pod_spec(spec, env);
    json_decref(env);
    json_object_set_new(pod, "restartPolicy", json_string(policy ? policy : "Never"));
    json_t *jspec =
        json_pack("{s:I,s:I,s:b,s:I,s:{s:{s:{s:s,s:s}},s:o}}", "completions",
                  (json_int_t)completions, "parallelism", (json_int_t)parallelism, "suspend",
                  json_is_true(json_object_get(spec, "suspend")), "backoffLimit",
                  (json_int_t)js_number(spec, JS_BACKOFF_LIMIT), "template", "metadata", "labels",
                  JS_LABEL, name, AS_TIER_LABEL, tier, "spec", pod);
    const char *mode = json_string_value(json_object_get(spec, "completionMode"));
    if (mode)
        json_object_set_new(jspec, "completionMode", json_string(mode));
    for (js_number_t i = JS_ACTIVE_DEADLINE; i < JS_NNUMBERS; i++)
        if (js_number(spec, i) >= 0)
            json_object_set_new(jspec, numbers[i].member, json_integer(js_number(spec, i)));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:O},s:o}", "apiVersion", "batch/v1", "kind", "Job",
                     "metadata", "name", name, "namespace", project, "labels", labels,
                     "annotations", annotations, "spec", jspec);
}
