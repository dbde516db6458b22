/* cache/quota.c: tier quota reservations in Redis (cache/quota_reserve.lua), so that fleetgate
 * replicas sharing one Redis hold a project's quota exactly: the check of usage plus every live
 * reservation against the limit and the new reservation are one script. A reservation lives for
 * ttl: long enough for the write to land in the cache (usage is read from it), short enough that
 * one whose writer died does not hold the quota for long. */
#include "fleetgate/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FG_EMBED_FILE(fg_quota_reserve_lua, "cache/quota_reserve.lua");

static fg_redis_script_t script;
static pthread_once_t script_once = PTHREAD_ONCE_INIT;

static void script_init(void) {
    fg_redis_script_init(&script, fg_quota_reserve_lua);
}

int fg_cache_quota_reserve(fg_redis_t *r, const char *project, const char *tier, const char *app,
                           const int64_t want[3], const int64_t limit[3], int64_t ttl_ms,
                           const fg_cache_quota_use_t *uses, size_t nuses,
                           fg_cache_quota_verdict_t *out) {
    pthread_once(&script_once, script_init);
    fg_cache_key_t k;
    const char *keys[] = {fg_cache_key_quota(&k, project, tier)};
    char num[8][24];
    const char *args[10];
    size_t a = 0;
    int64_t head[] = {fg_wall_ms(), ttl_ms};
    for (size_t i = 0; i < 2; i++) {
        snprintf(num[i], sizeof num[i], "%lld", (long long)head[i]);
        args[a++] = num[i];
    }
    args[a++] = app;
    for (size_t i = 0; i < 6; i++) {
        snprintf(num[2 + i], sizeof num[0], "%lld", (long long)(i < 3 ? want[i] : limit[i - 3]));
        args[a++] = num[2 + i];
    }
    /* the apps in one argument: a project may hold thousands */
    fg_buf_t uses_text;
    fg_buf_init(&uses_text, (size_t)1 << 26);
    for (size_t u = 0; u < nuses; u++)
        fg_buf_appendf(&uses_text, "%s%s,%lld,%lld,%lld", u ? ";" : "", uses[u].app,
                       (long long)uses[u].amount[0], (long long)uses[u].amount[1],
                       (long long)uses[u].amount[2]);
    args[a++] = uses_text.data ? uses_text.data : "";
    int64_t v[4] = {0};
    size_t n = 0;
    int rc = fg_redis_eval_ints(r, &script, 1, keys, a, args, v, 4, &n);
    fg_buf_free(&uses_text);
    if (rc != FG_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->reserved = n >= 1 && v[0] == 1;
    if (!out->reserved && n == 4) {
        out->resource = (int)v[1] - 1;
        out->would_be = v[2];
        out->limit = v[3];
    }
    return FG_OK;
}

int fg_cache_quota_release(fg_redis_t *r, const char *project, const char *tier, const char *app) {
    fg_cache_key_t k;
    const char *argv[] = {"HDEL", fg_cache_key_quota(&k, project, tier), app};
    return fg_redis_command(r, 3, argv);
}
