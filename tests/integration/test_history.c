/* Integration tests of the workload history (issue 16, listHistory): the daemon with its
 * informers, a private redis-server and kubesim with three clusters, real tokens, every answer
 * checked against the contract. Changes are made through fleetgate's write API (so they carry
 * the caller and the request id) and in kubesim directly (a crash-looping pod, an unschedulable
 * pod, a finished Job, a scale while fleetgate is down). Each change is recorded once: across a
 * relist (410 after a compaction), a restart, a FLUSHALL and two replicas. The diff rules kubesim
 * cannot produce (OOMKilled, a stalled rollout) and the retention run cache/insight_history.lua
 * directly on the test's Redis. The change stream of writes made through fleetgate (whose
 * write-through usually reaches the cache before the watch) is checked here too: each write's
 * version streamed exactly once, in order, with the new spec. */
#include "contract.h"
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testmain.h"
#include "testredis.h"
#include "teststack.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static tr_redis_t redis;
static tj_keys_t keys;
static tk_sim_t ks;
static pid_t daemon_pid, daemon_b;
static uint16_t port, port_b;
static char *admin, *dev, *viewer, *other;
static redisContext *rc;
static char daemon_cfg[8192];

/* One call to the replica on port p; the answer must be one the contract declares. */
static long call_on(uint16_t p, const char *method, const char *path, const char *tok,
                    const char *body, const char *extra, th_resp_t *r) {
    return ts_call(p, method, path, tok, body, extra, true, r);
}

static long call(const char *method, const char *path, const char *tok, const char *body,
                 const char *extra, th_resp_t *r) {
    return call_on(port, method, path, tok, body, extra, r);
}

/* A write that must succeed (2xx); a 503 (a Redis call past its deadline on a loaded machine)
 * is retried, as a client does. */
static void write_ok(uint16_t p, const char *method, const char *path, const char *body,
                     const char *extra) {
    for (int i = 0;; i++) {
        th_resp_t r;
        long s = call_on(p, method, path, dev, body, extra, &r);
        if (s == 503 && i < 5) {
            th_resp_free(&r);
            ts_sleep_ms(500);
            continue;
        }
        ck_assert_msg(s >= 200 && s < 300, "%s %s -> %ld %s", method, path, s, r.body);
        th_resp_free(&r);
        return;
    }
}

/* GET path as dev, 200 expected: the body (a new reference). */
static json_t *get_json(const char *path) {
    th_resp_t r;
    long s = call("GET", path, dev, NULL, NULL, &r);
    ck_assert_msg(s == 200, "GET %s -> %ld %s", path, s, r.body);
    json_t *j = NULL;
    ck_assert_msg(fg_json_load(r.body, r.len, &j, NULL, 0) == FG_OK, "%s", r.body);
    th_resp_free(&r);
    return j;
}

static pid_t start_daemon(uint16_t *p, const char *logname) {
    char log[192];
    snprintf(log, sizeof log, "%s/%s", keys.dir, logname);
    pid_t pid = th_daemon_start(daemon_cfg, p, log);
    ck_assert_int_gt(pid, 0);
    ts_wait_ready(*p, 400);
    return pid;
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    static const char *const extra[] = {"--nodes", "2", "--pod-start-ms", "0", NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    char cl[2048];
    ts_clusters_json(&ks, false, cl, sizeof cl);
    snprintf(daemon_cfg, sizeof daemon_cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\", \"timeout_ms\": 3000},"
             " \"log\": {\"level\": \"error\", \"access_log\": false},"
             " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
             " \"clusters\": [%s],"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             "  \"audit_log\": \"%s/audit.log\"},"
             " \"rate_limits\": {\"enabled\": false}}",
             redis.url, cl, keys.rsa_pub, keys.dir);
    daemon_pid = start_daemon(&port, "daemon.log");
    admin = ts_token(&keys, "ada", "\"groups\": [\"fleetgate-admins\"]");
    dev = ts_token(&keys, "dev", "\"projects\": {\"shop\": \"developer\"}");
    viewer = ts_token(&keys, "vera", "\"projects\": {\"shop\": \"viewer\"}");
    other = ts_token(&keys, "otto", "\"projects\": {\"other\": \"developer\"}");
    rc = redisConnect("127.0.0.1", redis.port);
    ck_assert_ptr_nonnull(rc);
    ck_assert_int_eq(rc->err, 0);
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin,
                          "{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": {\"cpu\": "
                          "\"4\", \"memory\": \"64Gi\", \"pods\": 40}}}}",
                          NULL, &r),
                     201);
    th_resp_free(&r);
}

static void teardown(void) {
    int status = daemon_pid > 0 ? th_daemon_stop(daemon_pid, SIGTERM, 5000) : 0;
    int status_b = daemon_b > 0 ? th_daemon_stop(daemon_b, SIGTERM, 5000) : 0;
    daemon_pid = daemon_b = 0;
    redisFree(rc);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    free(admin);
    free(dev);
    free(viewer);
    free(other);
    ck_assert_msg(status == 0, "the daemon exited with %d", status);
    ck_assert_msg(status_b == 0, "the second replica exited with %d", status_b);
}

/* ---- helpers ------------------------------------------------------------------- */

static const char *s_of(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static bool matches(const json_t *it, const char *change, const char *name, const char *cluster) {
    const char *n = s_of(json_object_get(it, "object"), "name");
    const char *c = s_of(it, "cluster");
    return strcmp(s_of(it, "change"), change) == 0 && (name == NULL || strcmp(n, name) == 0) &&
           (cluster == NULL || (c != NULL && strcmp(c, cluster) == 0));
}

static size_t count_where(const json_t *items, const char *change, const char *name,
                          const char *cluster) {
    size_t i, n = 0;
    json_t *it;
    json_array_foreach(items, i, it) n += matches(it, change, name, cluster);
    return n;
}

/* The first matching entry (borrowed from items), or NULL. */
static json_t *find(const json_t *items, const char *change, const char *name,
                    const char *cluster) {
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) if (matches(it, change, name, cluster)) return it;
    return NULL;
}

