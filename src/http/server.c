/* http/server.c: the libmicrohttpd server and the request lifecycle.
 *
 * MHD calls the access handler several times per request: first with the headers, then once
 * per piece of body, then once more with no data. fleetgate admits the request on the first
 * call (request id, route match, draining check, declared body size), collects the body within
 * its limit on the middle calls, and dispatches on the last call: answering only then keeps
 * keep-alive working (see ../shared/STYLE.md on MHD 0.9.75). The completion callback writes
 * the access-log line, records metrics and frees the request.
 *
 * Slow clients: MHD's idle timeout restarts with every byte, so a client trickling one header
 * line every few seconds would hold its connection forever. A watchdog thread bounds the time
 * to receive a whole request head (header_timeout_s, counted from the connection's accept or
 * the end of its previous request, so an idle keep-alive connection is bounded by it too) and
 * a whole body (body_timeout_s, from the head), and shuts such connections down; MHD caps the
 * connections of one client address (max_connections_per_client). Connections are tracked
 * from MHD's connection notifications; the watchdog only shuts a socket down under the lock
 * that the "closed" notification takes, and MHD closes the descriptor after that notification,
 * so a descriptor number reused by a new connection is never touched.
 *
 * The request target is checked raw (MHD_OPTION_URI_LOG_CALLBACK sees it before MHD decodes
 * it): %00 would cut the decoded path short and "." / ".." segments mean another path to every
 * proxy in front, so both are refused with 400. So are requests that frame their body twice
 * (two different Content-Length, or Content-Length with Transfer-Encoding: RFC 9112 §6.3), and
 * their connection is closed, since a proxy in front may read the body differently.
 *
 * Oversized and unparsable heads: fleetgate refuses a head over HEAD_MAX or a target over
 * TARGET_MAX (431, 414) and an HTTP/1.1 request without exactly one Host (400) itself. What
 * libmicrohttpd refuses before any callback runs (a head past its per-connection memory pool,
 * a request line or header line it cannot parse, an HTTP version it does not speak, a bad
 * Content-Length or chunk) is answered by fleetgate too: mhd_answers.c takes those answers over
 * and fg_http_library_refusal() below makes, logs and counts fleetgate's problem+json in their
 * place. So the pool only needs to hold a head of HEAD_MAX: MHD zeroes the whole pool after
 * every request, and at 128 KiB that was 70% of the instructions of a cached GET.
 *
 * Draining: fg_http_server_begin_drain() stops accepting connections (it closes the listening
 * sockets, which are fleetgate's: listen.c says why); requests admitted before keep going,
 * requests arriving on open connections get 503 with "Connection: close", and the caller waits
 * for fg_http_server_in_flight() to reach zero.
 */
#include "http_internal.h"

#include "cors.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct fg_http_server {
    struct MHD_Daemon *mhd;
    struct MHD_Daemon *mhd_tls;                  /* the TLS listener; NULL when none */
    fg_http_listener_t *listener, *listener_tls; /* the sockets (listen.c); NULL once drained */
    uint16_t tls_port;
    fg_router_t *router;
    fg_http_options_t opts;
    char *host;
    uint16_t port;
    atomic_bool draining;
    atomic_uint in_flight;
    atomic_uint conns_open; /* connections handed to MHD and not yet closed (listen.c) */
    fg_metric_t *m_requests, *m_duration, *m_in_flight, *m_slow_closed;
    /* the watchdog of slow clients */
    pthread_mutex_t conns_mu;
    pthread_cond_t stop_cv;
    bool stopping, watchdog_running;
    pthread_t watchdog;
    struct conn *conns; /* a doubly linked list of open connections */
    /* the handler pool (see "Handlers off the connection's thread") */
    pthread_mutex_t jobs_mu;
    pthread_cond_t jobs_cv;
    struct fg_req *jobs_head, *jobs_tail; /* handlers waiting for a pool thread */
    bool jobs_stopping;
    pthread_t *pool;
    unsigned pool_size; /* threads it gets at the first write */
    unsigned npool;     /* pool threads running (under jobs_mu) */
};

/* What the watchdog knows of one connection; the connection's MHD socket context. */
/* CONN_UPGRADED: a WebSocket; its owner (stream/) bounds it, the watchdog never touches it. */
typedef enum { CONN_HEAD = 0, CONN_BODY, CONN_BUSY, CONN_SHUT, CONN_UPGRADED } conn_phase_t;

typedef struct conn {
    struct conn *prev, *next;
    int fd;
    conn_phase_t phase;
    uint64_t since_ns; /* when the phase began */
    /* Only the connection's own MHD thread touches these two (the watchdog never does). */
    fg_http_server_t *srv;
    fg_req_t *req;   /* the request whose line MHD has parsed, until its completion */
    char client[64]; /* the peer's address, numeric: made once per connection */
} conn_t;

/* A header line a handler added: name and value in the request's header_text, or (when that is
 * full) each allocated and owned. */
typedef struct {
    char *name, *value;
    bool owned;
} header_t;

#define MAX_REPLY_HEADERS 16
#define REPLY_HEADER_TEXT 768         /* bytes of the handlers' header lines held in the request */
#define ACCESS_PATH_MAX   2048        /* bytes of the path in an access-log line */
#define ACCESS_LINE_MAX   32768       /* an access line: every field is bounded well below it */
#define TARGET_MAX        (10u << 10) /* the request target; longer: 414 */
#define HEAD_MAX          (12u << 10) /* request line and header fields; larger: 431 */
/* Per connection: a head of HEAD_MAX, MHD's records of its fields and the answer's header
 * lines. A head past it is refused by MHD, in fleetgate's words (see the top). */
#define MHD_POOL_BYTES (16u << 10)

struct fg_req {
    fg_http_server_t *srv;
    struct MHD_Connection *conn;
    char id[FG_REQUEST_ID_MAX + 1];
    char client[64];  /* the peer's address, numeric */
    bool admitted;    /* the access handler saw the head (not only the request line) */
    bool http11;      /* the request line says HTTP/1.1 */
    char *raw_target; /* the request target as received, before MHD decoded it */
    conn_t *conn_state;
    char *method, *path;
    fg_route_match_t match;
    int match_rc;
    size_t body_limit;
    fg_buf_t body;
    bool body_too_big;
    bool refused_draining;
    json_t *json;
    json_t *later; /* what fg_req_release_later keeps until the request is done (an array) */
    uint64_t start_ns;
    unsigned status;
    size_t bytes_out;
    bool replied;
    header_t headers[MAX_REPLY_HEADERS];
    size_t nheaders;
    size_t header_text_used;
    char header_text[REPLY_HEADER_TEXT]; /* the usual header lines, without an allocation each */
    char *principal;                     /* shown in the access log; NULL when anonymous */
    void *gate_state;                    /* the gate's per-request object */
    void (*gate_state_free)(void *);
    void *app_state; /* the application's per-request object (fg_req_set_app_state) */
    void (*app_state_free)(void *);
    bool sealed;              /* the seal hook ran (it runs once, even when it refuses) */
    fg_http_stream_t *stream; /* set when the handler parked the request (fg_req_park) */
    /* Run on the handler pool: the connection sleeps while the handler runs, its answer is held
     * here and queued by the connection's own thread once the pool thread woke it. */
    bool pooled;
    atomic_bool pool_done;
    struct MHD_Response *held; /* owned until queued */
    unsigned held_status;
    struct fg_req *next_job; /* in the server's job queue */
};

/* A parked request's link to its stream. mu guards suspended, woken and closed, which the
 * owner's thread (wake) and the connection's worker (read, completion) both touch; ops, conn
 * and fd are set at park and never change. */
struct fg_http_stream {
    pthread_mutex_t mu;
    struct MHD_Connection *conn;
    fg_http_stream_ops_t ops;
    int fd;
    bool suspended, woken, closed;
    int refs; /* the owner, the request, and the response while one exists */
    size_t bytes;
    /* Pushing (fg_http_stream_push): can_push is set at park for a plain HTTP/1.1 GET (MHD
     * frames its body as chunks) and cleared for good after a socket error; in_body says the
     * connection sleeps inside its body, so MHD holds none of its bytes and touches the socket
     * only after a resume. pend is the unsent tail of the last chunk pushed. */
    bool can_push, in_body;
    char *pend;
    size_t pend_off, pend_len;
};

