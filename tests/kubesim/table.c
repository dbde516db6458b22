/* table: server-side printing. A client that sends `Accept: application/json;as=Table;v=v1;
 * g=meta.k8s.io` (kubectl get) gets a meta.k8s.io/v1 Table instead of the object or list: the
 * columns a real API server prints for the kind (pkg/printers/internalversion/printers.go;
 * priority 1 columns are the `-o wide` ones) and one row per object, whose `object` is, per
 * ?includeObject=, a PartialObjectMetadata (the default, Metadata), the whole object (Object)
 * or nothing (None). Cells are computed from the stored object at the time of the answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

typedef struct {
    const char *name;
    const char *type; /* string, integer, date */
    const char *format;
    int priority;
} column_t;

typedef void (*cells_fn)(const json_t *o, int64_t now_ms, json_t *cells);

typedef struct {
    const char *kind;
    const column_t *cols;
    size_t ncols;
    cells_fn cells;
} printer_t;

/* ---- small readers ------------------------------------------------------------------- */

static const json_t *at(const json_t *o, const char *path) {
    return ks_path_get(o, path);
}

static const char *str_at(const json_t *o, const char *path) {
    return json_string_value(at(o, path));
}

static json_int_t int_at(const json_t *o, const char *path) {
    return json_integer_value(at(o, path));
}

static int64_t ts_ms(const char *s) {
    struct tm tm = {0};
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

/* apimachinery's duration.HumanDuration, as the Age columns print it. */
static void human_duration(int64_t ms, char *buf, size_t len) {
    int64_t s = ms / 1000, m = s / 60, h = m / 60, d = h / 24;
    if (s < -1)
        snprintf(buf, len, "<invalid>");
    else if (s < 0)
        snprintf(buf, len, "0s");
    else if (s < 120)
        snprintf(buf, len, "%llds", (long long)s);
    else if (m < 10 && s % 60 != 0)
        snprintf(buf, len, "%lldm%llds", (long long)m, (long long)(s % 60));
    else if (m < 180)
        snprintf(buf, len, "%lldm", (long long)m);
    else if (h < 8 && m % 60 != 0)
        snprintf(buf, len, "%lldh%lldm", (long long)h, (long long)(m % 60));
    else if (h < 48)
        snprintf(buf, len, "%lldh", (long long)h);
    else if (h < 24 * 8 && h % 24 != 0)
        snprintf(buf, len, "%lldd%lldh", (long long)d, (long long)(h % 24));
    else if (h < 24 * 365 * 2)
        snprintf(buf, len, "%lldd", (long long)d);
    else
        snprintf(buf, len, "%lldy", (long long)(d / 365));
}

/* The age of a timestamp, "<unknown>" when absent (as translateTimestampSince). */
static json_t *age(const char *ts, int64_t now_ms) {
    char buf[32];
    int64_t t = ts_ms(ts);
    if (t < 0)
        return json_string("<unknown>");
    human_duration(now_ms - t, buf, sizeof(buf));
    return json_string(buf);
}

static json_t *or_none(const char *s) {
    return json_string(s != NULL && s[0] != '\0' ? s : "<none>");
}

/* "a,b" of member key of each element of the array at path (containers' names or images). */
static json_t *joined(const json_t *o, const char *path, const char *key) {
    fg_buf_t b;
    size_t i;
    const json_t *e;
    fg_buf_init(&b, 1 << 16);
    json_array_foreach(at(o, path), i, e) {
        const char *v = json_string_value(json_object_get(e, key));
        fg_buf_appendf(&b, "%s%s", i > 0 ? "," : "", v ? v : "");
    }
    json_t *out = or_none(b.data);
    fg_buf_free(&b);
    return out;
}

/* A label selector as text: matchLabels as k=v, then matchExpressions roughly. */
static json_t *selector_text(const json_t *sel) {
    fg_buf_t b;
    const char *k;
    const json_t *v;
    fg_buf_init(&b, 1 << 16);
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v) {
        fg_buf_appendf(&b, "%s%s=%s", b.len ? "," : "", k,
                       json_string_value(v) ? json_string_value(v) : "");
    }
    json_t *out = or_none(b.data);
    fg_buf_free(&b);
    return out;
}

/* ---- per kind ------------------------------------------------------------------------ */

