/* tests/support/testcache.h: fills a test Redis exactly as cache/SCHEMA.md section 2 says the
 * informers do (objects, indexes, scopes, app sets, sync state, cluster health), through the
 * library's own Redis pool, so the read APIs can be tested without member clusters. */
#ifndef FG_TESTCACHE_H
#define FG_TESTCACHE_H

#include <stdint.h>

typedef struct fg_redis fg_redis_t;

typedef struct {
    fg_redis_t *r;
} tc_t;

/* Connects to url (redis://...); 0 on success. */
int tc_open(tc_t *t, const char *url);
void tc_close(tc_t *t);
/* Runs one command (NULL-terminated argv); 0 when Redis answered without an error. */
int tc_cmd(tc_t *t, const char *const *argv);

/* Stores a simplified object: HSET fg:o, ZADD fg:i (score 0), SADD fg:s, and for a pod with an
 * `app` SADD fg:a. scope is the project, or "_" for nodes and projects. 0 on success. */
int tc_put(tc_t *t, const char *kind, const char *cluster, const char *scope, const char *name,
           const char *json);
/* Removes it as a DELETED watch event does (HDEL + ZREM, SREM from the app set). */
int tc_del(tc_t *t, const char *kind, const char *cluster, const char *scope, const char *name,
           const char *app);
/* fg:sync:{cluster}:{resource}: state, rv, objects, lastEventMs, lastSyncMs (0: left out). */
int tc_sync(tc_t *t, const char *cluster, const char *resource, const char *state, const char *rv,
            long objects, int64_t last_event_ms, int64_t last_sync_ms);
/* Every resource of the cluster Synced at rv, as after a first sync. */
int tc_sync_all(tc_t *t, const char *cluster, const char *rv, int64_t ms);
/* fg:cluster:{cluster}: zone, region, health, lastContactMs (0: left out), lastError. */
int tc_cluster(tc_t *t, const char *cluster, const char *zone, const char *health,
               int64_t last_contact_ms, const char *last_error);

/* A simplified pod (compact JSON, malloc'd): labels_json is an object text or NULL. */
char *tc_pod_json(const char *project, const char *cluster, const char *zone, const char *name,
                  const char *app, const char *phase, const char *labels_json, const char *version);

#endif