/* ---- request accessors ------------------------------------------------- */

void *fg_req_app(const fg_req_t *req) {
    return req->srv->opts.app;
}

const char *fg_req_id(const fg_req_t *req) {
    return req->id;
}

const char *fg_req_method(const fg_req_t *req) {
    return req->method;
}

const char *fg_req_path(const fg_req_t *req) {
    return req->path;
}

const char *fg_req_client_addr(const fg_req_t *req) {
    return req->client;
}

const char *fg_req_route_name(const fg_req_t *req) {
    return req->match.route ? req->match.route->pattern : "unmatched";
}

bool fg_req_draining(const fg_req_t *req) {
    return atomic_load(&req->srv->draining);
}

const char *fg_req_param(const fg_req_t *req, const char *name) {
    for (size_t i = 0; i < req->match.nparams; i++) {
        if (strcmp(req->match.names[i], name) == 0)
            return req->match.values[i];
    }
    return NULL;
}

const char *fg_req_query(const fg_req_t *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *fg_req_header(const fg_req_t *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

json_t *fg_req_json(const fg_req_t *req) {
    return req->json;
}

void fg_req_release_later(fg_req_t *req, json_t *j) {
    if (j == NULL)
        return;
    if (req->later == NULL)
        req->later = json_array();
    json_array_append_new(req->later, j);
}

typedef struct {
    const char *name;
    const char **out;
    size_t max, n;
} query_all_t;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    query_all_t *q = cls;
    if (key != NULL && strcmp(key, q->name) == 0) {
        if (q->n < q->max)
            q->out[q->n] = value ? value : "";
        q->n++;
    }
    return MHD_YES;
}

size_t fg_req_query_all(const fg_req_t *req, const char *name, const char **out, size_t max) {
    query_all_t q = {.name = name, .out = out, .max = max};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, &q);
    return q.n;
}

unsigned fg_req_status(const fg_req_t *req) {
    return req->replied ? req->status : 0;
}

const fg_route_t *fg_req_route(const fg_req_t *req) {
    return req->match.route;
}

void *fg_req_gate_ctx(const fg_req_t *req) {
    return req->srv->opts.gate_ctx;
}

void fg_req_set_principal(fg_req_t *req, const char *name, void *state, void (*free_fn)(void *)) {
    free(req->principal);
    req->principal = name ? fg_xstrdup(name) : NULL;
    if (req->gate_state && req->gate_state_free && req->gate_state != state)
        req->gate_state_free(req->gate_state);
    req->gate_state = state;
    req->gate_state_free = free_fn;
}

const char *fg_req_principal_name(const fg_req_t *req) {
    return req->principal;
}

void fg_req_set_app_state(fg_req_t *req, void *state, void (*free_fn)(void *)) {
    if (req->app_state && req->app_state_free && req->app_state != state)
        req->app_state_free(req->app_state);
    req->app_state = state;
    req->app_state_free = free_fn;
}

void *fg_req_app_state(const fg_req_t *req) {
    return req->app_state;
}

void *fg_req_gate_state(const fg_req_t *req) {
    return req->gate_state;
}

static void free_headers(fg_req_t *req) {
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].owned) {
            free(req->headers[i].name);
            free(req->headers[i].value);
        }
    req->nheaders = 0;
    req->header_text_used = 0;
}

void fg_req_add_header(fg_req_t *req, const char *name, const char *value) {
    if (req->nheaders == MAX_REPLY_HEADERS)
        abort();
    header_t *h = &req->headers[req->nheaders++];
    size_t nlen = strlen(name) + 1, vlen = strlen(value) + 1;
    if (nlen + vlen > sizeof req->header_text - req->header_text_used) {
        *h = (header_t){.name = fg_xstrdup(name), .value = fg_xstrdup(value), .owned = true};
        return;
    }
    h->name = req->header_text + req->header_text_used;
    memcpy(h->name, name, nlen);
    h->value = h->name + nlen;
    memcpy(h->value, value, vlen);
    h->owned = false;
    req->header_text_used += nlen + vlen;
}

/* ---- replies ----------------------------------------------------------- */

static int reply_audit_unavailable(fg_req_t *req);

/* The seal runs before anything is queued, so an audit line is on disk before the answer of the
 * call it records leaves; false when it cannot be written (the answer becomes a 503). */
static bool run_seal(fg_req_t *req, unsigned status) {
    if (req->sealed || req->match.route == NULL || req->srv->opts.seal == NULL)
        return true;
    req->sealed = true;
    return req->srv->opts.seal(req, status) == FG_OK;
}

