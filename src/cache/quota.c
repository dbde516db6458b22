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
FG_EMBED_FILE(fg_quota_forget_lua, "cache/quota_forget.lua");

static fg_redis_script_t script, forget_script;
static pthread_once_t script_once = PTHREAD_ONCE_INIT;

static void script_init(void) {
    fg_redis_script_init(&script, fg_quota_reserve_lua);
    fg_redis_script_init(&forget_script, fg_quota_forget_lua);
}

/* uses as one argument "name,cpu,mem,pods;...": a project may hold thousands. */
static void uses_text(fg_buf_t *b, const fg_cache_quota_use_t *uses, size_t n) {
    fg_buf_init(b, (size_t)1 << 26);
    for (size_t u = 0; u < n; u++)
        fg_buf_appendf(b, "%s%s,%lld,%lld,%lld", u ? ";" : "", uses[u].app,
                       (long long)uses[u].amount[0], (long long)uses[u].amount[1],
                       (long long)uses[u].amount[2]);
}

int fg_cache_quota_reserve(fg_redis_t *r, const char *project, const char *tier, const char *app,
                           const int64_t want[3], const int64_t limit[3], int64_t ttl_ms,
                           const fg_cache_quota_use_t *fresh, size_t nfresh,
                           const fg_cache_quota_use_t *uses, size_t nuses, int64_t usage_keep_ms,
                           fg_cache_quota_verdict_t *out) {
    pthread_once(&script_once, script_init);
    fg_cache_key_t k, ku;
    const char *keys[] = {fg_cache_key_quota(&k, project, tier),
                          fg_cache_key_quota_usage(&ku, project, tier)};
    char num[9][24];
    const char *args[12];
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
    fg_buf_t ft, ut;
    uses_text(&ft, fresh, nfresh);
    uses_text(&ut, uses, uses ? nuses : 0);
    args[a++] = ft.data ? ft.data : "";
    if (uses) {
        args[a++] = ut.data ? ut.data : "";
        snprintf(num[8], sizeof num[8], "%lld", (long long)usage_keep_ms);
        args[a++] = num[8];
    }
    int64_t v[4] = {0};
    size_t n = 0;
    int rc = fg_redis_eval_ints(r, &script, 2, keys, a, args, v, 4, &n);
    fg_buf_free(&ft);
    fg_buf_free(&ut);
    if (rc != FG_OK)
        return rc;
    memset(out, 0, sizeof *out);
    out->need_uses = n >= 1 && v[0] == -1;
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

int fg_cache_quota_forget(fg_redis_t *r, const char *project, const char *tier, const char *name,
                          int64_t ttl_ms) {
    pthread_once(&script_once, script_init);
    fg_cache_key_t k;
    const char *keys[] = {fg_cache_key_quota(&k, project, tier)};
    char now[24], ttl[24];
    snprintf(now, sizeof now, "%lld", (long long)fg_wall_ms());
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    const char *args[] = {now, ttl, name};
    int64_t v[1] = {0};
    size_t n = 0;
    return fg_redis_eval_ints(r, &forget_script, 1, keys, 3, args, v, 1, &n);
}
