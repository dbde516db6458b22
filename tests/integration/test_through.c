/* Integration tests of write-through (src/cache/through.c) and the resourceVersion guard it
 * shares with the informers' scripts, on a private redis-server: a write-through stores an
 * object the watch has not reached and nothing once it has; the watch never replaces a newer
 * object a write-through stored, nor deletes it on an older DELETED event; fg:rv moves only
 * with the watch. The watch's side is the informer's own call (EVALSHA of the embedded script
 * with the informer's arguments). */
#include "fleetgate/cache.h"

#include "testmain.h"
#include "testredis.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char fg_cache_upsert_lua[], fg_cache_delete_lua[], fg_insight_history_lua[],
    fg_insight_change_lua[];

static tr_redis_t srv;
static fg_redis_t *r;

static void setup(void) {
    ck_assert_int_eq(tr_redis_start(&srv), 0);
    ck_assert_int_eq(fg_redis_new(&r, srv.url, 2, 1000), FG_OK);
}

static void teardown(void) {
    fg_redis_free(r);
    tr_redis_stop(&srv);
}

/* A simplified app as translate makes it: identity first; a label named "version" after it
 * (which the guard must not read). */
static char *app_json(const char *version) {
    return fg_xasprintf("{\"name\":\"web\",\"project\":\"shop\",\"cluster\":\"east\",\"zone\":"
                        "\"z1\",\"uid\":\"u-1\",\"version\":\"%s\",\"labels\":{\"version\":"
                        "\"99999\"}}",
                        version);
}

/* The version the cache holds for shop/web in east ("" when absent). */
static void cached_version(char *out, size_t n) {
    const char *argv[] = {"HGET", "fg:o:app:east:shop", "web"};
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, 3, argv, &rep, NULL, 0), FG_OK);
    size_t len;
    const char *s = fg_redis_reply_str(rep, &len);
    out[0] = '\0';
    if (s) {
        const char *v = strstr(s, "\"version\":\"");
        ck_assert_ptr_nonnull(v);
        v += 11;
        snprintf(out, n, "%.*s", (int)strcspn(v, "\""), v);
    }
    fg_redis_reply_free(rep);
}

static void get_string(const char *key, char *out, size_t n) {
    const char *argv[] = {"GET", key};
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, 2, argv, &rep, NULL, 0), FG_OK);
    size_t len;
    const char *s = fg_redis_reply_str(rep, &len);
    snprintf(out, n, "%.*s", s ? (int)len : 0, s ? s : "");
    fg_redis_reply_free(rep);
}

static int64_t int_of(size_t argc, const char *const *argv) {
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, argc, argv, &rep, NULL, 0), FG_OK);
    int64_t v = fg_redis_reply_int(rep);
    if (fg_redis_reply_type(rep) == FG_REDIS_STRING) {
        size_t len;
        const char *s = fg_redis_reply_str(rep, &len);
        char buf[32];
        snprintf(buf, sizeof buf, "%.*s", (int)len, s);
        v = strtoll(buf, NULL, 10);
    }
    fg_redis_reply_free(rep);
    return v;
}

/* The cache's half of a watch event as the informer applies it (src/cache/informer.c
 * apply_event): lua is cache_upsert.lua or cache_delete.lua. */
static void watch_cache(const char *lua, const char *obj, const char *version) {
    const char *argv[] = {"EVAL",
                          lua,
                          "6",
                          "fg:o:app:east:shop",
                          "fg:i:app:east:shop",
                          "fg:s:app:east",
                          "fg:rv:east:deployments",
                          "fg:sync:east:deployments",
                          "fg:pre:app:east:shop",
                          "web",
                          obj,
                          "shop",
                          version,
                          "1000",
                          "",
                          "east",
                          "app"};
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, sizeof argv / sizeof argv[0], argv, &rep, NULL, 0), FG_OK);
    ck_assert_int_ne(fg_redis_reply_type(rep), FG_REDIS_ERROR);
    fg_redis_reply_free(rep);
}

/* A watch event as the informer applies it (src/cache/informer.c apply_event). */
static void watch(bool deleted, const char *version) {
    char *obj = deleted ? fg_xstrdup("") : app_json(version);
    watch_cache(deleted ? fg_cache_delete_lua : fg_cache_upsert_lua, obj, version);
    free(obj);
}

