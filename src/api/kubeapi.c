/* api/kubeapi.c: the narrow Kubernetes-compatible surface that lets the real kubectl work
 * through fleetgate for one project's pods (`kubectl get pods`, `logs [-f]`, `exec [-it]`), and
 * the kubeconfig that points kubectl at it (GET /v1/projects/{project}/kubeconfig).
 *
 * Each member cluster is one Kubernetes "server" under /k8s/{cluster}: discovery
 * (/api, /api/v1, /apis, /version) names only pods and their log and exec subresources;
 * /api/v1/namespaces/{project}/pods[/{pod}] is served from the cache (no upstream GET) as a
 * core/v1 Pod rebuilt from the simplified one, or as a meta.k8s.io/v1 Table when kubectl asks
 * for server-side printing; .../log and .../exec are the same handlers as the /v1 routes (the
 * cluster comes from the path). The gate authorizes them like the rest of the API ({project} is
 * the namespace), and errors under /k8s/ are Kubernetes Status objects (http/problem.c), which
 * kubectl prints. */
#include "fleetgate/auth.h"
#include "reads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define KUBE_LIST_MAX 10000 /* pods answered by one list; a project holds fewer per cluster */
#define KUBE_PEM_MAX  (256u << 10)

/* ---- small helpers ------------------------------------------------------ */

/* The member cluster named by the path, or NULL after a 404. */
static const fg_cluster_conf_t *cluster_or_reply(fg_req_t *req) {
    const fg_config_t *cfg = ((fg_api_t *)fg_req_app(req))->cfg;
    const char *name = fg_req_param(req, "cluster");
    for (size_t i = 0; name && i < cfg->nclusters; i++)
        if (strcmp(cfg->clusters[i].name, name) == 0)
            return &cfg->clusters[i];
    fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no member cluster %.64s", name ? name : "");
    return NULL;
}

/* Unix ms of an RFC 3339 time ("2026-11-22T15:04:05Z", fractions ignored); -1 when not one. */
static int64_t time_ms(const char *s) {
    struct tm tm = {0};
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

/* An age as Kubernetes' Age columns print it (apimachinery's HumanDuration). */
static void human_age(int64_t ms, char *buf, size_t len) {
    int64_t s = ms / 1000, m = s / 60, h = m / 60, d = h / 24;
    if (s < -1)
        snprintf(buf, len, "<invalid>");
    else if (s < 0)
        snprintf(buf, len, "0s");
    else if (s < 120)
        snprintf(buf, len, "%llds", (long long)s);
    else if (m < 10 && s % 60)
        snprintf(buf, len, "%lldm%llds", (long long)m, (long long)(s % 60));
    else if (m < 180)
        snprintf(buf, len, "%lldm", (long long)m);
    else if (h < 8 && m % 60)
        snprintf(buf, len, "%lldh%lldm", (long long)h, (long long)(m % 60));
    else if (h < 48)
        snprintf(buf, len, "%lldh", (long long)h);
    else if (h < 24 * 8 && h % 24)
        snprintf(buf, len, "%lldd%lldh", (long long)d, (long long)(h % 24));
    else if (h < 24 * 365 * 2)
        snprintf(buf, len, "%lldd", (long long)d);
    else
        snprintf(buf, len, "%lldy", (long long)(d / 365));
}

static bool wants_table(const fg_req_t *req) {
    const char *accept = fg_req_header(req, "Accept");
    return accept && strstr(accept, "as=Table") && strstr(accept, "g=meta.k8s.io");
}

static int reply_kube(fg_req_t *req, json_t *body) {
    size_t len;
    char *text = fg_json_dumps(body, &len);
    json_decref(body);
    return fg_reply_take(req, 200, "application/json", text, len);
}

/* ---- a core/v1 Pod from the simplified one ------------------------------ */

static json_t *ip_objects(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *ip;
    json_array_foreach(list, i, ip) {
        if (json_is_string(ip))
            json_array_append_new(out, json_pack("{s:O}", "ip", ip));
    }
    return out;
}

/* A ContainerState ({running|waiting|terminated: {...}}) from a simplified state. */
static json_t *kube_state(const json_t *c, const char *state) {
    json_t *inner = json_object();
    rd_copy(inner, "reason", c, "reason");
    rd_copy(inner, "message", c, "message");
    rd_copy(inner, "startedAt", c, "startedAt");
    if (state && strcmp(state, "terminated") == 0) {
        json_object_set_new(inner, "exitCode", json_integer(rd_int(c, "exitCode", 0)));
        rd_copy(inner, "finishedAt", c, "finishedAt");
    }
    const char *key = state && (strcmp(state, "running") == 0 || strcmp(state, "terminated") == 0)
                          ? state
                          : "waiting";
    return json_pack("{s:o}", key, inner);
}

/* spec.containers and status.containerStatuses of one container list. */
static void kube_containers(const json_t *list, json_t *spec, json_t *statuses) {
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *name = rd_str(c, "name");
        if (name == NULL)
            continue;
        const char *image = rd_str(c, "image") ? rd_str(c, "image") : "";
        json_t *s = json_pack("{s:s,s:s}", "name", name, "image", image);
        rd_copy(s, "resources", c, "resources");
        rd_copy(s, "ports", c, "ports");
        json_array_append_new(spec, s);
        const char *state = rd_str(c, "state");
        if (state == NULL)
            continue; /* the kubelet has not reported it */
        json_t *st = json_pack("{s:s,s:s,s:b,s:I,s:b}", "name", name, "image", image, "ready",
                               json_is_true(json_object_get(c, "ready")), "restartCount",
                               (json_int_t)rd_int(c, "restarts", 0), "started",
                               strcmp(state, "running") == 0);
        rd_copy(st, "imageID", c, "imageID");
        json_object_set_new(st, "state", kube_state(c, state));
        json_t *last = json_object_get(c, "lastTermination");
        json_object_set_new(st, "lastState",
                            json_is_object(last) ? kube_state(last, "terminated") : json_object());
        json_array_append_new(statuses, st);
    }
}

