/* api/cursor.h: the keyset cursors of list answers: the last (name, cluster) a page showed,
 * versioned and base64url-encoded, so a cursor names a place in the order and never an offset.
 * Implemented in src/api/cursor.c; tests/unit/test_cursor.c, tests/fuzz/fuzz_cursor.c. */
#ifndef FLEETGATE_API_CURSOR_H
#define FLEETGATE_API_CURSOR_H

#include "fleetgate/core.h"

#define RD_CURSOR_MAX      1024 /* characters of a cursor a client may send */
#define RD_CURSOR_NAME_MAX 253  /* a DNS-1123 subdomain */

/* The cursor that continues after (name, cluster) into out (at least 2 * RD_CURSOR_MAX bytes;
 * "" when name or out is too long). cluster may be "" (lists grouped by name). */
void rd_cursor_encode(const char *name, const char *cluster, char *out, size_t outlen);
/* Decodes a cursor: FG_OK with name (namelen >= RD_CURSOR_NAME_MAX + 1) and cluster
 * (clusterlen >= 64) written, or FG_EINVAL when text is not a cursor rd_cursor_encode made. */
int rd_cursor_decode(const char *text, char *name, size_t namelen, char *cluster,
                     size_t clusterlen);

#endif
