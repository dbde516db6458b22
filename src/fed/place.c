/* fed/place.c: placement of an app's replicas over the member clusters.
 *
 * Filters first, in a fixed order, each refusal saying what it compared: the zone must be in
 * placement.zones, the cluster's configured labels must hold every clusterSelector pair, its
 * informers must reach it, its nodes and pods must be synced (a cluster whose cache is not
 * complete cannot be judged for capacity), and its nodes must have room for at least one
 * replica. Then scorers (0..100 each, weighted): LeastRequested (the share of allocatable CPU and
 * memory not requested), SyncLag (fresh cache 100, a minute behind 0) and ZoneSpread (100 for a
 * zone's first choice: Spread uses one cluster a zone before a second one). Ties go to the name,
 * so a placement is a function of its inputs.
 *
 * Capacity is counted per node (a replica must fit on one node, as the scheduler sees it), and
 * only up to the replicas asked for, so 64 clusters of 3,000 nodes are placed in well under a
 * millisecond: a cluster with room stops being counted as soon as it holds them all.
 */
#include "fleetgate/fed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STALE_FULL_MS 5000  /* SyncLag is 100 up to this staleness... */
#define STALE_ZERO_MS 65000 /* ...and falls to 0 here */

static const struct {
    const char *name;
    int weight_spread, weight_pack;
} scorers[FG_FED_NSCORES] = {
    [FG_FED_SCORE_LEAST_REQUESTED] = {"LeastRequested", 2, 2},
    [FG_FED_SCORE_ZONE_SPREAD] = {"ZoneSpread", 2, 0},
    [FG_FED_SCORE_SYNC_LAG] = {"SyncLag", 1, 1},
};

static const char *const filter_names[] = {
    [FG_FED_FILTER_NONE] = "",
    [FG_FED_FILTER_ZONE] = "Zone",
    [FG_FED_FILTER_SELECTOR] = "ClusterSelector",
    [FG_FED_FILTER_HEALTH] = "Health",
    [FG_FED_FILTER_SYNC] = "Sync",
    [FG_FED_FILTER_CAPACITY] = "Capacity",
};

int fg_fed_score_weight(int scorer, fg_fed_policy_t policy) {
    if (scorer < 0 || scorer >= FG_FED_NSCORES)
        return 0;
    return policy == FG_FED_PACK ? scorers[scorer].weight_pack : scorers[scorer].weight_spread;
}

const char *fg_fed_score_name(int scorer) {
    return scorer >= 0 && scorer < FG_FED_NSCORES ? scorers[scorer].name : "";
}

const char *fg_fed_filter_name(fg_fed_filter_t f) {
    return (size_t)f < sizeof filter_names / sizeof filter_names[0] ? filter_names[f] : "";
}

/* ---- filters ------------------------------------------------------------- */

static bool has_label(const fg_fed_cluster_t *c, const char *pair) {
    for (size_t i = 0; i < c->nlabels; i++)
        if (strcmp(c->labels[i], pair) == 0)
            return true;
    return false;
}

static bool zone_allowed(const fg_fed_request_t *req, const char *zone) {
    for (size_t i = 0; i < req->nzones; i++)
        if (strcmp(req->zones[i], zone) == 0)
            return true;
    return req->nzones == 0;
}

/* Replicas that fit on the nodes, counted up to cap. */
static int64_t count_fits(const fg_fed_cluster_t *c, const fg_fed_amount_t *per, int64_t cap) {
    int64_t sum = 0;
    for (size_t i = 0; i < c->nnodes && sum < cap; i++) {
        const fg_fed_amount_t *n = &c->nodes[i];
        if (n->cpu_milli < per->cpu_milli || n->memory_bytes < per->memory_bytes || n->pods < 1)
            continue; /* the common case on a busy fleet, without a division */
        int64_t k = n->pods;
        if (per->cpu_milli > 0 && n->cpu_milli / per->cpu_milli < k)
            k = n->cpu_milli / per->cpu_milli;
        if (per->memory_bytes > 0 && n->memory_bytes / per->memory_bytes < k)
            k = n->memory_bytes / per->memory_bytes;
        sum += k > 0 ? k : 0;
    }
    return sum < cap ? sum : cap;
}

/* Runs the filters in order; the first refusal is the verdict. */
static void judge(const fg_fed_cluster_t *c, const fg_fed_request_t *req, fg_fed_verdict_t *v) {
    memset(v, 0, sizeof *v);
    v->cluster = c;
    if (!zone_allowed(req, c->zone)) {
        v->filter = FG_FED_FILTER_ZONE;
        snprintf(v->reason, sizeof v->reason, "zone %s is not in placement.zones", c->zone);
        return;
    }
    for (size_t i = 0; i < req->nselector; i++) {
        if (!has_label(c, req->selector[i])) {
            v->filter = FG_FED_FILTER_SELECTOR;
            snprintf(v->reason, sizeof v->reason, "the cluster has no label %s", req->selector[i]);
            return;
        }
    }
    if (!c->reachable) {
        v->filter = FG_FED_FILTER_HEALTH;
        snprintf(v->reason, sizeof v->reason, "the cluster cannot be reached");
        return;
    }
    if (!c->synced) {
        v->filter = FG_FED_FILTER_SYNC;
        snprintf(v->reason, sizeof v->reason, "its nodes and pods are not synced yet");
        return;
    }
    int64_t cap = req->replicas > 0 ? req->replicas : 1;
    v->fits = count_fits(c, &req->per_replica, cap);
    if (v->fits == 0) {
        v->filter = FG_FED_FILTER_CAPACITY;
        snprintf(v->reason, sizeof v->reason,
                 "no node has room for one replica (cpu %lldm, memory %lld bytes) among %zu "
                 "ready nodes",
                 (long long)req->per_replica.cpu_milli, (long long)req->per_replica.memory_bytes,
                 c->nnodes);
    }
}

