/* api/platform.c: the reads of projects and member clusters, from the cache alone.
 *
 * A project is a namespace of the same name in every member cluster (cache kind `project`,
 * scope `_`); the list shows only the projects the caller holds a role in (every one for an
 * admin). A cluster is a row of the configuration; what the API says of it comes from Redis:
 * its health (fg:cluster), each cached resource's sync state (fg:sync) and its capacity, summed
 * from its cached nodes (HSCAN, a batch at a time); what its pods request comes from fed/'s
 * registry snapshot, the numbers placement decides on.
 */
#include "reads.h"

#include "cursor.h"

#include "fleetgate/auth.h"
#include "fleetgate/fed.h"
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE_SCAN_COUNT "500"

/* ---- projects ----------------------------------------------------------- */

json_t *rd_present_project(const rd_ctx_t *c, json_t *const *objs) {
    static const struct {
        const char *from, *to;
    } tiers[] = {
        {"reserved", "Reserved"}, {"onDemand", "OnDemand"}, {"preemptible", "Preemptible"}};
    const json_t *f = NULL;
    json_t *clusters = json_array();
    const char *created = NULL;
    bool terminating = false;
    for (size_t i = 0; i < c->nparts; i++) {
        if (objs[i] == NULL)
            continue;
        f = f ? f : objs[i];
        json_array_append_new(clusters, json_string(c->parts[i].conf->name));
        const char *t = rd_str(objs[i], "creationTime");
        if (t && (created == NULL || strcmp(t, created) < 0))
            created = t;
        const char *phase = rd_str(objs[i], "phase");
        terminating = terminating || (phase && strcmp(phase, "Terminating") == 0);
    }
    json_t *o = json_object();
    rd_copy(o, "name", f, "name");
    if (json_is_string(json_object_get(f, "description")))
        rd_copy(o, "description", f, "description");
    if (json_is_object(json_object_get(f, "labels")))
        rd_copy(o, "labels", f, "labels");
    json_t *quotas = json_object();
    const json_t *quota = json_object_get(f, "quota");
    for (size_t k = 0; k < sizeof tiers / sizeof tiers[0]; k++) {
        const json_t *q = json_object_get(quota, tiers[k].from);
        if (!json_is_object(q))
            continue;
        json_t *limits = json_object();
        rd_copy_quantity(limits, "cpu", q, "cpu", true);
        rd_copy_quantity(limits, "memory", q, "memory", false);
        const json_t *units = json_object_get(json_object_get(f, "quotaUnits"), tiers[k].from);
        if (json_is_integer(json_object_get(units, "pods")))
            rd_copy(limits, "pods", units, "pods");
        json_object_set_new(quotas, tiers[k].to, json_pack("{s:o}", "limits", limits));
    }
    json_object_set_new(o, "quotas", quotas);
    rd_hide_managed_labels(o);
    json_object_set_new(o, "phase", json_string(terminating ? "Terminating" : "Active"));
    json_object_set_new(o, "clusters", clusters);
    char version[80];
    rd_group_version(c, objs, version, sizeof version);
    json_object_set_new(o, "version", json_string(version));
    if (created)
        json_object_set_new(o, "createdAt", json_string(created));
    return o;
}

static json_t *project_item(const rd_ctx_t *c, const char *name, json_t *const *objs, void *arg) {
    const rd_selector_t *sel = arg;
    if (!fg_auth_can(fg_auth_principal(c->req), name, FG_PERM_READ))
        return NULL; /* not one of the caller's projects */
    json_t *o = rd_present_project(c, objs);
    if (!rd_selector_match(sel, json_object_get(o, "labels"))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int fg_api_list_projects(fg_req_t *req) {
    size_t limit;
    rd_selector_t *sel = NULL;
    rd_ctx_t c;
    if (!rd_limit_or_reply(req, &limit) || !rd_selector_or_reply(req, &sel))
        return FG_OK;
    if (rd_begin_or_reply(&c, req, "project", "namespaces", "_", NULL, NULL))
        rd_list_reply(&c, true, NULL, limit, project_item, sel);
    rd_selector_free(sel);
    return FG_OK;
}

int fg_api_get_project(fg_req_t *req) {
    const char *name = fg_req_param(req, "project");
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "project", "namespaces", "_", name, NULL, objs, &found))
        return FG_OK;
    if (found == 0)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no project %s", name);
    json_t *o = rd_present_project(&c, objs);
    rd_objs_free(objs, c.nparts);
    char etag[80];
    snprintf(etag, sizeof etag, "%s", rd_str(o, "version"));
    return rd_reply_etag(req, o, etag);
}

/* ---- clusters ----------------------------------------------------------- */

/* The resources the informers cache, in the order the API lists their sync state. */
typedef struct {
    int64_t nodes, ready, cpu_cap, cpu_alloc, mem_cap, mem_alloc, pods_cap;
    char kubelet[65];
} capacity_t;

