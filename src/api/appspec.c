/* api/appspec.c: an app as the API takes it (the contract's App) checked whole, and turned into
 * what placement needs and into the Deployment each chosen cluster gets.
 *
 * A Deployment carries, besides the pod template: the app's labels, app.kubernetes.io/name (its
 * selector), app.kubernetes.io/managed-by, fleetgate.io/tier (also on the pods: the scheduling
 * hint; Preemptible pods also tolerate the fleetgate.io/preemptible taint), and the annotations
 * fleetgate.io/spec (the app's spec as accepted, so a later change starts from it and it
 * survives a FLUSHALL of the cache), fleetgate.io/placement (the explanation of the decision)
 * and who asked with the request id (writes.c).
 */
#include "appspec.h"

#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const app_members[] = {"name",      "project",  "labels",    "spec",
                                          "status",    "version",  "createdAt", "updatedAt",
                                          "placement", "outcomes", NULL};
static const char *const app_required[] = {"name", "spec", NULL};
static const char *const spec_members[] = {"replicas", "tier",    "placement", "containers",
                                           "sidecars", "rollout", NULL};
static const char *const spec_required[] = {"replicas", "containers", NULL};
static const char *const placement_members[] = {"zones", "policy", "clusterSelector", NULL};
static const char *const selector_members[] = {"matchLabels", NULL};
static const char *const rollout_members[] = {"maxSurge", "maxUnavailable", NULL};
static const char *const container_members[] = {"name",  "image",     "command", "args", "env",
                                                "ports", "resources", "probes",  NULL};
static const char *const container_required[] = {"name", "image", NULL};
static const char *const resources_members[] = {"requests", "limits", NULL};
static const char *const amount_members[] = {"cpu", "memory", NULL};
static const char *const env_members[] = {"name", "value", "secretKeyRef", NULL};
static const char *const env_required[] = {"name", NULL};
static const char *const secret_members[] = {"name", "key", NULL};
static const char *const port_members[] = {"name", "containerPort", "protocol", NULL};
static const char *const port_required[] = {"containerPort", NULL};
static const char *const protocols[] = {"TCP", "UDP", "SCTP", NULL};
static const char *const probes_members[] = {"liveness", "readiness", "startup", NULL};
static const char *const probe_members[] = {
    "httpGet",        "tcpSocket",        "exec", "initialDelaySeconds", "periodSeconds",
    "timeoutSeconds", "failureThreshold", NULL};
static const char *const tiers[] = {"Reserved", "OnDemand", "Preemptible", NULL};
static const char *const policies[] = {"Spread", "Pack", NULL};

/* The probe's numbers, and where its K8s field is. */
static const struct {
    const char *name;
    int64_t lo, hi;
} probe_numbers[] = {{"initialDelaySeconds", 0, 3600},
                     {"periodSeconds", 1, 3600},
                     {"timeoutSeconds", 1, 3600},
                     {"failureThreshold", 1, 100}};
static const struct {
    const char *api, *k8s;
} probe_kinds[] = {
    {"liveness", "livenessProbe"}, {"readiness", "readinessProbe"}, {"startup", "startupProbe"}};

static bool no_space(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return false;
    return true;
}

static void validate_strings(vd_t *v, const json_t *a, const char *ptr, size_t max_items) {
    char p[VD_PTR_MAX];
    if (a == NULL)
        return;
    if (!json_is_array(a) || json_array_size(a) > max_items) {
        vd_add(v, ptr, "must be an array of at most %zu strings", max_items);
        return;
    }
    for (size_t i = 0; i < json_array_size(a); i++)
        vd_string(v, json_array_get(a, i), vd_ptr_i(p, ptr, i), 0, 32768);
}

static void validate_port_number(vd_t *v, const json_t *o, const char *key, const char *ptr,
                                 bool required) {
    char p[VD_PTR_MAX];
    const json_t *n = json_object_get(o, key);
    if (n == NULL && required)
        vd_add(v, vd_ptr(p, ptr, key), "is required");
    vd_int(v, n, vd_ptr(p, ptr, key), 1, 65535);
}

