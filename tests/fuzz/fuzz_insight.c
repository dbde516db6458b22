/* Fuzz target: what the events timeline takes from outside: a client's `cursor` and `since`
 * (insight.h's cursor decoder, core's RFC 3339 parser) and a stored entry (Redis is shared, so
 * an entry is read as untrusted). Properties: never crashes; a decoded cursor is a member that
 * encodes back to the same cursor's member; a parsed time formats and parses back to itself
 * (to the ms); a presented entry (timeline or workload history) has every required member. */
#include "fleetgate/insight.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fg_xstrndup((const char *)data, size);
    char m[FG_INSIGHT_MEMBER_MAX + 1], again[FG_INSIGHT_CURSOR_MAX + 1], m2[sizeof m];
    if (fg_insight_cursor_decode(text, m, sizeof m) == FG_OK) {
        if (!fg_insight_member_ok(m, strlen(m)) || fg_insight_member_ms(m) < 0)
            abort();
        fg_insight_cursor_encode(m, again, sizeof again);
        if (fg_insight_cursor_decode(again, m2, sizeof m2) != FG_OK || strcmp(m, m2) != 0)
            abort();
    }
    int64_t ms;
    if (fg_parse_time_ms(text, size, &ms) == FG_OK && ms <= 253402300799999LL) {
        char buf[40];
        int64_t back = -1;
        fg_format_time_ms(ms, buf, sizeof buf);
        if (fg_parse_time_ms(buf, strlen(buf), &back) != FG_OK || back != ms)
            abort();
    }
    bool damaged = false;
    json_t *e = fg_insight_event_present((const char *)data, size, NULL, &damaged);
    if (e != NULL) {
        static const char *const need[] = {"id",          "type",      "reason", "message",
                                           "object",      "cluster",   "zone",   "count",
                                           "firstSeenAt", "lastSeenAt"};
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
            if (json_object_get(e, need[i]) == NULL)
                abort();
        json_decref(e);
    }
    json_t *h = fg_insight_history_present((const char *)data, size, NULL, &damaged);
    if (h != NULL) {
        static const char *const need[] = {"id",      "time",    "object", "app",      "change",
                                           "summary", "cluster", "actor",  "requestId"};
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
            if (json_object_get(h, need[i]) == NULL)
                abort();
        const char *rid = json_string_value(json_object_get(h, "requestId"));
        if (rid != NULL && (strlen(rid) == 0 || strlen(rid) > 64))
            abort();
        json_decref(h);
    }
    free(text);
    return 0;
}
