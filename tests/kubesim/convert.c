/* convert: HorizontalPodAutoscalers served as autoscaling/v1 beside the stored autoscaling/v2,
 * as a real server serves both versions of one object. v1 knows one metric, the CPU
 * utilization target (spec.targetCPUUtilizationPercentage, status.currentCPUUtilization-
 * Percentage), which is v2's Resource metric `cpu` with an Utilization target; a v1 write keeps
 * only that metric (a real server also keeps the others in annotations; kubesim does not). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

static const json_t *cpu_metric(const json_t *metrics, const char *value_key) {
    size_t i;
    const json_t *m;
    json_array_foreach(metrics, i, m) {
        const json_t *res = json_object_get(m, "resource");
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *name = json_string_value(json_object_get(res, "name"));
        if (type != NULL && strcmp(type, "Resource") == 0 && name != NULL &&
            strcmp(name, "cpu") == 0)
            return json_object_get(res, value_key);
    }
    return NULL;
}

static void copy_member(json_t *to, const json_t *from, const char *key) {
    json_t *v = json_object_get(from, key);
    if (v != NULL)
        json_object_set(to, key, v);
}

json_t *ks_hpa_to_v1(const json_t *v2) {
    json_t *out = json_deep_copy(v2);
    const json_t *spec = json_object_get(v2, "spec"), *status = json_object_get(v2, "status");
    json_t *s1 = json_object(), *st1 = json_object();
    copy_member(s1, spec, "scaleTargetRef");
    copy_member(s1, spec, "minReplicas");
    copy_member(s1, spec, "maxReplicas");
    const json_t *target = cpu_metric(json_object_get(spec, "metrics"), "target");
    if (json_is_integer(json_object_get(target, "averageUtilization")))
        json_object_set(s1, "targetCPUUtilizationPercentage",
                        json_object_get(target, "averageUtilization"));
    copy_member(st1, status, "observedGeneration");
    copy_member(st1, status, "lastScaleTime");
    /* v1's replica counts are not omitempty: 0 when v2 left them out */
    json_object_set_new(
        st1, "currentReplicas",
        json_integer(json_integer_value(json_object_get(status, "currentReplicas"))));
    json_object_set_new(
        st1, "desiredReplicas",
        json_integer(json_integer_value(json_object_get(status, "desiredReplicas"))));
    const json_t *cur = cpu_metric(json_object_get(status, "currentMetrics"), "current");
    if (json_is_integer(json_object_get(cur, "averageUtilization")))
        json_object_set(st1, "currentCPUUtilizationPercentage",
                        json_object_get(cur, "averageUtilization"));
    json_object_set_new(out, "apiVersion", json_string("autoscaling/v1"));
    json_object_set_new(out, "spec", s1);
    json_object_set_new(out, "status", st1);
    return out;
}

json_t *ks_hpa_from_v1(const json_t *v1) {
    json_t *out = json_deep_copy(v1);
    const json_t *spec = json_object_get(v1, "spec"), *status = json_object_get(v1, "status");
    json_t *s2 = json_object(), *st2 = json_object();
    const json_t *pct = json_object_get(spec, "targetCPUUtilizationPercentage");
    const json_t *cur = json_object_get(status, "currentCPUUtilizationPercentage");
    copy_member(s2, spec, "scaleTargetRef");
    copy_member(s2, spec, "minReplicas");
    copy_member(s2, spec, "maxReplicas");
    if (json_is_integer(pct))
        json_object_set_new(s2, "metrics",
                            json_pack("[{s:s, s:{s:s, s:{s:s, s:O}}}]", "type", "Resource",
                                      "resource", "name", "cpu", "target", "type", "Utilization",
                                      "averageUtilization", pct));
    copy_member(st2, status, "observedGeneration");
    copy_member(st2, status, "lastScaleTime");
    copy_member(st2, status, "currentReplicas");
    copy_member(st2, status, "desiredReplicas");
    if (json_is_integer(cur))
        json_object_set_new(st2, "currentMetrics",
                            json_pack("[{s:s, s:{s:s, s:{s:O}}}]", "type", "Resource", "resource",
                                      "name", "cpu", "current", "averageUtilization", cur));
    json_object_set_new(out, "apiVersion", json_string("autoscaling/v2"));
    if (json_is_object(spec))
        json_object_set_new(out, "spec", s2);
    else
        json_decref(s2);
    if (json_is_object(status))
        json_object_set_new(out, "status", st2);
    else
        json_decref(st2);
    return out;
}

void ks_v1_reply(ks_resp_t *out) {
    json_t *j = NULL;
    if (out->body == NULL || out->code >= 300 ||
        fg_json_load(out->body, out->len, &j, NULL, 0) != FG_OK)
        return;
    const char *kind = json_string_value(json_object_get(j, "kind"));
    json_t *conv = NULL;
    if (kind != NULL && strcmp(kind, "HorizontalPodAutoscaler") == 0) {
        conv = ks_hpa_to_v1(j);
    } else if (kind != NULL && strcmp(kind, "HorizontalPodAutoscalerList") == 0) {
        json_t *items = json_array(), *it;
        size_t i;
        json_array_foreach(json_object_get(j, "items"), i, it)
            json_array_append_new(items, ks_hpa_to_v1(it));
        conv = json_deep_copy(j);
        json_object_set_new(conv, "apiVersion", json_string("autoscaling/v1"));
        json_object_set_new(conv, "items", items);
    }
    json_decref(j);
    if (conv == NULL)
        return; /* a Status, a Table: the same in both versions */
    free(out->body);
    out->body = NULL;
    ks_json_reply(out, out->code, conv);
}