static void validate_probe(vd_t *v, const json_t *pr, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (!vd_object(v, pr, ptr, probe_members, NULL))
        return;
    const json_t *h = json_object_get(pr, "httpGet"), *t = json_object_get(pr, "tcpSocket"),
                 *e = json_object_get(pr, "exec");
    if ((h != NULL) + (t != NULL) + (e != NULL) != 1)
        vd_add(v, ptr, "needs exactly one of httpGet, tcpSocket, exec");
    static const char *const http_members[] = {"path", "port", NULL}, *const tcp[] = {"port", NULL},
                             *const ex[] = {"command", NULL};
    if (h && vd_object(v, h, vd_ptr(p, ptr, "httpGet"), http_members, http_members)) {
        const json_t *path = json_object_get(h, "path");
        if (vd_string(v, path, vd_ptr(q, p, "path"), 1, 1024) && path &&
            json_string_value(path)[0] != '/')
            vd_add(v, q, "must start with /");
        vd_int(v, json_object_get(h, "port"), vd_ptr(q, p, "port"), 1, 65535);
    }
    if (t && vd_object(v, t, vd_ptr(p, ptr, "tcpSocket"), tcp, tcp))
        validate_port_number(v, t, "port", p, false);
    if (e && vd_object(v, e, vd_ptr(p, ptr, "exec"), ex, ex)) {
        const json_t *cmd = json_object_get(e, "command");
        if (cmd && (!json_is_array(cmd) || json_array_size(cmd) == 0))
            vd_add(v, vd_ptr(q, p, "command"), "must be an array of 1 to 64 strings");
        else
            validate_strings(v, cmd, vd_ptr(q, p, "command"), 64);
    }
    for (size_t i = 0; i < sizeof probe_numbers / sizeof probe_numbers[0]; i++)
        vd_int(v, json_object_get(pr, probe_numbers[i].name), vd_ptr(p, ptr, probe_numbers[i].name),
               probe_numbers[i].lo, probe_numbers[i].hi);
}

static void validate_env(vd_t *v, const json_t *e, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (!vd_object(v, e, ptr, env_members, env_required))
        return;
    const json_t *name = json_object_get(e, "name");
    if (vd_string(v, name, vd_ptr(p, ptr, "name"), 1, 253) && name) {
        const char *s = json_string_value(name);
        bool ok = !(s[0] >= '0' && s[0] <= '9');
        for (; ok && *s; s++)
            ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                 *s == '-' || *s == '.' || *s == '_';
        if (!ok)
            vd_add(v, p, "must be letters, digits, -, . and _, not starting with a digit");
    }
    const json_t *val = json_object_get(e, "value"), *ref = json_object_get(e, "secretKeyRef");
    if ((val != NULL) == (ref != NULL))
        vd_add(v, ptr, "needs exactly one of value, secretKeyRef");
    vd_string(v, val, vd_ptr(p, ptr, "value"), 0, 32768);
    if (ref && vd_object(v, ref, vd_ptr(p, ptr, "secretKeyRef"), secret_members, secret_members)) {
        vd_string(v, json_object_get(ref, "name"), vd_ptr(q, p, "name"), 1, 253);
        vd_string(v, json_object_get(ref, "key"), vd_ptr(q, p, "key"), 1, 253);
    }
}

static void validate_resources(vd_t *v, const json_t *r, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (r == NULL || !vd_object(v, r, ptr, resources_members, NULL))
        return;
    for (size_t i = 0; resources_members[i]; i++) {
        const json_t *a = json_object_get(r, resources_members[i]);
        vd_ptr(p, ptr, resources_members[i]);
        if (a == NULL || !vd_object(v, a, p, amount_members, NULL))
            continue;
        vd_quantity(v, json_object_get(a, "cpu"), vd_ptr(q, p, "cpu"), true, NULL);
        vd_quantity(v, json_object_get(a, "memory"), vd_ptr(q, p, "memory"), false, NULL);
    }
}

