/* cache/lease.c: a lease in Redis held by one replica at a time (cache/cache_lease.lua), for
 * work that must run in exactly one replica besides the informers (fed/'s reconciler). */
#include "fleetgate/cache.h"

#include <stdio.h>

FG_EMBED_FILE(fg_lease_lua, "cache/cache_lease.lua");

/* The script answers a bare integer (the informers read it so), not the array
 * fg_redis_eval_ints wants: EVAL through the generic call, every few seconds at most. */
int fg_cache_lease(fg_redis_t *r, const char *key, const char *holder, int64_t ttl_ms, bool release,
                   bool *held) {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    const char *argv[] = {
        "EVAL", fg_lease_lua, "1", key, holder, ttl, release ? "release" : "take"};
    fg_redis_reply_t *rep = NULL;
    *held = false;
    int rc = fg_redis_query(r, 7, argv, &rep, NULL, 0);
    if (rc != FG_OK)
        return rc;
    if (fg_redis_reply_type(rep) != FG_REDIS_INTEGER)
        rc = FG_EINVAL;
    else
        *held = fg_redis_reply_int(rep) == 1 && !release;
    fg_redis_reply_free(rep);
    return rc;
}
