/* fed: the federation layer between the write handlers and the member clusters.
 *
 * - the member-cluster registry: for each configured cluster, its zone and configured labels,
 *   whether its informers reach it and are synced, how fresh its cache is, and the free capacity
 *   of each of its schedulable nodes (allocatable minus what the cached pods on it request), all
 *   read from the cache (src/fed/registry.c);
 * - placement (src/fed/place.c): filters (zone, cluster selector, health, sync, capacity), then
 *   scorers (least requested, zone spread, sync lag) whose weighted sum ranks the eligible
 *   clusters, ties broken by name, then `Spread` (replicas divided evenly over zones, one
 *   cluster a zone first) or `Pack` (as few clusters as fit); every verdict and score is kept so
 *   the decision can be explained (dryRun, and annotations on the app's Deployments).
 *
 * - fan-out (src/fed/fanout.c): one write sent to every chosen cluster at once (one curl multi,
 *   a deadline per cluster), each cluster's outcome kept for the answer (ClusterOutcome) and a
 *   member cluster's refusal turned into a problem that names it.
 *
 * Placement is pure: a table of clusters in, a decision out, no I/O, so it is unit-tested on
 * tables and benchmarked on 64 clusters of 3,000 nodes (tests/bench/place_bench.c).
 */
#ifndef FLEETGATE_FED_H
#define FLEETGATE_FED_H

#include "fleetgate/core.h"
#include "fleetgate/kube.h"

#define FG_FED_MAX_CLUSTERS 64 /* the configuration allows at most 64 member clusters */
#define FG_FED_MAX_ZONES    32 /* placement.zones has at most 32 entries */
#define FG_FED_MAX_LABELS   64 /* a label map has at most 64 entries */

/* What one replica needs, or what a node has free. */
typedef struct {
    int64_t cpu_milli;
    int64_t memory_bytes;
    int64_t pods;
} fg_fed_amount_t;

/* One member cluster as placement sees it. Strings are borrowed from whoever built the table
 * (the registry, or a test). */
typedef struct {
    const char *name;
    const char *zone;
    const char *const *labels; /* "key=value" strings from the configuration */
    size_t nlabels;
    bool reachable;         /* its informers reach its API server */
    bool synced;            /* its nodes and pods finished a first complete sync */
    int64_t staleness_ms;   /* how long since the cache last heard from it */
    fg_fed_amount_t *nodes; /* free capacity of each ready, schedulable node */
    size_t nnodes;
    fg_fed_amount_t allocatable, requested; /* sums over its nodes (for LeastRequested) */
} fg_fed_cluster_t;

typedef enum { FG_FED_SPREAD = 0, FG_FED_PACK } fg_fed_policy_t;

/* What an app asks of placement. Strings borrowed. */
typedef struct {
    int64_t replicas;
    fg_fed_amount_t per_replica; /* the pod template's requests (pods is 1) */
    fg_fed_policy_t policy;
    const char *const *zones; /* eligible zones; none: every zone */
    size_t nzones;
    const char *const *selector; /* clusterSelector.matchLabels as "key=value" */
    size_t nselector;
    const char *tier; /* for the explanation only ("OnDemand") */
} fg_fed_request_t;

typedef enum {
    FG_FED_FILTER_NONE = 0, /* eligible */
    FG_FED_FILTER_ZONE,
    FG_FED_FILTER_SELECTOR,
    FG_FED_FILTER_HEALTH,
    FG_FED_FILTER_SYNC,
    FG_FED_FILTER_CAPACITY,
} fg_fed_filter_t;

enum {
    FG_FED_SCORE_LEAST_REQUESTED = 0,
    FG_FED_SCORE_ZONE_SPREAD,
    FG_FED_SCORE_SYNC_LAG,
    FG_FED_NSCORES
};

/* Placement's verdict on one cluster. */
typedef struct {
    const fg_fed_cluster_t *cluster; /* borrowed from the table placed over */
    fg_fed_filter_t filter;          /* the filter that refused it, or NONE */
    char reason[256];                /* why, with the values compared ("" when eligible) */
    int64_t fits;                    /* replicas its free capacity holds, counted up to the
                                        request's replicas (at least 1 when eligible) */
    int scores[FG_FED_NSCORES];      /* 0..100 each */
    int64_t total;                   /* weighted sum; the higher, the earlier chosen */
    bool chosen;                     /* the app gets a Deployment there */
    int64_t replicas;                /* its share (0 when not chosen) */
} fg_fed_verdict_t;

