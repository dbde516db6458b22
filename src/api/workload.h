/* api/workload.h: what the workload writes share beyond writes.h: the project, placement and
 * quota steps apps.c defines, which job sets (jobsets.c) take too, and the job sets' part of a
 * tier's quota usage, which apps.c counts. Not part of any public surface. */
#ifndef FLEETGATE_API_WORKLOAD_H
#define FLEETGATE_API_WORKLOAD_H

#include "jobspec.h"
#include "writes.h"

#include "fleetgate/fed.h"

/* The project as presented (a new reference), or NULL when it replied 404 / 503. */
json_t *project_or_reply(fg_req_t *req, const char *project);
/* Places replicas of spec (its containers' requests, placement, tier) over every cluster, or
 * those marked in only; cl is the caller's table of FG_FED_MAX_CLUSTERS that p's verdicts point
 * into. false when it replied (409 with the explanation, 503). */
bool place_or_reply(fg_req_t *req, const json_t *spec, int64_t replicas, const bool *only,
                    fg_fed_cluster_t *cl, fg_fed_placement_t *p);
/* Checks and (keep) reserves replicas of spec's pods under the name app in the tier's quota,
 * atomically across replicas; false when it replied (409 quota-exceeded, 503). */
bool quota_or_reply(fg_req_t *req, const json_t *project, const json_t *spec, const char *app,
                    int64_t replicas, bool keep);
/* The request-less core of quota_or_reply, which the reconciler takes too: want ({cpu milli,
 * memory bytes, pods}) under the name app in the project's (as presented) tier, checked and
 * (keep) reserved atomically. One of the QUOTA_* verdicts, with why said for all but FITS. */
enum { QUOTA_FITS, QUOTA_NO_TIER, QUOTA_EXCEEDED, QUOTA_UNREAD, QUOTA_UNAVAILABLE };
typedef struct {
    char why[512];
} quota_verdict_t;
int quota_reserve_at(fg_api_t *api, const char *rid, const json_t *project, const char *tier,
                     const char *app, const int64_t want[3], bool keep, quota_verdict_t *out);
/* What pods pods of containers request: {cpu milli, memory bytes, pods}. */
void quota_demand(const json_t *containers, int64_t pods, int64_t out[3]);
/* Drops app's reservation in spec's tier. */
void quota_release(fg_req_t *req, const char *project, const json_t *spec, const char *app);
/* After a delete's fan-out: when it applied in at least one cluster (the object is going; the
 * reconciler finishes the rest), name's quota in tier (NULL: OnDemand) is free at once on every
 * replica (fg_cache_quota_forget); a delete that failed everywhere frees nothing. */
void quota_forget(fg_req_t *req, const char *project, const char *tier, const char *name,
                  const fg_fed_outcome_t *o, size_t n);

/* The quota name of a job set: "jobset/<name>" (app names hold no '/'). */
#define JS_QUOTA_NAME(buf, name) snprintf(buf, sizeof buf, "jobset/%s", name)
/* Adds what the cache shows of the tier's running job sets (not finished, not suspended:
 * min(parallelism, completions) times the pod's requests, summed over clusters) to by_name, one
 * entry "jobset/<name>" -> [cpu milli, memory bytes, pods] each, leaving out the entry named skip.
 * false (why said) when Redis could not be read (jobsets.c). */
/* After a cron job's delete fan-out (quota_forget's rule): the quota of every run of it that
 * the cache shows (job sets labelled CJ_LABEL=cron) is free at once (jobsets.c). */
void js_forget_cron_runs(fg_req_t *req, const char *project, const char *cron,
                         const fg_fed_outcome_t *o, size_t n);
bool js_tier_usage(fg_api_t *api, const char *rid, const char *project, const char *tier,
                   const char *skip, json_t *by_name, char *why, size_t len);
/* js_tier_usage in two halves, to share a round trip: _add adds the reads of the project's job
 * sets to b and returns the index of the first; once b ran, _read adds what they show to
 * by_name as js_tier_usage does. */
size_t js_tier_usage_add(fg_api_t *api, const char *project, fg_redis_batch_t *b);
void js_tier_usage_read(fg_api_t *api, const char *rid, const char *tier, const char *skip,
                        const fg_redis_batch_t *b, size_t first, json_t *by_name);

/* Answers the job set name as the cache shows it (status: 200, or 201 with its Location), with
 * the write's placement and outcomes (both taken); when the cache shows its Jobs in at least
 * `cached` clusters the quota reservation of spec's tier is dropped (spec not NULL). */
int js_reply(fg_req_t *req, const char *project, const char *name, unsigned status,
             json_t *placement, json_t *outcomes, const json_t *spec, size_t cached);
/* Deletes (background propagation, path names the object) what the applied writes of a failed
 * create made, so a create is all or nothing. */
void js_roll_back(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *o, size_t n,
                  const char *path);

/* A manual scale of app to replicas must be within the bounds of each scaler targeting it (its
 * HPAs' minReplicas and maxReplicas summed over clusters, from the cache), in two halves so the
 * reads ride in the scale's other reads: sc_bounds_add adds the reads of project's scalers to b
 * (the index of the first), sc_bounds_read_or_reply judges them once b ran: 409 naming the
 * scaler and its bounds (false) otherwise. (scalers.c) */
size_t sc_bounds_add(fg_req_t *req, const char *project, fg_redis_batch_t *b);
bool sc_bounds_read_or_reply(fg_req_t *req, const char *app, int64_t replicas,
                             const fg_redis_batch_t *b, size_t at);
/* Every wrong field of a Scaler body (read-only members ignored), into v. (scalers.c) */
void sc_validate(vd_t *v, const json_t *sc);
/* After app's Deployments moved (a placement change): every scaler fleetgate made for it puts
 * its HPAs where the app now is (created, replaced, deleted); failures are logged, nothing is
 * answered. (scalers.c) */
void sc_follow(fg_req_t *req, const char *project, const char *app);
/* The reconciler's part (no request): puts scaler name's HPAs where its app now is, the n
 * clusters at[], reading its accepted spec from the clusters have[] (where the cache shows its
 * HPAs; reachable ones): POST, PUT or DELETE each, written through to the cache, stamped
 * requested-by who. The number of writes that failed, or -1 when it was left as it is (not made
 * by fleetgate, or its minReplicas below n); logged either way. (scalers.c) */
int sc_follow_at(fg_api_t *api, const char *project, const char *name, const char *const *have,
                 size_t nhave, const char *const *at, size_t n, const char *who);

/* The reconciler's repair of cron job name in project (no request): its CronJobs in the
 * clusters have[] (where the cache shows them) are read, and the cron job is written again from
 * the spec and placement they record, in those of the placement's clusters that are up[]
 * (reachable): made where missing, replaced where drifted (a sidecar built from another
 * catalogue than cfg's is a drift), deleted outside the placement; written through to the
 * cache, stamped requested-by who, logged. cfg: the live configuration (its sidecar catalogue).
 * The number of writes sent. (cronjobs.c) */
int cj_repair(fg_api_t *api, const fg_config_t *cfg, const char *project, const char *name,
              const char *const *have, size_t nhave, const char *const *up, size_t nup,
              const char *who);

#endif