/* Every entry of the project's history (a new reference to an array), walking the pages. */
static json_t *all_history(const char *query, int limit) {
    json_t *all = json_array();
    char path[1024], cursor[400] = "";
    for (int page = 0; page < 1000; page++) {
        snprintf(path, sizeof path, "/v1/projects/shop/history?limit=%d%s%s%s%s", limit,
                 query[0] ? "&" : "", query, cursor[0] ? "&cursor=" : "", cursor);
        json_t *b = get_json(path);
        json_array_extend(all, json_object_get(b, "items"));
        const char *next = s_of(b, "cursor");
        if (next == NULL) {
            json_decref(b);
            return all;
        }
        snprintf(cursor, sizeof cursor, "%s", next);
        json_decref(b);
    }
    ck_abort_msg("history paging did not end");
    return NULL;
}

/* No id twice, and newest first. */
static void assert_unique_and_ordered(const json_t *items) {
    size_t i, j;
    json_t *a, *b;
    json_array_foreach(items, i, a) {
        for (j = i + 1; j < json_array_size(items); j++) {
            b = json_array_get(items, j);
            ck_assert_msg(strcmp(s_of(a, "id"), s_of(b, "id")) != 0, "entry %s twice",
                          s_of(a, "id"));
        }
        if (i > 0)
            ck_assert_msg(strcmp(s_of(json_array_get(items, i - 1), "time"), s_of(a, "time")) >= 0,
                          "not newest first at %zu", i);
    }
}

/* Waits until the history holds an entry of that change (bounded); returns all entries. */
static json_t *wait_entry(const char *change, const char *name, const char *cluster, int max_ms) {
    for (int waited = 0;; waited += 200) {
        json_t *all = all_history("", 1000);
        if (find(all, change, name, cluster) != NULL)
            return all;
        if (waited >= max_ms) {
            char *text = json_dumps(all, JSON_COMPACT);
            ck_abort_msg("no %s of %s in %s after %d ms: %s", change, name,
                         cluster ? cluster : "any cluster", max_ms, text);
        }
        json_decref(all);
        ts_sleep_ms(200);
    }
}

static char *app_body(const char *name, int replicas) {
    return fg_xasprintf("{\"name\": \"%s\", \"spec\": {\"replicas\": %d, \"placement\": {}, "
                        "\"containers\": [{\"name\": \"app\", \"image\": "
                        "\"registry.example.net/shop/web:1.42.0\", \"resources\": {\"requests\": "
                        "{\"cpu\": \"100m\", \"memory\": \"128Mi\"}}}]}}",
                        name, replicas);
}

static void create_app(uint16_t p, const char *name, int replicas, const char *rid) {
    char *body = app_body(name, replicas);
    char hdr[96];
    snprintf(hdr, sizeof hdr, "X-Request-Id: %s", rid);
    write_ok(p, "POST", "/v1/projects/shop/apps", body, hdr);
    free(body);
}

static void verb(uint16_t p, const char *app, const char *v, const char *body, const char *rid) {
    char path[160], hdr[96];
    snprintf(path, sizeof path, "/v1/projects/shop/apps/%s:%s", app, v);
    snprintf(hdr, sizeof hdr, "X-Request-Id: %s", rid);
    write_ok(p, "POST", path, body, hdr);
}

static long jint(const json_t *o, const char *k) {
    return (long)json_integer_value(json_object_get(o, k));
}

/* An entry's actor and request id. */
static void assert_who(const json_t *e, const char *actor, const char *rid) {
    ck_assert_ptr_nonnull(e);
    if (actor == NULL) {
        ck_assert(json_is_null(json_object_get(e, "actor")));
        ck_assert(json_is_null(json_object_get(e, "requestId")));
        return;
    }
    ck_assert_str_eq(s_of(e, "actor"), actor);
    ck_assert_str_eq(s_of(e, "requestId"), rid);
}

/* The sum of a counter's samples on the replica's /metrics whose line holds every needle. */
static long metric(uint16_t p, const char *name, const char *n1, const char *n2) {
    th_resp_t r;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", (unsigned)p);
    ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
    long sum = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, name, strlen(name)) == 0 && (n1 == NULL || strstr(line, n1)) &&
            (n2 == NULL || strstr(line, n2)))
            sum += strtol(strrchr(line, ' ') + 1, NULL, 10);
    th_resp_free(&r);
    return sum;
}

/* ---- app changes through fleetgate -------------------------------------------------- */

