/* Integration tests of the insight APIs (issue 16): the daemon with its informers, a private
 * redis-server and kubesim with three clusters whose events expire after 3 s (--event-ttl-ms),
 * real tokens, every answer checked against the contract. The events timeline: events outlive
 * the clusters' TTL, repeats fold, every filter, paging while new events arrive, retention by
 * count and age (cache/insight_event.lua run against this Redis), 403 and 422s. */
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EVENT_TTL_MS "3000"

static tr_redis_t redis;
static tj_keys_t keys;
static tk_sim_t ks;
static pid_t daemon_pid;
static uint16_t port;
static char *dev, *viewer, *other;
static redisContext *rc;
static char daemon_cfg[8192]; /* for a second replica */
static pid_t daemon_b;
static uint16_t port_b;

/* One GET; the answer must be one the contract declares. Returns the status. */
static long get(const char *path, const char *tok, th_resp_t *r) {
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    char *auth = tok ? fg_xasprintf("Authorization: Bearer %s", tok) : NULL;
    const char *hdrs[2] = {auth, NULL};
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, r), 0);
    free(auth);
    char err[4096];
    char *p = fg_xstrdup(path);
    p[strcspn(p, "?")] = '\0';
    int rc_ =
        contract_check_headers("GET", p, r->status, r->headers, r->body, r->len, err, sizeof err);
    ck_assert_msg(rc_ == CONTRACT_VALID, "GET %s -> %ld: %s\n%s", path, r->status, err, r->body);
    free(p);
    return r->status;
}

/* GET path as dev, 200 expected: the body (a new reference). */
static json_t *get_json(const char *path) {
    th_resp_t r;
    long s = get(path, dev, &r);
    ck_assert_msg(s == 200, "GET %s -> %ld %s", path, s, r.body);
    json_t *j = NULL;
    ck_assert_msg(fg_json_load(r.body, r.len, &j, NULL, 0) == FG_OK, "%s", r.body);
    th_resp_free(&r);
    return j;
}

static void ks_post(int i, const char *path, const char *body) {
    long s = tk_call(&ks, i, "POST", path, body, NULL);
    ck_assert_msg(s == 201, "POST %s on cluster %d -> %ld", path, i, s);
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    static const char *const extra[] = {"--nodes",    "2", "--pod-start-ms", "0", "--event-ttl-ms",
                                        EVENT_TTL_MS, NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    char *cfg = daemon_cfg, cl[2048];
    ts_clusters_json(&ks, false, cl, sizeof cl);
    snprintf(cfg, sizeof daemon_cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\"},"
             " \"log\": {\"level\": \"error\", \"access_log\": false},"
             " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
             " \"clusters\": [%s],"
             " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
             "  \"audit_log\": \"%s/audit.log\"},"
             " \"rate_limits\": {\"enabled\": false},"
             " \"insights\": {\"events_max_per_project\": 40, \"changes_keepalive_s\": 1},"
             " \"cors\": {\"allowed_origins\": [\"http://localhost:5173\"]},"
             " \"streams\": {\"stall_timeout_s\": 2}}",
             redis.url, cl, keys.rsa_pub, keys.dir);
    char log[160];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = th_daemon_start(cfg, &port, log);
    ck_assert_int_gt(daemon_pid, 0);
    dev = ts_token(&keys, "dev", "\"projects\": {\"shop\": \"developer\", \"churn\": \"viewer\"}");
    viewer = ts_token(&keys, "vera", "\"projects\": {\"shop\": \"viewer\"}");
    other = ts_token(&keys, "otto", "\"projects\": {\"other\": \"developer\"}");
    rc = redisConnect("127.0.0.1", redis.port);
    ck_assert_ptr_nonnull(rc);
    ck_assert_int_eq(rc->err, 0);
    for (int i = 0; i < 3; i++) {
        ks_post(i, "/api/v1/namespaces",
                "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"shop\"}}");
        ks_post(i, "/api/v1/namespaces",
                "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"churn\"}}");
    }
    ts_wait_ready(port, 400);
}

static void teardown(void) {
    int status = daemon_pid > 0 ? th_daemon_stop(daemon_pid, SIGTERM, 5000) : 0;
    int status_b = daemon_b > 0 ? th_daemon_stop(daemon_b, SIGTERM, 5000) : 0;
    daemon_b = 0;
    char text[8192];
    ts_log_if_failed(status, keys.dir, text, sizeof text);
    redisFree(rc);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    free(dev);
    free(viewer);
    free(other);
    ck_assert_msg(status == 0, "the daemon exited with %d:\n%s", status, text);
    ck_assert_msg(status_b == 0, "the second replica exited with %d", status_b);
}

/* ---- objects in kubesim --------------------------------------------------------- */

static void make_pod(int cl, const char *ns, const char *name, const char *annotations,
                     const char *cpu) {
    char body[1024], path[128];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
             "\"annotations\":{%s}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"busybox:1\",\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]}}",
             name, annotations, cpu);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
    ks_post(cl, path, body);
}

static void make_deployment(int cl, const char *name, int replicas) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"run\":\"%s\"}},"
             "\"template\":{\"metadata\":{\"labels\":{\"run\":\"%s\"}},\"spec\":{\"containers\":"
             "[{\"name\":\"c\",\"image\":\"nginx:1\"}]}}}}",
             name, replicas, name, name);
    ks_post(cl, "/apis/apps/v1/namespaces/shop/deployments", body);
}

/* The items of one page of path (a new reference to the body). */
static size_t count_where(const json_t *items, const char *reason, const char *name) {
    size_t i, n = 0;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *r = json_string_value(json_object_get(it, "reason"));
        const char *o = json_string_value(json_object_get(json_object_get(it, "object"), "name"));
        if ((reason == NULL || strcmp(r, reason) == 0) && (name == NULL || strcmp(o, name) == 0))
            n++;
    }
    return n;
}

/* The first item with that reason about that object (borrowed from body), or NULL. */
static json_t *find(const json_t *body, const char *reason, const char *name) {
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(body, "items"), i, it) {
        const char *r = json_string_value(json_object_get(it, "reason"));
        const char *o = json_string_value(json_object_get(json_object_get(it, "object"), "name"));
        if (strcmp(r, reason) == 0 && strcmp(o, name) == 0)
            return it;
    }
    return NULL;
}

