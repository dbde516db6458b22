/* Unit tests of the rate limiter (auth/ratelimit.c, cache/ratelimit.lua) and the Redis wrapper
 * (cache/redis.c): exact bursts per caller and per project, separate read and write limits,
 * the forced remainder of a list call, concurrent stream leases, two limiters sharing one Redis
 * (as two replicas do), the NOSCRIPT reload, and the per-process fallback when Redis is down. A
 * redis-server is started for the suite on a free port and killed after it. */
#include "fleetgate/auth.h"
#include "fleetgate/cache.h"
#include "testhttp.h"
#include "testredis.h"
#include "testmain.h"

#include <check.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static tr_redis_t redis;

/* ratelimit.c's RESERVE_MAX: the most calls one round trip reserves. */
#define RESERVE_MAX_CALLS 32

static void suite_setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
}

static void suite_teardown(void) {
    tr_redis_stop(&redis);
}

/* Limits small enough to count: bursts of 5 (caller) and 8 (project), one call a minute. */
static fg_rate_conf_t conf(void) {
    fg_rate_conf_t c = {
        .enabled = true,
        .read_per_minute = 1,
        .read_burst = 5,
        .write_per_minute = 1,
        .write_burst = 2,
        .project_read_per_minute = 1,
        .project_read_burst = 8,
        .project_write_per_minute = 1,
        .project_write_burst = 100,
        .streams_per_principal = 2,
        .stream_lease_s = 60,
        .list_item_cost_milli = 10,
        .redis_timeout_ms = 200,
    };
    return c;
}

/* A unique name per test and run, so tests sharing the Redis do not share buckets. */
static const char *unique(const char *base) {
    static char name[64];
    unsigned char r[4];
    fg_random_bytes(r, sizeof r);
    snprintf(name, sizeof name, "%s-%02x%02x%02x%02x", base, r[0], r[1], r[2], r[3]);
    return name;
}

static int count_allowed(fg_ratelimit_t *a, fg_ratelimit_t *b, fg_rl_class_t cls, const char *who,
                         const char *project, int calls, bool want_local) {
    int allowed = 0;
    for (int i = 0; i < calls; i++) {
        fg_rate_result_t res;
        ck_assert_int_eq(
            fg_ratelimit_charge(i % 2 && b ? b : a, cls, who, project, 1000, false, &res), FG_OK);
        ck_assert_msg(res.local == want_local, "call %d: local=%d", i, res.local);
        if (res.allowed) {
            allowed++;
        } else {
            ck_assert_int_ge(res.retry_after_s, 1);
            ck_assert_int_eq(res.remaining, 0);
        }
    }
    return allowed;
}

START_TEST(local_burst_gets_exactly_the_limit) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, NULL), FG_OK);
    for (int i = 0; i < 5; i++) {
        fg_rate_result_t res;
        fg_ratelimit_charge(rl, FG_RL_READ, "ada", NULL, 1000, false, &res);
        ck_assert(res.allowed);
        ck_assert_int_eq(res.limit, 5);
        ck_assert_int_eq(res.remaining, 4 - i);
        ck_assert_int_ge(res.reset_s, 60 * (i + 1) - 1);
    }
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, "ada", NULL, 1000, false, &res);
    ck_assert(!res.allowed);
    ck_assert_int_ge(res.retry_after_s, 59);
    ck_assert_int_le(res.retry_after_s, 60);
    /* Writes have their own bucket. */
    ck_assert_int_eq(count_allowed(rl, NULL, FG_RL_WRITE, "ada", NULL, 5, true), 2);
    /* Another caller is not affected. */
    ck_assert_int_eq(count_allowed(rl, NULL, FG_RL_READ, "bob", NULL, 7, true), 5);
    ck_assert_uint_eq(fg_ratelimit_fallbacks(rl), 0); /* no Redis configured: not a fallback */
    fg_ratelimit_free(rl);
}
END_TEST

START_TEST(project_bucket_is_shared_by_callers) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 2, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    const char *project = unique("shop");
    char p[64];
    snprintf(p, sizeof p, "%s", project);
    /* Three callers, five calls each: the project's burst of 8 is the limit. */
    int total = 0;
    for (int who = 0; who < 3; who++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%d", unique("u"), who);
        total += count_allowed(rl, NULL, FG_RL_READ, name, p, 5, false);
    }
    ck_assert_int_eq(total, 8);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

