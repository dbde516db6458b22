/* api/api.c: the application state that handlers share, built once at start-up. */
#include "api_internal.h"

#include <stdlib.h>

#define SPEC_MAX_BYTES (8u << 20)

int fg_api_new(fg_api_t **out, const fg_config_t *cfg) {
    fg_api_t *api = fg_xcalloc(1, sizeof *api);
    api->cfg = cfg;
    int rc = fg_read_file(cfg->openapi_file, SPEC_MAX_BYTES, &api->openapi, &api->openapi_len);
    if (rc != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "openapi_file %s: cannot read it", cfg->openapi_file);
        fg_api_free(api);
        return FG_ENOENT;
    }
    if (fg_read_file(cfg->docs_file, SPEC_MAX_BYTES, &api->docs, &api->docs_len) != FG_OK) {
        api->docs = NULL;
        fg_log(FG_LOG_INFO, NULL, "docs_file %s not found: /docs answers 404 (make docs builds it)",
               cfg->docs_file);
    }
    *out = api;
    return FG_OK;
}

void fg_api_free(fg_api_t *api) {
    if (api == NULL)
        return;
    free(api->openapi);
    free(api->docs);
    free(api);
}