static void ns_cells(const json_t *o, int64_t now, json_t *cells) {
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(str_at(o, "status.phase") ?: ""));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
}

static bool condition_is(const json_t *conds, const char *type, const char *status) {
    size_t i;
    const json_t *c;
    json_array_foreach(conds, i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t != NULL && strcmp(t, type) == 0)
            return s != NULL && strcmp(s, status) == 0;
    }
    return false;
}

static void node_cells(const json_t *o, int64_t now, json_t *cells) {
    fg_buf_t roles;
    const char *k;
    const json_t *v;
    char status[64];
    bool ready = condition_is(at(o, "status.conditions"), "Ready", "True");
    snprintf(status, sizeof(status), "%s%s", ready ? "Ready" : "NotReady",
             json_is_true(at(o, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
    fg_buf_init(&roles, 4096);
    json_object_foreach((json_t *)at(o, "metadata.labels"), k, v) {
        if (strncmp(k, "node-role.kubernetes.io/", 24) == 0 && k[24] != '\0')
            fg_buf_appendf(&roles, "%s%s", roles.len ? "," : "", k + 24);
    }
    const char *internal = NULL, *external = NULL;
    size_t i;
    const json_t *a;
    json_array_foreach(at(o, "status.addresses"), i, a) {
        const char *t = json_string_value(json_object_get(a, "type"));
        const char *addr = json_string_value(json_object_get(a, "address"));
        if (t != NULL && strcmp(t, "InternalIP") == 0 && internal == NULL)
            internal = addr;
        if (t != NULL && strcmp(t, "ExternalIP") == 0 && external == NULL)
            external = addr;
    }
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(status));
    json_array_append_new(cells, or_none(roles.data));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells, json_string(str_at(o, "status.nodeInfo.kubeletVersion") ?: ""));
    json_array_append_new(cells, or_none(internal));
    json_array_append_new(cells, or_none(external));
    json_array_append_new(cells, json_string(str_at(o, "status.nodeInfo.osImage") ?: ""));
    json_array_append_new(cells, json_string(str_at(o, "status.nodeInfo.kernelVersion") ?: ""));
    json_array_append_new(cells,
                          json_string(str_at(o, "status.nodeInfo.containerRuntimeVersion") ?: ""));
    fg_buf_free(&roles);
}

/* The pod's STATUS as kubectl shows it: the phase, or the pod's reason, or a container's
 * waiting or terminated reason, "Terminating" while being deleted (printPod). */
static void pod_status(const json_t *o, char *buf, size_t len) {
    const char *reason = str_at(o, "status.reason");
    size_t i;
    const json_t *cs;
    snprintf(buf, len, "%s", reason ? reason : (str_at(o, "status.phase") ?: "Unknown"));
    json_array_foreach(at(o, "status.containerStatuses"), i, cs) {
        const char *w = str_at(cs, "state.waiting.reason");
        const char *t = str_at(cs, "state.terminated.reason");
        if (w != NULL && w[0] != '\0')
            snprintf(buf, len, "%s", w);
        else if (t != NULL && t[0] != '\0')
            snprintf(buf, len, "%s", t);
        else if (at(cs, "state.terminated") != NULL)
            snprintf(buf, len, "ExitCode:%lld", (long long)int_at(cs, "state.terminated.exitCode"));
    }
    if (at(o, "metadata.deletionTimestamp") != NULL)
        snprintf(buf, len, "Terminating");
}

static void pod_cells(const json_t *o, int64_t now, json_t *cells) {
    char ready[32], status[96], restarts[64];
    size_t i, total = json_array_size(at(o, "spec.containers")), nready = 0;
    json_int_t nrestarts = 0;
    const json_t *cs;
    json_array_foreach(at(o, "status.containerStatuses"), i, cs) {
        nready += json_is_true(json_object_get(cs, "ready"));
        nrestarts += int_at(cs, "restartCount");
    }
    snprintf(ready, sizeof(ready), "%zu/%zu", nready, total);
    pod_status(o, status, sizeof(status));
    snprintf(restarts, sizeof(restarts), "%lld", (long long)nrestarts);
    const char *ip = str_at(o, "status.podIP");
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(ready));
    json_array_append_new(cells, json_string(status));
    json_array_append_new(cells, json_string(restarts));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells, or_none(ip));
    json_array_append_new(cells, or_none(str_at(o, "spec.nodeName")));
    json_array_append_new(cells, or_none(str_at(o, "status.nominatedNodeName")));
    json_array_append_new(cells, json_string("<none>"));
}