START_TEST(two_replicas_sharing_redis_get_exactly_the_limit) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *a, *b;
    fg_redis_t *ra, *rb;
    ck_assert_int_eq(fg_redis_new(&ra, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_redis_new(&rb, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&a, &c, ra), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&b, &c, rb), FG_OK);
    char who[64];
    snprintf(who, sizeof who, "%s", unique("ada"));
    ck_assert_int_eq(count_allowed(a, b, FG_RL_READ, who, NULL, 12, false), 5);
    ck_assert_uint_eq(fg_ratelimit_fallbacks(a) + fg_ratelimit_fallbacks(b), 0);
    fg_ratelimit_free(a);
    fg_ratelimit_free(b);
    fg_redis_free(ra);
    fg_redis_free(rb);
}
END_TEST

/* Far from the limit a limiter reserves calls ahead (fewer round trips); the total across two
 * replicas still stops at exactly the burst, and never passes it. */
START_TEST(reservations_ahead_still_stop_at_exactly_the_limit) {
    fg_rate_conf_t c = conf();
    c.read_burst = 300;
    fg_ratelimit_t *a, *b;
    fg_redis_t *ra, *rb;
    ck_assert_int_eq(fg_redis_new(&ra, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_redis_new(&rb, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&a, &c, ra), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&b, &c, rb), FG_OK);
    char who[64];
    snprintf(who, sizeof who, "%s", unique("many"));
    ck_assert_int_eq(count_allowed(a, b, FG_RL_READ, who, NULL, 400, false), 300);
    fg_ratelimit_free(a);
    fg_ratelimit_free(b);
    fg_redis_free(ra);
    fg_redis_free(rb);
}
END_TEST

/* Refilled ahead, off the request path: while a caller is far from its limit and its calls come
 * no faster than a refill's round trip (here: each call waits for the refill it queued), only the
 * first two calls wait for Redis; every later one is admitted from a reservation the refill thread
 * topped up. Nothing granted is lost: after the reservation expires, one call refunds what was
 * left, and Redis's own count is exactly the calls made (plus the new reservation). */
START_TEST(healthy_reservation_is_refilled_off_the_request_path) {
    fg_rate_conf_t c = conf();
    c.read_burst = 100000;
    fg_ratelimit_t *rl, *other;
    fg_redis_t *r, *r2;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 2000), FG_OK);
    ck_assert_int_eq(fg_redis_new(&r2, redis.url, 1, 2000), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&other, &c, r2), FG_OK);
    char who[64];
    snprintf(who, sizeof who, "%s", unique("steady"));
    const int n = 2000;
    fg_rate_result_t res;
    for (int i = 0; i < n; i++) {
        fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
        ck_assert_msg(res.allowed && !res.local, "call %d", i);
        fg_ratelimit_refills_wait(rl);
    }
    fg_ratelimit_stats_t st;
    fg_ratelimit_stats(rl, &st);
    ck_assert_uint_eq(st.inline_calls,
                      2); /* the first (no reservation yet), the second (reserves) */
    ck_assert_uint_ge(st.refill_calls, (uint64_t)(n / (RESERVE_MAX_CALLS)));
    usleep(150 * 1000); /* past the reservation's life: the next call refunds what was left */
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert(res.allowed);
    ck_assert_int_eq(res.remaining, c.read_burst - n - 1);
    fg_rate_result_t direct;
    fg_ratelimit_charge(other, FG_RL_READ, who, NULL, 1000, false, &direct);
    /* Redis's count: the calls made, this one, and the 31 that last call reserved ahead. */
    ck_assert_int_eq(direct.remaining, res.remaining - 1 - (RESERVE_MAX_CALLS - 1));
    fg_ratelimit_free(other);
    fg_ratelimit_free(rl);
    fg_redis_free(r2);
    fg_redis_free(r);
}
END_TEST

typedef struct {
    fg_ratelimit_t *rl;
    const char *who;
    int allowed;
} hammer_t;

static void *hammer_main(void *arg) {
    hammer_t *h = arg;
    fg_rate_result_t res;
    do {
        fg_ratelimit_charge(h->rl, FG_RL_READ, h->who, NULL, 1000, false, &res);
        if (res.allowed)
            h->allowed++;
    } while (res.allowed);
    return NULL;
}

/* Grants are added, never written over: four threads on two replicas, each reserving and
 * refilling concurrently, are admitted exactly the burst, no fewer (cells granted to a round trip
 * and then overwritten by a concurrent one would be charged in Redis and never used), no more. */
