/* Fuzz target: `cursor` values through the decoder, as every list takes them from a client.
 * Properties: never crashes; what decodes is a DNS-1123 name and cluster that encode back to a
 * cursor decoding to the same pair. */
#include "../../src/api/cursor.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fg_xstrndup((const char *)data, size);
    char name[RD_CURSOR_NAME_MAX + 1], cluster[64];
    if (rd_cursor_decode(text, name, sizeof name, cluster, sizeof cluster) == FG_OK) {
        char again[2 * RD_CURSOR_MAX], name2[RD_CURSOR_NAME_MAX + 1], cluster2[64];
        if (!fg_is_dns1123_chars(name, strlen(name), RD_CURSOR_NAME_MAX))
            abort();
        rd_cursor_encode(name, cluster, again, sizeof again);
        if (rd_cursor_decode(again, name2, sizeof name2, cluster2, sizeof cluster2) != FG_OK ||
            strcmp(name, name2) != 0 || strcmp(cluster, cluster2) != 0)
            abort();
    }
    free(text);
    return 0;
}
