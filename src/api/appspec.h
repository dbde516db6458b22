/* api/appspec.h: an app as the API takes it, checked whole (as_validate), what placement needs
 * of it (as_request) and the Deployment made for each chosen cluster (as_deployment). */
#ifndef FLEETGATE_API_APPSPEC_H
#define FLEETGATE_API_APPSPEC_H

#include "reads.h"
#include "validate.h"

#include "fleetgate/fed.h"

#define AS_NAME_LABEL "app.kubernetes.io/name" /* the Deployment's selector */
#define AS_TIER_LABEL "fleetgate.io/tier"

/* Every wrong field of an App body (read-only members ignored), into v. Sidecar names are
 * checked for shape only; as_validate_sidecars checks them against the catalogue. */
void as_validate(vd_t *v, const json_t *app);
/* Every name of spec.sidecars that the catalogue (cfg->sidecars) does not hold, that is named
 * twice, or that is the name of one of the app's containers, into v. */
void as_validate_sidecars(vd_t *v, const json_t *spec, const fg_config_t *cfg);
/* The same for a spec whose JSON Pointer is ptr (a job set's "/spec", a cron job's
 * "/spec/jobTemplate"). */
void as_validate_sidecars_at(vd_t *v, const json_t *spec, const fg_config_t *cfg, const char *ptr);
/* The catalogue's sidecars a (valid) spec names, as the API's containers ({name, image, ports,
 * resources, env}), so quotas and placement count them as the app's own. A new reference. */
json_t *as_sidecar_containers(const json_t *spec, const fg_config_t *cfg);
/* The spec's tier, "OnDemand" when absent. */
const char *as_tier(const json_t *spec);

/* A placement request and the storage its strings point into (borrowed from spec). */
typedef struct {
    fg_fed_request_t req;
    const char *zones[FG_FED_MAX_ZONES];
    const char *selector[FG_FED_MAX_LABELS];
    char pairs[FG_FED_MAX_LABELS][384];
} as_request_t;

/* What placing replicas of a (valid) spec asks: the pod template's requests (its sidecars' from
 * cfg included; cfg may be NULL), the zones, the cluster selector, Spread or Pack, the tier.
 * spec must outlive out. */
void as_request(const json_t *spec, int64_t replicas, const fg_config_t *cfg, as_request_t *out);
/* The Deployment of a (valid) app in project with replicas; annotations is copied in; the
 * sidecars the spec names are injected from cfg's catalogue (after the app's containers; the pod
 * template's annotation fleetgate.io/sidecars lists them). A new reference. */
json_t *as_deployment(const json_t *app, const char *project, int64_t replicas, json_t *annotations,
                      const fg_config_t *cfg);

/* What the reconciler compares in the cache, which keeps a Deployment's labels but not its
 * annotations. Every write of an app records on each Deployment it leaves the annotation
 * fleetgate.io/shards ({cluster: replicas} of every Deployment the write left, keys sorted) and
 * the labels fleetgate.io/write (a hash of the spec and the shards: the same on every Deployment
 * of one write), fleetgate.io/share (this cluster's replicas) and fleetgate.io/shards (how many
 * Deployments the write left). metadata's annotations must hold fleetgate.io/spec already. */
#define AS_WRITE_LABEL    "fleetgate.io/write"
#define AS_SHARE_LABEL    "fleetgate.io/share"
#define AS_SHARDS_LABEL   "fleetgate.io/shards"
#define AS_SHARDS_ANN     "fleetgate.io/shards"
#define AS_SPEC_ANN       "fleetgate.io/spec"
#define AS_SPEC_AT_ANN    "fleetgate.io/spec-at" /* Unix ms of the last write (user or reconciler) */
#define AS_DELETING_LABEL "fleetgate.io/deleting" /* "true": a delete began */
#define AS_STOPPED_LABEL  "fleetgate.io/stopped"  /* "true" between stop and resume */
/* The label of each Deployment whose pods get sidecars: a digest of the catalogue definitions
 * injected (as_sidecars_digest), so the reconciler finds the apps a changed catalogue concerns. */
#define AS_SIDECARS_LABEL "fleetgate.io/sidecars-digest"
/* The digest (16 hex digits) of the sidecars spec names as cfg's catalogue defines them; "" when
 * it names none. */
void as_sidecars_digest(const json_t *spec, const fg_config_t *cfg, char out[17]);
/* The first sidecar spec names that cfg's catalogue no longer holds, or NULL. */
const char *as_sidecar_missing(const json_t *spec, const fg_config_t *cfg);
/* Where an object's pod template is (the members leading to it, NULL-terminated). */
extern const char *const as_deployment_template[], *const as_cronjob_template[];
/* A sidecar spec names that cfg's catalogue no longer holds stays as the running object live
 * has it: in obj (built from cfg, so without it) its container is copied from live's pod
 * template (at path), with live's sidecar digest label and template list; nothing when the
 * catalogue holds every one. */
void as_keep_gone_sidecars(json_t *obj, const json_t *live, const char *const *path,
                           const json_t *spec, const fg_config_t *cfg);
void as_mark(json_t *metadata, const json_t *shards, const char *cluster);
/* A numeric label (0..1000000) of labels, -1 when absent or not a number (share, shards). */
int64_t as_label_int(const json_t *labels, const char *key);
/* The fleetgate.io/write label of a spec (its annotation text) and shards. */
void as_write_hash(const char *spec_text, const json_t *shards, char out[17]);

/* Where each cluster of a read stands against the app's last write, from the cached Deployments
 * alone (objs[i] belongs to c->parts[i], NULL where that cluster holds none). The last write is
 * the newest fleetgate.io/spec-at among them; a cluster is pending while it misses that write:
 * no Deployment where the write placed one (a write it failed), a Deployment of an older write,
 * or one the write dropped (it goes once the cluster answers). The reconciler closes each gap
 * (reconcile.c); replicas changed by a scaler are not a gap. */
typedef struct {
    bool known; /* false: stopped, being deleted or written before the labels: nothing to say */
    int64_t placed[RD_MAX_CLUSTERS]; /* replicas the last write placed in parts[i]; -1: none */
    bool pending[RD_MAX_CLUSTERS];
    size_t npending;
} as_standing_t;
void as_standing(const rd_ctx_t *c, json_t *const *objs, as_standing_t *out);

/* The tier, placement, containers and sidecars of spec (an app's or a job set's), whose JSON
 * Pointer is ptr, into v (job sets: jobsets.c). */
void as_validate_pod_parts(vd_t *v, const json_t *spec, const char *ptr);
/* The pod spec of a (valid) spec's containers, each with extra_env appended (may be NULL), then
 * the catalogue's sidecars it names (cfg; NULL: none), and the Preemptible toleration. A new
 * reference. */
json_t *as_pod_spec(const json_t *spec, const json_t *extra_env, const fg_config_t *cfg);

#endif
