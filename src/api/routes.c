/* api/routes.c: the route table. One row per route: method, path pattern, handler, body kind
 * and limit, the permission the caller needs (fg_perm_t; a row that names none needs admin) and
 * its rate-limit class. Spec first (api/openapi.yaml), then the row here, then its test. */
#include "api_internal.h"
#include "writes.h"

/* A POST write that takes an Idempotency-Key: the handler runs under wr_idempotent. */
#define IDEMPOTENT(h)                                                                              \
    static int h##_once(fg_req_t *req) {                                                           \
        return wr_idempotent(req, h);                                                              \
    }
IDEMPOTENT(fg_api_create_project)
IDEMPOTENT(fg_api_create_app)
IDEMPOTENT(fg_api_scale_app)
IDEMPOTENT(fg_api_pause_app)
IDEMPOTENT(fg_api_resume_app)
IDEMPOTENT(fg_api_restart_app)
IDEMPOTENT(fg_api_stop_app)
IDEMPOTENT(fg_api_restart_pod_container)
IDEMPOTENT(fg_api_create_jobset)
IDEMPOTENT(fg_api_suspend_jobset)
IDEMPOTENT(fg_api_resume_jobset)
IDEMPOTENT(fg_api_create_cronjob)
IDEMPOTENT(fg_api_suspend_cronjob)
IDEMPOTENT(fg_api_resume_cronjob)
IDEMPOTENT(fg_api_trigger_cronjob)
IDEMPOTENT(fg_api_create_scaler)

/* One macro a kind of row, so a row is one line that names what differs. */
#define GET(p, h, perm_, rate_)                                                                    \
    { .method = "GET", .pattern = p, .handler = h, .perm = perm_, .rate = rate_ }
/* The meta routes: no token, no rate limit. */
#define META(p, h) GET(p, h, FG_PERM_PUBLIC, FG_RATE_NONE)
/* The read APIs (served from the cache): a get is one read; a list is charged per item. Lists
 * without a {project} are open to every caller and show only what the caller may see. */
#define READ(p, h)        GET(p, h, FG_PERM_READ, FG_RATE_READ)
#define LIST(p, h)        GET(p, h, FG_PERM_READ, FG_RATE_LIST)
#define ANY_READ(p, h, r) GET(p, h, FG_PERM_AUTHENTICATED, r)
/* Writes: a JSON body (required, optional or none), the permission, the write rate class. */
#define WRITE(m, p, h, body_, perm_)                                                               \
    { .method = m, .pattern = p, .handler = h, .body = body_, .perm = perm_, .rate = FG_RATE_WRITE }
/* Long-lived streams: each holds one of the caller's stream slots while open. */
#define STREAM(p, h, perm_) GET(p, h, perm_, FG_RATE_STREAM)

