/* cache/idem.c: Idempotency-Key records in Redis (cache/idem_begin.lua), shared by every
 * replica: the first request with a key makes a pending record atomically, runs, and stores its
 * answer; a retry on any replica finds the answer and gets it again without running. */
#include "fleetgate/cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FG_EMBED_FILE(fg_idem_begin_lua, "cache/idem_begin.lua");

static fg_redis_script_t script;
static pthread_once_t script_once = PTHREAD_ONCE_INIT;

static void script_init(void) {
    fg_redis_script_init(&script, fg_idem_begin_lua);
}

static const fg_cache_idem_state_t states[] = {FG_IDEM_NEW, FG_IDEM_PENDING, FG_IDEM_MISMATCH,
                                               FG_IDEM_DONE};

static char *reply_dup(const fg_redis_reply_t *rep) {
    size_t len;
    const char *s = fg_redis_reply_str(rep, &len);
    return s ? fg_xstrndup(s, len) : NULL;
}

int fg_cache_idem_begin(fg_redis_t *r, const char *id, const char *fingerprint,
                        int64_t pending_ttl_ms, fg_cache_idem_t *out) {
    pthread_once(&script_once, script_init);
    memset(out, 0, sizeof *out);
    fg_cache_key_t k;
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)pending_ttl_ms);
    const char *keys[] = {fg_cache_key_idem(&k, id)}, *args[] = {fingerprint, ttl};
    int64_t v = -1;
    size_t n = 0;
    int rc = fg_redis_eval_ints(r, &script, 1, keys, 2, args, &v, 1, &n);
    if (rc != FG_OK)
        return rc;
    if (n != 1 || v < 0 || v > 3)
        return FG_EINVAL;
    out->state = states[v];
    if (out->state != FG_IDEM_DONE)
        return FG_OK;
    const char *argv[] = {"HMGET", k.s, "status", "body", "etag", "location"};
    fg_redis_reply_t *rep = NULL;
    rc = fg_redis_query(r, 6, argv, &rep, NULL, 0);
    if (rc != FG_OK)
        return rc;
    char *status = reply_dup(fg_redis_reply_at(rep, 0));
    int64_t st = 0;
    if (status == NULL || fg_parse_int64(status, strlen(status), 100, 599, &st) != FG_OK)
        rc = FG_EINVAL;
    out->status = (unsigned)st;
    out->body = reply_dup(fg_redis_reply_at(rep, 1));
    out->etag = reply_dup(fg_redis_reply_at(rep, 2));
    out->location = reply_dup(fg_redis_reply_at(rep, 3));
    free(status);
    fg_redis_reply_free(rep);
    return rc;
}

void fg_cache_idem_clear(fg_cache_idem_t *s) {
    free(s->body);
    free(s->etag);
    free(s->location);
    memset(s, 0, sizeof *s);
}

int fg_cache_idem_finish(fg_redis_t *r, const char *id, unsigned status, const char *body,
                         const char *etag, const char *location, int64_t ttl_ms) {
    fg_cache_key_t k;
    char st[8], ttl[24];
    snprintf(st, sizeof st, "%u", status);
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    fg_redis_batch_t *b = fg_redis_batch_new();
    fg_redis_batch_addv(b, "HSET", fg_cache_key_idem(&k, id), "state", "done", "status", st, "body",
                        body ? body : "", "etag", etag ? etag : "", "location",
                        location ? location : "", NULL);
    fg_redis_batch_addv(b, "PEXPIRE", k.s, ttl, NULL);
    int rc = fg_redis_batch_run(r, b, NULL, 0);
    fg_redis_batch_free(b);
    return rc;
}

int fg_cache_idem_abandon(fg_redis_t *r, const char *id) {
    fg_cache_key_t k;
    const char *argv[] = {"DEL", fg_cache_key_idem(&k, id)};
    return fg_redis_command(r, 2, argv);
}