static json_t *kube_conditions(const json_t *p) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(p, "conditions"), i, c) {
        if (rd_str(c, "type") == NULL || rd_str(c, "status") == NULL)
            continue;
        json_t *o = json_object();
        rd_copy(o, "type", c, "type");
        rd_copy(o, "status", c, "status");
        rd_copy(o, "reason", c, "reason");
        rd_copy(o, "message", c, "message");
        rd_copy(o, "lastTransitionTime", c, "since");
        json_array_append_new(out, o);
    }
    return out;
}

/* The metadata kubectl shows (and the Table's PartialObjectMetadata). */
static json_t *kube_metadata(const json_t *p) {
    json_t *md = json_object();
    rd_copy(md, "name", p, "name");
    rd_copy(md, "namespace", p, "project");
    rd_copy(md, "uid", p, "uid");
    rd_copy(md, "resourceVersion", p, "version");
    rd_copy(md, "creationTimestamp", p, "creationTime");
    rd_copy(md, "deletionTimestamp", p, "deletionTime");
    rd_copy(md, "labels", p, "labels");
    /* which member cluster it is in, as fleetgate's own Pod says it */
    json_object_set_new(md, "annotations",
                        json_pack("{s:s}", "fleetgate.io/cluster",
                                  rd_str(p, "cluster") ? rd_str(p, "cluster") : ""));
    return md;
}

static json_t *kube_pod(const json_t *p) {
    json_t *spec = json_object(), *status = json_object();
    json_t *containers = json_array(), *statuses = json_array();
    kube_containers(json_object_get(p, "containers"), containers, statuses);
    json_object_set_new(spec, "containers", containers);
    json_object_set_new(status, "containerStatuses", statuses);
    if (json_array_size(json_object_get(p, "initContainers"))) {
        json_t *ic = json_array(), *ist = json_array();
        kube_containers(json_object_get(p, "initContainers"), ic, ist);
        json_object_set_new(spec, "initContainers", ic);
        json_object_set_new(status, "initContainerStatuses", ist);
    }
    rd_copy(spec, "nodeName", p, "node");
    json_object_set_new(status, "phase",
                        json_string(rd_str(p, "phase") ? rd_str(p, "phase") : "Unknown"));
    rd_copy(status, "reason", p, "reason");
    rd_copy(status, "message", p, "message");
    json_object_set_new(status, "conditions", kube_conditions(p));
    json_t *ips = json_object_get(p, "podIPs"), *hips = json_object_get(p, "hostIPs");
    if (json_is_string(json_array_get(ips, 0)))
        json_object_set(status, "podIP", json_array_get(ips, 0));
    json_object_set_new(status, "podIPs", ip_objects(ips));
    if (json_is_string(json_array_get(hips, 0)))
        json_object_set(status, "hostIP", json_array_get(hips, 0));
    json_object_set_new(status, "hostIPs", ip_objects(hips));
    rd_copy(status, "qosClass", p, "qosClass");
    rd_copy(status, "startTime", p, "startTime");
    return json_pack("{s:s,s:s,s:o,s:o,s:o}", "apiVersion", "v1", "kind", "Pod", "metadata",
                     kube_metadata(p), "spec", spec, "status", status);
}

