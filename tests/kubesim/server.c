/* server: libmicrohttpd glue. One HTTPS daemon per cluster, thread per connection (a watch
 * blocks in its content reader on the store's condition variable, and each connection's thread
 * carries it). The access handler collects the body, answers on the call after it (keep-alive in
 * MHD 0.9.75 needs that), turns the request into a ks_req_t and the ks_resp_t into a response. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <microhttpd.h>

#include "ks.h"
#include "ks_server.h"

#define MAX_BODY      (3 * 1024 * 1024)
#define WATCH_POLL_MS 500

typedef struct {
    fg_buf_t body;
    bool too_big;
} conn_ctx_t;

typedef struct {
    ks_watch_t *w;
    ks_stream_t gen; /* used when w is NULL */
    ks_cluster_t *c;
    struct MHD_Connection *conn;
    fg_buf_t pending;
    size_t off;
} stream_t;

struct ks_server {
    struct MHD_Daemon *d;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    ks_req_t *req = cls;
    (void)kind;
    if (req->nquery < KS_MAX_QUERY) {
        req->keys[req->nquery] = key;
        req->values[req->nquery] = value;
        req->nquery++;
    }
    return MHD_YES;
}

/* True when the peer has hung up (checked while a watch is idle). */
static bool peer_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_t *s = cls;
    (void)pos;
    while (s->off == s->pending.len) {
        fg_buf_reset(&s->pending);
        s->off = 0;
        if (s->c->stopping)
            return MHD_CONTENT_READER_END_OF_STREAM;
        int rc = s->w != NULL ? ks_watch_next(s->w, &s->pending, WATCH_POLL_MS)
                              : s->gen.next(s->gen.st, &s->pending, WATCH_POLL_MS);
        if (rc != FG_OK)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (s->pending.len == 0 && peer_gone(s->conn))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->pending.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->pending.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_t *s = cls;
    ks_watch_free(s->w);
    if (s->gen.free != NULL)
        s->gen.free(s->gen.st);
    fg_buf_free(&s->pending);
    free(s);
}

/* An upgraded connection (exec): its session runs on a thread of its own, because in thread-per-
 * connection mode with TLS the connection's thread must keep forwarding between the TLS stream
 * and the socket pair the handler gets. */
typedef struct {
    ks_upgrade_t up;
    int fd;
    char *extra;
    size_t extra_len;
    struct MHD_UpgradeResponseHandle *urh;
} upgraded_t;

static void *upgraded_main(void *arg) {
    upgraded_t *u = arg;
    u->up.run(u->up.st, u->fd, u->extra, u->extra_len);
    MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(u->extra);
    free(u);
    return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock,
                       struct MHD_UpgradeResponseHandle *urh) {
    upgraded_t *u = cls;
    pthread_t th;
    (void)conn;
    (void)req_cls;
    u->fd = sock;
    u->urh = urh;
    u->extra = extra_in_size ? fg_xmalloc(extra_in_size) : NULL;
    if (extra_in_size)
        memcpy(u->extra, extra_in, extra_in_size);
    u->extra_len = extra_in_size;
    if (pthread_create(&th, NULL, upgraded_main, u) != 0) {
        u->up.free(u->up.st);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        free(u->extra);
        free(u);
        return;
    }
    pthread_detach(th);
}

static enum MHD_Result reply_upgrade(struct MHD_Connection *conn, ks_resp_t *r) {
    upgraded_t *u = fg_xcalloc(1, sizeof(*u));
    u->up = r->upgrade;
    r->upgrade.run = NULL; /* the upgrade owns st now */
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, u);
    if (resp == NULL) {
        u->up.free(u->up.st);
        free(u);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Upgrade", "websocket");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", u->up.accept);
    MHD_add_response_header(resp, "Sec-WebSocket-Protocol", u->up.protocol);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result reply(struct MHD_Connection *conn, ks_cluster_t *c, ks_resp_t *r) {
    struct MHD_Response *resp;
    if (r->drop)
        return MHD_NO; /* fault "down": the connection closes without an answer */
    if (r->upgrade.run != NULL)
        return reply_upgrade(conn, r);
    if (r->watch != NULL || r->stream.next != NULL) {
        stream_t *s = fg_xcalloc(1, sizeof(*s));
        s->w = r->watch;
        s->gen = r->stream;
        s->c = c;
        s->conn = conn;
        fg_buf_init(&s->pending, (size_t)256 << 20);
        r->watch = NULL;
        r->stream.next = NULL;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s,
                                                 stream_free);
    } else {
        resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        r->body = NULL;
    }
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)r->code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
    ks_cluster_t *c = cls;
    conn_ctx_t *ctx = *con_cls;
    (void)version;
    if (ctx == NULL) {
        ctx = fg_xcalloc(1, sizeof(*ctx));
        fg_buf_init(&ctx->body, MAX_BODY);
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (fg_buf_append(&ctx->body, upload_data, *upload_size) != FG_OK)
            ctx->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    ks_resp_t r;
    ks_req_t req = {
        .method = method,
        .path = url,
        .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
        .user_agent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"),
        .accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept"),
        .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
        .ws_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Key"),
        .ws_protocol = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Protocol"),
        .body = ctx->body.data,
        .body_len = ctx->body.len,
    };
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_arg, &req);
    if (ctx->too_big) {
        memset(&r, 0, sizeof(r));
        ks_status_reply(&r, 413, "RequestEntityTooLarge", "the request body is too large", NULL,
                        NULL, NULL, NULL);
    } else {
        ks_handle(c, &req, &r);
    }
    enum MHD_Result ret = reply(conn, c, &r);
    ks_resp_free(&r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    conn_ctx_t *ctx = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (ctx == NULL)
        return;
    fg_buf_free(&ctx->body);
    free(ctx);
    *con_cls = NULL;
}

int ks_server_start(ks_cluster_t *c, const char *cert_pem, const char *key_pem, ks_server_t **out) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(c->port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_TLS | MHD_ALLOW_UPGRADE;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, c->port, NULL, NULL, on_request, c, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_HTTPS_MEM_CERT, cert_pem,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)2000, MHD_OPTION_END);
    if (d == NULL)
        return FG_EIO;
    ks_server_t *s = fg_xcalloc(1, sizeof(*s));
    s->d = d;
    *out = s;
    return FG_OK;
}

void ks_server_stop(ks_server_t *s) {
    if (s == NULL)
        return;
    MHD_stop_daemon(s->d);
    free(s);
}