static bool through(const char *version) {
    char *obj = app_json(version);
    fg_cache_through_t it = {.kind = "app",
                             .cluster = "east",
                             .resource = "deployments",
                             .scope = "shop",
                             .name = "web",
                             .object = obj,
                             .rv = version};
    bool shown = false;
    ck_assert_int_eq(fg_cache_write_through(r, &it, 1, &shown), FG_OK);
    free(obj);
    return shown;
}

static void set_watch_rv(const char *rv) {
    const char *argv[] = {"HSET", "fg:sync:east:deployments", "state", "Synced", "objects", "0"};
    ck_assert_int_eq(fg_redis_command(r, 6, argv), FG_OK);
    const char *set[] = {"SET", "fg:rv:east:deployments", rv};
    ck_assert_int_eq(fg_redis_command(r, 3, set), FG_OK);
}

START_TEST(through_stores_what_the_watch_has_not_reached) {
    char v[32], rv[32];
    set_watch_rv("10");
    ck_assert(through("12"));
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "12");
    get_string("fg:rv:east:deployments", rv, sizeof rv);
    ck_assert_str_eq(rv, "10"); /* the watch's resume point is the watch's */
    const char *zs[] = {"ZSCORE", "fg:i:app:east:shop", "web"},
               *sm[] = {"SISMEMBER", "fg:s:app:east", "shop"},
               *ob[] = {"HGET", "fg:sync:east:deployments", "objects"};
    ck_assert_int_eq(int_of(3, zs), 0);
    ck_assert_int_eq(int_of(3, sm), 1);
    ck_assert_int_eq(int_of(3, ob), 1);
    /* the watch then brings the same version: one object still */
    watch(false, "12");
    ck_assert_int_eq(int_of(3, ob), 1);
    get_string("fg:rv:east:deployments", rv, sizeof rv);
    ck_assert_str_eq(rv, "12");
}
END_TEST

START_TEST(through_does_nothing_once_the_watch_reached_it) {
    char v[32];
    set_watch_rv("15"); /* e.g. the object was created at 12 and deleted at 15 */
    ck_assert(through("12"));
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, ""); /* not brought back */
    set_watch_rv("12");
    ck_assert(through("12"));
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "");
}
END_TEST

START_TEST(through_never_replaces_a_newer_object) {
    char v[32];
    set_watch_rv("10");
    ck_assert(through("20"));
    ck_assert(through("12")); /* an older write answered later */
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "20");
    ck_assert(through("100")); /* longer is larger: compared as numbers, not text */
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "100");
}
END_TEST

START_TEST(watch_keeps_a_newer_written_through_object) {
    char v[32], rv[32];
    set_watch_rv("10");
    ck_assert(through("12"));
    watch(false, "11"); /* an older change of the same object, still on its way */
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "12");
    get_string("fg:rv:east:deployments", rv, sizeof rv);
    ck_assert_str_eq(rv, "11"); /* the watch moves on */
    watch(true, "11");          /* an older deletion (the object was made again at 12) */
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "12");
    watch(false, "13");
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "13");
    watch(true, "14");
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "");
}
END_TEST

START_TEST(versions_that_are_not_numbers_are_not_written_through) {
    char v[32];
    set_watch_rv("10");
    ck_assert(!through("abc"));
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "");
    /* the watch stores what it gets, as before */
    watch(false, "x1");
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "x1");
}
END_TEST

/* Pod shop/web-1 of app web at version 5, as translate makes it. */
static const char *const pod5 = "{\"name\":\"web-1\",\"project\":\"shop\",\"cluster\":\"east\","
                                "\"zone\":\"z1\",\"uid\":\"p\",\"version\":\"5\",\"app\":\"web\"}";

/* Writes pod5 through, the pods' watch being at version 1. */
static void through_pod5(void) {
    set_watch_rv("1");
    const char *setrv[] = {"SET", "fg:rv:east:pods", "1"};
    ck_assert_int_eq(fg_redis_command(r, 3, setrv), FG_OK);
    fg_cache_through_t it = {.kind = "pod",
                             .cluster = "east",
                             .resource = "pods",
                             .scope = "shop",
                             .name = "web-1",
                             .app = "web",
                             .object = pod5,
                             .rv = "5"};
    bool shown = false;
    ck_assert_int_eq(fg_cache_write_through(r, &it, 1, &shown), FG_OK);
    ck_assert(shown);
}