static void add_headers(fg_req_t *req, struct MHD_Response *resp, const char *content_type) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Request-Id", req->id);
    const char *origin = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Origin");
    if (fg_cors_allowed(&req->srv->opts, origin)) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(resp, "Access-Control-Expose-Headers", FG_CORS_EXPOSE);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    for (size_t i = 0; i < req->nheaders; i++)
        MHD_add_response_header(resp, req->headers[i].name, req->headers[i].value);
    if (atomic_load(&req->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* Queues resp (consumed) with MHD, or holds it while the handler runs on the pool: MHD takes a
 * response only from the connection's own thread, in its access handler. */
static enum MHD_Result send_response(fg_req_t *req, unsigned status, struct MHD_Response *resp) {
    if (req->pooled) {
        req->held = resp;
        req->held_status = status;
        return MHD_YES;
    }
    enum MHD_Result r = fg_http_queue(req->conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

static int queue(fg_req_t *req, unsigned status, const char *content_type, void *data, size_t len,
                 enum MHD_ResponseMemoryMode mode) {
    if (req->replied) {
        FG_LOG(FG_LOG_ERROR, req->id, "second reply to %s %s dropped", req->method, req->path);
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        return FG_ERR;
    }
    if (!run_seal(req, status)) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        return reply_audit_unavailable(req);
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, mode);
    if (resp == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        return FG_ERR;
    }
    add_headers(req, resp, content_type);
    enum MHD_Result r = send_response(req, status, resp);
    req->replied = true;
    req->status = status;
    req->bytes_out = len;
    return r == MHD_YES ? FG_OK : FG_ERR;
}

static void prepared_gone(void *cls) {
    fg_prepared_unref(cls);
}

int fg_reply_prepared(fg_req_t *req, unsigned status, const char *content_type, fg_prepared_t *p) {
    if (req->replied)
        return FG_ERR;
    if (!run_seal(req, status))
        return reply_audit_unavailable(req);
    struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback_cls(
        p->len, p->text, prepared_gone, fg_prepared_ref(p));
    if (resp == NULL) {
        fg_prepared_unref(p);
        return FG_ERR;
    }
    add_headers(req, resp, content_type);
    enum MHD_Result r = send_response(req, status, resp);
    req->replied = true;
    req->status = status;
    req->bytes_out = p->len;
    return r == MHD_YES ? FG_OK : FG_ERR;
}

int fg_reply_json(fg_req_t *req, unsigned status, json_t *body) {
    size_t len;
    char *text = fg_json_dumps(body, &len);
    fg_req_release_later(req, body);
    return queue(req, status, "application/json", text, len, MHD_RESPMEM_MUST_FREE);
}

int fg_reply_static(fg_req_t *req, unsigned status, const char *content_type, const void *data,
                    size_t len) {
    return queue(req, status, content_type, (void *)(uintptr_t)data, len, MHD_RESPMEM_PERSISTENT);
}

int fg_reply_take(fg_req_t *req, unsigned status, const char *content_type, char *data,
                  size_t len) {
    return queue(req, status, content_type, data, len, MHD_RESPMEM_MUST_FREE);
}

static int reply_audit_unavailable(fg_req_t *req) {
    /* The headers the handler or the seal added (RateLimit-*, Location...) describe an answer
     * that is not sent. */
    free_headers(req);
    return fg_reply_problem(req, FG_PROBLEM_AUDIT_UNAVAILABLE,
                            "the audit log cannot be written, so the call is refused");
}

/* ---- streamed replies -------------------------------------------------- */

#define STREAM_BLOCK_BYTES (16u * 1024u)

static void stream_unref(fg_http_stream_t *s) {
    pthread_mutex_lock(&s->mu);
    int left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left > 0)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->pend);
    free(s);
}

/* Sleeps the connection unless a wake came since the last look. Called with s->mu held. */
static bool sleep_unless_woken(fg_http_stream_t *s) {
    if (s->woken) {
        s->woken = false;
        return false;
    }
    s->suspended = true;
    MHD_suspend_connection(s->conn);
    return true;
}

int fg_req_park(fg_req_t *req, const fg_http_stream_ops_t *ops, fg_http_stream_t **out) {
    if (req->replied || req->stream != NULL || req->pooled) /* a pooled handler may not touch MHD */
        return FG_EINVAL;
    fg_http_stream_t *s = fg_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->conn = req->conn;
    s->ops = *ops;
    s->refs = 2;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? (int)ci->connect_fd : -1;
    /* Pushed chunks are written as MHD would frame them: only where MHD frames the body as
     * HTTP/1.1 chunks on a socket fleetgate may write (not TLS: only the library can). */
    const union MHD_ConnectionInfo *tls =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    const char *conn_hdr = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Connection");
    s->can_push = s->fd >= 0 && req->http11 && strcmp(req->method, "GET") == 0 &&
                  (tls == NULL || tls->tls_session == NULL) &&
                  (conn_hdr == NULL || strcasestr(conn_hdr, "close") == NULL);
    req->stream = s;
    /* The owner cannot wake it before it has *out, so this sleep never misses a wake. */
    pthread_mutex_lock(&s->mu);
    sleep_unless_woken(s);
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return FG_OK;
}

/* Called with s->mu held. */
static void wake_locked(fg_http_stream_t *s) {
    s->woken = true;
    if (s->suspended && !s->closed) {
        s->suspended = false;
        s->in_body = false; /* MHD has the socket again */
        MHD_resume_connection(s->conn);
    }
}

void fg_http_stream_wake(fg_http_stream_t *s) {
    pthread_mutex_lock(&s->mu);
    wake_locked(s);
    pthread_mutex_unlock(&s->mu);
}

/* Sends what it can of pend; FG_OK once it is all gone, FG_EAGAIN, or FG_EIO. */
static int push_pending(fg_http_stream_t *s) {
    while (s->pend_len > 0) {
        ssize_t w = send(s->fd, s->pend + s->pend_off, s->pend_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return FG_EAGAIN;
        if (w <= 0)
            return FG_EIO;
        s->pend_off += (size_t)w;
        s->pend_len -= (size_t)w;
    }
    free(s->pend);
    s->pend = NULL;
    s->pend_off = 0;
    return FG_OK;
}

#define PUSH_HEAD 10 /* room for a chunk's size line: up to 8 hex digits and CRLF */

int fg_http_stream_push(fg_http_stream_t *s) {
    char frame[PUSH_HEAD + STREAM_BLOCK_BYTES + 2];
    int rc = FG_OK;
    /* mu is held throughout: a wake from elsewhere (or the completion) waits, so nothing resumes
     * MHD between the check and the send. Lock order: s->mu, then whatever ops.read takes. */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (!s->can_push || !s->in_body || !s->suspended || s->closed) {
            wake_locked(s); /* MHD's way: before the body, over TLS, or after an error */
            break;
        }
        rc = push_pending(s);
        if (rc == FG_EAGAIN)
            break;
        if (rc != FG_OK) { /* the socket failed: MHD sees it too, and ends the request */
            s->can_push = false;
            rc = FG_OK;
            continue;
        }
        long n = s->ops.read(s->ops.ud, frame + PUSH_HEAD, STREAM_BLOCK_BYTES);
        if (n == 0)
            break;
        if (n < 0) { /* the end (or a cut): MHD writes the last chunk, or closes */
            wake_locked(s);
            break;
        }
        s->bytes += (size_t)n;
        char line[PUSH_HEAD + 1];
        int h = snprintf(line, sizeof line, "%lx\r\n", (unsigned long)n);
        char *start = frame + PUSH_HEAD - h;
        memcpy(start, line, (size_t)h);
        memcpy(frame + PUSH_HEAD + n, "\r\n", 2);
        size_t total = (size_t)h + (size_t)n + 2;
        ssize_t w;
        do
            w = send(s->fd, start, total, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            s->can_push = false;
            continue;
        }
        if (w < 0)
            w = 0;
        if ((size_t)w < total) { /* kept: the next push sends it first */
            s->pend_len = total - (size_t)w;
            s->pend = fg_xmalloc(s->pend_len);
            memcpy(s->pend, start + w, s->pend_len);
            rc = FG_EAGAIN;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int fg_http_stream_fd(const fg_http_stream_t *s) {
    return s->fd;
}

void fg_http_stream_release(fg_http_stream_t *s) {
    if (s != NULL)
        stream_unref(s);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    fg_http_stream_t *s = cls;
    for (;;) {
        long n = s->ops.read(s->ops.ud, buf, max);
        if (n > 0) {
            s->bytes += (size_t)n;
            return (ssize_t)n;
        }
        if (n == FG_HTTP_STREAM_EOF)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        /* Nothing now: sleep (MHD calls again after the resume) unless bytes came meanwhile. */
        pthread_mutex_lock(&s->mu);
        bool slept = sleep_unless_woken(s);
        s->in_body = slept; /* MHD sent all it had (it asks only then): pushing may start */
        pthread_mutex_unlock(&s->mu);
        if (slept)
            return 0;
    }
}

static void stream_response_gone(void *cls) {
    stream_unref(cls);
}

int fg_reply_stream(fg_req_t *req, unsigned status, const char *content_type) {
    fg_http_stream_t *s = req->stream;
    if (s == NULL || req->replied)
        return FG_EINVAL;
    if (!run_seal(req, status))
        return reply_audit_unavailable(req);
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK_BYTES, stream_read, s, stream_response_gone);
    if (resp == NULL)
        return FG_ERR;
    pthread_mutex_lock(&s->mu);
    s->refs++;
    pthread_mutex_unlock(&s->mu);
    add_headers(req, resp, content_type);
    enum MHD_Result r = fg_http_queue(req->conn, status, resp);
    MHD_destroy_response(resp);
    req->replied = true;
    req->status = status;
    return r == MHD_YES ? FG_OK : FG_ERR;
}

/* A parked request woken before it replied: its owner answers now, or the connection goes back
 * to sleep when the owner has not decided yet (a wake that came meanwhile asks again). */
static void stream_resume(fg_req_t *req) {
    fg_http_stream_t *s = req->stream;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        s->woken = false;
        pthread_mutex_unlock(&s->mu);
        if (s->ops.resume(req, s->ops.ud) != FG_OK && !req->replied) {
            fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the request failed inside fleetgate");
            return;
        }
        if (req->replied)
            return;
        pthread_mutex_lock(&s->mu);
        bool slept = sleep_unless_woken(s);
        pthread_mutex_unlock(&s->mu);
        if (slept)
            return;
    }
}

/* The request is done: the owner hears it once, and http's reference goes. */
static void stream_completed(fg_req_t *req, bool client_gone) {
    fg_http_stream_t *s = req->stream;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_mutex_unlock(&s->mu);
    req->bytes_out = s->bytes;
    s->ops.closed(req, s->ops.ud, client_gone);
    stream_unref(s);
    req->stream = NULL;
}

/* ---- upgraded connections ---------------------------------------------- */

static void conn_enter(fg_http_server_t *srv, conn_t *c, conn_phase_t phase);

struct fg_http_upgraded {
    struct MHD_UpgradeResponseHandle *urh;
};

typedef struct {
    fg_http_upgrade_fn fn;
    void *ud;
} upgrade_ctx_t;

static void on_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra,
                        size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
    (void)conn, (void)con_cls;
    upgrade_ctx_t *ctx = cls;
    fg_http_upgraded_t *u = fg_xcalloc(1, sizeof *u);
    u->urh = urh;
    /* An upgraded socket carries small interactive frames (a keystroke, its echo): send each at
     * once rather than leave it to whatever cork/Nagle state MHD had for the 101 answer. The
     * plain listener's socket is TCP (the TLS one hands over a socket pair, where this fails
     * harmlessly). */
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CORK_OFF);
    int one = 1;
    (void)setsockopt((int)sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ctx->fn(ctx->ud, (int)sock, extra, extra_len, u);
    free(ctx);
}

int fg_reply_upgrade(fg_req_t *req, const char *const *hdrs, fg_http_upgrade_fn fn, void *ud) {
    if (req->replied || req->pooled) /* a pooled handler may not touch MHD */
        return FG_ERR;
    if (!run_seal(req, MHD_HTTP_SWITCHING_PROTOCOLS))
        return reply_audit_unavailable(req);
    upgrade_ctx_t *ctx = fg_xcalloc(1, sizeof *ctx);
    ctx->fn = fn;
    ctx->ud = ud;
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgraded, ctx);
    if (resp == NULL) {
        free(ctx);
        return FG_ERR;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(resp, "X-Request-Id", req->id);
    for (size_t i = 0; hdrs && hdrs[i] && hdrs[i + 1]; i += 2)
        MHD_add_response_header(resp, hdrs[i], hdrs[i + 1]);
    enum MHD_Result r = fg_http_queue(req->conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
    MHD_destroy_response(resp);
    if (r == MHD_YES)
        conn_enter(req->srv, req->conn_state, CONN_UPGRADED);
    req->replied = true;
    req->status = MHD_HTTP_SWITCHING_PROTOCOLS;
    return r == MHD_YES ? FG_OK : FG_ERR;
}

void fg_http_upgraded_close(fg_http_upgraded_t *u) {
    if (u == NULL)
        return;
    MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(u);
}

/* ---- the request lifecycle --------------------------------------------- */

/* A request begins when its request line is in (the URI log callback): the raw target is kept
 * for the checks MHD's decoding would hide. */
/* The peer's numeric address into out[len] ("unknown" when it cannot be had). */
static void client_address(struct MHD_Connection *conn, char *out, size_t len) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL ||
        getnameinfo(ci->client_addr,
                    ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in),
                    out, len, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(out, len, "unknown");
}

static conn_t *conn_state_of(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *sc =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return sc ? sc->socket_context : NULL;
}

static fg_req_t *req_new(fg_http_server_t *srv, struct MHD_Connection *conn, const char *raw) {
    fg_req_t *req = fg_xcalloc(1, sizeof *req);
    req->srv = srv;
    req->conn = conn;
    req->start_ns = fg_now_ns();
    req->raw_target = fg_xstrdup(raw ? raw : "");
    req->conn_state = conn_state_of(conn);
    if (req->conn_state) {
        req->conn_state->req = req;
        memcpy(req->client, req->conn_state->client, sizeof req->client);
    } else {
        client_address(conn, req->client, sizeof req->client);
    }
    return req;
}

static void conn_enter(fg_http_server_t *srv, conn_t *c, conn_phase_t phase) {
    if (c == NULL)
        return;
    pthread_mutex_lock(&srv->conns_mu);
    if (c->phase != CONN_SHUT && c->phase != CONN_UPGRADED) {
        c->phase = phase;
        c->since_ns = fg_now_ns();
    }
    pthread_mutex_unlock(&srv->conns_mu);
}

static void admit(fg_req_t *req, const char *url, const char *method, const char *version) {
    fg_http_server_t *srv = req->srv;
    struct MHD_Connection *conn = req->conn;
    req->admitted = true;
    req->http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
    conn_enter(srv, req->conn_state, CONN_BODY);
    req->method = fg_xstrdup(method);
    req->path = fg_xstrdup(url);
    const char *cid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (fg_request_id_valid(cid))
        memcpy(req->id, cid, strlen(cid) + 1);
    else
        fg_request_id_generate(req->id);
    req->match_rc = fg_router_match(srv->router, method, url, &req->match);
    req->body_limit = srv->opts.max_body_bytes;
    if (req->match.route && req->match.route->body_limit)
        req->body_limit = req->match.route->body_limit;
    fg_buf_init(&req->body, req->body_limit);
    req->refused_draining = atomic_load(&srv->draining);
    atomic_fetch_add(&srv->in_flight, 1);
    fg_metric_add(srv->m_in_flight, NULL, 1);
}

/* A declared Content-Length over the limit is refused before reading the body. */
static bool declared_too_big(const fg_req_t *req) {
    const char *cl =
        MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t n;
    if (cl == NULL || fg_parse_int64(cl, strlen(cl), 0, INT64_MAX, &n) != FG_OK)
        return false;
    return (uint64_t)n > req->body_limit;
}

/* Why the raw request target is refused, or NULL when it is fine: a NUL byte (%00) anywhere,
 * or a "." or ".." path segment, also when spelled with %2e. */
static const char *bad_target(const char *raw) {
    size_t path_len = strcspn(raw, "?#");
    for (const char *p = raw; (p = strchr(p, '%')) != NULL; p++) {
        if (p[1] == '0' && p[2] == '0')
            return "the request target holds a NUL byte (%00)";
    }
    const char *seg = raw;
    const char *end = raw + path_len;
    while (seg < end) {
        const char *next = memchr(seg, '/', (size_t)(end - seg));
        size_t len = next ? (size_t)(next - seg) : (size_t)(end - seg);
        size_t dots = 0;
        bool only_dots = true;
        for (size_t i = 0; i < len && only_dots;) {
            if (seg[i] == '.') {
                dots++;
                i++;
            } else if (len - i >= 3 && seg[i] == '%' && seg[i + 1] == '2' &&
                       (seg[i + 2] == 'e' || seg[i + 2] == 'E')) {
                dots++;
                i += 3;
            } else {
                only_dots = false;
            }
        }
        if (only_dots && (dots == 1 || dots == 2))
            return "the path holds a \".\" or \"..\" segment";
        seg += len + 1;
    }
    return NULL;
}

/* What the head checks need of the header fields, gathered in one pass over them. */
typedef struct {
    size_t bytes; /* the head's size as sent, near enough: each field and its ": " and CRLF */
    unsigned content_lengths, hosts;
    bool lengths_differ, transfer_encoding;
    const char *first_length;
} head_scan_t;

static enum MHD_Result scan_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
    (void)kind;
    head_scan_t *h = cls;
    h->bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->content_lengths++ == 0)
            h->first_length = value;
        else if (strcmp(h->first_length, value ? value : "") != 0)
            h->lengths_differ = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->transfer_encoding = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        h->hosts++;
    }
    return MHD_YES;
}

