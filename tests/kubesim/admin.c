/* admin: the /_kubesim/ API each simulated cluster serves beside its Kubernetes paths (same port,
 * same bearer token, JSON bodies): request statistics, fault injection (latency, error rate,
 * down), cutting every open watch, compacting the change history, seeding at scale and a churn of
 * pod mutations. Routes are a table; faults never apply to these paths, so a test can always
 * bring a "down" cluster back. Shapes are documented in README.md ("Admin API"). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

#define SEED_MAX_NODES    100000
#define SEED_MAX_PODS     2000000
#define PODS_PER_WORKLOAD 10
#define SEED_THREADS      4
#define CHURN_TICK_MS     10
#define CHURN_REFRESH_MS  5000
#define CHURN_MAX_PER_MIN 6000000
#define SEEDED_ANNOTATION "kubesim.io/seeded"
#define FAULT_MAX_LATENCY 600000

typedef void (*admin_fn)(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);

static const char *const VERB_NAMES[KS_NVERBS] = {"list",   "watch", "get",   "create",
                                                  "update", "patch", "delete"};

/* ---- small helpers --------------------------------------------------------- */

static void bad_request(ks_resp_t *out, const char *msg) {
    ks_status_reply(out, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
}

/* Parses the JSON object body (an empty body is {}); FG_EINVAL with a 400 Status in out. */
static int body_or_reply(const ks_req_t *req, json_t **obj, ks_resp_t *out) {
    char err[160], msg[200];
    if (req->body_len == 0) {
        *obj = json_object();
        return FG_OK;
    }
    if (fg_json_load(req->body, req->body_len, obj, err, sizeof(err)) != FG_OK) {
        snprintf(msg, sizeof(msg), "body: %s", err);
        bad_request(out, msg);
        return FG_EINVAL;
    }
    if (!json_is_object(*obj)) {
        json_decref(*obj);
        *obj = NULL;
        bad_request(out, "body: must be a JSON object");
        return FG_EINVAL;
    }
    return FG_OK;
}

/* Reads an optional integer field in [min, max] (absent keeps *v); FG_EINVAL with a 400. */
static int int_field_or_reply(json_t *o, const char *key, int64_t min, int64_t max, int64_t *v,
                              ks_resp_t *out) {
    json_t *j = json_object_get(o, key);
    char msg[160];
    if (j == NULL)
        return FG_OK;
    if (!json_is_integer(j) || json_integer_value(j) < min || json_integer_value(j) > max) {
        snprintf(msg, sizeof(msg), "%s: must be an integer in [%lld, %lld]", key, (long long)min,
                 (long long)max);
        bad_request(out, msg);
        return FG_EINVAL;
    }
    *v = json_integer_value(j);
    return FG_OK;
}

static int ns_field_or_reply(json_t *o, const char **ns, ks_resp_t *out) {
    json_t *j = json_object_get(o, "namespace");
    if (j == NULL)
        return FG_OK;
    const char *s = json_string_value(j);
    if (s == NULL || !fg_is_dns1123_label(s, strlen(s))) {
        bad_request(out, "namespace: must be a DNS-1123 label");
        return FG_EINVAL;
    }
    *ns = s;
    return FG_OK;
}

static void ok_reply(ks_resp_t *out) {
    ks_json_reply(out, 200, json_pack("{s:s}", "status", "ok"));
}

/* ---- stats ------------------------------------------------------------------ */

static void stats_get(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    char rv[24];
    json_t *reqs = json_object(), *objs = json_object();
    (void)req;
    for (int v = 0; v < KS_NVERBS; v++)
        json_object_set_new(
            reqs, VERB_NAMES[v],
            json_integer((json_int_t)__atomic_load_n(&c->requests[v], __ATOMIC_RELAXED)));
    for (size_t i = 0; i < ks_nresources; i++)
        json_object_set_new(objs, ks_resources[i].plural,
                            json_integer((json_int_t)ks_store_count(c->store, (int)i)));
    snprintf(rv, sizeof(rv), "%lld", (long long)ks_store_rv(c->store));
    ks_json_reply(out, 200,
                  json_pack("{s:s, s:s, s:o, s:o}", "cluster", c->name, "resourceVersion", rv,
                            "requests", reqs, "objects", objs));
}

static void stats_reset(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    (void)req;
    for (int v = 0; v < KS_NVERBS; v++)
        __atomic_store_n(&c->requests[v], 0, __ATOMIC_RELAXED);
    ok_reply(out);
}

/* ---- faults ----------------------------------------------------------------- */

static json_t *faults_json(ks_cluster_t *c) {
    pthread_mutex_lock(&c->admin_mu);
    ks_faults_t f = c->faults;
    pthread_mutex_unlock(&c->admin_mu);
    return json_pack("{s:I, s:f, s:i, s:b}", "latencyMs", (json_int_t)f.latency_ms, "errorRate",
                     f.error_rate, "errorStatus", f.error_status, "down", f.down);
}

static void faults_get(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    (void)req;
    ks_json_reply(out, 200, faults_json(c));
}

/* Ends every open watch of c: they compare their generation with cut_gen when woken. */
static void cut_watches(ks_cluster_t *c) {
    __atomic_add_fetch(&c->cut_gen, 1, __ATOMIC_SEQ_CST);
    ks_store_kick(c->store);
}

static void faults_set(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    json_t *b = NULL;
    ks_faults_t f = {.error_status = 503};
    int64_t status = 503;
    if (body_or_reply(req, &b, out) != FG_OK)
        return;
    json_t *rate = json_object_get(b, "errorRate");
    json_t *down = json_object_get(b, "down");
    if (int_field_or_reply(b, "latencyMs", 0, FAULT_MAX_LATENCY, &f.latency_ms, out) != FG_OK ||
        int_field_or_reply(b, "errorStatus", 400, 599, &status, out) != FG_OK)
        goto out;
    if (rate != NULL &&
        (!json_is_number(rate) || json_number_value(rate) < 0.0 || json_number_value(rate) > 1.0)) {
        bad_request(out, "errorRate: must be a number in [0, 1]");
        goto out;
    }
    if (down != NULL && !json_is_boolean(down)) {
        bad_request(out, "down: must be a boolean");
        goto out;
    }
    f.error_rate = rate ? json_number_value(rate) : 0.0;
    f.error_status = (int)status;
    f.down = json_is_true(down);
    pthread_mutex_lock(&c->admin_mu);
    bool was_down = c->faults.down;
    c->faults = f;
    pthread_mutex_unlock(&c->admin_mu);
    if (f.down && !was_down)
        cut_watches(c); /* a server that goes away takes its watches with it */
    ks_json_reply(out, 200, faults_json(c));
out:
    json_decref(b);
}

static const struct {
    int code;
    const char *reason;
} FAULT_REASONS[] = {
    {429, "TooManyRequests"}, {500, "InternalError"}, {503, "ServiceUnavailable"},
    {504, "Timeout"},         {409, "Conflict"},      {403, "Forbidden"},
};

static double random_unit(void) {
    uint32_t r = 0;
    fg_random_bytes(&r, sizeof(r));
    return (double)r / 4294967296.0;
}

int ks_faults_apply(ks_cluster_t *c, ks_resp_t *out) {
    pthread_mutex_lock(&c->admin_mu);
    ks_faults_t f = c->faults;
    pthread_mutex_unlock(&c->admin_mu);
    if (f.down) {
        out->drop = true;
        return FG_EIO;
    }
    if (f.latency_ms > 0) {
        struct timespec ts = {.tv_sec = f.latency_ms / 1000,
                              .tv_nsec = (long)(f.latency_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (f.error_rate <= 0.0 || random_unit() >= f.error_rate)
        return FG_OK;
    const char *reason = "InternalError";
    for (size_t i = 0; i < sizeof(FAULT_REASONS) / sizeof(FAULT_REASONS[0]); i++) {
        if (FAULT_REASONS[i].code == f.error_status)
            reason = FAULT_REASONS[i].reason;
    }
    ks_status_reply(out, f.error_status, reason, "kubesim: injected fault", NULL, NULL, NULL, NULL);
    return FG_EIO;
}

/* ---- cut-watches, compact ---------------------------------------------------- */

static void cut_watches_post(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    (void)req;
    cut_watches(c);
    ok_reply(out);
}

/* POST /_kubesim/clock {"offsetSeconds": N}: the controllers' clock runs N s ahead of the wall
 * clock from now on (tests move time: cron schedules, run times). */
static void clock_post(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    json_t *b = NULL;
    int64_t off = 0;
    if (body_or_reply(req, &b, out) != FG_OK)
        return;
    if (int_field_or_reply(b, "offsetSeconds", -31536000, 31536000, &off, out) == FG_OK) {
        __atomic_store_n(&c->clock_offset_s, off, __ATOMIC_RELAXED);
        ks_json_reply(out, 200,
                      json_pack("{s:s, s:I}", "status", "ok", "offsetSeconds", (json_int_t)off));
    }
    json_decref(b);
}

static void compact_post(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    char rv[24];
    (void)req;
    ks_store_compact(c->store);
    snprintf(rv, sizeof(rv), "%lld", (long long)ks_store_oldest_rv(c->store));
    ks_json_reply(out, 200, json_pack("{s:s, s:s}", "status", "ok", "compactedTo", rv));
}

/* ---- seeding ----------------------------------------------------------------- */

static void rfc3339(time_t t, char *buf, size_t len) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A deterministic uid from (kind tag, cluster-unique index): seeding needs no randomness. */
static void seed_uid(char tag, uint64_t seed, uint64_t i, char *buf, size_t len) {
    uint64_t h = (seed * 0x9e3779b97f4a7c15ULL) ^ (i * 0xbf58476d1ce4e5b9ULL) ^ (uint64_t)tag;
    h ^= h >> 31;
    uint64_t g = h * 0x94d049bb133111ebULL;
    snprintf(buf, len, "%08x-%04x-4%03x-a%03x-%012llx", (unsigned)(h >> 32), (unsigned)(h & 0xffff),
             (unsigned)((g >> 20) & 0xfff), (unsigned)(g & 0xfff),
             (unsigned long long)((g >> 16) & 0xffffffffffffULL) ^ (unsigned long long)i);
}

static void b36(uint64_t v, char *buf, size_t n) {
    static const char DIG[] = "bcdfghjklmnpqrstvwxz2456789";
    for (size_t i = 0; i < n; i++) {
        buf[n - 1 - i] = DIG[v % 27];
        v /= 27;
    }
    buf[n] = '\0';
}

/* Stores obj (stolen; its metadata.resourceVersion is "") as a raw object: only its text is
 * kept, which is what makes 120k pods fit in a few hundred MB. An existing key is left alone. */
static int put_seeded(ks_cluster_t *c, const char *kind, const char *ns, const char *name,
                      json_t *obj) {
    int res = ks_resource_by_kind(kind);
    char key[256];
    size_t len = 0;
    snprintf(key, sizeof(key), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
    char *ser = fg_json_dumps(obj, &len);
    json_decref(obj);
    int rc = ks_store_put_raw(c->store, res, key, ser, len);
    return rc == KS_EEXIST ? FG_OK : rc;
}

static void ensure_namespace(ks_cluster_t *c, const char *ns) {
    char path[160], body[256];
    ks_resp_t r;
    snprintf(path, sizeof(path), "/api/v1/namespaces");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/metadata.name\":\"%s\"}}}",
             ns, ns);
    ks_req_t req = {.method = "POST",
                    .path = path,
                    .body = body,
                    .body_len = strlen(body),
                    .content_type = "application/json",
                    .user_agent = "kubectl/v1.32.0"};
    ks_handle_internal(c, &req, &r);
    ks_resp_free(&r);
}

/* The parts every seeded object of one seeding shares (jansson reference counts are atomic and
 * stored objects are never modified in place, so sharing subtrees is safe and saves memory). */
typedef struct {
    const char *ns;
    char ts[32];
    uint64_t seed;
    json_t *pod_managed;
    json_t *containers;
    json_t *tolerations;
    json_t *node_managed;
    json_t *node_images;
    char *pod_managed_txt; /* the shared parts as text, for the rendered pods */
    char *containers_txt;
    char *tolerations_txt;
    char *conditions_txt;
} seed_ctx_t;

static json_t *managed_entry(const char *manager, const char *ts, const char *sub, json_t *f) {
    json_t *e =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "manager", manager, "operation", "Update",
                  "apiVersion", "v1", "time", ts, "fieldsType", "FieldsV1", "fieldsV1", f);
    if (sub != NULL)
        json_object_set_new(e, "subresource", json_string(sub));
    return e;
}

static void seed_ctx_init(seed_ctx_t *s, const char *ns, time_t now) {
    s->ns = ns;
    rfc3339(now, s->ts, sizeof(s->ts));
    s->seed = (uint64_t)now;
    s->containers = json_pack(
        "[{s:s, s:s, s:[{s:s, s:i, s:s}], s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:s, s:s, s:s}]", "name",
        "app", "image", "registry.example.com/shop/app:1.42.0", "ports", "name", "http",
        "containerPort", 8080, "protocol", "TCP", "resources", "requests", "cpu", "100m", "memory",
        "128Mi", "limits", "cpu", "500m", "memory", "256Mi", "terminationMessagePath",
        "/dev/termination-log", "terminationMessagePolicy", "File", "imagePullPolicy",
        "IfNotPresent");
    s->tolerations =
        json_pack("[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}]", "key",
                  "node.kubernetes.io/not-ready", "operator", "Exists", "effect", "NoExecute",
                  "tolerationSeconds", 300, "key", "node.kubernetes.io/unreachable", "operator",
                  "Exists", "effect", "NoExecute", "tolerationSeconds", 300);
    s->pod_managed = json_pack(
        "[o, o]",
        managed_entry("kube-controller-manager", s->ts, NULL,
                      json_pack("{s:{s:{s:{}, s:{}}, s:{}}, s:{s:{}, s:{}}}", "f:metadata",
                                "f:labels", ".", "f:app", "f:ownerReferences", "f:spec",
                                "f:containers", "f:restartPolicy")),
        managed_entry("kubelet", s->ts, "status",
                      json_pack("{s:{s:{}, s:{}, s:{}, s:{}}}", "f:status", "f:conditions",
                                "f:containerStatuses", "f:phase", "f:podIP")));
    s->node_managed = json_pack("[o]", managed_entry("kubelet", s->ts, NULL,
                                                     json_pack("{s:{s:{}, s:{}}}", "f:metadata",
                                                               "f:labels", "f:annotations")));
    s->node_images = json_pack("[{s:[s], s:I}]", "names", "registry.example.com/shop/app:1.42.0",
                               "sizeBytes", (json_int_t)48213375);
    json_t *conds = json_array();
    static const char *const TYPES[] = {"PodReadyToStartContainers", "Initialized", "Ready",
                                        "ContainersReady", "PodScheduled"};
    for (size_t k = 0; k < 5; k++)
        json_array_append_new(conds,
                              json_pack("{s:s, s:s, s:n, s:s}", "type", TYPES[k], "status", "True",
                                        "lastProbeTime", "lastTransitionTime", s->ts));
    s->conditions_txt = fg_json_dumps(conds, NULL);
    json_decref(conds);
    s->pod_managed_txt = fg_json_dumps(s->pod_managed, NULL);
    s->containers_txt = fg_json_dumps(s->containers, NULL);
    s->tolerations_txt = fg_json_dumps(s->tolerations, NULL);
}

static void seed_ctx_free(seed_ctx_t *s) {
    json_decref(s->pod_managed);
    json_decref(s->containers);
    json_decref(s->tolerations);
    json_decref(s->node_managed);
    json_decref(s->node_images);
    free(s->pod_managed_txt);
    free(s->containers_txt);
    free(s->tolerations_txt);
    free(s->conditions_txt);
}

static const char *const INSTANCE_TYPES[] = {"m5.2xlarge", "m5.4xlarge", "c5.4xlarge",
                                             "r5.2xlarge"};
static const char *const TEAMS[] = {"payments", "search", "checkout", "catalog", "identity"};

static json_t *seed_node(const ks_cluster_t *c, const seed_ctx_t *s, int64_t i, const char *name) {
    char uid[40], ip[20], zone[64];
    seed_uid('n', s->seed, (uint64_t)i, uid, sizeof(uid));
    snprintf(ip, sizeof(ip), "10.%d.%d.%d", 64 + (int)(i / 65536) % 64, (int)(i / 256) % 256,
             (int)(i % 256));
    snprintf(zone, sizeof(zone), "%s%c", c->zone, (char)('a' + i % 3));
    const char *itype = INSTANCE_TYPES[i % 4];
    json_t *conds = json_array();
    static const char *const PRESSURES[][3] = {
        {"MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
        {"DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
        {"PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
    };
    for (size_t k = 0; k < 3; k++)
        json_array_append_new(
            conds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", PRESSURES[k][0], "status",
                             "False", "lastHeartbeatTime", s->ts, "lastTransitionTime", s->ts,
                             "reason", PRESSURES[k][1], "message", PRESSURES[k][2]));
    json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Ready",
                                           "status", "True", "lastHeartbeatTime", s->ts,
                                           "lastTransitionTime", s->ts, "reason", "KubeletReady",
                                           "message", "kubelet is posting ready status"));
    json_t *res = json_pack("{s:s, s:s, s:s, s:s}", "cpu", "16", "memory", "64453876Ki", "pods",
                            "110", "ephemeral-storage", "104845292Ki");
    json_t *labels =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kubernetes.io/hostname", name,
                  "kubernetes.io/os", "linux", "kubernetes.io/arch", "amd64",
                  "node.kubernetes.io/instance-type", itype, "topology.kubernetes.io/region",
                  c->region, "topology.kubernetes.io/zone", zone, "kubesim.io/node-pool",
                  i % 10 == 0 ? "system" : "workers", "beta.kubernetes.io/os", "linux");
    json_t *node = json_pack(
        "{s:{s:s, s:s, s:s, s:s, s:o, s:{s:s, s:s}, s:O}, s:{s:s, s:s}, "
        "s:{s:O, s:O, s:o, s:[{s:s, s:s}, {s:s, s:s}], s:{s:{s:i}}, "
        "s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}, s:O}}",
        "metadata", "name", name, "uid", uid, "resourceVersion", "", "creationTimestamp", s->ts,
        "labels", labels, "annotations", "node.alpha.kubernetes.io/ttl", "0", SEEDED_ANNOTATION,
        "true", "managedFields", s->node_managed, "spec", "providerID", "kubesim://node", "podCIDR",
        "10.244.0.0/24", "status", "capacity", res, "allocatable", res, "conditions", conds,
        "addresses", "type", "InternalIP", "address", ip, "type", "Hostname", "address", name,
        "daemonEndpoints", "kubeletEndpoint", "Port", 10250, "nodeInfo", "machineID", uid,
        "systemUUID", uid, "bootID", uid, "kernelVersion", "6.1.0-27-cloud-amd64", "osImage",
        "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion", "containerd://1.7.22",
        "kubeletVersion", "v1.32.0", "kubeProxyVersion", "v1.32.0", "operatingSystem", "linux",
        "architecture", "amd64", "images", s->node_images);
    json_decref(res); /* packed twice with O (capacity, allocatable) */
    return node;
}

/* A seeded pod rendered straight to text (no jansson tree: 3x faster than pack + dump + free);
 * every string in it is generated here, so none needs escaping. Returns the malloc'd text. */
static char *seed_pod(const seed_ctx_t *s, int64_t i, const char *app, const char *hash,
                      const char *rs_uid, int64_t node_i, const char *node, char *name,
                      size_t name_len, size_t *len) {
    char uid[40], ip[20], host_ip[20], suffix[8];
    /* 4 mixed characters per workload + one per pod in it: unique within the ReplicaSet */
    b36(((uint64_t)(i / PODS_PER_WORKLOAD) + 1) * 0xbf58476d1ce4e5b9ULL >> 7, suffix, 4);
    suffix[4] = "bcdfghjklm"[i % PODS_PER_WORKLOAD];
    suffix[5] = '\0';
    snprintf(name, name_len, "%s-%s-%s", app, hash, suffix);
    seed_uid('p', s->seed, (uint64_t)i, uid, sizeof(uid));
    snprintf(ip, sizeof(ip), "10.%d.%d.%d", 128 + (int)(i / 65536) % 64, (int)(i / 256) % 256,
             (int)(i % 256));
    snprintf(host_ip, sizeof(host_ip), "10.%d.%d.%d", 64 + (int)(node_i / 65536) % 64,
             (int)(node_i / 256) % 256, (int)(node_i % 256));
    size_t cap = 4096 + strlen(s->pod_managed_txt) + strlen(s->containers_txt) +
                 strlen(s->tolerations_txt) + strlen(s->conditions_txt);
    char *out = fg_xmalloc(cap);
    int n = snprintf(
        out, cap,
        "{\"metadata\":{\"name\":\"%s\",\"generateName\":\"%s-%s-\",\"namespace\":\"%s\","
        "\"uid\":\"%s\",\"resourceVersion\":\"\",\"creationTimestamp\":\"%s\",\"labels\":{"
        "\"app\":\"%s\",\"pod-template-hash\":\"%s\",\"team\":\"%s\",\"tier\":\"%s\"},"
        "\"annotations\":{\"" SEEDED_ANNOTATION "\":\"true\"},\"ownerReferences\":[{"
        "\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"%s-%s\",\"uid\":\"%s\","
        "\"controller\":true,\"blockOwnerDeletion\":true}],\"managedFields\":%s},"
        "\"spec\":{\"containers\":%s,\"restartPolicy\":\"Always\","
        "\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
        "\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",\"nodeName\":\"%s\","
        "\"securityContext\":{},\"schedulerName\":\"default-scheduler\",\"tolerations\":%s,"
        "\"priority\":0,\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},"
        "\"status\":{\"phase\":\"Running\",\"conditions\":%s,\"hostIP\":\"%s\",\"hostIPs\":[{"
        "\"ip\":\"%s\"}],\"podIP\":\"%s\",\"podIPs\":[{\"ip\":\"%s\"}],\"startTime\":\"%s\","
        "\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"running\":{\"startedAt\":\"%s\"}},"
        "\"lastState\":{},\"ready\":true,\"restartCount\":0,\"image\":"
        "\"registry.example.com/shop/app:1.42.0\",\"imageID\":"
        "\"registry.example.com/shop/app@sha256:5e2f0c3b\",\"containerID\":"
        "\"containerd://%.36s%.28s\",\"started\":true}],\"qosClass\":\"Burstable\"}}",
        name, app, hash, s->ns, uid, s->ts, app, hash, TEAMS[(i / PODS_PER_WORKLOAD) % 5],
        i % 3 == 0 ? "frontend" : "backend", app, hash, rs_uid, s->pod_managed_txt,
        s->containers_txt, node, s->tolerations_txt, s->conditions_txt, host_ip, host_ip, ip, ip,
        s->ts, s->ts, uid, uid);
    *len = n > 0 && (size_t)n < cap ? (size_t)n : 0;
    return out;
}

/* One workload: a Deployment and its ReplicaSet owning the next pods. */
static int seed_workload(ks_cluster_t *c, const seed_ctx_t *s, int64_t w, char *app, size_t app_len,
                         char *hash, char *rs_uid) {
    char dep_uid[40], name[128];
    snprintf(app, app_len, "svc-%05lld", (long long)w);
    b36(((uint64_t)w + 1) * 0x9e3779b97f4a7c15ULL, hash, 10);
    seed_uid('d', s->seed, (uint64_t)w, dep_uid, sizeof(dep_uid));
    seed_uid('r', s->seed, (uint64_t)w, rs_uid, 40);
    json_t *sel = json_pack("{s:{s:s}}", "matchLabels", "app", app);
    json_t *tmpl = json_pack("{s:{s:{s:s}}, s:{s:O, s:s}}", "metadata", "labels", "app", app,
                             "spec", "containers", s->containers, "restartPolicy", "Always");
    json_t *dep = json_pack(
        "{s:{s:s, s:s, s:s, s:s, s:s, s:i, s:{s:s}, s:{s:s, s:s}}, s:{s:i, s:O, s:O, s:{s:s}}, "
        "s:{s:i, s:i, s:i, s:i, s:i}}",
        "metadata", "name", app, "namespace", s->ns, "uid", dep_uid, "resourceVersion", "",
        "creationTimestamp", s->ts, "generation", 1, "labels", "app", app, "annotations",
        SEEDED_ANNOTATION, "true", "deployment.kubernetes.io/revision", "1", "spec", "replicas",
        PODS_PER_WORKLOAD, "selector", sel, "template", tmpl, "strategy", "type", "RollingUpdate",
        "status", "observedGeneration", 1, "replicas", PODS_PER_WORKLOAD, "updatedReplicas",
        PODS_PER_WORKLOAD, "readyReplicas", PODS_PER_WORKLOAD, "availableReplicas",
        PODS_PER_WORKLOAD);
    snprintf(name, sizeof(name), "%s-%s", app, hash);
    json_t *rs = json_pack(
        "{s:{s:s, s:s, s:s, s:s, s:s, s:i, s:{s:s, s:s}, s:{s:s}, "
        "s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:{s:i, s:O, s:O}, s:{s:i, s:i, s:i, s:i}}",
        "metadata", "name", name, "namespace", s->ns, "uid", rs_uid, "resourceVersion", "",
        "creationTimestamp", s->ts, "generation", 1, "labels", "app", app, "pod-template-hash",
        hash, "annotations", SEEDED_ANNOTATION, "true", "ownerReferences", "apiVersion", "apps/v1",
        "kind", "Deployment", "name", app, "uid", dep_uid, "controller", 1, "blockOwnerDeletion", 1,
        "spec", "replicas", PODS_PER_WORKLOAD, "selector", sel, "template", tmpl, "status",
        "observedGeneration", 1, "replicas", PODS_PER_WORKLOAD, "readyReplicas", PODS_PER_WORKLOAD,
        "availableReplicas", PODS_PER_WORKLOAD);
    json_decref(sel);
    json_decref(tmpl);
    if (put_seeded(c, "Deployment", s->ns, app, dep) != FG_OK)
        return FG_EIO;
    return put_seeded(c, "ReplicaSet", s->ns, name, rs);
}

typedef struct {
    ks_cluster_t *c;
    const seed_ctx_t *s;
    int64_t from, to; /* pod indexes, from a multiple of PODS_PER_WORKLOAD */
    int64_t nnodes;
    int rc;
} seed_part_t;

/* Seeds pods [from, to): JSON building and serialising run outside the store's lock, so parts
 * run in parallel and only the insertions are serialised. */
static void *seed_pods(void *arg) {
    seed_part_t *p = arg;
    char app[64], hash[16], rs_uid[40], node[96], pod[160];
    p->rc = FG_OK;
    for (int64_t i = p->from; i < p->to && p->rc == FG_OK; i++) {
        if (i % PODS_PER_WORKLOAD == 0 || i == p->from)
            p->rc =
                seed_workload(p->c, p->s, i / PODS_PER_WORKLOAD, app, sizeof(app), hash, rs_uid);
        if (p->rc != FG_OK)
            break;
        int64_t node_i = i % p->nnodes;
        char key[256];
        size_t len = 0;
        snprintf(node, sizeof(node), "%s-node-%05lld", p->c->name, (long long)node_i);
        char *text = seed_pod(p->s, i, app, hash, rs_uid, node_i, node, pod, sizeof(pod), &len);
        snprintf(key, sizeof(key), "%s/%s", p->s->ns, pod);
        p->rc = ks_store_put_raw(p->c->store, ks_resource_by_kind("Pod"), key, text, len);
        if (p->rc == KS_EEXIST)
            p->rc = FG_OK;
    }
    return NULL;
}

int ks_seed(ks_cluster_t *c, const char *ns, int64_t nodes, int64_t pods) {
    seed_ctx_t s;
    char name[160];
    int rc = FG_OK;
    seed_part_t parts[SEED_THREADS];
    pthread_t threads[SEED_THREADS];
    if (nodes < 0 || nodes > SEED_MAX_NODES || pods < 0 || pods > SEED_MAX_PODS)
        return FG_EINVAL;
    if (pods > 0 && nodes == 0 && ks_store_count(c->store, ks_resource_by_kind("Node")) == 0)
        return FG_EINVAL; /* pods need somewhere to run */
    ensure_namespace(c, ns);
    seed_ctx_init(&s, ns, time(NULL));
    for (int64_t i = 0; i < nodes && rc == FG_OK; i++) {
        snprintf(name, sizeof(name), "%s-node-%05lld", c->name, (long long)i);
        rc = put_seeded(c, "Node", NULL, name, seed_node(c, &s, i, name));
    }
    int64_t per = (pods / SEED_THREADS / PODS_PER_WORKLOAD + 1) * PODS_PER_WORKLOAD;
    size_t started = 0;
    for (size_t t = 0; t < SEED_THREADS && rc == FG_OK; t++) {
        int64_t from = (int64_t)t * per;
        parts[t] = (seed_part_t){.c = c,
                                 .s = &s,
                                 .from = from < pods ? from : pods,
                                 .to = from + per < pods ? from + per : pods,
                                 .nnodes = nodes > 0 ? nodes : 1};
        if (pthread_create(&threads[t], NULL, seed_pods, &parts[t]) != 0) {
            rc = FG_EIO;
            break;
        }
        started++;
    }
    for (size_t t = 0; t < started; t++) {
        pthread_join(threads[t], NULL);
        if (parts[t].rc != FG_OK)
            rc = parts[t].rc;
    }
    seed_ctx_free(&s);
    return rc;
}

static void seed_post(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    json_t *b = NULL;
    int64_t nodes = 0, pods = 0;
    const char *ns = "demo";
    if (body_or_reply(req, &b, out) != FG_OK)
        return;
    if (int_field_or_reply(b, "nodes", 0, SEED_MAX_NODES, &nodes, out) != FG_OK ||
        int_field_or_reply(b, "pods", 0, SEED_MAX_PODS, &pods, out) != FG_OK ||
        ns_field_or_reply(b, &ns, out) != FG_OK)
        goto out;
    uint64_t t0 = fg_now_ns();
    if (ks_seed(c, ns, nodes, pods) != FG_OK) {
        bad_request(out, "seed: pods need nodes (none exist and nodes is 0)");
        goto out;
    }
    char rv[24];
    snprintf(rv, sizeof(rv), "%lld", (long long)ks_store_rv(c->store));
    ks_json_reply(out, 200,
                  json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "status", "ok", "namespace", ns,
                            "nodes", (json_int_t)nodes, "pods", (json_int_t)pods, "elapsedMs",
                            (json_int_t)((fg_now_ns() - t0) / 1000000ULL), "resourceVersion", rv));
out:
    json_decref(b);
}

/* ---- churn ------------------------------------------------------------------- */

struct ks_churn {
    pthread_t thread;
    ks_cluster_t *c;
    int64_t per_minute;
    char *ns;
    bool stop;
    pthread_cond_t cv;
    uint64_t done; /* mutations made */
};

static const char *const CHURN_KINDS[] = {"label", "annotation", "status"};

/* One mutation of pod o (label, annotation or a status condition's time), stored as a new
 * version the way a controller or the kubelet would write it. */
static void churn_one(ks_cluster_t *c, ks_obj_t *o, uint64_t n) {
    json_t *parsed = ks_obj_parse(o);
    json_t *j = json_deep_copy(parsed);
    json_decref(parsed);
    json_t *meta = json_object_get(j, "metadata");
    char v[32], ts[32];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)n);
    const char *kind = CHURN_KINDS[n % 3];
    if (strcmp(kind, "label") == 0) {
        json_t *l = json_object_get(meta, "labels");
        if (!json_is_object(l)) {
            l = json_object();
            json_object_set_new(meta, "labels", l);
        }
        json_object_set_new(l, "kubesim.io/churn", json_string(v));
    } else if (strcmp(kind, "annotation") == 0) {
        json_t *a = json_object_get(meta, "annotations");
        if (!json_is_object(a)) {
            a = json_object();
            json_object_set_new(meta, "annotations", a);
        }
        json_object_set_new(a, "kubesim.io/churn", json_string(v));
    } else {
        rfc3339(time(NULL), ts, sizeof(ts));
        json_t *st = json_object_get(j, "status");
        if (!json_is_object(st)) {
            st = json_object();
            json_object_set_new(j, "status", st);
        }
        json_t *conds = json_object_get(st, "conditions");
        json_t *first = json_array_get(conds, 0);
        if (json_is_object(first))
            json_object_set_new(first, "lastProbeTime", json_string(ts));
        else
            json_object_set_new(st, "startTime", json_string(ts));
    }
    /* stored raw again (text only), so a churned seeded pod stays as small as a seeded one */
    json_object_set_new(meta, "resourceVersion", json_string(""));
    size_t len = 0;
    char *text = fg_json_dumps(j, &len);
    json_decref(j);
    ks_store_update_raw(c->store, o->res, o->key, text, len, o->rv);
}

