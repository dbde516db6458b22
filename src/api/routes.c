/* api/routes.c: the route table. One row per route: method, path pattern, handler, body kind
 * and limit. Spec first (api/openapi.yaml), then the row here, then its test. */
#include "api_internal.h"

static const fg_route_t routes[] = {
    {.method = "GET", .pattern = "/healthz", .handler = fg_api_healthz},
    {.method = "GET", .pattern = "/readyz", .handler = fg_api_readyz},
    {.method = "GET", .pattern = "/metrics", .handler = fg_api_metrics},
    {.method = "GET", .pattern = "/openapi.yaml", .handler = fg_api_openapi},
    {.method = "GET", .pattern = "/docs", .handler = fg_api_docs},
};

const fg_route_t *fg_api_routes(size_t *n) {
    *n = sizeof routes / sizeof routes[0];
    return routes;
}