static const fg_route_t routes[] = {
    META("/healthz", fg_api_healthz),
    META("/readyz", fg_api_readyz),
    GET("/metrics", fg_api_metrics, FG_PERM_METRICS, FG_RATE_NONE),
    META("/openapi.yaml", fg_api_openapi),
    META("/docs", fg_api_docs),
    ANY_READ("/v1/whoami", fg_api_whoami, FG_RATE_READ),
    ANY_READ("/v1/projects", fg_api_list_projects, FG_RATE_LIST),
    READ("/v1/projects/{project}", fg_api_get_project),
    WRITE("POST", "/v1/projects", fg_api_create_project_once, FG_BODY_JSON, FG_PERM_ADMIN),
    WRITE("PATCH", "/v1/projects/{project}", fg_api_update_project, FG_BODY_JSON, FG_PERM_ADMIN),
    WRITE("DELETE", "/v1/projects/{project}", fg_api_delete_project, FG_BODY_NONE, FG_PERM_ADMIN),
    LIST("/v1/projects/{project}/apps", fg_api_list_apps),
    WRITE("POST", "/v1/projects/{project}/apps", fg_api_create_app_once, FG_BODY_JSON,
          FG_PERM_WRITE),
    READ("/v1/projects/{project}/apps/{app}", fg_api_get_app),
    WRITE("PUT", "/v1/projects/{project}/apps/{app}", fg_api_replace_app, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("PATCH", "/v1/projects/{project}/apps/{app}", fg_api_patch_app, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("DELETE", "/v1/projects/{project}/apps/{app}", fg_api_delete_app, FG_BODY_NONE,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/apps/{app}:scale", fg_api_scale_app_once, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/apps/{app}:pause", fg_api_pause_app_once, FG_BODY_NONE,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/apps/{app}:resume", fg_api_resume_app_once, FG_BODY_NONE,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/apps/{app}:restart", fg_api_restart_app_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/apps/{app}:stop", fg_api_stop_app_once, FG_BODY_NONE,
          FG_PERM_WRITE),
    STREAM("/v1/projects/{project}/apps/{app}/logs", fg_api_get_app_logs, FG_PERM_LOGS),
    LIST("/v1/projects/{project}/pods", fg_api_list_pods),
    READ("/v1/projects/{project}/pods/{pod}", fg_api_get_pod),
    STREAM("/v1/projects/{project}/pods/{pod}/logs", fg_api_get_pod_logs, FG_PERM_LOGS),
    STREAM("/v1/projects/{project}/pods/{pod}/exec", fg_api_exec_pod, FG_PERM_EXEC),
    LIST("/v1/projects/{project}/jobsets", fg_api_list_jobsets),
    READ("/v1/projects/{project}/jobsets/{jobset}", fg_api_get_jobset),
    LIST("/v1/projects/{project}/cronjobs", fg_api_list_cronjobs),
    READ("/v1/projects/{project}/cronjobs/{cronjob}", fg_api_get_cronjob),
    LIST("/v1/projects/{project}/scalers", fg_api_list_scalers),
    READ("/v1/projects/{project}/scalers/{scaler}", fg_api_get_scaler),
    ANY_READ("/v1/clusters", fg_api_list_clusters, FG_RATE_LIST),
    ANY_READ("/v1/clusters/{cluster}", fg_api_get_cluster, FG_RATE_READ),
    WRITE("DELETE", "/v1/projects/{project}/pods/{pod}", fg_api_delete_pod, FG_BODY_NONE,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/pods/{pod}:restart-container",
          fg_api_restart_pod_container_once, FG_BODY_JSON, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/jobsets", fg_api_create_jobset_once, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("DELETE", "/v1/projects/{project}/jobsets/{jobset}", fg_api_delete_jobset, FG_BODY_NONE,
          FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/jobsets/{jobset}:suspend", fg_api_suspend_jobset_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/jobsets/{jobset}:resume", fg_api_resume_jobset_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/cronjobs", fg_api_create_cronjob_once, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("PUT", "/v1/projects/{project}/cronjobs/{cronjob}", fg_api_replace_cronjob, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("PATCH", "/v1/projects/{project}/cronjobs/{cronjob}", fg_api_patch_cronjob, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("DELETE", "/v1/projects/{project}/cronjobs/{cronjob}", fg_api_delete_cronjob,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/cronjobs/{cronjob}:suspend", fg_api_suspend_cronjob_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/cronjobs/{cronjob}:resume", fg_api_resume_cronjob_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/cronjobs/{cronjob}:trigger", fg_api_trigger_cronjob_once,
          FG_BODY_NONE, FG_PERM_WRITE),
    WRITE("POST", "/v1/projects/{project}/scalers", fg_api_create_scaler_once, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("PUT", "/v1/projects/{project}/scalers/{scaler}", fg_api_replace_scaler, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("PATCH", "/v1/projects/{project}/scalers/{scaler}", fg_api_patch_scaler, FG_BODY_JSON,
          FG_PERM_WRITE),
    WRITE("DELETE", "/v1/projects/{project}/scalers/{scaler}", fg_api_delete_scaler, FG_BODY_NONE,
          FG_PERM_WRITE),
    /* kubectl through fleetgate (kubeapi.c): one Kubernetes server per member cluster. */
    GET("/v1/projects/{project}/kubeconfig", fg_api_get_kubeconfig, FG_PERM_LOGS, FG_RATE_READ),
    ANY_READ("/k8s/{cluster}/api", fg_api_kube_versions, FG_RATE_READ),
    ANY_READ("/k8s/{cluster}/apis", fg_api_kube_groups, FG_RATE_READ),
    ANY_READ("/k8s/{cluster}/api/v1", fg_api_kube_resources, FG_RATE_READ),
    ANY_READ("/k8s/{cluster}/version", fg_api_kube_version, FG_RATE_READ),
    READ("/k8s/{cluster}/api/v1/namespaces/{project}", fg_api_kube_get_namespace),
    LIST("/k8s/{cluster}/api/v1/namespaces/{project}/pods", fg_api_kube_list_pods),
    READ("/k8s/{cluster}/api/v1/namespaces/{project}/pods/{pod}", fg_api_kube_get_pod),
    STREAM("/k8s/{cluster}/api/v1/namespaces/{project}/pods/{pod}/log", fg_api_get_pod_logs,
           FG_PERM_LOGS),
    STREAM("/k8s/{cluster}/api/v1/namespaces/{project}/pods/{pod}/exec", fg_api_exec_pod,
           FG_PERM_EXEC),
    {.method = "POST",
     .pattern = "/k8s/{cluster}/api/v1/namespaces/{project}/pods/{pod}/exec",
     .handler = fg_api_kube_exec_spdy,
     .body = FG_BODY_NONE,
     .perm = FG_PERM_EXEC,
     .rate = FG_RATE_READ},
    LIST("/v1/projects/{project}/events", fg_api_list_events),
    STREAM("/v1/projects/{project}/changes", fg_api_watch_changes, FG_PERM_READ),
    LIST("/v1/projects/{project}/history", fg_api_list_history),
};

const fg_route_t *fg_api_routes(size_t *n) {
    *n = sizeof routes / sizeof routes[0];
    return routes;
}
