/* fed/reconcile.c: the reconciler, run by one replica at a time (the lease fg:lease:_:reconciler).
 *
 * Every period, the replica holding the lease compares what the cache shows of the projects
 * fleetgate manages (namespaces labelled app.kubernetes.io/managed-by=fleetgate) with the
 * configured clusters, and creates a project's namespace, with its labels and tier quotas, in
 * every reachable, synced cluster that lacks it: a cluster added to the configuration later, or
 * one that was down when the project was created. Only clusters whose namespaces are synced are
 * judged, so a cluster whose cache is still filling is not mistaken for one that lacks them.
 *
 * Then it runs the extra pass its starter gave (api/reconcile.c: apps' recorded placements).
 */
#include "fed_internal.h"

#include "fleetgate/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MANAGED_BY "app.kubernetes.io/managed-by"

struct fg_fed_reconciler {
    fg_fed_t *fed;
    char holder[128];
    int64_t period_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* guarded by mu */
    fg_fed_pass_fn extra;
    void *extra_ud;
    uint64_t created; /* namespaces created, for tests and logs (this thread only) */
};

static const struct {
    const char *out, *annotation;
} quota_tiers[] = {
    {"reserved", "reserved"}, {"onDemand", "ondemand"}, {"preemptible", "preemptible"}};

/* The namespace of a cached project, as the project writes made it (labels, description,
 * quotas). */
static json_t *namespace_of(const json_t *project) {
    json_t *ann = json_object();
    const json_t *quota = json_object_get(project, "quota");
    for (size_t t = 0; t < sizeof quota_tiers / sizeof quota_tiers[0]; t++) {
        const char *res;
        json_t *v;
        json_object_foreach(json_object_get(quota, quota_tiers[t].out), res, v) {
            char key[96];
            snprintf(key, sizeof key, "fleetgate.io/quota-%s-%s", quota_tiers[t].annotation, res);
            json_object_set(ann, key, v);
        }
    }
    if (json_is_string(json_object_get(project, "description")))
        json_object_set(ann, "fleetgate.io/description", json_object_get(project, "description"));
    json_object_set_new(ann, "fleetgate.io/requested-by", json_string("fleetgate-reconciler"));
    return json_pack("{s:s,s:s,s:{s:O,s:O,s:o}}", "apiVersion", "v1", "kind", "Namespace",
                     "metadata", "name", json_object_get(project, "name"), "labels",
                     json_object_get(project, "labels"), "annotations", ann);
}

