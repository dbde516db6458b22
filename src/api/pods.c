/* api/pods.c: GET /v1/projects/{project}/pods and /pods/{pod}, from the cache alone.
 *
 * The cache holds the simplified pod (cache/SCHEMA.md section 1); present_pod turns it into the
 * API's Pod (api/openapi.yaml): conditions, containers and their states renamed, absent times
 * as null. A list walks the pod indexes of every cluster in (name, cluster) order; a pod is an
 * item of its own per cluster.
 */
#include "reads.h"

#include <string.h>

static const char *const pod_phases[] = {"Pending", "Running", "Succeeded",
                                         "Failed",  "Unknown", NULL};
/* The conditions the API shows (Pod.conditions). */
static const char *const pod_conditions[] = {"PodScheduled", "Initialized",      "ContainersReady",
                                             "Ready",        "DisruptionTarget", NULL};
static const char *const qos_classes[] = {"Guaranteed", "Burstable", "BestEffort", NULL};

typedef struct {
    const rd_selector_t *selector;
    const char *app;
    const char *phase;
} pod_filter_t;

static bool in_list(const char *s, const char *const *list) {
    for (size_t i = 0; s && list[i]; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

static json_t *conditions(const json_t *src) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(src, "conditions"), i, c) {
        const char *type = rd_str(c, "type"), *status = rd_str(c, "status");
        if (!in_list(type, pod_conditions) || status == NULL)
            continue;
        json_t *o = json_pack("{s:s,s:s}", "type", type, "status", status);
        if (rd_str(c, "reason"))
            json_object_set_new(o, "reason", rd_string_cut(rd_str(c, "reason"), 128));
        if (rd_str(c, "message"))
            json_object_set_new(o, "message", rd_string_cut(rd_str(c, "message"), 1024));
        rd_copy(o, "lastTransitionAt", c, "since");
        json_array_append_new(out, o);
    }
    return out;
}

/* A simplified state ("running"/"waiting"/"terminated" with its fields) as a ContainerState. */
static json_t *container_state(const json_t *c, const char *state) {
    static const struct {
        const char *from, *to;
    } names[] = {{"running", "Running"}, {"waiting", "Waiting"}, {"terminated", "Terminated"}};
    const char *status = "Waiting";
    for (size_t i = 0; state && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(state, names[i].from) == 0)
            status = names[i].to;
    json_t *o = json_pack("{s:s}", "status", status);
    if (rd_str(c, "reason"))
        json_object_set_new(o, "reason", rd_string_cut(rd_str(c, "reason"), 128));
    if (rd_str(c, "message"))
        json_object_set_new(o, "message", rd_string_cut(rd_str(c, "message"), 1024));
    rd_copy(o, "exitCode", c, "exitCode");
    rd_copy(o, "startedAt", c, "startedAt");
    rd_copy(o, "finishedAt", c, "finishedAt");
    return o;
}

/* The cached ports ({name, containerPort, protocol only when not TCP}) as ContainerPorts. */
static json_t *container_ports(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(list, i, p) {
        json_int_t port = rd_int(p, "containerPort", 0);
        if (port < 1 || port > 65535)
            continue;
        json_t *o = json_pack("{s:I,s:s}", "containerPort", port, "protocol",
                              rd_str(p, "protocol") ? rd_str(p, "protocol") : "TCP");
        if (rd_str(p, "name"))
            json_object_set_new(o, "name", rd_string_cut(rd_str(p, "name"), 15));
        json_array_append_new(out, o);
    }
    return out;
}

/* The strings of a cached IP list (podIPs, hostIPs). */
static json_t *ip_list(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *ip;
    json_array_foreach(list, i, ip) {
        if (json_is_string(ip))
            json_array_append(out, ip);
    }
    return out;
}