/* Waits until a page of path shows an event with reason about name (bounded). */
static void wait_event(const char *path, const char *reason, const char *name, int max_ms) {
    for (int waited = 0;; waited += 100) {
        json_t *b = get_json(path);
        bool found = find(b, reason, name) != NULL;
        json_decref(b);
        if (found)
            return;
        ck_assert_msg(waited < max_ms, "no %s event about %s after %d ms", reason, name, max_ms);
        ts_sleep_ms(100);
    }
}

/* How many events kubesim's cluster cl still holds in shop about name. */
static size_t ks_events_about(int cl, const char *name) {
    json_t *out = NULL;
    ck_assert_int_eq(tk_call(&ks, cl, "GET", "/api/v1/namespaces/shop/events", NULL, &out), 200);
    size_t i, n = 0;
    json_t *it;
    json_array_foreach(json_object_get(out, "items"), i, it) {
        const char *o =
            json_string_value(json_object_get(json_object_get(it, "involvedObject"), "name"));
        if (o && strcmp(o, name) == 0)
            n++;
    }
    json_decref(out);
    return n;
}

/* ---- the timeline --------------------------------------------------------------- */

START_TEST(events_outlive_the_cluster_ttl_and_fold) {
    make_pod(0, "shop", "once", "", "10m");
    /* unschedulable: kubesim's scheduler says so once (a FailedScheduling event) */
    make_pod(1, "shop", "huge", "", "100000");
    /* crash-looping: exits 1 after 100 ms, restarted (BackOff) */
    make_pod(2, "shop", "crash", "\"kubesim.io/exit-code\":\"1\",\"kubesim.io/run-ms\":\"100\"",
             "10m");
    make_deployment(0, "web", 2);
    wait_event("/v1/projects/shop/events?limit=1000", "Scheduled", "once", 10000);
    wait_event("/v1/projects/shop/events?limit=1000", "FailedScheduling", "huge", 10000);
    wait_event("/v1/projects/shop/events?limit=1000", "BackOff", "crash", 15000);
    wait_event("/v1/projects/shop/events?limit=1000", "ScalingReplicaSet", "web", 10000);
    /* the cluster forgets "once"'s events after the TTL; the timeline does not */
    for (int waited = 0; ks_events_about(0, "once") > 0; waited += 200) {
        ck_assert_msg(waited < 15000, "kubesim kept its events past the TTL");
        ts_sleep_ms(200);
    }
    ts_sleep_ms(500); /* the DELETED events reach the cache */
    json_t *b = get_json("/v1/projects/shop/events?limit=1000");
    json_t *items = json_object_get(b, "items");
    ck_assert_uint_eq(count_where(items, "Scheduled", "once"), 1);
    ck_assert_uint_eq(count_where(items, "Started", "once"), 1);
    json_t *sched = find(b, "Scheduled", "once");
    ck_assert_str_eq(json_string_value(json_object_get(sched, "cluster")), "c0");
    ck_assert_str_eq(json_string_value(json_object_get(sched, "zone")), "zone-a");
    ck_assert_str_eq(json_string_value(json_object_get(sched, "source")), "default-scheduler");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(sched, "object"), "kind")),
                     "Pod");
    ck_assert_uint_eq(count_where(items, "FailedScheduling", "huge"), 1);
    json_t *fs = find(b, "FailedScheduling", "huge");
    ck_assert_str_eq(json_string_value(json_object_get(fs, "type")), "Warning");
    /* repeats fold: kubesim makes a new Event at every restart of "crash" (count 1 each, and
     * expires them after 3 s); the timeline has one entry, its count the sum, first < last */
    ck_assert_uint_eq(count_where(items, "BackOff", "crash"), 1);
    json_t *bo = find(b, "BackOff", "crash");
    ck_assert_int_gt(json_integer_value(json_object_get(bo, "count")), 3);
    ck_assert_int_lt(strcmp(json_string_value(json_object_get(bo, "firstSeenAt")),
                            json_string_value(json_object_get(bo, "lastSeenAt"))),
                     0);
    /* an app's events, and the app of its pods' events */
    json_t *scaling = find(b, "ScalingReplicaSet", "web");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(scaling, "object"), "kind")),
                     "App");
    ck_assert_str_eq(json_string_value(json_object_get(scaling, "app")), "web");
    /* newest first */
    size_t i;
    json_t *it;
    const char *prev = NULL;
    json_array_foreach(items, i, it) {
        const char *t = json_string_value(json_object_get(it, "lastSeenAt"));
        if (prev)
            ck_assert_msg(strcmp(prev, t) >= 0, "not newest first: %s then %s", prev, t);
        prev = t;
    }
    json_decref(b);
}
END_TEST

START_TEST(events_every_filter) {
    make_pod(0, "shop", "quiet", "", "10m");
    make_pod(1, "shop", "huge", "", "100000");
    make_deployment(2, "web", 1);
    wait_event("/v1/projects/shop/events?limit=1000", "Started", "quiet", 10000);
    wait_event("/v1/projects/shop/events?limit=1000", "FailedScheduling", "huge", 10000);
    wait_event("/v1/projects/shop/events?limit=1000", "ScalingReplicaSet", "web", 10000);
    /* the web pod's Started event carries its app once the pod is cached */
    json_t *all = get_json("/v1/projects/shop/events?limit=1000");
    size_t total = json_array_size(json_object_get(all, "items"));
    ck_assert_uint_gt(total, 5);
    struct {
        const char *query;
        const char *member, *sub, *want; /* every item's member (sub-member) equals want */
    } cases[] = {
        {"kind=Pod", "object", "kind", "Pod"},
        {"kind=App", "object", "kind", "App"},
        {"kind=Pod&name=quiet", "object", "name", "quiet"},
        {"type=Warning", "type", NULL, "Warning"},
        {"type=Normal", "type", NULL, "Normal"},
        {"reason=FailedScheduling", "reason", NULL, "FailedScheduling"},
        {"cluster=c1", "cluster", NULL, "c1"},
        {"app=web", "app", NULL, "web"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/projects/shop/events?limit=1000&%s", cases[k].query);
        json_t *b = get_json(path);
        json_t *items = json_object_get(b, "items");
        ck_assert_msg(json_array_size(items) > 0, "%s: nothing", cases[k].query);
        ck_assert_msg(json_array_size(items) < total, "%s: filtered nothing", cases[k].query);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            json_t *v = json_object_get(it, cases[k].member);
            if (cases[k].sub)
                v = json_object_get(v, cases[k].sub);
            ck_assert_msg(json_is_string(v) && strcmp(json_string_value(v), cases[k].want) == 0,
                          "%s: an item with %s", cases[k].query, json_dumps(it, 0));
        }
        json_decref(b);
    }
    /* since: the future shows nothing; the epoch everything */
    json_t *b = get_json("/v1/projects/shop/events?since=2999-01-01T00:00:00Z");
    ck_assert_uint_eq(json_array_size(json_object_get(b, "items")), 0);
    json_decref(b);
    const char *mid = json_string_value(
        json_object_get(json_array_get(json_object_get(all, "items"), total / 2), "lastSeenAt"));
    char path[256];
    snprintf(path, sizeof path, "/v1/projects/shop/events?limit=1000&since=%s", mid);
    b = get_json(path);
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(b, "items"), i, it)
        ck_assert_int_ge(strcmp(json_string_value(json_object_get(it, "lastSeenAt")), mid), 0);
    ck_assert_uint_gt(json_array_size(json_object_get(b, "items")), 0);
    json_decref(b);
    json_decref(all);
}
END_TEST

