/* fed/registry.c: the member clusters as placement sees them, read from the cache.
 *
 * For every configured cluster: its health and sync state (fg:cluster, fg:sync, interpreted by
 * cache/state.c), and the free capacity of each ready, schedulable node: allocatable (the cached
 * node's allocatableUnits) minus what the cached pods bound to it request (requestUnits of pods
 * not Succeeded or Failed), one pod slot per such pod. The hashes are scanned a batch at a time
 * (HSCAN), never fetched whole.
 *
 * Scanning a cluster's pods costs a parse per pod, so one snapshot serves every request for
 * max_age_ms; snapshots are immutable and reference-counted, so a request keeps its own while
 * another thread replaces the current one. A snapshot in use past 3/4 of its age is read again by
 * a thread of its own (the refresher), so under traffic no request pays for a scan (its time
 * grows with every cluster's nodes and pods); a request reads one itself only when there
 * is none, it is past its age (no traffic kept it fresh, or the refresher failed), or it asks
 * for a fresh one.
 */
#include "fed_internal.h"

#include "fleetgate/cache.h"
#include "fleetgate/kube.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_COUNT "1000"

typedef struct {
    char *name; /* owned */
    fg_fed_amount_t free;
    bool usable; /* ready and schedulable */
} node_t;

/* Node name -> index, open addressing (a cluster's nodes are known before its pods). */
typedef struct {
    node_t *nodes;
    size_t n, cap;
    uint32_t *slots; /* index + 1; 0: empty */
    size_t nslots;
} node_index_t;

struct fg_fed_registry {
    atomic_int refs;
    int64_t loaded_ms;
    size_t n;
    fg_fed_cluster_t cl[FG_FED_MAX_CLUSTERS];
    fg_live_t *live; /* the configuration snapshot the labels and zones point into; held */
};

/* ---- the node index ---------------------------------------------------------- */

static void index_grow(node_index_t *ix) {
    size_t nslots = ix->nslots ? ix->nslots * 2 : 1024;
    uint32_t *slots = fg_xcalloc(nslots, sizeof *slots);
    for (size_t i = 0; i < ix->n; i++) {
        size_t h = fg_hash64(ix->nodes[i].name, strlen(ix->nodes[i].name), 0) & (nslots - 1);
        while (slots[h])
            h = (h + 1) & (nslots - 1);
        slots[h] = (uint32_t)i + 1;
    }
    free(ix->slots);
    ix->slots = slots;
    ix->nslots = nslots;
}

static node_t *index_find(const node_index_t *ix, const char *name, size_t len) {
    if (ix->nslots == 0)
        return NULL;
    size_t h = fg_hash64(name, len, 0) & (ix->nslots - 1);
    for (; ix->slots[h]; h = (h + 1) & (ix->nslots - 1)) {
        node_t *n = &ix->nodes[ix->slots[h] - 1];
        if (strlen(n->name) == len && memcmp(n->name, name, len) == 0)
            return n;
    }
    return NULL;
}

static void index_add(node_index_t *ix, const char *name, fg_fed_amount_t alloc, bool usable) {
    if (index_find(ix, name, strlen(name)))
        return;
    if ((ix->n + 1) * 2 > ix->nslots)
        index_grow(ix);
    if (ix->n == ix->cap) {
        ix->cap = ix->cap ? ix->cap * 2 : 256;
        ix->nodes = fg_xrealloc(ix->nodes, ix->cap * sizeof *ix->nodes);
    }
    ix->nodes[ix->n] = (node_t){.name = fg_xstrdup(name), .free = alloc, .usable = usable};
    size_t h = fg_hash64(name, strlen(name), 0) & (ix->nslots - 1);
    while (ix->slots[h])
        h = (h + 1) & (ix->nslots - 1);
    ix->slots[h] = (uint32_t)ix->n + 1;
    ix->n++;
}

static void index_free(node_index_t *ix) {
    for (size_t i = 0; i < ix->n; i++)
        free(ix->nodes[i].name);
    free(ix->nodes);
    free(ix->slots);
}

/* ---- reading the cache ----------------------------------------------------------- */

