/* core/json.c: loading untrusted JSON, serialising, scanning JSON text without parsing it, and
 * the one name of each JSON type for error texts. jansson already refuses duplicate keys on
 * request; the depth bound is ours, checked by a pre-scan, because jansson's own limit (2048) is
 * far deeper than any fleetgate document and deep nesting costs stack in every consumer. */
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index just after the closing quote of the string whose content starts at s[i] (past its
 * opening quote), or n when it is not closed. Strings are most of a Kubernetes object's bytes,
 * so they are crossed with memchr (a quote preceded by an odd number of backslashes is escaped),
 * not byte by byte: this halves the scans below. */
static size_t string_end(const char *s, size_t n, size_t i) {
    for (;;) {
        const char *q = i < n ? memchr(s + i, '"', n - i) : NULL;
        if (q == NULL)
            return n;
        size_t at = (size_t)(q - s), b = at;
        while (b > i && s[b - 1] == '\\')
            b--;
        i = at + 1;
        if ((at - b) % 2 == 0)
            return i;
    }
}

/* Returns the byte offset where the depth bound is passed, or -1 when it never is. */
static long depth_exceeded_at(const char *data, size_t len, int max) {
    int depth = 0;
    size_t i = 0;
    while (i < len) {
        char c = data[i++];
        if (c == '"') {
            i = string_end(data, len, i);
        } else if (c == '{' || c == '[') {
            if (++depth > max)
                return (long)(i - 1);
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return -1;
}

static void position_of(const char *data, long offset, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (long i = 0; i < offset; i++) {
        if (data[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int fg_json_load(const char *data, size_t len, json_t **out, char *err, size_t errlen) {
    long deep = depth_exceeded_at(data, len, FG_JSON_MAX_DEPTH);
    if (deep >= 0) {
        int line, col;
        position_of(data, deep, &line, &col);
        if (err)
            snprintf(err, errlen, "line %d, column %d: nesting deeper than %d levels", line, col,
                     FG_JSON_MAX_DEPTH);
        return FG_EINVAL;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (j == NULL) {
        if (err)
            snprintf(err, errlen, "line %d, column %d: %s", je.line, je.column, je.text);
        return FG_EINVAL;
    }
    *out = j;
    return FG_OK;
}

char *fg_json_dumps(const json_t *j, size_t *len_out) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL)
        abort(); /* jansson fails only on allocation or an invalid tree */
    if (len_out)
        *len_out = strlen(s);
    return s;
}

json_t *fg_json_string_clean(const char *s, size_t n, size_t max, bool *cut) {
    fg_buf_t b;
    bool was_cut = false;
    fg_buf_init(&b, max + 1);
    for (size_t i = 0; i < n;) {
        char hex[5];
        const char *piece;
        size_t len, seq = fg_utf8_shown(s + i, n - i, hex, &piece, &len);
        if (b.len + len > max) {
            was_cut = true;
            break;
        }
        fg_buf_append(&b, piece, len);
        i += seq;
    }
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    fg_buf_free(&b);
    if (j == NULL)
        abort(); /* valid UTF-8 without NUL by construction: only allocation fails */
    if (cut && was_cut)
        *cut = true;
    return j;
}

static const char *const type_names[] = {
    [JSON_OBJECT] = "object",   [JSON_ARRAY] = "array", [JSON_STRING] = "string",
    [JSON_INTEGER] = "integer", [JSON_REAL] = "number", [JSON_TRUE] = "boolean",
    [JSON_FALSE] = "boolean",   [JSON_NULL] = "null",
};

const char *fg_json_type_name(const json_t *j) {
    return j ? type_names[json_typeof(j)] : "nothing";
}

/* RFC 7396, section 2: the pseudo-code, recursively. */
json_t *fg_json_merge_patch(const json_t *target, const json_t *patch) {
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (json_is_null(v)) {
            json_object_del(out, k);
            continue;
        }
        json_object_set_new(out, k, fg_json_merge_patch(json_object_get(out, k), v));
    }
    return out;
}

/* A scan, not a validation: strings (with their escapes) and nesting are followed, nothing else
 * is checked. */
size_t fg_json_scan_value(const char *s, size_t n, size_t i) {
    int depth = 0;
    while (i < n) {
        char ch = s[i++];
        if (ch == '"') {
            i = string_end(s, n, i);
            if (depth == 0)
                return i;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0)
                return i - 1; /* the end of the enclosing value */
            if (--depth == 0)
                return i;
        } else if (depth == 0 && ch == ',') {
            return i - 1;
        }
    }
    return n;
}

size_t fg_json_scan_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i;
}
