/* insight/events.c: the events timeline's cursors and entries (include/fleetgate/insight.h).
 *
 * A stored entry (cache/insight_event.lua) holds the API's members plus the bookkeeping of the
 * fold, which never leaves Redis: _src (Kubernetes Event name -> its count), _srcn, _carry,
 * and the first and last times as Unix ms (_f, _l), from which firstSeenAt and lastSeenAt are
 * written here. Cursors are base64url("1" member): the last order member a page showed. */
#include "fleetgate/insight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CURSOR_VERSION '1'
#define MS_MAX         9999999999999LL

static bool id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/';
}

static bool id_ok(const char *s, size_t len) {
    if (len == 0 || len > FG_INSIGHT_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!id_char(s[i]))
            return false;
    return true;
}

bool fg_insight_member_ok(const char *s, size_t len) {
    if (len < 15 || s[13] != '|')
        return false;
    for (size_t i = 0; i < 13; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return id_ok(s + 14, len - 14);
}

void fg_insight_member(int64_t ms, const char *id, char *out, size_t outlen) {
    out[0] = '\0';
    if (ms < 0 || ms > MS_MAX || !id_ok(id, strlen(id)) || outlen < FG_INSIGHT_MEMBER_MAX + 1)
        return;
    snprintf(out, outlen, "%013lld|%s", (long long)(MS_MAX - ms), id);
}

int64_t fg_insight_member_ms(const char *member) {
    int64_t inv;
    if (!fg_insight_member_ok(member, strlen(member)) ||
        fg_parse_int64(member, 13, 0, MS_MAX, &inv) != FG_OK)
        return -1;
    return MS_MAX - inv;
}

void fg_insight_cursor_encode(const char *member, char *out, size_t outlen) {
    char raw[FG_INSIGHT_MEMBER_MAX + 2];
    size_t n = strlen(member);
    out[0] = '\0';
    if (!fg_insight_member_ok(member, n) || outlen < FG_INSIGHT_CURSOR_MAX + 1)
        return;
    raw[0] = CURSOR_VERSION;
    memcpy(raw + 1, member, n);
    fg_b64url_encode(raw, n + 1, out);
}

int fg_insight_cursor_decode(const char *text, char *member, size_t memberlen) {
    unsigned char *raw = NULL;
    size_t n = 0, tlen = strlen(text);
    int rc = FG_EINVAL;
    if (tlen == 0 || tlen > FG_INSIGHT_CURSOR_MAX ||
        fg_b64url_decode(text, tlen, &raw, &n) != FG_OK)
        goto out;
    if (n < 2 || raw[0] != CURSOR_VERSION || !fg_insight_member_ok((char *)raw + 1, n - 1) ||
        n - 1 >= memberlen)
        goto out;
    memcpy(member, raw + 1, n - 1);
    member[n - 1] = '\0';
    rc = FG_OK;
out:
    free(raw);
    return rc;
}

/* ---- entries ------------------------------------------------------------------- */

/* A string member cut to max bytes on a UTF-8 boundary (a new reference), or NULL. */
static json_t *cut(const json_t *v, size_t max) {
    const char *s = json_string_value(v);
    if (s == NULL)
        return NULL;
    size_t n = json_string_length(v);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    return json_stringn(s, n);
}

static bool eq(const char *want, const char *have) {
    return want == NULL || (have != NULL && strcmp(want, have) == 0);
}

static json_t *time_of(const json_t *e, const char *key) {
    json_t *v = json_object_get(e, key);
    if (!json_is_number(v))
        return NULL;
    double ms = json_number_value(v);
    if (ms < 0 || ms > (double)MS_MAX)
        return NULL;
    char buf[40];
    fg_format_time_ms((int64_t)ms, buf, sizeof buf);
    return json_string(buf);
}

static bool passes(const json_t *e, const json_t *obj, const fg_insight_event_filter_t *f) {
    if (f == NULL)
        return true;
    const char *app = json_string_value(json_object_get(e, "app"));
    return eq(f->kind, json_string_value(json_object_get(obj, "kind"))) &&
           eq(f->name, json_string_value(json_object_get(obj, "name"))) && eq(f->app, app) &&
           eq(f->type, json_string_value(json_object_get(e, "type"))) &&
           eq(f->reason, json_string_value(json_object_get(e, "reason"))) &&
           eq(f->cluster, json_string_value(json_object_get(e, "cluster"))) &&
           (f->since_ms == 0 || json_number_value(json_object_get(e, "_l")) >= (double)f->since_ms);
}

json_t *fg_insight_event_present(const char *text, size_t len, const fg_insight_event_filter_t *f,
                                 bool *damaged) {
    json_t *e = NULL, *out = NULL;
    char err[80];
    if (damaged != NULL)
        *damaged = false;
    if (fg_json_load(text, len, &e, err, sizeof err) != FG_OK || !json_is_object(e))
        goto bad;
    const json_t *obj = json_object_get(e, "object");
    json_t *first = time_of(e, "_f"), *last = time_of(e, "_l");
    json_int_t count = json_is_number(json_object_get(e, "count"))
                           ? (json_int_t)json_number_value(json_object_get(e, "count"))
                           : 0;
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!json_is_string(json_object_get(obj, "kind")) ||
        !json_is_string(json_object_get(obj, "name")) ||
        !json_is_string(json_object_get(e, "reason")) ||
        !json_is_string(json_object_get(e, "message")) ||
        !json_is_string(json_object_get(e, "cluster")) ||
        !json_is_string(json_object_get(e, "zone")) || first == NULL || last == NULL || count < 1 ||
        !json_is_string(json_object_get(e, "id")) || type == NULL ||
        (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0)) {
        json_decref(first);
        json_decref(last);
        goto bad;
    }
    if (!passes(e, obj, f)) {
        json_decref(first);
        json_decref(last);
        json_decref(e);
        return NULL;
    }
    out = json_object();
    json_object_set(out, "id", json_object_get(e, "id"));
    json_object_set_new(out, "type", json_string(type));
    json_object_set_new(out, "reason", cut(json_object_get(e, "reason"), 128));
    json_object_set_new(out, "message", cut(json_object_get(e, "message"), 4096));
    json_object_set_new(out, "object",
                        json_pack("{s:O,s:O}", "kind", json_object_get(obj, "kind"), "name",
                                  json_object_get(obj, "name")));
    const json_t *app = json_object_get(e, "app");
    json_object_set_new(out, "app", json_is_string(app) ? json_copy((json_t *)app) : json_null());
    json_object_set(out, "cluster", json_object_get(e, "cluster"));
    json_object_set(out, "zone", json_object_get(e, "zone"));
    json_t *src = cut(json_object_get(e, "source"), 253);
    if (src != NULL)
        json_object_set_new(out, "source", src);
    json_object_set_new(out, "count", json_integer(count));
    json_object_set_new(out, "firstSeenAt", first);
    json_object_set_new(out, "lastSeenAt", last);
    json_decref(e);
    return out;
bad:
    json_decref(e);
    if (damaged != NULL)
        *damaged = true;
    return NULL;
}