START_TEST(concurrent_grants_are_added_not_overwritten) {
    fg_rate_conf_t c = conf();
    c.read_burst = 4000;
    fg_ratelimit_t *rl[2];
    fg_redis_t *r[2];
    char who[64];
    snprintf(who, sizeof who, "%s", unique("crowd"));
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(fg_redis_new(&r[i], redis.url, 2, 2000), FG_OK);
        ck_assert_int_eq(fg_ratelimit_new(&rl[i], &c, r[i]), FG_OK);
    }
    hammer_t h[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (hammer_t){rl[i % 2], who, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        total += h[i].allowed;
    }
    /* What a replica still holds once its refills landed is admitted too, then refused. */
    for (int i = 0; i < 2; i++) {
        fg_ratelimit_refills_wait(rl[i]);
        hammer_t last = {rl[i], who, 0};
        hammer_main(&last);
        total += last.allowed;
    }
    ck_assert_int_eq(total, c.read_burst);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(fg_ratelimit_fallbacks(rl[i]), 0);
        fg_ratelimit_free(rl[i]);
        fg_redis_free(r[i]);
    }
}
END_TEST

/* Calls reserved and not used go back to Redis with the next call after the reservation
 * expires: the caller is charged for what it used, no more. */
START_TEST(unused_reservation_is_refunded) {
    fg_rate_conf_t c = conf();
    c.read_burst = 200;
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    char who[64];
    snprintf(who, sizeof who, "%s", unique("light"));
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert_int_eq(res.remaining, 199);
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res); /* reserves ahead */
    ck_assert_int_eq(res.remaining, 198);
    usleep(150 * 1000); /* past the reservation's life */
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert(res.allowed);
    ck_assert_int_eq(res.remaining, 197);
    /* What Redis holds: 3 calls used, plus whatever the last call reserved ahead. */
    fg_rate_result_t direct;
    fg_ratelimit_t *other;
    fg_redis_t *r2;
    ck_assert_int_eq(fg_redis_new(&r2, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&other, &c, r2), FG_OK);
    fg_ratelimit_charge(other, FG_RL_READ, who, NULL, 1000, false, &direct);
    ck_assert_int_le(direct.remaining, 196);
    ck_assert_int_ge(direct.remaining, 196 - 31);
    fg_ratelimit_free(other);
    fg_redis_free(r2);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

START_TEST(list_remainder_is_forced_after_the_answer) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    char who[64];
    snprintf(who, sizeof who, "%s", unique("lister"));
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res); /* the gate's one read */
    ck_assert(res.allowed);
    ck_assert_int_eq(res.remaining, 4);
    /* 600 items at 10 milli each = 6 reads; 5 more are due, though only 4 are left: forced. */
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 5000, true, &res);
    ck_assert(!res.allowed);
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert(!res.allowed);
    ck_assert_int_ge(res.retry_after_s, 60); /* over by one, and the next call costs another */
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

START_TEST(script_is_reloaded_after_script_flush) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    const char *flush[] = {"SCRIPT", "FLUSH"};
    ck_assert_int_eq(fg_redis_command(r, 2, flush), FG_OK);
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, unique("x"), NULL, 1000, false, &res);
    ck_assert(res.allowed);
    ck_assert(!res.local);
    ck_assert_uint_eq(fg_ratelimit_fallbacks(rl), 0);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

/* After Redis refused a caller, the limiter answers that caller itself until the exact
 * Retry-After time: the bucket deleted behind its back (Redis would now say yes) changes
 * nothing until then, and the first call after it asks Redis again. */
