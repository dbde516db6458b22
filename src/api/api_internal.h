/* api/api_internal.h: what the handlers of this module share; not part of any public surface. */
#ifndef FLEETGATE_API_INTERNAL_H
#define FLEETGATE_API_INTERNAL_H

#include "fleetgate/api.h"

/* A readiness check: true when ready; otherwise writes the reason into why. */
typedef bool (*ready_check_fn)(const fg_api_t *api, const fg_req_t *req, char *why, size_t whylen);

typedef struct {
    const char *name;
    ready_check_fn check;
} ready_check_t;

struct fg_api {
    const fg_config_t *cfg;
    char *openapi; /* the contract, served as is */
    size_t openapi_len;
    char *docs; /* the rendered reference; NULL when not built */
    size_t docs_len;
    struct fg_redis *redis;               /* the read APIs' pool (reads.h); owned */
    struct fg_redis_mirror *pod_mirror;   /* local copies of pods for GET; owned; NULL: off */
    struct fg_fed *fed;                   /* the member clusters for placement (fed/); owned */
    struct fg_fed_reconciler *reconciler; /* owned; NULL when the cache is off */
    struct rc_apps *rc_apps;              /* the apps' pass of the reconciler (reconcile.c) */
    struct fg_streams *streams;           /* the stream loop (logs, exec); borrowed; NULL: none */
};

/* The configuration a write uses for its live parts (the sidecar catalogue): the snapshot the
 * request took on its first call (core/live.c), kept until it ends so one request sees one
 * catalogue; api->cfg when no snapshot was ever published (tests without main). */
const fg_config_t *api_live_cfg(fg_req_t *req);

/* The readiness checks, in the order /readyz reports them. */
extern const ready_check_t fg_api_ready_checks[];
extern const size_t fg_api_nready_checks;

/* The reconciler's pass over apps (src/api/reconcile.c), run by fed/'s reconciler thread while
 * this replica holds its lease: new/free around the reconciler's start and stop. */
struct rc_apps *rc_apps_new(fg_api_t *api, int64_t period_ms);
void rc_apps_free(struct rc_apps *r);
void rc_apps_pass(void *r);

int fg_api_healthz(fg_req_t *req);
int fg_api_readyz(fg_req_t *req);
int fg_api_metrics(fg_req_t *req);
int fg_api_openapi(fg_req_t *req);
int fg_api_docs(fg_req_t *req);
int fg_api_whoami(fg_req_t *req);

/* The read APIs, served from Redis alone (src/api/pods.c, workloads.c, platform.c). */
int fg_api_list_pods(fg_req_t *req);
int fg_api_get_pod(fg_req_t *req);
int fg_api_list_apps(fg_req_t *req);
int fg_api_get_app(fg_req_t *req);
int fg_api_list_jobsets(fg_req_t *req);
int fg_api_get_jobset(fg_req_t *req);
int fg_api_list_cronjobs(fg_req_t *req);
int fg_api_get_cronjob(fg_req_t *req);
int fg_api_list_scalers(fg_req_t *req);
int fg_api_get_scaler(fg_req_t *req);
int fg_api_list_projects(fg_req_t *req);
int fg_api_get_project(fg_req_t *req);
int fg_api_list_clusters(fg_req_t *req);

/* The write APIs: to the member clusters through fed/, answered from the cache once it shows
 * the change (src/api/projects.c, apps.c over writes.h). */
int fg_api_create_project(fg_req_t *req);
int fg_api_update_project(fg_req_t *req);
int fg_api_delete_project(fg_req_t *req);
int fg_api_create_app(fg_req_t *req);
int fg_api_delete_app(fg_req_t *req);
int fg_api_replace_app(fg_req_t *req);
int fg_api_patch_app(fg_req_t *req);
int fg_api_scale_app(fg_req_t *req);
int fg_api_pause_app(fg_req_t *req);
int fg_api_resume_app(fg_req_t *req);
int fg_api_restart_app(fg_req_t *req);
int fg_api_stop_app(fg_req_t *req);
int fg_api_get_cluster(fg_req_t *req);

/* Debug: a pod's log streamed from its cluster (src/api/logs.c), exec over WebSocket
 * (src/api/exec.c). */
int fg_api_get_pod_logs(fg_req_t *req);
int fg_api_exec_pod(fg_req_t *req);
int fg_api_get_app_logs(fg_req_t *req);
/* The one cluster pod is in (after ?cluster=) into cluster: 404 when none, 409 when several. */
bool fg_api_pod_cluster_or_reply(fg_req_t *req, const char *project, const char *pod, char *cluster,
                                 size_t len);
/* Pod writes (src/api/pods_write.c). */
int fg_api_delete_pod(fg_req_t *req);
int fg_api_restart_pod_container(fg_req_t *req);
/* Job set writes (src/api/jobsets.c). */
int fg_api_create_jobset(fg_req_t *req);
int fg_api_delete_jobset(fg_req_t *req);
int fg_api_suspend_jobset(fg_req_t *req);
int fg_api_resume_jobset(fg_req_t *req);
/* Cron job writes (src/api/cronjobs.c). */
int fg_api_create_cronjob(fg_req_t *req);
int fg_api_replace_cronjob(fg_req_t *req);
int fg_api_patch_cronjob(fg_req_t *req);
int fg_api_delete_cronjob(fg_req_t *req);
int fg_api_suspend_cronjob(fg_req_t *req);
int fg_api_resume_cronjob(fg_req_t *req);
int fg_api_trigger_cronjob(fg_req_t *req);
/* Scaler writes (src/api/scalers.c). */
int fg_api_create_scaler(fg_req_t *req);
int fg_api_replace_scaler(fg_req_t *req);
int fg_api_patch_scaler(fg_req_t *req);
int fg_api_delete_scaler(fg_req_t *req);
/* kubectl through fleetgate (src/api/kubeapi.c): discovery of /k8s/{cluster}, pods from the
 * cache as Kubernetes objects or Tables, and the kubeconfig. */
int fg_api_kube_versions(fg_req_t *req);
int fg_api_kube_groups(fg_req_t *req);
int fg_api_kube_resources(fg_req_t *req);
int fg_api_kube_version(fg_req_t *req);
int fg_api_kube_list_pods(fg_req_t *req);
int fg_api_kube_get_pod(fg_req_t *req);
int fg_api_kube_get_namespace(fg_req_t *req);
int fg_api_kube_exec_spdy(fg_req_t *req);
int fg_api_get_kubeconfig(fg_req_t *req);
/* Insights: the project's events timeline (src/api/events.c). */
int fg_api_list_events(fg_req_t *req);
/* ... and its workload history (src/api/history.c). */
int fg_api_list_history(fg_req_t *req);
/* ... and its change stream, server-sent events (src/api/changes.c). */
int fg_api_watch_changes(fg_req_t *req);
/* A boolean query flag: absent is false; true/false (any case), else 422. */
bool fg_api_flag_or_reply(fg_req_t *req, const char *name, bool *out);

#endif