START_TEST(events_paging_while_new_events_arrive) {
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d", i);
        make_pod(i % 3, "shop", name, "", "10m");
    }
    wait_event("/v1/projects/shop/events?limit=1000", "Started", "p5", 10000);
    ts_sleep_ms(1500); /* every event of the six reached the timeline */
    json_t *before = get_json("/v1/projects/shop/events?limit=1000");
    /* a crash-looping pod adds events (new entries on top, and its BackOff refolding) while
     * the pages are walked */
    make_pod(0, "shop", "noisy", "\"kubesim.io/exit-code\":\"1\",\"kubesim.io/run-ms\":\"50\"",
             "10m");
    json_t *seen = json_object();
    char path[512] = "/v1/projects/shop/events?limit=2";
    size_t pages = 0;
    for (;;) {
        json_t *b = get_json(path);
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(b, "items"), i, it) {
            const char *id = json_string_value(json_object_get(it, "id"));
            ck_assert_msg(json_object_get(seen, id) == NULL, "%s shown twice", id);
            json_object_set_new(seen, id, json_true());
        }
        pages++;
        const char *cur = json_string_value(json_object_get(b, "cursor"));
        if (cur == NULL) {
            json_decref(b);
            break;
        }
        snprintf(path, sizeof path, "/v1/projects/shop/events?limit=2&cursor=%s", cur);
        json_decref(b);
        ts_sleep_ms(40);
    }
    ck_assert_uint_gt(pages, 3);
    /* every entry of before that nothing folded into meanwhile was shown (none skipped) */
    json_t *after = get_json("/v1/projects/shop/events?limit=1000");
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(before, "items"), i, it) {
        const char *id = json_string_value(json_object_get(it, "id"));
        size_t k;
        json_t *now;
        json_array_foreach(json_object_get(after, "items"), k, now) {
            if (strcmp(json_string_value(json_object_get(now, "id")), id) != 0)
                continue;
            if (json_equal(json_object_get(now, "lastSeenAt"), json_object_get(it, "lastSeenAt")))
                ck_assert_msg(json_object_get(seen, id) != NULL, "%s was skipped", id);
        }
    }
    json_decref(after);
    json_decref(before);
    json_decref(seen);
}
END_TEST

START_TEST(events_retention_by_count_per_project) {
    /* churn gets far more than events_max_per_project (40) distinct events; shop is apart */
    make_pod(0, "shop", "kept", "", "10m");
    for (int i = 0; i < 16; i++) {
        char name[32];
        snprintf(name, sizeof name, "c%d", i);
        make_pod(i % 3, "churn", name, "", "10m");
    }
    wait_event("/v1/projects/shop/events?limit=1000", "Started", "kept", 10000);
    ts_sleep_ms(2500);
    redisReply *r = redisCommand(rc, "ZCARD fg:evx:churn");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_le(r->integer, 40);
    ck_assert_int_ge(r->integer, 30);
    freeReplyObject(r);
    r = redisCommand(rc, "HLEN fg:ev:churn");
    ck_assert_int_le(r->integer, 40);
    freeReplyObject(r);
    th_resp_t resp;
    ck_assert_int_eq(get("/v1/projects/churn/events?limit=1000", dev, &resp), 200);
    json_t *b = NULL;
    ck_assert_int_eq(fg_json_load(resp.body, resp.len, &b, NULL, 0), FG_OK);
    ck_assert_int_le(json_array_size(json_object_get(b, "items")), 40);
    /* the newest stay: the last pod made has its Started event */
    ck_assert_ptr_nonnull(find(b, "Started", "c15"));
    json_decref(b);
    th_resp_free(&resp);
    json_t *s = get_json("/v1/projects/shop/events?limit=1000");
    ck_assert_ptr_nonnull(find(s, "Scheduled", "kept"));
    json_decref(s);
}
END_TEST

