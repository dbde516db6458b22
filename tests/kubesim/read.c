/* read: GET of one object, LIST (selectors, limit/continue at a consistent RV, resourceVersion and
 * resourceVersionMatch validated and honoured as ../shared/K8S-SEMANTICS.md §1-2 tabulates) and
 * the shared query checks. Watches live in watch.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

#define LIST_MAX_BYTES ((size_t)2 << 30)

char *ks_obj_full_json(const ks_obj_t *o, size_t *len_out) {
    const ks_resource_t *r = &ks_resources[o->res];
    char av[64];
    fg_buf_t b;
    ks_resource_api_version(r, av, sizeof(av));
    fg_buf_init(&b, LIST_MAX_BYTES);
    fg_buf_appendf(&b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\"%s", r->kind, av,
                   o->ser_len > 2 ? "," : "");
    fg_buf_append(&b, o->ser + 1, o->ser_len - 1);
    return fg_buf_steal(&b, len_out);
}

void ks_invalid_reply(ks_resp_t *out, const ks_target_t *t, const char *name, const char *field,
                      const char *cause_reason, const char *detail) {
    const ks_resource_t *r = &ks_resources[t->res];
    char msg[512];
    snprintf(msg, sizeof(msg), "%s \"%s\" is invalid: %s: %s", r->kind, name ? name : "", field,
             detail);
    json_t *causes =
        json_pack("[{s:s, s:s, s:s}]", "reason", cause_reason, "message", detail, "field", field);
    ks_status_reply(out, 422, "Invalid", msg, name ? name : "", r->group, r->kind, causes);
}

int ks_parse_rv_or_reply(const char *s, int64_t *out, ks_resp_t *resp) {
    if (fg_parse_int64(s, strlen(s), 0, INT64_MAX, out) != FG_OK) {
        char msg[160];
        snprintf(msg, sizeof(msg), "invalid resource version: \"%.60s\"", s);
        ks_status_reply(resp, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
        return FG_EINVAL;
    }
    return FG_OK;
}

int ks_selectors_or_reply(const ks_req_t *req, int res, ks_selector_t **labels,
                          ks_selector_t **fields, ks_resp_t *out) {
    char err[256];
    *labels = NULL;
    *fields = NULL;
    if (ks_label_selector_parse(ks_req_query(req, "labelSelector"), labels, err, sizeof(err)) !=
        FG_OK) {
        ks_status_reply(out, 400, "BadRequest", err, NULL, NULL, NULL, NULL);
        return FG_EINVAL;
    }
    if (ks_field_selector_parse(res, ks_req_query(req, "fieldSelector"), fields, err,
                                sizeof(err)) != FG_OK) {
        ks_selector_free(*labels);
        *labels = NULL;
        ks_status_reply(out, 400, "BadRequest", err, NULL, NULL, NULL, NULL);
        return FG_EINVAL;
    }
    return FG_OK;
}

void ks_too_large_reply(ks_resp_t *out, int64_t asked, int64_t current) {
    char msg[128];
    snprintf(msg, sizeof(msg), "Too large resource version: %lld, current: %lld", (long long)asked,
             (long long)current);
    json_t *causes = json_pack("[{s:s, s:s}]", "reason", "ResourceVersionTooLarge", "message",
                               "Too large resource version");
    ks_status_reply(out, 504, "Timeout", msg, NULL, NULL, NULL, causes);
    json_t *st = NULL;
    /* retryAfterSeconds sits in details, as apiserver pkg/storage/errors.go sets it */
    if (fg_json_load(out->body, out->len, &st, NULL, 0) == FG_OK) {
        json_object_set_new(json_object_get(st, "details"), "retryAfterSeconds", json_integer(1));
        free(out->body);
        out->body = NULL;
        ks_json_reply(out, 504, st);
    }
}

/* The Table of a list (its items) or of one object, from the JSON text about to be sent;
 * the list's metadata (resourceVersion, continue, remainingItemCount) is kept. */