static void validate_container(vd_t *v, const json_t *c, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (!vd_object(v, c, ptr, container_members, container_required))
        return;
    vd_dns_label(v, json_object_get(c, "name"), vd_ptr(p, ptr, "name"), 63);
    const json_t *image = json_object_get(c, "image");
    if (vd_string(v, image, vd_ptr(p, ptr, "image"), 1, 512) && image &&
        !no_space(json_string_value(image)))
        vd_add(v, p, "must be an image reference without spaces");
    validate_strings(v, json_object_get(c, "command"), vd_ptr(p, ptr, "command"), 64);
    validate_strings(v, json_object_get(c, "args"), vd_ptr(p, ptr, "args"), 256);
    const json_t *env = json_object_get(c, "env"), *ports = json_object_get(c, "ports");
    if (env && (!json_is_array(env) || json_array_size(env) > 256))
        vd_add(v, vd_ptr(p, ptr, "env"), "must be an array of at most 256 variables");
    for (size_t i = 0; json_is_array(env) && i < json_array_size(env); i++)
        validate_env(v, json_array_get(env, i), vd_ptr_i(q, vd_ptr(p, ptr, "env"), i));
    if (ports && (!json_is_array(ports) || json_array_size(ports) > 32))
        vd_add(v, vd_ptr(p, ptr, "ports"), "must be an array of at most 32 ports");
    for (size_t i = 0; json_is_array(ports) && i < json_array_size(ports); i++) {
        const json_t *pt = json_array_get(ports, i);
        vd_ptr_i(q, vd_ptr(p, ptr, "ports"), i);
        if (!vd_object(v, pt, q, port_members, port_required))
            continue;
        char r[VD_PTR_MAX];
        vd_dns_label(v, json_object_get(pt, "name"), vd_ptr(r, q, "name"), 15);
        validate_port_number(v, pt, "containerPort", q, false);
        vd_enum(v, json_object_get(pt, "protocol"), vd_ptr(r, q, "protocol"), protocols);
    }
    validate_resources(v, json_object_get(c, "resources"), vd_ptr(p, ptr, "resources"));
    const json_t *probes = json_object_get(c, "probes");
    if (probes && vd_object(v, probes, vd_ptr(p, ptr, "probes"), probes_members, NULL))
        for (size_t i = 0; probes_members[i]; i++)
            if (json_object_get(probes, probes_members[i]))
                validate_probe(v, json_object_get(probes, probes_members[i]),
                               vd_ptr(q, p, probes_members[i]));
}

/* maxSurge / maxUnavailable: an integer >= 0 or "N%" (1 to 3 digits). */
static void validate_rollout_value(vd_t *v, const json_t *x, const char *ptr) {
    if (x == NULL || (json_is_integer(x) && json_integer_value(x) >= 0))
        return;
    const char *s = json_string_value(x);
    size_t n = s ? strlen(s) : 0;
    bool ok = n >= 2 && n <= 4 && s[n - 1] == '%';
    for (size_t i = 0; ok && i + 1 < n; i++)
        ok = s[i] >= '0' && s[i] <= '9';
    if (!ok)
        vd_add(v, ptr, "must be an integer of at least 0 or a percentage such as 25%%");
}

static void validate_placement(vd_t *v, const json_t *pl, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (pl == NULL || !vd_object(v, pl, ptr, placement_members, NULL))
        return;
    const json_t *zones = json_object_get(pl, "zones");
    if (zones && (!json_is_array(zones) || json_array_size(zones) > 32))
        vd_add(v, vd_ptr(p, ptr, "zones"), "must be an array of at most 32 zones");
    for (size_t i = 0; json_is_array(zones) && i < json_array_size(zones); i++) {
        vd_ptr_i(q, vd_ptr(p, ptr, "zones"), i);
        if (!vd_string(v, json_array_get(zones, i), q, 1, 63))
            continue;
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(zones, j), json_array_get(zones, i)))
                vd_add(v, q, "is listed twice");
    }
    vd_enum(v, json_object_get(pl, "policy"), vd_ptr(p, ptr, "policy"), policies);
    const json_t *sel = json_object_get(pl, "clusterSelector");
    if (sel && vd_object(v, sel, vd_ptr(p, ptr, "clusterSelector"), selector_members, NULL))
        vd_labels(v, json_object_get(sel, "matchLabels"), vd_ptr(q, p, "matchLabels"));
}

void as_validate(vd_t *v, const json_t *app) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX];
    if (!vd_object(v, app, "", app_members, app_required))
        return;
    vd_dns_label(v, json_object_get(app, "name"), "/name", 63);
    vd_labels(v, json_object_get(app, "labels"), "/labels");
    const json_t *spec = json_object_get(app, "spec");
    if (spec == NULL || !vd_object(v, spec, "/spec", spec_members, spec_required))
        return;
    vd_int(v, json_object_get(spec, "replicas"), "/spec/replicas", 0, 1000);
    vd_enum(v, json_object_get(spec, "tier"), "/spec/tier", tiers);
    validate_placement(v, json_object_get(spec, "placement"), "/spec/placement");
    const json_t *cs = json_object_get(spec, "containers");
    if (cs && (!json_is_array(cs) || json_array_size(cs) < 1 || json_array_size(cs) > 16))
        vd_add(v, "/spec/containers", "must be an array of 1 to 16 containers");
    for (size_t i = 0; json_is_array(cs) && i < json_array_size(cs); i++) {
        vd_ptr_i(p, "/spec/containers", i);
        validate_container(v, json_array_get(cs, i), p);
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_object_get(json_array_get(cs, j), "name"),
                           json_object_get(json_array_get(cs, i), "name")))
                vd_add(v, vd_ptr(q, p, "name"), "is the name of another container");
    }
    /* names only here: the catalogue is the configuration's (as_validate_sidecars) */
    const json_t *sc = json_object_get(spec, "sidecars");
    if (sc && (!json_is_array(sc) || json_array_size(sc) > 8))
        vd_add(v, "/spec/sidecars", "must be an array of at most 8 names");
    for (size_t i = 0; json_is_array(sc) && i < json_array_size(sc); i++)
        vd_dns_label(v, json_array_get(sc, i), vd_ptr_i(p, "/spec/sidecars", i), 63);
    const json_t *ro = json_object_get(spec, "rollout");
    if (ro && vd_object(v, ro, "/spec/rollout", rollout_members, NULL)) {
        validate_rollout_value(v, json_object_get(ro, "maxSurge"), "/spec/rollout/maxSurge");
        validate_rollout_value(v, json_object_get(ro, "maxUnavailable"),
                               "/spec/rollout/maxUnavailable");
    }
}

