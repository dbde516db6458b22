/* insight/history.c: a stored workload history entry (cache/insight_history.lua) as the API's
 * HistoryEntry, with listHistory's filters (include/fleetgate/insight.h). A stored entry holds
 * the API's members plus _ms (its time, Unix ms) and version (the object's version it was found
 * at), which never leave Redis. The cursors and order members are the events timeline's
 * (insight/events.c): the same "{inverted ms}|{id}" walk. */
#include "fleetgate/insight.h"

#include <string.h>

#define MS_MAX 9999999999999LL

/* ChangeType of the contract. */
static const char *const changes[] = {"Created",         "SpecChanged",      "Deleted",
                                      "RolloutStarted",  "RolloutCompleted", "RolloutStalled",
                                      "ReplicasChanged", "Paused",           "Resumed",
                                      "Stopped",         "Restarted",        "Suspended",
                                      "Triggered",       "PodCrashLooping",  "PodOOMKilled",
                                      "PodEvicted",      "JobSucceeded",     "JobFailed",
                                      "QuotaChanged",    "PodUnschedulable", NULL};

static bool known_change(const char *s) {
    for (size_t i = 0; s != NULL && changes[i] != NULL; i++)
        if (strcmp(changes[i], s) == 0)
            return true;
    return false;
}

static bool eq(const char *want, const char *have) {
    return want == NULL || (have != NULL && strcmp(want, have) == 0);
}

static bool id_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > FG_INSIGHT_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
              s[i] == '-' || s[i] == '/'))
            return false;
    return true;
}

/* A string member cut to max bytes on a UTF-8 boundary, or JSON null when it is no string. */
static json_t *str_or_null(const json_t *v, size_t max) {
    const char *s = json_string_value(v);
    if (s == NULL)
        return json_null();
    size_t n = json_string_length(v);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    return json_stringn(s, n);
}

/* requestId: ^[A-Za-z0-9._:-]{1,64}$ (RequestId), else null. */
static json_t *request_id(const json_t *v) {
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64)
        return json_null();
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || strchr("._:-", s[i]) != NULL))
            return json_null();
    return json_string(s);
}

json_t *fg_insight_history_present(const char *text, size_t len,
                                   const fg_insight_history_filter_t *f, bool *damaged) {
    json_t *e = NULL;
    char err[80];
    if (damaged != NULL)
        *damaged = false;
    if (fg_json_load(text, len, &e, err, sizeof err) != FG_OK || !json_is_object(e))
        goto bad;
    const json_t *obj = json_object_get(e, "object");
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *name = json_string_value(json_object_get(obj, "name"));
    const char *change = json_string_value(json_object_get(e, "change"));
    const char *id = json_string_value(json_object_get(e, "id"));
    const json_t *ms = json_object_get(e, "_ms");
    const json_t *from = json_object_get(e, "from"), *to = json_object_get(e, "to");
    if (kind == NULL || name == NULL || !known_change(change) || !id_ok(id) ||
        !json_is_number(ms) || json_number_value(ms) < 0 ||
        json_number_value(ms) > (double)MS_MAX || !json_is_string(json_object_get(e, "summary")) ||
        (from != NULL && !json_is_object(from)) || (to != NULL && !json_is_object(to)))
        goto bad;
    double t = json_number_value(ms);
    if (f != NULL && !(eq(f->kind, kind) && eq(f->name, name) &&
                       eq(f->app, json_string_value(json_object_get(e, "app"))) &&
                       eq(f->change, change) && (f->since_ms == 0 || t >= (double)f->since_ms))) {
        json_decref(e);
        return NULL;
    }
    char when[40];
    fg_format_time_ms((int64_t)t, when, sizeof when);
    json_t *out = json_object();
    json_object_set_new(out, "id", json_string(id));
    json_object_set_new(out, "time", json_string(when));
    json_object_set_new(out, "object", json_pack("{s:s,s:s}", "kind", kind, "name", name));
    json_object_set_new(out, "app", str_or_null(json_object_get(e, "app"), 253));
    json_object_set_new(out, "change", json_string(change));
    json_object_set_new(out, "summary", str_or_null(json_object_get(e, "summary"), 1024));
    json_object_set_new(out, "cluster", str_or_null(json_object_get(e, "cluster"), 253));
    if (from != NULL && json_object_size(from) <= 32)
        json_object_set(out, "from", (json_t *)from);
    if (to != NULL && json_object_size(to) <= 32)
        json_object_set(out, "to", (json_t *)to);
    json_object_set_new(out, "actor", str_or_null(json_object_get(e, "actor"), 256));
    json_object_set_new(out, "requestId", request_id(json_object_get(e, "requestId")));
    json_decref(e);
    return out;
bad:
    json_decref(e);
    if (damaged != NULL)
        *damaged = true;
    return NULL;
}