START_TEST(history_app_changes_once_with_actor) {
    create_app(port, "web", 6, "mk-web");
    json_t *all = wait_entry("RolloutCompleted", "web", "c2", 15000);
    /* placement {}: one cluster of zone-a and c2 (zone-b), 3 replicas each */
    json_t *created = find(all, "Created", "web", "c2");
    assert_who(created, "dev", "mk-web");
    ck_assert_str_eq(s_of(created, "app"), "web");
    ck_assert_str_eq(s_of(json_object_get(created, "object"), "kind"), "App");
    ck_assert_uint_eq(count_where(all, "Created", "web", NULL), 2);
    assert_who(find(all, "RolloutCompleted", "web", "c2"), NULL, NULL);
    json_decref(all);

    verb(port, "web", "scale", "{\"replicas\": 4}", "sc-web");
    all = wait_entry("ReplicasChanged", "web", "c2", 10000);
    json_t *rep = find(all, "ReplicasChanged", "web", "c2");
    assert_who(rep, "dev", "sc-web");
    ck_assert_int_eq(jint(json_object_get(rep, "from"), "replicas"), 3);
    ck_assert_int_eq(jint(json_object_get(rep, "to"), "replicas"), 2);
    json_decref(all);

    verb(port, "web", "stop", NULL, "st-web");
    all = wait_entry("Stopped", "web", "c2", 10000);
    json_t *st = find(all, "Stopped", "web", "c2");
    assert_who(st, "dev", "st-web");
    ck_assert_int_eq(jint(json_object_get(st, "from"), "replicas"), 2);
    ck_assert_int_eq(jint(json_object_get(st, "to"), "replicas"), 0);
    ck_assert_uint_eq(count_where(all, "ReplicasChanged", "web", "c2"), 1); /* a stop is no scale */
    json_decref(all);

    verb(port, "web", "resume", NULL, "rs-web");
    all = wait_entry("Resumed", "web", "c2", 10000);
    json_t *rs = find(all, "Resumed", "web", "c2");
    assert_who(rs, "dev", "rs-web");
    ck_assert_int_eq(jint(json_object_get(rs, "to"), "replicas"), 2);
    json_decref(all);

    verb(port, "web", "pause", NULL, "pa-web");
    all = wait_entry("Paused", "web", "c2", 10000);
    assert_who(find(all, "Paused", "web", "c2"), "dev", "pa-web");
    json_decref(all);

    /* a new image: the rollout starts, with the image before and after */
    th_resp_t r;
    const char *patch = "{\"spec\": {\"containers\": [{\"name\": \"app\", \"image\": "
                        "\"registry.example.net/shop/web:1.43.0\", \"resources\": {\"requests\": "
                        "{\"cpu\": \"100m\", \"memory\": \"128Mi\"}}}]}}";
    ck_assert_int_eq(
        call("PATCH", "/v1/projects/shop/apps/web", dev, patch, "X-Request-Id: im-web", &r), 200);
    th_resp_free(&r);
    all = wait_entry("RolloutStarted", "web", "c2", 10000);
    json_t *ro = find(all, "RolloutStarted", "web", "c2");
    assert_who(ro, "dev", "im-web");
    ck_assert_str_eq(s_of(json_object_get(ro, "from"), "containers.app.image"),
                     "registry.example.net/shop/web:1.42.0");
    ck_assert_str_eq(s_of(json_object_get(ro, "to"), "containers.app.image"),
                     "registry.example.net/shop/web:1.43.0");
    ck_assert_ptr_nonnull(strstr(s_of(ro, "summary"), "1.43.0"));
    json_decref(all);

    /* each change once per cluster, every id once, newest first */
    ts_sleep_ms(1000);
    all = all_history("", 1000);
    assert_unique_and_ordered(all);
    static const char *const once[] = {"Created", "ReplicasChanged", "Stopped", "Paused",
                                       "RolloutStarted"};
    for (size_t i = 0; i < sizeof once / sizeof once[0]; i++)
        ck_assert_msg(count_where(all, once[i], "web", "c2") == 1, "%s x%zu", once[i],
                      count_where(all, once[i], "web", "c2"));
    /* resumed twice, once from the stop (replicas back) and once by the image change, which
     * writes the Deployment unpaused */
    size_t i;
    json_t *it;
    int from_stop = 0, from_pause = 0;
    json_array_foreach(all, i, it) if (matches(it, "Resumed", "web", "c2")) {
        from_stop += json_object_get(json_object_get(it, "from"), "replicas") != NULL;
        from_pause += json_object_get(json_object_get(it, "from"), "paused") != NULL;
    }
    ck_assert_int_eq(from_stop, 1);
    ck_assert_int_le(from_pause, 1);

    /* paging with limit 1 gives the same entries in the same order */
    json_t *paged = all_history("", 1);
    ck_assert_uint_eq(json_array_size(paged), json_array_size(all));
    for (i = 0; i < json_array_size(all); i++)
        ck_assert_str_eq(s_of(json_array_get(paged, i), "id"), s_of(json_array_get(all, i), "id"));
    json_decref(paged);

    /* filters */
    json_t *f = all_history("change=ReplicasChanged", 1000);
    ck_assert_uint_eq(json_array_size(f), count_where(all, "ReplicasChanged", NULL, NULL));
    ck_assert_uint_ge(json_array_size(f), 1);
    json_decref(f);
    f = all_history("kind=App&name=web&app=web", 1000);
    ck_assert_uint_eq(json_array_size(f), json_array_size(all));
    json_decref(f);
    f = all_history("kind=Pod", 1000);
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = all_history("name=nothing", 1000);
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = all_history("app=nothing", 1000);
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    f = all_history("since=2099-01-01T00:00:00Z", 1000);
    ck_assert_uint_eq(json_array_size(f), 0);
    json_decref(f);
    /* since = the time of the stop: the stop and what came after */
    char q[96];
    snprintf(q, sizeof q, "since=%s", s_of(find(all, "Stopped", "web", "c2"), "time"));
    f = all_history(q, 1000);
    ck_assert_ptr_nonnull(find(f, "Stopped", "web", "c2"));
    ck_assert_ptr_null(find(f, "Created", "web", "c2"));
    json_decref(f);
    /* a viewer reads it too */
    ck_assert_int_eq(call("GET", "/v1/projects/shop/history", viewer, NULL, NULL, &r), 200);
    th_resp_free(&r);
    json_decref(all);
}
END_TEST

/* ---- pods and jobs, made in kubesim ---------------------------------------------------- */

static void ks_post(int i, const char *path, const char *body) {
    long s = tk_call(&ks, i, "POST", path, body, NULL);
    ck_assert_msg(s == 201, "POST %s on cluster %d -> %ld", path, i, s);
}

static void make_pod(int cl, const char *name, const char *annotations, const char *cpu) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
             "\"annotations\":{%s}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"busybox:1\",\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]}}",
             name, annotations, cpu);
    ks_post(cl, "/api/v1/namespaces/shop/pods", body);
}

START_TEST(history_pods_and_jobs_from_the_clusters) {
    /* crash-looping: exits 1 after 100 ms and is restarted */
    make_pod(2, "crash", "\"kubesim.io/exit-code\":\"1\",\"kubesim.io/run-ms\":\"100\"", "10m");
    /* unschedulable: asks for more CPU than any node has */
    make_pod(1, "huge", "", "100000");
    /* a Job whose pod ends well */
    ks_post(0, "/apis/batch/v1/namespaces/shop/jobs",
            "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"reindex\"},"
            "\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"kubesim.io/run-ms\":"
            "\"100\"}},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"w\","
            "\"image\":\"busybox:1\"}]}}}}");
    json_t *all = wait_entry("PodUnschedulable", "huge", "c1", 15000);
    json_t *u = find(all, "PodUnschedulable", "huge", "c1");
    assert_who(u, NULL, NULL);
    ck_assert_str_eq(s_of(json_object_get(u, "object"), "kind"), "Pod");
    json_decref(all);
    all = wait_entry("JobSucceeded", "reindex", "c0", 20000);
    json_t *j = find(all, "JobSucceeded", "reindex", "c0");
    ck_assert_str_eq(s_of(json_object_get(j, "to"), "state"), "Complete");
    ck_assert_str_eq(s_of(json_object_get(j, "object"), "kind"), "JobSet");
    json_decref(all);
    /* crash-looping at 2 restarts (then 4, 8...): each mark once */
    all = wait_entry("PodCrashLooping", "crash", "c2", 20000);
    json_t *c = find(all, "PodCrashLooping", "crash", "c2");
    ck_assert_int_ge(jint(json_object_get(c, "to"), "restarts"), 2);
    ck_assert_int_lt(jint(json_object_get(c, "from"), "restarts"),
                     jint(json_object_get(c, "to"), "restarts"));
    assert_who(c, NULL, NULL);
    json_decref(all);
    ts_sleep_ms(1500);
    all = all_history("", 1000);
    assert_unique_and_ordered(all);
    ck_assert_uint_eq(count_where(all, "PodUnschedulable", "huge", NULL), 1);
    ck_assert_uint_eq(count_where(all, "JobSucceeded", "reindex", NULL), 1);
    size_t i;
    json_t *it;
    long marks[8] = {0};
    json_array_foreach(all, i, it) if (matches(it, "PodCrashLooping", "crash", NULL)) {
        long to = jint(json_object_get(it, "to"), "restarts");
        long mark = 1;
        while (mark * 2 <= to)
            mark *= 2;
        for (int k = 1; k < 8; k++)
            if (mark == 1L << k)
                marks[k]++;
    }
    for (int k = 1; k < 8; k++)
        ck_assert_msg(marks[k] <= 1, "crash-looping at %ld restarts recorded %ld times", 1L << k,
                      marks[k]);
    ck_assert_int_eq(marks[1], 1);
    /* kind and change filters */
    /* the crash-looping pod can reach its next mark between two reads: between the counts of
     * the unfiltered history read before and after */
    json_t *f = all_history("kind=Pod&change=PodCrashLooping", 1000);
    json_t *after = all_history("", 1000);
    ck_assert_uint_ge(json_array_size(f), count_where(all, "PodCrashLooping", NULL, NULL));
    ck_assert_uint_le(json_array_size(f), count_where(after, "PodCrashLooping", NULL, NULL));
    json_decref(after);
    json_decref(f);
    f = all_history("kind=JobSet", 1000);
    ck_assert_uint_eq(count_where(f, "JobSucceeded", "reindex", "c0"), 1);
    json_decref(f);
    json_decref(all);
}
END_TEST

