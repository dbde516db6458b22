/* handler: one request in, one answer out. Checks the bearer token, serves discovery, splits a
 * resource path into (resource, namespace, name, subresource) and dispatches on the method, so
 * no verb handler repeats those checks. Knows nothing of libmicrohttpd (see server.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ks.h"

#define MAX_SEGS 8

const char *ks_req_query(const ks_req_t *req, const char *key) {
    for (size_t i = 0; i < req->nquery; i++) {
        if (strcmp(req->keys[i], key) == 0)
            return req->values[i] ? req->values[i] : "";
    }
    return NULL;
}

bool ks_req_flag(const ks_req_t *req, const char *key) {
    const char *v = ks_req_query(req, key);
    return v != NULL && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0;
}

static bool authorized(const ks_cluster_t *c, const ks_req_t *req) {
    const char *h = req->authorization;
    if (c->token == NULL || c->token[0] == '\0')
        return true;
    if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
        return false;
    return strcmp(h + 7, c->token) == 0;
}

static void not_found(ks_resp_t *out) {
    ks_status_reply(out, 404, "NotFound", "the server could not find the requested resource", NULL,
                    NULL, NULL, NULL);
}

static void method_not_allowed(ks_resp_t *out, const ks_req_t *req) {
    char msg[128];
    snprintf(msg, sizeof(msg), "the server does not allow this method on the requested resource");
    (void)req;
    ks_status_reply(out, 405, "MethodNotAllowed", msg, NULL, NULL, NULL, NULL);
}

/* Splits path into at most MAX_SEGS segments in buf (overwritten). Returns the count. */
static size_t split_path(char *buf, char **segs) {
    size_t n = 0;
    for (char *p = buf; *p != '\0' && n < MAX_SEGS;) {
        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        segs[n++] = p;
        char *slash = strchr(p, '/');
        if (slash == NULL)
            break;
        *slash = '\0';
        p = slash + 1;
    }
    return n;
}

/* Resolves segs (after the group/version) into t. FG_OK or FG_ENOENT. autoscaling/v1 is the
 * stored autoscaling/v2 HPA, converted (t->v1). */
static int resolve(const char *group, const char *version, char **segs, size_t n, ks_target_t *t) {
    memset(t, 0, sizeof(*t));
    if (strcmp(group, "autoscaling") == 0 && strcmp(version, "v1") == 0) {
        int rc = resolve(group, "v2", segs, n, t);
        t->v1 = true;
        return rc;
    }
    if (n >= 3 && strcmp(segs[0], "namespaces") == 0) {
        int res = ks_resource_find(group, version, segs[2]);
        if (res >= 0 && ks_resources[res].namespaced) {
            t->res = res;
            t->ns = segs[1];
            t->name = n >= 4 ? segs[3] : NULL;
            t->sub = n >= 5 ? segs[4] : NULL;
            return n <= 5 ? FG_OK : FG_ENOENT;
        }
    }
    if (n == 0)
        return FG_ENOENT;
    int res = ks_resource_find(group, version, segs[0]);
    if (res < 0 || n > 3)
        return FG_ENOENT;
    /* a namespaced kind without a namespace is only its all-namespaces collection */
    if (ks_resources[res].namespaced && n > 1)
        return FG_ENOENT;
    t->res = res;
    t->name = n >= 2 ? segs[1] : NULL;
    t->sub = n >= 3 ? segs[2] : NULL;
    return FG_OK;
}

static bool sub_served(const ks_target_t *t) {
    const ks_resource_t *r = &ks_resources[t->res];
    if (t->sub == NULL)
        return true;
    return (strcmp(t->sub, "status") == 0 && r->has_status) ||
           (strcmp(t->sub, "scale") == 0 && r->has_scale);
}

static void dispatch(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const char *m = req->method;
    if (t->name == NULL) {
        if (strcmp(m, "GET") == 0) {
            if (ks_req_flag(req, "watch"))
                ks_watch_start(c, req, t, out);
            else
                ks_list(c, req, t, out);
        } else if (strcmp(m, "POST") == 0 && (t->ns != NULL || !ks_resources[t->res].namespaced)) {
            ks_create(c, req, t, out);
        } else {
            method_not_allowed(out, req);
        }
        return;
    }
    if (strcmp(m, "GET") == 0)
        ks_get(c, req, t, out);
    else if (strcmp(m, "PUT") == 0)
        ks_update(c, req, t, out);
    else if (strcmp(m, "PATCH") == 0)
        ks_patch(c, req, t, out);
    else if (strcmp(m, "DELETE") == 0 && t->sub == NULL)
        ks_delete(c, req, t, out);
    else
        method_not_allowed(out, req);
}

/* The verb a resource request counts as in /_kubesim/stats. */
static ks_verb_t verb_of(const ks_req_t *req, const ks_target_t *t) {
    static const struct {
        const char *method;
        ks_verb_t verb;
    } VERBS[] = {{"POST", KS_VERB_CREATE},
                 {"PUT", KS_VERB_UPDATE},
                 {"PATCH", KS_VERB_PATCH},
                 {"DELETE", KS_VERB_DELETE}};
    if (strcmp(req->method, "GET") == 0) {
        if (t->name != NULL)
            return KS_VERB_GET;
        return ks_req_flag(req, "watch") ? KS_VERB_WATCH : KS_VERB_LIST;
    }
    for (size_t i = 0; i < sizeof(VERBS) / sizeof(VERBS[0]); i++) {
        if (strcmp(req->method, VERBS[i].method) == 0)
            return VERBS[i].verb;
    }
    return KS_VERB_GET;
}

/* Routes a Kubernetes path; counts resource requests when count is set, and applies the faults
 * (after counting: a request failed by a fault was still received) when faults is set. */
static void route(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out, bool external) {
    char *buf = NULL;
    char *segs[MAX_SEGS];
    ks_target_t t;
    buf = fg_xstrdup(req->path);
    size_t n = split_path(buf, segs);
    int rc = FG_ENOENT;
    if (n >= 2 && strcmp(segs[0], "api") == 0)
        rc = resolve("", segs[1], segs + 2, n - 2, &t);
    else if (n >= 3 && strcmp(segs[0], "apis") == 0)
        rc = resolve(segs[1], segs[2], segs + 3, n - 3, &t);
    if (external && rc == FG_OK)
        __atomic_add_fetch(&c->requests[verb_of(req, &t)], 1, __ATOMIC_RELAXED);
    if (external && ks_faults_apply(c, out) != FG_OK)
        goto out;
    if (ks_discovery(c, req, out) == FG_OK)
        goto out;
    if (rc == FG_OK && t.sub != NULL && ks_resources[t.res].namespaced &&
        strcmp(ks_resources[t.res].kind, "Pod") == 0 && ks_pod_sub(c, req, &t, out) == FG_OK)
        goto out;
    if (rc != FG_OK || !sub_served(&t)) {
        not_found(out);
        goto out;
    }
    dispatch(c, req, &t, out);
    if (t.v1 && out->watch == NULL)
        ks_v1_reply(out);
out:
    free(buf);
}

int ks_handle(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    memset(out, 0, sizeof(*out));
    if (!authorized(c, req)) {
        ks_status_reply(out, 401, "Unauthorized", "Unauthorized", NULL, NULL, NULL, NULL);
        return FG_OK;
    }
    if (ks_admin(c, req, out) == FG_OK)
        return FG_OK;
    route(c, req, out, true);
    return FG_OK;
}

void ks_handle_internal(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    memset(out, 0, sizeof(*out));
    route(c, req, out, false);
}