/* ---- the Table kubectl prints ------------------------------------------- */

static const struct {
    const char *name, *type, *format, *description;
    int priority; /* 1: only with -o wide */
} pod_columns[] = {
    {"Name", "string", "name", "Name of the pod.", 0},
    {"Ready", "string", "", "Ready containers of all containers.", 0},
    {"Status", "string", "", "The pod's state, or why it is not running.", 0},
    {"Restarts", "string", "", "Restarts of its containers.", 0},
    {"Age", "string", "", "Time since it was created.", 0},
    {"IP", "string", "", "The pod's IP address.", 1},
    {"Node", "string", "", "The node it runs on.", 1},
    {"Nominated Node", "string", "", "The node preemption nominated.", 1},
    {"Readiness Gates", "string", "", "Readiness gates met.", 1},
};

/* The Status column: the phase, unless a container or the pod says more (as kubectl does). */
static const char *pod_reason(const json_t *p) {
    const char *reason = rd_str(p, "reason") ? rd_str(p, "reason") : rd_str(p, "phase");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(p, "containers"), i, c) {
        const char *state = rd_str(c, "state");
        if (state && strcmp(state, "running") != 0 && rd_str(c, "reason"))
            reason = rd_str(c, "reason");
    }
    if (rd_str(p, "deletionTime"))
        reason = "Terminating";
    return reason ? reason : "Unknown";
}

static json_t *pod_row(const json_t *p, int64_t now_ms) {
    size_t ready = 0, total = 0, i;
    json_int_t restarts = 0;
    json_t *c;
    json_array_foreach(json_object_get(p, "containers"), i, c) {
        total++;
        ready += json_is_true(json_object_get(c, "ready"));
        restarts += rd_int(c, "restarts", 0);
    }
    char ready_s[48], restarts_s[24], age[32];
    snprintf(ready_s, sizeof ready_s, "%zu/%zu", ready, total);
    snprintf(restarts_s, sizeof restarts_s, "%lld", (long long)restarts);
    int64_t created = time_ms(rd_str(p, "creationTime"));
    if (created < 0)
        snprintf(age, sizeof age, "<unknown>");
    else
        human_age(now_ms - created, age, sizeof age);
    const char *ip = json_string_value(json_array_get(json_object_get(p, "podIPs"), 0));
    const char *node = rd_str(p, "node");
    json_t *cells = json_pack("[s,s,s,s,s,s,s,s,s]", rd_str(p, "name") ? rd_str(p, "name") : "",
                              ready_s, pod_reason(p), restarts_s, age, ip ? ip : "<none>",
                              node ? node : "<none>", "<none>", "<none>");
    json_t *object = json_pack("{s:s,s:s,s:o}", "kind", "PartialObjectMetadata", "apiVersion",
                               "meta.k8s.io/v1", "metadata", kube_metadata(p));
    return json_pack("{s:o,s:o}", "cells", cells, "object", object);
}

/* pods (borrowed simplified pods) as a Table, or a PodList. */
static json_t *pods_answer(const fg_req_t *req, json_t *const *pods, size_t n, bool list) {
    if (!wants_table(req)) {
        if (!list)
            return kube_pod(pods[0]);
        json_t *items = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(items, kube_pod(pods[i]));
        return json_pack("{s:s,s:s,s:{},s:o}", "apiVersion", "v1", "kind", "PodList", "metadata",
                         "items", items);
    }
    json_t *cols = json_array(), *rows = json_array();
    for (size_t i = 0; i < sizeof pod_columns / sizeof pod_columns[0]; i++)
        json_array_append_new(
            cols, json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", pod_columns[i].name, "type",
                            pod_columns[i].type, "format", pod_columns[i].format, "description",
                            pod_columns[i].description, "priority", pod_columns[i].priority));
    int64_t now = fg_wall_ms();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rows, pod_row(pods[i], now));
    return json_pack("{s:s,s:s,s:{},s:o,s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1",
                     "metadata", "columnDefinitions", cols, "rows", rows);
}

