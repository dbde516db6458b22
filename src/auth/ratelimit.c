/* auth/ratelimit.c: GCRA rate limits in Redis, with per-process buckets as the fallback.
 *
 * The arithmetic lives in one Lua script, cache/ratelimit.lua (embedded into the binary at build
 * time, loaded once per Redis server and called with EVALSHA), so a decision over the caller's
 * and the project's buckets is one atomic round trip and holds across every replica sharing the
 * Redis. Keys (see cache/ratelimit.lua for the values):
 *
 *   fg:rl:{r|w}:u:<subject>   the caller's read or write bucket (a TAT in microseconds)
 *   fg:rl:{r|w}:p:<project>   the project's read or write bucket
 *   fg:rl:s:u:<subject>       the caller's open streams (a sorted set of leases)
 *
 * When Redis cannot answer within rate_limits.redis_timeout_ms (or is in its reconnect backoff),
 * the same GCRA runs on per-process buckets: a fixed table hashed by key, so memory is bounded;
 * two keys meeting in a slot share its bucket, which errs on the strict side, never on
 * "unlimited", and refuses no more than one busy neighbour's worth. Each such decision
 * is counted (fleetgate_ratelimit_local_decisions_total). Per-process buckets mean N replicas
 * let through up to N times the limit while Redis is away: documented in the README.
 *
 * Reserving ahead: a round trip to Redis per call caps a worker thread at one call per round
 * trip. Far from the limit (the last answer left more than RESERVE_FROM calls), a call asks
 * Redis for up to RESERVE_MAX more calls at once (an eighth of what is left: the reservation is
 * sized to the caller's distance from its limit), and the next calls of the same caller and
 * project are admitted from that reservation in the process, for at most RESERVE_TTL_US. Cells
 * reserved and not used are refunded by the next script call for that key. Redis stays the only
 * judge: what it has not granted is never admitted, so the limit is never exceeded; near the
 * limit every call goes to Redis, so a burst gets exactly the allowed number through. The cost:
 * up to 1.5 x RESERVE_MAX calls per replica and key may sit unused in a reservation for
 * RESERVE_TTL_US while another replica is refused.
 *
 * Refilled ahead, off the request path: when a take leaves a reservation below its low-water
 * mark (half its last grant) and the caller is still far from its limit, the slot is queued
 * for the limiter's refill thread, which asks Redis for the next grant (a zero-cost script call)
 * while calls go on being admitted from what is left. A call blocks on EVALSHA only when the
 * reservation is empty (a first call, a burst faster than a round trip, or near the limit).
 * Grants are added to what a reservation holds, never written over it, so cells granted to two
 * concurrent round trips are both admitted; a grant that finds its slot taken over by another
 * key is refunded at once.
 *
 * Refused keys: a refusal from Redis carries the exact time (GCRA's TAT minus the tolerance)
 * before which every call of that key would be refused too, whatever any replica does, since
 * refused calls move no bucket. Until then the reservation slot answers refusals itself, so a
 * caller hammering past its limit costs no round trip. (A replica refunding reserved cells may
 * make Redis admit a little earlier: the local answer is then stricter, never looser.)
 *
 * Refusals per client address (fg_ratelimit_refusal_*): a per-process bucket per address,
 * charged by every 401/403 and checked before a token is looked at, so a flood of bad tokens
 * costs one hash lookup per call instead of a verification and an audit line.
 */
#include "auth_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mk/auth.mk makes this object depend on the script. */
FG_EMBED_FILE(fg_ratelimit_lua, "cache/ratelimit.lua");

#define LOCAL_SLOTS   4096 /* power of two */
#define LOCAL_STRIPES 64
#define KEY_MAX       320

#define RESERVE_SLOTS  1024 /* power of two */
#define RESERVE_FROM   64   /* reserve ahead only while the last answer left more calls */
#define RESERVE_MAX    32   /* calls reserved by one round trip, the asking one included */
#define RESERVE_TTL_US 100000