START_TEST(pods_are_filed_under_their_app) {
    through_pod5();
    const char *a[] = {"SISMEMBER", "fg:a:east:shop:web", "web-1"},
               *ax[] = {"SISMEMBER", "fg:ax:east", "shop:web"};
    ck_assert_int_eq(int_of(3, a), 1);
    ck_assert_int_eq(int_of(3, ax), 1);
}
END_TEST

START_TEST(scripts_flushed_are_loaded_again) {
    const char *flush[] = {"SCRIPT", "FLUSH"};
    set_watch_rv("1");
    ck_assert(through("2"));
    ck_assert_int_eq(fg_redis_command(r, 2, flush), FG_OK);
    ck_assert(through("3"));
    char v[32];
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "3");
}
END_TEST

/* An app of desired replicas d, as translate makes it (identity first). */
static char *app_replicas_json(const char *version, int d) {
    return fg_xasprintf("{\"name\":\"web\",\"project\":\"shop\",\"cluster\":\"east\",\"zone\":"
                        "\"z1\",\"uid\":\"u-1\",\"version\":\"%s\",\"replicas\":{\"desired\":%d},"
                        "\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1\"}]}",
                        version, d);
}

/* Runs one script (EVAL) with its arguments; answers its integer reply (a nil: -1). */
static int64_t eval(size_t argc, const char *const *argv) {
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, argc, argv, &rep, NULL, 0), FG_OK);
    ck_assert_int_ne(fg_redis_reply_type(rep), FG_REDIS_ERROR);
    int64_t v = fg_redis_reply_type(rep) == FG_REDIS_INTEGER ? fg_redis_reply_int(rep) : -1;
    fg_redis_reply_free(rep);
    return v;
}

/* A watch event of shop/web d replicas as the informer applies it (apply_event): the change
 * stream's comparison, the history's, then the upsert, each with the informer's arguments. */
static void watch_app(const char *version, int d) {
    char *obj = app_replicas_json(version, d);
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)fg_wall_ms()); /* the history's retention */
    const char *chg[] = {"EVAL",
                         fg_insight_change_lua,
                         "4",
                         "fg:o:app:east:shop",
                         "fg:chg:shop",
                         "fg:pre:app:east:shop",
                         "fg:chgv:app:east:shop:web",
                         "web",
                         obj,
                         "App",
                         "east",
                         version,
                         "2026-11-24T00:00:00Z",
                         "1000",
                         "app",
                         "watch"};
    const char *hist[] = {"EVAL",
                          fg_insight_history_lua,
                          "4",
                          "fg:o:app:east:shop",
                          "fg:hist:shop",
                          "fg:histx:shop",
                          "fg:pre:app:east:shop",
                          "web",
                          obj,
                          "App",
                          "east",
                          version,
                          now,
                          "2592000000",
                          "10000",
                          "0"};
    eval(sizeof chg / sizeof chg[0], chg);
    eval(sizeof hist / sizeof hist[0], hist);
    watch_cache(fg_cache_upsert_lua, obj, version);
    free(obj);
}

static bool through_app(const char *version, int d) {
    char *obj = app_replicas_json(version, d);
    fg_cache_through_t it = {.kind = "app",
                             .cluster = "east",
                             .resource = "deployments",
                             .scope = "shop",
                             .name = "web",
                             .object = obj,
                             .rv = version};
    bool shown = false;
    ck_assert_int_eq(fg_cache_write_through(r, &it, 1, &shown), FG_OK);
    free(obj);
    return shown;
}

