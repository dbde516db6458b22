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
/* Every wrong field of a JobSetSpec (a job set's, or a cron job's jobTemplate) at ptr, into v. */
void js_validate_spec(vd_t *v, const json_t *spec, const char *ptr);
/* The spec's number i, its default when absent (-1 for the optional seconds). */
int64_t js_number(const json_t *spec, js_number_t i);
/* total split over n parts in proportion to w (wsum = their sum > 0), largest remainders first
 * (ties to the earlier part), so the parts sum to total; n at most FG_FED_MAX_CLUSTERS. */
void js_split(int64_t total, const int64_t *w, size_t n, int64_t wsum, int64_t *out);
/* The shares of a placement of a (valid) JobSetSpec: for each chosen cluster (in verdict order)
 * its name (borrowed from p), completions, parallelism and index offset (js_split by the pods
 * placed there); returns the number of clusters. */
size_t js_shares(const json_t *spec, const fg_fed_placement_t *p, int64_t *comp, int64_t *par,
                 int64_t *offset, const char **cluster);
/* The Job of one cluster's share of a (valid) job set in project: completions, parallelism and
 * the offset of its first index; annotations is shared (taken with a new reference). A new
 * reference. */
json_t *js_job(const json_t *js, const char *project, int64_t completions, int64_t parallelism,
               int64_t offset, json_t *annotations, const fg_config_t *cfg);

/* The Job spec of one cluster's share of a (valid) JobSetSpec, its pods labelled key=name, with
 * the sidecars it names from cfg's catalogue (NULL: none) after its own containers. A new
 * reference. */
json_t *js_job_spec(const json_t *spec, const char *key, const char *name, int64_t completions,
                    int64_t parallelism, int64_t offset, const fg_config_t *cfg);

/* ---- cron jobs ---------------------------------------------------------------------------- */

#define CJ_LABEL "fleetgate.io/cronjob" /* on the CronJobs, their Jobs and pods: the cron job */
/* On a cron job's job template (so on its scheduled runs): "quota" when fleetgate wrote the
 * template suspended for the quota (the template as sent runs at once), so a scheduled run
 * starts suspended and the reconciler unsuspends it once it fits the tier's quota, then writes
 * "admitted". A run held meanwhile has CJ_HELD_ANNOTATION saying why. */
#define CJ_ADMISSION_ANNOTATION "fleetgate.io/admission"
#define CJ_HELD_ANNOTATION      "fleetgate.io/quota-held"

/* Whether s is a schedule the contract takes: five cron fields (numbers, *, a-b, lists, /step,
 * within each field's range) or one of the @ macros. */
bool cj_schedule_ok(const char *s);
/* Every wrong field of a CronJob body (read-only members ignored), into v. */
void cj_validate(vd_t *v, const json_t *cj);
/* The CronJob of one cluster's share of a (valid) cron job: its job template with completions,
 * parallelism and index offset; annotations shared (a new reference is taken). A new
 * reference. */
json_t *cj_cronjob(const json_t *cj, const char *project, int64_t completions, int64_t parallelism,
                   int64_t offset, json_t *annotations, const fg_config_t *cfg);

#endif