/* ---- discovery ---------------------------------------------------------- */

int fg_api_kube_versions(fg_req_t *req) {
    if (cluster_or_reply(req) == NULL)
        return FG_OK;
    return reply_kube(req, json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions", "versions",
                                     "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                     "serverAddress", ""));
}

int fg_api_kube_groups(fg_req_t *req) {
    if (cluster_or_reply(req) == NULL)
        return FG_OK;
    return reply_kube(
        req, json_pack("{s:s,s:s,s:[]}", "kind", "APIGroupList", "apiVersion", "v1", "groups"));
}

int fg_api_kube_resources(fg_req_t *req) {
    if (cluster_or_reply(req) == NULL)
        return FG_OK;
    json_t *pods =
        json_pack("{s:s,s:s,s:b,s:s,s:[s,s],s:[s]}", "name", "pods", "singularName", "pod",
                  "namespaced", true, "kind", "Pod", "verbs", "get", "list", "shortNames", "po");
    json_t *log = json_pack("{s:s,s:s,s:b,s:s,s:[s]}", "name", "pods/log", "singularName", "",
                            "namespaced", true, "kind", "Pod", "verbs", "get");
    json_t *exec =
        json_pack("{s:s,s:s,s:b,s:s,s:[s,s]}", "name", "pods/exec", "singularName", "",
                  "namespaced", true, "kind", "PodExecOptions", "verbs", "create", "get");
    return reply_kube(req,
                      json_pack("{s:s,s:s,s:s,s:[o,o,o]}", "kind", "APIResourceList", "apiVersion",
                                "v1", "groupVersion", "v1", "resources", pods, log, exec));
}

int fg_api_kube_version(fg_req_t *req) {
    if (cluster_or_reply(req) == NULL)
        return FG_OK;
    return reply_kube(req, json_pack("{s:s,s:s,s:s,s:s,s:s}", "major", "1", "minor", "32",
                                     "gitVersion", "v1.32.0+fleetgate." FG_VERSION, "platform",
                                     "linux/amd64", "goVersion", "none"));
}

/* ---- pods --------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
    const char *x = rd_str(*(json_t *const *)a, "name"), *y = rd_str(*(json_t *const *)b, "name");
    return strcmp(x ? x : "", y ? y : "");
}

/* Every pod of the project in the cluster (an HSCAN of its object hash), filtered by sel, into
 * pods (new references). false after a 503 when Redis cannot answer. */
static bool scan_pods_or_reply(fg_req_t *req, const char *cluster, const char *project,
                               const rd_selector_t *sel, json_t **pods, size_t *n) {
    fg_api_t *api = fg_req_app(req);
    fg_cache_key_t k;
    const char *key = fg_cache_key_objects(&k, "pod", cluster, project);
    char cursor[32] = "0";
    *n = 0;
    for (;;) {
        const char *argv[] = {"HSCAN", key, cursor, "COUNT", "500"};
        fg_redis_reply_t *r = NULL;
        if (fg_redis_query(api->redis, 5, argv, &r, NULL, 0) != FG_OK ||
            fg_redis_reply_len(r) != 2) {
            fg_redis_reply_free(r);
            fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE, "the cache cannot list pods now");
            return false;
        }
        const fg_redis_reply_t *kv = fg_redis_reply_at(r, 1);
        for (size_t i = 1; i < fg_redis_reply_len(kv) && *n < KUBE_LIST_MAX; i += 2) {
            size_t vlen;
            const char *v = fg_redis_reply_str(fg_redis_reply_at(kv, i), &vlen);
            json_t *o = v ? rd_parse_cached(v, vlen, fg_req_id(req)) : NULL;
            if (o && (sel == NULL || rd_selector_match(sel, json_object_get(o, "labels"))))
                pods[(*n)++] = o;
            else
                json_decref(o);
        }
        size_t clen = 0;
        const char *c = fg_redis_reply_str(fg_redis_reply_at(r, 0), &clen);
        bool done = c == NULL || clen == 0 || clen >= sizeof cursor || (clen == 1 && c[0] == '0') ||
                    *n >= KUBE_LIST_MAX;
        if (!done)
            snprintf(cursor, sizeof cursor, "%.*s", (int)clen, c);
        fg_redis_reply_free(r);
        if (done)
            return true;
    }
}

