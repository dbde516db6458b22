/* api/appspec.h: an app as the API takes it, checked whole (as_validate), what placement needs
 * of it (as_request) and the Deployment made for each chosen cluster (as_deployment). */
#ifndef FLEETGATE_API_APPSPEC_H
#define FLEETGATE_API_APPSPEC_H

#include "reads.h"
#include "validate.h"

#include "fleetgate/fed.h"

#define AS_NAME_LABEL "app.kubernetes.io/name" /* the Deployment's selector */
#define AS_TIER_LABEL "fleetgate.io/tier"

/* Every wrong field of an App body (read-only members ignored), into v. */
void as_validate(vd_t *v, const json_t *app);
/* The spec's tier, "OnDemand" when absent. */
const char *as_tier(const json_t *spec);

/* A placement request and the storage its strings point into (borrowed from spec). */
typedef struct {
    fg_fed_request_t req;
    const char *zones[FG_FED_MAX_ZONES];
    const char *selector[FG_FED_MAX_LABELS];
    char pairs[FG_FED_MAX_LABELS][384];
} as_request_t;

/* What placing replicas of a (valid) spec asks: the pod template's requests, the zones, the
 * cluster selector, Spread or Pack, the tier. spec must outlive out. */
void as_request(const json_t *spec, int64_t replicas, as_request_t *out);
/* The Deployment of a (valid) app in project with replicas; annotations is copied in. A new
 * reference. */
json_t *as_deployment(const json_t *app, const char *project, int64_t replicas,
                      json_t *annotations);

/* The tier, placement, containers and sidecars of spec (an app's or a job set's), whose JSON
 * Pointer is ptr, into v (job sets: jobsets.c). */
void as_validate_pod_parts(vd_t *v, const json_t *spec, const char *ptr);
/* The pod spec of a (valid) spec's containers, each with extra_env appended (may be NULL), and
 * the Preemptible toleration. A new reference. */
json_t *as_pod_spec(const json_t *spec, const json_t *extra_env);

#endif
