/* insight: what the insight APIs (events timeline, change stream) share beyond one handler:
 * the timeline's keyset cursors and the turning of a stored timeline entry into the API's Event
 * with the list filters. Pure functions (no Redis, no I/O), so they are unit-tested and fuzzed
 * (tests/unit/test_insight.c, tests/fuzz/fuzz_insight.c).
 *
 * The timeline itself is written by the informers (cache/insight_event.lua, fed by
 * src/cache/insight_feed.c) and read by src/api/events.c; its keys are in cache/SCHEMA.md.
 */
#ifndef FLEETGATE_INSIGHT_H
#define FLEETGATE_INSIGHT_H

#include "fleetgate/core.h"

#include <jansson.h>

/* An order member of fg:evx:{project}: 13 digits, '|', the event id (at most 128 bytes). */
#define FG_INSIGHT_ID_MAX     128
#define FG_INSIGHT_MEMBER_MAX (14 + FG_INSIGHT_ID_MAX)
/* A cursor's characters (base64url of a version byte and a member). */
#define FG_INSIGHT_CURSOR_MAX 256

/* Whether s[0..len) is an order member (13 digits, '|', an id of [a-z0-9./-], 1..128). */
bool fg_insight_member_ok(const char *s, size_t len);
/* The order member of an event last seen at ms (Unix ms in 0..9999999999999) into out (at
 * least FG_INSIGHT_MEMBER_MAX + 1 bytes); "" when id is not a valid id. */
void fg_insight_member(int64_t ms, const char *id, char *out, size_t outlen);
/* The Unix ms an order member stands for (its first 13 digits); -1 when it is not a member. */
int64_t fg_insight_member_ms(const char *member);

/* The cursor that continues after member into out (at least FG_INSIGHT_CURSOR_MAX + 1 bytes;
 * "" when member is not one). */
void fg_insight_cursor_encode(const char *member, char *out, size_t outlen);
/* Decodes a client's cursor into member (at least FG_INSIGHT_MEMBER_MAX + 1 bytes): FG_OK, or
 * FG_EINVAL when text is not a cursor fg_insight_cursor_encode made. */
int fg_insight_cursor_decode(const char *text, char *member, size_t memberlen);

/* The list filters of listEvents; NULL / 0 members do not filter. */
typedef struct {
    const char *kind, *name, *app, *type, *reason, *cluster;
    int64_t since_ms; /* 0: none */
} fg_insight_event_filter_t;

/* The API's Event (a new reference) from a stored timeline entry's JSON text, or NULL when the
 * entry does not pass f (f may be NULL) or is not a timeline entry (*damaged then set, when
 * damaged is not NULL). Strings are cut to the contract's bounds on UTF-8 boundaries. */
json_t *fg_insight_event_present(const char *text, size_t len, const fg_insight_event_filter_t *f,
                                 bool *damaged);

/* The list filters of listHistory; NULL / 0 members do not filter. */
typedef struct {
    const char *kind, *name, *app, *change;
    int64_t since_ms; /* 0: none */
} fg_insight_history_filter_t;

/* The API's HistoryEntry (a new reference) from a stored history entry's JSON text
 * (cache/insight_history.lua), or NULL when it does not pass f (f may be NULL) or is not a
 * history entry (*damaged then set, when damaged is not NULL). */
json_t *fg_insight_history_present(const char *text, size_t len,
                                   const fg_insight_history_filter_t *f, bool *damaged);

#endif