typedef struct {
    int64_t tat_us; /* bucket: theoretical arrival time (monotonic us); streams: open count */
} local_slot_t;

typedef struct {
    int64_t interval_us, burst;
} bucket_conf_t;

/* Calls granted by Redis ahead of time, for one caller and project (and class). */
typedef struct {
    char key[2 * KEY_MAX]; /* "<caller key> <project key>"; "" when empty */
    size_t ulen;           /* length of the caller key (the project key follows a space) */
    fg_rl_class_t cls;
    bool project;             /* the project's bucket is charged too */
    bool refilling;           /* queued for, or in, the refill thread */
    int64_t low_milli;        /* below this a take queues a refill */
    int64_t left_milli;       /* granted, not used yet */
    int64_t expires_us;       /* monotonic; unused cells after this are refunded */
    int64_t remaining;        /* the calls Redis said were left beyond the reservation */
    int64_t refused_until_us; /* monotonic: Redis refused this key until then */
    fg_rate_result_t last;    /* limit and reset of that answer */
} reserve_t;

struct fg_ratelimit {
    const fg_rate_conf_t *conf;
    fg_redis_t *redis;
    fg_redis_script_t script;
    bucket_conf_t user[2], project[2]; /* [FG_RL_READ], [FG_RL_WRITE] */
    bucket_conf_t refusals;            /* per client address */
    local_slot_t *slots;
    pthread_mutex_t stripes[LOCAL_STRIPES];
    reserve_t *reserves;
    pthread_mutex_t reserve_mu[LOCAL_STRIPES];
    atomic_uint_fast64_t fallbacks;
    atomic_uint_fast64_t inline_calls, refill_calls; /* script calls of fg_ratelimit_charge */
    /* The refill thread's queue: slot indices, each at most once (r->refilling). */
    pthread_t refiller;
    bool refiller_on, stopping;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv, q_idle;
    uint32_t queue[RESERVE_SLOTS];
    size_t q_head, q_len, q_busy;
};

static void *refill_main(void *arg);

struct fg_stream_lease {
    char key[KEY_MAX];
    char id[33];
    bool local;
};

static int64_t interval_of(int64_t per_minute) {
    return (60000000 + per_minute - 1) / per_minute; /* whole microseconds, rounded up */
}

int fg_ratelimit_new(fg_ratelimit_t **out, const fg_rate_conf_t *conf, fg_redis_t *redis) {
    fg_ratelimit_t *rl = fg_xcalloc(1, sizeof *rl);
    rl->conf = conf;
    rl->redis = redis;
    fg_redis_script_init(&rl->script, fg_ratelimit_lua);
    rl->user[FG_RL_READ] = (bucket_conf_t){interval_of(conf->read_per_minute), conf->read_burst};
    rl->user[FG_RL_WRITE] = (bucket_conf_t){interval_of(conf->write_per_minute), conf->write_burst};
    rl->project[FG_RL_READ] =
        (bucket_conf_t){interval_of(conf->project_read_per_minute), conf->project_read_burst};
    rl->project[FG_RL_WRITE] =
        (bucket_conf_t){interval_of(conf->project_write_per_minute), conf->project_write_burst};
    if (conf->refusals_per_minute > 0) /* 0 (a conf made in code): no limit on refusals */
        rl->refusals = (bucket_conf_t){interval_of(conf->refusals_per_minute), conf->refusal_burst};
    rl->slots = fg_xcalloc(LOCAL_SLOTS, sizeof *rl->slots);
    rl->reserves = fg_xcalloc(RESERVE_SLOTS, sizeof *rl->reserves);
    for (int i = 0; i < LOCAL_STRIPES; i++) {
        pthread_mutex_init(&rl->stripes[i], NULL);
        pthread_mutex_init(&rl->reserve_mu[i], NULL);
    }
    atomic_init(&rl->fallbacks, 0);
    atomic_init(&rl->inline_calls, 0);
    atomic_init(&rl->refill_calls, 0);
    pthread_mutex_init(&rl->q_mu, NULL);
    pthread_cond_init(&rl->q_cv, NULL);
    pthread_cond_init(&rl->q_idle, NULL);
    if (redis != NULL && pthread_create(&rl->refiller, NULL, refill_main, rl) == 0)
        rl->refiller_on = true; /* without it, reservations are refilled by the calls themselves */
    *out = rl;
    return FG_OK;
}

