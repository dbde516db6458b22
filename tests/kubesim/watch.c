/* watch: `?watch=1` streams. A ks_watch_t is a cursor on the cluster's change log plus the
 * request's filters; ks_watch_next turns pending initial state, log events, periodic BOOKMARKs and
 * the 410 ERROR into newline-terminated JSON events (K8S-SEMANTICS.md §3-7). It blocks on the
 * store's condition variable, so the caller (server.c) gives each watch its own thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

#define DEFAULT_TIMEOUT_S 1800
#define BATCH             256

struct ks_watch {
    ks_cluster_t *c;
    int res;
    char *ns;
    ks_selector_t *labels;
    ks_selector_t *fields;
    int64_t cursor;     /* everything up to this RV has been considered */
    ks_obj_t **initial; /* synthetic ADDED still to send */
    size_t ninitial;
    size_t next_initial;
    bool end_bookmark; /* send the k8s.io/initial-events-end BOOKMARK after initial */
    bool bookmarks;
    uint64_t deadline_ns;
    uint64_t next_bookmark_ns;
    int64_t expired_asked; /* > -1: send the 410 ERROR for this RV, then end */
    bool done;
    int cut_gen; /* the cluster's cut-watches generation at the start */
    bool table;  /* the client asked for Tables (kubectl get -w) */
    bool v1;     /* autoscaling/v1: objects converted from the stored v2 */
    bool table_columns_sent;
    char *include_object; /* ?includeObject= for Table rows, may be NULL */
};

void ks_watch_free(ks_watch_t *w) {
    if (w == NULL)
        return;
    free(w->ns);
    free(w->include_object);
    ks_selector_free(w->labels);
    ks_selector_free(w->fields);
    ks_objs_free(w->initial, w->ninitial);
    free(w);
}

static bool matches(const ks_watch_t *w, const ks_obj_t *o) {
    if (o == NULL || o->res != w->res)
        return false;
    if (w->ns != NULL) {
        size_t n = strlen(w->ns);
        if (strncmp(o->key, w->ns, n) != 0 || o->key[n] != '/')
            return false;
    }
    if (ks_selector_empty(w->labels) && ks_selector_empty(w->fields))
        return true;
    json_t *j = ks_obj_parse(o);
    bool ok = ks_label_selector_matches(w->labels, j) && ks_field_selector_matches(w->fields, j);
    json_decref(j);
    return ok;
}

/* The event's object: the stored object, or for a Table watch a Table of its one row (the
 * column definitions only in the first event, as the API server's watch encoder sends them). */
static void append_event(ks_watch_t *w, fg_buf_t *b, const char *type, const ks_obj_t *o) {
    size_t len = 0;
    char *full = ks_obj_full_json(o, &len);
    if (w->v1 && !w->table) {
        json_t *j = NULL;
        if (fg_json_load(full, len, &j, NULL, 0) == FG_OK) {
            json_t *conv = ks_hpa_to_v1(j);
            free(full);
            full = fg_json_dumps(conv, &len);
            json_decref(conv);
            json_decref(j);
        }
    }
    if (w->table) {
        json_t *j = NULL;
        char rv[24];
        snprintf(rv, sizeof(rv), "%lld", (long long)o->rv);
        if (fg_json_load(full, len, &j, NULL, 0) == FG_OK) {
            json_t *t = ks_table_new(w->res, rv, !w->table_columns_sent);
            ks_table_add_row(t, w->res, j, w->include_object, ks_now_ms(w->c));
            w->table_columns_sent = true;
            free(full);
            full = fg_json_dumps(t, &len);
            json_decref(t);
            json_decref(j);
        }
    }
    fg_buf_appendf(b, "{\"type\":\"%s\",\"object\":", type);
    fg_buf_append(b, full, len);
    fg_buf_append(b, "}\n", 2);
    free(full);
}

/* A BOOKMARK's object is the watched kind with only the RV set; a Pod's looks like the real one
 * (spec.containers null, status {}), see real-kind-v1.36.2/watch_event-...ndjson. */
