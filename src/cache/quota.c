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

/* The script's arguments (quota_reserve.lua's ARGV[1..12]), pointing into q's own text. */
#define QUOTA_ARGC 12
typedef struct {
    char num[9][24];
    fg_buf_t fresh, uses;
    const char *args[QUOTA_ARGC];
    size_t n;
} quota_args_t;

static void quota_args(quota_args_t *q, const char *app, const int64_t want[3],
                       const int64_t limit[3], int64_t ttl_ms, const fg_cache_quota_use_t *fresh,
                       size_t nfresh, const fg_cache_quota_use_t *uses, size_t nuses,
                       int64_t usage_keep_ms) {
    int64_t head[] = {fg_wall_ms(), ttl_ms};
    q->n = 0;
    for (size_t i = 0; i < 2; i++) {
        snprintf(q->num[i], sizeof q->num[i], "%lld", (long long)head[i]);
        q->args[q->n++] = q->num[i];
    }
    q->args[q->n++] = app;
    for (size_t i = 0; i < 6; i++) {
        snprintf(q->num[2 + i], sizeof q->num[0], "%lld",
                 (long long)(i < 3 ? want[i] : limit[i - 3]));
        q->args[q->n++] = q->num[2 + i];
    }
    uses_text(&q->fresh, fresh, nfresh);
    uses_text(&q->uses, uses, uses ? nuses : 0);
    q->args[q->n++] = q->fresh.data ? q->fresh.data : "";
    q->args[q->n++] = uses ? (q->uses.data ? q->uses.data : "") : "kept";
    snprintf(q->num[8], sizeof q->num[8], "%lld", (long long)(uses ? usage_keep_ms : 0));
    q->args[q->n++] = q->num[8];
}

static void quota_args_free(quota_args_t *q) {
    fg_buf_free(&q->fresh);
    fg_buf_free(&q->uses);
}

/* The script's answer {1}, {0, resource, would-be, limit}, {-1} or {-2} as a verdict. */
static void verdict_of(const int64_t *v, size_t n, fg_cache_quota_verdict_t *out) {
    memset(out, 0, sizeof *out);
    out->need_uses = n >= 1 && v[0] < 0;
    out->reserved = n >= 1 && v[0] == 1;
    if (!out->reserved && n == 4) {
        out->resource = (int)v[1] - 1;
        out->would_be = v[2];
        out->limit = v[3];
    }
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
    quota_args_t q;
    quota_args(&q, app, want, limit, ttl_ms, fresh, nfresh, uses, nuses, usage_keep_ms);
    int64_t v[4] = {0};
    size_t n = 0;
    int rc = fg_redis_eval_ints(r, &script, 2, keys, q.n, q.args, v, 4, &n);
    quota_args_free(&q);
    if (rc == FG_OK)
        verdict_of(v, n, out);
    return rc;
}

size_t fg_cache_quota_reserve_add(fg_redis_batch_t *b, const char *project, const char *tier,
                                  const char *app, const int64_t want[3], const int64_t limit[3],
                                  int64_t ttl_ms, const fg_cache_quota_guard_t *g) {
    pthread_once(&script_once, script_init);
    size_t nc = g->n < FG_CACHE_QUOTA_MAX_CLUSTERS ? g->n : FG_CACHE_QUOTA_MAX_CLUSTERS;
    fg_cache_key_t *k = fg_xcalloc(2 + 3 * nc, sizeof *k);
    const char **argv = fg_xcalloc(3 + 2 + 3 * nc + QUOTA_ARGC + 2 + nc, sizeof *argv);
    char nkeys[24];
    size_t a = 0;
    snprintf(nkeys, sizeof nkeys, "%zu", 2 + 3 * nc);
    argv[a++] = "EVALSHA";
    argv[a++] = script.sha1;
    argv[a++] = nkeys;
    argv[a++] = fg_cache_key_quota(&k[0], project, tier);
    argv[a++] = fg_cache_key_quota_usage(&k[1], project, tier);
    for (size_t c = 0; c < nc; c++) {
        argv[a++] = fg_cache_key_objects(&k[2 + 3 * c], "project", g->clusters[c], "_");
        argv[a++] = fg_cache_key_objects(&k[3 + 3 * c], "app", g->clusters[c], project);
        argv[a++] = fg_cache_key_objects(&k[4 + 3 * c], "jobset", g->clusters[c], project);
    }
    quota_args_t q;
    quota_args(&q, app, want, limit, ttl_ms, NULL, 0, NULL, 0, 0);
    for (size_t i = 0; i < q.n; i++)
        argv[a++] = q.args[i];
    argv[a++] = project;
    argv[a++] = app;
    for (size_t c = 0; c < nc; c++)
        argv[a++] = g->versions[c];
    size_t at = fg_redis_batch_add(b, a, argv, NULL); /* copies the arguments */
    quota_args_free(&q);
    free(argv);
    free(k);
    return at;
}

int fg_cache_quota_reserve_read(const fg_redis_batch_t *b, size_t i,
                                fg_cache_quota_verdict_t *out) {
    const fg_redis_reply_t *rep = fg_redis_batch_reply(b, i);
    int64_t v[4] = {0};
    size_t n = fg_redis_reply_len(rep);
    if (fg_redis_reply_type(rep) != FG_REDIS_ARRAY || n < 1 || n > 4)
        return FG_EIO; /* an error (NOSCRIPT on a Redis that never ran it) */
    for (size_t j = 0; j < n; j++)
        v[j] = fg_redis_reply_int(fg_redis_reply_at(rep, j));
    verdict_of(v, n, out);
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
