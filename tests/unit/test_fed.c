/* Unit tests of fed/place.c: placement over tables of clusters. Each case is a fleet (clusters
 * with zones, labels, health and nodes), a request, and the replicas each cluster must get (or
 * the filter that must refuse it); the explanation is checked against what was decided. */
#include "fleetgate/fed.h"

#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define GI (1024LL * 1024 * 1024)

/* A fleet of up to 6 clusters, each with `nodes` identical nodes of `cpu` millicores, `mem`
 * bytes and 110 pod slots free; requested is what its pods take of allocatable. */
typedef struct {
    const char *name, *zone, *label;
    bool reachable, synced;
    int64_t staleness_ms;
    int nodes;
    int64_t cpu, mem;
    int64_t requested_cpu;
} spec_t;

#define UP(n, z, l, nodes, cpu, mem, req)                                                          \
    { n, z, l, true, true, 0, nodes, cpu, mem, req }

static fg_fed_cluster_t cl[6];
static fg_fed_amount_t node_pool[6][8];
static const char *labels[6][1];

static size_t build(const spec_t *s, size_t n) {
    memset(cl, 0, sizeof cl);
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < s[i].nodes; j++)
            node_pool[i][j] = (fg_fed_amount_t){s[i].cpu, s[i].mem, 110};
        labels[i][0] = s[i].label;
        cl[i] = (fg_fed_cluster_t){
            .name = s[i].name,
            .zone = s[i].zone,
            .labels = labels[i],
            .nlabels = s[i].label ? 1 : 0,
            .reachable = s[i].reachable,
            .synced = s[i].synced,
            .staleness_ms = s[i].staleness_ms,
            .nodes = node_pool[i],
            .nnodes = (size_t)s[i].nodes,
            .allocatable = {s[i].cpu * s[i].nodes + s[i].requested_cpu, s[i].mem * s[i].nodes,
                            110 * s[i].nodes},
            .requested = {s[i].requested_cpu, 0, 0},
        };
    }
    return n;
}

static const spec_t fleet3[] = {
    UP("east-a", "zone-a", "env=prod", 4, 4000, 16 * GI, 0),
    UP("east-b", "zone-a", "env=prod", 4, 4000, 16 * GI, 8000),
    UP("west-a", "zone-b", "env=dev", 4, 4000, 16 * GI, 0),
};

static const struct {
    const char *what;
    const spec_t *fleet;
    size_t nfleet;
    int64_t replicas, cpu;
    fg_fed_policy_t policy;
    const char *zones[2];
    const char *selector;
    int rc;
    int64_t want[6]; /* replicas per cluster */
} cases[] = {
    {"spread_divides_over_zones_first_choice_each",
     fleet3,
     3,
     6,
     500,
     FG_FED_SPREAD,
     {0},
     NULL,
     FG_OK,
     {3, 0, 3}},
    {"spread_odd_remainder_to_best_zone",
     fleet3,
     3,
     5,
     500,
     FG_FED_SPREAD,
     {0},
     NULL,
     FG_OK,
     {3, 0, 2}},
    {"pack_one_cluster_that_fits_all", fleet3, 3, 6, 500, FG_FED_PACK, {0}, NULL, FG_OK, {6, 0, 0}},
    {"pack_spills_when_none_fits_all",
     fleet3,
     3,
     40,
     500,
     FG_FED_PACK,
     {0},
     NULL,
     FG_OK,
     {32, 0, 8}},
    {"zones_filter_keeps_only_listed",
     fleet3,
     3,
     4,
     500,
     FG_FED_SPREAD,
     {"zone-b"},
     NULL,
     FG_OK,
     {0, 0, 4}},
    {"selector_filters_on_config_labels",
     fleet3,
     3,
     4,
     500,
     FG_FED_SPREAD,
     {0},
     "env=prod",
     FG_OK,
     {4, 0, 0}},
    {"spread_zone_full_spills_to_its_second_cluster",
     fleet3,
     3,
     20,
     1000,
     FG_FED_SPREAD,
     {0},
     NULL,
     FG_OK,
     {10, 0, 10}},
    {"spread_zone_over_capacity_spills",
     fleet3,
     3,
     40,
     1000,
     FG_FED_SPREAD,
     {0},
     NULL,
     FG_OK,
     {16, 8, 16}},
    {"too_many_replicas_fail", fleet3, 3, 60, 1000, FG_FED_SPREAD, {0}, NULL, FG_ENOENT, {0, 0, 0}},
    {"no_cluster_matches_fails",
     fleet3,
     3,
     1,
     500,
     FG_FED_SPREAD,
     {0},
     "gpu=true",
     FG_ENOENT,
     {0, 0, 0}},
    {"zero_replicas_lives_on_the_best",
     fleet3,
     3,
     0,
     500,
     FG_FED_SPREAD,
     {0},
     NULL,
     FG_OK,
     {0, 0, 0}},
};