static void table_reply(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t,
                        const char *text, size_t len, bool is_list, ks_resp_t *out) {
    json_t *j = NULL;
    if (fg_json_load(text, len, &j, NULL, 0) != FG_OK) {
        ks_status_reply(out, 500, "InternalError", "cannot print the answer as a Table", NULL, NULL,
                        NULL, NULL);
        return;
    }
    const char *rv =
        json_string_value(json_object_get(json_object_get(j, "metadata"), "resourceVersion"));
    json_t *table = ks_table_new(t->res, rv, true);
    const char *include = ks_req_query(req, "includeObject");
    int64_t now = ks_now_ms(c);
    if (is_list) {
        size_t i;
        json_t *it;
        json_object_update(json_object_get(table, "metadata"), json_object_get(j, "metadata"));
        json_array_foreach(json_object_get(j, "items"), i, it)
            ks_table_add_row(table, t->res, it, include, now);
    } else {
        ks_table_add_row(table, t->res, j, include, now);
    }
    json_decref(j);
    ks_json_reply(out, 200, table);
}

void ks_get(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    ks_obj_t *o = NULL;
    char *key = ks_key(t->ns, t->name);
    if (ks_store_get(c->store, t->res, key, &o) != FG_OK) {
        ks_not_found_reply(out, r, t->name);
        goto out;
    }
    if (t->sub != NULL && strcmp(t->sub, "scale") == 0) {
        ks_json_reply(out, 200, ks_scale_of(o));
        goto out;
    }
    out->code = 200;
    out->content_type = "application/json";
    out->body = ks_obj_full_json(o, &out->len);
    if (ks_wants_table(req)) {
        char *text = out->body;
        size_t len = out->len;
        out->body = NULL;
        table_reply(c, req, t, text, len, false, out);
        free(text);
    }
out:
    ks_obj_unref(o);
    free(key);
}

char *ks_key(const char *ns, const char *name) {
    return ns != NULL ? fg_xasprintf("%s/%s", ns, name) : fg_xstrdup(name);
}

void ks_not_found_reply(ks_resp_t *out, const ks_resource_t *r, const char *name) {
    char msg[320];
    if (r->group[0] != '\0')
        snprintf(msg, sizeof(msg), "%s.%s \"%s\" not found", r->plural, r->group, name);
    else
        snprintf(msg, sizeof(msg), "%s \"%s\" not found", r->plural, name);
    ks_status_reply(out, 404, "NotFound", msg, name, r->group, r->plural, NULL);
}

/* ---- continue tokens: base64url(JSON {"v","rv","start"}), as apiserver's continue.go ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64url_encode(const char *in, size_t n) {
    char *out = fg_xmalloc(n / 3 * 4 + 5);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (uint32_t)(unsigned char)in[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = B64[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = B64[v & 63];
    }
    out[o] = '\0';
    return out;
}

static int b64url_decode(const char *in, char **out, size_t *len) {
    size_t n = strlen(in);
    char *buf = fg_xmalloc(n / 4 * 3 + 4);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = in[i] ? strchr(B64, in[i]) : NULL;
        if (p == NULL) {
            free(buf);
            return FG_EINVAL;
        }
        acc = (acc << 6) | (uint32_t)(p - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return FG_OK;
}

char *ks_continue_encode(int64_t rv, const char *last_key) {
    json_t *j = json_pack("{s:s, s:I, s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)rv, "start",
                          last_key);
    size_t len = 0;
    char *s = fg_json_dumps(j, &len);
    char *tok = b64url_encode(s, len);
    free(s);
    json_decref(j);
    return tok;
}

int ks_continue_decode(const char *tok, int64_t *rv, char **last_key) {
    char *raw = NULL;
    size_t len = 0;
    json_t *j = NULL;
    int rc = FG_EINVAL;
    if (b64url_decode(tok, &raw, &len) != FG_OK || fg_json_load(raw, len, &j, NULL, 0) != FG_OK)
        goto out;
    json_t *jrv = json_object_get(j, "rv");
    const char *start = json_string_value(json_object_get(j, "start"));
    if (!json_is_integer(jrv) || start == NULL || json_integer_value(jrv) <= 0)
        goto out;
    *rv = json_integer_value(jrv);
    *last_key = fg_xstrdup(start);
    rc = FG_OK;
out:
    free(raw);
    json_decref(j);
    return rc;
}

/* ---- LIST ---------------------------------------------------------------- */

