/* api/logs.c: GET /v1/projects/{project}/pods/{pod}/logs. The pod's cluster is found in the
 * cache (no upstream GET), the parameters are checked against the contract and passed to the
 * cluster's log subresource, and the request is handed to the stream loop (stream.h), which
 * relays the text chunked. One audit line per session when it ends. */
#include "fleetgate/auth.h"
#include "fleetgate/stream.h"
#include "reads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOG_PATH_MAX 1024

/* A boolean query flag: absent is false; "true"/"false" (any case) otherwise, else 422. */
bool fg_api_flag_or_reply(fg_req_t *req, const char *name, bool *out) {
    const char *v = fg_req_query(req, name);
    *out = false;
    if (v == NULL || strcasecmp(v, "false") == 0)
        return true;
    if (strcasecmp(v, "true") == 0) {
        *out = true;
        return true;
    }
    rd_reply_invalid_param(req, name, "must be true or false (got \"%.32s\")", v);
    return false;
}

/* An optional integer in [min, max]; *out is -1 when absent. */
static bool int_or_reply(fg_req_t *req, const char *name, int64_t min, int64_t max, int64_t *out) {
    const char *v = fg_req_query(req, name);
    *out = -1;
    if (v == NULL)
        return true;
    if (fg_parse_int64(v, strlen(v), min, max, out) == FG_OK)
        return true;
    rd_reply_invalid_param(req, name, "must be an integer from %lld to %lld (got \"%.32s\")",
                           (long long)min, (long long)max, v);
    return false;
}

/* The query of the cluster's log subresource from the request's (all checked: 422 otherwise).
 */
static bool log_query_or_reply(fg_req_t *req, char *out, size_t outlen) {
    const char *container;
    bool follow, timestamps, previous;
    int64_t tail, since, limit;
    if (!rd_label_param_or_reply(req, "container", &container) ||
        !fg_api_flag_or_reply(req, "follow", &follow) ||
        !fg_api_flag_or_reply(req, "timestamps", &timestamps) ||
        !fg_api_flag_or_reply(req, "previous", &previous) ||
        !int_or_reply(req, "tailLines", 1, 100000, &tail) ||
        !int_or_reply(req, "sinceSeconds", 1, 2592000, &since) ||
        !int_or_reply(req, "limitBytes", 1, 67108864, &limit))
        return false;
    size_t n = 0;
    n += (size_t)snprintf(out + n, outlen - n, "?follow=%s&timestamps=%s&previous=%s",
                          follow ? "true" : "false", timestamps ? "true" : "false",
                          previous ? "true" : "false");
    if (container && n < outlen)
        n += (size_t)snprintf(out + n, outlen - n, "&container=%s", container);
    if (tail > 0 && n < outlen)
        n += (size_t)snprintf(out + n, outlen - n, "&tailLines=%lld", (long long)tail);
    if (since > 0 && n < outlen)
        n += (size_t)snprintf(out + n, outlen - n, "&sinceSeconds=%lld", (long long)since);
    if (limit > 0 && n < outlen)
        snprintf(out + n, outlen - n, "&limitBytes=%lld", (long long)limit);
    return true;
}

/* The one cluster the pod is in (after ?cluster=): 404 when none, 409 when several. */
bool fg_api_pod_cluster_or_reply(fg_req_t *req, const char *project, const char *pod, char *cluster,
                                 size_t len) {
    const char *only;
    char *raws[RD_MAX_CLUSTERS];
    size_t lens[RD_MAX_CLUSTERS], found, at = 0;
    rd_ctx_t c;
    /* The Kubernetes-compatible routes name the cluster in their path (kubeapi.c). */
    only = fg_req_param(req, "cluster");
    if ((only == NULL && !rd_label_param_or_reply(req, "cluster", &only)) ||
        !rd_get_raw_or_reply(&c, req, "pod", project, pod, only, raws, lens, &found, NULL))
        return false;
    for (size_t i = 0; i < c.nparts; i++) {
        if (raws[i])
            at = i;
        free(raws[i]);
    }
    if (found == 0)
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no pod %s in project %s%s%s", pod, project,
                         only ? " in cluster " : "", only ? only : "");
    else if (found > 1)
        fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                         "pod %s exists in several clusters: name one with ?cluster=", pod);
    else
        snprintf(cluster, len, "%s", c.parts[at].conf->name);
    return found == 1;
}

/* The session's audit line (a stream that never answered 200 was audited, if at all, by the
 * gate's seal). */
static void log_session_end(fg_req_t *req, const fg_stream_stats_t *st, void *ud) {
    (void)ud;
    unsigned status = fg_req_status(req);
    if (status != 200)
        return;
    char start[40], end[40];
    fg_format_time_ms(st->start_ms, start, sizeof start);
    fg_format_time_ms(st->end_ms, end, sizeof end);
    const char *pod = fg_req_param(req, "pod");
    json_t *session = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:s}", "kind", "logs", "cluster",
                                st->cluster, "pod", pod ? pod : "*", "start", start, "end", end,
                                "bytesIn", (json_int_t)st->bytes_in, "bytesOut",
                                (json_int_t)st->bytes_out, "endedBy", st->end);
    const char *container = fg_req_query(req, "container");
    if (container)
        json_object_set_new(session, "container", json_string(container));
    fg_auth_audit_session(req, status, session);
    json_decref(session);
}

static void renew_slot(const fg_req_t *req) {
    if (fg_auth_renew_stream(req) != FG_OK)
        FG_LOG(FG_LOG_WARN, fg_req_id(req), "the stream slot could not be renewed");
}