/* Adds one cached node to the sums. */
static void add_node(capacity_t *cap, const char *json, size_t len) {
    json_t *n = NULL;
    if (fg_json_load(json, len, &n, NULL, 0) != FG_OK)
        return;
    const json_t *c = json_object_get(n, "capacityUnits"),
                 *a = json_object_get(n, "allocatableUnits");
    cap->nodes++;
    cap->ready += json_is_true(json_object_get(n, "ready"));
    cap->cpu_cap += rd_int(c, "cpuMilli", 0);
    cap->cpu_alloc += rd_int(a, "cpuMilli", 0);
    cap->mem_cap += rd_int(c, "memoryBytes", 0);
    cap->mem_alloc += rd_int(a, "memoryBytes", 0);
    cap->pods_cap += rd_int(c, "pods", 0);
    if (cap->kubelet[0] == '\0' && rd_str(n, "kubeletVersion"))
        snprintf(cap->kubelet, sizeof cap->kubelet, "%s", rd_str(n, "kubeletVersion"));
    json_decref(n);
}

/* Sums the cluster's cached nodes, HSCAN batch by batch (never the whole hash at once). */
static bool capacity_or_reply(fg_req_t *req, fg_api_t *api, const char *cluster, capacity_t *cap) {
    char cursor[32] = "0";
    fg_cache_key_t key;
    fg_cache_key_objects(&key, fg_kube_kind_info(FG_KIND_NODE)->name, cluster, "_");
    memset(cap, 0, sizeof *cap);
    fg_redis_batch_t *b = fg_redis_batch_new();
    do {
        fg_redis_batch_reset(b);
        fg_redis_batch_addv(b, "HSCAN", key.s, cursor, "COUNT", NODE_SCAN_COUNT, NULL);
        if (!rd_batch_or_reply(req, api, b)) {
            fg_redis_batch_free(b);
            return false;
        }
        const fg_redis_reply_t *rep = fg_redis_batch_reply(b, 0);
        size_t clen;
        const char *next = fg_redis_reply_str(fg_redis_reply_at(rep, 0), &clen);
        snprintf(cursor, sizeof cursor, "%.*s", (int)(next ? clen : 1), next ? next : "0");
        const fg_redis_reply_t *kv = fg_redis_reply_at(rep, 1);
        for (size_t i = 1; kv && i < fg_redis_reply_len(kv); i += 2) {
            size_t len;
            const char *v = fg_redis_reply_str(fg_redis_reply_at(kv, i), &len);
            if (v)
                add_node(cap, v, len);
        }
    } while (strcmp(cursor, "0") != 0);
    fg_redis_batch_free(b);
    return true;
}

/* A CPU amount in millicores as a Kubernetes quantity: cores when whole, else "Nm". */
static json_t *cpu_quantity(int64_t milli) {
    char s[32];
    if (milli % 1000 == 0)
        snprintf(s, sizeof s, "%lld", (long long)(milli / 1000));
    else
        snprintf(s, sizeof s, "%lldm", (long long)milli);
    return json_string(s);
}

static json_t *bytes_quantity(int64_t bytes) {
    char s[32];
    snprintf(s, sizeof s, "%lld", (long long)bytes);
    return json_string(s);
}

/* What the cached pods of the cluster request (from the placement registry; zeros when it
 * cannot be read: the rest of the answer still says what the cache holds). */
static fg_fed_amount_t requested(fg_api_t *api, const char *cluster) {
    fg_fed_amount_t sum = {0};
    const fg_fed_registry_t *reg = NULL;
    char why[256];
    if (fg_fed_registry_get(api->fed, false, &reg, why, sizeof why) != FG_OK)
        return sum;
    size_t n;
    const fg_fed_cluster_t *cl = fg_fed_registry_clusters(reg, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(cl[i].name, cluster) == 0)
            sum = cl[i].requested;
    fg_fed_registry_release(reg);
    return sum;
}