static void *churn_main(void *arg) {
    ks_churn_t *ch = arg;
    ks_cluster_t *c = ch->c;
    int pods = ks_resource_by_kind("Pod");
    ks_obj_t **items = NULL;
    size_t n = 0;
    uint64_t refreshed = 0, last = fg_now_ns();
    double owed = 0.0;
    pthread_mutex_lock(&c->admin_mu);
    while (!ch->stop && !c->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += CHURN_TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&ch->cv, &c->admin_mu, &ts);
        if (ch->stop)
            break;
        int64_t rate = ch->per_minute;
        char *ns = fg_xstrdup(ch->ns);
        pthread_mutex_unlock(&c->admin_mu);
        uint64_t now = fg_now_ns();
        owed += (double)rate * (double)(now - last) / 60e9;
        last = now;
        if (items == NULL || now - refreshed > (uint64_t)CHURN_REFRESH_MS * 1000000ULL) {
            int64_t rv = 0;
            ks_objs_free(items, n);
            items = NULL;
            n = 0;
            ks_store_list(c->store, pods, ns, NULL, 0, &items, &n, &rv);
            refreshed = now;
            /* mutated pods' texts are allocated in this thread's arena while the versions they
             * replace are freed in the seeding threads' arenas, where nothing allocates again:
             * hand those free pages back, or RSS creeps up by the size of every pod churned */
            malloc_trim(0);
        }
        while (owed >= 1.0 && n > 0) {
            uint32_t r = 0;
            fg_random_bytes(&r, sizeof(r));
            ks_obj_t *cur = NULL;
            if (ks_store_get(c->store, pods, items[r % n]->key, &cur) == FG_OK) {
                churn_one(c, cur, __atomic_add_fetch(&ch->done, 1, __ATOMIC_RELAXED));
                ks_obj_unref(cur);
            }
            owed -= 1.0;
        }
        if (n == 0)
            owed = 0.0;
        free(ns);
        pthread_mutex_lock(&c->admin_mu);
    }
    pthread_mutex_unlock(&c->admin_mu);
    ks_objs_free(items, n);
    return NULL;
}

