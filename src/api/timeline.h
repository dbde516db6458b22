/* api/timeline.h: the page walk of the insight timelines (listEvents, listHistory): an order
 * zset of members "{inverted ms}|{id}" walked by lex (newest first, ties by id) from the
 * cursor's member, entries loaded in batches (HMGET of the entries hash) and presented with the
 * list's filter, at most 5,000 examined per page, and the query parameters both lists
 * share. Implemented in src/api/timeline.c; used by events.c and history.c. */
#ifndef FLEETGATE_API_TIMELINE_H
#define FLEETGATE_API_TIMELINE_H

#include "fleetgate/insight.h"
#include "reads.h"

/* One stored entry (text, len) into the list's item (a new reference), or NULL when the filter
 * leaves it out or it is damaged (*damaged set: the walk logs it). */
typedef json_t *(*tl_present_fn)(const char *text, size_t len, const void *filter, bool *damaged);

typedef struct {
    const char *what;              /* "events", "history": in log lines */
    fg_cache_key_t entries, order; /* the hash of entries by id, the order zset */
    tl_present_fn present;
    const void *filter; /* borrowed, handed to present */
    int64_t since_ms;   /* entries older than it end the walk (0: none) */
} tl_source_t;

/* name: a DNS-1123 subdomain (ObjectName); *out NULL when absent. False when it replied 422. */
bool tl_name_param_or_reply(fg_req_t *req, const char **out);
/* since: an RFC 3339 date-time into *out (Unix ms, 0 when absent). False when it replied 422. */
bool tl_since_param_or_reply(fg_req_t *req, int64_t *out);
/* cursor: the member it names into member (len >= FG_INSIGHT_MEMBER_MAX + 1), *have whether
 * there was one. False when it replied 422. */
bool tl_cursor_param_or_reply(fg_req_t *req, char *member, size_t len, bool *have);
/* Walks src after member (NULL: from the newest) and replies the page of at most limit items,
 * with its cursor and c's clusters; a Redis failure replies its problem. Returns FG_OK. */
int tl_reply_page(fg_req_t *req, const tl_source_t *src, const char *member, size_t limit,
                  rd_ctx_t *c);

#endif