typedef struct {
    fg_fed_policy_t policy;
    int64_t replicas;
    const char *tier;
    fg_fed_verdict_t verdicts[FG_FED_MAX_CLUSTERS]; /* in the order of the table */
    size_t nverdicts;
    size_t nchosen;
    char failure[512]; /* why nothing fits ("" when placed) */
} fg_fed_placement_t;

/* The weight of each scorer (FG_FED_SCORE_* order); ZoneSpread weighs 0 under Pack. */
int fg_fed_score_weight(int scorer, fg_fed_policy_t policy);
/* "LeastRequested", "ZoneSpread", "SyncLag". */
const char *fg_fed_score_name(int scorer);
/* "Zone", "ClusterSelector", "Health", "Sync", "Capacity"; "" for NONE. */
const char *fg_fed_filter_name(fg_fed_filter_t f);

/* Places req over the ncl clusters of cl (borrowed; at most FG_FED_MAX_CLUSTERS, any order).
 * Deterministic: the same table and request give the same placement. Returns FG_OK with *out
 * filled (a verdict for every cluster, the shares summing to req->replicas), or FG_ENOENT when
 * no cluster passes the filters or the eligible ones cannot hold every replica: *out is then
 * filled too (every verdict, and out->failure says why), for the explanation. FG_EINVAL for a
 * request or table it cannot use (too many clusters, negative replicas). */
int fg_fed_place(const fg_fed_cluster_t *cl, size_t ncl, const fg_fed_request_t *req,
                 fg_fed_placement_t *out);

/* The placement as the API's PlacementExplanation (a new reference); decided_ms is when. */
json_t *fg_fed_explain(const fg_fed_placement_t *p, int64_t decided_ms);

/* ---- the registry: the member clusters from the cache (src/fed/registry.c) ------------------- */

struct fg_redis;
typedef struct fg_fed_registry fg_fed_registry_t;

/* A snapshot of every configured cluster, read from Redis. Reading it scans each cluster's
 * cached nodes and pods, so one snapshot is shared by the requests of up to max_age_ms; a
 * snapshot is immutable and reference-counted. cfg and redis are borrowed and must outlive it. */
typedef struct fg_fed fg_fed_t;

int fg_fed_new(fg_fed_t **out, const fg_config_t *cfg, struct fg_redis *redis, int64_t max_age_ms);
void fg_fed_free(fg_fed_t *fed);
/* The current snapshot (*out, a reference: release with fg_fed_registry_release), read again
 * when older than max_age_ms or when fresh is true (after a write changed capacity); one used
 * past 3/4 of its age is read again in the background (with redis: a thread fg_fed_new starts).
 * FG_OK, or FG_EIO (why says so) when Redis cannot be read and no snapshot is at hand.
 * Thread-safe. */
int fg_fed_registry_get(fg_fed_t *fed, bool fresh, const fg_fed_registry_t **out, char *why,
                        size_t whylen);
void fg_fed_registry_release(const fg_fed_registry_t *reg);
/* The clusters of a snapshot, in configuration order (borrowed from it). */
const fg_fed_cluster_t *fg_fed_registry_clusters(const fg_fed_registry_t *reg, size_t *n);
/* Builds a snapshot from Redis alone (what fg_fed_registry_get does when it must); now_ms is
 * the wall clock staleness is measured against. FG_OK with *out (release it), or FG_EIO. */
int fg_fed_registry_load(const fg_config_t *cfg, struct fg_redis *redis, int64_t now_ms,
                         fg_fed_registry_t **out, char *why, size_t whylen);

/* ---- fan-out: one write to several clusters (src/fed/fanout.c) --------------------------------
 */

/* One cluster's part of a write. Strings and body are borrowed. */
typedef struct {
    const char *cluster; /* a configured cluster's name */
    fg_kube_method_t method;
    const char *path;   /* "/apis/apps/v1/namespaces/shop/deployments" */
    const json_t *body; /* may be NULL */
    const char *text;   /* body already serialized (may be NULL): sent instead of body */
    bool absent_ok;     /* a 404 counts as Applied (a delete of what is gone already) */
    bool exists_ok;     /* a 409 AlreadyExists counts as Applied (a create retried) */
} fg_fed_write_t;

