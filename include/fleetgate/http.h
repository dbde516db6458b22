/* http: the HTTP server (libmicrohttpd), the route table and router, requests and responses.
 *
 * A route is a row: method, path pattern, handler, body kind and limit. The dispatcher does the
 * generic checks (unknown path 404, wrong method 405 with Allow, body over its limit 413, a body
 * that is not JSON 415, malformed JSON 400, draining 503) before a handler runs, so handlers only
 * parse their parameters, act and reply. Every error leaves as application/problem+json through
 * fg_reply_problem(), whose kinds are one append-only table.
 *
 * Only src/http/ includes microhttpd.h.
 */
#ifndef FLEETGATE_HTTP_H
#define FLEETGATE_HTTP_H

#include "fleetgate/core.h"

typedef struct fg_req fg_req_t;
typedef struct fg_http_server fg_http_server_t;
typedef struct fg_router fg_router_t;

/* A handler replies exactly once (fg_reply_*) and returns FG_OK; any other return, or no reply,
 * becomes a 500 problem. */
typedef int (*fg_handler_fn)(fg_req_t *req);

typedef enum {
    FG_BODY_NONE = 0,      /* no body expected; one that comes anyway is read and ignored */
    FG_BODY_JSON,          /* a JSON body is required and parsed before the handler runs */
    FG_BODY_JSON_OPTIONAL, /* the same, but an empty body is fine (fg_req_json is NULL) */
} fg_body_kind_t;

/* What a route needs of its caller. The gate (auth/) gives each permission its meaning; http/
 * only carries it. The zero value is FG_PERM_ADMIN, so a row that forgets to declare its
 * permission fails closed. A route that takes a {project} is checked against the caller's role
 * in that project; one that does not is open to any authenticated caller (its handler filters
 * what it shows), except FG_PERM_ADMIN which needs the platform admin role. */
typedef enum {
    FG_PERM_ADMIN = 0,     /* platform admin: projects, clusters, everything */
    FG_PERM_PUBLIC,        /* no token needed (meta routes) */
    FG_PERM_METRICS,       /* /metrics: public unless auth.metrics_public is false, then admin */
    FG_PERM_AUTHENTICATED, /* any valid token (whoami, lists filtered by role) */
    FG_PERM_READ,          /* viewer: reads, events, history, change stream */
    FG_PERM_WRITE,         /* developer: workload writes and verbs */
    FG_PERM_LOGS,          /* developer: pod logs */
    FG_PERM_EXEC,          /* operator: exec into pods */
    FG_PERM__COUNT
} fg_perm_t;

/* Which rate limit a route is charged to. FG_RATE_DEFAULT is read for GET/HEAD and write
 * otherwise; FG_RATE_LIST is a read whose handler adds a per-item charge (see auth.h). */
typedef enum {
    FG_RATE_DEFAULT = 0,
    FG_RATE_NONE, /* not limited (meta routes) */
    FG_RATE_READ,
    FG_RATE_WRITE,
    FG_RATE_LIST,
    FG_RATE_STREAM, /* a long-lived stream: holds one of the caller's concurrent stream slots */
    FG_RATE__COUNT
} fg_rate_class_t;

typedef struct {
    const char *method;  /* "GET", "POST", ...; a GET route also answers HEAD */
    const char *pattern; /* "/v1/projects/{project}/apps/{app}:scale" */
    fg_handler_fn handler;
    fg_body_kind_t body;
    size_t body_limit; /* bytes; 0 means the server's max_body_bytes */
    fg_perm_t perm;    /* what the caller needs; the zero value is admin */
    fg_rate_class_t rate;
} fg_route_t;

/* ---- problem kinds: append-only, never renumbered ---------------------- */