/* ---- relists, restarts, FLUSHALL --------------------------------------------------------- */

/* The ids of entries (a new reference to an object id -> true). */
static json_t *ids_of(const json_t *items) {
    json_t *ids = json_object();
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) json_object_set_new(ids, s_of(it, "id"), json_true());
    return ids;
}

/* Every cluster's nodes and pods listed again (fg:sync says Synced), as after a FLUSHALL. */
static void wait_listed_again(int timeout_ms) {
    static const char *const resources[] = {"nodes", "pods"};
    for (int k = 0; k < 3; k++) {
        for (size_t r = 0; r < 2; r++) {
            for (int waited = 0;; waited += 100) {
                redisReply *st = redisCommand(rc, "HGET fg:sync:c%d:%s state", k, resources[r]);
                ck_assert_ptr_nonnull(st);
                bool synced = st->type == REDIS_REPLY_STRING &&
                              (strcmp(st->str, "Synced") == 0 || strcmp(st->str, "Lagging") == 0);
                freeReplyObject(st);
                if (synced)
                    break;
                ck_assert_msg(waited < timeout_ms, "c%d's %s were not listed again", k,
                              resources[r]);
                ts_sleep_ms(100);
            }
        }
    }
}

START_TEST(history_relist_adds_nothing_but_missed_changes) {
    create_app(port, "web", 2, "mk-web");
    json_t *before = wait_entry("RolloutCompleted", "web", "c2", 15000);
    json_decref(before);
    ts_sleep_ms(1000);
    before = all_history("", 1000);
    /* a relist: kubesim forgets its history and cuts the watches, so every informer gets 410
     * and lists again; the LIST items are the versions the cache holds */
    long relists0 = metric(port, "fleetgate_cache_relists_total", "cause=\"gone\"", NULL);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tk_call(&ks, i, "POST", "/_kubesim/compact", "{}", NULL), 200);
        ck_assert_int_eq(tk_call(&ks, i, "POST", "/_kubesim/cut-watches", "{}", NULL), 200);
    }
    for (int waited = 0;
         metric(port, "fleetgate_cache_relists_total", "cause=\"gone\"", "deployments") <= relists0;
         waited += 100) {
        ck_assert_msg(waited < 15000, "no relist after a compaction");
        ts_sleep_ms(100);
    }
    ts_sleep_ms(2000);
    json_t *after = all_history("", 1000);
    ck_assert_msg(json_equal(before, after), "a relist changed the history");
    json_decref(after);

    /* a restart, with a scale made in the cluster while fleetgate was down: the first LIST
     * finds that one change (no actor: it did not come through fleetgate), and nothing else */
    ck_assert_int_eq(th_daemon_stop(daemon_pid, SIGTERM, 5000), 0);
    daemon_pid = 0;
    ck_assert_int_eq(tk_call(&ks, 2, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web",
                             "{\"spec\":{\"replicas\":3}}", NULL),
                     200);
    daemon_pid = start_daemon(&port, "daemon2.log");
    after = wait_entry("ReplicasChanged", "web", "c2", 15000);
    json_t *e = find(after, "ReplicasChanged", "web", "c2");
    assert_who(e, NULL, NULL);
    ck_assert_int_eq(jint(json_object_get(e, "from"), "replicas"), 1);
    ck_assert_int_eq(jint(json_object_get(e, "to"), "replicas"), 3);
    ts_sleep_ms(1500);
    json_decref(after);
    after = all_history("", 1000);
    assert_unique_and_ordered(after);
    json_t *ids = ids_of(before);
    size_t i;
    json_t *it;
    size_t kept = 0;
    json_array_foreach(after, i, it) {
        if (json_object_get(ids, s_of(it, "id")) != NULL) {
            kept++;
            continue;
        }
        /* new since the restart: the scale, and the rollout it led to */
        ck_assert_msg(matches(it, "ReplicasChanged", "web", "c2") ||
                          matches(it, "RolloutCompleted", "web", "c2"),
                      "unexpected %s of %s in %s", s_of(it, "change"),
                      s_of(json_object_get(it, "object"), "name"), s_of(it, "cluster"));
    }
    ck_assert_uint_eq(kept, json_array_size(before));
    ck_assert_uint_eq(count_where(after, "ReplicasChanged", "web", "c2"), 1);
    ck_assert_uint_eq(count_where(after, "Created", "web", NULL), 2);
    json_decref(ids);
    json_decref(after);
    json_decref(before);

    /* FLUSHALL: the cache is rebuilt by LISTs, which compare only with objects the cache
     * holds: nothing is added (no "Created" for objects that already existed) */
    redisReply *rep = redisCommand(rc, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    /* a change at once, in every cluster: its MODIFIED event comes before the informers see the
     * new data set (they look once a second): the object existed, so no "Created" either */
    for (int k = 0; k < 3; k++)
        tk_call(&ks, k, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web",
                "{\"metadata\":{\"annotations\":{\"touched\":\"after-flushall\"}}}", NULL);
    for (int waited = 0;; waited += 200) {
        th_resp_t r;
        long s = call("GET", "/v1/projects/shop/apps/web", dev, NULL, NULL, &r);
        th_resp_free(&r);
        if (s == 200)
            break;
        ck_assert_msg(waited < 20000, "the cache was not rebuilt after FLUSHALL (%ld)", s);
        ts_sleep_ms(200);
    }
    /* the scale below needs placement, which refuses clusters whose nodes and pods are not
     * listed yet; the sleep also outlasts the registry's snapshot (1 s) */
    wait_listed_again(20000);
    ts_sleep_ms(1500);
    after = all_history("", 1000);
    ck_assert_msg(json_array_size(after) == 0, "FLUSHALL + relist added %zu entries",
                  json_array_size(after));
    json_decref(after);
    /* and changes after it are recorded again */
    verb(port, "web", "scale", "{\"replicas\": 4}", "sc2-web");
    after = wait_entry("ReplicasChanged", "web", "c2", 10000);
    assert_who(find(after, "ReplicasChanged", "web", "c2"), "dev", "sc2-web");
    json_decref(after);
}
END_TEST