/* ---- scores --------------------------------------------------------------- */

static int free_percent(int64_t alloc, int64_t requested) {
    if (alloc <= 0)
        return -1;
    int64_t left = alloc - requested;
    return left <= 0 ? 0 : (int)(left * 100 / alloc);
}

static int least_requested(const fg_fed_cluster_t *c) {
    int cpu = free_percent(c->allocatable.cpu_milli, c->requested.cpu_milli);
    int mem = free_percent(c->allocatable.memory_bytes, c->requested.memory_bytes);
    if (cpu < 0 && mem < 0)
        return 0;
    if (cpu < 0 || mem < 0)
        return cpu < 0 ? mem : cpu;
    return (cpu + mem) / 2;
}

static int sync_lag(const fg_fed_cluster_t *c) {
    if (c->staleness_ms <= STALE_FULL_MS)
        return 100;
    if (c->staleness_ms >= STALE_ZERO_MS)
        return 0;
    return (int)(100 - (c->staleness_ms - STALE_FULL_MS) * 100 / (STALE_ZERO_MS - STALE_FULL_MS));
}

static int64_t weighted(const fg_fed_verdict_t *v, fg_fed_policy_t policy) {
    int64_t t = 0;
    for (int s = 0; s < FG_FED_NSCORES; s++)
        t += (int64_t)v->scores[s] * fg_fed_score_weight(s, policy);
    return t;
}

/* Rank order: total descending, then name. */
static int cmp_rank(const void *a, const void *b) {
    const fg_fed_verdict_t *x = *(const fg_fed_verdict_t *const *)a,
                           *y = *(const fg_fed_verdict_t *const *)b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->cluster->name, y->cluster->name);
}

static void rank(fg_fed_verdict_t **r, size_t n, fg_fed_policy_t policy) {
    for (size_t i = 0; i < n; i++)
        r[i]->total = weighted(r[i], policy);
    qsort(r, n, sizeof r[0], cmp_rank);
}

/* ZoneSpread: 100 for the best cluster of each zone (by the other scores), 0 for the rest. */
static void score_zones(fg_fed_verdict_t **r, size_t n, fg_fed_policy_t policy) {
    rank(r, n, policy); /* ZoneSpread is still 0 everywhere: ranks by the other scores */
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(r[j]->cluster->zone, r[i]->cluster->zone) != 0;
        r[i]->scores[FG_FED_SCORE_ZONE_SPREAD] = first ? 100 : 0;
    }
    rank(r, n, policy);
}

/* ---- assignment ------------------------------------------------------------ */

static int64_t give(fg_fed_verdict_t *v, int64_t want) {
    int64_t room = v->fits - v->replicas;
    int64_t n = want < room ? want : room;
    if (n > 0)
        v->replicas += n;
    return n > 0 ? n : 0;
}

/* Whatever a zone could not hold goes to the ranked clusters with room, in order. */
static int64_t spill(fg_fed_verdict_t **r, size_t n, int64_t left) {
    for (size_t i = 0; i < n && left > 0; i++)
        left -= give(r[i], left);
    return left;
}

/* Spread: the replicas divided evenly over the zones (the remainder to the best-ranked zones),
 * each zone's share to its clusters in rank order. */
static int64_t assign_spread(fg_fed_verdict_t **r, size_t n, int64_t replicas) {
    const char *zones[FG_FED_MAX_CLUSTERS];
    size_t nz = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i]->scores[FG_FED_SCORE_ZONE_SPREAD] == 100)
            zones[nz++] = r[i]->cluster->zone; /* rank order of each zone's first choice */
    int64_t left = 0;
    for (size_t z = 0; z < nz; z++) {
        int64_t share = replicas / (int64_t)nz + ((int64_t)z < replicas % (int64_t)nz);
        for (size_t i = 0; i < n && share > 0; i++)
            if (strcmp(r[i]->cluster->zone, zones[z]) == 0)
                share -= give(r[i], share);
        left += share;
    }
    return spill(r, n, left);
}

/* Pack: the best-ranked cluster that holds every replica, else as many as fit in rank order. */
static int64_t assign_pack(fg_fed_verdict_t **r, size_t n, int64_t replicas) {
    for (size_t i = 0; i < n; i++) {
        if (r[i]->fits >= replicas) {
            r[i]->replicas = replicas;
            return 0;
        }
    }
    return spill(r, n, replicas);
}