static json_t *containers(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *name = rd_str(c, "name");
        if (name == NULL)
            continue;
        json_t *o = json_pack("{s:s,s:s,s:b,s:I}", "name", name, "image",
                              rd_str(c, "image") ? rd_str(c, "image") : "", "ready",
                              json_is_true(json_object_get(c, "ready")), "restarts",
                              (json_int_t)rd_int(c, "restarts", 0));
        json_object_set_new(o, "state", container_state(c, rd_str(c, "state")));
        json_t *last = json_object_get(c, "lastTermination");
        if (json_is_object(last))
            json_object_set_new(o, "lastTermination", container_state(last, "terminated"));
        if (json_is_object(json_object_get(c, "resources")))
            json_object_set_new(o, "resources", rd_resources(json_object_get(c, "resources")));
        if (json_array_size(json_object_get(c, "ports")) > 0)
            json_object_set_new(o, "ports", container_ports(json_object_get(c, "ports")));
        if (rd_str(c, "imageID"))
            json_object_set_new(o, "imageID", rd_string_cut(rd_str(c, "imageID"), 1024));
        json_array_append_new(out, o);
    }
    return out;
}

static json_t *present_pod(const json_t *p) {
    const char *phase = rd_str(p, "phase");
    json_t *o = json_object();
    rd_copy(o, "name", p, "name");
    rd_copy(o, "project", p, "project");
    const char *jobset = rd_str(p, "jobset"), *app = rd_str(p, "app");
    json_object_set_new(o, "owner",
                        jobset ? json_pack("{s:s,s:s}", "kind", "JobSet", "name", jobset)
                        : app  ? json_pack("{s:s,s:s}", "kind", "App", "name", app)
                               : json_null());
    json_object_set_new(o, "app", rd_str_or_null(p, "app"));
    if (json_is_object(json_object_get(p, "labels")))
        rd_copy(o, "labels", p, "labels");
    rd_copy(o, "cluster", p, "cluster");
    rd_copy(o, "zone", p, "zone");
    json_object_set_new(o, "node", rd_str_or_null(p, "node"));
    json_object_set_new(o, "phase", json_string(in_list(phase, pod_phases) ? phase : "Unknown"));
    if (rd_str(p, "reason"))
        json_object_set_new(o, "reason", rd_string_cut(rd_str(p, "reason"), 128));
    if (rd_str(p, "message"))
        json_object_set_new(o, "message", rd_string_cut(rd_str(p, "message"), 1024));
    json_object_set_new(o, "ready", json_boolean(json_is_true(json_object_get(p, "ready"))));
    json_object_set_new(o, "conditions", conditions(p));
    json_object_set_new(o, "containers", containers(json_object_get(p, "containers")));
    if (json_array_size(json_object_get(p, "initContainers")))
        json_object_set_new(o, "initContainers", containers(json_object_get(p, "initContainers")));
    json_t *ips = ip_list(json_object_get(p, "podIPs"));
    json_t *host_ips = ip_list(json_object_get(p, "hostIPs"));
    if (json_array_size(host_ips) == 0 && rd_str(p, "hostIP")) /* cached before hostIPs */
        json_array_append_new(host_ips, json_string(rd_str(p, "hostIP")));
    json_object_set_new(o, "podIP",
                        json_array_size(ips) ? json_copy(json_array_get(ips, 0)) : json_null());
    json_object_set_new(o, "hostIP",
                        json_array_size(host_ips) ? json_copy(json_array_get(host_ips, 0))
                                                  : json_null());
    json_object_set_new(o, "podIPs", ips);
    json_object_set_new(o, "hostIPs", host_ips);
    if (in_list(rd_str(p, "qosClass"), qos_classes))
        rd_copy(o, "qosClass", p, "qosClass");
    rd_copy(o, "version", p, "version");
    rd_copy(o, "createdAt", p, "creationTime");
    json_object_set_new(o, "startedAt", rd_str_or_null(p, "startTime"));
    json_object_set_new(o, "deletingSince", rd_str_or_null(p, "deletionTime"));
    return o;
}

static json_t *list_item(const rd_ctx_t *c, const char *name, json_t *const *objs, void *arg) {
    (void)name, (void)arg;
    for (size_t i = 0; i < c->nparts; i++)
        if (objs[i])
            return present_pod(objs[i]);
    return NULL;
}

/* The filters, on the presented pod's facts (so cached pages filter without parsing). */
static bool pod_match(const rd_facts_t *facts, void *arg) {
    const pod_filter_t *f = arg;
    if ((f->phase && strcmp(facts->phase, f->phase) != 0) ||
        (f->app && strcmp(facts->app, f->app) != 0))
        return false;
    if (f->selector == NULL)
        return true;
    json_t *labels = NULL;
    if (facts->labels &&
        fg_json_load(facts->labels, strlen(facts->labels), &labels, NULL, 0) != FG_OK)
        labels = NULL;
    bool ok = rd_selector_match(f->selector, labels);
    json_decref(labels);
    return ok;
}