/* One cluster as the API's Cluster, or NULL when it replied (Redis failed). */
static json_t *cluster_or_reply(fg_req_t *req, fg_api_t *api, const fg_cluster_conf_t *cc) {
    fg_redis_batch_t *b = fg_redis_batch_new();
    size_t first = fg_cache_batch_add_state(b, cc->name, NULL);
    capacity_t cap;
    if (!rd_batch_or_reply(req, api, b) || !capacity_or_reply(req, api, cc->name, &cap)) {
        fg_redis_batch_free(b);
        return NULL;
    }
    json_t *sync = json_array();
    bool settling = false;
    int64_t pods_cached = 0;
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        const char *resource = fg_kube_kind_info((fg_kind_t)k)->resource;
        fg_cache_sync_t st;
        fg_cache_sync_read(fg_redis_batch_reply(b, first + 1 + (size_t)k), &st);
        if (st.state == FG_SYNC_NONE)
            continue; /* never written, or a state this build does not know */
        settling = settling || st.state != FG_SYNC_SYNCED;
        if (k == FG_KIND_POD)
            pods_cached = st.objects;
        json_array_append_new(sync, json_pack("{s:s,s:s,s:I,s:o,s:o,s:o}", "resource", resource,
                                              "state", fg_cache_sync_state_name(st.state),
                                              "objects", (json_int_t)st.objects, "resourceVersion",
                                              st.rv[0] ? json_string(st.rv) : json_null(),
                                              "lastEventAt", rd_time_or_null(st.last_event_ms),
                                              "lastListedAt", rd_time_or_null(st.last_sync_ms)));
    }
    fg_cache_cluster_t cl;
    fg_cache_cluster_read(fg_redis_batch_reply(b, first), &cl);
    fg_redis_batch_free(b);
    fg_fed_amount_t asked = requested(api, cc->name);
    const char *h = cl.health != FG_HEALTH_HEALTHY ? "Unreachable" /* or never contacted */
                    : settling                     ? "Degraded"
                                                   : "Healthy";
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:o,s:o,s:{s:I,s:I,s:{s:o,s:o,s:o},s:{s:o,s:o,s:o},s:{s:I,s:I}},s:o}",
        "name", cc->name, "region", cc->region ? cc->region : "", "zone", cc->zone, "health", h,
        "lastContactAt", rd_time_or_null(cl.last_contact_ms), "kubernetesVersion",
        cap.kubelet[0] ? json_string(cap.kubelet) : json_null(), "capacity", "nodes",
        (json_int_t)cap.nodes, "readyNodes", (json_int_t)cap.ready, "cpu", "capacity",
        cpu_quantity(cap.cpu_cap), "allocatable", cpu_quantity(cap.cpu_alloc), "requested",
        cpu_quantity(asked.cpu_milli), "memory", "capacity", bytes_quantity(cap.mem_cap),
        "allocatable", bytes_quantity(cap.mem_alloc), "requested",
        bytes_quantity(asked.memory_bytes), "pods", "capacity", (json_int_t)cap.pods_cap, "running",
        (json_int_t)pods_cached, "sync", sync);
    if (cl.health == FG_HEALTH_UNKNOWN)
        json_object_set_new(o, "healthDetail", json_string("not contacted yet"));
    else if (cl.last_error[0])
        json_object_set_new(o, "healthDetail", rd_string_cut(cl.last_error, 1024));
    return o;
}

static int cmp_conf(const void *a, const void *b) {
    return strcmp((*(const fg_cluster_conf_t *const *)a)->name,
                  (*(const fg_cluster_conf_t *const *)b)->name);
}

int fg_api_list_clusters(fg_req_t *req) {
    size_t limit;
    const char *zone;
    rd_selector_t *sel = NULL;
    char after[RD_NAME_MAX + 1], unused[64];
    bool have;
    rd_ctx_t c;
    if (!rd_limit_or_reply(req, &limit) || !rd_label_param_or_reply(req, "zone", &zone) ||
        !rd_cursor_or_reply(req, after, unused, &have) || !rd_selector_or_reply(req, &sel))
        return FG_OK;
    if (!rd_begin_or_reply(&c, req, "node", "nodes", "_", NULL, zone)) {
        rd_selector_free(sel);
        return FG_OK;
    }
    /* Configured clusters carry no labels: a selector matches them as objects without any. */
    bool all = rd_selector_match(sel, NULL);
    rd_selector_free(sel);
    const fg_cluster_conf_t *order[RD_MAX_CLUSTERS];
    for (size_t i = 0; i < c.nparts; i++)
        order[i] = c.parts[i].conf;
    qsort(order, c.nparts, sizeof order[0], cmp_conf);
    json_t *items = json_array();
    size_t i = 0, n = 0;
    for (; all && i < c.nparts && n < limit; i++) {
        if (have && strcmp(order[i]->name, after) <= 0)
            continue;
        json_t *o = cluster_or_reply(req, c.api, order[i]);
        if (o == NULL) {
            json_decref(items);
            return FG_OK;
        }
        json_array_append_new(items, o);
        n++;
    }
    json_t *cursor = json_null();
    if (all && i < c.nparts && n > 0) {
        char cur[2048];
        rd_cursor_encode(order[i - 1]->name, "", cur, sizeof cur);
        json_decref(cursor);
        cursor = json_string(cur);
    }
    fg_auth_charge_items(req, n);
    return rd_reply_etag(
        req,
        json_pack("{s:o,s:o,s:o}", "items", items, "cursor", cursor, "clusters", rd_parts_json(&c)),
        NULL);
}

int fg_api_get_cluster(fg_req_t *req) {
    const char *name = fg_req_param(req, "cluster");
    fg_api_t *api = fg_req_app(req);
    const fg_cluster_conf_t *cc = NULL;
    for (size_t i = 0; i < api->cfg->nclusters && cc == NULL; i++)
        if (strcmp(api->cfg->clusters[i].name, name) == 0)
            cc = &api->cfg->clusters[i];
    if (cc == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no member cluster %s", name);
    json_t *o = cluster_or_reply(req, api, cc);
    return o ? rd_reply_etag(req, o, NULL) : FG_OK;
}