/* Runs cache/insight_event.lua on this Redis with the given times. */
static long long run_script(const char *event, long long first, long long last, long long now,
                            long long max_age_ms, long long max_n) {
    char *src = NULL;
    size_t len = 0;
    ck_assert_int_eq(fg_read_file("cache/insight_event.lua", 1 << 20, &src, &len), FG_OK);
    char a[5][24];
    snprintf(a[0], 24, "%lld", first);
    snprintf(a[1], 24, "%lld", last);
    snprintf(a[2], 24, "%lld", now);
    snprintf(a[3], 24, "%lld", max_age_ms);
    snprintf(a[4], 24, "%lld", max_n);
    const char *argv[] = {"EVAL", src,  "3",  "fg:ev:aged", "fg:evx:aged", "fg:o:pod:c0:aged",
                          event,  a[0], a[1], a[2],         a[3],          a[4]};
    redisReply *r = redisCommandArgv(rc, 12, argv, NULL);
    free(src);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static char *event_json(const char *k8s_name, const char *pod, int count) {
    return fg_xasprintf("{\"name\":\"%s\",\"project\":\"aged\",\"cluster\":\"c0\",\"zone\":\"z\","
                        "\"type\":\"Normal\",\"reason\":\"Pulled\",\"message\":\"m %s\","
                        "\"object\":{\"kind\":\"Pod\",\"name\":\"%s\",\"uid\":\"u-%s\"},"
                        "\"count\":%d,\"source\":\"kubelet\"}",
                        k8s_name, pod, pod, pod, count);
}

START_TEST(events_retention_by_age_and_idempotence) {
    const long long day = 86400000LL, t0 = 1800000000000LL;
    char *e1 = event_json("a.1", "a", 1), *e2 = event_json("b.1", "b", 1);
    char *e1again = event_json("a.2", "a", 3), *e1same = event_json("a.2", "a", 3);
    ck_assert_int_eq(run_script(e1, t0, t0, t0, day, 100), 1);
    ck_assert_int_eq(run_script(e2, t0 + 1000, t0 + 1000, t0 + 1000, day, 100), 1);
    /* another Kubernetes Event of the same repeat folds: count 1 + 3, last time moves */
    ck_assert_int_eq(run_script(e1again, t0 + 5000, t0 + 5000, t0 + 5000, day, 100), 1);
    /* the same again (a relist) changes nothing */
    ck_assert_int_eq(run_script(e1same, t0 + 5000, t0 + 5000, t0 + 5000, day, 100), 0);
    redisReply *r = redisCommand(rc, "ZRANGE fg:evx:aged 0 -1");
    ck_assert_int_eq(r->elements, 2);
    ck_assert_ptr_nonnull(strstr(r->element[0]->str, "c0/a.")); /* a is the newest now */
    freeReplyObject(r);
    r = redisCommand(rc, "HVALS fg:ev:aged");
    ck_assert_int_eq(r->elements, 2);
    json_t *a = NULL;
    for (size_t i = 0; i < r->elements; i++)
        if (strstr(r->element[i]->str, "\"m a\"") != NULL)
            ck_assert_int_eq(fg_json_load(r->element[i]->str, r->element[i]->len, &a, NULL, 0),
                             FG_OK);
    freeReplyObject(r);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq((int)json_number_value(json_object_get(a, "count")), 4);
    ck_assert_int_eq((long long)json_number_value(json_object_get(a, "_f")), t0);
    ck_assert_int_eq((long long)json_number_value(json_object_get(a, "_l")), t0 + 5000);
    json_decref(a);
    /* a day later b (last seen t0 + 1 s) is past the age; a (t0 + 5 s) is not yet */
    char *e3 = event_json("c.1", "c", 1);
    ck_assert_int_eq(run_script(e3, t0 + day + 2000, t0 + day + 2000, t0 + day + 2000, day, 100),
                     1);
    r = redisCommand(rc, "ZCARD fg:evx:aged");
    ck_assert_int_eq(r->integer, 2);
    freeReplyObject(r);
    r = redisCommand(rc, "HLEN fg:ev:aged");
    ck_assert_int_eq(r->integer, 2);
    freeReplyObject(r);
    /* an event already older than the age is not kept */
    char *e4 = event_json("d.1", "d", 1);
    ck_assert_int_eq(run_script(e4, t0, t0, t0 + 3 * day, day, 100), 0);
    /* count: a bound of 1 leaves the newest */
    char *e5 = event_json("e.1", "e", 1);
    ck_assert_int_eq(run_script(e5, t0 + day + 3000, t0 + day + 3000, t0 + day + 3000, day, 1), 1);
    r = redisCommand(rc, "ZRANGE fg:evx:aged 0 -1");
    ck_assert_int_eq(r->elements, 1);
    ck_assert_ptr_nonnull(strstr(r->element[0]->str, "c0/e."));
    freeReplyObject(r);
    free(e1), free(e2), free(e1again), free(e1same), free(e3), free(e4), free(e5);
}
END_TEST

START_TEST(events_refusals) {
    th_resp_t r;
    ck_assert_int_eq(get("/v1/projects/shop/events", other, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get("/v1/projects/shop/events", NULL, &r), 401);
    th_resp_free(&r);
    ck_assert_int_eq(get("/v1/projects/shop/events", viewer, &r), 200);
    th_resp_free(&r);
    struct {
        const char *query, *param;
    } bad[] = {
        {"kind=Deployment", "kind"},
        {"type=Error", "type"},
        {"reason=1abc", "reason"},
        {"reason=Back-Off", "reason"},
        {"since=yesterday", "since"},
        {"since=2026-02-30T00:00:00Z", "since"},
        {"cursor=bm90LWEtY3Vyc29y", "cursor"},
        {"cluster=nowhere", "cluster"},
        {"name=Not_A_Name", "name"},
        {"app=Web", "app"},
        {"limit=0", "limit"},
        {"limit=1001", "limit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/projects/shop/events?%s", bad[i].query);
        ck_assert_msg(get(path, dev, &r) == 422, "%s -> %ld", bad[i].query, r.status);
        char want[64];
        snprintf(want, sizeof want, "\"parameter\":\"%s\"", bad[i].param);
        ck_assert_msg(strstr(r.body, want) != NULL, "%s: %s", bad[i].query, r.body);
        th_resp_free(&r);
    }
}
END_TEST

/* ---- the change stream ------------------------------------------------------------- */

static void start_replica_b(void) {
    char log[160];
    snprintf(log, sizeof log, "%s/daemon-b.log", keys.dir);
    daemon_b = th_daemon_start(daemon_cfg, &port_b, log);
    ck_assert_int_gt(daemon_b, 0);
    for (int i = 0; i < 400; i++) {
        th_resp_t r;
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%u/readyz", (unsigned)port_b);
        ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
        long st = r.status;
        th_resp_free(&r);
        if (st == 200)
            return;
        ts_sleep_ms(50);
    }
    ck_abort_msg("the second replica did not become ready");
}

/* The stream's last id ("0-0" when it has none) into out (48 bytes). */
static void stream_last_id(const char *key, char *out) {
    redisReply *r = redisCommand(rc, "XINFO STREAM %s", key);
    snprintf(out, 48, "0-0");
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "last-generated-id") == 0)
            snprintf(out, 48, "%s", r->element[i + 1]->str);
    freeReplyObject(r);
}

static const char *entry_field(const redisReply *kv, const char *name) {
    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (strcmp(kv->element[i]->str, name) == 0)
            return kv->element[i + 1]->str;
    return "";
}