/* One pass: FG_OK, or FG_EIO when Redis could not be read. */
static int pass(fg_fed_reconciler_t *rc) {
    fg_fed_t *fed = rc->fed;
    const fg_config_t *cfg = fed->cfg;
    size_t n = cfg->nclusters < FG_FED_MAX_CLUSTERS ? cfg->nclusters : FG_FED_MAX_CLUSTERS;
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_cache_key_t k;
    size_t state[FG_FED_MAX_CLUSTERS], objs[FG_FED_MAX_CLUSTERS];
    for (size_t i = 0; i < n; i++) {
        state[i] = fg_cache_batch_add_state(b, cfg->clusters[i].name, "namespaces");
        objs[i] = fg_redis_batch_addv(
            b, "HGETALL", fg_cache_key_objects(&k, "project", cfg->clusters[i].name, "_"), NULL);
    }
    int ret = fg_redis_batch_run(fed->redis, b, NULL, 0);
    json_t *managed = json_object(); /* name -> a cached project object */
    json_t *have[FG_FED_MAX_CLUSTERS] = {NULL};
    bool judged[FG_FED_MAX_CLUSTERS] = {false};
    for (size_t i = 0; ret == FG_OK && i < n; i++) {
        fg_cache_cluster_t cl;
        fg_cache_sync_t sync;
        fg_cache_cluster_read(fg_redis_batch_reply(b, state[i]), &cl);
        fg_cache_sync_read(fg_redis_batch_reply(b, state[i] + 1), &sync);
        judged[i] = cl.health == FG_HEALTH_HEALTHY && fg_cache_sync_done_once(&sync);
        have[i] = json_object();
        const fg_redis_reply_t *h = fg_redis_batch_reply(b, objs[i]);
        for (size_t j = 0; j + 1 < fg_redis_reply_len(h); j += 2) {
            size_t len;
            const char *text = fg_redis_reply_str(fg_redis_reply_at(h, j + 1), &len);
            json_t *p = NULL;
            if (text == NULL || fg_json_load(text, len, &p, NULL, 0) != FG_OK)
                continue;
            const char *name = json_string_value(json_object_get(p, "name"));
            const char *by =
                json_string_value(json_object_get(json_object_get(p, "labels"), MANAGED_BY));
            bool live = json_object_get(p, "deletionTime") == NULL;
            if (name && live && by && strcmp(by, "fleetgate") == 0) {
                json_object_set_new(have[i], name, json_true());
                if (json_object_get(managed, name) == NULL)
                    json_object_set(managed, name, p);
            }
            json_decref(p);
        }
    }
    fg_fed_write_t w[FG_FED_MAX_CLUSTERS];
    fg_fed_outcome_t o[FG_FED_MAX_CLUSTERS];
    const char *name;
    json_t *p;
    json_object_foreach(managed, name, p) {
        json_t *ns = namespace_of(p);
        size_t nw = 0;
        for (size_t i = 0; i < n; i++)
            if (judged[i] && json_object_get(have[i], name) == NULL)
                w[nw++] = (fg_fed_write_t){.cluster = cfg->clusters[i].name,
                                           .method = FG_KUBE_POST,
                                           .path = "/api/v1/namespaces",
                                           .body = ns,
                                           .exists_ok = true};
        if (nw > 0) {
            size_t failed = fg_fed_write_all(fed, w, nw, 5000, o);
            rc->created += nw - failed;
            FG_LOG(failed ? FG_LOG_WARN : FG_LOG_INFO, NULL,
                   "reconciler: project %s: namespace created in %zu of %zu clusters lacking it",
                   name, nw - failed, nw);
            fg_fed_outcomes_clear(o, nw);
        }
        json_decref(ns);
    }
    for (size_t i = 0; i < n; i++)
        json_decref(have[i]);
    json_decref(managed);
    fg_redis_batch_free(b);
    return ret;
}

/* Waits for the period or a stop; true when asked to stop. */
static bool sleep_or_stop(fg_fed_reconciler_t *rc) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += rc->period_ms / 1000;
    until.tv_nsec += (rc->period_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&rc->mu);
    while (!rc->stop && pthread_cond_timedwait(&rc->cv, &rc->mu, &until) == 0)
        ;
    bool stop = rc->stop;
    pthread_mutex_unlock(&rc->mu);
    return stop;
}

static void *run(void *arg) {
    fg_fed_reconciler_t *rc = arg;
    fg_cache_key_t k;
    fg_cache_key_work_lease(&k, "reconciler");
    bool held = false;
    while (!sleep_or_stop(rc)) {
        if (fg_cache_lease(rc->fed->redis, k.s, rc->holder, rc->period_ms * 3, false, &held) ==
                FG_OK &&
            held) {
            pass(rc);
            if (rc->extra)
                rc->extra(rc->extra_ud);
        }
    }
    if (held) /* another replica takes over at once */
        fg_cache_lease(rc->fed->redis, k.s, rc->holder, rc->period_ms * 3, true, &held);
    return NULL;
}

int fg_fed_reconciler_start(fg_fed_reconciler_t **out, fg_fed_t *fed, const char *holder,
                            int64_t period_ms, fg_fed_pass_fn extra, void *ud) {
    fg_fed_reconciler_t *rc = fg_xcalloc(1, sizeof *rc);
    rc->extra = extra;
    rc->extra_ud = ud;
    rc->fed = fed;
    rc->period_ms = period_ms > 0 ? period_ms : 2000;
    snprintf(rc->holder, sizeof rc->holder, "%s", holder);
    pthread_mutex_init(&rc->mu, NULL);
    pthread_cond_init(&rc->cv, NULL);
    if (pthread_create(&rc->thread, NULL, run, rc) != 0) {
        pthread_mutex_destroy(&rc->mu);
        pthread_cond_destroy(&rc->cv);
        free(rc);
        return FG_EIO;
    }
    *out = rc;
    return FG_OK;
}

void fg_fed_reconciler_stop(fg_fed_reconciler_t *rc) {
    if (rc == NULL)
        return;
    pthread_mutex_lock(&rc->mu);
    rc->stop = true;
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
    pthread_join(rc->thread, NULL);
    pthread_mutex_destroy(&rc->mu);
    pthread_cond_destroy(&rc->cv);
    free(rc);
}
