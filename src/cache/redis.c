/* cache/redis.c: a small pool of hiredis connections with bounded waits.
 *
 * Each slot is one connection behind its own mutex. A thread takes the slot given to it on its
 * first call (round robin), so with one slot per worker thread the mutexes are uncontended.
 * A failed connect or command drops the context (hiredis 0.14 cannot reuse a context after an
 * error) and starts a backoff (50 ms doubling to 2 s) during which the slot answers FG_EIO at
 * once: when Redis is down, a request pays at most one timeout per backoff period, not one per
 * call.
 *
 * A circuit breaker per pool: a hung Redis (stopped, swapping) accepts connections and answers
 * nothing, so every slot would pay its own timeout on every call, pinning every worker. After a
 * failure on any slot the pool is open: every call answers FG_EIO at once ("circuit open").
 * A prober thread of the pool's own (started when the circuit opens, gone when it closes) tries
 * a connection and a PING after a backoff (50 ms doubling to 2 s) and closes the circuit when
 * Redis answers; so no request ever waits on a probe, and a worker thread never waits on a hung
 * Redis for more than the one call that opened the circuit. The closed path costs one atomic
 * load.
 */
#include "cache_internal.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define BACKOFF_MIN_NS (50ull * 1000000ull)
#define BACKOFF_MAX_NS (2000ull * 1000000ull)
#define MAX_ARGS       32

typedef struct {
    pthread_mutex_t mu;
    redisContext *ctx;
    backoff_t backoff; /* no connect attempt before backoff.retry_at_ns */
    char why[128];     /* the last connect or command failure, for fg_redis_query's callers */
} slot_t;

struct fg_redis {
    char *host; /* or the unix socket path */
    uint16_t port;
    bool unix_socket;
    char *password;
    int64_t db;
    struct timeval timeout;
    slot_t *slots;
    unsigned nslots;
    atomic_uint next_slot;
    atomic_uint_fast64_t failures;
    /* the circuit breaker (see the top), under breaker_mu but for the flag's fast path */
    atomic_bool open;
    pthread_mutex_t breaker_mu;
    pthread_cond_t breaker_cv;
    backoff_t breaker;   /* the prober's next attempt: breaker.retry_at_ns */
    bool prober_running; /* a (detached) prober thread exists */
    bool stopping;       /* fg_redis_free: the prober leaves */
};

/* The slot this thread was given in each pool it used (a process has a few pools: the rate
 * limiter's, the read APIs', the informers'); a thread that alternates between pools keeps its
 * slot in each instead of being handed a new one, shared with another thread, on every switch. */
#define TL_POOLS 8
static _Thread_local const fg_redis_t *tl_pool[TL_POOLS];
static _Thread_local unsigned tl_slot[TL_POOLS];
static _Thread_local unsigned tl_next;

/* ---- URL --------------------------------------------------------------- */

static int parse_url(fg_redis_t *r, const char *url) {
    if (strncmp(url, "unix://", 7) == 0) {
        if (url[7] != '/')
            return FG_EINVAL;
        r->unix_socket = true;
        r->host = fg_xstrdup(url + 7);
        return FG_OK;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return FG_EINVAL;
    const char *p = url + 8;
    const char *at = strchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon && colon + 1 < at)
            r->password = fg_xstrndup(colon + 1, (size_t)(at - colon - 1));
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    char *hostport = fg_xstrndup(p, slash ? (size_t)(slash - p) : strlen(p));
    int rc = fg_parse_hostport(hostport, &r->host, &r->port);
    free(hostport);
    if (rc != FG_OK)
        return FG_EINVAL;
    if (slash && slash[1] && fg_parse_int64(slash + 1, strlen(slash + 1), 0, 15, &r->db) != FG_OK)
        return FG_EINVAL;
    return FG_OK;
}

int fg_redis_new(fg_redis_t **out, const char *url, unsigned nconns, unsigned timeout_ms) {
    fg_redis_t *r = fg_xcalloc(1, sizeof *r);
    if (parse_url(r, url) != FG_OK) {
        fg_redis_free(r);
        return FG_EINVAL;
    }
    r->timeout.tv_sec = timeout_ms / 1000;
    r->timeout.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
    r->nslots = nconns ? nconns : 1;
    r->slots = fg_xcalloc(r->nslots, sizeof *r->slots);
    for (unsigned i = 0; i < r->nslots; i++)
        pthread_mutex_init(&r->slots[i].mu, NULL);
    atomic_init(&r->next_slot, 0);
    atomic_init(&r->failures, 0);
    atomic_init(&r->open, false);
    pthread_mutex_init(&r->breaker_mu, NULL);
    pthread_cond_init(&r->breaker_cv, NULL);
    *out = r;
    return FG_OK;
}