/* Reads a whole pipe into a new string. */
static char *read_all(FILE *p) {
    fg_buf_t b;
    fg_buf_init(&b, 64u << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        ck_assert_int_eq(fg_buf_append(&b, chunk, n), FG_OK);
    return fg_buf_steal(&b, NULL);
}

START_TEST(changes_exactly_once_in_order_across_replicas_and_reconnects) {
    start_replica_b();
    make_deployment(0, "web", 0);
    for (int waited = 0;; waited += 100) {
        th_resp_t r;
        long st = get("/v1/projects/shop/apps/web", dev, &r);
        th_resp_free(&r);
        if (st == 200)
            break;
        ck_assert_msg(waited < 10000, "the app never reached the cache");
        ts_sleep_ms(100);
    }
    ts_sleep_ms(500);
    char start[48];
    stream_last_id("fg:chg:shop", start);
    char *cmd =
        fg_xasprintf("node tests/integration/sse_client.js %s %s 1000 170 5 "
                     "'http://127.0.0.1:%u/v1/projects/shop/changes?kinds=App&app=web' "
                     "'http://127.0.0.1:%u/v1/projects/shop/changes?app=web&kinds=App,Pod' 2>&1",
                     dev, start, (unsigned)port, (unsigned)port_b);
    FILE *client = popen(cmd, "r");
    free(cmd);
    ck_assert_ptr_nonnull(client);
    ts_sleep_ms(300);
    for (int i = 1; i <= 1000; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"seq\":\"%d\"}}}", i);
        long st =
            tk_call(&ks, 0, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/web", body, NULL);
        ck_assert_msg(st == 200, "PATCH %d -> %ld", i, st);
    }
    char *out = read_all(client);
    int status = pclose(client);
    ck_assert_msg(status == 0, "the client failed (%d):\n%.2000s", status, out);
    /* what the client received, line by line */
    size_t nlines = 0, cap = 4096;
    char **ids = fg_xcalloc(cap, sizeof *ids);
    int expect_seq = 1, connections = 0;
    for (char *line = out, *eol; *line != '\0'; line = eol + 1) {
        eol = strchr(line, '\n');
        if (eol == NULL)
            break;
        *eol = '\0';
        if (strncmp(line, "done ", 5) == 0) {
            connections = (int)strtol(line + 5, NULL, 10);
            break;
        }
        char *w[5] = {NULL};
        size_t nw = 0;
        for (char *p = line; nw < 5 && p != NULL; nw++) {
            w[nw] = p;
            p = strchr(p, ' ');
            if (p != NULL)
                *p++ = '\0';
        }
        ck_assert_msg(nw == 5 && w[4] != NULL, "%s", line);
        const char *id = w[0], *type = w[1], *kind = w[2], *name = w[3], *seq = w[4];
        ck_assert_str_eq(type, "upsert");
        ck_assert_str_eq(kind, "App");
        ck_assert_str_eq(name, "web");
        if (strcmp(seq, "-") != 0) {
            int v = (int)strtol(seq, NULL, 10);
            if (v == expect_seq)
                expect_seq++;
            else
                ck_assert_msg(v == expect_seq - 1, "seq %d after %d", v, expect_seq - 1);
        }
        ck_assert_uint_lt(nlines, cap);
        ids[nlines++] = fg_xstrdup(id);
    }
    ck_assert_int_eq(expect_seq, 1001); /* every change, in order */
    ck_assert_int_eq(connections, 6);   /* five reconnects, three of them to the other replica */
    /* exactly the stream's entries of web after start, each once, in order */
    redisReply *r = redisCommand(rc, "XRANGE fg:chg:shop (%s %s", start, ids[nlines - 1]);
    size_t k = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *kv = r->element[i]->element[1];
        if (strcmp(entry_field(kv, "k"), "App") != 0 || strcmp(entry_field(kv, "a"), "web") != 0)
            continue;
        ck_assert_msg(k < nlines, "the stream holds more than was received");
        ck_assert_str_eq(ids[k], r->element[i]->element[0]->str);
        k++;
    }
    ck_assert_uint_eq(k, nlines);
    freeReplyObject(r);
    for (size_t i = 0; i < nlines; i++)
        free(ids[i]);
    free(ids);
    free(out);
}
END_TEST

/* Runs curl on the change stream for `seconds` (in the background until read_all): the pipe. */
static FILE *curl_stream(uint16_t p, const char *tok, const char *last_id, int seconds) {
    char *cmd = fg_xasprintf("curl -s -N -m %d -H 'Authorization: Bearer %s' %s%s%s "
                             "'http://127.0.0.1:%u/v1/projects/shop/changes'",
                             seconds, tok, last_id ? "-H 'Last-Event-ID: " : "",
                             last_id ? last_id : "", last_id ? "'" : "", (unsigned)p);
    FILE *f = popen(cmd, "r");
    free(cmd);
    ck_assert_ptr_nonnull(f);
    return f;
}

START_TEST(changes_reset_keepalives_and_contract) {
    /* the history before now is trimmed away: an old id cannot resume */
    char last[48];
    make_pod(0, "shop", "before", "", "10m");
    ts_sleep_ms(500);
    stream_last_id("fg:chg:shop", last);
    ck_assert_str_ne(last, "0-0");
    freeReplyObject(redisCommand(rc, "XTRIM fg:chg:shop MAXLEN 0"));
    FILE *f = curl_stream(port, dev, "1-0", 4);
    ts_sleep_ms(1000);
    make_pod(1, "shop", "after", "", "10m");
    char *body = read_all(f);
    pclose(f);
    ck_assert_msg(strncmp(body, "retry: 3000\n\n", 13) == 0, "%.300s", body);
    char *reset = strstr(body, "event: reset\n");
    ck_assert_msg(reset != NULL, "no reset: %.500s", body);
    ck_assert_ptr_nonnull(strstr(reset, "older than the stream's history"));
    /* its id is where the stream goes on: the last id trimmed */
    char want[80];
    snprintf(want, sizeof want, "id: %s\nevent: reset", last);
    ck_assert_msg(strstr(body, want) != NULL, "%s not in %.500s", want, body);
    ck_assert_ptr_nonnull(strstr(body, ": keep-alive\n\n"));
    ck_assert_msg(strstr(body, "\"name\":\"after\"") != NULL, "no upsert of after: %.2000s", body);
    ck_assert_ptr_null(strstr(body, "\"name\":\"before\""));
    char err[4096];
    int v = contract_check("GET", "/v1/projects/shop/changes", 200, "text/event-stream", body,
                           strlen(body), err, sizeof err);
    ck_assert_msg(v == CONTRACT_VALID, "%s\n%.2000s", err, body);
    free(body);
    /* a resume from the reset's id gets no reset and nothing twice */
    f = curl_stream(port, dev, last, 2);
    body = read_all(f);
    pclose(f);
    ck_assert_ptr_null(strstr(body, "event: reset"));
    ck_assert_msg(strstr(body, "\"name\":\"after\"") != NULL, "%.2000s", body);
    free(body);
}
END_TEST

