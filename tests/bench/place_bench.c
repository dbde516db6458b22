/* tests/bench/place_bench.c: placement of one app over 64 member clusters of 3,000 nodes each
 * (the goal: under 1 ms), as a write handler does it with a registry snapshot in hand.
 *
 * Three cases, each placed RUNS times, printing the median and the 99th percentile:
 *   typical  6 replicas of 500m / 512Mi, Spread over 4 zones, nodes with room;
 *   crowded  the same over a fleet whose nodes are 95-98% full (most nodes hold nothing: capacity
 *            is counted over many nodes before a cluster holds its share);
 *   worst    600 replicas of 4 cores / 16Gi that no cluster holds (every node of every cluster
 *            is counted, then the placement fails).
 * Usage: place_bench [RUNS] (default 1000). Nodes' free capacity comes from a fixed seed. */
#include "fleetgate/fed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCLUSTERS 64
#define NNODES    3000
#define GI        (1024LL * 1024 * 1024)

static fg_fed_cluster_t cl[NCLUSTERS];
static char names[NCLUSTERS][16], zones[NCLUSTERS][16], labels[NCLUSTERS][16];
static const char *label_ptr[NCLUSTERS][1];

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* full_pct: how much of each node is requested already (with some spread). */
static void fleet(int full_pct) {
    for (int i = 0; i < NCLUSTERS; i++) {
        snprintf(names[i], sizeof names[i], "c%02d", i);
        snprintf(zones[i], sizeof zones[i], "zone-%d", i % 4);
        snprintf(labels[i], sizeof labels[i], "env=%s", i % 2 ? "prod" : "dev");
        label_ptr[i][0] = labels[i];
        free(cl[i].nodes);
        fg_fed_amount_t *nodes = calloc(NNODES, sizeof *nodes);
        fg_fed_amount_t alloc = {0}, req = {0};
        for (int n = 0; n < NNODES; n++) {
            int64_t cpu = 16000, mem = 64 * GI;
            int pct = full_pct + (int)(rnd() % 4);
            int64_t used_cpu = cpu * (pct > 100 ? 100 : pct) / 100;
            int64_t used_mem = mem * (pct > 100 ? 100 : pct) / 100;
            nodes[n] = (fg_fed_amount_t){cpu - used_cpu, mem - used_mem, 110 - 30};
            alloc.cpu_milli += cpu;
            alloc.memory_bytes += mem;
            req.cpu_milli += used_cpu;
            req.memory_bytes += used_mem;
        }
        cl[i] = (fg_fed_cluster_t){.name = names[i],
                                   .zone = zones[i],
                                   .labels = label_ptr[i],
                                   .nlabels = 1,
                                   .reachable = true,
                                   .synced = true,
                                   .staleness_ms = (int64_t)(rnd() % 20000),
                                   .nodes = nodes,
                                   .nnodes = NNODES,
                                   .allocatable = alloc,
                                   .requested = req};
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run(const char *what, const fg_fed_request_t *req, int runs, int want_rc) {
    uint64_t *ns = calloc((size_t)runs, sizeof *ns);
    fg_fed_placement_t p;
    int rc = 0;
    for (int r = 0; r < runs; r++) {
        uint64_t t0 = fg_now_ns();
        rc = fg_fed_place(cl, NCLUSTERS, req, &p);
        ns[r] = fg_now_ns() - t0;
    }
    qsort(ns, (size_t)runs, sizeof *ns, cmp_u64);
    printf("%-8s %4lld replicas  rc=%-2d chosen=%-2zu  median %7.1f us  p99 %7.1f us  max %7.1f "
           "us%s\n",
           what, (long long)req->replicas, rc, p.nchosen, ns[runs / 2] / 1e3,
           ns[runs * 99 / 100] / 1e3, ns[runs - 1] / 1e3, rc == want_rc ? "" : "  (UNEXPECTED rc)");
    free(ns);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1000;
    if (runs < 1)
        runs = 1;
    printf("placement over %d clusters x %d nodes (%d nodes), %d runs per case\n", NCLUSTERS,
           NNODES, NCLUSTERS * NNODES, runs);
    fg_fed_request_t req = {.replicas = 6,
                            .per_replica = {500, GI / 2, 1},
                            .policy = FG_FED_SPREAD,
                            .tier = "OnDemand"};
    fleet(40);
    run("typical", &req, runs, FG_OK);
    req.policy = FG_FED_PACK;
    run("pack", &req, runs, FG_OK);
    req.policy = FG_FED_SPREAD;
    fleet(95);
    req.replicas = 300;
    run("crowded", &req, runs, FG_OK);
    req.replicas = 600;
    req.per_replica = (fg_fed_amount_t){4000, 16 * GI, 1};
    run("worst", &req, runs, FG_ENOENT);
    for (int i = 0; i < NCLUSTERS; i++)
        free(cl[i].nodes);
    return 0;
}