/* ---- what placement needs -------------------------------------------------------- */

static int64_t quantity(const json_t *s, bool milli) {
    const char *t = json_string_value(s);
    int64_t n = 0;
    if (t == NULL || fg_kube_quantity_parse(t, strlen(t), milli, &n) != FG_OK)
        return 0;
    return n;
}

const char *as_tier(const json_t *spec) {
    const char *t = json_string_value(json_object_get(spec, "tier"));
    return t ? t : "OnDemand";
}

void as_request(const json_t *spec, int64_t replicas, const fg_config_t *cfg, as_request_t *out) {
    memset(out, 0, sizeof *out);
    out->req.replicas = replicas;
    out->req.per_replica.pods = 1;
    const json_t *c;
    size_t i;
    json_t *sidecars = as_sidecar_containers(spec, cfg);
    for (int side = 0; side < 2; side++)
        json_array_foreach(side ? sidecars : json_object_get(spec, "containers"), i, c) {
            const json_t *r = json_object_get(json_object_get(c, "resources"), "requests");
            out->req.per_replica.cpu_milli += quantity(json_object_get(r, "cpu"), true);
            out->req.per_replica.memory_bytes += quantity(json_object_get(r, "memory"), false);
        }
    json_decref(sidecars);
    const json_t *pl = json_object_get(spec, "placement");
    const char *policy = json_string_value(json_object_get(pl, "policy"));
    out->req.policy = policy && strcmp(policy, "Pack") == 0 ? FG_FED_PACK : FG_FED_SPREAD;
    const json_t *z;
    json_array_foreach(json_object_get(pl, "zones"), i, z) if (out->req.nzones < FG_FED_MAX_ZONES)
        out->zones[out->req.nzones++] = json_string_value(z);
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(json_object_get(pl, "clusterSelector"), "matchLabels"), k,
                        val) {
        if (out->req.nselector == FG_FED_MAX_LABELS)
            break;
        snprintf(out->pairs[out->req.nselector], sizeof out->pairs[0], "%s=%s", k,
                 json_string_value(val));
        out->selector[out->req.nselector] = out->pairs[out->req.nselector];
        out->req.nselector++;
    }
    out->req.zones = out->zones;
    out->req.selector = out->selector;
    out->req.tier = as_tier(spec);
}

/* ---- the Deployment ------------------------------------------------------------------- */

static json_t *k8s_probe(const json_t *p) {
    json_t *o = json_object();
    const json_t *h = json_object_get(p, "httpGet"), *t = json_object_get(p, "tcpSocket"),
                 *e = json_object_get(p, "exec");
    if (h)
        json_object_set_new(o, "httpGet", json_deep_copy(h));
    if (t)
        json_object_set_new(o, "tcpSocket", json_deep_copy(t));
    if (e)
        json_object_set_new(o, "exec", json_deep_copy(e));
    for (size_t i = 0; i < sizeof probe_numbers / sizeof probe_numbers[0]; i++)
        if (json_object_get(p, probe_numbers[i].name))
            rd_copy(o, probe_numbers[i].name, p, probe_numbers[i].name);
    return o;
}