/* Waits (bounded) until GET path answers 200 as dev. */
static void wait_readable(const char *path, int max_ms) {
    for (int waited = 0;; waited += 100) {
        th_resp_t r;
        long st = get(path, dev, &r);
        th_resp_free(&r);
        if (st == 200)
            return;
        ck_assert_msg(waited < max_ms, "%s never readable", path);
        ts_sleep_ms(100);
    }
}

START_TEST(changes_reset_after_flushall) {
    /* an id of the stream as it was before a FLUSHALL cannot resume: the changes between are
     * gone with it (and the relist that follows streams nothing) */
    char old[48];
    make_pod(0, "shop", "before", "", "10m");
    wait_readable("/v1/projects/shop/pods/before", 10000);
    ts_sleep_ms(300);
    stream_last_id("fg:chg:shop", old);
    ck_assert_str_ne(old, "0-0");
    freeReplyObject(redisCommand(rc, "FLUSHALL"));
    /* the stream does not exist yet */
    FILE *f = curl_stream(port, dev, old, 2);
    char *body = read_all(f);
    pclose(f);
    ck_assert_msg(strstr(body, "event: reset\n") != NULL, "no reset: %.500s", body);
    ck_assert_ptr_nonnull(strstr(body, "id: 0-0\nevent: reset"));
    ck_assert_ptr_null(strstr(body, "\"name\":\"before\""));
    free(body);
    /* the cache is back (relisted), then a new change makes the stream again */
    wait_readable("/v1/projects/shop/pods/before", 20000);
    make_pod(1, "shop", "after", "", "10m");
    char now[48] = "0-0";
    for (int waited = 0; strcmp(now, "0-0") == 0; waited += 100) {
        ck_assert_msg(waited < 10000, "the new pod was never streamed");
        ts_sleep_ms(100);
        stream_last_id("fg:chg:shop", now);
    }
    /* the old id is older than the new stream's first entry: reset, then the new changes */
    f = curl_stream(port, dev, old, 2);
    body = read_all(f);
    pclose(f);
    char *reset = strstr(body, "event: reset\n");
    ck_assert_msg(reset != NULL, "no reset: %.1000s", body);
    ck_assert_ptr_nonnull(strstr(reset, "older than the stream's history"));
    ck_assert_ptr_null(strstr(body, "\"name\":\"before\""));
    char err[4096];
    int v = contract_check("GET", "/v1/projects/shop/changes", 200, "text/event-stream", body,
                           strlen(body), err, sizeof err);
    ck_assert_msg(v == CONTRACT_VALID, "%s\n%.2000s", err, body);
    free(body);
    /* from the beginning ("0-0", the first reset's id) and from the new stream's own id: no
     * reset; the new pod from the beginning */
    f = curl_stream(port, dev, "0-0", 2);
    body = read_all(f);
    pclose(f);
    ck_assert_msg(strstr(body, "event: reset") == NULL, "%.1000s", body);
    ck_assert_msg(strstr(body, "\"name\":\"after\"") != NULL, "%.2000s", body);
    free(body);
    f = curl_stream(port, dev, now, 2);
    body = read_all(f);
    pclose(f);
    ck_assert_msg(strstr(body, "event: reset") == NULL, "%.1000s", body);
    free(body);
}
END_TEST

/* Reads lines of p into b (appended) until one holds want, or the pipe ends: whether it came. */
static bool read_until(FILE *p, fg_buf_t *b, const char *want) {
    char line[65536];
    while (fgets(line, sizeof line, p) != NULL) {
        ck_assert_int_eq(fg_buf_append(b, line, strlen(line)), FG_OK);
        if (strstr(line, want) != NULL)
            return true;
    }
    return false;
}

START_TEST(changes_connected_client_reset_by_flushall) {
    /* a client connected while Redis loses its data is told (reset), not silently moved onto
     * the new stream with the changes between missing; then it goes on with the new changes */
    /* curl's pid first (the shell's, which curl replaces), to end it once seen */
    char from[48];
    stream_last_id("fg:chg:shop", from); /* so no change made from now on can be missed */
    char *cmd =
        fg_xasprintf("echo $$; exec curl -s -N -m 60 -H 'Authorization: Bearer %s' "
                     "-H 'Last-Event-ID: %s' 'http://127.0.0.1:%u/v1/projects/shop/changes'",
                     dev, from, (unsigned)port);
    FILE *f = popen(cmd, "r");
    free(cmd);
    ck_assert_ptr_nonnull(f);
    char pid_line[32];
    int64_t curl_pid = 0;
    ck_assert_ptr_nonnull(fgets(pid_line, sizeof pid_line, f));
    ck_assert_int_eq(fg_parse_int64(pid_line, strcspn(pid_line, "\n"), 1, INT32_MAX, &curl_pid),
                     FG_OK);
    fg_buf_t b;
    fg_buf_init(&b, 64u << 20);
    ck_assert(read_until(f, &b, "retry: 3000"));
    /* the stream is live: a change made now reaches the client (bounded by curl's -m) */
    make_pod(0, "shop", "before", "", "10m");
    ck_assert_msg(read_until(f, &b, "\"name\":\"before\""), "before never streamed");
    freeReplyObject(redisCommand(rc, "FLUSHALL"));
    wait_readable("/v1/projects/shop/pods/before", 20000);
    /* c1's pods relisted (a pod made while they list is in the LIST, and the cache never held
     * it: not a change streamed) */
    for (int waited = 0;; waited += 100) {
        redisReply *st = redisCommand(rc, "HGET fg:sync:c1:pods state");
        bool synced = st->type == REDIS_REPLY_STRING && strcmp(st->str, "Synced") == 0;
        freeReplyObject(st);
        if (synced)
            break;
        ck_assert_msg(waited < 20000, "c1's pods were not listed again after the FLUSHALL");
        ts_sleep_ms(100);
    }
    make_pod(1, "shop", "after", "", "10m");
    size_t mark = b.len;
    ck_assert_msg(read_until(f, &b, "\"name\":\"after\""), "after never streamed");
    const char *tail = b.data + mark;
    const char *reset = strstr(tail, "event: reset\n");
    const char *after = strstr(tail, "\"name\":\"after\"");
    ck_assert_msg(reset != NULL && reset < after, "no reset before the new changes: %.3000s", tail);
    ck_assert_ptr_nonnull(strstr(reset, "lost its data"));
    ck_assert_msg(strstr(reset + 1, "event: reset") == NULL, "two resets: %.3000s", tail);
    kill((pid_t)curl_pid, SIGTERM);
    pclose(f);
    fg_buf_free(&b);
}
END_TEST

