/* http/cors.c: which browser origins may call fleetgate (cors.allowed_origins, exact matches:
 * an origin is scheme, host and port, compared as the browser sends it) and what a preflight
 * is. The server adds the headers: on every answer to an allowed origin Access-Control-Allow-
 * Origin (that origin), Vary: Origin and Access-Control-Expose-Headers; a preflight gets 204
 * with the route's methods, the headers a page may send and Access-Control-Max-Age, or 403
 * when the origin is not allowed. No credentials mode: callers send a bearer token. */
#include "cors.h"

#include <string.h>

bool fg_cors_allowed(const fg_http_options_t *o, const char *origin) {
    if (origin == NULL)
        return false;
    for (size_t i = 0; i < o->ncors_origins; i++)
        if (strcmp(o->cors_origins[i], origin) == 0)
            return true;
    return false;
}

bool fg_cors_is_preflight(const char *method, const char *origin, const char *request_method) {
    return strcmp(method, "OPTIONS") == 0 && origin != NULL && request_method != NULL;
}
