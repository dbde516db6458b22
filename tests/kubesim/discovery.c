/* discovery: /version, /api, /api/v1, /apis and /apis/<group>/<version>, built from the resource
 * table so that kubectl (legacy discovery; the aggregated form is not offered) finds every kind,
 * and an empty /openapi/v2 + /openapi/v3 answer so kubectl's validation falls back cleanly. */
#include <stdio.h>
#include <string.h>

#include "ks.h"

static const char *const VERBS[] = {
    "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch", NULL};

static json_t *string_list(const char *csv) {
    json_t *a = json_array();
    while (csv != NULL && *csv != '\0') {
        const char *end = strchr(csv, ',');
        size_t n = end ? (size_t)(end - csv) : strlen(csv);
        json_array_append_new(a, json_stringn(csv, n));
        csv += n + (end ? 1 : 0);
    }
    return a;
}

static json_t *sub_entry(const ks_resource_t *r, const char *sub, const char *group,
                         const char *version, const char *kind, const char *verbs) {
    char name[128];
    snprintf(name, sizeof(name), "%s/%s", r->plural, sub);
    json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", name, "singularName", "",
                          "namespaced", r->namespaced, "kind", kind, "verbs", string_list(verbs));
    if (group != NULL)
        json_object_set_new(e, "group", json_string(group));
    if (version != NULL)
        json_object_set_new(e, "version", json_string(version));
    return e;
}

/* The versions a group is served in beyond its stored one (convert.c): autoscaling/v1. */
static const char *extra_version(const char *group) {
    return strcmp(group, "autoscaling") == 0 ? "v1" : NULL;
}

static json_t *resource_list(const char *group, const char *version) {
    char gv[64];
    const char *extra = extra_version(group);
    if (extra != NULL && strcmp(version, extra) == 0) { /* the stored kinds, in this version */
        json_t *l = resource_list(group, "v2");
        if (l != NULL)
            json_object_set_new(l, "groupVersion", json_string("autoscaling/v1"));
        return l;
    }
    if (group[0] == '\0')
        snprintf(gv, sizeof(gv), "%s", version);
    else
        snprintf(gv, sizeof(gv), "%s/%s", group, version);
    json_t *list = json_array();
    for (size_t i = 0; i < ks_nresources; i++) {
        const ks_resource_t *r = &ks_resources[i];
        if (strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0)
            continue;
        json_t *verbs = json_array();
        for (size_t v = 0; VERBS[v] != NULL; v++)
            json_array_append_new(verbs, json_string(VERBS[v]));
        json_t *e =
            json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", r->plural, "singularName", r->singular,
                      "namespaced", r->namespaced, "kind", r->kind, "verbs", verbs);
        if (r->short_names[0] != '\0')
            json_object_set_new(e, "shortNames", string_list(r->short_names));
        json_object_set_new(e, "categories", string_list(r->namespaced ? "all" : ""));
        json_array_append_new(list, e);
        if (r->has_status)
            json_array_append_new(list,
                                  sub_entry(r, "status", NULL, NULL, r->kind, "get,patch,update"));
        if (r->has_scale)
            json_array_append_new(
                list, sub_entry(r, "scale", "autoscaling", "v1", "Scale", "get,patch,update"));
    }
    if (json_array_size(list) == 0) {
        json_decref(list);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", gv, "resources", list);
}

static json_t *group_list(void) {
    json_t *groups = json_array();
    for (size_t i = 0; i < ks_nresources; i++) {
        const ks_resource_t *r = &ks_resources[i];
        bool seen = false;
        if (r->group[0] == '\0')
            continue;
        for (size_t j = 0; j < i; j++)
            seen = seen || strcmp(ks_resources[j].group, r->group) == 0;
        if (seen)
            continue;
        char gv[64];
        ks_resource_api_version(r, gv, sizeof(gv));
        json_t *ver = json_pack("{s:s, s:s}", "groupVersion", gv, "version", r->version);
        json_t *group = json_pack("{s:s, s:[O], s:o}", "name", r->group, "versions", ver,
                                  "preferredVersion", json_deep_copy(ver));
        const char *extra = extra_version(r->group);
        if (extra != NULL) {
            char egv[64];
            snprintf(egv, sizeof(egv), "%s/%s", r->group, extra);
            json_array_append_new(json_object_get(group, "versions"),
                                  json_pack("{s:s, s:s}", "groupVersion", egv, "version", extra));
        }
        json_array_append_new(groups, group);
        json_decref(ver);
    }
    return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
                     groups);
}

/* ---- OpenAPI v3: only what kubectl reads. Its field-validation check looks for the PATCH
 * operation of the kind (x-kubernetes-group-version-kind) and its fieldValidation parameter; with
 * that found it validates on the server and never downloads a schema. No schemas are served, so
 * kubectl apply computes strategic patches from its built-in types. ---- */

