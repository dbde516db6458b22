/* Integration tests of the pod mirror (cache/mirror.c) against a real redis-server: a copy is
 * served only while exact; a write by another client, a FLUSHALL, a put from a fetch that raced
 * a write, and a Redis restart each void what they must, and the mirror comes back by itself. */
#include "fleetgate/cache.h"
#include "testredis.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY "fg:o:pod:c1:demo"

static void sleep_ms(long ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static bool wait_live(fg_redis_mirror_t *m, bool want) {
    for (int i = 0; i < 400; i++) {
        fg_redis_mirror_stats_t st;
        fg_redis_mirror_stats(m, &st);
        if (st.live == want)
            return true;
        sleep_ms(10);
    }
    return false;
}

static void cmd(fg_redis_t *pool, const char *a, const char *b, const char *c, const char *d) {
    const char *argv[] = {a, b, c, d};
    size_t argc = d ? 4 : c ? 3 : b ? 2 : 1;
    ck_assert_int_eq(fg_redis_command(pool, argc, argv), FG_OK);
}

/* What a reader does: the mirror's copy, or a fetch (HGET) kept in the mirror. */
static char *read_through(fg_redis_mirror_t *m, fg_redis_t *pool, const char *field, bool *hit) {
    char *v = NULL;
    size_t len;
    *hit = fg_redis_mirror_get(m, KEY, field, &v, &len) == FG_OK;
    if (*hit)
        return v;
    uint64_t seq = fg_redis_mirror_begin(m);
    const char *argv[] = {"HGET", KEY, field};
    fg_redis_reply_t *rep = NULL;
    char why[128];
    ck_assert_int_eq(fg_redis_query(pool, 3, argv, &rep, why, sizeof why), FG_OK);
    const char *s =
        fg_redis_reply_type(rep) == FG_REDIS_STRING ? fg_redis_reply_str(rep, &len) : NULL;
    v = s ? fg_xstrndup(s, len) : NULL;
    fg_redis_mirror_put(m, KEY, field, seq, v, v ? len : 0);
    fg_redis_reply_free(rep);
    return v;
}

/* Reads until the value is want (a write's invalidation arrives within a second). */
static void eventually(fg_redis_mirror_t *m, fg_redis_t *pool, const char *field,
                       const char *want) {
    char *v = NULL;
    bool hit;
    for (int i = 0; i < 100; i++) {
        free(v);
        v = read_through(m, pool, field, &hit);
        if ((v == NULL && want == NULL) || (v && want && strcmp(v, want) == 0))
            break;
        sleep_ms(10);
    }
    if (want)
        ck_assert_str_eq(v ? v : "(absent)", want);
    else
        ck_assert_ptr_null(v);
    free(v);
}

START_TEST(copies_are_served_only_while_exact) {
    tr_redis_t r;
    ck_assert_int_eq(tr_redis_start(&r), 0);
    fg_redis_t *pool, *writer;
    ck_assert_int_eq(fg_redis_new(&pool, r.url, 1, 1000), FG_OK);
    ck_assert_int_eq(fg_redis_new(&writer, r.url, 1, 1000), FG_OK);
    fg_redis_mirror_t *m;
    ck_assert_int_eq(fg_redis_mirror_new(&m, pool, "fg:o:pod:", 1 << 20), FG_OK);
    ck_assert(wait_live(m, true));

    cmd(writer, "HSET", KEY, "a", "v1");
    bool hit;
    char *v = read_through(m, pool, "a", &hit);
    ck_assert(!hit);
    ck_assert_str_eq(v, "v1");
    /* A fetch is kept once the write's own invalidation has come by (a fetch that may have
     * raced it is not kept), so a later read is served by the mirror. */
    for (int i = 0; i < 100 && !hit; i++) {
        free(v);
        v = read_through(m, pool, "a", &hit);
        ck_assert_str_eq(v, "v1");
        if (!hit)
            sleep_ms(10);
    }
    ck_assert_msg(hit, "a read is served by the mirror");
    free(v);
    /* A known absence is held too, and voided by a create. */
    hit = false;
    for (int i = 0; i < 100 && !hit; i++)
        ck_assert_ptr_null(read_through(m, pool, "b", &hit));
    ck_assert(hit);

    /* Another client's write voids the copy: the next reads see the new value. */
    cmd(writer, "HSET", KEY, "a", "v2");
    eventually(m, pool, "a", "v2");
    cmd(writer, "HSET", KEY, "b", "new");
    eventually(m, pool, "b", "new");

    /* A fetch that began before a write is not kept. Until the write's invalidation has come
     * by (one loopback message: the mirror's only staleness) nothing can know that, so the stale
     * fetch is offered once the mirror serves the new value itself (kept after the
     * invalidation). */
    uint64_t seq = fg_redis_mirror_begin(m);
    cmd(writer, "HSET", KEY, "a", "v3");
    bool served = false;
    for (int i = 0; i < 100 && !served; i++) {
        v = read_through(m, pool, "a", &hit);
        served = hit && strcmp(v, "v3") == 0;
        free(v);
        if (!served)
            sleep_ms(10);
    }
    ck_assert_msg(served, "the mirror serves the new value");
    fg_redis_mirror_put(m, KEY, "a", seq, "v2", 2);
    v = read_through(m, pool, "a", &hit);
    ck_assert_str_eq(v, "v3");
    free(v);

    /* A FLUSHALL voids everything. */
    cmd(writer, "FLUSHALL", NULL, NULL, NULL);
    eventually(m, pool, "a", NULL);

    /* Redis gone: not live, nothing served; back: live again, exact again. */
    cmd(writer, "HSET", KEY, "a", "v4");
    eventually(m, pool, "a", "v4");
    tr_redis_stop(&r);
    ck_assert(wait_live(m, false));
    ck_assert_int_eq(fg_redis_mirror_get(m, KEY, "a", &v, &(size_t){0}), FG_ENOENT);

    fg_redis_mirror_stats_t st;
    fg_redis_mirror_stats(m, &st);
    ck_assert_uint_gt(st.hits, 0);
    ck_assert_uint_gt(st.invalidations, 0);
    fg_redis_mirror_free(m);
    fg_redis_free(writer);
    fg_redis_free(pool);
}
END_TEST

/* An answer attached to a copy is handed out with it and goes with it: only onto the very value
 * it was made from, dropped by a write, and still readable by a holder after it went. */
START_TEST(prepared_answers_go_with_their_copy) {
    tr_redis_t r;
    ck_assert_int_eq(tr_redis_start(&r), 0);
    fg_redis_t *pool, *writer;
    ck_assert_int_eq(fg_redis_new(&pool, r.url, 1, 1000), FG_OK);
    ck_assert_int_eq(fg_redis_new(&writer, r.url, 1, 1000), FG_OK);
    fg_redis_mirror_t *m;
    ck_assert_int_eq(fg_redis_mirror_new(&m, pool, "fg:o:pod:", 1 << 20), FG_OK);
    ck_assert(wait_live(m, true));
    cmd(writer, "HSET", KEY, "a", "v1");
    bool hit = false, present = false;
    for (int i = 0; i < 100 && !hit; i++) {
        free(read_through(m, pool, "a", &hit));
        if (!hit)
            sleep_ms(10);
    }
    ck_assert(hit);
    fg_prepared_t *p = NULL, *got = NULL;
    ck_assert_int_eq(fg_redis_mirror_peek(m, KEY, "a", &present, &got), FG_OK);
    ck_assert(present);
    ck_assert_ptr_null(got); /* nothing attached yet */
    /* Made from another value than the copy's: not attached. */
    p = fg_prepared_new("{\"a\":\"v0\"}", 10, "\"v0\"");
    fg_redis_mirror_attach(m, KEY, "a", "v0", 2, p);
    fg_prepared_unref(p);
    ck_assert_int_eq(fg_redis_mirror_peek(m, KEY, "a", &present, &got), FG_OK);
    ck_assert_ptr_null(got);
    /* Made from the copy's value: handed out with it. */
    p = fg_prepared_new("{\"a\":\"v1\"}", 10, "\"v1\"");
    fg_redis_mirror_attach(m, KEY, "a", "v1", 2, p);
    fg_prepared_unref(p);
    ck_assert_int_eq(fg_redis_mirror_peek(m, KEY, "a", &present, &got), FG_OK);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got->text, "{\"a\":\"v1\"}");
    ck_assert_str_eq(got->tag, "\"v1\"");
    /* A write drops the copy and its answer; the holder still reads its own reference. */
    cmd(writer, "HSET", KEY, "a", "v2");
    fg_prepared_t *after = NULL;
    for (int i = 0; i < 100; i++) {
        if (fg_redis_mirror_peek(m, KEY, "a", &present, &after) != FG_OK)
            break;
        fg_prepared_unref(after);
        after = NULL;
        sleep_ms(10);
    }
    ck_assert_int_eq(fg_redis_mirror_peek(m, KEY, "a", &present, &after), FG_ENOENT);
    ck_assert_ptr_null(after);
    ck_assert_str_eq(got->text, "{\"a\":\"v1\"}");
    fg_prepared_unref(got);
    fg_redis_mirror_free(m);
    fg_redis_free(writer);
    fg_redis_free(pool);
    tr_redis_stop(&r);
}
END_TEST

