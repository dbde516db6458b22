/* api/meta.c: the platform's own endpoints: liveness, readiness, metrics, the contract and its
 * rendered reference. None of them needs a caller's identity. */
#include "api_internal.h"
#include "fleetgate/cache.h"
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_MAX_BYTES  (8u << 20)
#define READY_MAX_CLUSTERS 64

static bool server_accepting(const fg_api_t *api, const fg_req_t *req, char *why, size_t whylen) {
    (void)api;
    if (!fg_req_draining(req))
        return true;
    snprintf(why, whylen, "shutting down");
    return false;
}

const ready_check_t fg_api_ready_checks[] = {
    {"server", server_accepting},
};
const size_t fg_api_nready_checks = sizeof fg_api_ready_checks / sizeof fg_api_ready_checks[0];

int fg_api_healthz(fg_req_t *req) {
    return fg_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

static void note(json_t *checks, char *failed, size_t failedlen, const char *name,
                 const char *why) {
    json_object_set_new(checks, name, json_string(why ? why : "ok"));
    if (why == NULL)
        return;
    size_t used = strlen(failed);
    snprintf(failed + used, failedlen - used, "%s%s: %s", used ? "; " : "", name, why);
}

/* Redis answers, and every reachable member cluster finished its first sync (from fg:cluster and
 * fg:sync, so the informers of every replica count); unreachable clusters are reported as such
 * and not waited on. One round trip: PING, then each cluster's health and sync hashes. */
static void cache_checks(const fg_api_t *api, json_t *checks, char *failed, size_t failedlen) {
    const fg_config_t *cfg = api->cfg;
    size_t nc = cfg->nclusters < READY_MAX_CLUSTERS ? cfg->nclusters : READY_MAX_CLUSTERS;
    size_t first[READY_MAX_CLUSTERS]; /* the cluster's hash, then one sync hash per kind */
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_redis_batch_addv(b, "PING", NULL);
    for (size_t c = 0; c < nc; c++)
        first[c] = fg_cache_batch_add_state(b, cfg->clusters[c].name, NULL);
    char why[256];
    if (fg_redis_batch_run(api->redis, b, why, sizeof why) != FG_OK) {
        note(checks, failed, failedlen, "redis", strncmp(why, "redis: ", 7) == 0 ? why + 7 : why);
        goto out;
    }
    note(checks, failed, failedlen, "redis", NULL);
    for (size_t c = 0; c < nc; c++) {
        char name[96], pending[256] = "";
        fg_cache_cluster_t health;
        snprintf(name, sizeof name, "cluster:%s", cfg->clusters[c].name);
        fg_cache_cluster_read(fg_redis_batch_reply(b, first[c]), &health);
        if (health.health == FG_HEALTH_UNREACHABLE) {
            snprintf(why, sizeof why, "unreachable%s%.159s", health.last_error[0] ? ": " : "",
                     health.last_error);
            json_object_set_new(checks, name, json_string(why)); /* reported, not waited on */
            continue;
        }
        for (size_t k = 0, used = 0; k < FG_KIND_COUNT && used < sizeof pending; k++) {
            fg_cache_sync_t sync;
            fg_cache_sync_read(fg_redis_batch_reply(b, first[c] + 1 + k), &sync);
            if (!fg_cache_sync_done_once(&sync))
                used +=
                    (size_t)snprintf(pending + used, sizeof pending - used, "%s%s",
                                     used ? ", " : "", fg_kube_kind_info((fg_kind_t)k)->resource);
        }
        if (pending[0])
            snprintf(why, sizeof why, "first sync not finished: %s", pending);
        note(checks, failed, failedlen, name, pending[0] ? why : NULL);
    }
out:
    fg_redis_batch_free(b);
}

int fg_api_readyz(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    json_t *checks = json_object();
    char failed[1024] = "";
    for (size_t i = 0; i < fg_api_nready_checks; i++) {
        char why[256] = "";
        const ready_check_t *c = &fg_api_ready_checks[i];
        note(checks, failed, sizeof failed, c->name,
             c->check(api, req, why, sizeof why) ? NULL : why);
    }
    cache_checks(api, checks, failed, sizeof failed);
    if (failed[0] == '\0')
        return fg_reply_json(req, 200, json_pack("{s:s,s:o}", "status", "ready", "checks", checks));
    return fg_reply_problem_ext(req, FG_PROBLEM_NOT_READY, json_pack("{s:o}", "checks", checks),
                                "not ready: %s", failed);
}

int fg_api_metrics(fg_req_t *req) {
    fg_buf_t b;
    fg_buf_init(&b, METRICS_MAX_BYTES);
    const fg_api_t *api = fg_req_app(req);
    int rc = fg_metrics_render(&b);
    if (rc == FG_OK && api->pod_mirror) {
        fg_redis_mirror_stats_t m;
        fg_redis_mirror_stats(api->pod_mirror, &m);
        rc = fg_buf_appendf(
            &b,
            "# HELP fleetgate_pod_mirror_live Whether GETs of pods are served from local copies.\n"
            "# TYPE fleetgate_pod_mirror_live gauge\nfleetgate_pod_mirror_live %d\n"
            "# TYPE fleetgate_pod_mirror_hits_total counter\nfleetgate_pod_mirror_hits_total %llu\n"
            "# TYPE fleetgate_pod_mirror_misses_total counter\n"
            "fleetgate_pod_mirror_misses_total %llu\n"
            "# TYPE fleetgate_pod_mirror_invalidations_total counter\n"
            "fleetgate_pod_mirror_invalidations_total %llu\n"
            "# TYPE fleetgate_pod_mirror_resets_total counter\n"
            "fleetgate_pod_mirror_resets_total %llu\n"
            "# TYPE fleetgate_pod_mirror_bytes gauge\nfleetgate_pod_mirror_bytes %zu\n",
            m.live ? 1 : 0, (unsigned long long)m.hits, (unsigned long long)m.misses,
            (unsigned long long)m.invalidations, (unsigned long long)m.resets, m.bytes);
    }
    if (rc == FG_OK)
        rc = fg_buf_appendf(&b,
                            "# HELP fleetgate_log_lines_dropped_total Access-log lines dropped "
                            "because the log's batch was full.\n"
                            "# TYPE fleetgate_log_lines_dropped_total counter\n"
                            "fleetgate_log_lines_dropped_total %llu\n",
                            (unsigned long long)fg_log_dropped());
    if (rc != FG_OK) {
        fg_buf_free(&b);
        return fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the metrics exposition is too large");
    }
    size_t len;
    char *text = fg_buf_steal(&b, &len);
    return fg_reply_take(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

int fg_api_openapi(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    return fg_reply_static(req, 200, "application/yaml", api->openapi, api->openapi_len);
}

int fg_api_docs(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    if (api->docs == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND,
                                "the API reference was not built (run `make docs`)");
    return fg_reply_static(req, 200, "text/html; charset=utf-8", api->docs, api->docs_len);
}