void ks_churn_stop(ks_cluster_t *c) {
    pthread_mutex_lock(&c->admin_mu);
    ks_churn_t *ch = c->churn;
    c->churn = NULL;
    if (ch != NULL) {
        ch->stop = true;
        pthread_cond_signal(&ch->cv);
    }
    pthread_mutex_unlock(&c->admin_mu);
    if (ch == NULL)
        return;
    pthread_join(ch->thread, NULL);
    pthread_cond_destroy(&ch->cv);
    free(ch->ns);
    free(ch);
}

void ks_churn_set(ks_cluster_t *c, int64_t per_minute, const char *ns) {
    if (per_minute <= 0) {
        ks_churn_stop(c);
        return;
    }
    pthread_mutex_lock(&c->admin_mu);
    if (c->churn != NULL) {
        c->churn->per_minute = per_minute;
        free(c->churn->ns);
        c->churn->ns = fg_xstrdup(ns);
        pthread_mutex_unlock(&c->admin_mu);
        return;
    }
    ks_churn_t *ch = fg_xcalloc(1, sizeof(*ch));
    ch->c = c;
    ch->per_minute = per_minute;
    ch->ns = fg_xstrdup(ns);
    pthread_cond_init(&ch->cv, NULL);
    c->churn = ch;
    pthread_create(&ch->thread, NULL, churn_main, ch);
    pthread_mutex_unlock(&c->admin_mu);
}