/* The head's checks, each a row: its problem and why, or NULL when it passes. */
typedef struct {
    fg_problem_t kind;
    const char *(*check)(const fg_req_t *req, const head_scan_t *h, char *why, size_t len);
} head_check_t;

static const char *target_too_long(const fg_req_t *req, const head_scan_t *h, char *why,
                                   size_t len) {
    (void)h;
    size_t n = strlen(req->raw_target);
    if (n <= TARGET_MAX)
        return NULL;
    snprintf(why, len, "the request target is %zu bytes; at most %u are accepted", n, TARGET_MAX);
    return why;
}

static const char *head_too_large(const fg_req_t *req, const head_scan_t *h, char *why,
                                  size_t len) {
    size_t n = strlen(req->method) + strlen(req->raw_target) + 12 + h->bytes;
    if (n <= HEAD_MAX)
        return NULL;
    snprintf(why, len, "the request head is about %zu bytes; at most %u are accepted", n, HEAD_MAX);
    return why;
}

static const char *target_unsafe(const fg_req_t *req, const head_scan_t *h, char *why, size_t len) {
    (void)h, (void)why, (void)len;
    return bad_target(req->raw_target);
}

/* RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host; a server answers 400 otherwise. */
static const char *host_unsafe(const fg_req_t *req, const head_scan_t *h, char *why, size_t len) {
    (void)why, (void)len;
    if (h->hosts > 1)
        return "the request has more than one Host header";
    if (h->hosts == 0 && req->http11)
        return "an HTTP/1.1 request must have a Host header";
    return NULL;
}

/* Why the body's framing is ambiguous (RFC 9112 §6.3), or NULL. Two equal Content-Length
 * headers are one length, as the RFC allows. */