int fg_api_get_pod_logs(fg_req_t *req) {
    fg_api_t *api = fg_req_app(req);
    const char *project = fg_req_param(req, "project"), *pod = fg_req_param(req, "pod");
    char cluster[64], query[LOG_PATH_MAX / 2], path[LOG_PATH_MAX];
    if (!log_query_or_reply(req, query, sizeof query) ||
        !fg_api_pod_cluster_or_reply(req, project, pod, cluster, sizeof cluster))
        return FG_OK;
    if (api->streams == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_READY, "streams are not running here");
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log%s", project, pod, query);
    fg_stream_opts_t opts = {.content_type = "text/plain; charset=utf-8",
                             .on_end = log_session_end,
                             .renew = renew_slot,
                             .renew_s = fg_auth_stream_renew_s(req)};
    fg_stream_start_kube(api->streams, req, cluster, path, &opts);
    return FG_OK;
}

/* ---- an app's pods across clusters ------------------------------------------ */

/* What the stream loop asks every 2 s: the app's pods now (owned by the stream). */
typedef struct {
    fg_api_t *api;
    char project[64], app[64];
} app_pods_t;

/* The pods of the app in one cluster's part of the cache (an HSCAN of the project's pods: the
 * cache keeps no index by app). false when Redis cannot answer. */
static bool scan_cluster(const app_pods_t *d, const char *cluster, fg_stream_pod_t *pods,
                         size_t max, size_t *n) {
    fg_cache_key_t k;
    const char *key = fg_cache_key_objects(&k, "pod", cluster, d->project);
    char cursor[32] = "0";
    for (int page = 0; page < 200 && *n < max; page++) {
        const char *argv[] = {"HSCAN", key, cursor, "COUNT", "500"};
        fg_redis_reply_t *r = NULL;
        if (fg_redis_query(d->api->redis, 5, argv, &r, NULL, 0) != FG_OK)
            return false;
        const fg_redis_reply_t *next = fg_redis_reply_at(r, 0), *kv = fg_redis_reply_at(r, 1);
        size_t clen = 0;
        const char *c = next ? fg_redis_reply_str(next, &clen) : NULL;
        for (size_t i = 0; i + 1 < fg_redis_reply_len(kv) && *n < max; i += 2) {
            size_t flen, vlen;
            const char *f = fg_redis_reply_str(fg_redis_reply_at(kv, i), &flen);
            const char *v = fg_redis_reply_str(fg_redis_reply_at(kv, i + 1), &vlen);
            json_t *obj = v ? rd_parse_cached(v, vlen, NULL) : NULL;
            const char *app = obj ? rd_str(obj, "app") : NULL;
            if (app && strcmp(app, d->app) == 0 && flen < sizeof pods[0].pod) {
                snprintf(pods[*n].cluster, sizeof pods[*n].cluster, "%s", cluster);
                snprintf(pods[*n].pod, sizeof pods[*n].pod, "%.*s", (int)flen, f);
                (*n)++;
            }
            json_decref(obj);
        }
        bool done = c == NULL || clen == 0 || clen >= sizeof cursor || (clen == 1 && c[0] == '0');
        if (!done)
            snprintf(cursor, sizeof cursor, "%.*s", (int)clen, c);
        fg_redis_reply_free(r);
        if (done)
            break;
    }
    return true;
}

static size_t list_app_pods(void *ud, fg_stream_pod_t *pods, size_t max, bool *ok) {
    const app_pods_t *d = ud;
    size_t n = 0;
    *ok = true;
    for (size_t i = 0; i < d->api->cfg->nclusters && *ok; i++)
        *ok = scan_cluster(d, d->api->cfg->clusters[i].name, pods, max, &n);
    return n;
}

int fg_api_get_app_logs(fg_req_t *req) {
    fg_api_t *api = fg_req_app(req);
    const char *project = fg_req_param(req, "project"), *app = fg_req_param(req, "app");
    char query[LOG_PATH_MAX / 2], new_query[LOG_PATH_MAX / 2];
    const char *container;
    bool follow, timestamps, ok;
    if (!rd_name_or_reply(req, app) || !log_query_or_reply(req, query, sizeof query) ||
        !rd_label_param_or_reply(req, "container", &container) ||
        !fg_api_flag_or_reply(req, "follow", &follow) ||
        !fg_api_flag_or_reply(req, "timestamps", &timestamps))
        return FG_OK;
    if (api->streams == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_READY, "streams are not running here");
    /* Pods that join later are read from their start. */
    snprintf(new_query, sizeof new_query, "?follow=%s&timestamps=%s%s%s", follow ? "true" : "false",
             timestamps ? "true" : "false", container ? "&container=" : "",
             container ? container : "");
    app_pods_t *d = fg_xcalloc(1, sizeof *d);
    d->api = api;
    snprintf(d->project, sizeof d->project, "%s", project);
    snprintf(d->app, sizeof d->app, "%s", app);
    fg_stream_pod_t pods[FG_STREAM_GROUP_MAX];
    size_t n = list_app_pods(d, pods, FG_STREAM_GROUP_MAX, &ok);
    if (!ok || n == 0) {
        free(d);
        return ok ? fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no pod of app %s in project %s",
                                     app, project)
                  : fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE,
                                     "the cache cannot list the app's pods now");
    }
    fg_stream_group_t g = {.ns = project,
                           .query = query,
                           .new_query = new_query,
                           .follow = follow,
                           .pods = pods,
                           .npods = n,
                           .discover = list_app_pods,
                           .ud = d,
                           .ud_free = free};
    fg_stream_opts_t opts = {.content_type = "text/plain; charset=utf-8",
                             .on_end = log_session_end,
                             .renew = renew_slot,
                             .renew_s = fg_auth_stream_renew_s(req)};
    fg_stream_start_group(api->streams, req, &g, &opts);
    return FG_OK;
}