typedef enum {
    FG_PROBLEM_BAD_REQUEST = 0,
    FG_PROBLEM_MALFORMED_JSON,
    FG_PROBLEM_NOT_FOUND,
    FG_PROBLEM_METHOD_NOT_ALLOWED,
    FG_PROBLEM_PAYLOAD_TOO_LARGE,
    FG_PROBLEM_UNSUPPORTED_MEDIA_TYPE,
    FG_PROBLEM_INVALID,
    FG_PROBLEM_SHUTTING_DOWN,
    FG_PROBLEM_NOT_READY,
    FG_PROBLEM_INTERNAL,
    FG_PROBLEM_ROUTE_NOT_FOUND,
    FG_PROBLEM_UNAUTHORIZED,
    FG_PROBLEM_FORBIDDEN,
    FG_PROBLEM_RATE_LIMITED,
    FG_PROBLEM_AUDIT_UNAVAILABLE,
    FG_PROBLEM_REDIS_UNAVAILABLE,
    FG_PROBLEM_CONFLICT,
    FG_PROBLEM_URI_TOO_LONG,      /* 414 */
    FG_PROBLEM_HEADERS_TOO_LARGE, /* 431 */
    FG_PROBLEM_PRECONDITION_FAILED,
    FG_PROBLEM_UPSTREAM_ERROR,
    FG_PROBLEM_UPSTREAM_TIMEOUT,
    FG_PROBLEM_QUOTA_EXCEEDED,
    FG_PROBLEM_PLACEMENT_FAILED,
    FG_PROBLEM_HTTP_VERSION_NOT_SUPPORTED, /* 505 */
    FG_PROBLEM__COUNT
} fg_problem_t;

/* The row of a problem kind: HTTP status, type URI and title. */
unsigned fg_problem_status(fg_problem_t kind);
const char *fg_problem_type(fg_problem_t kind);
const char *fg_problem_title(fg_problem_t kind);
/* Builds the problem+json document (a new reference). detail may be NULL. */
json_t *fg_problem_new(fg_problem_t kind, const char *detail, const char *request_id,
                       const char *instance);

/* ---- router ------------------------------------------------------------ */

#define FG_ROUTE_MAX_PARAMS   8
#define FG_ROUTE_MAX_SEGMENTS 16

typedef struct {
    const fg_route_t *route; /* set when the match succeeded */
    size_t nparams;
    const char *names[FG_ROUTE_MAX_PARAMS]; /* borrowed from the router */
    char *values[FG_ROUTE_MAX_PARAMS];      /* owned by the match; fg_route_match_clear */
    char allow[128];                        /* methods for this path, "GET, HEAD, POST" */
} fg_route_match_t;

/* Compiles a route table. FG_EINVAL (and a log line naming the pattern) on a bad pattern.
 * The table is borrowed and must outlive the router. */
int fg_router_new(fg_router_t **out, const fg_route_t *routes, size_t nroutes);
void fg_router_free(fg_router_t *r);
/* FG_OK: m->route and params set. FG_ENOENT: no route has this path. FG_EINVAL: the path
 * exists with other methods, listed in m->allow. In every case call fg_route_match_clear. */
int fg_router_match(const fg_router_t *r, const char *method, const char *path,
                    fg_route_match_t *m);
void fg_route_match_clear(fg_route_match_t *m);
/* Whether a method may change something: any but GET, HEAD and OPTIONS. */
bool fg_http_method_is_mutating(const char *method);
/* Whether a request of this method on this route is a write: its rate class is write, or the
 * default with a mutating method. Writes are charged to the write rate limit and their handlers
 * run off the connection's thread (server.c). */
bool fg_route_is_write(const fg_route_t *route, const char *method);

/* ---- the server -------------------------------------------------------- */

typedef struct {
    const char *host;
    uint16_t port; /* 0 picks a free port; fg_http_server_port tells which */
    unsigned workers;
    size_t max_body_bytes;
    unsigned max_connections;
    unsigned connection_timeout_s;
    /* Slow clients (0: no bound): the time to receive a whole request head (from the accept or
     * the end of the previous request on the connection) and a whole body (from its head);
     * a connection over either is shut down. And the connections one client address may hold. */
    unsigned header_timeout_s, body_timeout_s;
    unsigned max_connections_per_client;
    bool access_log;
    void *app; /* handed to handlers through fg_req_app */
    /* Called after the generic checks (404, 405, 413) and before the body checks and the handler
     * of every matched route. Returns FG_OK to go on; anything else means it has replied (401,
     * 403, 429...). NULL: no gate. */
    int (*gate)(fg_req_t *req);
    /* Called once just before any reply of a matched route is queued, with its status: it may add
     * headers (fg_req_add_header) and write the audit line. FG_OK sends the reply; anything else
     * replaces it with 503 audit-unavailable (fail closed). NULL: none. */
    int (*seal)(fg_req_t *req, unsigned status);
    void *gate_ctx; /* handed to gate and seal through fg_req_gate_ctx */
    /* A second listener speaking TLS (libmicrohttpd's GnuTLS) with the same routes and limits:
     * on when tls_cert_pem is set. The PEM texts are borrowed until fg_http_server_start
     * returns. tls_port 0 picks a free port (fg_http_server_tls_port tells which). */
    const char *tls_host;
    uint16_t tls_port;
    const char *tls_cert_pem, *tls_key_pem;
    /* CORS (src/http/cors.c): the origins a browser may call from (borrowed; none: no CORS
     * headers, and preflights are refused) and how long a preflight's answer may be cached. */
    const char *const *cors_origins;
    size_t ncors_origins;
    unsigned cors_max_age_s;
} fg_http_options_t;