START_TEST(refused_key_is_answered_locally_until_retry_after) {
    fg_rate_conf_t c = conf();
    c.read_per_minute = 60; /* one call a second */
    c.read_burst = 2;
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    char who[64], key[96];
    snprintf(who, sizeof who, "%s", unique("hammer"));
    snprintf(key, sizeof key, "fg:rl:r:u:%s", who);
    ck_assert_int_eq(count_allowed(rl, NULL, FG_RL_READ, who, NULL, 3, false), 2);
    const char *del[] = {"DEL", key};
    ck_assert_int_eq(fg_redis_command(r, 2, del), FG_OK);
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert(!res.allowed);
    ck_assert(!res.local); /* not a fallback: Redis's own answer, remembered */
    ck_assert_int_eq(res.retry_after_s, 1);
    usleep(1500000); /* past the wait (about 1 s) */
    fg_ratelimit_charge(rl, FG_RL_READ, who, NULL, 1000, false, &res);
    ck_assert(res.allowed);
    ck_assert_uint_eq(fg_ratelimit_fallbacks(rl), 0);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

START_TEST(refusals_per_address_are_bounded) {
    fg_rate_conf_t c = conf();
    c.refusals_per_minute = 1;
    c.refusal_burst = 3;
    fg_ratelimit_t *rl;
    fg_rate_result_t res;
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, NULL), FG_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fg_ratelimit_refusal_check(rl, "192.0.2.7", &res), FG_OK);
        fg_ratelimit_refusal_charge(rl, "192.0.2.7");
    }
    ck_assert_int_eq(fg_ratelimit_refusal_check(rl, "192.0.2.7", &res), FG_OK);
    fg_ratelimit_refusal_charge(rl, "192.0.2.7");
    ck_assert_int_eq(fg_ratelimit_refusal_check(rl, "192.0.2.7", &res), FG_ETOOBIG);
    ck_assert_int_ge(res.retry_after_s, 1);
    ck_assert_int_eq(fg_ratelimit_refusal_check(rl, "192.0.2.8", &res), FG_OK);
    fg_ratelimit_free(rl);
}
END_TEST

START_TEST(redis_down_falls_back_to_local_buckets) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%u/0", (unsigned)th_free_port());
    ck_assert_int_eq(fg_redis_new(&r, url, 1, 50), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    uint64_t t0 = fg_now_ns();
    /* Never unlimited, never refusing everything: the same burst, per process. */
    ck_assert_int_eq(count_allowed(rl, NULL, FG_RL_READ, "ada", NULL, 9, true), 5);
    ck_assert_uint_eq(fg_ratelimit_fallbacks(rl), 9);
    ck_assert_msg(fg_now_ns() - t0 < 2000000000ull, "the fallback waited on Redis too long");
    ck_assert_uint_ge(fg_redis_failures(r), 1);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

START_TEST(redis_restart_is_survived) {
    tr_redis_t mine;
    ck_assert_int_eq(tr_redis_start(&mine), 0);
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, mine.url, 1, 100), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    fg_rate_result_t res;
    fg_ratelimit_charge(rl, FG_RL_READ, "ada", NULL, 1000, false, &res);
    ck_assert(!res.local);
    tr_redis_stop(&mine);
    fg_ratelimit_charge(rl, FG_RL_READ, "ada", NULL, 1000, false, &res);
    ck_assert(res.local);
    ck_assert(res.allowed);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
}
END_TEST

typedef struct {
    fg_redis_t *r;
    int rc;
    uint64_t took_ns;
} ping_t;

static void *ping_main(void *arg) {
    ping_t *p = arg;
    const char *ping[] = {"PING"};
    uint64_t t0 = fg_now_ns();
    p->rc = fg_redis_command(p->r, 1, ping);
    p->took_ns = fg_now_ns() - t0;
    return NULL;
}

/* A hung Redis (SIGSTOP: it accepts connections and answers nothing). After the first call
 * pays its timeout, the pool's circuit is open: calls on every slot (other threads) fail at
 * once instead of each waiting a timeout; after SIGCONT a probe closes it again. */