static const char *framing_unsafe(const fg_req_t *req, const head_scan_t *h, char *why,
                                  size_t len) {
    (void)req, (void)why, (void)len;
    if (h->lengths_differ)
        return "the request has Content-Length headers that differ";
    if (h->transfer_encoding && h->content_lengths > 0)
        return "the request has both Content-Length and Transfer-Encoding";
    return NULL;
}

static const head_check_t head_checks[] = {
    {FG_PROBLEM_URI_TOO_LONG, target_too_long}, {FG_PROBLEM_HEADERS_TOO_LARGE, head_too_large},
    {FG_PROBLEM_BAD_REQUEST, target_unsafe},    {FG_PROBLEM_BAD_REQUEST, framing_unsafe},
    {FG_PROBLEM_BAD_REQUEST, host_unsafe},
};

/* Runs the head checks; on the first that fails, replies its problem and closes the connection
 * after the answer (its body, if any, is never read). True when one refused. */
static bool refuse_bad_head(fg_req_t *req) {
    char why[160];
    head_scan_t h = {0};
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, scan_field, &h);
    for (size_t i = 0; i < sizeof head_checks / sizeof head_checks[0]; i++) {
        const char *reason = head_checks[i].check(req, &h, why, sizeof why);
        if (reason) {
            fg_req_add_header(req, MHD_HTTP_HEADER_CONNECTION, "close");
            fg_reply_problem(req, head_checks[i].kind, "%s", reason);
            return true;
        }
    }
    return false;
}

/* JSON bodies come as application/json or a +json type (merge-patch+json, ...). */
static bool is_json_media_type(const char *ct) {
    if (ct == NULL)
        return false;
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return true;
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0;
}

static void refuse_body_too_big(fg_req_t *req) {
    fg_reply_problem(req, FG_PROBLEM_PAYLOAD_TOO_LARGE,
                     "the request body is larger than the %zu bytes this route accepts",
                     req->body_limit);
}

/* A CORS preflight of a known path: 204 with what the page may do, 403 for an origin that is
 * not allowed (cors.c). */
static void cors_preflight(fg_req_t *req, const char *origin) {
    if (!fg_cors_allowed(&req->srv->opts, origin)) {
        fg_reply_problem(req, FG_PROBLEM_FORBIDDEN,
                         "origin %.128s may not call fleetgate (cors.allowed_origins)", origin);
        return;
    }
    char age[16];
    snprintf(age, sizeof age, "%u", req->srv->opts.cors_max_age_s);
    fg_req_add_header(req, "Access-Control-Allow-Methods", req->match.allow);
    fg_req_add_header(req, "Access-Control-Allow-Headers", FG_CORS_ALLOW_HEADERS);
    fg_req_add_header(req, "Access-Control-Max-Age", age);
    fg_reply_static(req, 204, "text/plain", "", 0);
}

/* The route's handler, and a problem when it answered nothing. */
static void run_handler(fg_req_t *req) {
    const fg_route_t *route = req->match.route;
    int rc = route->handler(req);
    if (!req->replied && req->stream == NULL) {
        FG_LOG(FG_LOG_ERROR, req->id, "handler for %s %s returned %d without a reply", req->method,
               route->pattern, rc);
        fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the request failed inside fleetgate");
    }
}

/* ---- handlers off the connection's thread --------------------------------------------------
 *
 * MHD serves each connection on one worker thread, picked from the socket's number, and a
 * worker serves its connections one callback at a time. A write's handler waits on the member
 * clusters (a fan-out: milliseconds, up to its deadline), and done on the worker it stalls every
 * other connection of that worker, however idle the other workers are: under load, a client
 * whose connection shares a worker with another falls behind without bound (scale_bench at
 * 200/s: the two connections of one worker at p50 565 ms, the six others at 21 ms). MHD's manual
 * says as much: nothing that blocks belongs in its callbacks. So the handlers of writes
 * (fg_route_is_write) run on a pool of threads of their own: the access handler suspends the
 * connection and queues the request; a pool thread runs the handler, whose answer is held in the
 * request (send_response), and resumes the connection; MHD then calls the access handler again,
 * on the connection's thread, and it queues the held answer. Reads stay on the worker: they only
 * wait on Redis, briefly; so do streams and upgrades, which need it (a pooled request may not
 * park or upgrade). */

#define POOL_PER_WORKER 4 /* pool threads per HTTP worker: they mostly wait on the clusters */

unsigned fg_http_pool_threads(unsigned workers) {
    return (workers > 0 ? workers : 1) * POOL_PER_WORKER;
}

/* On the connection's thread: the connection sleeps until a pool thread has run the handler. */
static void pool_add(fg_req_t *req) {
    fg_http_server_t *srv = req->srv;
    req->pooled = true;
    MHD_suspend_connection(req->conn);
    pthread_mutex_lock(&srv->jobs_mu);
    req->next_job = NULL;
    if (srv->jobs_tail)
        srv->jobs_tail->next_job = req;
    else
        srv->jobs_head = req;
    srv->jobs_tail = req;
    pthread_cond_signal(&srv->jobs_cv);
    pthread_mutex_unlock(&srv->jobs_mu);
}

/* A pool thread: runs handlers until the server stops and no job is left. */
static void *pool_main(void *arg) {
    fg_http_server_t *srv = arg;
    for (;;) {
        pthread_mutex_lock(&srv->jobs_mu);
        while (srv->jobs_head == NULL && !srv->jobs_stopping)
            pthread_cond_wait(&srv->jobs_cv, &srv->jobs_mu);
        fg_req_t *req = srv->jobs_head;
        if (req != NULL) {
            srv->jobs_head = req->next_job;
            if (srv->jobs_head == NULL)
                srv->jobs_tail = NULL;
        }
        pthread_mutex_unlock(&srv->jobs_mu);
        if (req == NULL)
            return NULL;
        run_handler(req);
        atomic_store(&req->pool_done, true);
        MHD_resume_connection(req->conn); /* the last touch: the request is MHD's again */
    }
}

/* On the connection's thread, called again once resumed: the handler's answer goes out. */
static void pool_reply(fg_req_t *req) {
    if (!atomic_load(&req->pool_done))
        return; /* not resumed by the pool yet: nothing to send */
    req->pooled = false;
    struct MHD_Response *resp = req->held;
    req->held = NULL;
    if (resp != NULL && fg_http_queue(req->conn, req->held_status, resp) != MHD_YES)
        FG_LOG(FG_LOG_ERROR, req->id, "MHD refused the answer to %s %s", req->method, req->path);
    if (resp != NULL)
        MHD_destroy_response(resp);
}

/* Whether the pool runs, started at the server's first write (a server that only reads, as a
 * test's, never has one). False when no thread could start: the handler then runs in place. */
static bool pool_ready(fg_http_server_t *srv) {
    pthread_mutex_lock(&srv->jobs_mu);
    if (srv->npool == 0 && srv->pool == NULL && !srv->jobs_stopping) {
        srv->pool = fg_xcalloc(srv->pool_size, sizeof *srv->pool);
        while (srv->npool < srv->pool_size &&
               pthread_create(&srv->pool[srv->npool], NULL, pool_main, srv) == 0)
            srv->npool++;
        if (srv->npool < srv->pool_size)
            fg_log(FG_LOG_ERROR, NULL, "the handler pool has %u of its %u threads", srv->npool,
                   srv->pool_size);
    }
    bool ready = srv->npool > 0 && !srv->jobs_stopping;
    pthread_mutex_unlock(&srv->jobs_mu);
    return ready;
}

/* Lets the pool finish the handlers it has (each wakes its connection), then joins it: MHD must
 * hold no sleeping connection when it stops. */
static void pool_stop(fg_http_server_t *srv) {
    pthread_mutex_lock(&srv->jobs_mu);
    srv->jobs_stopping = true;
    pthread_cond_broadcast(&srv->jobs_cv);
    pthread_mutex_unlock(&srv->jobs_mu);
    for (unsigned i = 0; i < srv->npool; i++) /* no thread starts once stopping is set */
        pthread_join(srv->pool[i], NULL);
    srv->npool = 0;
    free(srv->pool);
    srv->pool = NULL;
}

