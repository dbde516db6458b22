/* Helpers for kubesim's check suites: a cluster without a listener and a request helper that
 * drives ks_handle the way server.c does (query string split and %-decoded). */
#ifndef KUBESIM_KS_TEST_H
#define KUBESIM_KS_TEST_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

typedef struct {
    ks_resp_t resp;
    json_t *json; /* parsed body, NULL for watches */
    char *storage;
} call_t;

static inline ks_cluster_t *test_cluster(size_t history) {
    ks_cluster_t *c = NULL;
    ck_assert_int_eq(ks_cluster_new("test", "region-1", "zone-a", "tok", 0, history, 60000, &c),
                     FG_OK);
    return c;
}

static inline void url_decode(char *s) {
    char *o = s;
    for (char *p = s; *p != '\0'; p++) {
        if (*p == '+') {
            *o++ = ' ';
        } else if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* Sends method url (with ?query) and body; fills call (release with call_free). */
static inline void call(ks_cluster_t *c, const char *method, const char *url, const char *ctype,
                        const char *body, call_t *out) {
    ks_req_t req = {.method = method,
                    .content_type = ctype,
                    .body = body,
                    .body_len = body ? strlen(body) : 0,
                    .authorization = "Bearer tok",
                    .user_agent = "kubesim-test/1.0"};
    memset(out, 0, sizeof(*out));
    out->storage = fg_xstrdup(url);
    char *q = strchr(out->storage, '?');
    req.path = out->storage;
    if (q != NULL) {
        *q++ = '\0';
        while (*q != '\0' && req.nquery < KS_MAX_QUERY) {
            char *amp = strchr(q, '&');
            if (amp != NULL)
                *amp = '\0';
            char *eq = strchr(q, '=');
            if (eq != NULL)
                *eq = '\0';
            url_decode(q);
            if (eq != NULL)
                url_decode(eq + 1);
            req.keys[req.nquery] = q;
            req.values[req.nquery++] = eq ? eq + 1 : "";
            if (amp == NULL)
                break;
            q = amp + 1;
        }
    }
    ks_handle(c, &req, &out->resp);
    if (out->resp.body != NULL)
        fg_json_load(out->resp.body, out->resp.len, &out->json, NULL, 0);
}

static inline void call_free(call_t *c) {
    ks_resp_free(&c->resp);
    json_decref(c->json);
    free(c->storage);
}

static inline const char *jstr(const json_t *j, const char *k1, const char *k2) {
    const json_t *v = json_object_get(j, k1);
    if (k2 != NULL)
        v = json_object_get(v, k2);
    return json_string_value(v);
}

/* Creates a pod named name in ns with labels (a JSON object text) and a phase; asserts 201. */
static inline void make_pod(ks_cluster_t *c, const char *ns, const char *name, const char *labels,
                            const char *node) {
    char url[256], body[1024];
    call_t r;
    snprintf(url, sizeof(url), "/api/v1/namespaces/%s/pods", ns);
    snprintf(
        body, sizeof(body),
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":%s},"
        "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"app\",\"image\":\"nginx\"}]}}",
        name, labels, node);
    call(c, "POST", url, "application/json", body, &r);
    ck_assert_int_eq(r.resp.code, 201);
    call_free(&r);
}

/* Reads the watch until it has at least `lines` lines or `rounds` polls passed. */
static inline char *watch_read(ks_watch_t *w, int lines, int rounds) {
    fg_buf_t b;
    fg_buf_init(&b, 64 << 20);
    for (int i = 0; i < rounds; i++) {
        int got = 0;
        for (size_t k = 0; k < b.len; k++)
            got += b.data[k] == '\n';
        if (got >= lines)
            break;
        if (ks_watch_next(w, &b, 100) != FG_OK)
            break;
    }
    fg_buf_append(&b, "", 1);
    return fg_buf_steal(&b, NULL);
}

#endif