START_TEST(hung_redis_opens_the_circuit_for_every_slot) {
    enum { TIMEOUT_MS = 400, THREADS = 6 };
    tr_redis_t mine;
    ck_assert_int_eq(tr_redis_start(&mine), 0);
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, mine.url, THREADS + 1, TIMEOUT_MS), FG_OK);
    const char *ping[] = {"PING"};
    ck_assert_int_eq(fg_redis_command(r, 1, ping), FG_OK);
    /* Every thread's slot connected while Redis was alive. */
    ping_t p[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        p[i] = (ping_t){.r = r};
        pthread_create(&t[i], NULL, ping_main, &p[i]);
        pthread_join(t[i], NULL);
        ck_assert_int_eq(p[i].rc, FG_OK);
    }
    ck_assert_int_eq(kill(mine.pid, SIGSTOP), 0);
    ck_assert_int_eq(fg_redis_command(r, 1, ping), FG_EIO); /* pays the timeout, opens */
    /* Fresh threads get other slots (connected, not yet failed themselves). */
    int slow = 0;
    for (int i = 0; i < THREADS; i++) {
        p[i] = (ping_t){.r = r};
        pthread_create(&t[i], NULL, ping_main, &p[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(p[i].rc, FG_EIO);
        slow += p[i].took_ns >= (uint64_t)TIMEOUT_MS * 1000000ull / 2;
    }
    /* At most one may be a probe that waited (if the backoff passed meanwhile on a slow
     * machine); without the breaker all of them would. */
    ck_assert_int_le(slow, 1);
    ck_assert_int_eq(kill(mine.pid, SIGCONT), 0);
    int rc = FG_EIO;
    for (int i = 0; i < 100 && rc != FG_OK; i++) {
        rc = fg_redis_command(r, 1, ping);
        if (rc != FG_OK)
            usleep(50000);
    }
    ck_assert_int_eq(rc, FG_OK);
    fg_redis_free(r);
    tr_redis_stop(&mine);
}
END_TEST

static void stream_slots(fg_ratelimit_t *rl, bool want_local) {
    char who[64];
    snprintf(who, sizeof who, "%s", unique("streamer"));
    fg_stream_lease_t *l1 = NULL, *l2 = NULL, *l3 = NULL;
    fg_rate_result_t res;
    ck_assert_int_eq(fg_ratelimit_stream_acquire(rl, who, &l1, &res), FG_OK);
    ck_assert(res.local == want_local);
    ck_assert_int_eq(res.remaining, 1);
    ck_assert_int_eq(fg_ratelimit_stream_acquire(rl, who, &l2, &res), FG_OK);
    ck_assert_int_eq(fg_ratelimit_stream_acquire(rl, who, &l3, &res), FG_ETOOBIG);
    ck_assert_ptr_null(l3);
    ck_assert(!res.allowed);
    ck_assert_int_ge(res.retry_after_s, 1);
    ck_assert_int_eq(fg_ratelimit_stream_renew(rl, l1), FG_OK);
    fg_ratelimit_stream_release(rl, l1);
    ck_assert_int_eq(fg_ratelimit_stream_acquire(rl, who, &l3, &res), FG_OK);
    fg_ratelimit_stream_release(rl, l2);
    fg_ratelimit_stream_release(rl, l3);
}

START_TEST(stream_slots_are_leased_and_released) {
    fg_rate_conf_t c = conf();
    fg_ratelimit_t *rl;
    fg_redis_t *r;
    ck_assert_int_eq(fg_redis_new(&r, redis.url, 1, 200), FG_OK);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, r), FG_OK);
    stream_slots(rl, false);
    fg_ratelimit_free(rl);
    fg_redis_free(r);
    ck_assert_int_eq(fg_ratelimit_new(&rl, &c, NULL), FG_OK);
    stream_slots(rl, true);
    fg_ratelimit_free(rl);
}
END_TEST

START_TEST(redis_urls) {
    static const char *const good[] = {"redis://127.0.0.1:6379/0", "redis://:pw@h:1",
                                       "redis://[::1]:6379/15", "unix:///run/redis.sock"};
    static const char *const bad[] = {"http://h:1", "redis://h", "redis://h:1/99", "unix://rel"};
    for (size_t i = 0; i < 4; i++) {
        fg_redis_t *r = NULL;
        ck_assert_msg(fg_redis_new(&r, good[i], 1, 10) == FG_OK, "%s", good[i]);
        fg_redis_free(r);
        r = NULL;
        ck_assert_msg(fg_redis_new(&r, bad[i], 1, 10) == FG_EINVAL, "%s", bad[i]);
        ck_assert_ptr_null(r);
    }
}
END_TEST

static Suite *ratelimit_suite(void) {
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("ratelimit");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, local_burst_gets_exactly_the_limit);
    tcase_add_test(tc, project_bucket_is_shared_by_callers);
    tcase_add_test(tc, two_replicas_sharing_redis_get_exactly_the_limit);
    tcase_add_test(tc, reservations_ahead_still_stop_at_exactly_the_limit);
    tcase_add_test(tc, unused_reservation_is_refunded);
    tcase_add_test(tc, healthy_reservation_is_refilled_off_the_request_path);
    tcase_add_test(tc, concurrent_grants_are_added_not_overwritten);
    tcase_add_test(tc, list_remainder_is_forced_after_the_answer);
    tcase_add_test(tc, script_is_reloaded_after_script_flush);
    tcase_add_test(tc, redis_down_falls_back_to_local_buckets);
    tcase_add_test(tc, refused_key_is_answered_locally_until_retry_after);
    tcase_add_test(tc, refusals_per_address_are_bounded);
    tcase_add_test(tc, redis_restart_is_survived);
    tcase_add_test(tc, hung_redis_opens_the_circuit_for_every_slot);
    tcase_add_test(tc, stream_slots_are_leased_and_released);
    tcase_add_test(tc, redis_urls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(ratelimit_suite());
}