void fg_ratelimit_free(fg_ratelimit_t *rl) {
    if (rl == NULL)
        return;
    if (rl->refiller_on) {
        pthread_mutex_lock(&rl->q_mu);
        rl->stopping = true;
        pthread_cond_broadcast(&rl->q_cv);
        pthread_mutex_unlock(&rl->q_mu);
        pthread_join(rl->refiller, NULL);
    }
    pthread_mutex_destroy(&rl->q_mu);
    pthread_cond_destroy(&rl->q_cv);
    pthread_cond_destroy(&rl->q_idle);
    for (int i = 0; i < LOCAL_STRIPES; i++) {
        pthread_mutex_destroy(&rl->stripes[i]);
        pthread_mutex_destroy(&rl->reserve_mu[i]);
    }
    free(rl->reserves);
    free(rl->slots);
    free(rl);
}

uint64_t fg_ratelimit_fallbacks(const fg_ratelimit_t *rl) {
    return atomic_load(&((fg_ratelimit_t *)rl)->fallbacks);
}

void fg_ratelimit_stats(const fg_ratelimit_t *rl, fg_ratelimit_stats_t *out) {
    fg_ratelimit_t *m = (fg_ratelimit_t *)rl;
    out->inline_calls = atomic_load(&m->inline_calls);
    out->refill_calls = atomic_load(&m->refill_calls);
}

void fg_ratelimit_refills_wait(fg_ratelimit_t *rl) {
    pthread_mutex_lock(&rl->q_mu);
    while (rl->q_len > 0 || rl->q_busy > 0)
        pthread_cond_wait(&rl->q_idle, &rl->q_mu);
    pthread_mutex_unlock(&rl->q_mu);
}

/* ---- per-process buckets ----------------------------------------------- */

