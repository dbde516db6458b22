/* Integration tests of fed/registry.c: the member clusters as placement sees them, read from a
 * private redis-server filled as the informers fill it (tests/support/testcache.h): health and
 * sync state, nodes' allocatable minus what the cached pods on them request, and placement over
 * what was read. */
#include "fleetgate/cache.h"
#include "fleetgate/fed.h"

#include "testcache.h"
#include "testmain.h"
#include "testredis.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tr_redis_t srv;
static tc_t tc;

static void setup(void) {
    ck_assert_int_eq(tr_redis_start(&srv), 0);
    ck_assert_int_eq(tc_open(&tc, srv.url), 0);
}

static void teardown(void) {
    tc_close(&tc);
    tr_redis_stop(&srv);
}

static void put_node(const char *cluster, const char *name, bool ready, const char *cpu_milli,
                     const char *mem) {
    char json[512];
    snprintf(
        json, sizeof json,
        "{\"name\":\"%s\",\"cluster\":\"%s\",\"ready\":%s,\"allocatableUnits\":{\"cpuMilli\":%s,"
        "\"memoryBytes\":%s,\"gpu\":0,\"pods\":110}}",
        name, cluster, ready ? "true" : "false", cpu_milli, mem);
    ck_assert_int_eq(tc_put(&tc, "node", cluster, "_", name, json), 0);
}

static void put_pod(const char *cluster, const char *project, const char *name, const char *node,
                    const char *phase, int cpu_milli) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"name\":\"%s\",\"project\":\"%s\",\"cluster\":\"%s\",\"node\":\"%s\",\"phase\":"
             "\"%s\",\"requestUnits\":{\"cpuMilli\":%d,\"memoryBytes\":1073741824}}",
             name, project, cluster, node, phase, cpu_milli);
    ck_assert_int_eq(tc_put(&tc, "pod", cluster, project, name, json), 0);
}

static fg_config_t *config(void) {
    const char *text =
        "{\"clusters\": [{\"name\": \"east\", \"zone\": \"z1\", \"url\": \"http://127.0.0.1:1\", "
        "\"labels\": [\"env=prod\"]}, {\"name\": \"west\", \"zone\": \"z2\", \"url\": "
        "\"http://127.0.0.1:2\"}, {\"name\": \"gone\", \"zone\": \"z2\", \"url\": "
        "\"http://127.0.0.1:3\"}]}";
    fg_config_t *cfg = NULL;
    fg_buf_t errs;
    fg_buf_init(&errs, 4096);
    ck_assert_int_eq(fg_config_load_text("t.json", text, strlen(text), &cfg, &errs), FG_OK);
    fg_buf_free(&errs);
    return cfg;
}

/* east: 2 ready nodes of 4 cores (one cordoned-by-not-ready node left out), pods on them;
 * west: synced, reachable, one node; gone: unreachable. */
static void fill(int64_t now) {
    tc_cluster(&tc, "east", "z1", "Healthy", now - 1000, "");
    tc_sync_all(&tc, "east", "10", now);
    put_node("east", "n1", true, "4000", "8589934592");
    put_node("east", "n2", true, "4000", "8589934592");
    put_node("east", "n3", false, "4000", "8589934592");
    put_pod("east", "shop", "a", "n1", "Running", 1500);
    put_pod("east", "shop", "b", "n1", "Pending", 500);
    put_pod("east", "ops", "c", "n2", "Running", 1000);
    put_pod("east", "ops", "done", "n2", "Succeeded", 3000); /* finished: holds nothing */
    tc_cluster(&tc, "west", "z2", "Healthy", now - 30000, "");
    tc_sync_all(&tc, "west", "5", now);
    put_node("west", "w1", true, "2000", "4294967296");
    tc_cluster(&tc, "gone", "z2", "Unreachable", now - 600000, "connection refused");
    tc_sync_all(&tc, "gone", "7", now);
}

START_TEST(registry_reads_capacity_minus_requests) {
    int64_t now = fg_wall_ms();
    fill(now);
    fg_config_t *cfg = config();
    fg_redis_t *r = NULL;
    ck_assert_int_eq(fg_redis_new(&r, srv.url, 1, 1000), FG_OK);
    fg_fed_registry_t *reg = NULL;
    char why[256] = "";
    ck_assert_int_eq(fg_fed_registry_load(cfg, r, now, &reg, why, sizeof why), FG_OK);
    size_t n;
    const fg_fed_cluster_t *cl = fg_fed_registry_clusters(reg, &n);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(cl[0].name, "east");
    ck_assert(cl[0].reachable && cl[0].synced);
    ck_assert_int_eq(cl[0].nlabels, 1);
    ck_assert_str_eq(cl[0].labels[0], "env=prod");
    ck_assert_int_eq(cl[0].nnodes, 2); /* n3 is not ready */
    ck_assert_int_eq(cl[0].requested.cpu_milli, 3000);
    ck_assert_int_eq(cl[0].allocatable.cpu_milli, 12000);
    int64_t free_n1 = cl[0].nodes[0].cpu_milli, free_n2 = cl[0].nodes[1].cpu_milli;
    ck_assert_int_eq(free_n1 + free_n2, 5000); /* (4000-2000) + (4000-1000) */
    ck_assert_int_eq(cl[0].nodes[0].pods + cl[0].nodes[1].pods, 220 - 3);
    ck_assert(cl[1].staleness_ms >= 30000);
    ck_assert(!cl[2].reachable);

    /* Placement over what was read: 1-core replicas fit 5 in east, 2 in west, none in gone. */
    fg_fed_request_t req = {.replicas = 8, .per_replica = {1000, 0, 1}};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, n, &req, &p), FG_ENOENT); /* only 5 + 2 fit */
    ck_assert_str_eq(p.failure, "only 7 of 8 replicas fit in the 2 eligible clusters");
    req.replicas = 7; /* 4 a zone, west's fourth spills over to east */
    ck_assert_int_eq(fg_fed_place(cl, n, &req, &p), FG_OK);
    ck_assert_int_eq(p.verdicts[0].replicas, 5);
    ck_assert_int_eq(p.verdicts[1].replicas, 2);
    ck_assert_int_eq(p.verdicts[2].filter, FG_FED_FILTER_HEALTH);
    fg_fed_registry_release(reg);
    fg_redis_free(r);
    fg_config_free(cfg);
}
END_TEST