static void churn_post(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    json_t *b = NULL;
    int64_t per_minute = 0;
    const char *ns = "demo";
    if (body_or_reply(req, &b, out) != FG_OK)
        return;
    if (int_field_or_reply(b, "perMinute", 0, CHURN_MAX_PER_MIN, &per_minute, out) != FG_OK ||
        ns_field_or_reply(b, &ns, out) != FG_OK)
        goto out;
    ks_churn_set(c, per_minute, ns);
    ks_json_reply(out, 200,
                  json_pack("{s:s, s:I, s:s}", "status", "ok", "perMinute", (json_int_t)per_minute,
                            "namespace", ns));
out:
    json_decref(b);
}

/* ---- routing ----------------------------------------------------------------- */

static const struct {
    const char *method;
    const char *path;
    admin_fn fn;
} ROUTES[] = {
    {"GET", "/_kubesim/stats", stats_get},
    {"POST", "/_kubesim/stats/reset", stats_reset},
    {"GET", "/_kubesim/faults", faults_get},
    {"POST", "/_kubesim/faults", faults_set},
    {"POST", "/_kubesim/cut-watches", cut_watches_post},
    {"POST", "/_kubesim/compact", compact_post},
    {"POST", "/_kubesim/clock", clock_post},
    {"POST", "/_kubesim/seed", seed_post},
    {"POST", "/_kubesim/churn", churn_post},
};

int ks_admin(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out) {
    bool path_known = false;
    if (strncmp(req->path, "/_kubesim/", 10) != 0 && strcmp(req->path, "/_kubesim") != 0)
        return FG_ENOENT;
    for (size_t i = 0; i < sizeof(ROUTES) / sizeof(ROUTES[0]); i++) {
        if (strcmp(req->path, ROUTES[i].path) != 0)
            continue;
        path_known = true;
        if (strcmp(req->method, ROUTES[i].method) == 0) {
            ROUTES[i].fn(c, req, out);
            return FG_OK;
        }
    }
    if (path_known)
        ks_status_reply(out, 405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource", NULL,
                        NULL, NULL, NULL);
    else
        ks_status_reply(out, 404, "NotFound", "the server could not find the requested resource",
                        NULL, NULL, NULL, NULL);
    return FG_OK;
}