static uint64_t hash_key(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* The slot of a key. Keys whose hashes meet in one slot share its bucket: strict, never
 * unlimited (a takeover that reset the bucket would let two alternating keys run free). */
static size_t slot_of(const char *key) {
    return (size_t)(hash_key(key) & (LOCAL_SLOTS - 1));
}

/* Locks the stripes of up to two slots in ascending order (once when they share one). */
static void lock_slots(fg_ratelimit_t *rl, size_t n, const size_t *idx, bool lock) {
    size_t a = idx[0] % LOCAL_STRIPES, b = n > 1 ? idx[1] % LOCAL_STRIPES : a;
    size_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (lock) {
        pthread_mutex_lock(&rl->stripes[lo]);
        if (hi != lo)
            pthread_mutex_lock(&rl->stripes[hi]);
    } else {
        if (hi != lo)
            pthread_mutex_unlock(&rl->stripes[hi]);
        pthread_mutex_unlock(&rl->stripes[lo]);
    }
}

/* The same GCRA as cache/ratelimit.lua, on the slots of up to two keys. */
static void local_gcra(fg_ratelimit_t *rl, size_t nkeys, const char *const *keys,
                       const bucket_conf_t *const *bc, int64_t cost_milli, bool force,
                       fg_rate_result_t *res) {
    int64_t now = (int64_t)(fg_now_ns() / 1000);
    int64_t new_tats[2];
    size_t idx[2];
    bool allowed = true;
    for (size_t i = 0; i < nkeys; i++)
        idx[i] = slot_of(keys[i]);
    res->remaining = -1;
    res->retry_after_s = 0;
    lock_slots(rl, nkeys, idx, true);
    for (size_t i = 0; i < nkeys; i++) {
        int64_t tat = rl->slots[idx[i]].tat_us > now ? rl->slots[idx[i]].tat_us : now;
        int64_t new_tat = tat + (cost_milli * bc[i]->interval_us + 999) / 1000;
        int64_t tolerance = bc[i]->burst * bc[i]->interval_us;
        int64_t over = new_tat - now - tolerance;
        int64_t left = 0;
        if (over > 0) {
            allowed = false;
            int64_t wait = (over + 999999) / 1000000;
            if (wait > res->retry_after_s)
                res->retry_after_s = wait;
        } else {
            left = (tolerance - (new_tat - now)) / bc[i]->interval_us;
        }
        new_tats[i] = new_tat;
        if (res->remaining < 0 || left < res->remaining) {
            res->limit = bc[i]->burst;
            res->remaining = left;
            res->reset_s = (new_tat - now + 999999) / 1000000;
        }
    }
    if (allowed || force) {
        for (size_t i = 0; i < nkeys; i++)
            rl->slots[idx[i]].tat_us = new_tats[i];
    }
    lock_slots(rl, nkeys, idx, false);
    res->allowed = allowed;
    res->local = true;
    if (!allowed && res->retry_after_s < 1)
        res->retry_after_s = 1;
}

/* Adds delta to the open-stream count of key's slot, if the result stays in [0, max]. */
static bool local_streams(fg_ratelimit_t *rl, const char *key, int64_t delta, int64_t max,
                          int64_t *count) {
    size_t idx = slot_of(key);
    bool ok;
    lock_slots(rl, 1, &idx, true);
    int64_t n = rl->slots[idx].tat_us + delta;
    ok = n >= 0 && n <= max;
    if (ok)
        rl->slots[idx].tat_us = n;
    *count = rl->slots[idx].tat_us;
    lock_slots(rl, 1, &idx, false);
    return ok;
}

/* ---- reservations ------------------------------------------------------ */

/* The grant a reservation asks for, sized to the distance from the limit: an eighth of the
 * calls Redis said were left, at most RESERVE_MAX - 1; 0 near the limit (every call exact). */
static int64_t reserve_want_milli(int64_t remaining) {
    if (remaining <= RESERVE_FROM)
        return 0;
    int64_t calls = remaining / 8;
    return (calls < RESERVE_MAX - 1 ? calls : RESERVE_MAX - 1) * 1000;
}

/* Queues slot i for the refill thread; the caller holds the slot's lock and set r->refilling. */
static void refill_queue(fg_ratelimit_t *rl, size_t i) {
    pthread_mutex_lock(&rl->q_mu);
    rl->queue[(rl->q_head + rl->q_len) % RESERVE_SLOTS] = (uint32_t)i;
    rl->q_len++; /* at most RESERVE_SLOTS: a slot is queued once until its refill is done */
    pthread_cond_signal(&rl->q_cv);
    pthread_mutex_unlock(&rl->q_mu);
}

/* Takes cost_milli from a live reservation for key. True (and *res) when it could; otherwise
 * the reservation's unused cells move to *refund_milli (the next script call gives them back),
 * and *extra_milli says how much to reserve ahead with that call. Cells granted are used before
 * a remembered refusal is answered: Redis admitted them. */
static bool reserve_take(fg_ratelimit_t *rl, const char *key, int64_t cost_milli,
                         fg_rate_result_t *res, int64_t *refund_milli, int64_t *extra_milli) {
    size_t i = (size_t)(hash_key(key) & (RESERVE_SLOTS - 1));
    int64_t now = (int64_t)(fg_now_ns() / 1000);
    bool taken = false;
    reserve_t *r = &rl->reserves[i];
    *refund_milli = 0;
    *extra_milli = 0;
    pthread_mutex_lock(&rl->reserve_mu[i % LOCAL_STRIPES]);
    if (strcmp(r->key, key) == 0) {
        if (now < r->expires_us && r->left_milli >= cost_milli) {
            r->left_milli -= cost_milli;
            *res = r->last;
            res->allowed = true;
            res->retry_after_s = 0;
            res->remaining = r->remaining + r->left_milli / 1000;
            taken = true;
            if (rl->refiller_on && !r->refilling && r->left_milli < r->low_milli &&
                reserve_want_milli(r->remaining) > 0) {
                r->refilling = true;
                refill_queue(rl, i);
            }
        } else if (now < r->refused_until_us) {
            *res = r->last;
            res->allowed = false;
            res->retry_after_s = (r->refused_until_us - now + 999999) / 1000000;
            res->reset_s = res->retry_after_s > res->reset_s ? res->retry_after_s : res->reset_s;
            taken = true;
        } else {
            *refund_milli = r->left_milli;
            r->left_milli = 0;
            *extra_milli = reserve_want_milli(r->remaining);
        }
    }
    pthread_mutex_unlock(&rl->reserve_mu[i % LOCAL_STRIPES]);
    return taken;
}

/* Adds the cells Redis granted (granted_milli) to key's reservation and remembers the answer. A
 * slot held by another key is taken over: that key's unused cells are lost (the strict side) and
 * it restarts exact. Grants are added, never written over: two round trips in flight for one key
 * (two threads, or a call and the refill thread) each bring their own cells. */
static void reserve_put(fg_ratelimit_t *rl, const char *key, size_t ulen, fg_rl_class_t cls,
                        bool project, const fg_rate_result_t *res, int64_t granted_milli,
                        int64_t retry_us) {
    size_t i = (size_t)(hash_key(key) & (RESERVE_SLOTS - 1));
    reserve_t *r = &rl->reserves[i];
    int64_t now = (int64_t)(fg_now_ns() / 1000);
    pthread_mutex_lock(&rl->reserve_mu[i % LOCAL_STRIPES]);
    if (strcmp(r->key, key) != 0) {
        snprintf(r->key, sizeof r->key, "%s", key);
        r->ulen = ulen;
        r->cls = cls;
        r->project = project;
        r->left_milli = 0;
        r->low_milli = 0;
        /* r->refilling stays: a refill in flight for the old key finds the key changed */
    }
    r->left_milli += granted_milli;
    if (granted_milli > 0)
        r->low_milli = granted_milli / 2;
    r->expires_us = now + RESERVE_TTL_US;
    /* Counted from the answer's arrival, after Redis's clock read it: later, so stricter. */
    r->refused_until_us = res->allowed ? 0 : now + retry_us;
    r->remaining = res->remaining;
    r->last = *res;
    pthread_mutex_unlock(&rl->reserve_mu[i % LOCAL_STRIPES]);
}

/* ---- the limiter ------------------------------------------------------- */

static void note_fallback(fg_ratelimit_t *rl) {
    atomic_fetch_add(&rl->fallbacks, 1);
}

/* One script call: FG_OK with *res and *granted_milli, or FG_EIO when Redis cannot answer. */
static int redis_gcra(fg_ratelimit_t *rl, size_t nkeys, const char *const *keys,
                      const bucket_conf_t *const *bc, int64_t cost_milli, bool force,
                      int64_t refund_milli, int64_t extra_milli, fg_rate_result_t *res,
                      int64_t *granted_milli, int64_t *retry_us) {
    char cost[24], refund[24], extra[24], interval[2][24], burst[2][24];
    const char *args[5 + 4];
    size_t nargs = 0;
    snprintf(cost, sizeof cost, "%lld", (long long)cost_milli);
    snprintf(refund, sizeof refund, "%lld", (long long)refund_milli);
    snprintf(extra, sizeof extra, "%lld", (long long)extra_milli);
    args[nargs++] = "gcra";
    args[nargs++] = cost;
    args[nargs++] = force ? "1" : "0";
    args[nargs++] = refund;
    args[nargs++] = extra;
    for (size_t i = 0; i < nkeys; i++) {
        snprintf(interval[i], sizeof interval[i], "%lld", (long long)bc[i]->interval_us);
        snprintf(burst[i], sizeof burst[i], "%lld", (long long)bc[i]->burst);
        args[nargs++] = interval[i];
        args[nargs++] = burst[i];
    }
    int64_t v[7];
    size_t n = 0;
    if (fg_redis_eval_ints(rl->redis, &rl->script, nkeys, keys, nargs, args, v, 7, &n) != FG_OK ||
        n != 7)
        return FG_EIO;
    res->allowed = v[0] == 1;
    res->limit = v[1];
    res->remaining = v[2] < 0 ? 0 : v[2];
    res->reset_s = v[3];
    res->retry_after_s = v[4];
    *granted_milli = v[5] > 0 ? v[5] : 0;
    *retry_us = v[6] > 0 ? v[6] : 0;
    return FG_OK;
}

/* ---- the refill thread --------------------------------------------------- */

/* One refill: a zero-cost script call asking for the slot's next grant, added to what the
 * reservation still holds. A grant that finds the slot taken over goes back to Redis at once. */
static void refill_one(fg_ratelimit_t *rl, size_t i) {
    reserve_t *r = &rl->reserves[i];
    char key[2 * KEY_MAX];
    size_t ulen;
    fg_rl_class_t cls;
    bool project;
    int64_t want;
    pthread_mutex_t *mu = &rl->reserve_mu[i % LOCAL_STRIPES];
    pthread_mutex_lock(mu);
    memcpy(key, r->key, sizeof key);
    ulen = r->ulen;
    cls = r->cls;
    project = r->project;
    want = reserve_want_milli(r->remaining);
    pthread_mutex_unlock(mu);
    if (want == 0 || key[0] == '\0' || ulen >= strlen(key)) {
        pthread_mutex_lock(mu);
        r->refilling = false;
        pthread_mutex_unlock(mu);
        return;
    }
    key[ulen] = '\0'; /* "<caller key>\0<project key>" */
    const char *keys[2] = {key, key + ulen + 1};
    const bucket_conf_t *bc[2] = {&rl->user[cls], &rl->project[cls]};
    fg_rate_result_t res;
    int64_t granted = 0, retry_us = 0;
    memset(&res, 0, sizeof res);
    atomic_fetch_add(&rl->refill_calls, 1);
    int rc =
        redis_gcra(rl, project ? 2 : 1, keys, bc, 0, false, 0, want, &res, &granted, &retry_us);
    key[ulen] = ' ';
    bool lost = false;
    pthread_mutex_lock(mu);
    r->refilling = false;
    if (rc == FG_OK) {
        if (strcmp(r->key, key) != 0) {
            lost = granted > 0;
        } else if (granted > 0) {
            int64_t now = (int64_t)(fg_now_ns() / 1000);
            r->left_milli += granted;
            r->low_milli = granted / 2;
            r->expires_us = now + RESERVE_TTL_US;
            r->refused_until_us = 0; /* granted cells are admitted calls */
            r->remaining = res.remaining;
            r->last = res;
        } else {
            r->remaining = res.remaining; /* near the limit now: calls go to Redis */
        }
    }
    pthread_mutex_unlock(mu);
    if (lost) { /* the slot went to another key while the grant was in flight */
        key[ulen] = '\0';
        int64_t g2, r2;
        atomic_fetch_add(&rl->refill_calls, 1);
        redis_gcra(rl, project ? 2 : 1, keys, bc, 0, false, granted, 0, &res, &g2, &r2);
    }
}

static void *refill_main(void *arg) {
    fg_ratelimit_t *rl = arg;
    pthread_mutex_lock(&rl->q_mu);
    for (;;) {
        while (rl->q_len == 0 && !rl->stopping)
            pthread_cond_wait(&rl->q_cv, &rl->q_mu);
        if (rl->stopping)
            break;
        size_t i = rl->queue[rl->q_head];
        rl->q_head = (rl->q_head + 1) % RESERVE_SLOTS;
        rl->q_len--;
        rl->q_busy++;
        pthread_mutex_unlock(&rl->q_mu);
        refill_one(rl, i);
        pthread_mutex_lock(&rl->q_mu);
        rl->q_busy--;
        if (rl->q_len == 0 && rl->q_busy == 0)
            pthread_cond_broadcast(&rl->q_idle);
    }
    rl->q_len = 0;
    pthread_cond_broadcast(&rl->q_idle);
    pthread_mutex_unlock(&rl->q_mu);
    return NULL;
}

int fg_ratelimit_charge(fg_ratelimit_t *rl, fg_rl_class_t cls, const char *principal,
                        const char *project, int64_t cost_milli, bool force,
                        fg_rate_result_t *res) {
    fg_cache_key_t ukey, pkey;
    char rkey[2 * KEY_MAX];
    const char c = cls == FG_RL_WRITE ? 'w' : 'r';
    fg_cache_key_rate_caller(&ukey, c, principal);
    fg_cache_key_rate_project(&pkey, c, project ? project : "");
    const char *keys[2] = {ukey.s, pkey.s};
    const bucket_conf_t *bc[2] = {&rl->user[cls], &rl->project[cls]};
    size_t nkeys = project ? 2 : 1;
    memset(res, 0, sizeof *res);

    if (rl->redis) {
        int64_t refund = 0, extra = 0, granted = 0, retry_us = 0;
        /* A project name may hold no space (it is a DNS label), so the pair is unambiguous.
         * "<caller key> <project key>", built by hand: this runs on every gated call. */
        size_t ulen = strnlen(ukey.s, KEY_MAX - 1);
        size_t plen = project ? strnlen(pkey.s, KEY_MAX - 1) : 0;
        memcpy(rkey, ukey.s, ulen);
        rkey[ulen] = ' ';
        memcpy(rkey + ulen + 1, pkey.s, plen);
        rkey[ulen + 1 + plen] = '\0';
        if (!force && reserve_take(rl, rkey, cost_milli, res, &refund, &extra))
            return FG_OK;
        atomic_fetch_add(&rl->inline_calls, 1);
        if (redis_gcra(rl, nkeys, keys, bc, cost_milli, force, refund, extra, res, &granted,
                       &retry_us) == FG_OK) {
            if (!force)
                reserve_put(rl, rkey, ulen, cls, project != NULL, res, res->allowed ? granted : 0,
                            retry_us);
            if (res->allowed)
                res->remaining += granted / 1000;
            return FG_OK;
        }
        note_fallback(rl);
    }
    local_gcra(rl, nkeys, keys, bc, cost_milli, force, res);
    return FG_OK;
}

/* ---- refusals per client address --------------------------------------- */

/* "fg:rl:x:a:<addr>", cut to len - 1 bytes (built by hand: it runs on every gated call). */
static void refusal_key(char *key, size_t len, const char *addr) {
    static const char prefix[] = "fg:rl:x:a:";
    size_t n = strnlen(addr, len - sizeof prefix);
    memcpy(key, prefix, sizeof prefix - 1);
    memcpy(key + sizeof prefix - 1, addr, n);
    key[sizeof prefix - 1 + n] = '\0';
}

int fg_ratelimit_refusal_check(fg_ratelimit_t *rl, const char *addr, fg_rate_result_t *res) {
    char key[KEY_MAX];
    const char *keys[1] = {key};
    const bucket_conf_t *bc[1] = {&rl->refusals};
    memset(res, 0, sizeof *res);
    res->allowed = true;
    if (rl->refusals.interval_us == 0)
        return FG_OK;
    refusal_key(key, sizeof key, addr);
    /* A zero cost moves nothing: only the refusals charged before decide. */
    local_gcra(rl, 1, keys, bc, 0, false, res);
    res->local = false; /* by design, not a fallback */
    return res->allowed ? FG_OK : FG_ETOOBIG;
}

void fg_ratelimit_refusal_charge(fg_ratelimit_t *rl, const char *addr) {
    char key[KEY_MAX];
    const char *keys[1] = {key};
    const bucket_conf_t *bc[1] = {&rl->refusals};
    fg_rate_result_t res;
    if (rl->refusals.interval_us == 0)
        return;
    refusal_key(key, sizeof key, addr);
    local_gcra(rl, 1, keys, bc, 1000, true, &res);
}

/* ---- streams ----------------------------------------------------------- */

int fg_ratelimit_stream_acquire(fg_ratelimit_t *rl, const char *principal, fg_stream_lease_t **out,
                                fg_rate_result_t *res) {
    fg_stream_lease_t *lease = fg_xcalloc(1, sizeof *lease);
    unsigned char rnd[16];
    char max[24], lease_ms[24];
    fg_cache_key_t key;
    snprintf(lease->key, sizeof lease->key, "%s", fg_cache_key_rate_caller(&key, 's', principal));
    if (fg_random_bytes(rnd, sizeof rnd) != FG_OK)
        memset(rnd, 0, sizeof rnd);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(lease->id + 2 * i, 3, "%02x", rnd[i]);
    memset(res, 0, sizeof *res);
    res->limit = rl->conf->streams_per_principal;

    if (rl->redis) {
        snprintf(max, sizeof max, "%lld", (long long)rl->conf->streams_per_principal);
        snprintf(lease_ms, sizeof lease_ms, "%lld", (long long)rl->conf->stream_lease_s * 1000);
        const char *keys[] = {lease->key};
        const char *args[] = {"acquire", lease->id, max, lease_ms};
        int64_t v[5];
        size_t n = 0;
        if (fg_redis_eval_ints(rl->redis, &rl->script, 1, keys, 4, args, v, 5, &n) == FG_OK &&
            n == 5) {
            res->allowed = v[0] == 1;
            res->remaining = v[2];
            res->retry_after_s = v[4];
            goto done;
        }
        note_fallback(rl);
    }
    int64_t open;
    lease->local = true;
    res->local = true;
    res->allowed = local_streams(rl, lease->key, 1, rl->conf->streams_per_principal, &open);
    res->remaining = rl->conf->streams_per_principal - open;
    res->retry_after_s = res->allowed ? 0 : 1;
done:
    if (!res->allowed) {
        free(lease);
        return FG_ETOOBIG;
    }
    *out = lease;
    return FG_OK;
}

int fg_ratelimit_stream_renew(fg_ratelimit_t *rl, fg_stream_lease_t *lease) {
    if (lease->local || rl->redis == NULL)
        return FG_OK; /* local leases do not expire */
    char lease_ms[24];
    snprintf(lease_ms, sizeof lease_ms, "%lld", (long long)rl->conf->stream_lease_s * 1000);
    const char *keys[] = {lease->key};
    const char *args[] = {"renew", lease->id, lease_ms};
    int64_t v[1] = {0};
    size_t n = 0;
    int rc = fg_redis_eval_ints(rl->redis, &rl->script, 1, keys, 3, args, v, 1, &n);
    if (rc != FG_OK)
        return rc;
    return n == 1 && v[0] == 1 ? FG_OK : FG_ENOENT;
}

void fg_ratelimit_stream_release(fg_ratelimit_t *rl, fg_stream_lease_t *lease) {
    if (lease == NULL)
        return;
    if (lease->local) {
        int64_t open;
        local_streams(rl, lease->key, -1, INT64_MAX, &open);
    } else if (rl->redis) {
        /* When Redis is away the lease simply expires (stream_lease_s). */
        const char *keys[] = {lease->key};
        const char *args[] = {"release", lease->id};
        int64_t v[1];
        size_t n = 0;
        fg_redis_eval_ints(rl->redis, &rl->script, 1, keys, 2, args, v, 1, &n);
    }
    free(lease);
}
