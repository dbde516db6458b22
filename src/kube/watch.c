/* kube/watch.c: the incremental watch-stream parser.
 *
 * A watch answer is a sequence of JSON objects {"type": T, "object": {...}}; the API server
 * writes each compactly followed by "\n", but a stream is cut into reads anywhere, and old
 * servers and proxies have been seen to pretty-print. So events are delimited by JSON
 * structure, not by lines: a small scanner follows string and nesting state across calls and
 * hands each complete top-level object to jansson. Bytes are copied once, into a buffer
 * bounded by max_event_bytes, so a hostile upstream cannot make an event grow without limit.
 *
 * Anything that is not such an object (a non-JSON line, an unknown type, a missing or
 * non-object "object", a BOOKMARK without resourceVersion) kills the parser with an error;
 * the informer restarts the watch, which is what client-go does too.
 */
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fg_kube_watch_parser {
    fg_buf_t buf;    /* the current event's bytes so far */
    bool in_object;  /* inside a top-level object */
    bool in_string;  /* inside a JSON string */
    bool escaped;    /* the previous byte was a backslash inside a string */
    int depth;       /* nesting depth inside the current event */
    int rc;          /* FG_OK, or the failure that killed the parser */
    uint64_t events; /* events delivered */
    uint64_t offset; /* bytes consumed, for messages */
    fg_kube_event_cb cb;
    void *ud;
    const char *unread_annotation; /* cut unparsed from each event's object, or NULL */
    fg_kube_error_t err;
};

static const struct {
    const char *name;
    fg_kube_event_type_t type;
} event_types[] = {
    {"ADDED", FG_KUBE_EV_ADDED},     {"MODIFIED", FG_KUBE_EV_MODIFIED},
    {"DELETED", FG_KUBE_EV_DELETED}, {"BOOKMARK", FG_KUBE_EV_BOOKMARK},
    {"ERROR", FG_KUBE_EV_ERROR},
};

const char *fg_kube_event_type_name(fg_kube_event_type_t t) {
    for (size_t i = 0; i < sizeof event_types / sizeof event_types[0]; i++)
        if (event_types[i].type == t)
            return event_types[i].name;
    return "?";
}

int fg_kube_watch_parser_new(fg_kube_watch_parser_t **out, size_t max_event_bytes,
                             fg_kube_event_cb cb, void *ud) {
    if (out == NULL || cb == NULL)
        return FG_EINVAL;
    fg_kube_watch_parser_t *p = fg_xcalloc(1, sizeof *p);
    fg_buf_init(&p->buf, max_event_bytes ? max_event_bytes : FG_KUBE_DEFAULT_MAX_EVENT_BYTES);
    p->cb = cb;
    p->ud = ud;
    fg_kube_error_clear(&p->err);
    *out = p;
    return FG_OK;
}

void fg_kube_watch_parser_free(fg_kube_watch_parser_t *p) {
    if (p == NULL)
        return;
    fg_buf_free(&p->buf);
    free(p);
}

const fg_kube_error_t *fg_kube_watch_parser_error(const fg_kube_watch_parser_t *p) {
    return &p->err;
}

uint64_t fg_kube_watch_parser_events(const fg_kube_watch_parser_t *p) {
    return p->events;
}

void fg_kube_watch_parser_unread_annotation(fg_kube_watch_parser_t *p, const char *annotation) {
    p->unread_annotation = annotation;
}

__attribute__((format(printf, 4, 5))) static int fail(fg_kube_watch_parser_t *p, int rc,
                                                      const char *reason, const char *fmt, ...) {
    fg_kube_error_clear(&p->err);
    snprintf(p->err.reason, sizeof p->err.reason, "%s", reason);
    char msg[sizeof p->err.message - 40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err.message, sizeof p->err.message, "watch event %llu: %s",
             (unsigned long long)p->events + 1, msg);
    p->rc = rc;
    return rc;
}