/* ---- two replicas ----------------------------------------------------------------------- */

START_TEST(history_two_replicas_record_each_change_once) {
    daemon_b = start_daemon(&port_b, "daemon_b.log");
    create_app(port, "web", 6, "mk-web");
    json_t *all = wait_entry("RolloutCompleted", "web", "c2", 15000);
    json_decref(all);
    verb(port_b, "web", "scale", "{\"replicas\": 4}", "b-scale");
    all = wait_entry("ReplicasChanged", "web", "c2", 10000);
    assert_who(find(all, "ReplicasChanged", "web", "c2"), "dev", "b-scale");
    json_decref(all);
    /* the first replica goes: the lease moves to the second, which lists again */
    ck_assert_int_eq(th_daemon_stop(daemon_pid, SIGTERM, 5000), 0);
    daemon_pid = 0;
    verb(port_b, "web", "scale", "{\"replicas\": 2}", "b-scale2");
    uint16_t keep = port;
    port = port_b; /* reads go to the replica still running */
    for (int waited = 0;; waited += 200) {
        json_t *h = all_history("change=ReplicasChanged", 1000);
        size_t n = count_where(h, "ReplicasChanged", "web", "c2");
        json_decref(h);
        if (n >= 2)
            break;
        ck_assert_msg(waited < 20000, "the second scale was not recorded");
        ts_sleep_ms(200);
    }
    ts_sleep_ms(1500);
    all = all_history("", 1000);
    assert_unique_and_ordered(all);
    ck_assert_uint_eq(count_where(all, "Created", "web", "c2"), 1);
    ck_assert_uint_eq(count_where(all, "ReplicasChanged", "web", "c2"), 2);
    json_t *e = find(all, "ReplicasChanged", "web", "c2"); /* newest first: the second */
    assert_who(e, "dev", "b-scale2");
    ck_assert_int_eq(jint(json_object_get(e, "to"), "replicas"), 1);
    json_decref(all);
    port = keep;
}
END_TEST

/* ---- the diff script itself (cases kubesim does not make) -------------------------------- */

static char *lua_src;
static size_t lua_len;

/* Runs cache/insight_history.lua for object obj ('' a delete) of kind; the entries added. */
static long run_script(const char *name, const char *obj, const char *kind, const char *version,
                       long long now, const char *max_age_ms, const char *max_n, bool listing) {
    if (lua_src == NULL)
        ck_assert_int_eq(fg_read_file("cache/insight_history.lua", 1 << 20, &lua_src, &lua_len),
                         FG_OK);
    char nows[24];
    snprintf(nows, sizeof nows, "%lld", now);
    const char *argv[] = {"EVAL",        lua_src,        "4",          "fg:o:x:c0:lab",
                          "fg:hist:lab", "fg:histx:lab", "fg:rv:c0:x", name,
                          obj,           kind,           "c0",         version,
                          nows,          max_age_ms,     max_n,        listing ? "1" : "0",
                          "watch"};
    size_t lens[17];
    for (int i = 0; i < 17; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(rc, 17, argv, lens);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "script: %s", r->str ? r->str : "?");
    long n = (long)r->integer;
    freeReplyObject(r);
    return n;
}

/* Stores obj as the cached object (what the cache write after the script does). */
static void cache_put(const char *name, const char *obj) {
    redisReply *r = redisCommand(rc, "HSET fg:o:x:c0:lab %s %s", name, obj);
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
}

static json_t *stored(const char *change) {
    redisReply *r = redisCommand(rc, "HVALS fg:hist:lab");
    ck_assert_ptr_nonnull(r);
    json_t *found = NULL;
    for (size_t i = 0; i < r->elements && found == NULL; i++) {
        json_t *e = NULL;
        ck_assert_int_eq(fg_json_load(r->element[i]->str, r->element[i]->len, &e, NULL, 0), FG_OK);
        if (strcmp(s_of(e, "change"), change) == 0)
            found = e;
        else
            json_decref(e);
    }
    freeReplyObject(r);
    return found;
}

