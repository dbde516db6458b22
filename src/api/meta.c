/* api/meta.c: the platform's own endpoints: liveness, readiness, metrics, the contract and its
 * rendered reference. None of them needs a caller's identity. */
#include "api_internal.h"
#include "fleetgate/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_MAX_BYTES  (8u << 20)
#define READY_MAX_CLUSTERS 64

/* The resources every member cluster's informers cache; a cluster is synced when each one is. */
static const char *const cached_resources[] = {
    "namespaces", "nodes", "pods", "deployments", "jobs", "cronjobs", "horizontalpodautoscalers",
    "events"};
#define NCACHED (sizeof cached_resources / sizeof cached_resources[0])

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

/* The value of field in an HGETALL reply ("" when absent). */
static const char *hget(const fg_redis_reply_t *h, const char *field, char *out, size_t outlen) {
    out[0] = '\0';
    for (size_t i = 0; i + 1 < fg_redis_reply_len(h); i += 2) {
        size_t klen, vlen;
        const char *k = fg_redis_reply_str(fg_redis_reply_at(h, i), &klen);
        const char *v = fg_redis_reply_str(fg_redis_reply_at(h, i + 1), &vlen);
        if (k && v && klen == strlen(field) && memcmp(k, field, klen) == 0)
            snprintf(out, outlen, "%.*s", (int)vlen, v);
    }
    return out;
}

/* Whether a resource finished its first sync (fg:sync, cache/SCHEMA.md): Synced or Lagging, or
 * Relisting after a first sync. */
static bool synced_once(const fg_redis_reply_t *h) {
    char state[32], last[32];
    hget(h, "state", state, sizeof state);
    hget(h, "lastSyncMs", last, sizeof last);
    return strcmp(state, "Synced") == 0 || strcmp(state, "Lagging") == 0 ||
           (strcmp(state, "Relisting") == 0 && last[0] != '\0' && strcmp(last, "0") != 0);
}

/* Redis answers, and every reachable member cluster finished its first sync (from fg:cluster and
 * fg:sync, so the informers of every replica count); unreachable clusters are reported as such
 * and not waited on. One pipeline: PING, then each cluster's health and sync hashes. */
static void cache_checks(const fg_api_t *api, json_t *checks, char *failed, size_t failedlen) {
    const fg_config_t *cfg = api->cfg;
    size_t nc = cfg->nclusters < READY_MAX_CLUSTERS ? cfg->nclusters : READY_MAX_CLUSTERS;
    size_t n = 1 + nc * (1 + NCACHED);
    char(*keys)[160] = fg_xcalloc(n, sizeof *keys);
    const char *(*argv)[2] = fg_xcalloc(n, sizeof *argv);
    const char *const **argvs = fg_xcalloc(n, sizeof *argvs);
    size_t *argcs = fg_xcalloc(n, sizeof *argcs);
    fg_redis_reply_t **reps = fg_xcalloc(n, sizeof *reps);
    argv[0][0] = "PING";
    argcs[0] = 1;
    for (size_t c = 0; c < nc; c++) {
        size_t base = 1 + c * (1 + NCACHED);
        snprintf(keys[base], sizeof keys[0], "fg:cluster:%s", cfg->clusters[c].name);
        for (size_t r = 0; r < NCACHED; r++)
            snprintf(keys[base + 1 + r], sizeof keys[0], "fg:sync:%s:%s", cfg->clusters[c].name,
                     cached_resources[r]);
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            argv[i][0] = "HGETALL";
            argv[i][1] = keys[i];
            argcs[i] = 2;
        }
        argvs[i] = argv[i];
    }
    char why[256];
    if (fg_redis_pipeline(api->redis, n, argcs, argvs, reps, why, sizeof why) != FG_OK) {
        note(checks, failed, failedlen, "redis", strncmp(why, "redis: ", 7) == 0 ? why + 7 : why);
        goto out;
    }
    note(checks, failed, failedlen, "redis", NULL);
    for (size_t c = 0; c < nc; c++) {
        size_t base = 1 + c * (1 + NCACHED);
        char name[96], health[32], err[160], pending[256] = "";
        snprintf(name, sizeof name, "cluster:%s", cfg->clusters[c].name);
        if (strcmp(hget(reps[base], "health", health, sizeof health), "Unreachable") == 0) {
            hget(reps[base], "lastError", err, sizeof err);
            snprintf(why, sizeof why, "unreachable%s%s", err[0] ? ": " : "", err);
            json_object_set_new(checks, name, json_string(why)); /* reported, not waited on */
            continue;
        }
        for (size_t r = 0, used = 0; r < NCACHED && used < sizeof pending; r++)
            if (!synced_once(reps[base + 1 + r]))
                used += (size_t)snprintf(pending + used, sizeof pending - used, "%s%s",
                                         used ? ", " : "", cached_resources[r]);
        if (pending[0])
            snprintf(why, sizeof why, "first sync not finished: %s", pending);
        note(checks, failed, failedlen, name, pending[0] ? why : NULL);
    }
out:
    for (size_t i = 0; i < n; i++)
        fg_redis_reply_free(reps[i]);
    free(reps);
    free(argcs);
    free(argvs);
    free(argv);
    free(keys);
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
