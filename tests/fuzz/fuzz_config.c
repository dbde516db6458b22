/* Fuzz target: configuration text through the config table. Properties: never crashes; a
 * refusal always says something; an accepted configuration has a listen address. */
#include "fleetgate/core.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 20);
    fg_config_t *cfg = NULL;
    int rc = fg_config_load_text("fuzz.json", (const char *)data, size, &cfg, &errs);
    if (rc == FG_OK && (cfg->listen_host == NULL || cfg->listen_port == 0))
        abort();
    if (rc != FG_OK && errs.len == 0)
        abort();
    fg_config_free(cfg);
    fg_buf_free(&errs);
    return 0;
}