/* The threads that run the handlers of writes for a server of that many workers (server.c,
 * "Handlers off the connection's thread"): a pool that calls Redis sizes itself for them too. */
unsigned fg_http_pool_threads(unsigned workers);
/* Creates and starts the server (listening when it returns FG_OK). Routes are borrowed.
 * FG_EIO when the address cannot be bound (logged with the reason). */
int fg_http_server_start(fg_http_server_t **out, const fg_http_options_t *opts,
                         const fg_route_t *routes, size_t nroutes);
uint16_t fg_http_server_port(const fg_http_server_t *s);
/* The TLS listener's port; 0 when there is none. */
uint16_t fg_http_server_tls_port(const fg_http_server_t *s);
/* Stops accepting connections; requests that arrive on open connections get 503. */
void fg_http_server_begin_drain(fg_http_server_t *s);
bool fg_http_server_draining(const fg_http_server_t *s);
/* Requests received and not yet completed. */
unsigned fg_http_server_in_flight(const fg_http_server_t *s);
/* Stops the server, closing every connection, and frees it. NULL is fine. */
void fg_http_server_free(fg_http_server_t *s);

/* ---- requests ---------------------------------------------------------- */

void *fg_req_app(const fg_req_t *req);
const char *fg_req_id(const fg_req_t *req);
const char *fg_req_method(const fg_req_t *req);
const char *fg_req_path(const fg_req_t *req);
/* The client's address, numeric ("127.0.0.1", "::1"); "unknown" when MHD cannot tell. */
const char *fg_req_client_addr(const fg_req_t *req);
/* The route pattern that matched, for logs and metrics ("unmatched" when none did). */
const char *fg_req_route_name(const fg_req_t *req);
bool fg_req_draining(const fg_req_t *req);
/* Path parameter by name; NULL when the route has none by that name. Borrowed. */
const char *fg_req_param(const fg_req_t *req, const char *name);
/* Query argument and request header by name; NULL when absent. Borrowed from the connection. */
const char *fg_req_query(const fg_req_t *req, const char *name);
const char *fg_req_header(const fg_req_t *req, const char *name);
/* The parsed body of a FG_BODY_JSON route. Borrowed: the request owns it. */
json_t *fg_req_json(const fg_req_t *req);
/* Takes j (the reference; NULL is nothing) and drops it when the request is done, once the
 * reply went out: a handler's large objects are freed after the client has its answer, not on
 * the way to it (the reply is sent only after the handler returns). */
void fg_req_release_later(fg_req_t *req, json_t *j);
/* Every value of a repeated query argument (?command=a&command=b), in order: at most max into
 * out (borrowed from the connection); returns how many there are. */
size_t fg_req_query_all(const fg_req_t *req, const char *name, const char **out, size_t max);
/* The status of the reply sent (0 before one is). */
unsigned fg_req_status(const fg_req_t *req);
/* The matched route (NULL when none matched). */
const fg_route_t *fg_req_route(const fg_req_t *req);
void *fg_req_gate_ctx(const fg_req_t *req);
/* The caller, as the gate established it: name (copied) shows in the access log; state is the
 * gate's per-request object, opaque to http/, freed with free_fn when the request is done. */
void fg_req_set_principal(fg_req_t *req, const char *name, void *state, void (*free_fn)(void *));
const char *fg_req_principal_name(const fg_req_t *req); /* NULL when anonymous */
void *fg_req_gate_state(const fg_req_t *req);           /* NULL when the gate set none */
/* The application's per-request object (e.g. the configuration snapshot the request started
 * with), opaque to http/, freed with free_fn when the request is done. */
void fg_req_set_app_state(fg_req_t *req, void *state, void (*free_fn)(void *));
void *fg_req_app_state(const fg_req_t *req); /* NULL when none was set */