static long long card(void) {
    redisReply *r = redisCommand(rc, "ZCARD fg:histx:lab");
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

START_TEST(history_script_rules_idempotence_and_retention) {
    long long now = 1800000000000LL;
    /* OOMKilled: a last termination that is new */
    const char *p1 = "{\"name\":\"p\",\"uid\":\"u1\",\"version\":\"1\",\"app\":\"web\","
                     "\"containers\":[{\"name\":\"c\",\"state\":\"running\",\"restarts\":0}]}";
    const char *p2 = "{\"name\":\"p\",\"uid\":\"u1\",\"version\":\"2\",\"app\":\"web\","
                     "\"containers\":[{\"name\":\"c\",\"state\":\"running\",\"restarts\":1,"
                     "\"lastTermination\":{\"reason\":\"OOMKilled\",\"exitCode\":137,"
                     "\"finishedAt\":\"2027-01-15T08:00:00Z\"}}]}";
    ck_assert_int_eq(run_script("p", p1, "Pod", "1", now, "86400000", "100", false), 0);
    cache_put("p", p1);
    ck_assert_int_eq(run_script("p", p2, "Pod", "2", now, "86400000", "100", false), 1);
    /* the same event again (a replayed watch before the cache write): the same id, not added */
    ck_assert_int_eq(run_script("p", p2, "Pod", "2", now + 5, "86400000", "100", false), 0);
    cache_put("p", p2);
    ck_assert_int_eq(run_script("p", p2, "Pod", "2", now, "86400000", "100", true), 0);
    json_t *oom = stored("PodOOMKilled");
    ck_assert_ptr_nonnull(oom);
    ck_assert_str_eq(s_of(oom, "app"), "web");
    ck_assert(json_is_null(json_object_get(oom, "actor")));
    json_decref(oom);
    /* the presented entry is the contract's HistoryEntry */
    ck_assert_int_eq(card(), 1);

    /* a stalled rollout, and a LIST item never creates */
    const char *d1 = "{\"name\":\"d\",\"uid\":\"u2\",\"version\":\"5\",\"replicas\":{\"desired\":2,"
                     "\"updated\":1,\"available\":1,\"current\":2},\"generation\":2,"
                     "\"observedGeneration\":2,\"conditions\":[{\"type\":\"Progressing\","
                     "\"status\":\"True\",\"reason\":\"ReplicaSetUpdated\"}]}";
    const char *d2 = "{\"name\":\"d\",\"uid\":\"u2\",\"version\":\"6\",\"replicas\":{\"desired\":2,"
                     "\"updated\":1,\"available\":1,\"current\":2},\"generation\":2,"
                     "\"observedGeneration\":2,\"conditions\":[{\"type\":\"Progressing\","
                     "\"status\":\"False\",\"reason\":\"ProgressDeadlineExceeded\"}]}";
    ck_assert_int_eq(run_script("d", d1, "App", "5", now, "86400000", "100", true), 0);
    ck_assert_int_eq(card(), 1);
    cache_put("d", d1);
    ck_assert_int_eq(run_script("d", d2, "App", "6", now + 1, "86400000", "100", false), 1);
    json_t *stall = stored("RolloutStalled");
    ck_assert_ptr_nonnull(stall);
    json_decref(stall);
    /* a delete of an object the cache holds */
    cache_put("d", d2);
    ck_assert_int_eq(run_script("d", "", "App", "7", now + 2, "86400000", "100", false), 1);
    json_t *del = stored("Deleted");
    ck_assert_ptr_nonnull(del);
    json_decref(del);

    /* retention by count: 30 scales into a project bounded to 10 */
#define TMPL "{\"name\":\"s\",\"uid\":\"u3\",\"version\":\"%d\",\"replicas\":{\"desired\":%d}}"
    char prev[256], next[256], ver[16];
    snprintf(prev, sizeof prev, TMPL, 100, 1);
    cache_put("s", prev);
    for (int i = 1; i <= 30; i++) {
        snprintf(next, sizeof next, TMPL, 100 + i, i + 1);
        snprintf(ver, sizeof ver, "%d", 100 + i);
        run_script("s", next, "App", ver, now + 10 + i, "86400000", "10", false);
        cache_put("s", next);
    }
    ck_assert_int_eq(card(), 10);
    redisReply *r = redisCommand(rc, "HLEN fg:hist:lab");
    ck_assert_int_eq(r->integer, 10);
    freeReplyObject(r);
    /* the ones kept are the newest: replicas 22..31 */
    r = redisCommand(rc, "ZRANGE fg:histx:lab 0 0");
    ck_assert_uint_eq(r->elements, 1);
    char member[200];
    snprintf(member, sizeof member, "%s", r->element[0]->str);
    freeReplyObject(r);
    r = redisCommand(rc, "HGET fg:hist:lab %s", member + 14);
    json_t *newest = NULL;
    ck_assert_int_eq(fg_json_load(r->str, r->len, &newest, NULL, 0), FG_OK);
    freeReplyObject(r);
    ck_assert_int_eq(jint(json_object_get(newest, "to"), "replicas"), 31);
    json_decref(newest);
    /* retention by age: an hour later with a 60 s bound, the next write drops them all */
    snprintf(next, sizeof next, TMPL, 200, 40);
    ck_assert_int_eq(run_script("s", next, "App", "200", now + 3600000, "60000", "10", false), 1);
    ck_assert_int_eq(card(), 1);
    free(lua_src);
    lua_src = NULL;
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------ */

START_TEST(history_refusals) {
    th_resp_t r;
    ck_assert_int_eq(call("GET", "/v1/projects/shop/history", NULL, NULL, NULL, &r), 401);
    th_resp_free(&r);
    ck_assert_int_eq(call("GET", "/v1/projects/shop/history", other, NULL, NULL, &r), 403);
    th_resp_free(&r);
    static const char *const bad[][2] = {
        {"limit=0", "limit"},          {"limit=abc", "limit"},       {"cursor=nope", "cursor"},
        {"kind=Deployment", "kind"},   {"name=Not_A_Name", "name"},  {"app=Bad_App", "app"},
        {"change=Exploded", "change"}, {"since=yesterday", "since"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[160];
        snprintf(path, sizeof path, "/v1/projects/shop/history?%s", bad[i][0]);
        ck_assert_int_eq(call("GET", path, dev, NULL, NULL, &r), 422);
        ck_assert_msg(strstr(r.body, bad[i][1]) != NULL, "%s: %s", bad[i][0], r.body);
        th_resp_free(&r);
    }
    /* an empty history is an empty page */
    json_t *b = get_json("/v1/projects/shop/history");
    ck_assert_uint_eq(json_array_size(json_object_get(b, "items")), 0);
    ck_assert(json_is_null(json_object_get(b, "cursor")));
    ck_assert_uint_eq(json_array_size(json_object_get(b, "clusters")), 3);
    json_decref(b);
}
END_TEST

/* ---- the change stream of writes made through fleetgate ------------------------------ */

/* The version of the one stored history entry of that change, cluster and request id ("" when
 * none), into out (32 bytes). */
static void history_version(const char *change, const char *cluster, const char *rid, char *out) {
    out[0] = '\0';
    redisReply *r = redisCommand(rc, "HVALS fg:hist:shop");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        json_t *e = NULL;
        ck_assert_int_eq(fg_json_load(r->element[i]->str, r->element[i]->len, &e, NULL, 0), FG_OK);
        const char *rq = s_of(e, "requestId");
        if (strcmp(s_of(e, "change"), change) == 0 && strcmp(s_of(e, "cluster"), cluster) == 0 &&
            rq != NULL && strcmp(rq, rid) == 0) {
            ck_assert_msg(out[0] == '\0', "two %s entries of %s", change, rid);
            snprintf(out, 32, "%s", s_of(e, "version"));
        }
        json_decref(e);
    }
    freeReplyObject(r);
}

static const char *entry_field(const redisReply *kv, const char *name) {
    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (strcmp(kv->element[i]->str, name) == 0)
            return kv->element[i + 1]->str;
    return "";
}

/* The change stream's entries of app web in cluster: checks that their versions only rise (no
 * version twice, none out of order); returns how many have version v, its entry id into id
 * (48 bytes) and its object (new reference, or NULL) into obj; *later: one is newer than v. */
static int stream_entries(const char *cluster, const char *v, char *id, json_t **obj, bool *later) {
    redisReply *r = redisCommand(rc, "XRANGE fg:chg:shop - +");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    int n = 0;
    long long last = -1, want = strtoll(v, NULL, 10);
    *later = false;
    *obj = NULL;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *kv = r->element[i]->element[1];
        if (strcmp(entry_field(kv, "k"), "App") != 0 || strcmp(entry_field(kv, "n"), "web") != 0 ||
            strcmp(entry_field(kv, "c"), cluster) != 0)
            continue;
        long long ver = strtoll(entry_field(kv, "v"), NULL, 10);
        ck_assert_msg(ver > last, "web in %s: version %lld streamed after %lld", cluster, ver,
                      last);
        last = ver;
        *later = *later || ver > want;
        if (ver == want) {
            n++;
            snprintf(id, 48, "%s", r->element[i]->element[0]->str);
            json_decref(*obj);
            const char *o = entry_field(kv, "o");
            ck_assert_int_eq(fg_json_load(o, strlen(o), obj, NULL, 0), FG_OK);
        }
    }
    freeReplyObject(r);
    return n;
}

/* The write of request rid (history change `change`) in cluster is in the change stream exactly
 * once, with its own version; check(obj) says whether the streamed object shows the new spec.
 * Waits (bounded) until the watch has brought a newer version of web there too, so a duplicate
 * streamed by the watch would be seen. Returns the entry id into id (48 bytes). */
static void assert_streamed_once(const char *change, const char *cluster, const char *rid,
                                 bool (*check)(const json_t *), char *id) {
    char v[32];
    history_version(change, cluster, rid, v);
    ck_assert_msg(v[0] != '\0', "no %s of %s in %s", change, rid, cluster);
    for (int waited = 0;; waited += 200) {
        json_t *obj;
        bool later;
        int n = stream_entries(cluster, v, id, &obj, &later);
        if (later || waited >= 15000) {
            ck_assert_msg(n == 1, "version %s of web in %s (%s) streamed %d times", v, cluster, rid,
                          n);
            ck_assert_str_eq(s_of(obj, "version"), v);
            ck_assert_msg(check(obj), "the streamed object of %s lacks the new spec", rid);
            json_decref(obj);
            ck_assert_msg(later, "the watch never brought a newer version of web in %s", cluster);
            return;
        }
        json_decref(obj);
        ts_sleep_ms(200);
    }
}

static bool scaled_to_2(const json_t *o) {
    return json_integer_value(json_object_get(json_object_get(o, "replicas"), "desired")) == 2;
}

static bool new_image(const json_t *o) {
    const json_t *c = json_array_get(json_object_get(o, "containers"), 0);
    const char *img = s_of(c, "image");
    return img != NULL && strcmp(img, "registry.example.net/shop/web:1.43.0") == 0;
}

/* The count of occurrences of needle in text. */
static int occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(changes_stream_writes_made_through_fleetgate_once) {
    create_app(port, "web", 6, "mk-web");
    json_decref(wait_entry("RolloutCompleted", "web", "c2", 15000));
    redisReply *r = redisCommand(rc, "XINFO STREAM fg:chg:shop");
    char start[48] = "0-0";
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "last-generated-id") == 0)
            snprintf(start, sizeof start, "%s", r->element[i + 1]->str);
    freeReplyObject(r);

    /* a scale through fleetgate (3 + 3 to 2 + 2), then a new image */
    verb(port, "web", "scale", "{\"replicas\": 4}", "sc-web");
    json_decref(wait_entry("ReplicasChanged", "web", "c2", 10000));
    char ids[4][48];
    assert_streamed_once("ReplicasChanged", "c2", "sc-web", scaled_to_2, ids[0]);
    th_resp_t resp;
    const char *patch = "{\"spec\": {\"containers\": [{\"name\": \"app\", \"image\": "
                        "\"registry.example.net/shop/web:1.43.0\", \"resources\": {\"requests\": "
                        "{\"cpu\": \"100m\", \"memory\": \"128Mi\"}}}]}}";
    ck_assert_int_eq(
        call("PATCH", "/v1/projects/shop/apps/web", dev, patch, "X-Request-Id: im-web", &resp),
        200);
    th_resp_free(&resp);
    json_decref(wait_entry("RolloutStarted", "web", "c2", 10000));
    assert_streamed_once("RolloutStarted", "c2", "im-web", new_image, ids[1]);
    /* the other cluster of the app (zone-a: c0 or c1) */
    char v0[32], v1[32];
    history_version("ReplicasChanged", "c0", "sc-web", v0);
    history_version("ReplicasChanged", "c1", "sc-web", v1);
    const char *other_cl = v0[0] ? "c0" : "c1";
    ck_assert_msg((v0[0] != '\0') != (v1[0] != '\0'), "the scale was not in one zone-a cluster");
    assert_streamed_once("ReplicasChanged", other_cl, "sc-web", scaled_to_2, ids[2]);
    assert_streamed_once("RolloutStarted", other_cl, "im-web", new_image, ids[3]);

    /* an SSE client resuming from before the writes gets each of them once */
    char *cmd = fg_xasprintf("curl -s -N -m 3 -H 'Authorization: Bearer %s' "
                             "-H 'Last-Event-ID: %s' "
                             "'http://127.0.0.1:%u/v1/projects/shop/changes?kinds=App&app=web'",
                             dev, start, (unsigned)port);
    FILE *f = popen(cmd, "r");
    free(cmd);
    ck_assert_ptr_nonnull(f);
    char *body = fg_xcalloc(1, 8u << 20);
    size_t got = 0, k;
    while (got < (8u << 20) - 1 && (k = fread(body + got, 1, (8u << 20) - 1 - got, f)) > 0)
        got += k;
    pclose(f);
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "id: %s\n", ids[i]);
        ck_assert_msg(occurrences(body, want) == 1, "%s sent %d times: %.1500s", ids[i],
                      occurrences(body, want), body);
    }
    free(body);
}
END_TEST

