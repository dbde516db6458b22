/* cache/through.c: write-through. A write handler stores the object a member cluster answered
 * (already translated) straight into the canonical keys, so a GET on any replica right after
 * shows it without waiting for the cluster's watch to bring it back.
 *
 * It runs the informer's own script (cache/cache_upsert.lua) in its 'through' mode, so both
 * writers of an object keep the same keys the same way and guard against each other by
 * resourceVersion: a write-through stores nothing once the watch reached its version (fg:rv at
 * or past it: the cache already shows it, or something newer such as its deletion), nor over a
 * newer cached object; the watch never replaces a newer object a write-through stored, nor
 * deletes it on an older DELETED event. fg:rv, the watch's resume point, is only ever moved by
 * the watch. Removals are not written through: with no record of a deletion, an older watch
 * event still on its way would bring the object back until the DELETED event came. All items go
 * in one round trip.
 *
 * The history and the change stream are the watch's: the upsert keeps the object a write
 * replaced aside (fg:pre) until the watch brings the written version, and the watch's
 * comparisons start from it (cache/cache_upsert.lua). The write's own round trip carries one
 * script an object, and a write's changes are recorded once, in order, as every change is.
 *
 * An object whose version this process's informer has already seen Redis confirm (fg:rv at or
 * past it: the watch stored and compared it) is not sent at all: the answer is the one the
 * scripts would give, without the round trip (cache_internal.h, through_applied_note). */
#include "cache_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fg_redis_script_t script;
static pthread_once_t script_once = PTHREAD_ONCE_INIT;

/* ---- what this process's informers confirmed -------------------------------------------- */

#define APPLIED_MAX 512 /* (cluster, resource) pairs: clusters x cached kinds */

typedef struct {
    char cluster[64], resource[48];
    char rv[64]; /* "" when nothing is noted (or it was forgotten) */
} applied_t;

static applied_t applied[APPLIED_MAX];
static size_t napplied;
static pthread_mutex_t applied_mu = PTHREAD_MUTEX_INITIALIZER;

/* The slot of (cluster, resource), or NULL; under applied_mu. */
static applied_t *applied_slot(const char *cluster, const char *resource) {
    for (size_t i = 0; i < napplied; i++)
        if (strcmp(applied[i].cluster, cluster) == 0 && strcmp(applied[i].resource, resource) == 0)
            return &applied[i];
    return NULL;
}

void through_applied_note(const char *cluster, const char *resource, const char *rv) {
    /* only decimal versions: fg_cache_rv_reached, like the scripts, compares nothing else */
    if (!fg_cache_rv_reached(rv, "0") || strlen(rv) >= sizeof applied[0].rv ||
        strlen(cluster) >= sizeof applied[0].cluster ||
        strlen(resource) >= sizeof applied[0].resource)
        return;
    pthread_mutex_lock(&applied_mu);
    applied_t *a = applied_slot(cluster, resource);
    if (a == NULL && napplied < APPLIED_MAX) {
        a = &applied[napplied++];
        snprintf(a->cluster, sizeof a->cluster, "%s", cluster);
        snprintf(a->resource, sizeof a->resource, "%s", resource);
        a->rv[0] = '\0';
    }
    if (a != NULL && !fg_cache_rv_reached(a->rv, rv))
        snprintf(a->rv, sizeof a->rv, "%s", rv);
    pthread_mutex_unlock(&applied_mu);
}

void through_applied_forget(const char *cluster) {
    pthread_mutex_lock(&applied_mu);
    for (size_t i = 0; i < napplied; i++)
        if (strcmp(applied[i].cluster, cluster) == 0)
            applied[i].rv[0] = '\0';
    pthread_mutex_unlock(&applied_mu);
}

/* Whether item it's version is one this process's informer saw Redis confirm. */
static bool applied_covers(const fg_cache_through_t *it) {
    pthread_mutex_lock(&applied_mu);
    const applied_t *a = applied_slot(it->cluster, it->resource);
    bool covered = a != NULL && fg_cache_rv_reached(a->rv, it->rv);
    pthread_mutex_unlock(&applied_mu);
    return covered;
}

/* ---- the write-through ------------------------------------------------------------------ */

static fg_metric_t *m_objects; /* objects offered to the write-through, by what became of them */

static void script_init(void) {
    static const char *const labels[] = {"result", NULL};
    m_objects = fg_metrics_register(
        "fleetgate_cache_write_through_objects_total",
        "Objects written through after a write: sent to Redis, or covered (the informer had "
        "already seen Redis confirm their version, so nothing was sent).",
        FG_METRIC_COUNTER, labels);
    fg_redis_script_init(&script, fg_cache_upsert_lua);
}

/* Appends item it's EVALSHA (ARGV as cache_upsert.lua: name, object, scope, resourceVersion,
 * now (unused), app, cluster, kind, mode); returns its index in the batch. */