static void describe_refusals(fg_fed_placement_t *out) {
    size_t counts[sizeof filter_names / sizeof filter_names[0]] = {0};
    for (size_t i = 0; i < out->nverdicts; i++)
        counts[out->verdicts[i].filter]++;
    size_t len =
        (size_t)snprintf(out->failure, sizeof out->failure,
                         "no member cluster passes the filters (%zu clusters:", out->nverdicts);
    const char *sep = " ";
    for (size_t f = 1; f < sizeof counts / sizeof counts[0] && len < sizeof out->failure; f++) {
        if (counts[f] == 0)
            continue;
        len += (size_t)snprintf(out->failure + len, sizeof out->failure - len,
                                "%s%zu refused by %s", sep, counts[f], filter_names[f]);
        sep = ", ";
    }
    if (len < sizeof out->failure)
        snprintf(out->failure + len, sizeof out->failure - len, ")");
}

int fg_fed_place(const fg_fed_cluster_t *cl, size_t ncl, const fg_fed_request_t *req,
                 fg_fed_placement_t *out) {
    if (ncl > FG_FED_MAX_CLUSTERS || req->replicas < 0)
        return FG_EINVAL;
    memset(out, 0, sizeof *out);
    out->policy = req->policy;
    out->replicas = req->replicas;
    out->tier = req->tier;
    out->nverdicts = ncl;
    fg_fed_verdict_t *ranked[FG_FED_MAX_CLUSTERS];
    size_t n = 0;
    for (size_t i = 0; i < ncl; i++) {
        fg_fed_verdict_t *v = &out->verdicts[i];
        judge(&cl[i], req, v);
        if (v->filter != FG_FED_FILTER_NONE)
            continue;
        v->scores[FG_FED_SCORE_LEAST_REQUESTED] = least_requested(&cl[i]);
        v->scores[FG_FED_SCORE_SYNC_LAG] = sync_lag(&cl[i]);
        ranked[n++] = v;
    }
    if (n == 0) {
        describe_refusals(out);
        return FG_ENOENT;
    }
    score_zones(ranked, n, req->policy);
    int64_t left = req->policy == FG_FED_PACK ? assign_pack(ranked, n, req->replicas)
                                              : assign_spread(ranked, n, req->replicas);
    if (left > 0) {
        snprintf(out->failure, sizeof out->failure,
                 "only %lld of %lld replicas fit in the %zu eligible clusters",
                 (long long)(req->replicas - left), (long long)req->replicas, n);
        for (size_t i = 0; i < n; i++)
            ranked[i]->replicas = 0;
        return FG_ENOENT;
    }
    if (req->replicas == 0)
        ranked[0]->chosen = true; /* an app of no replicas still lives somewhere */
    for (size_t i = 0; i < ncl; i++) {
        fg_fed_verdict_t *v = &out->verdicts[i];
        v->chosen = v->chosen || v->replicas > 0;
        out->nchosen += v->chosen;
    }
    return FG_OK;
}

/* ---- explanation ------------------------------------------------------------ */

static json_t *verdict_json(const fg_fed_verdict_t *v, fg_fed_policy_t policy) {
    json_t *o = json_pack("{s:s,s:s,s:b}", "cluster", v->cluster->name, "zone", v->cluster->zone,
                          "eligible", v->filter == FG_FED_FILTER_NONE);
    if (v->filter != FG_FED_FILTER_NONE) {
        json_object_set_new(o, "filter", json_string(filter_names[v->filter]));
        json_object_set_new(o, "reason", json_string(v->reason));
        if (v->filter == FG_FED_FILTER_CAPACITY)
            json_object_set_new(o, "fits", json_integer(0));
    } else {
        json_t *scores = json_array();
        for (int s = 0; s < FG_FED_NSCORES; s++)
            json_array_append_new(scores, json_pack("{s:s,s:i,s:i}", "scorer", scorers[s].name,
                                                    "score", v->scores[s], "weight",
                                                    fg_fed_score_weight(s, policy)));
        json_object_set_new(o, "fits", json_integer(v->fits));
        json_object_set_new(o, "scores", scores);
        json_object_set_new(o, "total", json_integer(v->total));
    }
    json_object_set_new(o, "chosen", json_boolean(v->chosen));
    json_object_set_new(o, "replicas", json_integer(v->replicas));
    return o;
}

json_t *fg_fed_explain(const fg_fed_placement_t *p, int64_t decided_ms) {
    char when[40];
    fg_format_time_ms(decided_ms, when, sizeof when);
    json_t *clusters = json_array();
    for (size_t i = 0; i < p->nverdicts; i++)
        json_array_append_new(clusters, verdict_json(&p->verdicts[i], p->policy));
    json_t *o =
        json_pack("{s:s,s:I,s:s,s:o}", "policy", p->policy == FG_FED_PACK ? "Pack" : "Spread",
                  "replicas", (json_int_t)p->replicas, "decidedAt", when, "clusters", clusters);
    if (p->tier)
        json_object_set_new(o, "tier", json_string(p->tier));
    return o;
}