static json_t *k8s_container(const json_t *c) {
    json_t *o = json_pack("{s:O,s:O}", "name", json_object_get(c, "name"), "image",
                          json_object_get(c, "image"));
    static const char *const copied[] = {"command", "args", "ports", "resources"};
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++)
        if (json_object_get(c, copied[i]))
            json_object_set_new(o, copied[i], json_deep_copy(json_object_get(c, copied[i])));
    const json_t *e;
    size_t i;
    json_t *env = json_array();
    json_array_foreach(json_object_get(c, "env"), i, e) {
        const json_t *ref = json_object_get(e, "secretKeyRef");
        if (ref)
            json_array_append_new(env,
                                  json_pack("{s:O,s:{s:O}}", "name", json_object_get(e, "name"),
                                            "valueFrom", "secretKeyRef", ref));
        else
            json_array_append(env, (json_t *)e);
    }
    if (json_array_size(env))
        json_object_set_new(o, "env", env);
    else
        json_decref(env);
    const json_t *probes = json_object_get(c, "probes");
    for (size_t k = 0; k < sizeof probe_kinds / sizeof probe_kinds[0]; k++) {
        const json_t *p = json_object_get(probes, probe_kinds[k].api);
        if (p)
            json_object_set_new(o, probe_kinds[k].k8s, k8s_probe(p));
    }
    return o;
}

json_t *as_deployment(const json_t *app, const char *project, int64_t replicas, json_t *annotations,
                      const fg_config_t *cfg) {
    const char *name = json_string_value(json_object_get(app, "name"));
    const json_t *spec = json_object_get(app, "spec");
    const char *tier = as_tier(spec);
    json_t *labels = json_object();
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(app, "labels"), k, val) json_object_set(labels, k, val);
    json_object_set_new(labels, AS_NAME_LABEL, json_string(name));
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("fleetgate"));
    json_object_set_new(labels, AS_TIER_LABEL, json_string(tier));
    json_t *containers = json_array();
    const json_t *c;
    size_t i;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
        json_array_append_new(containers, k8s_container(c));
    json_t *sidecars = as_sidecar_containers(spec, cfg);
    char names[8 * 64 + 8] = "";
    size_t len = 0;
    json_array_foreach(sidecars, i, c) {
        json_array_append_new(containers, k8s_container(c));
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? "," : "",
                                json_string_value(json_object_get(c, "name")));
        if (len >= sizeof names)
            len = sizeof names - 1;
    }
    json_decref(sidecars);
    json_t *pod = json_pack("{s:o}", "containers", containers);
    if (strcmp(tier, "Preemptible") == 0)
        json_object_set_new(pod, "tolerations",
                            json_pack("[{s:s,s:s,s:s}]", "key", "fleetgate.io/preemptible",
                                      "operator", "Exists", "effect", "NoSchedule"));
    json_t *d = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:o,s:O},s:{s:I,s:{s:{s:s}},s:{s:{s:{s:s,s:s}},s:o}}}", "apiVersion",
        "apps/v1", "kind", "Deployment", "metadata", "name", name, "namespace", project, "labels",
        labels, "annotations", annotations, "spec", "replicas", (json_int_t)replicas, "selector",
        "matchLabels", AS_NAME_LABEL, name, "template", "metadata", "labels", AS_NAME_LABEL, name,
        AS_TIER_LABEL, tier, "spec", pod);
    if (names[0]) {
        json_object_set_new(
            json_object_get(json_object_get(json_object_get(d, "spec"), "template"), "metadata"),
            "annotations", json_pack("{s:s}", "fleetgate.io/sidecars", names));
        char digest[17];
        as_sidecars_digest(spec, cfg, digest);
        json_object_set_new(labels, AS_SIDECARS_LABEL, json_string(digest));
    }
    const json_t *ro = json_object_get(spec, "rollout");
    if (ro)
        json_object_set_new(json_object_get(d, "spec"), "strategy",
                            json_pack("{s:s,s:O}", "type", "RollingUpdate", "rollingUpdate", ro));
    return d;
}

/* ---- what the reconciler compares --------------------------------------------------------- */

void as_sidecars_digest(const json_t *spec, const fg_config_t *cfg, char out[17]) {
    out[0] = '\0';
    json_t *sc = as_sidecar_containers(spec, cfg);
    if (json_array_size(json_object_get(spec, "sidecars")) > 0) {
        char *t = json_dumps(sc, JSON_COMPACT | JSON_SORT_KEYS);
        if (t == NULL)
            abort(); /* out of memory */
        snprintf(out, 17, "%016llx", (unsigned long long)fg_hash64(t, strlen(t), 0x51dec));
        free(t);
    }
    json_decref(sc);
}

const char *as_sidecar_missing(const json_t *spec, const fg_config_t *cfg) {
    const json_t *n;
    size_t i;
    json_array_foreach(json_object_get(spec, "sidecars"), i, n) {
        const char *name = json_string_value(n);
        if (name && (cfg == NULL || fg_config_sidecar(cfg, name) == NULL))
            return name;
    }
    return NULL;
}