/* The last call: generic checks, then the handler. */
static void dispatch(fg_req_t *req) {
    const fg_route_t *route = req->match.route;
    const char *origin = fg_req_header(req, "Origin");
    if (req->match_rc == FG_EINVAL &&
        fg_cors_is_preflight(req->method, origin,
                             fg_req_header(req, "Access-Control-Request-Method"))) {
        cors_preflight(req, origin);
        return;
    }
    if (req->refused_draining) {
        fg_reply_problem(req, FG_PROBLEM_SHUTTING_DOWN,
                         "fleetgate is draining; retry on another replica");
        return;
    }
    if (req->body_too_big) {
        refuse_body_too_big(req);
        return;
    }
    if (req->match_rc == FG_ENOENT) {
        fg_reply_problem(req, FG_PROBLEM_ROUTE_NOT_FOUND, "no route for %s %s", req->method,
                         req->path);
        return;
    }
    if (req->match_rc == FG_EINVAL) {
        fg_req_add_header(req, MHD_HTTP_HEADER_ALLOW, req->match.allow);
        fg_reply_problem(req, FG_PROBLEM_METHOD_NOT_ALLOWED, "%s is not allowed on %s; use %s",
                         req->method, req->path, req->match.allow);
        return;
    }
    if (req->srv->opts.gate && req->srv->opts.gate(req) != FG_OK) {
        if (!req->replied) {
            FG_LOG(FG_LOG_ERROR, req->id, "the gate refused %s %s without a reply", req->method,
                   route->pattern);
            fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the request failed inside fleetgate");
        }
        return;
    }
    if (route->body != FG_BODY_NONE) {
        const char *ct = fg_req_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (req->body.len == 0 && route->body == FG_BODY_JSON) {
            fg_reply_problem(req, FG_PROBLEM_BAD_REQUEST, "%s %s needs a JSON body", req->method,
                             route->pattern);
            return;
        }
        if (req->body.len > 0 && !is_json_media_type(ct)) {
            fg_reply_problem(req, FG_PROBLEM_UNSUPPORTED_MEDIA_TYPE,
                             "the body must be application/json (got %.64s)",
                             ct ? ct : "no Content-Type");
            return;
        }
        char why[256];
        if (req->body.len > 0 &&
            fg_json_load(req->body.data, req->body.len, &req->json, why, sizeof why) != FG_OK) {
            fg_reply_problem(req, FG_PROBLEM_MALFORMED_JSON, "the body is not valid JSON: %s", why);
            return;
        }
    }
    if (fg_route_is_write(route, req->method) && pool_ready(req->srv)) {
        pool_add(req);
        return;
    }
    run_handler(req);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    fg_http_server_t *srv = cls;
    fg_req_t *req = *con_cls;
    if (req == NULL) {
        req = req_new(srv, conn, url); /* no URI callback ran: cannot happen, but be whole */
        *con_cls = req;
    }
    if (!req->admitted) {
        admit(req, url, method, version);
        if (!refuse_bad_head(req) && !req->refused_draining && declared_too_big(req))
            refuse_body_too_big(req); /* answered now: MHD closes the connection after it */
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!req->replied && !req->body_too_big &&
            fg_buf_append(&req->body, upload, *upload_size) != FG_OK) {
            req->body_too_big = true;
            fg_buf_free(&req->body);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    conn_enter(srv, req->conn_state, CONN_BUSY);
    if (req->pooled)
        pool_reply(req);
    else if (req->stream != NULL && !req->replied)
        stream_resume(req);
    else if (!req->replied)
        dispatch(req);
    return MHD_YES;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    return req_new(cls, conn, uri);
}

/* Appends a member's opening (,"key":") given as a literal, then value shown as in every log
 * line (cleaned, cut at max bytes), then the closing quote: no formatting on this path. */
#define PUT_STR(b, key, value, max)                                                                \
    put_str(b, ",\"" key "\":\"", sizeof(",\"" key "\":\"") - 1, value, max)

static void put_str(fg_buf_t *b, const char *open, size_t open_len, const char *value, size_t max) {
    fg_buf_append(b, open, open_len);
    fg_buf_append_json_clean(b, value, strlen(value), max);
    fg_buf_append(b, "\"", 1);
}

static void put_u64(fg_buf_t *b, uint64_t v) {
    char digits[24];
    size_t at = sizeof digits;
    do {
        digits[--at] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    fg_buf_append(b, digits + at, sizeof digits - at);
}

/* One access line, formatted straight into a buffer (no JSON tree, and only the duration goes
 * through printf: this runs on every request) and handed to the log's batch. Same members, in
 * the same order, as every other log line. */
static void access_log(const fg_req_t *req, double seconds) {
    static const char head[] = "{\"ts\":\"", level[] = "\",\"level\":\"info\",\"msg\":\"access\"";
    char ts[40], ms[32];
    fg_buf_t b;
    fg_buf_init(&b, ACCESS_LINE_MAX);
    fg_buf_reserve(&b, 480); /* a usual line whole: one allocation */
    fg_format_time_ms(fg_wall_ms(), ts, sizeof ts);
    fg_buf_append(&b, head, sizeof head - 1);
    fg_buf_append(&b, ts, strlen(ts));
    fg_buf_append(&b, level, sizeof level - 1);
    PUT_STR(&b, "requestId", req->id, sizeof req->id);
    PUT_STR(&b, "method", req->method, 64);
    PUT_STR(&b, "client", req->client, sizeof req->client);
    PUT_STR(&b, "path", req->path, ACCESS_PATH_MAX);
    PUT_STR(&b, "route", fg_req_route_name(req), 128);
    if (req->principal)
        PUT_STR(&b, "principal", req->principal, 1024);
    fg_buf_append(&b, ",\"status\":", 10);
    put_u64(&b, req->status);
    fg_buf_append(&b, ",\"bytes\":", 9);
    put_u64(&b, req->bytes_out);
    /* durationMs as jansson prints a real with six significant digits */
    int n = snprintf(ms, sizeof ms, "%.6g", seconds * 1000.0);
    fg_buf_append(&b, ",\"durationMs\":", 14);
    fg_buf_append(&b, ms, (size_t)n);
    if (strpbrk(ms, ".e") == NULL)
        fg_buf_append(&b, ".0", 2);
    fg_buf_append(&b, "}\n", 2);
    if (b.data && b.data[b.len - 1] == '\n')
        fg_log_batched(b.data, b.len);
    fg_buf_free(&b);
}

/* The request metric's method label: a method of HTTP's table, else "other", so a client
 * sending made-up methods cannot grow the metric's series (and its lookups) without bound. */
static const char *const metric_methods[] = {"GET",    "HEAD",    "POST",    "PUT",  "PATCH",
                                             "DELETE", "OPTIONS", "CONNECT", "TRACE"};

static const char *metric_method(const char *method) {
    for (size_t i = 0; i < sizeof metric_methods / sizeof *metric_methods; i++) {
        if (strcmp(method, metric_methods[i]) == 0)
            return metric_methods[i];
    }
    return "other";
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    fg_http_server_t *srv = cls;
    fg_req_t *req = *con_cls;
    if (req == NULL)
        return;
    *con_cls = NULL;
    conn_enter(srv, req->conn_state, CONN_HEAD); /* the next request's head is awaited now */
    if (req->conn_state && req->conn_state->req == req)
        req->conn_state->req = NULL;
    if (!req->admitted) {
        /* MHD refused the head itself after the request line: fg_http_library_refusal()
         * answered, logged and counted it. */
        json_decref(req->later);
        free(req->raw_target);
        free(req);
        return;
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !req->replied)
        req->status = 499; /* the client went away before an answer: nginx's convention */
    if (req->stream != NULL)
        stream_completed(req, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    double seconds = (double)(fg_now_ns() - req->start_ns) / 1e9;
    char status[FG_INT_CHARS];
    fg_format_i64(req->status, status);
    const char *route = fg_req_route_name(req);
    const char *labels[] = {route, metric_method(req->method), status};
    fg_metric_add(srv->m_requests, labels, 1);
    fg_metric_observe(srv->m_duration, labels, seconds);
    fg_metric_add(srv->m_in_flight, NULL, -1);
    if (srv->opts.access_log)
        access_log(req, seconds);

    if (req->gate_state && req->gate_state_free)
        req->gate_state_free(req->gate_state);
    if (req->app_state && req->app_state_free)
        req->app_state_free(req->app_state);
    if (req->held != NULL)
        MHD_destroy_response(req->held);
    free(req->principal);
    free_headers(req);
    json_decref(req->json);
    json_decref(req->later);
    fg_buf_free(&req->body);
    fg_route_match_clear(&req->match);
    free(req->method);
    free(req->path);
    free(req->raw_target);
    free(req);
    atomic_fetch_sub(&srv->in_flight, 1);
}

/* MHD's messages. The one of an answer MHD is about to send by itself is kept for
 * fg_http_library_refusal(), which answers, logs and counts that request in fleetgate's words. */
static void mhd_logger(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    if (fg_http_mhd_note(msg))
        return;
    FG_LOG(FG_LOG_WARN, NULL, "libmicrohttpd: %s", msg);
}

/* The access line and metrics of a refusal no request of fleetgate's will complete (MHD refused
 * before the access handler saw the head): a stack request carries what is known to the one
 * access-line writer. */
static void record_early_refusal(fg_http_server_t *srv, const fg_req_t *r) {
    double seconds = (double)(fg_now_ns() - r->start_ns) / 1e9;
    char code[8];
    snprintf(code, sizeof code, "%u", r->status);
    const char *labels[] = {"unmatched", "-", code};
    fg_metric_add(srv->m_requests, labels, 1);
    fg_metric_observe(srv->m_duration, labels, seconds);
    if (srv->opts.access_log)
        access_log(r, seconds);
}

/* Writes a whole answer (status line, header lines, body) on conn's socket, as far as it goes
 * without blocking: what a fresh connection's send buffer always takes for an answer this
 * small. False on a TLS connection, whose bytes only the library can write. */
static bool send_now(struct MHD_Connection *conn, unsigned status, const char *id, const char *body,
                     size_t len) {
    const union MHD_ConnectionInfo *tls =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if ((tls != NULL && tls->tls_session != NULL) || fd == NULL)
        return false;
    fg_buf_t b;
    fg_buf_init(&b, 4096 + len);
    fg_buf_appendf(&b,
                   "HTTP/1.1 %u %s\r\nConnection: close\r\nContent-Type: "
                   "application/problem+json\r\nX-Request-Id: %s\r\nContent-Length: %zu\r\n\r\n",
                   status, MHD_get_reason_phrase_for(status), id, len);
    fg_buf_append(&b, body, len);
    for (size_t at = 0; b.data && at < b.len;) {
        ssize_t n = send(fd->connect_fd, b.data + at, b.len - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    fg_buf_free(&b);
    return true;
}

/* fleetgate's own daemons: the library's refusals are made fleetgate's only on their
 * connections. Another libmicrohttpd server in the process (a test's, kubesim's, which links
 * this file too) keeps its own answers, and its socket contexts are never read as conn_t. */
#define OWN_DAEMONS_MAX 64
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static fg_http_server_t *own_daemons[OWN_DAEMONS_MAX];

static void own_daemon_add(fg_http_server_t *srv) {
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; i < OWN_DAEMONS_MAX; i++)
        if (own_daemons[i] == NULL) {
            own_daemons[i] = srv;
            break;
        }
    pthread_mutex_unlock(&own_mu);
}

static void own_daemon_remove(fg_http_server_t *srv) {
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; i < OWN_DAEMONS_MAX; i++)
        if (own_daemons[i] == srv)
            own_daemons[i] = NULL;
    pthread_mutex_unlock(&own_mu);
}

/* conn's state when it is a connection of one of fleetgate's servers, else NULL. Its socket
 * context is only compared, never read, until found in a server's list of connections (with a
 * thread pool, MHD_CONNECTION_INFO_DAEMON names a worker, not the daemon fleetgate started). */
static conn_t *own_conn(struct MHD_Connection *conn) {
    const void *ctx = conn_state_of(conn);
    conn_t *found = NULL;
    pthread_mutex_lock(&own_mu);
    for (size_t i = 0; ctx && i < OWN_DAEMONS_MAX && found == NULL; i++) {
        fg_http_server_t *srv = own_daemons[i];
        if (srv == NULL)
            continue;
        pthread_mutex_lock(&srv->conns_mu);
        for (conn_t *c = srv->conns; c && found == NULL; c = c->next)
            if (c == ctx)
                found = c;
        pthread_mutex_unlock(&srv->conns_mu);
    }
    pthread_mutex_unlock(&own_mu);
    return found;
}

fg_refusal_how_t fg_http_library_refusal(struct MHD_Connection *conn, unsigned status,
                                         struct MHD_Response **out) {
    conn_t *c = own_conn(conn);
    fg_problem_t kind;
    char detail[256];
    bool now;
    if (c == NULL ||
        fg_http_mhd_problem(status, HEAD_MAX, &kind, detail, sizeof detail, &now) != FG_OK)
        return FG_REFUSAL_LIBRARY;
    /* The request as far as MHD read it. Admitted (a bad chunk in its body): the request itself
     * records the answer at its completion. Only its line parsed (c->req, freed by the
     * completion without a line) or not even that: recorded here. */
    fg_req_t early = {.srv = c->srv, .conn = conn, .method = "-", .path = "-"};
    fg_req_t *r = c->req != NULL && c->req->admitted ? c->req : &early;
    char instance[FG_REQUEST_ID_MAX + 32];
    const char *where = instance;
    if (r == &early) {
        fg_request_id_generate(early.id);
        early.start_ns = c->req ? c->req->start_ns : fg_now_ns();
        if (c->req != NULL) {
            memcpy(early.client, c->req->client, sizeof early.client);
            early.path = c->req->raw_target;
            where = early.path;
        } else {
            memcpy(early.client, c->client, sizeof early.client);
            snprintf(instance, sizeof instance, "urn:fleetgate:request:%s", early.id);
        }
    } else {
        where = r->path;
    }
    json_t *p = fg_problem_new(kind, detail, r->id, where);
    size_t len;
    char *text = fg_json_dumps(p, &len);
    json_decref(p);
    fg_refusal_how_t how = FG_REFUSAL_QUEUE;
    if (now && send_now(conn, status, r->id, text, len)) {
        free(text);
        how = FG_REFUSAL_SENT;
    } else {
        *out = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (*out == NULL) {
            free(text);
            return FG_REFUSAL_LIBRARY;
        }
        MHD_add_response_header(*out, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
        MHD_add_response_header(*out, "X-Request-Id", r->id);
    }
    r->replied = true;
    r->status = fg_problem_status(kind);
    r->bytes_out = len;
    if (r == &early)
        record_early_refusal(c->srv, &early);
    return how;
}

/* ---- slow clients ------------------------------------------------------ */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    fg_http_server_t *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_t *c = fg_xcalloc(1, sizeof *c);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
        c->phase = CONN_HEAD;
        c->since_ns = fg_now_ns();
        c->srv = srv;
        client_address(conn, c->client, sizeof c->client);
        pthread_mutex_lock(&srv->conns_mu);
        c->next = srv->conns;
        if (srv->conns)
            srv->conns->prev = c;
        srv->conns = c;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = c;
        return;
    }
    atomic_fetch_sub(&srv->conns_open, 1); /* its place under limits.max_connections */
    conn_t *c = *socket_context;
    if (c == NULL)
        return;
    pthread_mutex_lock(&srv->conns_mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&srv->conns_mu);
    *socket_context = NULL;
    free(c);
}

/* Shuts down the connections that took too long over their head or body; how many. Called
 * with conns_mu held. MHD sees the end of the stream and closes them in its own thread. */
static unsigned shut_slow(fg_http_server_t *srv, uint64_t now) {
    static const conn_phase_t phases[] = {CONN_HEAD, CONN_BODY};
    uint64_t limits[] = {(uint64_t)srv->opts.header_timeout_s * 1000000000ull,
                         (uint64_t)srv->opts.body_timeout_s * 1000000000ull};
    unsigned n = 0;
    for (conn_t *c = srv->conns; c; c = c->next) {
        for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
            if (c->phase == phases[i] && limits[i] > 0 && c->fd >= 0 &&
                now - c->since_ns > limits[i]) {
                shutdown(c->fd, SHUT_RDWR);
                c->phase = CONN_SHUT;
                n++;
            }
        }
    }
    return n;
}

static void *watchdog_main(void *arg) {
    fg_http_server_t *srv = arg;
    static const char *const head[] = {"head"};
    pthread_mutex_lock(&srv->conns_mu);
    while (!srv->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250000000; /* a quarter second: the bound is kept within that */
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&srv->stop_cv, &srv->conns_mu, &until);
        if (srv->stopping)
            break;
        unsigned n = shut_slow(srv, fg_now_ns());
        if (n > 0) {
            fg_metric_add(srv->m_slow_closed, head, n);
            /* One line per sweep, not per connection: a slowloris must not flood the log. */
            FG_LOG(FG_LOG_INFO, NULL,
                   "closed %u connection(s) that did not send a whole request head within %us "
                   "or body within %us",
                   n, srv->opts.header_timeout_s, srv->opts.body_timeout_s);
        }
    }
    pthread_mutex_unlock(&srv->conns_mu);
    return NULL;
}