static size_t add(fg_redis_batch_t *b, const fg_cache_through_t *it) {
    fg_cache_key_t ko, ki, ks, kr, kq, kp;
    const char *argv[] = {"EVALSHA",
                          script.sha1,
                          "6",
                          fg_cache_key_objects(&ko, it->kind, it->cluster, it->scope),
                          fg_cache_key_index(&ki, it->kind, it->cluster, it->scope),
                          fg_cache_key_scopes(&ks, it->kind, it->cluster),
                          fg_cache_key_rv(&kr, it->cluster, it->resource),
                          fg_cache_key_sync(&kq, it->cluster, it->resource),
                          fg_cache_key_preimage(&kp, it->kind, it->cluster, it->scope),
                          it->name,
                          it->object,
                          it->scope,
                          it->rv,
                          "0",
                          it->app ? it->app : "",
                          it->cluster,
                          it->kind,
                          "through"};
    return fg_redis_batch_add(b, sizeof argv / sizeof argv[0], argv, NULL);
}

static bool noscript(const fg_redis_reply_t *rep) {
    size_t len;
    const char *s = fg_redis_reply_str(rep, &len);
    return fg_redis_reply_type(rep) == FG_REDIS_ERROR && s && len >= 8 &&
           strncmp(s, "NOSCRIPT", 8) == 0;
}

struct fg_cache_through_pending {
    fg_redis_t *r;
    const fg_cache_through_t *items; /* the caller's, alive until _end */
    size_t n;
    fg_redis_batch_t *b;
    size_t *at;    /* each item's upsert in b (SIZE_MAX: not sent) */
    bool *covered; /* each item's: the informer's confirmed version covers it (not sent) */
    size_t sent;   /* items in b */
    int rc;        /* of the send */
};

static void add_items(fg_cache_through_pending_t *p) {
    fg_redis_batch_reset(p->b);
    for (size_t i = 0; i < p->n; i++) {
        p->at[i] = SIZE_MAX;
        if (p->covered[i])
            continue;
        p->at[i] = add(p->b, &p->items[i]);
    }
}

fg_cache_through_pending_t *
fg_cache_write_through_begin(fg_redis_t *r, const fg_cache_through_t *items, size_t n) {
    pthread_once(&script_once, script_init);
    fg_cache_through_pending_t *p = fg_xcalloc(1, sizeof *p);
    p->r = r;
    p->items = items;
    p->n = n;
    if (n == 0)
        return p;
    p->b = fg_redis_batch_new();
    p->at = fg_xcalloc(n, sizeof *p->at);
    p->covered = fg_xcalloc(n, sizeof *p->covered);
    for (size_t i = 0; i < n; i++) {
        p->covered[i] = applied_covers(&items[i]);
        p->sent += !p->covered[i];
    }
    add_items(p);
    const char *sent[] = {"sent"}, *covered[] = {"covered"};
    fg_metric_add(m_objects, sent, (double)p->sent);
    fg_metric_add(m_objects, covered, (double)(n - p->sent));
    if (p->sent > 0)
        p->rc = fg_redis_batch_send(r, p->b, NULL, 0);
    return p;
}

int fg_cache_write_through_end(fg_cache_through_pending_t *p, bool *shown) {
    size_t n = p->n;
    int rc = p->rc;
    for (size_t i = 0; i < n; i++)
        shown[i] = false;
    if (p->sent > 0 && rc == FG_OK)
        rc = fg_redis_batch_recv(p->r, p->b, NULL, 0);
    bool missing = false;
    for (size_t i = 0; rc == FG_OK && p->sent > 0 && i < fg_redis_batch_len(p->b); i++)
        missing = missing || noscript(fg_redis_batch_reply(p->b, i));
    if (missing) {
        /* First use on this server (or after SCRIPT FLUSH / a restart): load, then again. The
         * script is guarded, so running an item twice changes nothing. */
        const char *load[] = {"SCRIPT", "LOAD", script.source};
        rc = fg_redis_command(p->r, 3, load) == FG_OK ? FG_OK : FG_EIO;
        if (rc == FG_OK) {
            add_items(p);
            rc = fg_redis_batch_run(p->r, p->b, NULL, 0);
        }
    }
    for (size_t i = 0; rc == FG_OK && i < n; i++) {
        const fg_cache_through_t *it = &p->items[i];
        if (p->covered[i]) {
            shown[i] = true; /* what the upsert would answer: 2, shown already */
            continue;
        }
        const fg_redis_reply_t *rep = fg_redis_batch_reply(p->b, p->at[i]);
        int64_t v = fg_redis_reply_type(rep) == FG_REDIS_INTEGER ? fg_redis_reply_int(rep) : -1;
        if (fg_redis_reply_type(rep) == FG_REDIS_ERROR) {
            size_t len;
            const char *s = fg_redis_reply_str(rep, &len);
            FG_LOG(FG_LOG_ERROR, NULL, "cache: write-through of %s %s/%s refused: %.*s", it->kind,
                   it->cluster, it->name, (int)(len < 200 ? len : 200), s);
        }
        shown[i] = v == 1 || v == 2;
    }
    free(p->at);
    free(p->covered);
    fg_redis_batch_free(p->b);
    free(p);
    return rc;
}

int fg_cache_write_through(fg_redis_t *r, const fg_cache_through_t *items, size_t n, bool *shown) {
    return fg_cache_write_through_end(fg_cache_write_through_begin(r, items, n), shown);
}
