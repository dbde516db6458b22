/* Fuzz target: a request body through fg_json_load, as the dispatcher parses every JSON body.
 * Properties: never crashes; on success the result re-serialises and re-parses. */
#include "fleetgate/core.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = NULL;
    char err[256];
    if (fg_json_load((const char *)data, size, &j, err, sizeof err) != FG_OK)
        return 0;
    size_t len;
    char *text = fg_json_dumps(j, &len);
    json_t *again = NULL;
    if (fg_json_load(text, len, &again, err, sizeof err) != FG_OK)
        abort(); /* what we serialise we must be able to read back */
    json_decref(again);
    free(text);
    json_decref(j);
    return 0;
}