void fg_redis_free(fg_redis_t *r) {
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->breaker_mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->breaker_cv);
    while (r->prober_running) /* at most one connect timeout */
        pthread_cond_wait(&r->breaker_cv, &r->breaker_mu);
    pthread_mutex_unlock(&r->breaker_mu);
    for (unsigned i = 0; r->slots && i < r->nslots; i++) {
        if (r->slots[i].ctx)
            redisFree(r->slots[i].ctx);
        pthread_mutex_destroy(&r->slots[i].mu);
    }
    free(r->slots);
    pthread_cond_destroy(&r->breaker_cv);
    pthread_mutex_destroy(&r->breaker_mu);
    free(r->host);
    free(r->password);
    free(r);
}

uint64_t fg_redis_failures(const fg_redis_t *r) {
    return atomic_load(&((fg_redis_t *)r)->failures);
}

void fg_redis_script_init(fg_redis_script_t *s, const char *source) {
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)source, strlen(source), md);
    s->source = source;
    for (size_t i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(s->sha1 + 2 * i, 3, "%02x", md[i]);
}

/* ---- connections ------------------------------------------------------- */

static slot_t *my_slot(fg_redis_t *r) {
    size_t i = 0;
    while (i < TL_POOLS && tl_pool[i] != r)
        i++;
    if (i == TL_POOLS) {
        i = tl_next++ % TL_POOLS;
        tl_pool[i] = r;
        tl_slot[i] = atomic_fetch_add(&r->next_slot, 1) % r->nslots;
    }
    /* The modulo guards a pool reborn at the same address. */
    return &r->slots[tl_slot[i] % r->nslots];
}

/* ---- the circuit breaker ----------------------------------------------- */

/* FG_OK when a call may go to Redis; FG_EIO while the circuit is open. */
static int breaker_admit(fg_redis_t *r) {
    return atomic_load_explicit(&r->open, memory_order_acquire) ? FG_EIO : FG_OK;
}

static bool setup_ok(redisReply *rep);
static redisContext *connect_ctx(const fg_redis_t *r, char *why, size_t whylen);

/* One probe on a connection of its own: connect, AUTH/SELECT as a slot would, PING. */
static bool probe(const fg_redis_t *r) {
    char why[128];
    redisContext *c = connect_ctx(r, why, sizeof why);
    if (c == NULL)
        return false;
    redisReply *rep = redisCommand(c, "PING");
    bool ok = rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return ok;
}

static void *prober_main(void *arg) {
    fg_redis_t *r = arg;
    pthread_mutex_lock(&r->breaker_mu);
    while (!r->stopping && atomic_load(&r->open)) {
        uint64_t now = fg_now_ns();
        if (backoff_waiting(&r->breaker, now)) {
            uint64_t wait = r->breaker.retry_at_ns - now;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)(wait / 1000000000ull);
            until.tv_nsec += (long)(wait % 1000000000ull);
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&r->breaker_cv, &r->breaker_mu, &until);
            continue;
        }
        pthread_mutex_unlock(&r->breaker_mu);
        bool ok = probe(r);
        pthread_mutex_lock(&r->breaker_mu);
        if (ok) {
            backoff_succeeded(&r->breaker);
            atomic_store_explicit(&r->open, false, memory_order_release);
        } else {
            backoff_failed(&r->breaker, BACKOFF_MIN_NS, BACKOFF_MAX_NS);
        }
    }
    r->prober_running = false;
    pthread_cond_broadcast(&r->breaker_cv); /* fg_redis_free may be waiting */
    pthread_mutex_unlock(&r->breaker_mu);
    return NULL;
}

/* A call failed: the circuit opens (if it was closed: the first wait is the shortest), and a
 * prober is started when none runs. */
static void breaker_failed(fg_redis_t *r) {
    pthread_mutex_lock(&r->breaker_mu);
    if (!atomic_load(&r->open)) {
        backoff_succeeded(&r->breaker);
        backoff_failed(&r->breaker, BACKOFF_MIN_NS, BACKOFF_MAX_NS);
        atomic_store_explicit(&r->open, true, memory_order_release);
    }
    if (!r->prober_running && !r->stopping) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, prober_main, r) == 0)
            r->prober_running = true;
        else /* no thread: close again, so calls probe by themselves as before */
            atomic_store_explicit(&r->open, false, memory_order_release);
        pthread_attr_destroy(&attr);
    }
    pthread_mutex_unlock(&r->breaker_mu);
}