/* ---- server lifecycle -------------------------------------------------- */

/* One MHD daemon on host:port with every callback of the server; with cert_pem and key_pem it
 * speaks TLS (GnuTLS inside libmicrohttpd: suspend/resume and upgrades work the same, MHD
 * relays an upgraded TLS socket through a socket pair). The socket is fleetgate's (listen.c),
 * MHD only serves the connections accepted on it. FG_EIO when it cannot listen. */
static int start_listener(fg_http_server_t *srv, const char *host, uint16_t port,
                          const char *cert_pem, const char *key_pem, struct MHD_Daemon **out,
                          fg_http_listener_t **listener, uint16_t *bound) {
    const fg_http_options_t *opts = &srv->opts;
    if (fg_http_listener_open(host, port, listener, bound) != FG_OK)
        return FG_EIO;
    /* MHD_USE_ITC: a worker learns of a connection handed to it at once, not at its next wake. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET |
                     MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key_pem},
                                   {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert_pem},
                                   {MHD_OPTION_END, 0, NULL}};
    if (cert_pem) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            fg_log(FG_LOG_ERROR, NULL, "this libmicrohttpd is built without TLS");
            return FG_EIO;
        }
        flags |= MHD_USE_TLS;
    } else {
        tls[0].option = MHD_OPTION_END;
    }
    /* The limit is listen.c's, over both listeners. MHD's is out of reach (listen.c says why):
     * each worker's share of it is twice the whole limit, room for every connection on one
     * worker plus the ones closed and not yet cleaned up. */
    unsigned workers = opts->workers > 1 ? opts->workers : 1;
    unsigned mhd_limit = opts->max_connections * 2 * workers;
    *out = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, srv,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_POOL_BYTES, MHD_OPTION_THREAD_POOL_SIZE,
        workers > 1 ? workers : 0, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, opts->connection_timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        opts->max_connections_per_client, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (*out == NULL) {
        fg_log(FG_LOG_ERROR, NULL, "cannot serve %s:%u%s", host, (unsigned)port,
               cert_pem ? " with TLS (a certificate and key that do not load or match?)" : "");
        return FG_EIO;
    }
    return fg_http_listener_serve(*listener, *out, &srv->conns_open, opts->max_connections) == FG_OK
               ? FG_OK
               : FG_EIO;
}

