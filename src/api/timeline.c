/* api/timeline.c: the page walk of the insight timelines (timeline.h), shared by listEvents
 * (fg:ev / fg:evx, cache/insight_event.lua) and listHistory (fg:hist / fg:histx,
 * cache/insight_history.lua).
 *
 * The walk follows the order zset by lex from the cursor's member, loading entries in batches
 * (HMGET) and filtering them through the list's presenter. It examines at most TL_SCAN_MAX
 * entries per page, so a filter that matches rarely still answers in bounded time: the page is
 * then short and its cursor goes on from where the walk stopped. An entry written again while a
 * client pages (an event folded) moves to the top; a page walk never shows an entry twice.
 */
#include "timeline.h"

#include "fleetgate/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH       200
#define TL_SCAN_MAX 5000

bool tl_name_param_or_reply(fg_req_t *req, const char **out) {
    const char *v = fg_req_query(req, "name");
    *out = v;
    if (v == NULL)
        return true;
    size_t n = strlen(v);
    if (fg_is_dns1123_chars(v, n, RD_NAME_MAX) && v[0] != '-' && v[0] != '.' && v[n - 1] != '-' &&
        v[n - 1] != '.')
        return true;
    rd_reply_invalid_param(req, "name",
                           "must be a DNS-1123 name: lower-case letters, digits, - and ., at most "
                           "253 (got \"%.64s\")",
                           v);
    return false;
}

bool tl_since_param_or_reply(fg_req_t *req, int64_t *out) {
    const char *v = fg_req_query(req, "since");
    *out = 0;
    if (v == NULL)
        return true;
    if (fg_parse_time_ms(v, strlen(v), out) == FG_OK) {
        if (*out == 0)
            *out = 1; /* 0 means "no filter" */
        return true;
    }
    rd_reply_invalid_param(req, "since",
                           "must be an RFC 3339 date-time such as 2026-11-22T00:00:00Z "
                           "(got \"%.64s\")",
                           v);
    return false;
}

bool tl_cursor_param_or_reply(fg_req_t *req, char *member, size_t len, bool *have) {
    const char *v = fg_req_query(req, "cursor");
    *have = v != NULL;
    if (v == NULL || fg_insight_cursor_decode(v, member, len) == FG_OK)
        return true;
    rd_reply_invalid_param(req, "cursor", "is not a cursor of this list (got \"%.64s\")", v);
    return false;
}

typedef struct {
    fg_req_t *req;
    fg_api_t *api;
    const tl_source_t *src;
    char from[FG_INSIGHT_MEMBER_MAX + 2]; /* ZRANGEBYLEX's min: "(member" or "-" */
    char stop[16];                        /* members past it are older than since ("" none) */
    json_t *items;
    size_t limit, examined;
    char last[FG_INSIGHT_MEMBER_MAX + 1]; /* the last member examined */
    bool more;                            /* the walk stopped before the end */
} walk_t;

/* One batch: the next members and their entries, in one round trip. False when it replied. */
static bool walk_batch(walk_t *w, bool *done) {
    const tl_source_t *src = w->src;
    char count[16];
    snprintf(count, sizeof count, "%d", BATCH);
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_redis_batch_addv(b, "ZRANGEBYLEX", src->order.s, w->from, "+", "LIMIT", "0", count, NULL);
    if (!rd_batch_or_reply(w->req, w->api, b)) {
        fg_redis_batch_free(b);
        return false;
    }
    const fg_redis_reply_t *ids = fg_redis_batch_reply(b, 0);
    size_t n = fg_redis_reply_len(ids);
    *done = n < BATCH;
    if (n == 0) {
        fg_redis_batch_free(b);
        return true;
    }
    const char **argv = fg_xcalloc(n + 2, sizeof *argv);
    char(*members)[FG_INSIGHT_MEMBER_MAX + 1] = fg_xcalloc(n, sizeof *members);
    argv[0] = "HMGET";
    argv[1] = src->entries.s;
    size_t m = 0;
    char raw_last[FG_INSIGHT_MEMBER_MAX + 2] = "";
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = fg_redis_reply_str(fg_redis_reply_at(ids, i), &len);
        if (s != NULL && len < sizeof raw_last - 1)
            snprintf(raw_last, sizeof raw_last, "(%.*s", (int)len, s);
        if (s == NULL || !fg_insight_member_ok(s, len))
            continue; /* not written by the timeline's script: skipped */
        if (w->stop[0] != '\0' && strncmp(s, w->stop, 13) > 0) {
            *done = true; /* older than since, and so is everything after it */
            break;
        }
        memcpy(members[m], s, len);
        members[m][len] = '\0';
        argv[2 + m] = members[m] + 14;
        m++;
    }
    size_t hm = 0;
    fg_redis_batch_reset(b);
    if (m > 0)
        hm = fg_redis_batch_add(b, m + 2, argv, NULL);
    if (m > 0 && !rd_batch_or_reply(w->req, w->api, b)) {
        free(argv);
        free(members);
        fg_redis_batch_free(b);
        return false;
    }
    for (size_t i = 0; i < m && json_array_size(w->items) < w->limit; i++) {
        snprintf(w->last, sizeof w->last, "%s", members[i]);
        w->examined++;
        size_t len = 0;
        const char *text =
            fg_redis_reply_str(fg_redis_reply_at(fg_redis_batch_reply(b, hm), i), &len);
        bool damaged = false;
        json_t *item = text ? src->present(text, len, src->filter, &damaged) : NULL;
        if (damaged)
            FG_LOG(FG_LOG_ERROR, fg_req_id(w->req), "%s: %s: entry %s is damaged", src->what,
                   src->entries.s, argv[2 + i]);
        if (item != NULL)
            json_array_append_new(w->items, item);
        if (json_array_size(w->items) == w->limit && (i + 1 < m || !*done))
            w->more = true; /* a full page with entries after it */
    }
    if (m > 0)
        snprintf(w->from, sizeof w->from, "(%s", w->last);
    else if (raw_last[0] != '\0')
        snprintf(w->from, sizeof w->from, "%s", raw_last);
    else
        *done = true;
    free(argv);
    free(members);
    fg_redis_batch_free(b);
    return true;
}

int tl_reply_page(fg_req_t *req, const tl_source_t *src, const char *member, size_t limit,
                  rd_ctx_t *c) {
    walk_t w = {.req = req, .api = fg_req_app(req), .src = src, .limit = limit};
    snprintf(w.from, sizeof w.from, member ? "(%s" : "-", member ? member : "");
    if (src->since_ms > 0)
        snprintf(w.stop, sizeof w.stop, "%013lld", 9999999999999LL - src->since_ms);
    w.items = json_array();
    bool done = false;
    while (!done && json_array_size(w.items) < w.limit) {
        if (w.examined >= TL_SCAN_MAX) {
            w.more = true; /* bounded work: the cursor goes on from here */
            break;
        }
        if (!walk_batch(&w, &done)) {
            json_decref(w.items);
            return FG_OK;
        }
    }
    char cursor[FG_INSIGHT_CURSOR_MAX + 1] = "";
    if (w.more)
        fg_insight_cursor_encode(w.last, cursor, sizeof cursor);
    fg_auth_charge_items(req, json_array_size(w.items));
    json_t *body =
        json_pack("{s:o,s:o,s:o}", "items", w.items, "cursor",
                  cursor[0] ? json_string(cursor) : json_null(), "clusters", rd_parts_json(c));
    return rd_reply_etag(req, body, NULL);
}