static void event_cells(const json_t *o, int64_t now, json_t *cells) {
    char object[400], count[32];
    const char *last = str_at(o, "lastTimestamp") ?: str_at(o, "eventTime");
    const char *first = str_at(o, "firstTimestamp") ?: str_at(o, "eventTime");
    const char *kind = str_at(o, "involvedObject.kind") ?: "";
    /* "pod/web-1": the kind lower-cased, as printEvent */
    snprintf(object, sizeof(object), "%s/%s", kind, str_at(o, "involvedObject.name") ?: "");
    for (char *p = object; *p != '\0' && *p != '/'; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    snprintf(count, sizeof(count), "%lld", (long long)(int_at(o, "count") ?: 1));
    const char *comp = str_at(o, "source.component") ?: str_at(o, "reportingComponent");
    const char *host = str_at(o, "source.host");
    char source[300];
    if (host != NULL && host[0] != '\0')
        snprintf(source, sizeof(source), "%s, %s", comp ? comp : "", host);
    else
        snprintf(source, sizeof(source), "%s", comp ? comp : "");
    json_array_append_new(cells, age(last, now));
    json_array_append_new(cells, json_string(str_at(o, "type") ?: ""));
    json_array_append_new(cells, json_string(str_at(o, "reason") ?: ""));
    json_array_append_new(cells, json_string(object));
    json_array_append_new(cells, json_string(str_at(o, "involvedObject.fieldPath") ?: ""));
    json_array_append_new(cells, json_string(source));
    json_array_append_new(cells, json_string(str_at(o, "message") ?: ""));
    json_array_append_new(cells, age(first, now));
    json_array_append_new(cells, json_string(count));
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
}

static void deployment_cells(const json_t *o, int64_t now, json_t *cells) {
    char ready[48];
    snprintf(ready, sizeof(ready), "%lld/%lld", (long long)int_at(o, "status.readyReplicas"),
             (long long)int_at(o, "spec.replicas"));
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(ready));
    json_array_append_new(cells, json_integer(int_at(o, "status.updatedReplicas")));
    json_array_append_new(cells, json_integer(int_at(o, "status.availableReplicas")));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "name"));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "image"));
    json_array_append_new(cells, selector_text(at(o, "spec.selector")));
}

static void replicaset_cells(const json_t *o, int64_t now, json_t *cells) {
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_integer(int_at(o, "spec.replicas")));
    json_array_append_new(cells, json_integer(int_at(o, "status.replicas")));
    json_array_append_new(cells, json_integer(int_at(o, "status.readyReplicas")));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "name"));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "image"));
    json_array_append_new(cells, selector_text(at(o, "spec.selector")));
}

static void job_cells(const json_t *o, int64_t now, json_t *cells) {
    char completions[48], duration[32];
    const json_t *conds = at(o, "status.conditions");
    const char *status = "Running";
    if (condition_is(conds, "Complete", "True"))
        status = "Complete";
    else if (condition_is(conds, "Failed", "True"))
        status = "Failed";
    else if (at(o, "metadata.deletionTimestamp") != NULL)
        status = "Terminating";
    else if (json_is_true(at(o, "spec.suspend")))
        status = "Suspended";
    else if (condition_is(conds, "FailureTarget", "True"))
        status = "FailureTarget";
    snprintf(completions, sizeof(completions), "%lld/%lld",
             (long long)int_at(o, "status.succeeded"),
             (long long)(at(o, "spec.completions") ? int_at(o, "spec.completions") : 1));
    int64_t start = ts_ms(str_at(o, "status.startTime"));
    int64_t end = ts_ms(str_at(o, "status.completionTime"));
    if (start < 0)
        duration[0] = '\0';
    else
        human_duration((end >= 0 ? end : now) - start, duration, sizeof(duration));
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(status));
    json_array_append_new(cells, json_string(completions));
    json_array_append_new(cells, json_string(duration));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "name"));
    json_array_append_new(cells, joined(o, "spec.template.spec.containers", "image"));
    json_array_append_new(cells, selector_text(at(o, "spec.selector")));
}