/* The shared snapshot is reused within its age and read again when asked for a fresh one. */
START_TEST(snapshot_shared_then_refreshed) {
    int64_t now = fg_wall_ms();
    fill(now);
    fg_config_t *cfg = config();
    fg_redis_t *r = NULL;
    ck_assert_int_eq(fg_redis_new(&r, srv.url, 1, 1000), FG_OK);
    fg_fed_t *fed = NULL;
    ck_assert_int_eq(fg_fed_new(&fed, cfg, r, 60000), FG_OK);
    const fg_fed_registry_t *a = NULL, *b = NULL, *c = NULL;
    char why[256];
    ck_assert_int_eq(fg_fed_registry_get(fed, false, &a, why, sizeof why), FG_OK);
    put_pod("east", "shop", "d", "n2", "Running", 2000);
    ck_assert_int_eq(fg_fed_registry_get(fed, false, &b, why, sizeof why), FG_OK);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(fg_fed_registry_get(fed, true, &c, why, sizeof why), FG_OK);
    ck_assert_ptr_ne(a, c);
    size_t n;
    ck_assert_int_eq(fg_fed_registry_clusters(c, &n)[0].requested.cpu_milli, 5000);
    fg_fed_registry_release(a);
    fg_fed_registry_release(b);
    fg_fed_registry_release(c);
    /* Redis gone: the snapshot at hand still answers; none at hand is FG_EIO. */
    tr_redis_stop(&srv);
    ck_assert_int_eq(fg_fed_registry_get(fed, true, &a, why, sizeof why), FG_OK);
    fg_fed_registry_release(a);
    fg_fed_free(fed);
    ck_assert_int_eq(fg_fed_new(&fed, cfg, r, 60000), FG_OK);
    ck_assert_int_eq(fg_fed_registry_get(fed, false, &a, why, sizeof why), FG_EIO);
    fg_fed_free(fed);
    fg_redis_free(r);
    fg_config_free(cfg);
    ck_assert_int_eq(tr_redis_start(&srv), 0); /* for teardown */
}
END_TEST

/* A snapshot in use past 3/4 of its age is read again in the background, before any request
 * would have to read it itself. */
START_TEST(snapshot_read_ahead_in_the_background) {
    fill(fg_wall_ms());
    fg_config_t *cfg = config();
    fg_redis_t *r = NULL;
    ck_assert_int_eq(fg_redis_new(&r, srv.url, 2, 1000), FG_OK);
    fg_fed_t *fed = NULL;
    ck_assert_int_eq(fg_fed_new(&fed, cfg, r, 4000), FG_OK);
    const fg_fed_registry_t *a = NULL, *b = NULL;
    char why[256];
    ck_assert_int_eq(fg_fed_registry_get(fed, false, &a, why, sizeof why), FG_OK);
    put_pod("east", "shop", "d", "n2", "Running", 2000);
    nanosleep(&(struct timespec){3, 100000000L}, NULL); /* past 3/4 of its age, within it */
    ck_assert_int_eq(fg_fed_registry_get(fed, false, &b, why, sizeof why), FG_OK);
    ck_assert_ptr_eq(a, b); /* answered at once; the next one is on its way */
    for (int i = 0; i < 70 && b == a; i++) {
        fg_fed_registry_release(b);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
        ck_assert_int_eq(fg_fed_registry_get(fed, false, &b, why, sizeof why), FG_OK);
    }
    ck_assert_ptr_ne(a, b); /* within 0.7 s more: before the first one's age ran out (4 s) */
    size_t n;
    ck_assert_int_eq(fg_fed_registry_clusters(b, &n)[0].requested.cpu_milli, 5000);
    fg_fed_registry_release(b);
    fg_fed_registry_release(a);
    fg_fed_free(fed);
    fg_redis_free(r);
    fg_config_free(cfg);
}
END_TEST

static Suite *fed_registry_suite(void) {
    Suite *s = suite_create("fed_registry");
    TCase *tc_ = tcase_create("registry");
    tcase_add_checked_fixture(tc_, setup, teardown);
    tcase_set_timeout(tc_, 30);
    tcase_add_test(tc_, registry_reads_capacity_minus_requests);
    tcase_add_test(tc_, snapshot_shared_then_refreshed);
    tcase_add_test(tc_, snapshot_read_ahead_in_the_background);
    suite_add_tcase(s, tc_);
    return s;
}

int main(void) {
    return tm_run(fed_registry_suite());
}