static void place_case(size_t i, fg_fed_placement_t *p) {
    size_t n = build(cases[i].fleet, cases[i].nfleet);
    const char *sel[1] = {cases[i].selector};
    fg_fed_request_t req = {
        .replicas = cases[i].replicas,
        .per_replica = {cases[i].cpu, GI, 1},
        .policy = cases[i].policy,
        .zones = cases[i].zones,
        .nzones = cases[i].zones[0] ? 1 : 0,
        .selector = sel,
        .nselector = cases[i].selector ? 1 : 0,
        .tier = "OnDemand",
    };
    int rc = fg_fed_place(cl, n, &req, p);
    ck_assert_msg(rc == cases[i].rc, "%s: rc %d (%s)", cases[i].what, rc, p->failure);
}

START_TEST(placement_table) {
    fg_fed_placement_t p;
    place_case((size_t)_i, &p);
    int64_t sum = 0;
    for (size_t c = 0; c < p.nverdicts; c++) {
        ck_assert_msg(p.verdicts[c].replicas == cases[_i].want[c], "%s: %s got %lld, want %lld",
                      cases[_i].what, p.verdicts[c].cluster->name,
                      (long long)p.verdicts[c].replicas, (long long)cases[_i].want[c]);
        sum += p.verdicts[c].replicas;
    }
    if (cases[_i].rc == FG_OK)
        ck_assert_int_eq(sum, cases[_i].replicas);
    else
        ck_assert_msg(p.failure[0] != '\0', "%s: a failure says why", cases[_i].what);
}
END_TEST

START_TEST(zero_replicas_still_choose_one_cluster) {
    fg_fed_placement_t p;
    place_case(10, &p);
    ck_assert_int_eq(p.nchosen, 1);
    ck_assert(p.verdicts[0].chosen); /* east-a: nothing requested, fresh */
}
END_TEST

/* Every filter refuses with its own name and a reason naming what it compared. */
START_TEST(filters_refuse_in_order_and_say_why) {
    static const spec_t fleet[] = {
        UP("a", "z1", "env=prod", 2, 4000, 8 * GI, 0),
        UP("b", "z2", "env=prod", 2, 4000, 8 * GI, 0),
        UP("c", "z1", "env=dev", 2, 4000, 8 * GI, 0),
        {"d", "z1", "env=prod", false, true, 0, 2, 4000, 8 * GI, 0},
        {"e", "z1", "env=prod", true, false, 0, 2, 4000, 8 * GI, 0},
        UP("f", "z1", "env=prod", 2, 100, 8 * GI, 0),
    };
    size_t n = build(fleet, 6);
    const char *zones[] = {"z1"}, *sel[] = {"env=prod"};
    fg_fed_request_t req = {.replicas = 2,
                            .per_replica = {500, GI, 1},
                            .zones = zones,
                            .nzones = 1,
                            .selector = sel,
                            .nselector = 1};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, n, &req, &p), FG_OK);
    static const struct {
        fg_fed_filter_t f;
        const char *name, *reason;
    } want[] = {
        {FG_FED_FILTER_NONE, "", ""},
        {FG_FED_FILTER_ZONE, "Zone", "zone z2 is not in placement.zones"},
        {FG_FED_FILTER_SELECTOR, "ClusterSelector", "the cluster has no label env=prod"},
        {FG_FED_FILTER_HEALTH, "Health", "the cluster cannot be reached"},
        {FG_FED_FILTER_SYNC, "Sync", "its nodes and pods are not synced yet"},
        {FG_FED_FILTER_CAPACITY, "Capacity",
         "no node has room for one replica (cpu 500m, memory 1073741824 bytes) among 2 ready "
         "nodes"},
    };
    for (size_t i = 0; i < 6; i++) {
        ck_assert_int_eq(p.verdicts[i].filter, want[i].f);
        ck_assert_str_eq(fg_fed_filter_name(p.verdicts[i].filter), want[i].name);
        ck_assert_str_eq(p.verdicts[i].reason, want[i].reason);
    }
    ck_assert_int_eq(p.verdicts[0].replicas, 2);
}
END_TEST

START_TEST(nothing_eligible_counts_refusals) {
    static const spec_t fleet[] = {
        {"a", "z1", NULL, false, true, 0, 1, 4000, 8 * GI, 0},
        {"b", "z2", NULL, false, true, 0, 1, 4000, 8 * GI, 0},
        UP("c", "z3", NULL, 1, 4000, 8 * GI, 0),
    };
    size_t n = build(fleet, 3);
    const char *zones[] = {"z1", "z2"};
    fg_fed_request_t req = {.replicas = 1, .per_replica = {100, 0, 1}, .zones = zones, .nzones = 2};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, n, &req, &p), FG_ENOENT);
    ck_assert_str_eq(p.failure,
                     "no member cluster passes the filters (3 clusters: 1 refused by Zone, 2 "
                     "refused by Health)");
}
END_TEST

