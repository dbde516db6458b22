/* api/events.c: listEvents, the project's events from every member cluster in one timeline,
 * newest first, read from the timeline the informers keep (cache/insight_event.lua: folded,
 * kept past the clusters' own event TTL, bounded per project by insights.*).
 *
 * The page walk is the timelines' (timeline.c) over fg:evx:{project} / fg:ev:{project}. An
 * entry folded again while a client pages moves to the top (its lastSeenAt); a page walk never
 * shows an entry twice.
 */
#include "timeline.h"

#include <string.h>

static const char *const kinds[] = {"Project", "App", "Pod", "JobSet", "CronJob", "Scaler", NULL};
static const char *const types[] = {"Normal", "Warning", NULL};

/* reason: ^[A-Za-z][A-Za-z0-9]*$, at most 128 (EventReasonFilter). */
static bool reason_param_or_reply(fg_req_t *req, const char **out) {
    const char *v = fg_req_query(req, "reason");
    *out = v;
    if (v == NULL)
        return true;
    size_t n = strlen(v);
    bool ok = n >= 1 && n <= 128 && ((v[0] >= 'A' && v[0] <= 'Z') || (v[0] >= 'a' && v[0] <= 'z'));
    for (size_t i = 1; ok && i < n; i++)
        ok = (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
             (v[i] >= '0' && v[i] <= '9');
    if (ok)
        return true;
    rd_reply_invalid_param(req, "reason",
                           "must be letters and digits, starting with a letter, at most 128 "
                           "(got \"%.64s\")",
                           v);
    return false;
}

static json_t *present(const char *text, size_t len, const void *filter, bool *damaged) {
    return fg_insight_event_present(text, len, filter, damaged);
}

int fg_api_list_events(fg_req_t *req) {
    fg_insight_event_filter_t f = {0};
    tl_source_t src = {.what = "events", .present = present, .filter = &f};
    char member[FG_INSIGHT_MEMBER_MAX + 1];
    bool have_cursor;
    size_t limit;
    rd_ctx_t c;
    const char *project = fg_req_param(req, "project");
    if (!rd_limit_or_reply(req, &limit) ||
        !tl_cursor_param_or_reply(req, member, sizeof member, &have_cursor) ||
        !rd_enum_param_or_reply(req, "kind", kinds, &f.kind) ||
        !tl_name_param_or_reply(req, &f.name) || !rd_label_param_or_reply(req, "app", &f.app) ||
        !rd_enum_param_or_reply(req, "type", types, &f.type) ||
        !reason_param_or_reply(req, &f.reason) || !tl_since_param_or_reply(req, &f.since_ms) ||
        !rd_cluster_param_or_reply(req, &f.cluster))
        return FG_OK;
    if (!rd_begin_or_reply(&c, req, "event", "events", project, f.cluster, NULL))
        return FG_OK;
    fg_cache_key_events(&src.entries, project);
    fg_cache_key_events_order(&src.order, project);
    src.since_ms = f.since_ms;
    return tl_reply_page(req, &src, have_cursor ? member : NULL, limit, &c);
}
