/* api: fleetgate's handlers and the route table that binds them to paths.
 *
 * fg_api_t is the application state handlers reach through fg_req_app(): the configuration,
 * the contract and docs served as files, and the readiness checks. Later modules (cache, fed,
 * auth) hang their state here and add rows to the route table in src/api/routes.c.
 */
#ifndef FLEETGATE_API_H
#define FLEETGATE_API_H

#include "fleetgate/core.h"
#include "fleetgate/http.h"

typedef struct fg_api fg_api_t;

/* Builds the application state from a validated configuration (borrowed; must outlive the
 * api). Reads openapi_file (required: FG_ENOENT and a log line when it cannot be read) and
 * docs_file (optional: /docs answers 404 when it is absent). */
int fg_api_new(fg_api_t **out, const fg_config_t *cfg);
void fg_api_free(fg_api_t *api);

/* Hands the stream loop (borrowed; it must outlive the server) to the debug handlers; without
 * one they answer 503. */
struct fg_streams;
void fg_api_set_streams(fg_api_t *api, struct fg_streams *streams);

/* The route table (static; lives for the process). */
const fg_route_t *fg_api_routes(size_t *n);

#endif