/* Equal clusters: the name decides, whatever order the table is in. */
START_TEST(ties_go_to_the_name) {
    static const spec_t fwd[] = {UP("m", "z", NULL, 2, 4000, 8 * GI, 0),
                                 UP("k", "z", NULL, 2, 4000, 8 * GI, 0),
                                 UP("x", "z", NULL, 2, 4000, 8 * GI, 0)};
    fg_fed_request_t req = {.replicas = 3, .per_replica = {100, 0, 1}, .policy = FG_FED_PACK};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, build(fwd, 3), &req, &p), FG_OK);
    ck_assert_int_eq(p.verdicts[1].replicas, 3); /* k */
    req.policy = FG_FED_SPREAD;
    ck_assert_int_eq(fg_fed_place(cl, build(fwd, 3), &req, &p), FG_OK);
    ck_assert_int_eq(p.verdicts[1].replicas, 3); /* one zone: its first choice, k */
}
END_TEST

/* A stale cache lowers SyncLag, and a fuller cluster LeastRequested; both move the choice. */
START_TEST(scores_rank_fresher_and_emptier_first) {
    static const spec_t fleet[] = {
        {"a", "z", NULL, true, true, 35000, 2, 4000, 8 * GI, 0},
        UP("b", "z", NULL, 2, 4000, 8 * GI, 0),
    };
    fg_fed_request_t req = {.replicas = 1, .per_replica = {100, 0, 1}, .policy = FG_FED_PACK};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, build(fleet, 2), &req, &p), FG_OK);
    ck_assert_int_eq(p.verdicts[0].scores[FG_FED_SCORE_SYNC_LAG], 50);
    ck_assert_int_eq(p.verdicts[1].scores[FG_FED_SCORE_SYNC_LAG], 100);
    ck_assert_int_eq(p.verdicts[1].replicas, 1);
    ck_assert_int_eq(p.verdicts[0].scores[FG_FED_SCORE_LEAST_REQUESTED], 100);
}
END_TEST

START_TEST(explanation_carries_every_verdict) {
    fg_fed_placement_t p;
    place_case(5, &p); /* selector env=prod: west-a refused */
    json_t *e = fg_fed_explain(&p, 1763820187000);
    ck_assert_str_eq(json_string_value(json_object_get(e, "policy")), "Spread");
    ck_assert_str_eq(json_string_value(json_object_get(e, "tier")), "OnDemand");
    ck_assert_str_eq(json_string_value(json_object_get(e, "decidedAt")),
                     "2025-11-22T14:03:07.000Z");
    json_t *c = json_object_get(e, "clusters");
    ck_assert_int_eq(json_array_size(c), 3);
    json_t *west = json_array_get(c, 2);
    ck_assert_str_eq(json_string_value(json_object_get(west, "filter")), "ClusterSelector");
    ck_assert(json_is_false(json_object_get(west, "eligible")));
    json_t *east = json_array_get(c, 0);
    ck_assert_int_eq(json_array_size(json_object_get(east, "scores")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(east, "replicas")), 4);
    ck_assert(json_is_true(json_object_get(east, "chosen")));
    json_decref(e);
}
END_TEST

START_TEST(bad_requests_refused) {
    fg_fed_request_t req = {.replicas = -1};
    fg_fed_placement_t p;
    ck_assert_int_eq(fg_fed_place(cl, 0, &req, &p), FG_EINVAL);
    req.replicas = 1;
    ck_assert_int_eq(fg_fed_place(cl, FG_FED_MAX_CLUSTERS + 1, &req, &p), FG_EINVAL);
    ck_assert_int_eq(fg_fed_place(cl, 0, &req, &p), FG_ENOENT); /* no clusters at all */
}
END_TEST

static Suite *fed_suite(void) {
    Suite *s = suite_create("fed");
    TCase *tc = tcase_create("place");
    tcase_add_loop_test(tc, placement_table, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, zero_replicas_still_choose_one_cluster);
    tcase_add_test(tc, filters_refuse_in_order_and_say_why);
    tcase_add_test(tc, nothing_eligible_counts_refusals);
    tcase_add_test(tc, ties_go_to_the_name);
    tcase_add_test(tc, scores_rank_fresher_and_emptier_first);
    tcase_add_test(tc, explanation_carries_every_verdict);
    tcase_add_test(tc, bad_requests_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(fed_suite());
}