static void cronjob_cells(const json_t *o, int64_t now, json_t *cells) {
    const char *last = str_at(o, "status.lastScheduleTime");
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(str_at(o, "spec.schedule") ?: ""));
    json_array_append_new(cells, or_none(str_at(o, "spec.timeZone")));
    json_array_append_new(cells,
                          json_string(json_is_true(at(o, "spec.suspend")) ? "True" : "False"));
    json_array_append_new(cells, json_integer((json_int_t)json_array_size(at(o, "status.active"))));
    json_array_append_new(cells, last ? age(last, now) : json_string("<none>"));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
    json_array_append_new(cells,
                          joined(o, "spec.jobTemplate.spec.template.spec.containers", "name"));
    json_array_append_new(cells,
                          joined(o, "spec.jobTemplate.spec.template.spec.containers", "image"));
    json_array_append_new(cells, selector_text(at(o, "spec.jobTemplate.spec.selector")));
}

static void hpa_cells(const json_t *o, int64_t now, json_t *cells) {
    char ref[300], min[24];
    snprintf(ref, sizeof(ref), "%s/%s", str_at(o, "spec.scaleTargetRef.kind") ?: "",
             str_at(o, "spec.scaleTargetRef.name") ?: "");
    snprintf(min, sizeof(min), "%lld",
             (long long)(at(o, "spec.minReplicas") ? int_at(o, "spec.minReplicas") : 1));
    json_array_append_new(cells, json_string(str_at(o, "metadata.name") ?: ""));
    json_array_append_new(cells, json_string(ref));
    json_array_append_new(
        cells, json_string(json_array_size(at(o, "spec.metrics")) ? "<unknown>" : "<none>"));
    json_array_append_new(cells, json_string(min));
    json_array_append_new(cells, json_integer(int_at(o, "spec.maxReplicas")));
    json_array_append_new(cells, json_integer(int_at(o, "status.currentReplicas")));
    json_array_append_new(cells, age(str_at(o, "metadata.creationTimestamp"), now));
}

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define NAME_COL                                                                                   \
    { "Name", "string", "name", 0 }
#define AGE_COL                                                                                    \
    { "Age", "string", "", 0 }

static const column_t NS_COLS[] = {NAME_COL, {"Status", "string", "", 0}, AGE_COL};
static const column_t NODE_COLS[] = {
    NAME_COL,
    {"Status", "string", "", 0},
    {"Roles", "string", "", 0},
    AGE_COL,
    {"Version", "string", "", 0},
    {"Internal-IP", "string", "", 1},
    {"External-IP", "string", "", 1},
    {"OS-Image", "string", "", 1},
    {"Kernel-Version", "string", "", 1},
    {"Container-Runtime", "string", "", 1},
};
static const column_t POD_COLS[] = {
    NAME_COL,
    {"Ready", "string", "", 0},
    {"Status", "string", "", 0},
    {"Restarts", "string", "", 0},
    AGE_COL,
    {"IP", "string", "", 1},
    {"Node", "string", "", 1},
    {"Nominated Node", "string", "", 1},
    {"Readiness Gates", "string", "", 1},
};
static const column_t EVENT_COLS[] = {
    {"Last Seen", "string", "", 0}, {"Type", "string", "", 0},       {"Reason", "string", "", 0},
    {"Object", "string", "", 0},    {"Subobject", "string", "", 1},  {"Source", "string", "", 1},
    {"Message", "string", "", 0},   {"First Seen", "string", "", 1}, {"Count", "string", "", 1},
    {"Name", "string", "name", 1},
};
static const column_t DEPLOY_COLS[] = {
    NAME_COL,
    {"Ready", "string", "", 0},
    {"Up-to-date", "integer", "", 0},
    {"Available", "integer", "", 0},
    AGE_COL,
    {"Containers", "string", "", 1},
    {"Images", "string", "", 1},
    {"Selector", "string", "", 1},
};
static const column_t RS_COLS[] = {
    NAME_COL,
    {"Desired", "integer", "", 0},
    {"Current", "integer", "", 0},
    {"Ready", "integer", "", 0},
    AGE_COL,
    {"Containers", "string", "", 1},
    {"Images", "string", "", 1},
    {"Selector", "string", "", 1},
};
static const column_t JOB_COLS[] = {
    NAME_COL,
    {"Status", "string", "", 0},
    {"Completions", "string", "", 0},
    {"Duration", "string", "", 0},
    AGE_COL,
    {"Containers", "string", "", 1},
    {"Images", "string", "", 1},
    {"Selector", "string", "", 1},
};
static const column_t CJ_COLS[] = {
    NAME_COL,
    {"Schedule", "string", "", 0},
    {"Timezone", "string", "", 0},
    {"Suspend", "boolean", "", 0},
    {"Active", "integer", "", 0},
    {"Last Schedule", "string", "", 0},
    AGE_COL,
    {"Containers", "string", "", 1},
    {"Images", "string", "", 1},
    {"Selector", "string", "", 1},
};
static const column_t HPA_COLS[] = {
    NAME_COL,
    {"Reference", "string", "", 0},
    {"Targets", "string", "", 0},
    {"MinPods", "string", "", 0},
    {"MaxPods", "integer", "", 0},
    {"Replicas", "integer", "", 0},
    AGE_COL,
};