/* The summaries of shop's history entries, sorted, joined by '|'. */
static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void history_summaries(char *out, size_t n) {
    const char *hv[] = {"HVALS", "fg:hist:shop"};
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, 2, hv, &rep, NULL, 0), FG_OK);
    size_t k = fg_redis_reply_len(rep), used = 0;
    char **sums = fg_xcalloc(k + 1, sizeof *sums);
    for (size_t i = 0; i < k; i++) {
        size_t len;
        const char *s = fg_redis_reply_str(fg_redis_reply_at(rep, i), &len);
        json_t *e = json_loadb(s, len, 0, NULL);
        ck_assert_ptr_nonnull(e);
        sums[i] = fg_xstrdup(json_string_value(json_object_get(e, "summary")));
        json_decref(e);
    }
    qsort(sums, k, sizeof *sums, cmp_str);
    out[0] = '\0';
    for (size_t i = 0; i < k; i++) {
        if (used < n)
            used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "|" : "", sums[i]);
        free(sums[i]);
    }
    free(sums);
    fg_redis_reply_free(rep);
}

/* A write's changes are the watch's to record: a write-through stores the written version and
 * keeps what it replaced, and the watch bringing that version compares from there. One history
 * entry and one change stream entry per change, whichever writer came first, also for two
 * writes before the watch brought the first; a replay or an older event adds nothing. */
START_TEST(watch_records_what_a_write_changed_once) {
    const char *hl[] = {"HLEN", "fg:hist:shop"}, *zl[] = {"ZCARD", "fg:histx:shop"},
               *xl[] = {"XLEN", "fg:chg:shop"}, *pl[] = {"HLEN", "fg:pre:app:east:shop"};
    char v[32], rv[32];
    set_watch_rv("10");
    ck_assert(through_app("11", 3)); /* created through fleetgate */
    ck_assert_int_eq(int_of(2, hl), 0);
    ck_assert_int_eq(int_of(2, xl), 0);
    ck_assert_int_eq(int_of(2, pl), 1);
    watch_app("11", 3); /* the watch brings it: Created, streamed */
    ck_assert_int_eq(int_of(2, hl), 1);
    ck_assert_int_eq(int_of(2, zl), 1);
    ck_assert_int_eq(int_of(2, xl), 1);
    ck_assert_int_eq(int_of(2, pl), 0);
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "11");
    get_string("fg:rv:east:deployments", rv, sizeof rv);
    ck_assert_str_eq(rv, "11");
    ck_assert(through_app("12", 4)); /* a scale through fleetgate: ReplicasChanged */
    ck_assert_int_eq(int_of(2, hl), 1);
    watch_app("12", 4);
    watch_app("12", 4); /* a replay */
    ck_assert_int_eq(int_of(2, hl), 2);
    ck_assert_int_eq(int_of(2, xl), 2);
    watch_app("13", 5); /* a change made straight on the cluster: the watch records it */
    ck_assert_int_eq(int_of(2, hl), 3);
    ck_assert_int_eq(int_of(2, xl), 3);
    watch_app("12", 4); /* an older event: nothing, and the newer object stays */
    ck_assert_int_eq(int_of(2, hl), 3);
    ck_assert_int_eq(int_of(2, xl), 3);
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "13");
    /* two writes before the watch brings the first: each change once, in order */
    ck_assert(through_app("14", 6));
    ck_assert(through_app("15", 7));
    watch_app("14", 6);
    ck_assert_int_eq(int_of(2, hl), 4);
    ck_assert_int_eq(int_of(2, xl), 4);
    cached_version(v, sizeof v);
    ck_assert_str_eq(v, "15");
    watch_app("14", 6); /* a replay while the newer write waits */
    watch_app("15", 7);
    watch_app("15", 7);
    ck_assert_int_eq(int_of(2, hl), 5);
    ck_assert_int_eq(int_of(2, xl), 5);
    ck_assert_int_eq(int_of(2, pl), 0);
    char summaries[256];
    history_summaries(summaries, sizeof summaries);
    ck_assert_str_eq(summaries, "App web created (nginx:1)|replicas 3 → 4|replicas 4 → 5|"
                                "replicas 5 → 6|replicas 6 → 7");
}
END_TEST

/* A kept object the watch never came back for (a relist passed it, or the object was deleted)
 * is stale: the next write-through keeps what it replaces instead, so the watch compares from
 * the right object. */