int fg_api_list_pods(fg_req_t *req) {
    size_t limit;
    const char *cluster, *zone;
    pod_filter_t f = {0};
    rd_selector_t *sel = NULL;
    rd_ctx_t c;
    if (!rd_limit_or_reply(req, &limit) || !rd_cluster_param_or_reply(req, &cluster) ||
        !rd_label_param_or_reply(req, "zone", &zone) ||
        !rd_label_param_or_reply(req, "app", &f.app) ||
        !rd_enum_param_or_reply(req, "phase", pod_phases, &f.phase) ||
        !rd_selector_or_reply(req, &sel))
        return FG_OK;
    f.selector = sel;
    if (rd_begin_or_reply(&c, req, "pod", "pods", fg_req_param(req, "project"), cluster, zone))
        rd_list_reply(&c, false, pod_match, limit, list_item, &f);
    rd_selector_free(sel);
    return FG_OK;
}

/* The pod's text and ETag value from the item cache, or presented from raw (and cached). */
static char *pod_text(const char *raw, size_t len, size_t *tlen, char *etag, size_t etaglen,
                      const char *req_id) {
    fg_buf_t b;
    rd_icache_key_t key = rd_icache_key(raw, len);
    fg_buf_init(&b, 1u << 26);
    if (rd_icache_get(key, &b, etag, etaglen, NULL) && etag[0])
        return fg_buf_steal(&b, tlen);
    fg_buf_free(&b);
    json_t *o = rd_parse_cached(raw, len, req_id);
    if (o == NULL)
        return NULL;
    json_t *pod = present_pod(o);
    json_decref(o);
    snprintf(etag, etaglen, "%s", rd_str(pod, "version") ? rd_str(pod, "version") : "0");
    /* The facts go in too: a list that finds this entry filters on them. */
    rd_facts_t facts;
    rd_facts_of(pod, &facts);
    char *text = fg_json_dumps(pod, tlen);
    json_decref(pod);
    rd_icache_put(key, text, *tlen, etag, &facts);
    free(facts.labels);
    return text;
}

int fg_api_get_pod(fg_req_t *req) {
    const char *project = fg_req_param(req, "project"), *name = fg_req_param(req, "pod");
    const char *cluster;
    char *raws[RD_MAX_CLUSTERS];
    size_t lens[RD_MAX_CLUSTERS], found;
    rd_ctx_t c;
    char what[RD_NAME_MAX + 8];
    if (!rd_cluster_param_or_reply(req, &cluster) ||
        !rd_get_raw_or_reply(&c, req, "pod", project, name, cluster, raws, lens, &found))
        return FG_OK;
    snprintf(what, sizeof what, "pod %s", name);
    if (found == 0 && !rd_absence_known_or_reply(&c, "pods", what))
        return FG_OK;
    int rc;
    char where[512] = "", etag[80];
    size_t used = 0, tlen = 0, at = 0;
    for (size_t i = 0; i < c.nparts; i++)
        if (raws[i] && used < sizeof where) {
            at = i;
            used += (size_t)snprintf(where + used, sizeof where - used, "%s%s", used ? ", " : "",
                                     c.parts[i].conf->name);
        }
    if (found == 0)
        rc = fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no pod %s in project %s%s%s", name,
                              project, cluster ? " in cluster " : "", cluster ? cluster : "");
    else if (found > 1)
        rc = fg_reply_problem(
            req, FG_PROBLEM_CONFLICT,
            "pod %s exists in several clusters (%s): name one with ?cluster=", name, where);
    else {
        char *text = pod_text(raws[at], lens[at], &tlen, etag, sizeof etag, fg_req_id(req));
        rc = text
                 ? rd_reply_text_etag(req, text, tlen, etag)
                 : fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the cached pod %s is corrupt", name);
    }
    for (size_t i = 0; i < c.nparts; i++)
        free(raws[i]);
    return rc;
}

json_t *rd_present_pod(const json_t *p) {
    return present_pod(p);
}