START_TEST(changes_refusals) {
    th_resp_t r;
    ck_assert_int_eq(get("/v1/projects/shop/changes", other, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get("/v1/projects/shop/changes", NULL, &r), 401);
    th_resp_free(&r);
    const char *bad[] = {"kinds=Deployment", "kinds=App,App", "kinds=", "app=Web"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/projects/shop/changes?%s", bad[i]);
        ck_assert_msg(get(path, dev, &r) == 422, "%s -> %ld", bad[i], r.status);
        th_resp_free(&r);
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/shop/changes", (unsigned)port);
    char *auth = fg_xasprintf("Authorization: Bearer %s", dev);
    const char *hdrs[] = {auth, "Last-Event-ID: yesterday", NULL};
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, &r), 0);
    ck_assert_int_eq(r.status, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "Last-Event-ID"));
    th_resp_free(&r);
    free(auth);
}
END_TEST

START_TEST(changes_drain_ends_streams_cleanly) {
    FILE *f = curl_stream(port, dev, NULL, 20);
    ts_sleep_ms(800);
    int status = th_daemon_stop(daemon_pid, SIGTERM, 10000);
    daemon_pid = 0;
    ck_assert_int_eq(status, 0);
    char *body = read_all(f);
    int curl_rc = pclose(f);
    /* the body ended as a chunked body ends (curl exits 0, not 18: "transfer closed") */
    ck_assert_msg(WIFEXITED(curl_rc) && WEXITSTATUS(curl_rc) == 0, "curl %d: %.300s",
                  WEXITSTATUS(curl_rc), body);
    ck_assert(strncmp(body, "retry: 3000\n\n", 13) == 0);
    free(body);
}
END_TEST

/* The value of a metric line of /metrics (-1 when absent). */
static double metric(const char *line_prefix) {
    th_resp_t r;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", (unsigned)port);
    ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
    double v = -1;
    char *want = fg_xasprintf("\n%s", line_prefix);
    const char *p = strstr(r.body, want);
    if (p != NULL)
        v = strtod(p + strlen(want), NULL);
    free(want);
    th_resp_free(&r);
    return v;
}

START_TEST(changes_slow_consumer_dropped) {
    /* an app whose every change is a few KiB */
    char body[8192];
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":"
                                "{\"name\":\"slow\",\"labels\":{");
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s\"label-%02d\":\"%.60s\"", i ? "," : "",
                              i, "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
    snprintf(body + n, sizeof body - n,
             "}},\"spec\":{\"replicas\":0,\"selector\":{\"matchLabels\":{\"run\":\"slow\"}},"
             "\"template\":{\"metadata\":{\"labels\":{\"run\":\"slow\"}},\"spec\":{\"containers\":"
             "[{\"name\":\"c\",\"image\":\"nginx:1\"}]}}}}");
    ks_post(0, "/apis/apps/v1/namespaces/shop/deployments", body);
    /* a client that asks and never reads (a small receive window) */
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
    ck_assert_int_ge(fd, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small); /* before connect: the window */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char *req = fg_xasprintf("GET /v1/projects/shop/changes?app=slow HTTP/1.1\r\nHost: t\r\n"
                             "Authorization: Bearer %s\r\n\r\n",
                             dev);
    ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    free(req);
    ts_sleep_ms(500);
    ck_assert_int_eq((int)metric("fleetgate_streams_open "), 1);
    for (int i = 1; i <= 8000 && (i % 200 != 0 || metric("fleetgate_streams_open ") != 0); i++) {
        char patch[96];
        snprintf(patch, sizeof patch, "{\"metadata\":{\"labels\":{\"seq\":\"%d\"}}}", i);
        ck_assert_int_eq(
            tk_call(&ks, 0, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/slow", patch, NULL),
            200);
    }
    /* what waits for it is never taken: dropped after streams.stall_timeout_s (2 s), while
     * fleetgate keeps nothing more for it. Whether its buffer is full when the changes stop
     * (the last frame may fit) does not matter: bytes waiting untaken are the rule */
    for (int waited = 0; metric("fleetgate_streams_open ") != 0; waited += 200) {
        if (waited >= 15000) {
            redisReply *x = redisCommand(rc, "XLEN fg:chg:shop");
            redisReply *m = redisCommand(rc, "MEMORY USAGE fg:chg:shop");
            static char got[1 << 20];
            size_t gn = th_read_all(fd, got, sizeof got, 1000);
            ck_abort_msg("the slow client was never dropped (stream %lld entries, %lld bytes; "
                         "dropped stalled %g, slow-consumer %g; open %g; %zu bytes readable: "
                         "%.600s)",
                         x->integer, m->integer,
                         metric("fleetgate_streams_dropped_total{end=\"stalled\"} "),
                         metric("fleetgate_streams_dropped_total{end=\"slow-consumer\"} "),
                         metric("fleetgate_streams_open "), gn, got);
        }
        ts_sleep_ms(200);
    }
    /* dropped for the stall (its buffer full for 2 s) or for falling a ring (4,096 events)
     * behind, whichever came first */
    double stalled = metric("fleetgate_streams_dropped_total{end=\"stalled\"} "),
           lapped = metric("fleetgate_streams_dropped_total{end=\"slow-consumer\"} ");
    ck_assert_msg(stalled >= 1 || lapped >= 1, "stalled %g, slow-consumer %g", stalled, lapped);
    close(fd);
}
END_TEST