const char *const as_deployment_template[] = {"spec", "template", NULL};
const char *const as_cronjob_template[] = {"spec", "jobTemplate", "spec", "template", NULL};

static json_t *at_path(const json_t *o, const char *const *path) {
    for (size_t i = 0; path[i] && o; i++)
        o = json_object_get(o, path[i]);
    return (json_t *)o;
}

void as_keep_gone_sidecars(json_t *obj, const json_t *live, const char *const *path,
                           const json_t *spec, const fg_config_t *cfg) {
    if (as_sidecar_missing(spec, cfg) == NULL)
        return; /* the catalogue holds every one: built from it */
    const json_t *n;
    size_t i;
    json_t *tmpl = at_path(obj, path),
           *mine = json_object_get(json_object_get(tmpl, "spec"), "containers");
    const json_t *theirs_tmpl = at_path(live, path),
                 *theirs = json_object_get(json_object_get(theirs_tmpl, "spec"), "containers");
    json_array_foreach(json_object_get(spec, "sidecars"), i, n) {
        const char *name = json_string_value(n);
        if (name == NULL || fg_config_sidecar(cfg, name) != NULL)
            continue;
        size_t k;
        const json_t *c;
        json_array_foreach(theirs, k, c) {
            const char *cn = json_string_value(json_object_get(c, "name"));
            if (cn && strcmp(cn, name) == 0)
                json_array_append_new(mine, json_deep_copy(c));
        }
    }
    /* the digest and the list as the live object has them: nothing changed for it */
    json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    const json_t *was = json_object_get(
        json_object_get(json_object_get(live, "metadata"), "labels"), AS_SIDECARS_LABEL);
    if (labels && was)
        json_object_set(labels, AS_SIDECARS_LABEL, (json_t *)was);
    const json_t *list = json_object_get(json_object_get(theirs_tmpl, "metadata"), "annotations");
    if (tmpl && json_object_get(list, "fleetgate.io/sidecars")) {
        json_t *tm = json_object_get(tmpl, "metadata"), *ann = json_object_get(tm, "annotations");
        if (tm == NULL) {
            tm = json_object();
            json_object_set_new(tmpl, "metadata", tm);
        }
        if (ann == NULL) {
            ann = json_object();
            json_object_set_new(tm, "annotations", ann);
        }
        json_object_set(ann, "fleetgate.io/sidecars",
                        json_object_get(list, "fleetgate.io/sidecars"));
    }
}

static char *shards_text(const json_t *shards) {
    char *t = json_dumps(shards, JSON_COMPACT | JSON_SORT_KEYS);
    if (t == NULL)
        abort(); /* out of memory */
    return t;
}

void as_write_hash(const char *spec_text, const json_t *shards, char out[17]) {
    char *sh = shards_text(shards), *both = fg_xasprintf("%s\n%s", spec_text ? spec_text : "", sh);
    snprintf(out, 17, "%016llx", (unsigned long long)fg_hash64(both, strlen(both), 0x5eed));
    free(both);
    free(sh);
}

void as_mark(json_t *metadata, const json_t *shards, const char *cluster) {
    json_t *labels = json_object_get(metadata, "labels"),
           *ann = json_object_get(metadata, "annotations");
    if (labels == NULL) {
        labels = json_object();
        json_object_set_new(metadata, "labels", labels);
    }
    char hash[17], num[24];
    as_write_hash(json_string_value(json_object_get(ann, AS_SPEC_ANN)), shards, hash);
    json_object_set_new(labels, AS_WRITE_LABEL, json_string(hash));
    snprintf(num, sizeof num, "%lld",
             (long long)json_integer_value(json_object_get(shards, cluster)));
    json_object_set_new(labels, AS_SHARE_LABEL, json_string(num));
    snprintf(num, sizeof num, "%zu", json_object_size(shards));
    json_object_set_new(labels, AS_SHARDS_LABEL, json_string(num));
    char *sh = shards_text(shards);
    json_object_set_new(ann, AS_SHARDS_ANN, json_string(sh));
    free(sh);
}

int64_t as_label_int(const json_t *labels, const char *key) {
    const char *s = json_string_value(json_object_get(labels, key));
    int64_t v = -1;
    if (s == NULL || fg_parse_int64(s, strlen(s), 0, 1000000, &v) != FG_OK)
        return -1;
    return v;
}

/* A numeric label of a cached object, -1 when absent or not a number. */
static int64_t label_num(const json_t *o, const char *key) {
    return as_label_int(json_object_get(o, "labels"), key);
}

static const char *label_str(const json_t *o, const char *key) {
    return json_string_value(json_object_get(json_object_get(o, "labels"), key));
}

