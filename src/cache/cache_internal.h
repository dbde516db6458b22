/* cache/cache_internal.h: what the files of cache/ share and nobody else needs (hiredis types
 * stay inside the module). */
#ifndef FG_CACHE_INTERNAL_H
#define FG_CACHE_INTERNAL_H

#include "fleetgate/cache.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>

/* A new connection to the pool's server, outside the pool, authenticated and on the pool's
 * database, for a long-lived use (the mirror's subscriber and tracking connections). Commands
 * time out as the pool's do; with blocking_reads the socket's read timeout is removed, for a
 * connection that waits on pushes. NULL on failure with why filled; the caller redisFree()s it. */
redisContext *fg_redis_connect_raw(const fg_redis_t *r, bool blocking_reads, char *why,
                                   size_t whylen);

#endif
