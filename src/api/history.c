/* api/history.c: listHistory, the state changes of the project's workloads in every member
 * cluster, newest first, read from the history the informers keep (cache/insight_history.lua:
 * each change once, bounded per project by insights.history_*).
 *
 * The page walk is the timelines' (timeline.c) over fg:histx:{project} / fg:hist:{project}. An
 * entry never changes once written, so a page walk neither repeats nor skips one while new
 * entries arrive (they go before the walk's start).
 */
#include "timeline.h"

static const char *const kinds[] = {"Project", "App", "Pod", "JobSet", "CronJob", "Scaler", NULL};
/* ChangeType of the contract */
static const char *const changes[] = {"Created",         "SpecChanged",      "Deleted",
                                      "RolloutStarted",  "RolloutCompleted", "RolloutStalled",
                                      "ReplicasChanged", "Paused",           "Resumed",
                                      "Stopped",         "Restarted",        "Suspended",
                                      "Triggered",       "PodCrashLooping",  "PodOOMKilled",
                                      "PodEvicted",      "JobSucceeded",     "JobFailed",
                                      "QuotaChanged",    "PodUnschedulable", NULL};

static json_t *present(const char *text, size_t len, const void *filter, bool *damaged) {
    return fg_insight_history_present(text, len, filter, damaged);
}

int fg_api_list_history(fg_req_t *req) {
    fg_insight_history_filter_t f = {0};
    tl_source_t src = {.what = "history", .present = present, .filter = &f};
    char member[FG_INSIGHT_MEMBER_MAX + 1];
    bool have_cursor;
    size_t limit;
    rd_ctx_t c;
    const char *project = fg_req_param(req, "project");
    if (!rd_limit_or_reply(req, &limit) ||
        !tl_cursor_param_or_reply(req, member, sizeof member, &have_cursor) ||
        !rd_enum_param_or_reply(req, "kind", kinds, &f.kind) ||
        !tl_name_param_or_reply(req, &f.name) || !rd_label_param_or_reply(req, "app", &f.app) ||
        !rd_enum_param_or_reply(req, "change", changes, &f.change) ||
        !tl_since_param_or_reply(req, &f.since_ms))
        return FG_OK;
    if (!rd_begin_or_reply(&c, req, "app", "apps", project, NULL, NULL))
        return FG_OK;
    fg_cache_key_history(&src.entries, project);
    fg_cache_key_history_order(&src.order, project);
    src.since_ms = f.since_ms;
    return tl_reply_page(req, &src, have_cursor ? member : NULL, limit, &c);
}