START_TEST(comes_back_when_redis_does) {
    tr_redis_t r;
    ck_assert_int_eq(tr_redis_start(&r), 0);
    fg_redis_t *pool;
    ck_assert_int_eq(fg_redis_new(&pool, r.url, 1, 1000), FG_OK);
    fg_redis_mirror_t *m;
    ck_assert_int_eq(fg_redis_mirror_new(&m, pool, "fg:o:pod:", 1 << 20), FG_OK);
    ck_assert(wait_live(m, true));
    uint16_t port = r.port;
    tr_redis_stop(&r);
    ck_assert(wait_live(m, false));
    /* Restarted where it was, empty: the mirror is live again and holds nothing from before. */
    ck_assert_int_eq(tr_redis_start_on(&r, port), 0);
    ck_assert(wait_live(m, true));
    fg_redis_t *writer;
    ck_assert_int_eq(fg_redis_new(&writer, r.url, 1, 1000), FG_OK);
    cmd(writer, "HSET", KEY, "a", "after");
    eventually(m, pool, "a", "after");
    cmd(writer, "HSET", KEY, "a", "again");
    eventually(m, pool, "a", "again");
    fg_redis_mirror_free(m);
    fg_redis_free(writer);
    fg_redis_free(pool);
    tr_redis_stop(&r);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mirror");
    TCase *tc = tcase_create("mirror");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, copies_are_served_only_while_exact);
    tcase_add_test(tc, comes_back_when_redis_does);
    tcase_add_test(tc, prepared_answers_go_with_their_copy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