/* ---- connections (continued) -------------------------------------------- */

static void drop(fg_redis_t *r, slot_t *s) {
    if (s->ctx)
        redisFree(s->ctx);
    s->ctx = NULL;
    backoff_failed(&s->backoff, BACKOFF_MIN_NS, BACKOFF_MAX_NS);
    atomic_fetch_add(&r->failures, 1);
    breaker_failed(r);
}

/* A reply that is an error, or none: the caller drops the connection on NULL. */
static bool setup_ok(redisReply *rep) {
    bool ok = rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* A new connection ready for commands (its timeout set, AUTH and SELECT done), or NULL with
 * why ("Connection refused (HOST:PORT)"). For the slots and the breaker's prober alike. */
static redisContext *connect_ctx(const fg_redis_t *r, char *why, size_t whylen) {
    redisContext *c = r->unix_socket ? redisConnectUnixWithTimeout(r->host, r->timeout)
                                     : redisConnectWithTimeout(r->host, r->port, r->timeout);
    const char *err = NULL;
    if (c == NULL || c->err)
        err = c ? c->errstr : "out of memory";
    else if (redisSetTimeout(c, r->timeout) != REDIS_OK ||
             (r->password && !setup_ok(redisCommand(c, "AUTH %s", r->password))) ||
             (r->db && !setup_ok(redisCommand(c, "SELECT %lld", (long long)r->db))))
        err = "connection setup failed (AUTH or SELECT)";
    if (err == NULL)
        return c;
    snprintf(why, whylen, "%s (%s:%u)", err, r->host, (unsigned)r->port);
    if (c)
        redisFree(c);
    return NULL;
}

/* Connects the slot (held) when it has no context; FG_EIO while the circuit is open, while
 * the slot backs off, or on failure. */
static int ensure(fg_redis_t *r, slot_t *s) {
    if (breaker_admit(r) != FG_OK) {
        snprintf(s->why, sizeof s->why, "circuit open after failures (%s:%u)", r->host,
                 (unsigned)r->port);
        return FG_EIO;
    }
    if (s->ctx)
        return FG_OK;
    if (backoff_waiting(&s->backoff, fg_now_ns()))
        return FG_EIO;
    s->ctx = connect_ctx(r, s->why, sizeof s->why);
    if (s->ctx == NULL) {
        FG_LOG(FG_LOG_WARN, NULL, "redis: cannot connect: %s", s->why);
        drop(r, s);
        return FG_EIO;
    }
    backoff_succeeded(&s->backoff);
    return FG_OK;
}

/* Runs one command on the slot (held); NULL when the connection failed (already dropped). */
static redisReply *run(fg_redis_t *r, slot_t *s, int argc, const char **argv) {
    redisReply *rep = redisCommandArgv(s->ctx, argc, argv, NULL);
    if (rep == NULL) {
        FG_LOG(FG_LOG_WARN, NULL, "redis: %s", s->ctx->errstr[0] ? s->ctx->errstr : "no reply");
        snprintf(s->why, sizeof s->why, "%s (%s:%u)",
                 s->ctx->errstr[0] ? s->ctx->errstr : "no reply", r->host, (unsigned)r->port);
        drop(r, s);
    }
    return rep;
}

int fg_redis_command(fg_redis_t *r, size_t argc, const char *const *argv) {
    slot_t *s = my_slot(r);
    int rc = FG_OK;
    pthread_mutex_lock(&s->mu);
    if (ensure(r, s) != FG_OK) {
        rc = FG_EIO;
        goto out;
    }
    redisReply *rep = run(r, s, (int)argc, (const char **)argv);
    if (rep == NULL) {
        rc = FG_EIO;
        goto out;
    }
    if (rep->type == REDIS_REPLY_ERROR)
        rc = FG_EINVAL;
    freeReplyObject(rep);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static bool is_noscript(const redisReply *rep) {
    return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0;
}

int fg_redis_eval_ints(fg_redis_t *r, const fg_redis_script_t *scr, size_t nkeys,
                       const char *const *keys, size_t nargs, const char *const *args, int64_t *out,
                       size_t nout, size_t *nout_read) {
    const char *argv[MAX_ARGS];
    char numkeys[16];
    redisReply *rep = NULL;
    int rc = FG_OK;
    if (3 + nkeys + nargs > MAX_ARGS)
        return FG_EINVAL;
    snprintf(numkeys, sizeof numkeys, "%zu", nkeys);
    size_t argc = 0;
    argv[argc++] = "EVALSHA";
    argv[argc++] = scr->sha1;
    argv[argc++] = numkeys;
    for (size_t i = 0; i < nkeys; i++)
        argv[argc++] = keys[i];
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = args[i];

    slot_t *s = my_slot(r);
    pthread_mutex_lock(&s->mu);
    if (ensure(r, s) != FG_OK) {
        rc = FG_EIO;
        goto out;
    }
    rep = run(r, s, (int)argc, argv);
    if (rep && is_noscript(rep)) {
        /* First call on this server (or after SCRIPT FLUSH / a restart): load, then retry. */
        freeReplyObject(rep);
        const char *load[] = {"SCRIPT", "LOAD", scr->source};
        rep = run(r, s, 3, load);
        if (rep && rep->type == REDIS_REPLY_STRING) {
            freeReplyObject(rep);
            rep = run(r, s, (int)argc, argv);
        }
    }
    if (rep == NULL) {
        rc = FG_EIO;
        goto out;
    }
    if (rep->type != REDIS_REPLY_ARRAY) {
        FG_LOG(FG_LOG_ERROR, NULL, "redis: script %.12s answered %s", scr->sha1,
               rep->type == REDIS_REPLY_ERROR ? rep->str : "no array");
        rc = FG_EINVAL;
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < rep->elements && n < nout; i++) {
        if (rep->element[i]->type != REDIS_REPLY_INTEGER) {
            rc = FG_EINVAL;
            goto out;
        }
        out[n++] = rep->element[i]->integer;
    }
    *nout_read = n;
out:
    if (rep)
        freeReplyObject(rep);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- replies for readers ------------------------------------------------ */

/* fg_redis_reply_t is hiredis's redisReply under another name, so callers outside cache/ read
 * replies through the accessors below without including hiredis.h. */
static const redisReply *as_rep(const fg_redis_reply_t *rep) {
    return (const redisReply *)rep;
}

static void set_why(char *why, size_t whylen, const slot_t *s, bool backing_off) {
    if (why == NULL || whylen == 0)
        return;
    if (s->why[0] == '\0')
        snprintf(why, whylen, "redis: unreachable");
    else
        snprintf(why, whylen, "redis: %s%s", s->why, backing_off ? " (retrying shortly)" : "");
}

/* Fails the slot's pipeline: logs, drops the connection, frees the replies read so far. */
static void pipeline_failed(fg_redis_t *r, slot_t *s, fg_redis_reply_t **outs, size_t got,
                            char *why, size_t whylen) {
    snprintf(s->why, sizeof s->why, "%s (%s:%u)", s->ctx->errstr[0] ? s->ctx->errstr : "no reply",
             r->host, (unsigned)r->port);
    FG_LOG(FG_LOG_WARN, NULL, "redis: %s", s->why);
    drop(r, s);
    set_why(why, whylen, s, false);
    for (size_t i = 0; i < got; i++) {
        freeReplyObject(outs[i]);
        outs[i] = NULL;
    }
}

int fg_redis_pipeline_send(fg_redis_t *r, size_t ncmds, const size_t *argcs,
                           const char *const *const *argvs, char *why, size_t whylen) {
    slot_t *s = my_slot(r);
    pthread_mutex_lock(&s->mu);
    if (ensure(r, s) != FG_OK) {
        set_why(why, whylen, s, s->ctx == NULL && backoff_waiting(&s->backoff, fg_now_ns()));
        pthread_mutex_unlock(&s->mu);
        return FG_EIO;
    }
    int rc = FG_OK, done = 0;
    for (size_t i = 0; rc == FG_OK && i < ncmds; i++)
        if (redisAppendCommandArgv(s->ctx, (int)argcs[i], (const char **)argvs[i], NULL) !=
            REDIS_OK)
            rc = FG_EIO;
    while (rc == FG_OK && !done)
        if (redisBufferWrite(s->ctx, &done) != REDIS_OK)
            rc = FG_EIO;
    if (rc != FG_OK) {
        pipeline_failed(r, s, NULL, 0, why, whylen);
        pthread_mutex_unlock(&s->mu);
    }
    return rc; /* FG_OK: the slot stays locked until fg_redis_pipeline_recv */
}

int fg_redis_pipeline_recv(fg_redis_t *r, size_t ncmds, fg_redis_reply_t **outs, char *why,
                           size_t whylen) {
    slot_t *s = my_slot(r);
    int rc = FG_OK;
    size_t got = 0;
    for (size_t i = 0; i < ncmds; i++)
        outs[i] = NULL;
    for (; got < ncmds; got++) {
        void *rep = NULL;
        if (redisGetReply(s->ctx, &rep) != REDIS_OK || rep == NULL) {
            rc = FG_EIO;
            break;
        }
        outs[got] = (fg_redis_reply_t *)rep;
    }
    if (rc != FG_OK)
        pipeline_failed(r, s, outs, got, why, whylen);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int fg_redis_pipeline(fg_redis_t *r, size_t ncmds, const size_t *argcs,
                      const char *const *const *argvs, fg_redis_reply_t **outs, char *why,
                      size_t whylen) {
    for (size_t i = 0; i < ncmds; i++)
        outs[i] = NULL;
    if (fg_redis_pipeline_send(r, ncmds, argcs, argvs, why, whylen) != FG_OK)
        return FG_EIO;
    return fg_redis_pipeline_recv(r, ncmds, outs, why, whylen);
}

int fg_redis_query(fg_redis_t *r, size_t argc, const char *const *argv, fg_redis_reply_t **out,
                   char *why, size_t whylen) {
    return fg_redis_pipeline(r, 1, &argc, &argv, out, why, whylen);
}

void fg_redis_reply_free(fg_redis_reply_t *rep) {
    if (rep)
        freeReplyObject(rep);
}

fg_redis_reply_type_t fg_redis_reply_type(const fg_redis_reply_t *rep) {
    static const struct {
        int from;
        fg_redis_reply_type_t to;
    } types[] = {{REDIS_REPLY_STRING, FG_REDIS_STRING},
                 {REDIS_REPLY_ARRAY, FG_REDIS_ARRAY},
                 {REDIS_REPLY_INTEGER, FG_REDIS_INTEGER},
                 {REDIS_REPLY_STATUS, FG_REDIS_STATUS},
                 {REDIS_REPLY_ERROR, FG_REDIS_ERROR}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (as_rep(rep)->type == types[i].from)
            return types[i].to;
    return FG_REDIS_NIL;
}

const char *fg_redis_reply_str(const fg_redis_reply_t *rep, size_t *len) {
    const redisReply *x = as_rep(rep);
    bool text = x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS ||
                x->type == REDIS_REPLY_ERROR;
    if (len)
        *len = text ? x->len : 0;
    return text ? x->str : NULL;
}

int64_t fg_redis_reply_int(const fg_redis_reply_t *rep) {
    return as_rep(rep)->type == REDIS_REPLY_INTEGER ? as_rep(rep)->integer : 0;
}

size_t fg_redis_reply_len(const fg_redis_reply_t *rep) {
    return as_rep(rep)->type == REDIS_REPLY_ARRAY ? as_rep(rep)->elements : 0;
}

const fg_redis_reply_t *fg_redis_reply_at(const fg_redis_reply_t *rep, size_t i) {
    const redisReply *x = as_rep(rep);
    return x->type == REDIS_REPLY_ARRAY && i < x->elements ? (const fg_redis_reply_t *)x->element[i]
                                                           : NULL;
}

/* ---- connections outside the pool (cache_internal.h) --------------------- */

redisContext *fg_redis_connect_raw(const fg_redis_t *r, bool blocking_reads, char *why,
                                   size_t whylen) {
    redisContext *c = r->unix_socket ? redisConnectUnixWithTimeout(r->host, r->timeout)
                                     : redisConnectWithTimeout(r->host, r->port, r->timeout);
    if (c == NULL || c->err) {
        snprintf(why, whylen, "%s (%s:%u)", c ? c->errstr : "out of memory", r->host,
                 (unsigned)r->port);
        if (c)
            redisFree(c);
        return NULL;
    }
    struct timeval none = {0, 0};
    if (redisSetTimeout(c, r->timeout) != REDIS_OK ||
        (r->password && !setup_ok(redisCommand(c, "AUTH %s", r->password))) ||
        (r->db && !setup_ok(redisCommand(c, "SELECT %lld", (long long)r->db))) ||
        (blocking_reads && redisSetTimeout(c, none) != REDIS_OK)) {
        snprintf(why, whylen, "connection setup failed (AUTH or SELECT) on %s:%u", r->host,
                 (unsigned)r->port);
        redisFree(c);
        return NULL;
    }
    return c;
}
