/* Fuzz target: request paths (and methods) through the router, as every request goes.
 * Properties: never crashes; a match's parameters are non-empty and contain no '/' or ':'. */
#include "fleetgate/http.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int h(fg_req_t *req) {
    (void)req;
    return FG_OK;
}

static const fg_route_t routes[] = {
    {.method = "GET", .pattern = "/healthz", .handler = h},
    {.method = "GET", .pattern = "/v1/projects/{project}/apps", .handler = h},
    {.method = "GET", .pattern = "/v1/projects/{project}/apps/{app}", .handler = h},
    {.method = "POST", .pattern = "/v1/projects/{project}/apps/{app}:scale", .handler = h},
    {.method = "GET", .pattern = "/v1/projects/{project}/pods/{pod}/log", .handler = h},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static fg_router_t *router;
    if (router == NULL && fg_router_new(&router, routes, sizeof routes / sizeof routes[0]) != FG_OK)
        abort();
    /* First byte picks the method, the rest is the path. */
    static const char *const methods[] = {"GET", "POST", "HEAD", "DELETE"};
    if (size == 0)
        return 0;
    char *path = fg_xstrndup((const char *)data + 1, size - 1);
    fg_route_match_t m;
    if (fg_router_match(router, methods[data[0] % 4], path, &m) == FG_OK) {
        for (size_t i = 0; i < m.nparams; i++) {
            if (m.values[i][0] == '\0' || strpbrk(m.values[i], "/:") != NULL)
                abort();
        }
    }
    fg_route_match_clear(&m);
    free(path);
    return 0;
}