/* How many relists of deployments in c2 have ended (the swap counts them). */
static long long relists_done(void) {
    redisReply *r = redisCommand(rc, "HGET fg:sync:c2:deployments relists");
    long long n = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* Waits (bounded) until more than `than` relists of deployments in c2 have ended. */
static void wait_relists(long long than) {
    for (int waited = 0; relists_done() <= than; waited += 100) {
        ck_assert_msg(waited < 20000, "no relist of deployments in c2 ended");
        ts_sleep_ms(100);
    }
}

/* The change stream's entries of App name in cluster after id `after`, of type type ("upsert",
 * "delete"); desired >= 0: only upserts whose object wants that many replicas. */
static int stream_count(const char *after, const char *name, const char *cluster, const char *type,
                        long desired) {
    redisReply *r = redisCommand(rc, "XRANGE fg:chg:shop (%s +", after);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *kv = r->element[i]->element[1];
        if (strcmp(entry_field(kv, "k"), "App") != 0 || strcmp(entry_field(kv, "n"), name) != 0 ||
            strcmp(entry_field(kv, "c"), cluster) != 0 || strcmp(entry_field(kv, "t"), type) != 0)
            continue;
        if (desired >= 0) {
            json_t *o = NULL;
            const char *text = entry_field(kv, "o");
            ck_assert_int_eq(fg_json_load(text, strlen(text), &o, NULL, 0), FG_OK);
            bool want = json_integer_value(
                            json_object_get(json_object_get(o, "replicas"), "desired")) == desired;
            json_decref(o);
            if (!want)
                continue;
        }
        n++;
    }
    freeReplyObject(r);
    return n;
}

