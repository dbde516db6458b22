/* cache/mirror.c: a process-local copy of hash fields read from Redis, kept exact by Redis's
 * client-side caching, so the hottest reads (GET of one object) need no round trip.
 *
 * One thread owns two connections: the subscriber (SUBSCRIBE __redis__:invalidate) and the
 * tracking connection (CLIENT TRACKING on REDIRECT <subscriber> BCAST PREFIX <prefix>), so Redis
 * announces every change of a key under the prefix, whoever makes it. Validity is a sequence
 * number: the reader takes a snapshot before its fetch (fg_redis_mirror_begin), and an entry
 * counts only while no invalidation of its key and no reset happened after that snapshot. A
 * reset (either connection lost, FLUSHALL, too many keys) invalidates everything at once, and
 * until both connections are back the mirror holds nothing and readers go to Redis.
 * The window between a write in Redis and its invalidation reaching this thread is the
 * mirror's only staleness: one message on loopback, far below the informers' own lag.
 *
 * An entry may carry the answer a reader made from its value (fg_redis_mirror_attach): the next
 * GET of it sends that text without copying or presenting the value again (fg_redis_mirror_peek).
 * It is dropped with the value, so it is exactly as fresh; its bytes count toward max_bytes.
 */
#include "cache_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define MIRROR_SLOTS     65536 /* direct-mapped: a new entry replaces the one in its slot */
#define MIRROR_STRIPES   64
#define MIRROR_VALUE_MAX (64u << 10)
#define KEYGEN_BUCKETS   4096
#define KEYGEN_MAX       65536 /* more invalidated keys than this: reset instead of growing */
#define PING_INTERVAL_MS 1000
#define RETRY_MS         500
#define INVALIDATE_CHAN  "__redis__:invalidate"

typedef struct {
    uint64_t hash; /* of key and field; 0: empty */
    char *key, *field;
    char *value; /* NULL: the field is absent (a cached miss) */
    size_t len;
    uint64_t seq;        /* the reader's snapshot when it fetched */
    fg_prepared_t *prep; /* the answer made from value (a reference), or NULL; goes with it */
} entry_t;

typedef struct keygen {
    struct keygen *next;
    uint64_t seq; /* when this key was last invalidated */
    char key[];
} keygen_t;

struct fg_redis_mirror {
    const fg_redis_t *pool; /* borrowed: for where and how to connect */
    char *prefix;
    size_t max_bytes;
    atomic_size_t bytes;
    atomic_bool live;              /* both connections up and tracking on */
    atomic_uint_fast64_t seq;      /* the clock of snapshots and invalidations */
    atomic_uint_fast64_t reset_at; /* everything fetched before this is void */
    atomic_uint_fast64_t hits, misses, invalidations, resets;

    entry_t *slots;
    pthread_mutex_t stripes[MIRROR_STRIPES];

    pthread_mutex_t keygen_mu;
    keygen_t *keygen[KEYGEN_BUCKETS];
    size_t nkeygen;

    pthread_t thread;
    pthread_mutex_t conn_mu; /* guards sub, so free() can wake the thread */
    redisContext *sub, *track;
    atomic_bool stop;
    bool told_down; /* the thread's: "not live" was logged (once per outage) */
};