/* Validates one complete event text and hands it to the callback. */
static int deliver(fg_kube_watch_parser_t *p) {
    int rc = FG_OK;
    json_t *j = NULL;
    char jerr[160];
    p->buf.len = fg_kube_prune(p->buf.data, p->buf.len, FG_KUBE_PRUNE_EVENT, p->unread_annotation);
    p->buf.data[p->buf.len] = '\0'; /* an fg_buf_t stays NUL-terminated */
    if (fg_json_load(p->buf.data, p->buf.len, &j, jerr, sizeof jerr) != FG_OK) {
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "not JSON: %s", jerr);
        goto out;
    }
    const json_t *type = json_object_get(j, "type");
    if (!json_is_string(type)) {
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "type: missing or not a string");
        goto out;
    }
    size_t t;
    for (t = 0; t < sizeof event_types / sizeof event_types[0]; t++)
        if (strcmp(event_types[t].name, json_string_value(type)) == 0)
            break;
    if (t == sizeof event_types / sizeof event_types[0]) {
        char shown[40];
        snprintf(shown, sizeof shown, "%s", json_string_value(type));
        for (char *c = shown; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "type: unknown (got \"%s\")", shown);
        goto out;
    }
    json_t *object = json_object_get(j, "object");
    if (object == NULL) {
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "object: missing");
        goto out;
    }
    if (!json_is_object(object)) {
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "object: not an object (got %s)",
                  fg_json_type_name(object));
        goto out;
    }
    fg_kube_event_t ev = {.type = event_types[t].type, .object = object};
    fg_kube_error_t status_err;
    const json_t *meta = json_object_get(object, "metadata");
    const json_t *rv = json_is_object(meta) ? json_object_get(meta, "resourceVersion") : NULL;
    if (json_is_string(rv) && json_string_length(rv) > 0)
        ev.resource_version = json_string_value(rv);
    if (ev.type == FG_KUBE_EV_ERROR) {
        /* Anything in an ERROR event means "relist"; a non-Status still becomes an error. */
        fg_kube_error_from_status(object, 0, &status_err);
        ev.error = &status_err;
        ev.resource_version = NULL;
    } else if (ev.resource_version == NULL) {
        rc = fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
                  "%s: object.metadata.resourceVersion missing or not a string",
                  event_types[t].name);
        goto out;
    }
    if (ev.type == FG_KUBE_EV_BOOKMARK) {
        const json_t *ann = json_object_get(meta, "annotations");
        const json_t *end =
            json_is_object(ann) ? json_object_get(ann, "k8s.io/initial-events-end") : NULL;
        ev.initial_events_end = json_is_string(end) && strcmp(json_string_value(end), "true") == 0;
    }
    p->events++;
    rc = p->cb(p->ud, &ev);
    if (rc != FG_OK) {
        p->rc = rc;
        fg_kube_error_clear(&p->err);
        snprintf(p->err.reason, sizeof p->err.reason, "Stopped");
        snprintf(p->err.message, sizeof p->err.message, "the event handler stopped the watch");
    }
out:
    json_decref(j);
    fg_buf_reset(&p->buf);
    return rc;
}

static bool is_space(unsigned char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Appends data[from, to) to the event buffer, failing with FG_ETOOBIG past the bound. */
static int keep(fg_kube_watch_parser_t *p, const char *data, size_t from, size_t to) {
    if (to <= from)
        return FG_OK;
    if (fg_buf_append(&p->buf, data + from, to - from) != FG_OK)
        return fail(p, FG_ETOOBIG, FG_KUBE_REASON_TOO_LARGE, "larger than %zu bytes", p->buf.max);
    return FG_OK;
}

int fg_kube_watch_parser_feed(fg_kube_watch_parser_t *p, const void *data, size_t len) {
    const char *d = data;
    size_t start = 0; /* where the unsaved part of the current event begins in d */
    if (p->rc != FG_OK)
        return p->rc;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)d[i];
        if (!p->in_object) {
            if (is_space(c))
                continue;
            if (c != '{') {
                p->offset += i;
                return fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
                            "not a JSON object at stream byte %llu (got byte 0x%02x)",
                            (unsigned long long)p->offset, c);
            }
            p->in_object = true;
            p->depth = 1;
            start = i;
            continue;
        }
        if (p->in_string) {
            if (p->escaped)
                p->escaped = false;
            else if (c == '\\')
                p->escaped = true;
            else if (c == '"')
                p->in_string = false;
            continue;
        }
        if (c == '"') {
            p->in_string = true;
        } else if (c == '{' || c == '[') {
            p->depth++;
        } else if (c == '}' || c == ']') {
            if (--p->depth == 0) {
                p->in_object = false;
                int rc = keep(p, d, start, i + 1);
                if (rc == FG_OK)
                    rc = deliver(p);
                if (rc != FG_OK) {
                    p->offset += i + 1;
                    return rc;
                }
            }
        }
    }
    p->offset += len;
    if (p->in_object)
        return keep(p, d, start, len);
    return FG_OK;
}

int fg_kube_watch_parser_finish(fg_kube_watch_parser_t *p) {
    if (p->rc != FG_OK)
        return p->rc;
    if (p->in_object)
        return fail(p, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
                    "stream ended inside an event (%zu bytes received)", p->buf.len);
    return FG_OK;
}
