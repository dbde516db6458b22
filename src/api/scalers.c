/* api/scalers.c: what scalers (HorizontalPodAutoscalers, one per cluster of an app) impose on
 * the other writes: a manual scale of an app must stay within the bounds of every scaler that
 * targets it, summed over the clusters its HPAs are in, since the HPAs would undo a scale past
 * them (or scale back from below) at their next sync. Read from the cache, so an HPA made with
 * kubectl counts as much as one fleetgate made. */
#include "workload.h"

#include <stdio.h>
#include <string.h>

bool sc_bounds_or_reply(fg_req_t *req, const char *project, const char *app, int64_t replicas) {
    fg_api_t *api = fg_req_app(req);
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        fg_redis_batch_addv(b, "HGETALL",
                            fg_cache_key_objects(&k, "scaler", api->cfg->clusters[i].name, project),
                            NULL);
    bool ok = rd_batch_or_reply(req, api, b);
    json_t *bounds = json_object(); /* scaler -> [min, max, clusters] */
    for (size_t i = 0; ok && i < api->cfg->nclusters; i++) {
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, i);
        for (size_t r = 1; r < fg_redis_reply_len(h); r += 2) {
            json_t *o = rd_parse_object(fg_redis_reply_at(h, r), fg_req_id(req));
            const json_t *target = json_object_get(o, "target");
            const char *name = rd_str(o, "name"), *kind = rd_str(target, "kind"),
                       *to = rd_str(target, "name");
            if (name && kind && to && strcmp(kind, "Deployment") == 0 && strcmp(to, app) == 0) {
                json_t *sum = json_object_get(bounds, name);
                if (sum == NULL) {
                    sum = json_pack("[I,I,I]", (json_int_t)0, (json_int_t)0, (json_int_t)0);
                    json_object_set_new(bounds, name, sum);
                }
                int64_t add[3] = {rd_int(o, "minReplicas", 1), rd_int(o, "maxReplicas", 1), 1};
                for (size_t x = 0; x < 3; x++)
                    json_array_set_new(
                        sum, x, json_integer(json_integer_value(json_array_get(sum, x)) + add[x]));
            }
            json_decref(o);
        }
    }
    fg_redis_batch_free(b);
    const char *name;
    json_t *sum;
    json_object_foreach(bounds, name, sum) {
        int64_t lo = json_integer_value(json_array_get(sum, 0)),
                hi = json_integer_value(json_array_get(sum, 1)),
                n = json_integer_value(json_array_get(sum, 2));
        if (ok && (replicas < lo || replicas > hi)) {
            fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                             "app %s is autoscaled by scaler %s between %lld and %lld replicas "
                             "(over %lld clusters): %lld is outside those bounds, and the scaler "
                             "would undo it; change the scaler's minReplicas/maxReplicas or "
                             "delete it first",
                             app, name, (long long)lo, (long long)hi, (long long)n,
                             (long long)replicas);
            ok = false;
        }
    }
    json_decref(bounds);
    return ok;
}
