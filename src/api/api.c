/* api/api.c: the application state that handlers share, built once at start-up. */
#include "api_internal.h"
#include "fleetgate/cache.h"
#include "fleetgate/fed.h"
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SPEC_MAX_BYTES          (8u << 20)
#define FED_SNAPSHOT_MAX_AGE_MS 1000
#define RECONCILE_PERIOD_MS     2000

int fg_api_new(fg_api_t **out, const fg_config_t *cfg) {
    fg_api_t *api = fg_xcalloc(1, sizeof *api);
    api->cfg = cfg;
    int rc = fg_read_file(cfg->openapi_file, SPEC_MAX_BYTES, &api->openapi, &api->openapi_len);
    if (rc != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "openapi_file %s: cannot read it", cfg->openapi_file);
        fg_api_free(api);
        return FG_ENOENT;
    }
    if (fg_read_file(cfg->docs_file, SPEC_MAX_BYTES, &api->docs, &api->docs_len) != FG_OK) {
        api->docs = NULL;
        fg_log(FG_LOG_INFO, NULL, "docs_file %s not found: /docs answers 404 (make docs builds it)",
               cfg->docs_file);
    }
    /* The API's own pool (one connection per worker and per thread of the writes' handler pool,
     * and one each for the reconciler and the registry's refresher, so neither holds a
     * worker's), apart from the rate limiter's so a slow page never queues behind a rate-limit
     * check or the other way round. Its deadline is short (redis.timeout_ms): a hung Redis must
     * cost a read a few ms (the pool's breaker), not a worker for a second. */
    unsigned workers = (unsigned)(cfg->workers > 0 ? cfg->workers : 1);
    if (fg_redis_new(&api->redis, cfg->redis_url, workers + fg_http_pool_threads(workers) + 2,
                     (unsigned)(cfg->redis_call_timeout_ms > 0 ? cfg->redis_call_timeout_ms
                                                               : 250)) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "redis.url: cannot use it for the read APIs");
        fg_api_free(api);
        return FG_EINVAL;
    }
    /* GET of one pod is the hottest read: served from local copies that Redis keeps exact. */
    fg_cache_key_t prefix;
    fg_cache_key_objects_prefix(&prefix, fg_kube_kind_info(FG_KIND_POD)->name);
    if (cfg->cache.mirror_mb > 0 &&
        fg_redis_mirror_new(&api->pod_mirror, api->redis, prefix.s,
                            (size_t)cfg->cache.mirror_mb << 20) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "cache.mirror_mb: cannot start the pod mirror");
        fg_api_free(api);
        return FG_ERR;
    }
    /* One registry snapshot a second serves every placement and cluster read. */
    if (fg_fed_new(&api->fed, cfg, api->redis, FED_SNAPSHOT_MAX_AGE_MS) != FG_OK) {
        fg_api_free(api);
        return FG_EINVAL;
    }
    /* One replica at a time completes what writes left undone (a lease in Redis). */
    if (cfg->cache.enabled && cfg->nclusters > 0) {
        char holder[128];
        if (cfg->cache.replica_id)
            snprintf(holder, sizeof holder, "%s", cfg->cache.replica_id);
        else
            snprintf(holder, sizeof holder, "reconciler-%ld-%llx", (long)getpid(),
                     (unsigned long long)fg_hash64(&api, sizeof api, (uint64_t)fg_now_ns()));
        api->rc_apps = rc_apps_new(api, RECONCILE_PERIOD_MS);
        if (fg_fed_reconciler_start(&api->reconciler, api->fed, holder, RECONCILE_PERIOD_MS,
                                    rc_apps_pass, api->rc_apps) != FG_OK)
            fg_log(FG_LOG_ERROR, NULL, "fed: cannot start the reconciler");
    }
    *out = api;
    return FG_OK;
}

void fg_api_free(fg_api_t *api) {
    if (api == NULL)
        return;
    fg_fed_reconciler_stop(api->reconciler); /* before the fed it uses */
    rc_apps_free(api->rc_apps);
    fg_fed_free(api->fed);                 /* before the pool it borrows */
    fg_redis_mirror_free(api->pod_mirror); /* before the pool it borrows */
    fg_redis_free(api->redis);
    free(api->openapi);
    free(api->docs);
    free(api);
}

void fg_api_set_streams(fg_api_t *api, struct fg_streams *streams) {
    api->streams = streams;
}

static void live_release(void *l) {
    fg_live_release(l);
}

const fg_config_t *api_live_cfg(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    fg_live_t *l = fg_req_app_state(req);
    if (l == NULL) {
        l = fg_live_acquire();
        if (l == NULL)
            return api->cfg;
        fg_req_set_app_state(req, l, live_release);
    }
    return fg_live_config(l);
}