static void append_bookmark(fg_buf_t *b, const ks_watch_t *w, bool initial_end) {
    const ks_resource_t *r = &ks_resources[w->res];
    char av[64];
    ks_resource_api_version(r, av, sizeof(av));
    fg_buf_appendf(b,
                   "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\","
                   "\"metadata\":{\"resourceVersion\":\"%lld\"%s}%s}}\n",
                   r->kind, av, (long long)w->cursor,
                   initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "",
                   strcmp(r->kind, "Pod") == 0 ? ",\"spec\":{\"containers\":null},\"status\":{}"
                                               : "");
}

static void append_expired(fg_buf_t *b, int64_t asked, int64_t oldest) {
    char msg[128];
    snprintf(msg, sizeof(msg), "too old resource version: %lld (%lld)", (long long)asked,
             (long long)oldest);
    json_t *st = ks_status_new(410, "Expired", msg);
    size_t len = 0;
    char *s = fg_json_dumps(st, &len);
    fg_buf_appendf(b, "{\"type\":\"ERROR\",\"object\":");
    fg_buf_append(b, s, len);
    fg_buf_append(b, "}\n", 2);
    free(s);
    json_decref(st);
}

static int watch_options_or_reply(const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const char *match = ks_req_query(req, "resourceVersionMatch");
    const char *sie = ks_req_query(req, "sendInitialEvents");
    if (match != NULL && match[0] == '\0')
        match = NULL;
    if (sie == NULL && match != NULL) {
        ks_invalid_reply(out, t, "", "resourceVersionMatch", "FieldValueForbidden",
                         "Forbidden: resourceVersionMatch is forbidden for watch unless "
                         "sendInitialEvents is provided");
        return FG_EINVAL;
    }
    if (sie != NULL && (match == NULL || strcmp(match, "NotOlderThan") != 0)) {
        ks_invalid_reply(out, t, "", "resourceVersionMatch", "FieldValueNotSupported",
                         "Unsupported value: \"\": supported values: \"NotOlderThan\"");
        return FG_EINVAL;
    }
    return FG_OK;
}

void ks_watch_start(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    ks_watch_t *w = fg_xcalloc(1, sizeof(*w));
    const char *rv = ks_req_query(req, "resourceVersion");
    const char *sie = ks_req_query(req, "sendInitialEvents");
    const char *timeout = ks_req_query(req, "timeoutSeconds");
    int64_t start = 0, timeout_s = DEFAULT_TIMEOUT_S;
    w->c = c;
    w->cut_gen = __atomic_load_n(&c->cut_gen, __ATOMIC_SEQ_CST);
    w->res = t->res;
    w->ns = t->ns ? fg_xstrdup(t->ns) : NULL;
    w->expired_asked = -1;
    w->bookmarks = ks_req_flag(req, "allowWatchBookmarks");
    w->table = ks_wants_table(req);
    w->v1 = t->v1;
    if (ks_req_query(req, "includeObject") != NULL)
        w->include_object = fg_xstrdup(ks_req_query(req, "includeObject"));
    if (rv != NULL && rv[0] == '\0')
        rv = NULL;
    if (watch_options_or_reply(req, t, out) != FG_OK ||
        ks_selectors_or_reply(req, t->res, &w->labels, &w->fields, out) != FG_OK ||
        (rv != NULL && ks_parse_rv_or_reply(rv, &start, out) != FG_OK))
        goto fail;
    if (timeout != NULL &&
        fg_parse_int64(timeout, strlen(timeout), 0, INT32_MAX, &timeout_s) != FG_OK) {
        ks_status_reply(out, 400, "BadRequest", "timeoutSeconds: must be a non-negative integer",
                        NULL, NULL, NULL, NULL);
        goto fail;
    }
    /* Initial state: sendInitialEvents=true, or (legacy) RV unset or "0" without the parameter. */
    bool initial = sie != NULL ? ks_req_flag(req, "sendInitialEvents") : start == 0;
    if (initial) {
        int64_t list_rv = 0;
        int64_t cur = ks_store_rv(c->store);
        if (start > cur) {
            ks_too_large_reply(out, start, cur);
            goto fail;
        }
        if (ks_store_list(c->store, t->res, t->ns, NULL, 0, &w->initial, &w->ninitial, &list_rv) !=
            FG_OK)
            goto fail;
        w->cursor = list_rv;
        w->end_bookmark = sie != NULL && w->bookmarks;
    } else if (start == 0) {
        w->cursor = ks_store_rv(c->store);
    } else {
        w->cursor = start;
        if (start < ks_store_oldest_rv(c->store))
            w->expired_asked = start;
    }
    uint64_t now = fg_now_ns();
    w->deadline_ns = now + (uint64_t)timeout_s * 1000000000ULL;
    w->next_bookmark_ns = now + (uint64_t)c->bookmark_ms * 1000000ULL;
    out->code = 200;
    out->content_type = "application/json";
    out->watch = w;
    return;
fail:
    ks_watch_free(w);
}