static bool label_true(const json_t *o, const char *key) {
    const char *s = label_str(o, key);
    return s != NULL && strcmp(s, "true") == 0;
}

void as_standing(const rd_ctx_t *c, json_t *const *objs, as_standing_t *out) {
    const json_t *last = NULL;
    json_t *shards = NULL;
    int64_t held = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *o = objs[i];
        if (o == NULL)
            continue;
        if (label_true(o, AS_STOPPED_LABEL) || label_true(o, AS_DELETING_LABEL) ||
            label_str(o, AS_WRITE_LABEL) == NULL || label_num(o, AS_SHARE_LABEL) < 0)
            return;
        held++;
        if (last == NULL ||
            rd_int(o, "fleetgateWrittenAt", 0) > rd_int(last, "fleetgateWrittenAt", 0))
            last = o;
    }
    if (last == NULL)
        return;
    const char *write = label_str(last, AS_WRITE_LABEL);
    bool whole = held == label_num(last, AS_SHARDS_LABEL);
    for (size_t i = 0; i < c->nparts && whole; i++)
        whole = objs[i] == NULL || strcmp(label_str(objs[i], AS_WRITE_LABEL), write) == 0;
    if (!whole) { /* where the last write placed what: its shards annotation */
        const char *t = rd_str(last, "fleetgateShards");
        if (t == NULL || fg_json_load(t, strlen(t), &shards, NULL, 0) != FG_OK ||
            !json_is_object(shards)) {
            json_decref(shards);
            return;
        }
    }
    for (size_t i = 0; i < c->nparts; i++) {
        const json_t *o = objs[i];
        bool mine = o != NULL && strcmp(label_str(o, AS_WRITE_LABEL), write) == 0;
        const json_t *want = json_object_get(shards, c->parts[i].conf->name);
        out->placed[i] = mine                    ? label_num(o, AS_SHARE_LABEL)
                         : json_is_integer(want) ? json_integer_value(want)
                                                 : -1;
        out->pending[i] = !mine && (o != NULL || out->placed[i] >= 0);
        out->npending += out->pending[i];
    }
    json_decref(shards);
    out->known = true;
}

/* ---- managed sidecars ----------------------------------------------------------------------- */

void as_validate_sidecars(vd_t *v, const json_t *spec, const fg_config_t *cfg) {
    as_validate_sidecars_at(v, spec, cfg, "/spec");
}

void as_validate_sidecars_at(vd_t *v, const json_t *spec, const fg_config_t *cfg, const char *ptr) {
    const json_t *sc = json_object_get(spec, "sidecars");
    char p[VD_PTR_MAX], base[VD_PTR_MAX];
    vd_ptr(base, ptr, "sidecars");
    for (size_t i = 0; json_is_array(sc) && i < json_array_size(sc); i++) {
        const char *name = json_string_value(json_array_get(sc, i));
        if (name == NULL)
            continue; /* as_validate said so */
        vd_ptr_i(p, base, i);
        if (fg_config_sidecar(cfg, name) == NULL) {
            vd_add(v, p, "no managed sidecar %s in the platform's catalogue", name);
            continue;
        }
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(sc, j), json_array_get(sc, i)))
                vd_add(v, p, "names sidecar %s a second time", name);
        const json_t *c;
        size_t k;
        json_array_foreach(json_object_get(spec, "containers"), k, c) {
            const char *cn = json_string_value(json_object_get(c, "name"));
            if (cn && strcmp(cn, name) == 0)
                vd_add(v, p, "is the name of container %s/containers/%zu", ptr, k);
        }
    }
}