/* ---- replies: exactly one per request ---------------------------------- */

/* Adds a header to the reply that will be sent (copied). */
void fg_req_add_header(fg_req_t *req, const char *name, const char *value);
/* Sends body as application/json. Steals the reference to body. */
int fg_reply_json(fg_req_t *req, unsigned status, json_t *body);
/* Sends bytes that stay valid for the server's lifetime (not copied). */
int fg_reply_static(fg_req_t *req, unsigned status, const char *content_type, const void *data,
                    size_t len);
/* Sends a malloc'd buffer; the reply takes it and frees it. */
int fg_reply_take(fg_req_t *req, unsigned status, const char *content_type, char *data, size_t len);
/* Sends p's text as the answer; a reference to p is held until the answer is sent (the caller
 * keeps its own). */
int fg_reply_prepared(fg_req_t *req, unsigned status, const char *content_type, fg_prepared_t *p);
/* Sends a problem+json reply of the given kind; detail is printf-formatted (at most 1023 bytes
 * are kept), may be NULL. */
int fg_reply_problem(fg_req_t *req, fg_problem_t kind, const char *detail_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with extension members (RFC 9457 section 3.2): the members of the object ext follow
 * the standard ones (type, title, status, detail, instance, requestId), which they cannot
 * replace. Steals the reference to ext; NULL adds none. */
int fg_reply_problem_ext(fg_req_t *req, fg_problem_t kind, json_t *ext, const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- streamed replies: answers that outlive their handler -------------- */

/* A request handed over to a long-lived stream (stream/): the connection sleeps (suspended, no
 * worker thread held) whenever the stream has nothing for it, and fg_http_stream_wake brings it
 * back. Two references: http's (dropped when the request completes) and the owner's
 * (fg_http_stream_release). */
typedef struct fg_http_stream fg_http_stream_t;

#define FG_HTTP_STREAM_EOF   (-1) /* read: the body is complete */
#define FG_HTTP_STREAM_ABORT (-2) /* read: cut the connection (the body is incomplete) */

typedef struct {
    /* On a worker thread, when a parked request that has not replied is woken: replies once
     * (fg_reply_stream, or any fg_reply_* such as a problem). */
    int (*resume)(fg_req_t *req, void *ud);
    /* On a worker thread (or the owner's, inside fg_http_stream_push), one call at a time,
     * after fg_reply_stream: copies at most max body
     * bytes into buf and returns how many; 0 when it has none now (the connection sleeps until
     * the next wake); FG_HTTP_STREAM_EOF or FG_HTTP_STREAM_ABORT. */
    long (*read)(void *ud, char *buf, size_t max);
    /* Once, when the request completes (client_gone: it ended before the answer did). req is
     * still valid during the call (for an audit line); no op is called after it. */
    void (*closed)(fg_req_t *req, void *ud, bool client_gone);
    void *ud;
} fg_http_stream_ops_t;

/* Parks req (from its handler, which then returns FG_OK without replying): ops (copied) take it
 * from here. *out is the owner's reference. FG_OK, or FG_EINVAL when req already replied. */
int fg_req_park(fg_req_t *req, const fg_http_stream_ops_t *ops, fg_http_stream_t **out);
/* From ops.resume: answers status with a chunked body pulled through ops.read. */
int fg_reply_stream(fg_req_t *req, unsigned status, const char *content_type);
/* Thread-safe: makes a sleeping connection call ops.resume or ops.read again; a no-op once the
 * request completed. */
void fg_http_stream_wake(fg_http_stream_t *s);
/* From the owner's one thread, instead of a wake: when the connection sleeps inside its body
 * on a plain HTTP/1.1 socket, writes what ops.read gives straight to the socket as chunks (no
 * worker thread wakes, so the workers stay free for other requests); otherwise (no reply yet,
 * TLS, the body's end, a socket error) it is fg_http_stream_wake. FG_OK, or FG_EAGAIN when the
 * socket is full: push again once it is writable. ops.read is then called on this thread. */
int fg_http_stream_push(fg_http_stream_t *s);
/* The client's socket (to watch for its hang-up and, after FG_EAGAIN from a push, for room;
 * never read or write it), or -1. */
int fg_http_stream_fd(const fg_http_stream_t *s);
void fg_http_stream_release(fg_http_stream_t *s);

/* ---- upgraded connections (WebSocket) --------------------------------- */

typedef struct fg_http_upgraded fg_http_upgraded_t;
/* Called on an HTTP worker once the 101 answer is sent: fd is the client's socket (non-blocking),
 * the owner's to read and write but not to close; extra holds bytes the client sent after its
 * request (borrowed for the call). End it with fg_http_upgraded_close. */
typedef void (*fg_http_upgrade_fn)(void *ud, int fd, const char *extra, size_t extra_len,
                                   fg_http_upgraded_t *u);
/* Answers 101 Switching Protocols with `Upgrade: websocket` and the headers in hdrs (name,
 * value, ..., NULL; copied), then hands the connection to fn. FG_OK or FG_ERR. */
int fg_reply_upgrade(fg_req_t *req, const char *const *hdrs, fg_http_upgrade_fn fn, void *ud);
/* Closes an upgraded connection (and frees u). */
void fg_http_upgraded_close(fg_http_upgraded_t *u);

/* ---- WebSocket framing (RFC 6455) ------------------------------------- */

typedef enum {
    FG_WS_CONTINUATION = 0x0,
    FG_WS_TEXT = 0x1,
    FG_WS_BINARY = 0x2,
    FG_WS_CLOSE = 0x8,
    FG_WS_PING = 0x9,
    FG_WS_PONG = 0xA,
} fg_ws_opcode_t;

#define FG_WS_MAX_HEADER  14  /* 2 + 8 (64-bit length) + 4 (mask) */
#define FG_WS_MAX_CONTROL 125 /* a control frame's payload */

/* One frame's header, as parsed. */
typedef struct {
    bool fin;
    uint8_t opcode;
    bool masked;
    uint8_t mask[4];
    uint64_t payload_len;
    size_t header_len; /* the payload starts at data + header_len */
} fg_ws_frame_t;

/* Parses the frame at the start of data[0..len). from_client: frames a client sends must be
 * masked, a server's must not. Returns FG_OK with *f when the whole frame (header and
 * payload) is in data; FG_EAGAIN when more bytes are needed (f untouched); FG_EINVAL on a
 * protocol error (reserved bits, unknown opcode, a fragmented or longer-than-125 control frame,
 * a length not in its shortest form or with the top bit set, the wrong masking); FG_ETOOBIG
 * when the payload is longer than max_payload. */
int fg_ws_parse(const uint8_t *data, size_t len, bool from_client, size_t max_payload,
                fg_ws_frame_t *f);
/* XORs data with mask starting at payload offset `offset` (masking and unmasking alike). */
void fg_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset);
/* Writes a frame header for a payload of payload_len into out (FG_WS_MAX_HEADER bytes) and
 * returns its length; mask NULL makes a server's (unmasked) frame. */
size_t fg_ws_header(uint8_t *out, bool fin, uint8_t opcode, uint64_t payload_len,
                    const uint8_t *mask);
/* True when key is a Sec-WebSocket-Key: the base64 of 16 bytes (24 characters, "==" last). */
bool fg_ws_key_valid(const char *key);
/* A Sec-WebSocket-Key from 16 random bytes: 24 characters and a NUL into out (>= 25 bytes). */
void fg_ws_key_from(const uint8_t raw[16], char *out);
/* Sec-WebSocket-Accept for key: base64(SHA-1(key + GUID)), 28 characters and a NUL into out
 * (at least 29 bytes). */
void fg_ws_accept(const char *key, char *out);
/* The Kubernetes convention for browsers, which cannot set Authorization on a WebSocket: the
 * bearer token offered as a subprotocol "base64url.bearer.authorization.k8s.io.<token in
 * base64url>". Finds the first such entry in a Sec-WebSocket-Protocol value (comma-separated,
 * spaces around entries ignored; NULL allowed) and points *b64 / *len at its encoded token.
 * FG_OK, or FG_ENOENT when none is offered (or its token part is empty). */
int fg_ws_bearer_protocol(const char *offered, const char **b64, size_t *len);
#define FG_WS_BEARER_PREFIX "base64url.bearer.authorization.k8s.io."

/* ---- request ids ------------------------------------------------------- */

#define FG_REQUEST_ID_MAX 64

/* A client-supplied X-Request-Id is kept when 1..64 characters of [A-Za-z0-9._:-]. */
bool fg_request_id_valid(const char *s);
/* Writes a fresh 32-hex-digit id into out (at least 33 bytes). */
void fg_request_id_generate(char *out);

#endif