int fg_api_kube_list_pods(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    const fg_cluster_conf_t *cl = cluster_or_reply(req);
    rd_selector_t *sel = NULL;
    rd_ctx_t c;
    if (cl == NULL || !rd_selector_or_reply(req, &sel))
        return FG_OK;
    json_t **pods = NULL;
    size_t n = 0;
    if (!rd_begin_or_reply(&c, req, "pod", "pods", project, cl->name, NULL))
        goto out;
    if (c.nparts == 1 && c.parts[0].fresh.state == FG_FRESH_MISSING) {
        fg_req_add_header(req, "Retry-After", "5");
        fg_reply_problem(req, FG_PROBLEM_NOT_READY, "cluster %s has not synced its pods (%s)",
                         cl->name, c.parts[0].fresh.reason);
        goto out;
    }
    pods = fg_xcalloc(KUBE_LIST_MAX, sizeof *pods);
    if (!scan_pods_or_reply(req, cl->name, project, sel, pods, &n))
        goto out;
    qsort(pods, n, sizeof *pods, by_name);
    fg_auth_charge_items(req, n);
    reply_kube(req, pods_answer(req, pods, n, true));
out:
    for (size_t i = 0; i < n; i++)
        json_decref(pods[i]);
    free(pods);
    rd_selector_free(sel);
    return FG_OK;
}

int fg_api_kube_get_pod(fg_req_t *req) {
    const char *project = fg_req_param(req, "project"), *name = fg_req_param(req, "pod");
    const fg_cluster_conf_t *cl = cluster_or_reply(req);
    char *raws[RD_MAX_CLUSTERS];
    size_t lens[RD_MAX_CLUSTERS], found;
    rd_ctx_t c;
    if (cl == NULL ||
        !rd_get_raw_or_reply(&c, req, "pod", project, name, cl->name, raws, lens, &found, NULL))
        return FG_OK;
    char what[RD_NAME_MAX + 8];
    snprintf(what, sizeof what, "pod %s", name);
    json_t *pod = NULL;
    for (size_t i = 0; i < c.nparts; i++) {
        if (raws[i] && pod == NULL)
            pod = rd_parse_cached(raws[i], lens[i], fg_req_id(req));
        free(raws[i]);
    }
    if (pod)
        reply_kube(req, pods_answer(req, &pod, 1, false));
    else if (found > 0)
        fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the cached pod %s is corrupt", name);
    else if (rd_absence_known_or_reply(&c, "pods", what))
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "pods \"%s\" not found", name);
    json_decref(pod);
    return FG_OK;
}

/* The project's namespace in the cluster, from the cache (kubectl asks for it after a 404 to
 * tell a missing namespace from a missing object). */
int fg_api_kube_get_namespace(fg_req_t *req) {
    const char *project = fg_req_param(req, "project");
    const fg_cluster_conf_t *cl = cluster_or_reply(req);
    char *raws[RD_MAX_CLUSTERS];
    size_t lens[RD_MAX_CLUSTERS], found;
    rd_ctx_t c;
    if (cl == NULL ||
        !rd_get_raw_or_reply(&c, req, "project", "_", project, cl->name, raws, lens, &found, NULL))
        return FG_OK;
    for (size_t i = 0; i < c.nparts; i++)
        free(raws[i]);
    char what[RD_NAME_MAX + 16];
    snprintf(what, sizeof what, "namespace %s", project);
    if (found > 0)
        return reply_kube(req, json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind",
                                         "Namespace", "metadata", "name", project, "status",
                                         "phase", "Active"));
    if (rd_absence_known_or_reply(&c, "namespaces", what))
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "namespaces \"%s\" not found", project);
    return FG_OK;
}

/* kubectl falls back to SPDY (a POST) when the WebSocket exec fails: say what fleetgate speaks. */
int fg_api_kube_exec_spdy(fg_req_t *req) {
    return fg_reply_problem(req, FG_PROBLEM_BAD_REQUEST,
                            "fleetgate relays exec over WebSocket only (v5.channel.k8s.io or "
                            "v4.channel.k8s.io: kubectl 1.30 or later), not SPDY");
}

