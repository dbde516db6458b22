/* api/jobspec.h: a job set as the API takes it (the contract's JobSet) checked whole
 * (js_validate), its work divided over clusters (js_split) and the Job made for each chosen
 * cluster (js_job). Not part of any public surface. */
#ifndef FLEETGATE_API_JOBSPEC_H
#define FLEETGATE_API_JOBSPEC_H

#include "appspec.h"

#define JS_LABEL       "fleetgate.io/jobset"    /* on the Jobs and their pods: the job set */
#define JS_INDEX_ENV   "FLEETGATE_INDEX_OFFSET" /* in every container: the cluster's first index */
#define JS_SECONDS_MAX 2147483647LL

/* The spec's numbers, in the order of the table in jobspec.c. */
typedef enum {
    JS_COMPLETIONS = 0,
    JS_PARALLELISM,
    JS_BACKOFF_LIMIT,
    JS_ACTIVE_DEADLINE,
    JS_TTL_AFTER_FINISHED,
    JS_NNUMBERS
} js_number_t;

/* Every wrong field of a JobSet body (read-only members ignored), into v. */
void js_validate(vd_t *v, const json_t *js);
/* The spec's number i, its default when absent (-1 for the optional seconds). */
int64_t js_number(const json_t *spec, js_number_t i);
/* total split over n parts in proportion to w (wsum = their sum > 0), largest remainders first
 * (ties to the earlier part), so the parts sum to total; n at most FG_FED_MAX_CLUSTERS. */
void js_split(int64_t total, const int64_t *w, size_t n, int64_t wsum, int64_t *out);
/* The Job of one cluster's share of a (valid) job set in project: completions, parallelism and
 * the offset of its first index; annotations is shared (taken with a new reference). A new
 * reference. */
json_t *js_job(const json_t *js, const char *project, int64_t completions, int64_t parallelism,
               int64_t offset, json_t *annotations);

#endif