START_TEST(stale_kept_object_is_replaced) {
    const char *hl[] = {"HLEN", "fg:hist:shop"};
    set_watch_rv("10");
    ck_assert(through_app("11", 3));
    set_watch_rv("12");              /* a relist listed version 11 and passed it */
    ck_assert(through_app("13", 8)); /* keeps 11, not the stale "nothing before" */
    watch_app("13", 8);
    char summaries[256];
    history_summaries(summaries, sizeof summaries);
    ck_assert_str_eq(summaries, "replicas 3 → 8");
    ck_assert_int_eq(int_of(2, hl), 1);
}
END_TEST

/* The change stream's app field ("a") of each entry of shop's stream, oldest first, joined by
 * commas. */
static void stream_apps(char *out, size_t n) {
    const char *xr[] = {"XRANGE", "fg:chg:shop", "-", "+"};
    fg_redis_reply_t *rep = NULL;
    ck_assert_int_eq(fg_redis_query(r, 4, xr, &rep, NULL, 0), FG_OK);
    size_t used = 0;
    out[0] = '\0';
    for (size_t e = 0; e < fg_redis_reply_len(rep); e++) {
        const fg_redis_reply_t *fields = fg_redis_reply_at(fg_redis_reply_at(rep, e), 1);
        for (size_t i = 0; i + 1 < fg_redis_reply_len(fields); i += 2) {
            size_t len, alen;
            const char *k = fg_redis_reply_str(fg_redis_reply_at(fields, i), &len);
            const char *a = fg_redis_reply_str(fg_redis_reply_at(fields, i + 1), &alen);
            if (len == 1 && k[0] == 'a' && used < n)
                used +=
                    (size_t)snprintf(out + used, n - used, "%s%.*s", e ? "," : "", (int)alen, a);
        }
    }
    fg_redis_reply_free(rep);
}

/* The change stream's comparison of pod shop/web-1 as the informer sends it (obj: its JSON,
 * "" when deleted), with its app when app is not NULL, else as a caller that does not give it
 * (ARGV without it); then the cache's write of the same event. */
static void watch_pod_change(const char *version, const char *obj, const char *app) {
    const char *chg[] = {"EVAL",
                         fg_insight_change_lua,
                         "4",
                         "fg:o:pod:east:shop",
                         "fg:chg:shop",
                         "fg:pre:pod:east:shop",
                         "fg:chgv:pod:east:shop:web-1",
                         "web-1",
                         obj,
                         "Pod",
                         "east",
                         version,
                         "2026-11-24T00:00:00Z",
                         "1000",
                         "pod",
                         "watch",
                         app};
    eval(sizeof chg / sizeof chg[0] - (app == NULL), chg);
    const char *up[] = {"EVAL",
                        obj[0] ? fg_cache_upsert_lua : fg_cache_delete_lua,
                        "6",
                        "fg:o:pod:east:shop",
                        "fg:i:pod:east:shop",
                        "fg:s:pod:east",
                        "fg:rv:east:pods",
                        "fg:sync:east:pods",
                        "fg:pre:pod:east:shop",
                        "web-1",
                        obj,
                        "shop",
                        version,
                        "1000",
                        "web",
                        "east",
                        "pod"};
    eval(sizeof up / sizeof up[0], up);
}

/* A pod's change names its app: given by the caller (a watch event of a pod), or read from the
 * object (a caller that does not give it; a deletion, from the cached object). Its version
 * written through first is streamed when the watch brings it, from what the write replaced. */
START_TEST(pod_change_names_its_app) {
    const char *pod6 = "{\"name\":\"web-1\",\"project\":\"shop\",\"cluster\":\"east\",\"zone\":"
                       "\"z1\",\"uid\":\"p\",\"version\":\"6\",\"app\":\"web\",\"ready\":true}";
    through_pod5();
    char apps[64];
    stream_apps(apps, sizeof apps);
    ck_assert_str_eq(apps, ""); /* the watch streams it */
    watch_pod_change("5", pod5, "web");
    watch_pod_change("6", pod6, NULL);
    watch_pod_change("7", "", NULL); /* its deletion: the app from the cached object */
    stream_apps(apps, sizeof apps);
    ck_assert_str_eq(apps, "web,web,web");
}
END_TEST

/* A watch event of pod shop/web-1 (obj: its JSON, "" when deleted) as the informer applies it:
 * the history's comparison, then the cache's write. Answers the entries the history added. */