/* ---- CORS ---------------------------------------------------------------------------- */

static long raw(const char *method, const char *path, const char *const *hdrs, th_resp_t *r) {
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    ck_assert_int_eq(th_request(method, url, hdrs, NULL, -1, 0, r), 0);
    return r->status;
}

START_TEST(cors_preflight_and_exposed_headers) {
    th_resp_t r;
    char v[512];
    const char *pre[] = {"Origin: http://localhost:5173", "Access-Control-Request-Method: GET",
                         "Access-Control-Request-Headers: authorization, last-event-id", NULL};
    ck_assert_int_eq(raw("OPTIONS", "/v1/projects/shop/events", pre, &r), 204);
    ck_assert_str_eq(th_header(&r, "Access-Control-Allow-Origin", v, sizeof v),
                     "http://localhost:5173");
    ck_assert_ptr_nonnull(
        strstr(th_header(&r, "Access-Control-Allow-Methods", v, sizeof v), "GET"));
    th_header(&r, "Access-Control-Allow-Headers", v, sizeof v);
    ck_assert_ptr_nonnull(strstr(v, "Authorization"));
    ck_assert_ptr_nonnull(strstr(v, "Last-Event-ID"));
    ck_assert_ptr_nonnull(strstr(v, "If-None-Match"));
    ck_assert_str_eq(th_header(&r, "Access-Control-Max-Age", v, sizeof v), "600");
    ck_assert_str_eq(th_header(&r, "Vary", v, sizeof v), "Origin");
    th_resp_free(&r);
    /* a write route's preflight lists its methods */
    ck_assert_int_eq(raw("OPTIONS", "/v1/projects/shop/apps", pre, &r), 204);
    th_header(&r, "Access-Control-Allow-Methods", v, sizeof v);
    ck_assert_ptr_nonnull(strstr(v, "POST"));
    th_resp_free(&r);
    /* an origin not in cors.allowed_origins: refused, and no CORS header */
    const char *evil[] = {"Origin: http://evil.example", "Access-Control-Request-Method: GET",
                          NULL};
    ck_assert_int_eq(raw("OPTIONS", "/v1/projects/shop/events", evil, &r), 403);
    ck_assert_ptr_null(th_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    ck_assert_ptr_nonnull(strstr(r.body, "evil.example"));
    th_resp_free(&r);
    /* an unknown path stays a 404 */
    ck_assert_int_eq(raw("OPTIONS", "/v1/nothing-here", pre, &r), 404);
    th_resp_free(&r);
    /* a GET from the allowed origin can read what it needs; the answer is the contract's */
    char *auth = fg_xasprintf("Authorization: Bearer %s", dev);
    const char *get_hdrs[] = {auth, "Origin: http://localhost:5173", NULL};
    ck_assert_int_eq(raw("GET", "/v1/projects/shop/events", get_hdrs, &r), 200);
    ck_assert_str_eq(th_header(&r, "Access-Control-Allow-Origin", v, sizeof v),
                     "http://localhost:5173");
    th_header(&r, "Access-Control-Expose-Headers", v, sizeof v);
    const char *exposed[] = {"ETag", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
                             "X-Request-Id"};
    for (size_t i = 0; i < sizeof exposed / sizeof exposed[0]; i++)
        ck_assert_msg(strstr(v, exposed[i]) != NULL, "%s not exposed: %s", exposed[i], v);
    char err[4096];
    ck_assert_msg(contract_check_headers("GET", "/v1/projects/shop/events", 200, r.headers, r.body,
                                         r.len, err, sizeof err) == CONTRACT_VALID,
                  "%s", err);
    th_resp_free(&r);
    /* another origin's GET gets its answer but no CORS header (the browser withholds it) */
    const char *get_evil[] = {auth, "Origin: http://evil.example", NULL};
    ck_assert_int_eq(raw("GET", "/v1/projects/shop/events", get_evil, &r), 200);
    ck_assert_ptr_null(th_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    th_resp_free(&r);
    free(auth);
    /* the change stream's answer carries them too (an EventSource on another origin) */
    char *cmd = fg_xasprintf("curl -s -i -N -m 1 -H 'Authorization: Bearer %s' "
                             "-H 'Origin: http://localhost:5173' "
                             "'http://127.0.0.1:%u/v1/projects/shop/changes'",
                             dev, (unsigned)port);
    FILE *f = popen(cmd, "r");
    free(cmd);
    char *body = read_all(f);
    pclose(f);
    ck_assert_msg(strstr(body, "Access-Control-Allow-Origin: http://localhost:5173") != NULL,
                  "%.500s", body);
    ck_assert_ptr_nonnull(strstr(body, "text/event-stream"));
    free(body);
}
END_TEST

static Suite *insights_suite(void) {
    Suite *s = suite_create("insights");
    TCase *tc = tcase_create("events");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, events_outlive_the_cluster_ttl_and_fold);
    tcase_add_test(tc, events_every_filter);
    tcase_add_test(tc, events_paging_while_new_events_arrive);
    tcase_add_test(tc, events_retention_by_count_per_project);
    tcase_add_test(tc, events_retention_by_age_and_idempotence);
    tcase_add_test(tc, events_refusals);
    suite_add_tcase(s, tc);
    TCase *ch = tcase_create("changes");
    tcase_add_checked_fixture(ch, setup, teardown);
    tcase_set_timeout(ch, 180);
    tcase_add_test(ch, changes_exactly_once_in_order_across_replicas_and_reconnects);
    tcase_add_test(ch, changes_reset_keepalives_and_contract);
    tcase_add_test(ch, changes_reset_after_flushall);
    tcase_add_test(ch, changes_connected_client_reset_by_flushall);
    tcase_add_test(ch, changes_refusals);
    tcase_add_test(ch, changes_drain_ends_streams_cleanly);
    tcase_add_test(ch, cors_preflight_and_exposed_headers);
    tcase_add_test(ch, changes_slow_consumer_dropped);
    suite_add_tcase(s, ch);
    return s;
}

int main(void) {
    return tm_run(insights_suite());
}