typedef struct {
    int64_t at_rv; /* 0 = most recent */
    char *after;   /* continue position (owned) */
    int64_t limit; /* 0 = all */
} list_plan_t;

static int invalid_list_option(ks_resp_t *out, const ks_target_t *t, const char *field,
                               const char *detail) {
    ks_invalid_reply(out, t, "", field, "FieldValueForbidden", detail);
    return FG_EINVAL;
}

/* Validation and the RV table of K8S-SEMANTICS.md §1 (apimachinery validation.go:28-76). */
static int plan_list_or_reply(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t,
                              list_plan_t *plan, ks_resp_t *out) {
    const char *rv = ks_req_query(req, "resourceVersion");
    const char *match = ks_req_query(req, "resourceVersionMatch");
    const char *cont = ks_req_query(req, "continue");
    const char *limit = ks_req_query(req, "limit");
    int64_t n = 0;
    memset(plan, 0, sizeof(*plan));
    if (rv != NULL && rv[0] == '\0')
        rv = NULL;
    if (cont != NULL && cont[0] == '\0')
        cont = NULL;
    if (match != NULL && match[0] == '\0')
        match = NULL;
    if (ks_req_query(req, "sendInitialEvents") != NULL)
        return invalid_list_option(out, t, "sendInitialEvents",
                                   "Forbidden: sendInitialEvents is forbidden for list");
    if (match != NULL && rv == NULL)
        return invalid_list_option(
            out, t, "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
    if (match != NULL && cont != NULL)
        return invalid_list_option(
            out, t, "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden when continue is provided");
    if (match != NULL && strcmp(match, "Exact") != 0 && strcmp(match, "NotOlderThan") != 0) {
        char d[160];
        snprintf(d, sizeof(d),
                 "Unsupported value: \"%.40s\": supported values: \"Exact\", \"NotOlderThan\"",
                 match);
        ks_invalid_reply(out, t, "", "resourceVersionMatch", "FieldValueNotSupported", d);
        return FG_EINVAL;
    }
    if (match != NULL && strcmp(match, "Exact") == 0 && strcmp(rv, "0") == 0)
        return invalid_list_option(
            out, t, "resourceVersionMatch",
            "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    if (limit != NULL && limit[0] != '\0') {
        if (fg_parse_int64(limit, strlen(limit), 0, INT64_MAX, &plan->limit) != FG_OK) {
            ks_status_reply(out, 400, "BadRequest", "limit: must be a non-negative integer", NULL,
                            NULL, NULL, NULL);
            return FG_EINVAL;
        }
    }
    if (rv != NULL && ks_parse_rv_or_reply(rv, &n, out) != FG_OK)
        return FG_EINVAL;
    if (cont != NULL) {
        if (rv != NULL && n != 0) {
            ks_status_reply(out, 400, "BadRequest",
                            "specifying resource version is not allowed when using continue", NULL,
                            NULL, NULL, NULL);
            return FG_EINVAL;
        }
        if (ks_continue_decode(cont, &plan->at_rv, &plan->after) != FG_OK) {
            ks_status_reply(out, 400, "BadRequest", "continue key is not valid", NULL, NULL, NULL,
                            NULL);
            return FG_EINVAL;
        }
        return FG_OK;
    }
    if (rv == NULL || n == 0)
        return FG_OK; /* Most Recent, or Any (which the newest state satisfies) */
    bool exact =
        (match != NULL && strcmp(match, "Exact") == 0) || (match == NULL && plan->limit > 0);
    int64_t cur = ks_store_rv(c->store);
    if (n > cur) {
        ks_too_large_reply(out, n, cur);
        return FG_EINVAL;
    }
    plan->at_rv = exact ? n : 0;
    return FG_OK;
}

/* Whether o passes both selectors; a raw (seeded) object is parsed only when a selector is set. */
static bool selected(const ks_selector_t *labels, const ks_selector_t *fields, const ks_obj_t *o) {
    if (ks_selector_empty(labels) && ks_selector_empty(fields))
        return true;
    json_t *j = ks_obj_parse(o);
    bool ok = ks_label_selector_matches(labels, j) && ks_field_selector_matches(fields, j);
    json_decref(j);
    return ok;
}

void ks_list(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    ks_selector_t *labels = NULL, *fields = NULL;
    ks_obj_t **items = NULL;
    size_t n = 0;
    int64_t list_rv = 0;
    list_plan_t plan = {0};
    fg_buf_t b;
    char av[64];
    fg_buf_t ib;
    fg_buf_init(&b, LIST_MAX_BYTES);
    fg_buf_init(&ib, LIST_MAX_BYTES);
    if (plan_list_or_reply(c, req, t, &plan, out) != FG_OK ||
        ks_selectors_or_reply(req, t->res, &labels, &fields, out) != FG_OK)
        goto out;
    bool unfiltered = ks_selector_empty(labels) && ks_selector_empty(fields);
    size_t max = unfiltered && plan.limit > 0 ? (size_t)plan.limit + 1 : SIZE_MAX, total = 0;
    int rc = ks_store_list_max(c->store, t->res, t->ns, plan.after, plan.at_rv, max, &items, &n,
                               &total, &list_rv);
    if (rc == KS_EEXPIRED && ks_req_query(req, "continue") != NULL) {
        ks_status_reply(out, 410, "Expired",
                        "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter.",
                        NULL, NULL, NULL, NULL);
        goto out;
    }
    if (rc == KS_EEXPIRED) {
        ks_status_reply(out, 410, "Expired",
                        "The resourceVersion for the provided list is too old.", NULL, NULL, NULL,
                        NULL);
        goto out;
    }
    if (rc != FG_OK) {
        ks_too_large_reply(out, plan.at_rv, ks_store_rv(c->store));
        goto out;
    }
    size_t sent = 0, i = 0;
    const char *last = NULL;
    for (; i < n; i++) {
        if (!selected(labels, fields, items[i]))
            continue;
        if (plan.limit > 0 && sent == (size_t)plan.limit)
            break;
        if (sent++ > 0)
            fg_buf_append(&ib, ",", 1);
        fg_buf_append(&ib, items[i]->ser, items[i]->ser_len);
        last = items[i]->key;
    }
    bool more = false;
    for (size_t j = i; j < n && !more; j++)
        more = selected(labels, fields, items[j]);
    ks_resource_api_version(r, av, sizeof(av));
    fg_buf_appendf(&b, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{", r->kind, av);
    fg_buf_appendf(&b, "\"resourceVersion\":\"%lld\"", (long long)list_rv);
    if (more && last != NULL) {
        char *tok = ks_continue_encode(list_rv, last);
        fg_buf_appendf(&b, ",\"continue\":\"%s\"", tok);
        if (ks_selector_empty(labels) && ks_selector_empty(fields))
            fg_buf_appendf(&b, ",\"remainingItemCount\":%zu", total - i);
        free(tok);
    }
    fg_buf_append(&b, "},\"items\":[", 11);
    fg_buf_append(&b, ib.data ? ib.data : "", ib.len);
    fg_buf_append(&b, "]}", 2);
    if (ks_wants_table(req)) {
        table_reply(c, req, t, b.data, b.len, true, out);
        goto out;
    }
    out->code = 200;
    out->content_type = "application/json";
    out->body = fg_buf_steal(&b, &out->len);
out:
    fg_buf_free(&b);
    fg_buf_free(&ib);
    ks_objs_free(items, n);
    ks_selector_free(labels);
    ks_selector_free(fields);
    free(plan.after);
}