static void gv_path(const ks_resource_t *r, char *buf, size_t len) {
    if (r->group[0] == '\0')
        snprintf(buf, len, "api/%s", r->version);
    else
        snprintf(buf, len, "apis/%s/%s", r->group, r->version);
}

static json_t *openapi_index(void) {
    json_t *paths = json_object();
    for (size_t i = 0; i < ks_nresources; i++) {
        char gp[64], url[128];
        gv_path(&ks_resources[i], gp, sizeof(gp));
        snprintf(url, sizeof(url), "/openapi/v3/%s?hash=kubesim", gp);
        json_object_set_new(paths, gp, json_pack("{s:s}", "serverRelativeURL", url));
    }
    return json_pack("{s:o}", "paths", paths);
}

static json_t *openapi_gv(const char *gp_query) {
    json_t *paths = json_object();
    size_t n = strcspn(gp_query, "?");
    for (size_t i = 0; i < ks_nresources; i++) {
        const ks_resource_t *r = &ks_resources[i];
        char gp[64], path[256];
        gv_path(r, gp, sizeof(gp));
        if (strlen(gp) != n || strncmp(gp, gp_query, n) != 0)
            continue;
        snprintf(path, sizeof(path), "/%s%s/%s/{name}", gp,
                 r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
        json_t *params =
            json_pack("[{s:s, s:s, s:{s:s}}, {s:s, s:s, s:{s:s}}, {s:s, s:s, s:{s:s}}]", "name",
                      "dryRun", "in", "query", "schema", "type", "string", "name", "fieldManager",
                      "in", "query", "schema", "type", "string", "name", "fieldValidation", "in",
                      "query", "schema", "type", "string");
        json_t *op = json_pack("{s:s, s:o, s:{s:{s:s}}, s:{s:s, s:s, s:s}}", "operationId",
                               r->plural, "parameters", params, "responses", "200", "description",
                               "OK", "x-kubernetes-group-version-kind", "group", r->group,
                               "version", r->version, "kind", r->kind);
        json_object_set_new(paths, path, json_pack("{s:o}", "patch", op));
    }
    if (json_object_size(paths) == 0) {
        json_decref(paths);
        return NULL;
    }
    return json_pack("{s:s, s:{s:s, s:s}, s:o, s:{}}", "openapi", "3.0.0", "info", "title",
                     "Kubernetes", "version", "v1.32.0", "paths", paths, "components");
}

int ks_discovery(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    char path[256], group[64], version[64];
    size_t n = strlen(req->path);
    /* "/apis/" is "/apis" (the Python client asks with the slash; the API server answers both) */
    if (n >= sizeof(path))
        return FG_ENOENT;
    snprintf(path, sizeof(path), "%s", req->path);
    if (n > 1 && path[n - 1] == '/')
        path[n - 1] = '\0';
    const char *p = path;
    if (strcmp(p, "/version") == 0) {
        ks_json_reply(out, 200,
                      json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1",
                                "minor", "32", "gitVersion", "v1.32.0-kubesim", "gitCommit",
                                FG_GIT_COMMIT, "gitTreeState", "clean", "buildDate",
                                "2026-01-01T00:00:00Z", "goVersion", "go1.23.0", "compiler", "gc",
                                "platform", "linux/amd64"));
        return FG_OK;
    }
    if (strcmp(p, "/api") == 0) {
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)c->port);
        ks_json_reply(out, 200,
                      json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions", "versions",
                                "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                "serverAddress", addr));
        return FG_OK;
    }
    if (strcmp(p, "/apis") == 0) {
        ks_json_reply(out, 200, group_list());
        return FG_OK;
    }
    if (strcmp(p, "/openapi/v3") == 0) {
        ks_json_reply(out, 200, openapi_index());
        return FG_OK;
    }
    if (strncmp(p, "/openapi/v3/", 12) == 0) {
        json_t *doc = openapi_gv(p + 12);
        if (doc == NULL)
            return FG_ENOENT;
        ks_json_reply(out, 200, doc);
        return FG_OK;
    }
    json_t *list = NULL;
    if (strcmp(p, "/api/v1") == 0) {
        list = resource_list("", "v1");
    } else if (strncmp(p, "/apis/", 6) == 0) {
        const char *g = p + 6;
        const char *slash = strchr(g, '/');
        if (slash == NULL || strchr(slash + 1, '/') != NULL)
            return FG_ENOENT;
        snprintf(group, sizeof(group), "%.*s", (int)(slash - g), g);
        snprintf(version, sizeof(version), "%s", slash + 1);
        list = resource_list(group, version);
    } else {
        return FG_ENOENT;
    }
    if (list == NULL)
        return FG_ENOENT;
    ks_json_reply(out, 200, list);
    return FG_OK;
}
