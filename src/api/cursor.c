/* api/cursor.c: list cursors: base64url("1" name "|" cluster). The version byte lets a later
 * format be told apart; names and cluster names are DNS-1123, so "|" never occurs in them and
 * decoding checks both alphabets before anything uses them. */
#include "cursor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CURSOR_VERSION '1'

void rd_cursor_encode(const char *name, const char *cluster, char *out, size_t outlen) {
    char raw[RD_CURSOR_NAME_MAX + 70];
    int n = snprintf(raw, sizeof raw, "%c%s|%s", CURSOR_VERSION, name, cluster);
    if (n < 0 || (size_t)n >= sizeof raw || outlen < FG_B64URL_LEN(sizeof raw) + 1) {
        out[0] = '\0';
        return;
    }
    fg_b64url_encode(raw, (size_t)n, out);
}

int rd_cursor_decode(const char *text, char *name, size_t namelen, char *cluster,
                     size_t clusterlen) {
    unsigned char *raw = NULL;
    size_t n = 0, tlen = strlen(text);
    int rc = FG_EINVAL;
    if (tlen > RD_CURSOR_MAX || fg_b64url_decode(text, tlen, &raw, &n) != FG_OK)
        goto out;
    if (n < 3 || raw[0] != CURSOR_VERSION || memchr(raw, '\0', n) != NULL)
        goto out;
    const char *s = (const char *)raw + 1, *end = (const char *)raw + n;
    const char *bar = memchr(s, '|', (size_t)(end - s));
    if (bar == NULL)
        goto out;
    size_t nlen = (size_t)(bar - s), clen = (size_t)(end - bar - 1);
    if (!fg_is_dns1123_chars(s, nlen, RD_CURSOR_NAME_MAX) || nlen >= namelen ||
        clen >= clusterlen || (clen > 0 && !fg_is_dns1123_label(bar + 1, clen)))
        goto out;
    memcpy(name, s, nlen);
    name[nlen] = '\0';
    memcpy(cluster, bar + 1, clen);
    cluster[clen] = '\0';
    rc = FG_OK;
out:
    free(raw);
    return rc;
}