static const printer_t PRINTERS[] = {
    {"Namespace", NS_COLS, N(NS_COLS), ns_cells},
    {"Node", NODE_COLS, N(NODE_COLS), node_cells},
    {"Pod", POD_COLS, N(POD_COLS), pod_cells},
    {"Event", EVENT_COLS, N(EVENT_COLS), event_cells},
    {"Deployment", DEPLOY_COLS, N(DEPLOY_COLS), deployment_cells},
    {"ReplicaSet", RS_COLS, N(RS_COLS), replicaset_cells},
    {"Job", JOB_COLS, N(JOB_COLS), job_cells},
    {"CronJob", CJ_COLS, N(CJ_COLS), cronjob_cells},
    {"HorizontalPodAutoscaler", HPA_COLS, N(HPA_COLS), hpa_cells},
};

static const printer_t *printer_of(int res) {
    for (size_t i = 0; i < N(PRINTERS); i++) {
        if (strcmp(PRINTERS[i].kind, ks_resources[res].kind) == 0)
            return &PRINTERS[i];
    }
    return NULL;
}

/* ---- the interface ------------------------------------------------------------------- */

bool ks_wants_table(const ks_req_t *req) {
    return req->accept != NULL && strstr(req->accept, "as=Table") != NULL &&
           strstr(req->accept, "g=meta.k8s.io") != NULL;
}

json_t *ks_table_new(int res, const char *rv, bool with_columns) {
    const printer_t *p = printer_of(res);
    json_t *t = json_pack("{s:s, s:s, s:{s:s}}", "kind", "Table", "apiVersion", "meta.k8s.io/v1",
                          "metadata", "resourceVersion", rv ? rv : "");
    json_t *cols = json_array();
    for (size_t i = 0; with_columns && p != NULL && i < p->ncols; i++) {
        json_array_append_new(cols, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", p->cols[i].name,
                                              "type", p->cols[i].type, "format", p->cols[i].format,
                                              "description", "", "priority", p->cols[i].priority));
    }
    json_object_set_new(t, "columnDefinitions", with_columns ? cols : json_null());
    if (!with_columns)
        json_decref(cols);
    json_object_set_new(t, "rows", json_array());
    return t;
}

void ks_table_add_row(json_t *table, int res, const json_t *obj, const char *include,
                      int64_t now_ms) {
    const printer_t *p = printer_of(res);
    json_t *cells = json_array();
    if (p != NULL)
        p->cells(obj, now_ms, cells);
    json_t *row = json_pack("{s:o}", "cells", cells);
    if (include == NULL || include[0] == '\0' || strcmp(include, "Metadata") == 0) {
        json_t *meta = json_deep_copy(json_object_get(obj, "metadata"));
        json_object_del(meta, "managedFields"); /* as the server's PartialObjectMetadata */
        json_object_set_new(row, "object",
                            json_pack("{s:s, s:s, s:o}", "kind", "PartialObjectMetadata",
                                      "apiVersion", "meta.k8s.io/v1", "metadata", meta));
    } else if (strcmp(include, "Object") == 0) {
        json_object_set(row, "object", (json_t *)obj);
    }
    json_array_append_new(json_object_get(table, "rows"), row);
}