/* ---- the kubeconfig ----------------------------------------------------- */

/* Standard base64 (with padding) of n bytes, from the base64url encoder: a new string. */
static char *base64_std(const void *in, size_t n) {
    size_t len = FG_B64URL_LEN(n);
    char *out = fg_xmalloc(len + 4);
    fg_b64url_encode(in, n, out);
    for (size_t i = 0; i < len; i++)
        out[i] = out[i] == '-' ? '+' : out[i] == '_' ? '/' : out[i];
    while (len % 4)
        out[len++] = '=';
    out[len] = '\0';
    return out;
}

/* A YAML scalar written as a JSON string (JSON is YAML): quoted and escaped. */
static void yaml_str(fg_buf_t *b, const char *s) {
    json_t *j = json_string(s);
    char *t = json_dumps(j, JSON_ENCODE_ANY);
    fg_buf_append(b, t, strlen(t));
    free(t);
    json_decref(j);
}

int fg_api_get_kubeconfig(fg_req_t *req) {
    fg_api_t *api = fg_req_app(req);
    const fg_config_t *cfg = api->cfg;
    const char *project = fg_req_param(req, "project");
    bool embed;
    if (!rd_name_or_reply(req, project) || !fg_api_flag_or_reply(req, "embedToken", &embed))
        return FG_OK;
    if (cfg->tls.cert_file == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND,
                                "this fleetgate has no TLS listener (tls.cert_file), so kubectl "
                                "cannot reach it");
    char *ca = NULL, *ca64 = NULL, *url = NULL;
    size_t calen = 0;
    if (cfg->tls.ca_file && fg_read_file(cfg->tls.ca_file, KUBE_PEM_MAX, &ca, &calen) != FG_OK)
        return fg_reply_problem(req, FG_PROBLEM_INTERNAL, "tls.ca_file cannot be read");
    ca64 = ca ? base64_std(ca, calen) : NULL;
    url = cfg->tls.advertise_url ? fg_xstrdup(cfg->tls.advertise_url)
                                 : fg_xasprintf("https://%s", cfg->tls.listen);
    size_t ul = strlen(url);
    while (ul > 0 && url[ul - 1] == '/')
        url[--ul] = '\0';
    fg_buf_t b;
    fg_buf_init(&b, 1u << 22);
    fg_buf_appendf(&b, "apiVersion: v1\nkind: Config\nclusters:\n");
    for (size_t i = 0; i < cfg->nclusters; i++) {
        char *server = fg_xasprintf("%s/k8s/%s", url, cfg->clusters[i].name);
        fg_buf_appendf(&b, "- name: fleetgate-%s\n  cluster:\n    server: ", cfg->clusters[i].name);
        yaml_str(&b, server);
        if (ca64)
            fg_buf_appendf(&b, "\n    certificate-authority-data: %s", ca64);
        fg_buf_appendf(&b, "\n");
        free(server);
    }
    fg_buf_appendf(&b, "users:\n- name: fleetgate\n  user:");
    const char *auth = fg_req_header(req, "Authorization");
    if (embed && auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        fg_buf_appendf(&b, "\n    token: ");
        yaml_str(&b, auth + 7);
        fg_buf_appendf(&b, "\n");
    } else {
        fg_buf_appendf(&b, " {}\n");
    }
    fg_buf_appendf(&b, "contexts:\n");
    for (size_t i = 0; i < cfg->nclusters; i++)
        fg_buf_appendf(&b,
                       "- name: %s@%s\n  context: {cluster: fleetgate-%s, user: fleetgate, "
                       "namespace: %s}\n",
                       project, cfg->clusters[i].name, cfg->clusters[i].name, project);
    if (cfg->nclusters > 0)
        fg_buf_appendf(&b, "current-context: %s@%s\n", project, cfg->clusters[0].name);
    size_t len;
    char *text = fg_buf_steal(&b, &len);
    fg_req_add_header(req, "Cache-Control", "no-store");
    int rc = fg_reply_take(req, 200, "application/yaml", text, len);
    free(url);
    free(ca64);
    free(ca);
    return rc;
}
