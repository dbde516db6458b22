/* tests/support/testcache.c: writes the cache's keys for tests (see testcache.h). */
#include "testcache.h"

#include "fleetgate/cache.h"
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const resources[] = {
    "namespaces", "nodes", "pods", "deployments", "jobs", "cronjobs", "horizontalpodautoscalers",
    "events"};

int tc_open(tc_t *t, const char *url) {
    t->r = NULL;
    return fg_redis_new(&t->r, url, 1, 2000) == FG_OK ? 0 : -1;
}

void tc_close(tc_t *t) {
    fg_redis_free(t->r);
    t->r = NULL;
}

int tc_cmd(tc_t *t, const char *const *argv) {
    size_t argc = 0;
    while (argv[argc])
        argc++;
    fg_redis_reply_t *rep = NULL;
    if (fg_redis_query(t->r, argc, argv, &rep, NULL, 0) != FG_OK)
        return -1;
    int rc = fg_redis_reply_type(rep) == FG_REDIS_ERROR ? -1 : 0;
    fg_redis_reply_free(rep);
    return rc;
}

static char *app_of(const char *json) {
    json_t *o = NULL;
    char *app = NULL;
    if (fg_json_load(json, strlen(json), &o, NULL, 0) == FG_OK &&
        json_is_string(json_object_get(o, "app")))
        app = fg_xstrdup(json_string_value(json_object_get(o, "app")));
    json_decref(o);
    return app;
}

int tc_put(tc_t *t, const char *kind, const char *cluster, const char *scope, const char *name,
           const char *json) {
    char o[256], i[256], s[256], a[512];
    snprintf(o, sizeof o, "fg:o:%s:%s:%s", kind, cluster, scope);
    snprintf(i, sizeof i, "fg:i:%s:%s:%s", kind, cluster, scope);
    snprintf(s, sizeof s, "fg:s:%s:%s", kind, cluster);
    const char *c1[] = {"HSET", o, name, json, NULL};
    const char *c2[] = {"ZADD", i, "0", name, NULL};
    const char *c3[] = {"SADD", s, scope, NULL};
    int rc = tc_cmd(t, c1) || tc_cmd(t, c2) || tc_cmd(t, c3) ? -1 : 0;
    char *app = strcmp(kind, "pod") == 0 ? app_of(json) : NULL;
    if (app) {
        snprintf(a, sizeof a, "fg:a:%s:%s:%s", cluster, scope, app);
        const char *c4[] = {"SADD", a, name, NULL};
        rc = rc || tc_cmd(t, c4) ? -1 : 0;
        free(app);
    }
    return rc;
}

int tc_del(tc_t *t, const char *kind, const char *cluster, const char *scope, const char *name,
           const char *app) {
    char o[256], i[256], a[512];
    snprintf(o, sizeof o, "fg:o:%s:%s:%s", kind, cluster, scope);
    snprintf(i, sizeof i, "fg:i:%s:%s:%s", kind, cluster, scope);
    const char *c1[] = {"HDEL", o, name, NULL};
    const char *c2[] = {"ZREM", i, name, NULL};
    int rc = tc_cmd(t, c1) || tc_cmd(t, c2) ? -1 : 0;
    if (app) {
        snprintf(a, sizeof a, "fg:a:%s:%s:%s", cluster, scope, app);
        const char *c3[] = {"SREM", a, name, NULL};
        rc = rc || tc_cmd(t, c3) ? -1 : 0;
    }
    return rc;
}

int tc_sync(tc_t *t, const char *cluster, const char *resource, const char *state, const char *rv,
            long objects, int64_t last_event_ms, int64_t last_sync_ms) {
    char key[256], n[32], ev[32], sy[32];
    snprintf(key, sizeof key, "fg:sync:%s:%s", cluster, resource);
    snprintf(n, sizeof n, "%ld", objects);
    snprintf(ev, sizeof ev, "%lld", (long long)last_event_ms);
    snprintf(sy, sizeof sy, "%lld", (long long)last_sync_ms);
    const char *del[] = {"DEL", key, NULL};
    const char *set[] = {"HSET", key,       "state", state, "rv", rv,   "objects", n,   "lastError",
                         "",     "relists", "0",     NULL,  NULL, NULL, NULL,      NULL};
    size_t k = 12;
    if (last_event_ms) {
        set[k++] = "lastEventMs";
        set[k++] = ev;
    }
    if (last_sync_ms) {
        set[k++] = "lastSyncMs";
        set[k++] = sy;
    }
    return tc_cmd(t, del) || tc_cmd(t, set) ? -1 : 0;
}

int tc_sync_all(tc_t *t, const char *cluster, const char *rv, int64_t ms) {
    for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++)
        if (tc_sync(t, cluster, resources[i], "Synced", rv, 0, ms, ms) != 0)
            return -1;
    return 0;
}

int tc_cluster(tc_t *t, const char *cluster, const char *zone, const char *health,
               int64_t last_contact_ms, const char *last_error) {
    char key[256], ms[32];
    snprintf(key, sizeof key, "fg:cluster:%s", cluster);
    snprintf(ms, sizeof ms, "%lld", (long long)last_contact_ms);
    const char *set[] = {
        "HSET",          key,      "zone", zone,        "region",
        "test-1",        "health", health, "lastError", last_error ? last_error : "",
        "lastContactMs", ms,       NULL};
    if (last_contact_ms == 0)
        set[10] = NULL;
    return tc_cmd(t, set);
}

char *tc_pod_json(const char *project, const char *cluster, const char *zone, const char *name,
                  const char *app, const char *phase, const char *labels_json,
                  const char *version) {
    json_t *labels = NULL;
    if (labels_json == NULL || fg_json_load(labels_json, strlen(labels_json), &labels, NULL, 0))
        labels = json_object();
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:s,s:s,s:b,s:I,s:[{s:s,s:s,s:s,s:s}],"
        "s:[{s:s,s:s,s:{s:{s:s,s:s}},s:s,s:s,s:b,s:I}],s:[s],s:[s],s:s,s:s}",
        "name", name, "project", project, "cluster", cluster, "zone", zone, "uid", "u-1", "version",
        version, "creationTime", "2026-11-22T10:00:00Z", "labels", labels, "node", "node-1",
        "phase", phase, "ready", strcmp(phase, "Running") == 0, "restarts", (json_int_t)0,
        "conditions", "type", "Ready", "status", strcmp(phase, "Running") == 0 ? "True" : "False",
        "reason", "ContainersNotReady", "since", "2026-11-22T10:00:05Z", "containers", "name",
        "main", "image", "registry.test/web:1.4.2", "resources", "requests", "cpu", "250m",
        "memory", "128Mi", "state", strcmp(phase, "Running") == 0 ? "running" : "waiting",
        "startedAt", "2026-11-22T10:00:04Z", "ready", strcmp(phase, "Running") == 0, "restarts",
        (json_int_t)0, "podIPs", "10.1.2.3", "hostIPs", "192.168.0.10", "qosClass", "Burstable",
        "startTime", "2026-11-22T10:00:01Z");
    if (app)
        json_object_set_new(o, "app", json_string(app));
    char *s = fg_json_dumps(o, NULL);
    json_decref(o);
    return s;
}