typedef enum {
    FG_FED_APPLIED = 0,
    FG_FED_FAILED,
    FG_FED_TIMED_OUT,
    FG_FED_SKIPPED,
} fg_fed_outcome_kind_t;

typedef struct {
    fg_fed_outcome_kind_t outcome;
    long status;       /* the cluster's HTTP status; 0 when none came */
    char reason[64];   /* its Status reason, or a FG_KUBE_REASON_* */
    char detail[1024]; /* what it said, for the answer */
    json_t *object;    /* Applied: the object the cluster answered (owned; outcomes_clear) */
    /* Applied: object as the cache holds it, translated as the answer came so that a write-through
     * need not (fed/through.c; owned; outcomes_clear); NULL when it is not one the cache holds */
    struct fg_fed_item *item;
} fg_fed_outcome_t;

/* Sends the n writes (at most FG_FED_MAX_CLUSTERS) concurrently, each bounded by deadline_ms,
 * and fills out[i] for each. A write to a cluster that is not configured is Failed. Returns the
 * number of writes that did not apply (0: all applied). */
size_t fg_fed_write_all(fg_fed_t *fed, const fg_fed_write_t *w, size_t n, long deadline_ms,
                        fg_fed_outcome_t *out);
void fg_fed_outcomes_clear(fg_fed_outcome_t *out, size_t n);
/* "Applied", "Failed", "TimedOut", "Skipped". */
const char *fg_fed_outcome_name(fg_fed_outcome_kind_t k);
/* The outcomes as the API's ClusterOutcome array (a new reference). */
json_t *fg_fed_outcomes_json(const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n);
/* A sentence for a problem's detail: "1 of 3 clusters failed the write: east-b answered 503
 * (ServiceUnavailable: ...)". *timed_out is set when every failure is a timeout (504, not 502). */
void fg_fed_outcomes_summary(const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                             char *buf, size_t buflen, bool *timed_out);

/* Read your writes without the watch (src/fed/through.c): writes each Applied outcome's object
 * (what the cluster answered) through to the cache, translated and guarded by resourceVersion;
 * a delete's answer removes the object. shown[i] says whether the cache shows write i's result
 * now; for the others (no usable answer, Redis unavailable) the caller waits for the watch. */
void fg_fed_write_through(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                          size_t n, bool *shown);
/* The same, and objs[i] is the translated object the cache shows for write i when shown[i] (a
 * new reference, else NULL), so that a write can answer without reading it back. */
void fg_fed_write_through_keep(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                               size_t n, bool *shown, json_t **objs);
/* fg_fed_write_through_keep in two halves, so that the caller works while Redis does
 * (fg_cache_write_through_begin's rules: on this thread, no other Redis call in between, every
 * _begin followed by its _end). _begin writes through the answers of the writes i with only[i]
 * (every write when only is NULL) and sets their objs[i] (objs may be NULL) to the translated
 * object at once; _end sets their shown[i], drops (NULL) the objs[i] the cache does not show,
 * and frees t (NULL: nothing). The other entries of shown and objs are left as they are. */
typedef struct fg_fed_through fg_fed_through_t;
fg_fed_through_t *fg_fed_write_through_begin(fg_fed_t *fed, const fg_fed_write_t *w,
                                             const fg_fed_outcome_t *out, size_t n,
                                             const bool *only, json_t **objs);
void fg_fed_write_through_end(fg_fed_through_t *t, bool *shown, json_t **objs);

/* ---- the reconciler (src/fed/reconcile.c) ---------------------------------------------------- */

/* A thread that, every period_ms, while this replica holds the lease fg:lease:_:reconciler
 * (holder: the replica's id), creates the namespaces of fleetgate's projects in the reachable,
 * synced clusters that lack them, then runs extra(ud) (may be NULL: the module that knows a
 * kind, e.g. api/ for apps, reconciles it there). fed must outlive it. FG_OK with *out, or
 * FG_EIO. */
typedef struct fg_fed_reconciler fg_fed_reconciler_t;
typedef void (*fg_fed_pass_fn)(void *ud);
int fg_fed_reconciler_start(fg_fed_reconciler_t **out, fg_fed_t *fed, const char *holder,
                            int64_t period_ms, fg_fed_pass_fn extra, void *ud);
/* Stops the thread, gives up the lease and frees it. NULL is fine. */
void fg_fed_reconciler_stop(fg_fed_reconciler_t *rc);

#endif