static void append_change(ks_watch_t *w, fg_buf_t *b, const ks_event_t *e) {
    bool now = matches(w, e->obj);
    bool before = e->prev != NULL && matches(w, e->prev);
    switch (e->type) {
        case KS_ADDED:
            if (now)
                append_event(w, b, "ADDED", e->obj);
            break;
        case KS_MODIFIED:
            /* a change in or out of the selection reads as ADDED / DELETED, as the cacher does */
            if (now && before)
                append_event(w, b, "MODIFIED", e->obj);
            else if (now)
                append_event(w, b, "ADDED", e->obj);
            else if (before)
                append_event(w, b, "DELETED", e->obj);
            break;
        case KS_DELETED:
            if (before)
                append_event(w, b, "DELETED", e->obj);
            break;
    }
}

int ks_watch_next(ks_watch_t *w, fg_buf_t *b, int wait_ms) {
    ks_event_t evs[BATCH];
    size_t n = 0;
    if (w->done || __atomic_load_n(&w->c->cut_gen, __ATOMIC_SEQ_CST) != w->cut_gen) {
        w->done = true; /* ended by /_kubesim/cut-watches (or the cluster going down) */
        return FG_ENOENT;
    }
    if (w->expired_asked >= 0) {
        append_expired(b, w->expired_asked, ks_store_oldest_rv(w->c->store));
        w->done = true;
        return FG_OK;
    }
    if (w->next_initial < w->ninitial) {
        for (size_t k = 0; k < BATCH && w->next_initial < w->ninitial; k++, w->next_initial++) {
            ks_obj_t *o = w->initial[w->next_initial];
            if (matches(w, o))
                append_event(w, b, "ADDED", o);
        }
        return FG_OK;
    }
    if (w->end_bookmark) {
        append_bookmark(b, w, true);
        w->end_bookmark = false;
        return FG_OK;
    }
    uint64_t now = fg_now_ns();
    if (now >= w->deadline_ns) {
        w->done = true;
        return FG_ENOENT;
    }
    uint64_t until = w->deadline_ns;
    if (w->bookmarks && w->next_bookmark_ns < until)
        until = w->next_bookmark_ns;
    uint64_t wait_ns = until > now ? until - now : 0;
    if (wait_ns > (uint64_t)wait_ms * 1000000ULL)
        wait_ns = (uint64_t)wait_ms * 1000000ULL;
    int64_t cursor = w->cursor;
    int rc = ks_store_wait_events(w->c->store, w->res, w->cursor, (int)(wait_ns / 1000000ULL), evs,
                                  BATCH, &n, &cursor);
    if (rc == KS_EEXPIRED) {
        w->expired_asked = w->cursor; /* fell behind the history window */
        return FG_OK;
    }
    if (rc != FG_OK || __atomic_load_n(&w->c->cut_gen, __ATOMIC_SEQ_CST) != w->cut_gen) {
        ks_events_release(evs, n);
        w->done = true;
        return FG_ENOENT;
    }
    for (size_t i = 0; i < n; i++)
        append_change(w, b, &evs[i]);
    ks_events_release(evs, n);
    w->cursor = cursor;
    if (w->bookmarks && fg_now_ns() >= w->next_bookmark_ns) {
        append_bookmark(b, w, false);
        w->next_bookmark_ns = fg_now_ns() + (uint64_t)w->c->bookmark_ms * 1000000ULL;
    }
    return FG_OK;
}
