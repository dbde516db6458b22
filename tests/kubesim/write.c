/* write: POST, PUT, PATCH and DELETE, and the /status and /scale subresources.
 *
 * Every write ends in commit(): the server-owned fields are set the way a real server sets them
 * (uid, creationTimestamp, generation bumped on spec change, resourceVersion by the store, status
 * kept off the main resource, spec kept off /status) and the writer's managedFields entry
 * (manager from ?fieldManager= or the User-Agent, operation, time, FieldsV1 of what it sent) is
 * replaced or added. Optimistic concurrency is the store's expect_rv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

#define MAX_PATCH_RETRIES 5

/* Required fields per kind ("a.b.c" paths), checked on create and update. */
static const struct {
    const char *kind;
    const char *paths[3];
} REQUIRED[] = {
    {"Pod", {"spec.containers", NULL, NULL}},
    {"Deployment", {"spec.selector", "spec.template.metadata.labels", NULL}},
    {"ReplicaSet", {"spec.selector", NULL, NULL}},
    {"Job", {"spec.template", NULL, NULL}},
    {"CronJob", {"spec.schedule", "spec.jobTemplate", NULL}},
    {"HorizontalPodAutoscaler", {"spec.scaleTargetRef", "spec.maxReplicas", NULL}},
};

static void now_rfc3339(char *buf, size_t len) {
    time_t t = (time_t)(fg_wall_ms() / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void new_uid(char *buf, size_t len) {
    unsigned char b[16] = {0};
    fg_random_bytes(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static bool is_subdomain(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (const char *p = s; *p != '\0';) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!fg_is_dns1123_label(p, len))
            return false;
        p += len + (dot ? 1 : 0);
        if (dot != NULL && *p == '\0')
            return false;
    }
    return true;
}

static const char SUBDOMAIN_MSG[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
static const char LABEL_MSG[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/* ---- the pod spec, as the API server decodes and validates it ----------------------------- */

/* What a decode or validation found: the first type mismatch (the typed decoder stops there:
 * 400), else every field error (422 with one cause each, as field.ErrorList). */
typedef struct {
    char decode[320];
    json_t *causes;
} pod_check_t;

static const char *json_kind(const json_t *v) {
    if (json_is_string(v))
        return "string";
    if (json_is_number(v))
        return "number";
    if (json_is_boolean(v))
        return "bool";
    if (json_is_array(v))
        return "array";
    return "object";
}

/* Whether v (present, not null) has the JSON type of a Go field; records the decoder's message
 * ("json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type
 * []v1.Container") when not. */
static bool typed(pod_check_t *pc, const json_t *v, json_type want, const char *go_struct,
                  const char *field, const char *go_type) {
    if (v == NULL || json_is_null(v) || pc->decode[0] != '\0')
        return false; /* absent (or decoding already failed: nothing more is reported) */
    bool ok = json_typeof(v) == want || (want == JSON_TRUE && json_is_boolean(v)) ||
              (want == JSON_INTEGER && json_is_integer(v));
    if (!ok)
        snprintf(pc->decode, sizeof(pc->decode),
                 "json: cannot unmarshal %s into Go struct field %s.%s of type %s", json_kind(v),
                 go_struct, field, go_type);
    return ok;
}

static void cause(pod_check_t *pc, const char *reason, const char *field, const char *msg) {
    json_array_append_new(
        pc->causes, json_pack("{s:s, s:s, s:s}", "reason", reason, "message", msg, "field", field));
}

static void check_container(pod_check_t *pc, const json_t *ctr, const char *where, json_t *names) {
    char f[160], msg[200];
    const json_t *name = json_object_get(ctr, "name"), *image = json_object_get(ctr, "image");
    const json_t *ports = json_object_get(ctr, "ports");
    size_t i;
    const json_t *p;
    typed(pc, name, JSON_STRING, "Container", "spec.containers.name", "string");
    typed(pc, image, JSON_STRING, "Container", "spec.containers.image", "string");
    typed(pc, json_object_get(ctr, "command"), JSON_ARRAY, "Container", "spec.containers.command",
          "[]string");
    typed(pc, json_object_get(ctr, "args"), JSON_ARRAY, "Container", "spec.containers.args",
          "[]string");
    typed(pc, json_object_get(ctr, "resources"), JSON_OBJECT, "Container",
          "spec.containers.resources", "v1.ResourceRequirements");
    if (pc->decode[0] != '\0')
        return;
    const char *n = json_string_value(name);
    snprintf(f, sizeof(f), "%s.name", where);
    if (n == NULL || n[0] == '\0') {
        cause(pc, "FieldValueRequired", f, "Required value");
    } else if (!fg_is_dns1123_label(n, strlen(n))) {
        snprintf(msg, sizeof(msg), "Invalid value: \"%.60s\": a lowercase RFC 1123 label", n);
        cause(pc, "FieldValueInvalid", f, msg);
    } else if (json_object_get(names, n) != NULL) {
        snprintf(msg, sizeof(msg), "Duplicate value: \"%.60s\"", n);
        cause(pc, "FieldValueDuplicate", f, msg);
    } else {
        json_object_set_new(names, n, json_true());
    }
    snprintf(f, sizeof(f), "%s.image", where);
    if (json_string_value(image) == NULL || json_string_value(image)[0] == '\0')
        cause(pc, "FieldValueRequired", f, "Required value");
    if (!typed(pc, ports, JSON_ARRAY, "Container", "spec.containers.ports", "[]v1.ContainerPort"))
        return;
    json_array_foreach(ports, i, p) {
        const json_t *cp = json_object_get(p, "containerPort");
        if (!typed(pc, p, JSON_OBJECT, "Container", "spec.containers.ports", "v1.ContainerPort") ||
            !typed(pc, cp, JSON_INTEGER, "ContainerPort", "spec.containers.ports.containerPort",
                   "int32")) {
            if (pc->decode[0] == '\0') {
                snprintf(f, sizeof(f), "%s.ports[%zu].containerPort", where, i);
                cause(pc, "FieldValueRequired", f, "Required value");
            }
            continue;
        }
        if (json_integer_value(cp) < 1 || json_integer_value(cp) > 65535) {
            snprintf(f, sizeof(f), "%s.ports[%zu].containerPort", where, i);
            snprintf(msg, sizeof(msg),
                     "Invalid value: %lld: must be between 1 and 65535, inclusive",
                     (long long)json_integer_value(cp));
            cause(pc, "FieldValueInvalid", f, msg);
        }
    }
}

/* The containers and init containers of a pod spec at path prefix. */
static void check_pod_spec(pod_check_t *pc, const json_t *spec, const char *prefix) {
    static const char *const LISTS[] = {"containers", "initContainers"};
    json_t *names = json_object();
    char f[160];
    if (!typed(pc, spec, JSON_OBJECT, "PodTemplateSpec", "spec", "v1.PodSpec"))
        goto out;
    for (size_t l = 0; l < 2; l++) {
        const json_t *list = json_object_get(spec, LISTS[l]), *ctr;
        char go_field[64];
        size_t i;
        snprintf(go_field, sizeof(go_field), "spec.%s", LISTS[l]);
        snprintf(f, sizeof(f), "%s.%s", prefix, LISTS[l]);
        if (!typed(pc, list, JSON_ARRAY, "PodSpec", go_field, "[]v1.Container")) {
            if (l == 0 && pc->decode[0] == '\0')
                cause(pc, "FieldValueRequired", f, "Required value");
            continue;
        }
        if (l == 0 && json_array_size(list) == 0)
            cause(pc, "FieldValueRequired", f, "Required value");
        json_array_foreach(list, i, ctr) {
            char where[200];
            snprintf(where, sizeof(where), "%s[%zu]", f, i);
            if (typed(pc, ctr, JSON_OBJECT, "PodSpec", go_field, "v1.Container"))
                check_container(pc, ctr, where, names);
        }
    }
out:
    json_decref(names);
}

/* Where a kind keeps its pod spec, or NULL. */
static const char *pod_spec_path(const char *kind) {
    if (strcmp(kind, "Pod") == 0)
        return "spec";
    if (strcmp(kind, "Deployment") == 0 || strcmp(kind, "ReplicaSet") == 0 ||
        strcmp(kind, "Job") == 0)
        return "spec.template.spec";
    if (strcmp(kind, "CronJob") == 0)
        return "spec.jobTemplate.spec.template.spec";
    return NULL;
}

/* 400 when the body does not decode into the kind's types, 422 Invalid with every field error
 * in details.causes (message "Kind \"name\" is invalid: [a: x, b: y]", one cause per error). */
static int pod_spec_or_reply(const ks_target_t *t, json_t *obj, const char *name, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    const char *path = pod_spec_path(r->kind);
    pod_check_t pc = {.causes = json_array()};
    fg_buf_t msg;
    int rc = FG_OK;
    if (path == NULL || ks_path_get(obj, path) == NULL)
        goto out;
    check_pod_spec(&pc, ks_path_get(obj, path), path);
    fg_buf_init(&msg, 1 << 16);
    if (pc.decode[0] != '\0') {
        fg_buf_appendf(&msg, "%s in version \"%s\" cannot be handled as a %s: %s", r->kind,
                       r->version, r->kind, pc.decode);
        ks_status_reply(out, 400, "BadRequest", msg.data, NULL, NULL, NULL, NULL);
        rc = FG_EINVAL;
    } else if (json_array_size(pc.causes) > 0) {
        size_t i, n = json_array_size(pc.causes);
        json_t *c;
        fg_buf_appendf(&msg, "%s \"%s\" is invalid: %s", r->kind, name, n > 1 ? "[" : "");
        json_array_foreach(pc.causes, i, c) {
            fg_buf_appendf(&msg, "%s%s: %s", i > 0 ? ", " : "",
                           json_string_value(json_object_get(c, "field")),
                           json_string_value(json_object_get(c, "message")));
        }
        fg_buf_appendf(&msg, "%s", n > 1 ? "]" : "");
        ks_status_reply(out, 422, "Invalid", msg.data, name, r->group, r->kind,
                        json_incref(pc.causes));
        rc = FG_EINVAL;
    }
    fg_buf_free(&msg);
out:
    json_decref(pc.causes);
    return rc;
}

/* 422 for a bad or missing name and missing required fields. */
static int validate_or_reply(const ks_target_t *t, json_t *obj, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    const char *name = json_string_value(ks_path_get(obj, "metadata.name"));
    char detail[700];
    if (name == NULL || name[0] == '\0') {
        ks_invalid_reply(out, t, "", "metadata.name", "FieldValueRequired",
                         "Required value: name or generateName is required");
        return FG_EINVAL;
    }
    bool label = strcmp(r->name_rule, "label") == 0;
    if (label ? !fg_is_dns1123_label(name, strlen(name)) : !is_subdomain(name)) {
        snprintf(detail, sizeof(detail), "Invalid value: \"%.100s\": %s", name,
                 label ? LABEL_MSG : SUBDOMAIN_MSG);
        ks_invalid_reply(out, t, name, "metadata.name", "FieldValueInvalid", detail);
        return FG_EINVAL;
    }
    for (size_t i = 0; i < sizeof(REQUIRED) / sizeof(REQUIRED[0]); i++) {
        if (strcmp(REQUIRED[i].kind, r->kind) != 0)
            continue;
        for (size_t j = 0; j < 3 && REQUIRED[i].paths[j] != NULL; j++) {
            if (ks_path_get(obj, REQUIRED[i].paths[j]) == NULL) {
                ks_invalid_reply(out, t, name, REQUIRED[i].paths[j], "FieldValueRequired",
                                 "Required value");
                return FG_EINVAL;
            }
        }
    }
    return pod_spec_or_reply(t, obj, name, out);
}

static bool media_is(const char *ct, const char *want) {
    size_t n = strlen(want);
    return ct != NULL && strncmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';');
}

static void unsupported_media(ks_resp_t *out, const char *ct, const char *accepted) {
    char msg[300];
    snprintf(msg, sizeof(msg),
             "the body of the request was in an unknown format - accepted media types include: %s",
             accepted);
    (void)ct;
    ks_status_reply(out, 415, "UnsupportedMediaType", msg, NULL, NULL, NULL, NULL);
}

static int parse_body_or_reply(const ks_req_t *req, json_t **obj, ks_resp_t *out) {
    char err[160], msg[256];
    if (fg_json_load(req->body ? req->body : "", req->body_len, obj, err, sizeof(err)) != FG_OK) {
        snprintf(msg, sizeof(msg), "the object provided is unrecognized: %s", err);
        ks_status_reply(out, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
        return FG_EINVAL;
    }
    return FG_OK;
}

/* A create/update body: JSON, of this kind, in this namespace. *obj is new on success. */
static int object_body_or_reply(const ks_req_t *req, const ks_target_t *t, json_t **obj,
                                ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    char av[64], msg[300];
    if (req->content_type != NULL && req->content_type[0] != '\0' &&
        !media_is(req->content_type, "application/json")) {
        /* only what is really accepted: kubectl create namespace|deployment|job send protobuf,
         * which kubesim does not decode; listing it here sent users after a format that fails */
        unsupported_media(out, req->content_type, "application/json");
        return FG_EINVAL;
    }
    if (parse_body_or_reply(req, obj, out) != FG_OK)
        return FG_EINVAL;
    ks_resource_api_version(r, av, sizeof(av));
    const char *want_kind = r->kind;
    if (t->v1)
        snprintf(av, sizeof(av), "autoscaling/v1");
    if (t->sub != NULL && strcmp(t->sub, "scale") == 0) {
        /* a PUT of /scale carries an autoscaling/v1 Scale, not the Deployment */
        want_kind = "Scale";
        snprintf(av, sizeof(av), "autoscaling/v1");
    }
    const char *kind = json_string_value(json_object_get(*obj, "kind"));
    const char *api = json_string_value(json_object_get(*obj, "apiVersion"));
    const char *ns = json_string_value(ks_path_get(*obj, "metadata.namespace"));
    const char *why = NULL;
    if (!json_is_object(*obj) || !json_is_object(json_object_get(*obj, "metadata")))
        why = "the object provided is unrecognized (must be an object with metadata)";
    else if (kind != NULL && strcmp(kind, want_kind) != 0)
        snprintf(msg, sizeof(msg),
                 "the kind in the data (%.60s) does not match the expected kind "
                 "(%s)",
                 kind, want_kind),
            why = msg;
    else if (api != NULL && strcmp(api, av) != 0)
        snprintf(msg, sizeof(msg),
                 "the API version in the data (%.60s) does not match the "
                 "expected API version (%s)",
                 api, av),
            why = msg;
    else if (t->ns != NULL && ns != NULL && ns[0] != '\0' && strcmp(ns, t->ns) != 0)
        why = "the namespace of the provided object does not match the namespace sent on the "
              "request";
    if (why != NULL) {
        ks_status_reply(out, 400, "BadRequest", why, NULL, NULL, NULL, NULL);
        json_decref(*obj);
        *obj = NULL;
        return FG_EINVAL;
    }
    if (t->v1) { /* stored as autoscaling/v2 */
        json_t *v2 = ks_hpa_from_v1(*obj);
        json_decref(*obj);
        *obj = v2;
    }
    return FG_OK;
}

static char *manager_of(const ks_req_t *req) {
    const char *fm = ks_req_query(req, "fieldManager");
    if (fm != NULL && fm[0] != '\0')
        return fg_xstrndup(fm, strnlen(fm, 128));
    if (req->user_agent != NULL && req->user_agent[0] != '\0') {
        size_t n = strcspn(req->user_agent, "/ ");
        return fg_xstrndup(req->user_agent, n < 128 ? n : 128);
    }
    return fg_xstrdup("unknown");
}

/* Rebuilds obj with metadata first (server fields in a real server's order), status last. */
static json_t *normalized(json_t *obj) {
    static const char *const ORDER[] = {"name",
                                        "generateName",
                                        "namespace",
                                        "uid",
                                        "resourceVersion",
                                        "generation",
                                        "creationTimestamp",
                                        "deletionTimestamp",
                                        "labels",
                                        "annotations",
                                        "ownerReferences",
                                        "finalizers",
                                        "managedFields",
                                        NULL};
    json_t *meta = json_object_get(obj, "metadata");
    json_t *nm = json_object();
    for (size_t i = 0; ORDER[i] != NULL; i++) {
        json_t *v = json_object_get(meta, ORDER[i]);
        if (v != NULL)
            json_object_set(nm, ORDER[i], v);
    }
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (json_object_get(nm, k) == NULL)
            json_object_set(nm, k, v);
    }
    json_t *out = json_object();
    json_object_set_new(out, "metadata", nm);
    json_object_foreach(obj, k, v) {
        if (strcmp(k, "metadata") != 0 && strcmp(k, "status") != 0 && strcmp(k, "kind") != 0 &&
            strcmp(k, "apiVersion") != 0)
            json_object_set(out, k, v);
    }
    if (json_object_get(obj, "status") != NULL)
        json_object_set(out, "status", json_object_get(obj, "status"));
    return out;
}

/* Replaces the (manager, Update, subresource) entry of managed (borrowed, may be NULL) with one
 * for `sent`; returns the new managedFields array. */
static json_t *managed_with(const json_t *managed, const ks_resource_t *r, const char *manager,
                            const char *sub, const json_t *sent) {
    json_t *out = json_array();
    json_t *fields = ks_fields_v1(sent);
    char av[64], ts[32];
    ks_resource_api_version(r, av, sizeof(av));
    now_rfc3339(ts, sizeof(ts));
    size_t i;
    json_t *e;
    json_array_foreach(managed, i, e) {
        const char *m = json_string_value(json_object_get(e, "manager"));
        const char *s = json_string_value(json_object_get(e, "subresource"));
        bool same = m != NULL && strcmp(m, manager) == 0 &&
                    ((s == NULL && sub == NULL) || (s && sub && strcmp(s, sub) == 0));
        if (!same)
            json_array_append(out, e);
        else /* a manager keeps owning what it set before */
            json_object_update_recursive(fields, json_object_get(e, "fieldsV1"));
    }
    if (json_object_size(fields) == 0) {
        json_decref(fields);
        return out;
    }
    json_t *entry =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "manager", manager, "operation", "Update",
                  "apiVersion", av, "time", ts, "fieldsType", "FieldsV1", "fieldsV1", fields);
    if (sub != NULL)
        json_object_set_new(entry, "subresource", json_string(sub));
    json_array_append_new(out, entry);
    return out;
}

static void set_default(json_t *obj, const char *key, json_t *value) {
    if (json_is_object(obj) && json_object_get(obj, key) == NULL)
        json_object_set(obj, key, value);
    json_decref(value);
}

/* The defaults the API server's defaulting fills into a pod spec (k8s.io/api core/v1). */
static void pod_spec_defaults(json_t *spec) {
    size_t i, j;
    json_t *ctr, *port;
    set_default(spec, "restartPolicy", json_string("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json_integer(30));
    set_default(spec, "dnsPolicy", json_string("ClusterFirst"));
    set_default(spec, "securityContext", json_object());
    set_default(spec, "schedulerName", json_string("default-scheduler"));
    json_array_foreach(json_object_get(spec, "containers"), i, ctr) {
        const char *image = json_string_value(json_object_get(ctr, "image"));
        bool latest =
            image == NULL || strchr(image, ':') == NULL || strstr(image, ":latest") != NULL;
        set_default(ctr, "resources", json_object());
        set_default(ctr, "terminationMessagePath", json_string("/dev/termination-log"));
        set_default(ctr, "terminationMessagePolicy", json_string("File"));
        set_default(ctr, "imagePullPolicy", json_string(latest ? "Always" : "IfNotPresent"));
        json_array_foreach(json_object_get(ctr, "ports"), j, port)
            set_default(port, "protocol", json_string("TCP"));
    }
}

/* Defaults per kind, as the API server's defaulting sets them before storing. */
static void apply_defaults(const ks_resource_t *r, json_t *obj) {
    json_t *spec = json_object_get(obj, "spec");
    json_t *tmpl_spec = json_object_get(json_object_get(spec, "template"), "spec");
    if (strcmp(r->kind, "Pod") == 0) {
        pod_spec_defaults(spec);
        set_default(spec, "serviceAccountName", json_string("default"));
        set_default(spec, "serviceAccount", json_string("default"));
        set_default(spec, "enableServiceLinks", json_true());
        set_default(spec, "preemptionPolicy", json_string("PreemptLowerPriority"));
        set_default(spec, "priority", json_integer(0));
    } else if (strcmp(r->kind, "Deployment") == 0 || strcmp(r->kind, "ReplicaSet") == 0) {
        set_default(spec, "replicas", json_integer(1));
        set_default(spec, "revisionHistoryLimit", json_integer(10));
        if (strcmp(r->kind, "Deployment") == 0) {
            set_default(spec, "progressDeadlineSeconds", json_integer(600));
            set_default(spec, "strategy",
                        json_pack("{s:s, s:{s:s, s:s}}", "type", "RollingUpdate", "rollingUpdate",
                                  "maxUnavailable", "25%", "maxSurge", "25%"));
        }
        pod_spec_defaults(tmpl_spec);
    } else if (strcmp(r->kind, "Job") == 0) {
        set_default(spec, "parallelism", json_integer(1));
        set_default(spec, "completions", json_integer(1));
        set_default(spec, "backoffLimit", json_integer(6));
        set_default(spec, "completionMode", json_string("NonIndexed"));
        set_default(spec, "suspend", json_false());
        pod_spec_defaults(tmpl_spec);
    } else if (strcmp(r->kind, "CronJob") == 0) {
        set_default(spec, "concurrencyPolicy", json_string("Allow"));
        set_default(spec, "suspend", json_false());
        set_default(spec, "successfulJobsHistoryLimit", json_integer(3));
        set_default(spec, "failedJobsHistoryLimit", json_integer(1));
        pod_spec_defaults(json_object_get(
            json_object_get(json_object_get(json_object_get(spec, "jobTemplate"), "spec"),
                            "template"),
            "spec"));
    }
}

/* Whether every container (regular and init) of spec has cpu and memory limits equal to its
 * requests (requests default to limits), and whether any has a cpu/memory request or limit. */
static void qos_scan(const json_t *spec, bool *guaranteed, bool *any) {
    static const char *const LISTS[] = {"containers", "initContainers"};
    static const char *const RES[] = {"cpu", "memory"};
    *guaranteed = true;
    *any = false;
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *ctr;
        json_array_foreach(json_object_get(spec, LISTS[l]), i, ctr) {
            json_t *res = json_object_get(ctr, "resources");
            json_t *req = json_object_get(res, "requests"), *lim = json_object_get(res, "limits");
            for (size_t k = 0; k < 2; k++) {
                const char *rq = json_string_value(json_object_get(req, RES[k]));
                const char *lm = json_string_value(json_object_get(lim, RES[k]));
                *any = *any || rq != NULL || lm != NULL;
                if (lm == NULL || (rq != NULL && strcmp(rq, lm) != 0))
                    *guaranteed = false;
            }
        }
    }
}

/* The pod's QoS class as the API server computes it at create (pkg/apis/core/helper/qos):
 * BestEffort without any cpu/memory request or limit, Guaranteed when every container's
 * limits are set and equal to its requests, else Burstable. (Quantities are compared as
 * written: "1" and "1000m" differ here, not on a real server.) */
static const char *qos_class(const json_t *spec) {
    bool guaranteed, any;
    qos_scan(spec, &guaranteed, &any);
    if (!any)
        return "BestEffort";
    return guaranteed ? "Guaranteed" : "Burstable";
}

/* A Job's selector and labels, generated at create as the API server's job strategy does
 * (unless spec.manualSelector): spec.selector matches the new uid; the template gets the
 * controller-uid and job-name labels (both spellings); a Job without labels takes its
 * template's. */
static void job_generate_selector(json_t *obj) {
    json_t *meta = json_object_get(obj, "metadata");
    json_t *spec = json_object_get(obj, "spec");
    json_t *tmpl = json_object_get(spec, "template");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!json_is_object(tmpl) || uid == NULL || name == NULL ||
        json_is_true(json_object_get(spec, "manualSelector")))
        return;
    json_t *tmeta = json_object_get(tmpl, "metadata");
    if (!json_is_object(tmeta)) {
        tmeta = json_object();
        json_object_set_new(tmpl, "metadata", tmeta);
    }
    json_t *labels = json_object_get(tmeta, "labels");
    if (!json_is_object(labels)) {
        labels = json_object();
        json_object_set_new(tmeta, "labels", labels);
    }
    json_object_set_new(labels, "batch.kubernetes.io/controller-uid", json_string(uid));
    json_object_set_new(labels, "batch.kubernetes.io/job-name", json_string(name));
    json_object_set_new(labels, "controller-uid", json_string(uid));
    json_object_set_new(labels, "job-name", json_string(name));
    json_object_set_new(
        spec, "selector",
        json_pack("{s:{s:s}}", "matchLabels", "batch.kubernetes.io/controller-uid", uid));
    json_t *own = json_object_get(meta, "labels");
    if (!json_is_object(own) || json_object_size(own) == 0)
        json_object_set_new(meta, "labels", json_deep_copy(labels));
}

/* Defaults a real server fills at create for the kinds whose status it owns. */
static void create_defaults(const ks_resource_t *r, json_t *obj) {
    if (strcmp(r->kind, "Job") == 0)
        job_generate_selector(obj);
    if (!r->has_status)
        return;
    if (strcmp(r->kind, "Pod") == 0)
        json_object_set_new(obj, "status",
                            json_pack("{s:s, s:s}", "phase", "Pending", "qosClass",
                                      qos_class(json_object_get(obj, "spec"))));
    else if (strcmp(r->kind, "Namespace") == 0) {
        json_object_set_new(obj, "spec", json_pack("{s:[s]}", "finalizers", "kubernetes"));
        json_object_set_new(obj, "status", json_pack("{s:s}", "phase", "Active"));
    } else
        json_object_set_new(obj, "status", json_object());
}

static void write_reply(ks_resp_t *out, int code, ks_obj_t *o) {
    out->code = code;
    out->content_type = "application/json";
    out->body = ks_obj_full_json(o, &out->len);
}

static void conflict_reply(ks_resp_t *out, const ks_resource_t *r, const char *name) {
    char msg[400];
    const char *g = r->group;
    snprintf(msg, sizeof(msg),
             "Operation cannot be fulfilled on %s%s%s \"%s\": the object has been modified; please "
             "apply your changes to the latest version and try again",
             r->plural, g[0] ? "." : "", g, name);
    ks_status_reply(out, 409, "Conflict", msg, name, g, r->plural, NULL);
}

static void store_error_reply(ks_resp_t *out, int rc, const ks_resource_t *r, const char *name) {
    char msg[320];
    if (rc == KS_ECONFLICT) {
        conflict_reply(out, r, name);
    } else if (rc == KS_EEXIST) {
        snprintf(msg, sizeof(msg), "%s%s%s \"%s\" already exists", r->plural,
                 r->group[0] ? "." : "", r->group, name);
        ks_status_reply(out, 409, "AlreadyExists", msg, name, r->group, r->plural, NULL);
    } else {
        ks_not_found_reply(out, r, name);
    }
}

void ks_create(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    json_t *obj = NULL, *norm = NULL;
    char *manager = manager_of(req), *key = NULL;
    char uid[40], ts[32];
    ks_obj_t *stored = NULL;
    if (object_body_or_reply(req, t, &obj, out) != FG_OK)
        goto out;
    json_t *meta = json_object_get(obj, "metadata");
    const char *gen_name = json_string_value(json_object_get(meta, "generateName"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if ((name == NULL || name[0] == '\0') && gen_name != NULL && gen_name[0] != '\0') {
        static const char ALNUM[] = "bcdfghjklmnpqrstvwxz2456789";
        unsigned char rnd[5];
        char suffix[6];
        fg_random_bytes(rnd, sizeof(rnd));
        for (size_t i = 0; i < 5; i++)
            suffix[i] = ALNUM[rnd[i] % (sizeof(ALNUM) - 1)];
        suffix[5] = '\0';
        json_object_set_new(meta, "name", json_sprintf("%s%s", gen_name, suffix));
    }
    /* the namespace first: NamespaceLifecycle admission runs before the kind's validation */
    if (t->ns != NULL) {
        ks_obj_t *nsobj = NULL;
        if (ks_store_get(c->store, ks_resource_by_kind("Namespace"), t->ns, &nsobj) != FG_OK) {
            ks_not_found_reply(out, &ks_resources[ks_resource_by_kind("Namespace")], t->ns);
            goto out;
        }
        ks_obj_unref(nsobj);
        json_object_set_new(meta, "namespace", json_string(t->ns));
    }
    if (validate_or_reply(t, obj, out) != FG_OK)
        goto out;
    name = json_string_value(json_object_get(meta, "name"));
    new_uid(uid, sizeof(uid));
    now_rfc3339(ts, sizeof(ts));
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "creationTimestamp", json_string(ts));
    json_object_set_new(meta, "resourceVersion", json_string("")); /* the store fills it */
    if (json_object_get(obj, "spec") != NULL && strcmp(r->kind, "Namespace") != 0)
        json_object_set_new(meta, "generation", json_integer(1));
    json_object_set_new(meta, "managedFields", managed_with(NULL, r, manager, NULL, obj));
    create_defaults(r, obj);
    apply_defaults(r, obj);
    norm = normalized(obj);
    key = ks_key(t->ns, name);
    int rc = ks_store_put(c->store, t->res, key, norm, KS_PUT_CREATE, 0, &stored);
    norm = NULL;
    if (rc != FG_OK) {
        store_error_reply(out, rc, r, name);
        goto out;
    }
    write_reply(out, 201, stored);
out:
    ks_obj_unref(stored);
    json_decref(obj);
    json_decref(norm);
    free(manager);
    free(key);
}

/* Whether a write changes the spec (and so bumps metadata.generation). A pod's binding to a
 * node (spec.nodeName) goes through pods/binding on a real server and leaves generation at 1,
 * so it does not count here. */
static bool spec_changed(const ks_resource_t *r, const json_t *next, const json_t *cur) {
    if (strcmp(r->kind, "Pod") != 0)
        return !json_equal(next, cur);
    json_t *a = json_deep_copy(next), *b = json_deep_copy(cur);
    json_object_del(a, "nodeName");
    json_object_del(b, "nodeName");
    bool changed = !json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return changed;
}

/* `next` may share members with a stored object (which never changes: the merge patches copy
 * only what they change): before commit writes into a member it takes a shallow copy of its
 * own, from the top down. own_member returns parent's member key, copied (or NULL). */
static json_t *own_member(json_t *parent, const char *key) {
    json_t *v = json_object_get(parent, key);
    if (!json_is_object(v) && !json_is_array(v))
        return v;
    json_t *copy = json_copy(v);
    json_object_set_new(parent, key, copy);
    return copy;
}

/* What pod_spec_defaults writes: the spec, its containers and their ports. */
static void own_pod_spec(json_t *spec) {
    json_t *ctrs = own_member(spec, "containers");
    size_t i;
    json_t *ctr;
    json_array_foreach(ctrs, i, ctr) {
        if (!json_is_object(ctr))
            continue;
        ctr = json_copy(ctr);
        json_array_set_new(ctrs, i, ctr);
        json_t *ports = own_member(ctr, "ports");
        size_t j;
        json_t *port;
        json_array_foreach(ports, j, port) {
            if (json_is_object(port))
                json_array_set_new(ports, j, json_copy(port));
        }
    }
}

/* What apply_defaults writes, each member on the way copied (obj's top level is owned). */
static void own_defaulted(const ks_resource_t *r, json_t *obj) {
    json_t *spec = own_member(obj, "spec");
    if (strcmp(r->kind, "Pod") == 0) {
        own_pod_spec(spec);
    } else if (strcmp(r->kind, "Deployment") == 0 || strcmp(r->kind, "ReplicaSet") == 0 ||
               strcmp(r->kind, "Job") == 0) {
        own_pod_spec(own_member(own_member(spec, "template"), "spec"));
    } else if (strcmp(r->kind, "CronJob") == 0) {
        json_t *jt = own_member(own_member(spec, "jobTemplate"), "spec");
        own_pod_spec(own_member(own_member(jt, "template"), "spec"));
    }
}

/* Merges `next` (a full object as the client wants it, stolen) over `cur` under the server's
 * rules and stores it with expect_rv = cur's RV. sent is what the client sent (for FieldsV1). */
static int commit(ks_cluster_t *c, const ks_target_t *t, const ks_obj_t *cur, json_t *next,
                  const json_t *sent, const char *manager, ks_obj_t **stored) {
    const ks_resource_t *r = &ks_resources[t->res];
    bool status_sub = t->sub != NULL && strcmp(t->sub, "status") == 0;
    json_t *result;
    if (status_sub) {
        /* the stored object with its status swapped: a shallow copy shares every member but
         * status and metadata (which gets its own shallow copy below, as it is written), as
         * stored versions already share the members a write leaves alone */
        result = json_copy(ks_obj_json(cur));
        json_t *st = json_object_get(next, "status");
        if (st != NULL)
            json_object_set(result, "status", st);
        json_decref(next);
    } else {
        result = next;
        own_defaulted(r, result);
        json_t *old_status = json_object_get(ks_obj_json(cur), "status");
        if (r->has_status && old_status != NULL)
            json_object_set(result, "status", old_status);
        else if (r->has_status)
            json_object_del(result, "status");
        apply_defaults(r, result);
    }
    json_t *meta = own_member(result, "metadata");
    json_t *old_meta = json_object_get(ks_obj_json(cur), "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(result, "metadata", meta);
    }
    static const char *const KEEP[] = {"name",       "namespace", "uid", "creationTimestamp",
                                       "generation", NULL};
    for (size_t i = 0; KEEP[i] != NULL; i++) {
        json_t *v = json_object_get(old_meta, KEEP[i]);
        if (v != NULL)
            json_object_set(meta, KEEP[i], v);
        else
            json_object_del(meta, KEEP[i]);
    }
    json_t *gen = json_object_get(old_meta, "generation");
    if (gen != NULL &&
        spec_changed(r, json_object_get(result, "spec"), json_object_get(ks_obj_json(cur), "spec")))
        json_object_set_new(meta, "generation", json_integer(json_integer_value(gen) + 1));
    json_object_set_new(meta, "managedFields",
                        managed_with(json_object_get(old_meta, "managedFields"), r, manager,
                                     status_sub ? "status" : NULL, sent));
    json_t *norm = normalized(result);
    json_decref(result);
    return ks_store_put(c->store, t->res, cur->key, norm, KS_PUT_UPDATE, cur->rv, stored);
}

/* The client's precondition: metadata.resourceVersion in what it sent, if any. */
static int expected_rv(const json_t *sent, int64_t *rv) {
    const char *s = json_string_value(ks_path_get((json_t *)sent, "metadata.resourceVersion"));
    *rv = 0;
    if (s == NULL || s[0] == '\0')
        return FG_OK;
    return fg_parse_int64(s, strlen(s), 1, INT64_MAX, rv);
}

json_t *ks_scale_of(const ks_obj_t *o) {
    json_t *meta = json_object_get(ks_obj_json(o), "metadata");
    json_t *spec = json_object_get(ks_obj_json(o), "spec");
    json_t *status = json_object_get(ks_obj_json(o), "status");
    json_t *ml = json_object_get(json_object_get(spec, "selector"), "matchLabels");
    fg_buf_t sel;
    fg_buf_init(&sel, 4096);
    const char *k;
    json_t *v;
    json_object_foreach(ml, k, v) {
        fg_buf_appendf(&sel, "%s%s=%s", sel.len ? "," : "", k,
                       json_string_value(v) ? json_string_value(v) : "");
    }
    json_t *out = json_pack(
        "{s:s, s:s, s:{s:O, s:O, s:O, s:O, s:O}, s:{s:I}, s:{s:I, s:s}}", "kind", "Scale",
        "apiVersion", "autoscaling/v1", "metadata", "name", json_object_get(meta, "name"),
        "namespace", json_object_get(meta, "namespace"), "uid", json_object_get(meta, "uid"),
        "resourceVersion", json_object_get(meta, "resourceVersion"), "creationTimestamp",
        json_object_get(meta, "creationTimestamp"), "spec", "replicas",
        (json_int_t)json_integer_value(json_object_get(spec, "replicas")), "status", "replicas",
        (json_int_t)json_integer_value(json_object_get(status, "replicas")), "selector",
        sel.data ? sel.data : "");
    fg_buf_free(&sel);
    return out;
}

/* The object the client wants after this write (new reference), from a PUT body or a patch of
 * the current state; for /scale, the Deployment with the Scale's replicas. */
static int desired_or_reply(const ks_req_t *req, const ks_target_t *t, const ks_obj_t *cur,
                            json_t *sent, json_t **next, ks_resp_t *out) {
    bool scale = t->sub != NULL && strcmp(t->sub, "scale") == 0;
    bool is_patch = strcmp(req->method, "PATCH") == 0;
    bool merging = media_is(req->content_type, "application/merge-patch+json") ||
                   media_is(req->content_type, "application/strategic-merge-patch+json");
    /* the base only a patch reads (a PUT replaces) */
    json_t *base = !is_patch ? NULL
                   : scale   ? ks_scale_of(cur)
                   : t->v1   ? ks_hpa_to_v1(ks_obj_json(cur)) /* a v1 patch applies to v1 */
                   : merging ? json_incref(ks_obj_json(cur))  /* the merges copy what they change */
                             : json_deep_copy(ks_obj_json(cur)); /* JSON patch: changed in place */
    json_t *res = NULL;
    char err[256];
    int rc = FG_OK;
    const char *ct = req->content_type;
    if (!is_patch && t->sub != NULL && strcmp(t->sub, "status") == 0) {
        res = json_incref(sent); /* commit only reads its status, and changes nothing in it */
    } else if (!is_patch) {
        res = json_deep_copy(sent);
    } else if (media_is(ct, "application/merge-patch+json")) {
        rc = ks_merge_patch_into(base, sent, &res); /* base: given up */
        base = NULL;
    } else if (media_is(ct, "application/strategic-merge-patch+json")) {
        rc = ks_strategic_merge_patch_into(base, sent, &res);
        base = NULL;
    } else {
        rc = ks_json_patch_into(base, sent, &res, err, sizeof(err));
        base = NULL;
        if (rc != FG_OK) {
            ks_status_reply(out, 422, "Invalid", err, NULL, NULL, NULL, NULL);
            goto done;
        }
    }
    if (rc != FG_OK) {
        ks_status_reply(out, 400, "BadRequest", "the patch is not a JSON object", NULL, NULL, NULL,
                        NULL);
        goto done;
    }
    if (t->v1 && is_patch) {
        json_t *v2 = ks_hpa_from_v1(res);
        json_decref(res);
        res = v2;
    }
    if (scale) {
        json_t *replicas = ks_path_get(res, "spec.replicas");
        json_t *dep = json_copy(ks_obj_json(cur)); /* commit copies what it changes */
        json_t *dep_spec = json_copy(json_object_get(dep, "spec"));
        if (!json_is_integer(replicas) || json_integer_value(replicas) < 0) {
            json_decref(dep);
            json_decref(dep_spec);
            ks_invalid_reply(out, t, "", "spec.replicas", "FieldValueInvalid",
                             "Invalid value: must be greater than or equal to 0");
            rc = FG_EINVAL;
            goto done;
        }
        if (dep_spec != NULL) {
            json_object_set(dep_spec, "replicas", replicas);
            json_object_set_new(dep, "spec", dep_spec);
        }
        json_decref(res);
        res = dep;
    }
    *next = res;
    res = NULL;
done:
    json_decref(base);
    json_decref(res);
    return rc;
}

/* PUT and PATCH: read, compute, commit; a PATCH retries when another writer won the race. */
static void modify(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, json_t *sent,
                   ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    bool is_patch = strcmp(req->method, "PATCH") == 0;
    bool scale = t->sub != NULL && strcmp(t->sub, "scale") == 0;
    char *manager = manager_of(req), *key = ks_key(t->ns, t->name);
    ks_obj_t *cur = NULL, *stored = NULL;
    int64_t want_rv = 0;
    if (expected_rv(sent, &want_rv) != FG_OK) {
        ks_status_reply(out, 400, "BadRequest", "metadata.resourceVersion: invalid value", NULL,
                        NULL, NULL, NULL);
        goto out;
    }
    for (int attempt = 0; attempt < MAX_PATCH_RETRIES; attempt++) {
        json_t *next = NULL;
        ks_obj_unref(cur);
        cur = NULL;
        if (ks_store_get(c->store, t->res, key, &cur) != FG_OK) {
            ks_not_found_reply(out, r, t->name);
            goto out;
        }
        if (want_rv > 0 && want_rv != cur->rv) {
            conflict_reply(out, r, t->name);
            goto out;
        }
        if (desired_or_reply(req, t, cur, sent, &next, out) != FG_OK)
            goto out;
        if (!scale && t->sub == NULL && validate_or_reply(t, next, out) != FG_OK) {
            json_decref(next);
            goto out;
        }
        int rc = commit(c, t, cur, next, sent, manager, &stored);
        if (rc == FG_OK)
            break;
        if (rc != KS_ECONFLICT || !is_patch || want_rv > 0) {
            store_error_reply(out, rc, r, t->name);
            goto out;
        }
    }
    if (stored == NULL) {
        conflict_reply(out, r, t->name);
        goto out;
    }
    if (scale)
        ks_json_reply(out, 200, ks_scale_of(stored));
    else
        write_reply(out, 200, stored);
out:
    ks_obj_unref(cur);
    ks_obj_unref(stored);
    free(manager);
    free(key);
}

void ks_update(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    json_t *sent = NULL;
    const char *name;
    if (object_body_or_reply(req, t, &sent, out) != FG_OK)
        goto out;
    name = json_string_value(ks_path_get(sent, "metadata.name"));
    if (name == NULL || strcmp(name, t->name) != 0) {
        ks_status_reply(out, 400, "BadRequest",
                        "the name of the object does not match the name on the URL", NULL, NULL,
                        NULL, NULL);
        goto out;
    }
    modify(c, req, t, sent, out);
out:
    json_decref(sent);
}

void ks_patch(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    json_t *sent = NULL;
    const char *ct = req->content_type;
    if (!media_is(ct, "application/merge-patch+json") &&
        !media_is(ct, "application/strategic-merge-patch+json") &&
        !media_is(ct, "application/json-patch+json")) {
        unsupported_media(out, ct,
                          "application/json-patch+json, application/merge-patch+json, "
                          "application/strategic-merge-patch+json");
        return;
    }
    if (parse_body_or_reply(req, &sent, out) != FG_OK)
        return;
    modify(c, req, t, sent, out);
    json_decref(sent);
}

/* ---- deletion and the garbage collector ------------------------------------------ */

struct ks_gc_item {
    int res;
    char *ns;  /* NULL for cluster-scoped owners (they have no namespaced dependents here) */
    char *key; /* the owner's store key (orphan: still stored, with the finalizer) */
    char *uid;
    bool orphan;
    ks_gc_item_t *next;
};

static void gc_push(ks_cluster_t *c, int res, const char *ns, const char *key, const char *uid,
                    bool orphan) {
    ks_gc_item_t *it = fg_xcalloc(1, sizeof(*it));
    it->res = res;
    it->ns = ns ? fg_xstrdup(ns) : NULL;
    it->key = fg_xstrdup(key);
    it->uid = fg_xstrdup(uid);
    it->orphan = orphan;
    pthread_mutex_lock(&c->gc_mu);
    it->next = c->gc;
    c->gc = it;
    pthread_mutex_unlock(&c->gc_mu);
}

static void gc_items_free(ks_gc_item_t *it) {
    while (it != NULL) {
        ks_gc_item_t *next = it->next;
        free(it->ns);
        free(it->key);
        free(it->uid);
        free(it);
        it = next;
    }
}

void ks_gc_free(ks_cluster_t *c) {
    gc_items_free(c->gc);
    c->gc = NULL;
}

/* The ownerReferences of obj without the one naming uid (new), or NULL when none names it. */
static json_t *refs_without(json_t *obj, const char *uid) {
    json_t *refs = ks_path_get(obj, "metadata.ownerReferences"), *keep = json_array(), *ref;
    size_t j;
    bool named = false;
    json_array_foreach(refs, j, ref) {
        const char *u = json_string_value(json_object_get(ref, "uid"));
        if (u != NULL && strcmp(u, uid) == 0)
            named = true;
        else
            json_array_append(keep, ref);
    }
    if (!named) {
        json_decref(keep);
        return NULL;
    }
    return keep;
}

/* Every object of the namespace whose ownerReferences name uid: deleted, recursively (dependents
 * of dependents), or with orphan only that owner reference removed. */
static void collect_dependents(ks_cluster_t *c, const char *ns, const char *uid, bool orphan,
                               int depth) {
    for (size_t res = 0; res < ks_nresources && depth < 8; res++) {
        ks_obj_t **items = NULL;
        size_t n = 0;
        int64_t rv;
        if (!ks_resources[res].namespaced || ns == NULL ||
            ks_store_count_owned(c->store, (int)res) == 0)
            continue; /* no object of the kind names an owner (Events, most often) */
        if (ks_store_list(c->store, (int)res, ns, NULL, 0, &items, &n, &rv) != FG_OK)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (!items[i]->owned ||
                memmem(items[i]->ser, items[i]->ser_len, uid, strlen(uid)) == NULL)
                continue; /* cheap pre-filters: no need to parse what cannot name uid */
            json_t *item = ks_obj_parse(items[i]);
            json_t *keep = refs_without(item, uid);
            if (keep != NULL && orphan) {
                json_t *meta = json_object_get(item, "metadata");
                if (json_array_size(keep) > 0)
                    json_object_set(meta, "ownerReferences", keep);
                else
                    json_object_del(meta, "ownerReferences");
                ks_store_put(c->store, (int)res, items[i]->key, json_incref(item), KS_PUT_UPDATE,
                             items[i]->rv, NULL);
            } else if (keep != NULL) {
                ks_obj_t *gone = NULL;
                if (ks_store_delete(c->store, (int)res, items[i]->key, &gone) == FG_OK) {
                    const char *guid =
                        json_string_value(ks_path_get(ks_obj_json(gone), "metadata.uid"));
                    if (guid != NULL)
                        collect_dependents(c, ns, guid, false, depth + 1);
                    ks_obj_unref(gone);
                }
            }
            json_decref(keep);
            json_decref(item);
        }
        ks_objs_free(items, n);
    }
}

void ks_gc_run(ks_cluster_t *c) {
    pthread_mutex_lock(&c->gc_mu);
    ks_gc_item_t *work = c->gc;
    c->gc = NULL;
    pthread_mutex_unlock(&c->gc_mu);
    for (ks_gc_item_t *it = work; it != NULL; it = it->next) {
        collect_dependents(c, it->ns, it->uid, it->orphan, 0);
        if (it->orphan) /* dependents released: the finalizer is done, the owner goes */
            ks_store_delete(c->store, it->res, it->key, NULL);
    }
    gc_items_free(work);
}

/* The propagation policy of a DELETE: ?propagationPolicy=, else the DeleteOptions body's
 * propagationPolicy, else orphanDependents (query or body), else the kind's default: Orphan for
 * batch/v1 Jobs (their REST strategy's DefaultGarbageCollectionPolicy), Background otherwise.
 * Foreground is served as Background (no foregroundDeletion finalizer here). */
static bool delete_orphans(const ks_req_t *req, const ks_resource_t *r) {
    const char *policy = ks_req_query(req, "propagationPolicy");
    json_t *opts = NULL;
    bool orphan;
    if (req->body_len > 0)
        fg_json_load(req->body, req->body_len, &opts, NULL, 0);
    if (policy == NULL)
        policy = json_string_value(json_object_get(opts, "propagationPolicy"));
    if (policy != NULL && policy[0] != '\0')
        orphan = strcmp(policy, "Orphan") == 0;
    else if (ks_req_query(req, "orphanDependents") != NULL)
        orphan = ks_req_flag(req, "orphanDependents");
    else if (json_is_boolean(json_object_get(opts, "orphanDependents")))
        orphan = json_is_true(json_object_get(opts, "orphanDependents"));
    else
        orphan = strcmp(r->kind, "Job") == 0;
    json_decref(opts);
    return orphan;
}

/* Orphan deletion: the object stays, with deletionTimestamp and the `orphan` finalizer, until
 * the garbage collector has released its dependents; the answer is the object. */
static void delete_orphaning(ks_cluster_t *c, const ks_target_t *t, ks_obj_t *cur, const char *key,
                             ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    json_t *obj = json_deep_copy(ks_obj_json(cur));
    json_t *meta = json_object_get(obj, "metadata");
    ks_obj_t *stored = NULL;
    char ts[32];
    if (json_object_get(meta, "deletionTimestamp") == NULL) {
        json_t *fin = json_object_get(meta, "finalizers");
        if (!json_is_array(fin)) {
            fin = json_array();
            json_object_set_new(meta, "finalizers", fin);
        }
        json_array_append_new(fin, json_string("orphan"));
        now_rfc3339(ts, sizeof(ts));
        json_object_set_new(meta, "deletionTimestamp", json_string(ts));
        json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0));
        json_t *norm = normalized(obj);
        if (ks_store_put(c->store, t->res, key, norm, KS_PUT_UPDATE, cur->rv, &stored) != FG_OK) {
            conflict_reply(out, r, t->name);
            goto out;
        }
        gc_push(c, t->res, t->ns, key, json_string_value(json_object_get(meta, "uid")) ?: "", true);
        write_reply(out, 200, stored);
    } else {
        write_reply(out, 200, cur); /* already being deleted */
    }
out:
    json_decref(obj);
    ks_obj_unref(stored);
}

void ks_delete(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    const ks_resource_t *r = &ks_resources[t->res];
    char *key = ks_key(t->ns, t->name);
    ks_obj_t *gone = NULL;
    if (delete_orphans(req, r)) {
        if (ks_store_get(c->store, t->res, key, &gone) != FG_OK)
            ks_not_found_reply(out, r, t->name);
        else
            delete_orphaning(c, t, gone, key, out);
        goto out;
    }
    if (ks_store_delete(c->store, t->res, key, &gone) != FG_OK) {
        ks_not_found_reply(out, r, t->name);
        goto out;
    }
    const char *uid = json_string_value(ks_path_get(ks_obj_json(gone), "metadata.uid"));
    if (uid != NULL && t->ns != NULL)
        gc_push(c, t->res, t->ns, key, uid, false); /* dependents go in the GC's next pass */
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:{s:s, s:s, s:s, s:s}}", "kind", "Status",
                           "apiVersion", "v1", "metadata", "status", "Success", "details", "name",
                           t->name, "group", r->group, "kind", r->plural, "uid", uid ? uid : "");
    ks_json_reply(out, 200, st);
out:
    ks_obj_unref(gone);
    free(key);
}
