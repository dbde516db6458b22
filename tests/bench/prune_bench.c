/* tests/bench/prune_bench.c: what an informer spends on one Deployment watch event before it
 * translates it (kube/prune.c then jansson), with fleetgate's placement explanation cut unparsed
 * (FG_KUBE_PLACEMENT_ANNOTATION, as the informers do) against managedFields alone.
 *
 * The event is a real Deployment (a kind cluster's, with its managedFields, from the k8s
 * fixtures) given the annotation fleetgate writes on it: the explanation of 3 replicas placed
 * over 3 clusters in 3 zones, made by fed/ itself (fg_fed_place, fg_fed_explain). Each round
 * times ITERS copies of the event pruned and parsed each way, interleaved, and the bench prints
 * the median per event over ROUNDS rounds with its spread, and the ratio.
 * Usage: prune_bench [ROUNDS] [ITERS] (default 7 5000); FG_SHARED names where fixtures/k8s is
 * (default tests). Not in make test (make bench-prune). */
#include "fleetgate/fed.h"
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "real-kind-v1.36.2/deployment-list.00.GET.200.json"
#define GI      (1024LL * 1024 * 1024)

/* The explanation fleetgate keeps on the app's Deployments (a new string, free()). */
static char *placement_text(void) {
    static const char *const names[] = {"c0", "c1", "c2"}, *const zones[] = {"z0", "z1", "z2"};
    fg_fed_amount_t nodes[3][4];
    fg_fed_cluster_t cl[3];
    for (int i = 0; i < 3; i++) {
        for (int n = 0; n < 4; n++)
            nodes[i][n] = (fg_fed_amount_t){8000, 32 * GI, 110};
        cl[i] = (fg_fed_cluster_t){.name = names[i],
                                   .zone = zones[i],
                                   .reachable = true,
                                   .synced = true,
                                   .nodes = nodes[i],
                                   .nnodes = 4,
                                   .allocatable = {32000, 128 * GI, 440}};
    }
    fg_fed_request_t req = {.replicas = 3,
                            .per_replica = {100, GI / 8, 1},
                            .policy = FG_FED_SPREAD,
                            .tier = "OnDemand"};
    fg_fed_placement_t p;
    if (fg_fed_place(cl, 3, &req, &p) != FG_OK)
        return NULL;
    json_t *e = fg_fed_explain(&p, 1764300000000);
    char *text = fg_json_dumps(e, NULL);
    json_decref(e);
    return text;
}

/* The watch event: the fixture's Deployment with the annotation (a new string, free()). */
static char *event_text(const char *shared, size_t *len) {
    char *path = fg_xasprintf("%s/fixtures/k8s/%s", shared, FIXTURE);
    json_t *list = json_load_file(path, 0, NULL), *obj = NULL;
    free(path);
    obj = json_array_get(json_object_get(list, "items"), 0);
    char *pl = placement_text();
    if (obj == NULL || pl == NULL) {
        json_decref(list);
        free(pl);
        return NULL;
    }
    json_t *md = json_object_get(obj, "metadata");
    if (json_object_get(md, "annotations") == NULL)
        json_object_set_new(md, "annotations", json_object());
    json_object_set_new(json_object_get(md, "annotations"), FG_KUBE_PLACEMENT_ANNOTATION,
                        json_string(pl));
    free(pl);
    json_t *ev = json_pack("{s:s,s:O}", "type", "MODIFIED", "object", obj);
    char *text = fg_json_dumps(ev, len);
    json_decref(ev);
    json_decref(list);
    return text;
}

/* ns per event to prune (cutting annotation too when not NULL) and parse iters copies. */
static double time_events(const char *ev, size_t len, int iters, const char *annotation,
                          size_t *kept) {
    char *copy = fg_xmalloc(len + 1);
    uint64_t t0 = fg_now_ns();
    for (int i = 0; i < iters; i++) {
        memcpy(copy, ev, len);
        size_t n = fg_kube_prune(copy, len, FG_KUBE_PRUNE_EVENT, annotation);
        json_t *j = NULL;
        if (fg_json_load(copy, n, &j, NULL, 0) != FG_OK)
            abort();
        json_decref(j);
        *kept = n;
    }
    double ns = (double)(fg_now_ns() - t0) / iters;
    free(copy);
    return ns;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 7,
        iters = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5000;
    if (rounds < 1 || rounds > 100 || iters < 1) {
        fprintf(stderr, "usage: prune_bench [ROUNDS (1-100)] [ITERS]\n");
        return 2;
    }
    const char *shared = getenv("FG_SHARED") ? getenv("FG_SHARED") : "tests";
    size_t len, kept_mf = 0, kept_both = 0;
    char *ev = event_text(shared, &len);
    if (ev == NULL) {
        fprintf(stderr, "prune_bench: cannot build the event from %s/fixtures/k8s/%s\n", shared,
                FIXTURE);
        return 1;
    }
    double mf[100], both[100];
    for (int r = 0; r < rounds; r++) { /* interleaved: a slow spell lands on both alike */
        mf[r] = time_events(ev, len, iters, NULL, &kept_mf);
        both[r] = time_events(ev, len, iters, FG_KUBE_PLACEMENT_ANNOTATION, &kept_both);
    }
    printf("one Deployment watch event of %zu bytes (a kind cluster's, with fleetgate's placement "
           "explanation); %d rounds of %d events each way, interleaved\n",
           len, rounds, iters);
    qsort(mf, (size_t)rounds, sizeof mf[0], cmp_d);
    qsort(both, (size_t)rounds, sizeof both[0], cmp_d);
    printf("cut managedFields, parse %5zu bytes:                median %6.1f us  (%.1f-%.1f)\n",
           kept_mf, mf[rounds / 2] / 1e3, mf[0] / 1e3, mf[rounds - 1] / 1e3);
    printf("cut managedFields and the placement, parse %5zu bytes: median %6.1f us  (%.1f-%.1f)\n",
           kept_both, both[rounds / 2] / 1e3, both[0] / 1e3, both[rounds - 1] / 1e3);
    printf("ratio (median) with the placement cut / without: %.2f\n",
           both[rounds / 2] / mf[rounds / 2]);
    free(ev);
    return 0;
}