static int64_t watch_pod(const char *version, const char *obj) {
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)fg_wall_ms());
    const char *hist[] = {"EVAL",
                          fg_insight_history_lua,
                          "4",
                          "fg:o:pod:east:shop",
                          "fg:hist:shop",
                          "fg:histx:shop",
                          "fg:pre:pod:east:shop",
                          "web-1",
                          obj,
                          "Pod",
                          "east",
                          version,
                          now,
                          "2592000000",
                          "10000",
                          "0"};
    int64_t added = eval(sizeof hist / sizeof hist[0], hist);
    const char *up[] = {"EVAL",
                        obj[0] ? fg_cache_upsert_lua : fg_cache_delete_lua,
                        "6",
                        "fg:o:pod:east:shop",
                        "fg:i:pod:east:shop",
                        "fg:s:pod:east",
                        "fg:rv:east:pods",
                        "fg:sync:east:pods",
                        "fg:pre:pod:east:shop",
                        "web-1",
                        obj,
                        "shop",
                        version,
                        "1000",
                        "web",
                        "east",
                        "pod"};
    eval(sizeof up / sizeof up[0], up);
    return added;
}

/* Pod shop/web-1 at version with one container of the members c. */
static char *pod_json(const char *version, const char *c) {
    return fg_xasprintf("{\"name\":\"web-1\",\"project\":\"shop\",\"cluster\":\"east\","
                        "\"zone\":\"z1\",\"uid\":\"p\",\"version\":\"%s\",\"app\":\"web\","
                        "\"containers\":[{\"name\":\"c\",%s}]}",
                        version, c);
}

/* A pod's history comes from its new state only: its creation, start and deletion add
 * nothing (answered without decoding), a crash loop adds its entry once. */
START_TEST(pod_history_from_its_state_only) {
    char *pending = pod_json("5", "\"state\":\"waiting\",\"restarts\":0"),
         *running = pod_json("6", "\"state\":\"running\",\"restarts\":0"),
         *looping = pod_json("7", "\"state\":\"waiting\",\"reason\":\"CrashLoopBackOff\","
                                  "\"restarts\":2,\"lastTermination\":{\"exitCode\":1}");
    const char *hl[] = {"HLEN", "fg:hist:shop"};
    ck_assert_int_eq(watch_pod("5", pending), 0);
    ck_assert_int_eq(watch_pod("6", running), 0);
    ck_assert_int_eq(watch_pod("7", looping), 1);
    ck_assert_int_eq(watch_pod("7", looping), 0); /* a replay */
    ck_assert_int_eq(watch_pod("8", ""), 0);
    ck_assert_int_eq(int_of(2, hl), 1);
    free(pending);
    free(running);
    free(looping);
}
END_TEST

START_TEST(redis_gone_is_eio_and_nothing_shown) {
    tr_redis_stop(&srv);
    fg_cache_through_t it = {.kind = "app",
                             .cluster = "east",
                             .resource = "deployments",
                             .scope = "shop",
                             .name = "web",
                             .object = "{}",
                             .rv = "1"};
    bool shown = true;
    ck_assert_int_eq(fg_cache_write_through(r, &it, 1, &shown), FG_EIO);
    ck_assert(!shown);
    ck_assert_int_eq(tr_redis_start(&srv), 0); /* for teardown */
}
END_TEST

static Suite *through_suite(void) {
    Suite *s = suite_create("through");
    TCase *tc = tcase_create("guard");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, through_stores_what_the_watch_has_not_reached);
    tcase_add_test(tc, through_does_nothing_once_the_watch_reached_it);
    tcase_add_test(tc, through_never_replaces_a_newer_object);
    tcase_add_test(tc, watch_keeps_a_newer_written_through_object);
    tcase_add_test(tc, versions_that_are_not_numbers_are_not_written_through);
    tcase_add_test(tc, pods_are_filed_under_their_app);
    tcase_add_test(tc, scripts_flushed_are_loaded_again);
    tcase_add_test(tc, redis_gone_is_eio_and_nothing_shown);
    tcase_add_test(tc, watch_records_what_a_write_changed_once);
    tcase_add_test(tc, stale_kept_object_is_replaced);
    tcase_add_test(tc, pod_change_names_its_app);
    tcase_add_test(tc, pod_history_from_its_state_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(through_suite());
}