static int64_t jint(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

typedef void (*value_fn)(void *ud, const char *json, size_t len);

/* Calls fn for every value of the hash key, HSCAN batch by batch. */
static int scan_hash(fg_redis_t *r, const char *key, value_fn fn, void *ud, char *why,
                     size_t whylen) {
    char cursor[32] = "0";
    int rc = FG_OK;
    fg_redis_batch_t *b = fg_redis_batch_new();
    do {
        fg_redis_batch_reset(b);
        fg_redis_batch_addv(b, "HSCAN", key, cursor, "COUNT", SCAN_COUNT, NULL);
        rc = fg_redis_batch_run(r, b, why, whylen);
        if (rc != FG_OK)
            goto out;
        const fg_redis_reply_t *rep = fg_redis_batch_reply(b, 0);
        size_t clen;
        const char *next = fg_redis_reply_str(fg_redis_reply_at(rep, 0), &clen);
        snprintf(cursor, sizeof cursor, "%.*s", (int)(next ? clen : 1), next ? next : "0");
        const fg_redis_reply_t *kv = fg_redis_reply_at(rep, 1);
        for (size_t i = 1; kv && i < fg_redis_reply_len(kv); i += 2) {
            size_t len;
            const char *v = fg_redis_reply_str(fg_redis_reply_at(kv, i), &len);
            if (v)
                fn(ud, v, len);
        }
    } while (strcmp(cursor, "0") != 0);
out:
    fg_redis_batch_free(b);
    return rc;
}

static void add_node(void *ud, const char *json, size_t len) {
    node_index_t *ix = ud;
    json_t *n = NULL;
    if (fg_json_load(json, len, &n, NULL, 0) != FG_OK)
        return;
    const json_t *a = json_object_get(n, "allocatableUnits");
    const char *name = json_string_value(json_object_get(n, "name"));
    bool usable = json_is_true(json_object_get(n, "ready")) &&
                  !json_is_true(json_object_get(n, "unschedulable"));
    fg_fed_amount_t alloc = {jint(a, "cpuMilli"), jint(a, "memoryBytes"), jint(a, "pods")};
    if (name)
        index_add(ix, name, alloc, usable);
    json_decref(n);
}

typedef struct {
    node_index_t *ix;
    fg_fed_amount_t requested;
} pods_ctx_t;

static void add_pod(void *ud, const char *json, size_t len) {
    pods_ctx_t *pc = ud;
    json_t *p = NULL;
    if (fg_json_load(json, len, &p, NULL, 0) != FG_OK)
        return;
    const char *phase = json_string_value(json_object_get(p, "phase"));
    const char *node = json_string_value(json_object_get(p, "node"));
    bool done = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
    node_t *n = node && !done ? index_find(pc->ix, node, strlen(node)) : NULL;
    if (n) {
        const json_t *r = json_object_get(p, "requestUnits");
        int64_t cpu = jint(r, "cpuMilli"), mem = jint(r, "memoryBytes");
        n->free.cpu_milli -= cpu;
        n->free.memory_bytes -= mem;
        n->free.pods -= 1;
        pc->requested.cpu_milli += cpu;
        pc->requested.memory_bytes += mem;
        pc->requested.pods += 1;
    }
    json_decref(p);
}

/* The pods of every project of the cluster, charged to their nodes. */
static int scan_pods(fg_redis_t *r, const char *cluster, pods_ctx_t *pc, char *why, size_t whylen) {
    const char *kind = fg_kube_kind_info(FG_KIND_POD)->name;
    fg_cache_key_t k;
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_redis_batch_addv(b, "SMEMBERS", fg_cache_key_scopes(&k, kind, cluster), NULL);
    int rc = fg_redis_batch_run(r, b, why, whylen);
    const fg_redis_reply_t *scopes = rc == FG_OK ? fg_redis_batch_reply(b, 0) : NULL;
    for (size_t i = 0; scopes && rc == FG_OK && i < fg_redis_reply_len(scopes); i++) {
        size_t len;
        const char *s = fg_redis_reply_str(fg_redis_reply_at(scopes, i), &len);
        char scope[256];
        snprintf(scope, sizeof scope, "%.*s", (int)(s ? len : 0), s ? s : "");
        rc = scan_hash(r, fg_cache_key_objects(&k, kind, cluster, scope), add_pod, pc, why, whylen);
    }
    fg_redis_batch_free(b);
    return rc;
}

/* Fills one cluster's entry: state, then nodes, then pods. */
static int load_cluster(const fg_cluster_conf_t *cc, const fg_cluster_conf_t *live, fg_redis_t *r,
                        int64_t now_ms, fg_fed_cluster_t *out, char *why, size_t whylen) {
    node_index_t ix = {0};
    fg_cache_cluster_t cl;
    fg_cache_sync_t nodes_sync, pods_sync;
    fg_cache_key_t k;
    fg_redis_batch_t *b = fg_redis_batch_new();
    size_t first = fg_cache_batch_add_state(b, cc->name, NULL);
    int rc = fg_redis_batch_run(r, b, why, whylen);
    if (rc != FG_OK)
        goto out;
    fg_cache_cluster_read(fg_redis_batch_reply(b, first), &cl);
    fg_cache_sync_read(fg_redis_batch_reply(b, first + 1 + FG_KIND_NODE), &nodes_sync);
    fg_cache_sync_read(fg_redis_batch_reply(b, first + 1 + FG_KIND_POD), &pods_sync);
    out->name = cc->name;
    out->zone = live->zone; /* zone and labels as the last SIGHUP left them */
    out->labels = (const char *const *)live->labels;
    out->nlabels = live->nlabels;
    out->reachable = cl.health == FG_HEALTH_HEALTHY;
    out->synced = fg_cache_sync_done_once(&nodes_sync) && fg_cache_sync_done_once(&pods_sync);
    out->staleness_ms = cl.last_contact_ms > 0 ? now_ms - cl.last_contact_ms : INT64_MAX / 2;
    rc =
        scan_hash(r, fg_cache_key_objects(&k, fg_kube_kind_info(FG_KIND_NODE)->name, cc->name, "_"),
                  add_node, &ix, why, whylen);
    if (rc != FG_OK)
        goto out;
    pods_ctx_t pc = {.ix = &ix};
    rc = scan_pods(r, cc->name, &pc, why, whylen);
    if (rc != FG_OK)
        goto out;
    out->requested = pc.requested;
    out->nodes = fg_xcalloc(ix.n ? ix.n : 1, sizeof *out->nodes);
    for (size_t i = 0; i < ix.n; i++) {
        out->allocatable.cpu_milli += ix.nodes[i].free.cpu_milli;
        out->allocatable.memory_bytes += ix.nodes[i].free.memory_bytes;
        out->allocatable.pods += ix.nodes[i].free.pods;
        if (ix.nodes[i].usable)
            out->nodes[out->nnodes++] = ix.nodes[i].free;
    }
    /* the loop summed what is free; allocatable is that plus what is requested */
    out->allocatable.cpu_milli += pc.requested.cpu_milli;
    out->allocatable.memory_bytes += pc.requested.memory_bytes;
    out->allocatable.pods += pc.requested.pods;
out:
    index_free(&ix);
    fg_redis_batch_free(b);
    return rc;
}

static void registry_free(fg_fed_registry_t *reg) {
    for (size_t i = 0; i < reg->n; i++)
        free(reg->cl[i].nodes);
    fg_live_release(reg->live);
    free(reg);
}

int fg_fed_registry_load(const fg_config_t *cfg, fg_redis_t *redis, int64_t now_ms,
                         fg_fed_registry_t **out, char *why, size_t whylen) {
    fg_fed_registry_t *reg = fg_xcalloc(1, sizeof *reg);
    int rc = FG_OK;
    atomic_init(&reg->refs, 1);
    reg->loaded_ms = now_ms;
    reg->live = fg_live_acquire(); /* NULL without main (tests): cfg's own labels */
    for (size_t i = 0; i < cfg->nclusters && i < FG_FED_MAX_CLUSTERS; i++) {
        const fg_cluster_conf_t *lc = fg_live_cluster(reg->live, cfg->clusters[i].name);
        rc = load_cluster(&cfg->clusters[i], lc ? lc : &cfg->clusters[i], redis, now_ms,
                          &reg->cl[i], why, whylen);
        reg->n = i + 1; /* what load_cluster allocated is freed with the rest */
        if (rc != FG_OK)
            goto out;
    }
    *out = reg;
    reg = NULL;
out:
    if (reg)
        registry_free(reg);
    return rc;
}

const fg_fed_cluster_t *fg_fed_registry_clusters(const fg_fed_registry_t *reg, size_t *n) {
    *n = reg->n;
    return reg->cl;
}

void fg_fed_registry_release(const fg_fed_registry_t *reg) {
    fg_fed_registry_t *r = (fg_fed_registry_t *)reg;
    if (r && atomic_fetch_sub(&r->refs, 1) == 1)
        registry_free(r);
}

/* ---- the shared snapshot ------------------------------------------------------ */

/* Makes reg the current snapshot unless a newer one is (a fresh read may have overtaken a
 * background one); takes the reference. Under fed->mu. */
static void install(fg_fed_t *fed, fg_fed_registry_t *reg) {
    if (fed->cur != NULL && fed->cur->loaded_ms > reg->loaded_ms) {
        fg_fed_registry_release(reg);
        return;
    }
    fg_fed_registry_release(fed->cur);
    fed->cur = reg;
}

static void *refresher_main(void *arg) {
    fg_fed_t *fed = arg;
    pthread_mutex_lock(&fed->mu);
    while (!fed->stopping) {
        if (!fed->refresh_wanted) {
            pthread_cond_wait(&fed->refresh_cv, &fed->mu);
            continue;
        }
        pthread_mutex_unlock(&fed->mu);
        fg_fed_registry_t *reg = NULL;
        char why[256];
        int rc = fg_fed_registry_load(fed->cfg, fed->redis, fg_wall_ms(), &reg, why, sizeof why);
        if (rc != FG_OK)
            fg_log(FG_LOG_WARN, NULL, "fed: reading the cluster registry: %s", why);
        pthread_mutex_lock(&fed->mu);
        if (rc == FG_OK)
            install(fed, reg);
        fed->refresh_wanted = false;
    }
    pthread_mutex_unlock(&fed->mu);
    return NULL;
}

int fg_fed_new(fg_fed_t **out, const fg_config_t *cfg, fg_redis_t *redis, int64_t max_age_ms) {
    int rc = FG_OK;
    fg_fed_t *fed = fg_xcalloc(1, sizeof *fed);
    fed->cfg = cfg;
    fed->redis = redis;
    fed->max_age_ms = max_age_ms;
    pthread_mutex_init(&fed->mu, NULL);
    pthread_cond_init(&fed->refresh_cv, NULL);
    pthread_mutex_init(&fed->conns_mu, NULL);
    for (size_t i = 0; i < cfg->nclusters && i < FG_FED_MAX_CLUSTERS; i++) {
        fg_kube_error_t err;
        rc = fg_kube_client_new(&fed->clients[i], &cfg->clusters[i], NULL, &err);
        if (rc != FG_OK) {
            fg_log(FG_LOG_ERROR, NULL, "fed: cluster %s: %s", cfg->clusters[i].name, err.message);
            goto out;
        }
        fed->nclients = i + 1;
    }
    if (redis != NULL && pthread_create(&fed->refresher, NULL, refresher_main, fed) == 0)
        fed->refresher_started = true;
    *out = fed;
    fed = NULL;
out:
    fg_fed_free(fed);
    return rc;
}

fg_kube_client_t *fed_client(const fg_fed_t *fed, const char *cluster) {
    for (size_t i = 0; i < fed->nclients; i++)
        if (strcmp(fed->cfg->clusters[i].name, cluster) == 0)
            return fed->clients[i];
    return NULL;
}

void fg_fed_free(fg_fed_t *fed) {
    if (fed == NULL)
        return;
    if (fed->refresher_started) {
        pthread_mutex_lock(&fed->mu);
        fed->stopping = true;
        pthread_cond_signal(&fed->refresh_cv);
        pthread_mutex_unlock(&fed->mu);
        pthread_join(fed->refresher, NULL);
    }
    for (size_t i = 0; i < fed->nconns; i++) /* before the clients they went through */
        fg_kube_conns_free(fed->conns[i]);
    pthread_mutex_destroy(&fed->conns_mu);
    for (size_t i = 0; i < fed->nclients; i++)
        fg_kube_client_free(fed->clients[i]);
    fg_fed_registry_release(fed->cur);
    pthread_cond_destroy(&fed->refresh_cv);
    pthread_mutex_destroy(&fed->mu);
    free(fed);
}

/* A request's own read happens under the lock: concurrent writers wait for one scan instead of
 * each running their own against Redis. */
int fg_fed_registry_get(fg_fed_t *fed, bool fresh, const fg_fed_registry_t **out, char *why,
                        size_t whylen) {
    int rc = FG_OK;
    int64_t now = fg_wall_ms();
    pthread_mutex_lock(&fed->mu);
    if (fresh || fed->cur == NULL || now - fed->cur->loaded_ms > fed->max_age_ms) {
        fg_fed_registry_t *reg = NULL;
        rc = fg_fed_registry_load(fed->cfg, fed->redis, now, &reg, why, whylen);
        if (rc == FG_OK)
            install(fed, reg);
    } else if (fed->refresher_started && !fed->refresh_wanted &&
               now - fed->cur->loaded_ms > fed->max_age_ms * 3 / 4) {
        fed->refresh_wanted = true; /* the next one is read while this one still serves */
        pthread_cond_signal(&fed->refresh_cv);
    }
    if (fed->cur) {
        atomic_fetch_add(&fed->cur->refs, 1);
        *out = fed->cur;
        rc = FG_OK; /* an older snapshot beats no answer; its staleness shows in SyncLag */
    }
    pthread_mutex_unlock(&fed->mu);
    return rc;
}
