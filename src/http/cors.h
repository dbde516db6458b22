/* http/cors.h: CORS for browser callers (cors.c), used by the server (server.c) alone. */
#ifndef FG_HTTP_CORS_H
#define FG_HTTP_CORS_H

#include "fleetgate/http.h"

/* What a browser page may read of an answer besides the safelisted headers. */
#define FG_CORS_EXPOSE                                                                             \
    "ETag, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, X-Request-Id, Retry-After, "     \
    "Location"
/* The request headers a page may send (answered to every preflight). */
#define FG_CORS_ALLOW_HEADERS                                                                      \
    "Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, Last-Event-ID, "       \
    "X-Request-Id"

/* Whether origin (the Origin header; NULL: none) is one of o's allowed origins. */
bool fg_cors_allowed(const fg_http_options_t *o, const char *origin);
/* Whether the request is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
 */
bool fg_cors_is_preflight(const char *method, const char *origin, const char *request_method);

#endif