static uint64_t fnv1a(const char *s, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t entry_hash(const char *key, const char *field) {
    uint64_t h = fnv1a(key, strlen(key) + 1, 0xcbf29ce484222325ull); /* the NUL separates */
    h = fnv1a(field, strlen(field), h);
    return h ? h : 1;
}

/* ---- key generations ------------------------------------------------------ */

/* The last invalidation of key (0: never). Held: keygen_mu. */
static uint64_t keygen_find(const fg_redis_mirror_t *m, const char *key, size_t len) {
    const keygen_t *k = m->keygen[fnv1a(key, len, 0xcbf29ce484222325ull) % KEYGEN_BUCKETS];
    for (; k; k = k->next)
        if (strlen(k->key) == len && memcmp(k->key, key, len) == 0)
            return k->seq;
    return 0;
}

static void keygen_clear(fg_redis_mirror_t *m) {
    for (size_t b = 0; b < KEYGEN_BUCKETS; b++) {
        while (m->keygen[b]) {
            keygen_t *next = m->keygen[b]->next;
            free(m->keygen[b]);
            m->keygen[b] = next;
        }
    }
    m->nkeygen = 0;
}

/* Everything fetched so far is void; the per-key generations are no longer needed. */
static void reset_all(fg_redis_mirror_t *m) {
    pthread_mutex_lock(&m->keygen_mu);
    atomic_store(&m->reset_at, atomic_fetch_add(&m->seq, 1) + 1);
    keygen_clear(m);
    pthread_mutex_unlock(&m->keygen_mu);
    atomic_fetch_add(&m->resets, 1);
}

static void invalidate(fg_redis_mirror_t *m, const char *key, size_t len) {
    atomic_fetch_add(&m->invalidations, 1);
    pthread_mutex_lock(&m->keygen_mu);
    uint64_t now = atomic_fetch_add(&m->seq, 1) + 1;
    keygen_t **head = &m->keygen[fnv1a(key, len, 0xcbf29ce484222325ull) % KEYGEN_BUCKETS];
    keygen_t *k = *head;
    while (k && !(strlen(k->key) == len && memcmp(k->key, key, len) == 0))
        k = k->next;
    if (k == NULL && m->nkeygen >= KEYGEN_MAX) {
        pthread_mutex_unlock(&m->keygen_mu);
        reset_all(m);
        return;
    }
    if (k == NULL) {
        k = fg_xmalloc(sizeof *k + len + 1);
        memcpy(k->key, key, len);
        k->key[len] = '\0';
        k->next = *head;
        *head = k;
        m->nkeygen++;
    }
    k->seq = now;
    pthread_mutex_unlock(&m->keygen_mu);
}

/* Whether something fetched at snapshot seq of key is still exact. */
static bool still_valid(fg_redis_mirror_t *m, const char *key, uint64_t seq) {
    if (!atomic_load(&m->live) || seq < atomic_load(&m->reset_at))
        return false;
    pthread_mutex_lock(&m->keygen_mu);
    bool ok = keygen_find(m, key, strlen(key)) < seq && seq >= atomic_load(&m->reset_at);
    pthread_mutex_unlock(&m->keygen_mu);
    return ok;
}

/* ---- entries ------------------------------------------------------------- */

static void entry_clear(fg_redis_mirror_t *m, entry_t *e) {
    if (e->hash)
        atomic_fetch_sub(&m->bytes,
                         e->len + strlen(e->key) + strlen(e->field) + (e->prep ? e->prep->len : 0));
    fg_prepared_unref(e->prep);
    free(e->key);
    free(e->field);
    free(e->value);
    memset(e, 0, sizeof *e);
}

uint64_t fg_redis_mirror_begin(fg_redis_mirror_t *m) {
    if (m == NULL || !atomic_load(&m->live))
        return 0;
    return atomic_fetch_add(&m->seq, 1) + 1;
}

int fg_redis_mirror_get(fg_redis_mirror_t *m, const char *key, const char *field, char **value,
                        size_t *len) {
    if (m == NULL || !atomic_load(&m->live))
        return FG_ENOENT;
    uint64_t h = entry_hash(key, field);
    size_t slot = h % MIRROR_SLOTS;
    pthread_mutex_t *mu = &m->stripes[slot % MIRROR_STRIPES];
    int rc = FG_ENOENT;
    pthread_mutex_lock(mu);
    entry_t *e = &m->slots[slot];
    if (e->hash == h && strcmp(e->key, key) == 0 && strcmp(e->field, field) == 0) {
        if (still_valid(m, key, e->seq)) {
            *value = e->value ? fg_xstrndup(e->value, e->len) : NULL;
            *len = e->value ? e->len : 0;
            rc = FG_OK;
        } else {
            entry_clear(m, e);
        }
    }
    pthread_mutex_unlock(mu);
    atomic_fetch_add(rc == FG_OK ? &m->hits : &m->misses, 1);
    return rc;
}

/* The valid entry of key and field, or NULL (an entry found void is cleared). Held: its stripe. */
static entry_t *held_entry(fg_redis_mirror_t *m, const char *key, const char *field, uint64_t h) {
    entry_t *e = &m->slots[h % MIRROR_SLOTS];
    if (e->hash != h || strcmp(e->key, key) != 0 || strcmp(e->field, field) != 0)
        return NULL;
    if (still_valid(m, key, e->seq))
        return e;
    entry_clear(m, e);
    return NULL;
}

int fg_redis_mirror_peek(fg_redis_mirror_t *m, const char *key, const char *field, bool *present,
                         fg_prepared_t **prep) {
    *prep = NULL;
    if (m == NULL || !atomic_load(&m->live))
        return FG_ENOENT;
    uint64_t h = entry_hash(key, field);
    pthread_mutex_t *mu = &m->stripes[(h % MIRROR_SLOTS) % MIRROR_STRIPES];
    pthread_mutex_lock(mu);
    entry_t *e = held_entry(m, key, field, h);
    if (e) {
        *present = e->value != NULL;
        if (e->prep)
            *prep = fg_prepared_ref(e->prep);
    }
    pthread_mutex_unlock(mu);
    if (*prep)
        atomic_fetch_add(&m->hits, 1); /* a read served; a plain look is counted by its get */
    return e ? FG_OK : FG_ENOENT;
}

void fg_redis_mirror_attach(fg_redis_mirror_t *m, const char *key, const char *field,
                            const char *value, size_t len, fg_prepared_t *prep) {
    if (m == NULL || value == NULL || !atomic_load(&m->live))
        return;
    uint64_t h = entry_hash(key, field);
    pthread_mutex_t *mu = &m->stripes[(h % MIRROR_SLOTS) % MIRROR_STRIPES];
    pthread_mutex_lock(mu);
    entry_t *e = held_entry(m, key, field, h);
    /* Only onto the very value it was made from: the entry may have been replaced meanwhile. */
    if (e && e->value && e->len == len && memcmp(e->value, value, len) == 0 &&
        atomic_load(&m->bytes) + prep->len <= m->max_bytes) {
        if (e->prep)
            atomic_fetch_sub(&m->bytes, e->prep->len);
        fg_prepared_unref(e->prep);
        e->prep = fg_prepared_ref(prep);
        atomic_fetch_add(&m->bytes, prep->len);
    }
    pthread_mutex_unlock(mu);
}

void fg_redis_mirror_put(fg_redis_mirror_t *m, const char *key, const char *field, uint64_t seq,
                         const char *value, size_t len) {
    if (m == NULL || seq == 0 || len > MIRROR_VALUE_MAX || !still_valid(m, key, seq))
        return;
    size_t cost = (value ? len : 0) + strlen(key) + strlen(field);
    uint64_t h = entry_hash(key, field);
    size_t slot = h % MIRROR_SLOTS;
    pthread_mutex_t *mu = &m->stripes[slot % MIRROR_STRIPES];
    pthread_mutex_lock(mu);
    entry_t *e = &m->slots[slot];
    entry_clear(m, e);
    if (atomic_load(&m->bytes) + cost <= m->max_bytes) {
        e->key = fg_xstrdup(key);
        e->field = fg_xstrdup(field);
        e->value = value ? fg_xstrndup(value, len) : NULL;
        e->len = value ? len : 0;
        e->seq = seq;
        e->hash = h;
        atomic_fetch_add(&m->bytes, cost);
    }
    pthread_mutex_unlock(mu);
}

/* ---- the subscriber thread ------------------------------------------------ */

static bool reply_is(const redisReply *r, int type) {
    return r && r->type == type;
}

/* Opens both connections and turns tracking on; false (with the reason logged) on failure. */
static bool connect_both(fg_redis_mirror_t *m) {
    char why[256];
    redisContext *sub = fg_redis_connect_raw(m->pool, false, why, sizeof why);
    redisContext *track = sub ? fg_redis_connect_raw(m->pool, false, why, sizeof why) : NULL;
    redisReply *id = track ? redisCommand(sub, "CLIENT ID") : NULL;
    redisReply *subr =
        reply_is(id, REDIS_REPLY_INTEGER) ? redisCommand(sub, "SUBSCRIBE " INVALIDATE_CHAN) : NULL;
    redisReply *tr = reply_is(subr, REDIS_REPLY_ARRAY)
                         ? redisCommand(track, "CLIENT TRACKING on REDIRECT %lld BCAST PREFIX %s",
                                        id->integer, m->prefix)
                         : NULL;
    bool ok = reply_is(tr, REDIS_REPLY_STATUS);
    if (!ok && sub)
        snprintf(why, sizeof why, "%s",
                 tr && tr->type == REDIS_REPLY_ERROR ? tr->str
                                                     : "CLIENT ID, SUBSCRIBE or TRACKING failed");
    if (tr)
        freeReplyObject(tr);
    if (subr)
        freeReplyObject(subr);
    if (id)
        freeReplyObject(id);
    /* The subscriber only waits from now on; the tracking connection keeps its timeout. */
    struct timeval none = {0, 0};
    if (ok && redisSetTimeout(sub, none) != REDIS_OK)
        ok = false;
    if (!ok) {
        if (!m->told_down)
            FG_LOG(FG_LOG_WARN, NULL, "redis mirror: not live, reads go to Redis: %s", why);
        m->told_down = true;
        if (sub)
            redisFree(sub);
        if (track)
            redisFree(track);
        return false;
    }
    pthread_mutex_lock(&m->conn_mu);
    m->sub = sub;
    m->track = track;
    pthread_mutex_unlock(&m->conn_mu);
    reset_all(m); /* nothing fetched before tracking was on may be kept */
    atomic_store(&m->live, true);
    m->told_down = false;
    FG_LOG(FG_LOG_INFO, NULL, "redis mirror: live (prefix %s)", m->prefix);
    return true;
}

static void disconnect_both(fg_redis_mirror_t *m) {
    atomic_store(&m->live, false);
    reset_all(m);
    pthread_mutex_lock(&m->conn_mu);
    redisFree(m->sub);
    redisFree(m->track);
    m->sub = m->track = NULL;
    pthread_mutex_unlock(&m->conn_mu);
}

/* Applies one push from the subscriber: ["message", channel, [key...] | nil]. */
static void apply_push(fg_redis_mirror_t *m, const redisReply *r) {
    if (!reply_is(r, REDIS_REPLY_ARRAY) || r->elements != 3 ||
        !reply_is(r->element[0], REDIS_REPLY_STRING) || strcmp(r->element[0]->str, "message") != 0)
        return;
    const redisReply *keys = r->element[2];
    if (keys->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < keys->elements; i++)
            if (reply_is(keys->element[i], REDIS_REPLY_STRING))
                invalidate(m, keys->element[i]->str, keys->element[i]->len);
    } else {
        reset_all(m); /* nil: FLUSHALL/FLUSHDB, every key is gone */
    }
}

