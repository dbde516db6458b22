/* api/changes.c: watchChanges, the project's changes as server-sent events. The request thread
 * checks the parameters (kinds, app, Last-Event-ID) and hands the request to the stream loop
 * (stream.h "the change stream"), which holds the caller's `stream` slot while it is open.
 * This file also gives the loop's hub its presenter: a cached object as GET answers it, from
 * the one cluster the change came from. */
#include "fleetgate/auth.h"
#include "fleetgate/stream.h"
#include "reads.h"

#include <stdio.h>
#include <string.h>

/* The cache kinds by API kind, in fg_stream_change_kind order. */
static const char *const cache_kinds[FG_STREAM_CHANGE_KINDS] = {"project", "app",     "pod",
                                                                "jobset",  "cronjob", "scaler"};

static json_t *present(void *ud, const char *kind, const char *cluster, const json_t *obj) {
    fg_api_t *api = ud;
    int k = fg_stream_change_kind(kind);
    rd_ctx_t c = {.api = api, .nparts = 1};
    for (size_t i = 0; i < api->cfg->nclusters; i++)
        if (strcmp(api->cfg->clusters[i].name, cluster) == 0)
            c.parts[0].conf = &api->cfg->clusters[i];
    if (k < 0 || c.parts[0].conf == NULL)
        return NULL;
    c.parts[0].fresh.state = FG_FRESH_CURRENT;
    json_t *const objs[1] = {(json_t *)obj};
    switch (k) {
        case 0:
            return rd_present_project(&c, objs);
        case 1:
            return rd_present_app(&c, objs);
        case 2:
            return rd_present_pod(obj);
        default:
            return rd_present_workload(cache_kinds[k], &c, objs);
    }
}

/* kinds: comma-separated ObjectKinds, at least one, each once. */
static bool kinds_or_reply(fg_req_t *req, unsigned *out) {
    const char *v = fg_req_query(req, "kinds");
    *out = 0;
    if (v == NULL)
        return true;
    char one[32];
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        int k = -1;
        if (n > 0 && n < sizeof one) {
            memcpy(one, p, n);
            one[n] = '\0';
            k = fg_stream_change_kind(one);
        }
        if (k < 0 || (*out & (1u << k))) {
            rd_reply_invalid_param(req, "kinds",
                                   "must be distinct kinds among Project, App, Pod, JobSet, "
                                   "CronJob, Scaler, comma-separated (got \"%.64s\")",
                                   v);
            return false;
        }
        *out |= 1u << k;
        if (p[n] == '\0')
            return true;
        p += n + 1;
    }
}

/* Last-Event-ID: ^[0-9]+-[0-9]+$, at most 64. */
static bool last_id_or_reply(fg_req_t *req, const char **out) {
    const char *v = fg_req_header(req, "Last-Event-ID");
    *out = v;
    if (v == NULL)
        return true;
    size_t n = strlen(v), dash = strcspn(v, "-");
    bool ok = n <= 64 && dash > 0 && dash < n - 1 && dash <= 19 && n - dash - 1 <= 19;
    for (size_t i = 0; ok && i < n; i++)
        ok = i == dash || (v[i] >= '0' && v[i] <= '9');
    if (ok)
        return true;
    rd_reply_invalid_param(req, "Last-Event-ID",
                           "must be the id of an event of this stream, such as 1732284187120-0 "
                           "(got \"%.64s\")",
                           v);
    return false;
}

static void renew_slot(const fg_req_t *req) {
    if (fg_auth_renew_stream(req) != FG_OK)
        FG_LOG(FG_LOG_WARN, fg_req_id(req), "the stream slot could not be renewed");
}

/* The session's audit line when the stream ends. */
static void log_session_end(fg_req_t *req, const fg_stream_stats_t *st, void *ud) {
    (void)ud;
    if (fg_req_status(req) != 200)
        return;
    char start[40], end[40];
    fg_format_time_ms(st->start_ms, start, sizeof start);
    fg_format_time_ms(st->end_ms, end, sizeof end);
    json_t *session = json_pack("{s:s,s:s,s:s,s:I,s:s}", "kind", "changes", "start", start, "end",
                                end, "bytesOut", (json_int_t)st->bytes_out, "endedBy", st->end);
    fg_auth_audit_session(req, 200, session);
    json_decref(session);
}

int fg_api_watch_changes(fg_req_t *req) {
    fg_api_t *api = fg_req_app(req);
    fg_stream_changes_t c = {.project = fg_req_param(req, "project"),
                             .keepalive_s = (int)api->cfg->insights.changes_keepalive_s,
                             .redis = api->redis,
                             .present = present,
                             .present_ud = api};
    if (!fg_is_dns1123_label(c.project, strlen(c.project)))
        return rd_reply_invalid_param(req, "project", "must be a DNS-1123 label (got \"%.64s\")",
                                      c.project);
    if (!kinds_or_reply(req, &c.kinds) || !rd_label_param_or_reply(req, "app", &c.app) ||
        !last_id_or_reply(req, &c.last_event_id))
        return FG_OK;
    if (api->streams == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_READY, "streams are not running here");
    fg_stream_opts_t opts = {.content_type = "text/event-stream",
                             .on_end = log_session_end,
                             .renew = renew_slot,
                             .renew_s = fg_auth_stream_renew_s(req)};
    fg_stream_start_changes(api->streams, req, &c, &opts);
    return FG_OK;
}