START_TEST(relist_streams_and_records_changes_missed_in_the_gap) {
    /* while no watch runs (fleetgate down, the cluster's history compacted: the next watch gets
     * 410), web is scaled and old deleted in c2; the relist that closes the gap streams the
     * scale and the delete, and records old's deletion, each once */
    create_app(port, "web", 2, "mk-web");
    create_app(port, "old", 2, "mk-old");
    json_decref(wait_entry("RolloutCompleted", "web", "c2", 15000));
    json_decref(wait_entry("RolloutCompleted", "old", "c2", 15000));
    char start[48] = "0-0";
    redisReply *r = redisCommand(rc, "XINFO STREAM fg:chg:shop");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "last-generated-id") == 0)
            snprintf(start, sizeof start, "%s", r->element[i + 1]->str);
    freeReplyObject(r);
    ck_assert_str_ne(start, "0-0");
    ck_assert_int_eq(th_daemon_stop(daemon_pid, SIGTERM, 5000), 0);
    daemon_pid = 0;
    long long relists0 = relists_done();
    ck_assert_int_eq(tk_call(&ks, 2, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web",
                             "{\"spec\":{\"replicas\":3}}", NULL),
                     200);
    ck_assert_int_eq(
        tk_call(&ks, 2, "DELETE", "/apis/apps/v1/namespaces/shop/deployments/old", NULL, NULL),
        200);
    ck_assert_int_eq(tk_call(&ks, 2, "POST", "/_kubesim/compact", "{}", NULL), 200);
    daemon_pid = start_daemon(&port, "daemon2.log");
    wait_relists(relists0);
    json_t *all = wait_entry("Deleted", "old", "c2", 15000);
    ck_assert_uint_eq(count_where(all, "Deleted", "old", "c2"), 1);
    ck_assert_uint_eq(count_where(all, "Deleted", "old", NULL), 1); /* the other cluster's stays */
    json_decref(all);
    ck_assert_int_eq(stream_count(start, "old", "c2", "delete", -1), 1);
    ck_assert_int_ge(stream_count(start, "web", "c2", "upsert", 3), 1);
    ck_assert_int_eq(stream_count(start, "old", "c2", "upsert", -1), 0);

    /* another gap with no change of web or old (only a pod made): its relist finds nothing new
     * of them, each change stays once */
    ck_assert_int_eq(th_daemon_stop(daemon_pid, SIGTERM, 5000), 0);
    daemon_pid = 0;
    long long relists1 = relists_done();
    make_pod(2, "filler", "", "10m");
    ck_assert_int_eq(tk_call(&ks, 2, "POST", "/_kubesim/compact", "{}", NULL), 200);
    daemon_pid = start_daemon(&port, "daemon3.log");
    wait_relists(relists1);
    all = all_history("", 1000);
    assert_unique_and_ordered(all);
    ck_assert_uint_eq(count_where(all, "Deleted", "old", "c2"), 1);
    ck_assert_uint_eq(count_where(all, "ReplicasChanged", "web", "c2"), 1);
    json_decref(all);
    ck_assert_int_eq(stream_count(start, "old", "c2", "delete", -1), 1);
    json_t *obj;
    bool later;
    char id[48];
    stream_entries("c2", "0", id, &obj, &later); /* web's versions only rise: none twice */
    json_decref(obj);
}
END_TEST

static Suite *history_suite(void) {
    Suite *s = suite_create("history");
    TCase *tc = tcase_create("history");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, history_refusals);
    tcase_add_test(tc, history_script_rules_idempotence_and_retention);
    tcase_add_test(tc, history_app_changes_once_with_actor);
    tcase_add_test(tc, history_pods_and_jobs_from_the_clusters);
    tcase_add_test(tc, history_relist_adds_nothing_but_missed_changes);
    tcase_add_test(tc, history_two_replicas_record_each_change_once);
    tcase_add_test(tc, changes_stream_writes_made_through_fleetgate_once);
    suite_add_tcase(s, tc);
    /* the gap a relist closes (a separate case: CK_RUN_CASE=gap runs it alone) */
    TCase *gap = tcase_create("gap");
    tcase_add_checked_fixture(gap, setup, teardown);
    tcase_set_timeout(gap, 180);
    tcase_add_test(gap, relist_streams_and_records_changes_missed_in_the_gap);
    suite_add_tcase(s, gap);
    return s;
}

int main(void) {
    return tm_run(history_suite());
}