int fg_http_server_start(fg_http_server_t **out, const fg_http_options_t *opts,
                         const fg_route_t *routes, size_t nroutes) {
    int rc = FG_OK;
    fg_http_server_t *srv = fg_xcalloc(1, sizeof *srv);
    srv->opts = *opts;
    srv->host = fg_xstrdup(opts->host);
    srv->opts.host = srv->host;
    srv->opts.tls_cert_pem = srv->opts.tls_key_pem = NULL; /* borrowed only during the start */
    atomic_init(&srv->draining, false);
    atomic_init(&srv->in_flight, 0);
    atomic_init(&srv->conns_open, 0);
    pthread_mutex_init(&srv->conns_mu, NULL);
    pthread_cond_init(&srv->stop_cv, NULL);
    pthread_mutex_init(&srv->jobs_mu, NULL);
    pthread_cond_init(&srv->jobs_cv, NULL);

    static const char *const req_labels[] = {"route", "method", "status", NULL};
    srv->m_requests = fg_metrics_register("fleetgate_http_requests_total",
                                          "HTTP requests answered, by route, method and status.",
                                          FG_METRIC_COUNTER, req_labels);
    srv->m_duration = fg_metrics_register(
        "fleetgate_http_request_duration_seconds",
        "Time from a request's headers to its completion, by route, method and status.",
        FG_METRIC_HISTOGRAM, req_labels);
    srv->m_in_flight =
        fg_metrics_register("fleetgate_http_requests_in_flight",
                            "Requests received and not yet completed.", FG_METRIC_GAUGE, NULL);
    fg_metric_add(srv->m_in_flight, NULL, 0);
    static const char *const phase_labels[] = {"phase", NULL};
    srv->m_slow_closed = fg_metrics_register(
        "fleetgate_http_slow_clients_closed_total",
        "Connections closed because a request head or body took longer than its bound.",
        FG_METRIC_COUNTER, phase_labels);

    if (fg_http_mhd_answers_init() != FG_OK) {
        rc = FG_ERR;
        goto out;
    }
    if (fg_router_new(&srv->router, routes, nroutes) != FG_OK) {
        rc = FG_EINVAL;
        goto out;
    }

    srv->pool_size = fg_http_pool_threads(opts->workers);
    own_daemon_add(srv); /* before the listeners accept: their refusals are fleetgate's */
    if (start_listener(srv, opts->host, opts->port, NULL, NULL, &srv->mhd, &srv->listener,
                       &srv->port) != FG_OK ||
        (opts->tls_cert_pem &&
         start_listener(srv, opts->tls_host, opts->tls_port, opts->tls_cert_pem, opts->tls_key_pem,
                        &srv->mhd_tls, &srv->listener_tls, &srv->tls_port) != FG_OK)) {
        rc = FG_EIO;
        goto out;
    }
    if (opts->header_timeout_s > 0 || opts->body_timeout_s > 0) {
        if (pthread_create(&srv->watchdog, NULL, watchdog_main, srv) != 0) {
            fg_log(FG_LOG_ERROR, NULL, "cannot start the slow-client watchdog");
            rc = FG_ERR;
            goto out;
        }
        srv->watchdog_running = true;
    }
out:
    if (rc != FG_OK) {
        fg_http_server_free(srv);
        return rc;
    }
    *out = srv;
    return FG_OK;
}

uint16_t fg_http_server_port(const fg_http_server_t *s) {
    return s->port;
}

uint16_t fg_http_server_tls_port(const fg_http_server_t *s) {
    return s->mhd_tls ? s->tls_port : 0;
}

void fg_http_server_begin_drain(fg_http_server_t *s) {
    if (atomic_exchange(&s->draining, true))
        return;
    fg_http_listener_close(s->listener);
    fg_http_listener_close(s->listener_tls);
    s->listener = s->listener_tls = NULL;
}

bool fg_http_server_draining(const fg_http_server_t *s) {
    return atomic_load(&s->draining);
}

unsigned fg_http_server_in_flight(const fg_http_server_t *s) {
    return atomic_load(&s->in_flight);
}

void fg_http_server_free(fg_http_server_t *s) {
    if (s == NULL)
        return;
    if (s->watchdog_running) {
        pthread_mutex_lock(&s->conns_mu);
        s->stopping = true;
        pthread_cond_signal(&s->stop_cv);
        pthread_mutex_unlock(&s->conns_mu);
        pthread_join(s->watchdog, NULL);
    }
    fg_http_listener_close(s->listener); /* no new connection reaches a stopping daemon */
    fg_http_listener_close(s->listener_tls);
    pool_stop(s);
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    if (s->mhd_tls)
        MHD_stop_daemon(s->mhd_tls);
    own_daemon_remove(s);
    pthread_cond_destroy(&s->stop_cv);
    pthread_mutex_destroy(&s->conns_mu);
    pthread_cond_destroy(&s->jobs_cv);
    pthread_mutex_destroy(&s->jobs_mu);
    fg_router_free(s->router);
    free(s->host);
    free(s);
}