/* Waits for pushes; every second checks that the tracking connection is still there (tracking
 * ends silently with it). Returns when either connection fails or stop is set. */
static void serve(fg_redis_mirror_t *m) {
    while (!atomic_load(&m->stop)) {
        void *reply = NULL;
        if (redisGetReplyFromReader(m->sub, &reply) != REDIS_OK)
            return;
        if (reply) {
            apply_push(m, reply);
            freeReplyObject(reply);
            continue;
        }
        struct pollfd p = {.fd = m->sub->fd, .events = POLLIN};
        int n = poll(&p, 1, PING_INTERVAL_MS);
        if (n < 0 && errno != EINTR)
            return;
        if (n > 0 && redisBufferRead(m->sub) != REDIS_OK)
            return;
        if (n == 0) {
            redisReply *pong = redisCommand(m->track, "PING");
            bool ok = reply_is(pong, REDIS_REPLY_STATUS);
            if (pong)
                freeReplyObject(pong);
            if (!ok)
                return;
        }
    }
}

static void *mirror_main(void *arg) {
    fg_redis_mirror_t *m = arg;
    while (!atomic_load(&m->stop)) {
        if (connect_both(m)) {
            serve(m);
            disconnect_both(m);
            if (!atomic_load(&m->stop)) {
                FG_LOG(FG_LOG_WARN, NULL, "redis mirror: connection lost, reads go to Redis");
                m->told_down = true;
            }
        }
        for (int waited = 0; waited < RETRY_MS && !atomic_load(&m->stop); waited += 50)
            nanosleep(&(struct timespec){0, 50 * 1000000}, NULL);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

int fg_redis_mirror_new(fg_redis_mirror_t **out, const fg_redis_t *pool, const char *prefix,
                        size_t max_bytes) {
    fg_redis_mirror_t *m = fg_xcalloc(1, sizeof *m);
    m->pool = pool;
    m->prefix = fg_xstrdup(prefix);
    m->max_bytes = max_bytes;
    m->slots = fg_xcalloc(MIRROR_SLOTS, sizeof *m->slots);
    for (size_t i = 0; i < MIRROR_STRIPES; i++)
        pthread_mutex_init(&m->stripes[i], NULL);
    pthread_mutex_init(&m->keygen_mu, NULL);
    pthread_mutex_init(&m->conn_mu, NULL);
    atomic_init(&m->seq, 1);
    atomic_init(&m->reset_at, 1);
    if (pthread_create(&m->thread, NULL, mirror_main, m) != 0) {
        free(m->slots);
        free(m->prefix);
        free(m);
        return FG_ERR;
    }
    *out = m;
    return FG_OK;
}

void fg_redis_mirror_free(fg_redis_mirror_t *m) {
    if (m == NULL)
        return;
    atomic_store(&m->stop, true);
    pthread_mutex_lock(&m->conn_mu);
    if (m->sub)
        shutdown(m->sub->fd, SHUT_RDWR); /* wakes the thread out of poll or a read */
    pthread_mutex_unlock(&m->conn_mu);
    pthread_join(m->thread, NULL);
    for (size_t i = 0; i < MIRROR_SLOTS; i++)
        entry_clear(m, &m->slots[i]);
    keygen_clear(m);
    free(m->slots);
    free(m->prefix);
    free(m);
}

void fg_redis_mirror_stats(const fg_redis_mirror_t *m, fg_redis_mirror_stats_t *out) {
    fg_redis_mirror_t *mm = (fg_redis_mirror_t *)m;
    out->live = atomic_load(&mm->live);
    out->hits = atomic_load(&mm->hits);
    out->misses = atomic_load(&mm->misses);
    out->invalidations = atomic_load(&mm->invalidations);
    out->resets = atomic_load(&mm->resets);
    out->bytes = atomic_load(&mm->bytes);
}