/* {requests|limits: {cpu, memory}} of a catalogue entry, or NULL when it sets none. */
static json_t *sidecar_resources(const fg_sidecar_conf_t *s) {
    json_t *req = json_object(), *lim = json_object(), *out = json_object();
    if (s->cpu)
        json_object_set_new(req, "cpu", json_string(s->cpu));
    if (s->memory)
        json_object_set_new(req, "memory", json_string(s->memory));
    if (s->cpu_limit)
        json_object_set_new(lim, "cpu", json_string(s->cpu_limit));
    if (s->memory_limit)
        json_object_set_new(lim, "memory", json_string(s->memory_limit));
    if (json_object_size(req))
        json_object_set(out, "requests", req);
    if (json_object_size(lim))
        json_object_set(out, "limits", lim);
    json_decref(req);
    json_decref(lim);
    if (json_object_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *as_sidecar_containers(const json_t *spec, const fg_config_t *cfg) {
    json_t *out = json_array();
    const json_t *n;
    size_t i;
    json_array_foreach(json_object_get(spec, "sidecars"), i, n) {
        const fg_sidecar_conf_t *s = cfg ? fg_config_sidecar(cfg, json_string_value(n)) : NULL;
        if (s == NULL)
            continue;
        json_t *c = json_pack("{s:s,s:s}", "name", s->name, "image", s->image);
        json_t *res = sidecar_resources(s);
        if (res)
            json_object_set_new(c, "resources", res);
        json_t *ports = json_array();
        for (size_t k = 0; k < s->nports; k++) {
            const char *colon = strchr(s->ports[k], ':'), *num = colon ? colon + 1 : s->ports[k];
            int64_t port = 0;
            fg_parse_int64(num, strlen(num), 1, 65535, &port); /* checked by the config */
            json_t *pt = json_pack("{s:I}", "containerPort", (json_int_t)port);
            if (colon)
                json_object_set_new(pt, "name",
                                    json_stringn(s->ports[k], (size_t)(colon - s->ports[k])));
            json_array_append_new(ports, pt);
        }
        json_t *env = json_array();
        for (size_t k = 0; k < s->nenv; k++) {
            const char *eq = strchr(s->env[k], '=');
            json_array_append_new(env, json_pack("{s:s%,s:s}", "name", s->env[k],
                                                 (size_t)(eq - s->env[k]), "value", eq + 1));
        }
        if (json_array_size(ports))
            json_object_set(c, "ports", ports);
        if (json_array_size(env))
            json_object_set(c, "env", env);
        json_decref(ports);
        json_decref(env);
        json_array_append_new(out, c);
    }
    return out;
}

/* ---- the parts of a pod a job set shares with an app -------------------------------- */

void as_validate_pod_parts(vd_t *v, const json_t *spec, const char *ptr) {
    char p[VD_PTR_MAX], q[VD_PTR_MAX], base[VD_PTR_MAX];
    vd_enum(v, json_object_get(spec, "tier"), vd_ptr(p, ptr, "tier"), tiers);
    validate_placement(v, json_object_get(spec, "placement"), vd_ptr(p, ptr, "placement"));
    const json_t *cs = json_object_get(spec, "containers");
    vd_ptr(base, ptr, "containers");
    if (cs && (!json_is_array(cs) || json_array_size(cs) < 1 || json_array_size(cs) > 16))
        vd_add(v, base, "must be an array of 1 to 16 containers");
    for (size_t i = 0; json_is_array(cs) && i < json_array_size(cs); i++) {
        vd_ptr_i(p, base, i);
        validate_container(v, json_array_get(cs, i), p);
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_object_get(json_array_get(cs, j), "name"),
                           json_object_get(json_array_get(cs, i), "name")))
                vd_add(v, vd_ptr(q, p, "name"), "is the name of another container");
    }
    /* names only here, as for apps: the catalogue is the configuration's
     * (as_validate_sidecars_at, called by the handlers) */
    const json_t *sc = json_object_get(spec, "sidecars");
    vd_ptr(base, ptr, "sidecars");
    if (sc && (!json_is_array(sc) || json_array_size(sc) > 8))
        vd_add(v, base, "must be an array of at most 8 names");
    for (size_t i = 0; json_is_array(sc) && i < json_array_size(sc); i++)
        vd_dns_label(v, json_array_get(sc, i), vd_ptr_i(p, base, i), 63);
}

json_t *as_pod_spec(const json_t *spec, const json_t *extra_env, const fg_config_t *cfg) {
    json_t *containers = json_array();
    const json_t *c;
    size_t i;
    json_array_foreach(json_object_get(spec, "containers"), i, c) {
        json_t *k = k8s_container(c);
        if (extra_env) {
            json_t *env = json_object_get(k, "env");
            if (env == NULL) {
                env = json_array();
                json_object_set_new(k, "env", env);
            }
            json_array_extend(env, (json_t *)extra_env); /* read, not changed */
        }
        json_array_append_new(containers, k);
    }
    json_t *sidecars = as_sidecar_containers(spec, cfg); /* after the job's own, as for apps */
    json_array_foreach(sidecars, i, c) json_array_append_new(containers, k8s_container(c));
    json_decref(sidecars);
    json_t *pod = json_pack("{s:o}", "containers", containers);
    if (strcmp(as_tier(spec), "Preemptible") == 0)
        json_object_set_new(pod, "tolerations",
                            json_pack("[{s:s,s:s,s:s}]", "key", "fleetgate.io/preemptible",
                                      "operator", "Exists", "effect", "NoSchedule"));
    return pod;
}
