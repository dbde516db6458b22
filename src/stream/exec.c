/* stream/exec.c: exec sessions on the stream loop. The client's WebSocket (an upgraded MHD
 * socket) and the cluster's (kube.h's fg_kube_conn_t, TLS through curl) are relayed frame by
 * frame: a client frame is unmasked and sent on with a zero mask (fleetgate is the cluster's
 * client; the mask protects browsers' caches, not us), a cluster frame goes to the client byte
 * for byte. Frames are parsed both ways (ws.c, strictly), so a protocol error ends the session,
 * a close frame from either side ends both, and the status on channel 3 gives the exit code
 * for the audit line. Buffers are bounded: when one is full its reader stops reading.
 * Everything here runs on the loop thread. */
#include "stream_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define XBUF          (128u * 1024u)
#define MAX_PAYLOAD   (64u * 1024u)
#define CLOSE_GRACE_S 1
#define CONNECT_MS    10000L
#define DEFAULT_IDLE  600
#define DEFAULT_MAX   14400

typedef struct {
    uint8_t *data;
    size_t len;
} xbuf_t;

struct fg_exec {
    ep_kind_t kind; /* EP_EXEC: first, for the epoll entry */
    fg_streams_t *ss;
    fg_kube_conn_t *up;
    int ufd, cfd;
    fg_http_upgraded_t *u;
    fg_exec_opts_t opts;
    json_t *audit;
    xbuf_t cin, uin, cout, uout; /* from/to the client, from/to the cluster */
    uint64_t start_ns, last_ns, close_by_ns;
    uint64_t bytes_in, bytes_out; /* payload bytes client -> cluster, cluster -> client */
    int exit_code;                /* -1 until the status came */
    bool closing;                 /* a close frame passed, or the cluster closed: flush, then end */
    bool up_eof;                  /* the cluster's side is closed */
    const char *end;
    fg_exec_t *prev, *next;
};

static void xbuf_eat(xbuf_t *b, size_t n) {
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

/* ---- the end ------------------------------------------------------------- */

static void unlink_exec(fg_streams_t *ss, fg_exec_t *x) {
    if (x->prev)
        x->prev->next = x->next;
    else if (ss->execs == x)
        ss->execs = x->next;
    if (x->next)
        x->next->prev = x->prev;
}

static void exec_free(fg_exec_t *x) {
    fg_kube_conn_free(x->up);
    json_decref(x->audit);
    free(x->cin.data);
    free(x->uin.data);
    free(x->cout.data);
    free(x->uout.data);
    free(x);
}

static void finish(fg_streams_t *ss, fg_exec_t *x, const char *why) {
    if (x->end == NULL)
        x->end = why;
    epoll_ctl(ss->epfd, EPOLL_CTL_DEL, x->cfd, NULL);
    epoll_ctl(ss->epfd, EPOLL_CTL_DEL, x->ufd, NULL);
    /* Best effort: a close frame to each side (1001: going away), the client's being the reply
     * to its own close frame when it sent one. */
    static const uint8_t to_client[] = {0x88, 0x02, 0x03, 0xE9};
    static const uint8_t to_cluster[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE9};
    if (strcmp(x->end, "client-gone") != 0 &&
        send(x->cfd, to_client, sizeof to_client, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the client is gone already */
    }
    size_t n;
    if (!x->up_eof && strcmp(x->end, "cluster-closed") != 0)
        fg_kube_conn_send(x->up, to_cluster, sizeof to_cluster, &n);
    fg_kube_conn_free(x->up); /* the cluster sees the connection end: no orphaned shell */
    x->up = NULL;
    fg_http_upgraded_close(x->u);
    unlink_exec(ss, x);
    char ts[40];
    fg_format_time_ms(fg_wall_ms(), ts, sizeof ts);
    json_object_set_new(x->audit, "end", json_string(ts));
    json_object_set_new(x->audit, "exitCode",
                        x->exit_code >= 0 ? json_integer(x->exit_code) : json_null());
    json_object_set_new(x->audit, "bytesIn", json_integer((json_int_t)x->bytes_in));
    json_object_set_new(x->audit, "bytesOut", json_integer((json_int_t)x->bytes_out));
    json_object_set_new(x->audit, "endedBy", json_string(x->end));
    if (x->opts.write_audit)
        x->opts.write_audit(x->opts.ud, x->audit);
    exec_free(x);
    atomic_fetch_sub(&ss->nexecs, 1);
}

/* ---- frames ------------------------------------------------------------- */

/* The exit code from the v4/v5 status on channel 3 (a Kubernetes Status). */
static void read_status(fg_exec_t *x, const uint8_t *p, size_t len) {
    json_t *st = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, NULL);
    if (st == NULL)
        return;
    const char *status = json_string_value(json_object_get(st, "status"));
    if (status && strcmp(status, "Success") == 0)
        x->exit_code = 0;
    json_t *causes = json_object_get(json_object_get(st, "details"), "causes"), *c;
    size_t i;
    json_array_foreach(causes, i, c) {
        const char *reason = json_string_value(json_object_get(c, "reason"));
        const char *msg = json_string_value(json_object_get(c, "message"));
        int64_t code;
        if (reason && msg && strcmp(reason, "ExitCode") == 0 &&
            fg_parse_int64(msg, strlen(msg), 0, 255, &code) == FG_OK)
            x->exit_code = (int)code;
    }
    json_decref(st);
}

/* Moves whole client frames to the cluster's buffer. false: a protocol error. */
static bool relay_client(fg_exec_t *x) {
    for (;;) {
        fg_ws_frame_t f;
        int rc = fg_ws_parse(x->cin.data, x->cin.len, true, MAX_PAYLOAD, &f);
        if (rc == FG_EAGAIN)
            return true;
        if (rc != FG_OK)
            return false;
        size_t plen = (size_t)f.payload_len, need = FG_WS_MAX_HEADER + plen;
        if (XBUF - x->uout.len < need)
            return true; /* the cluster is slow: stop here, the client waits */
        static const uint8_t zero[4] = {0, 0, 0, 0};
        uint8_t *payload = x->cin.data + f.header_len;
        fg_ws_mask(payload, plen, f.mask, 0);
        size_t h = fg_ws_header(x->uout.data + x->uout.len, f.fin, f.opcode, plen, zero);
        memcpy(x->uout.data + x->uout.len + h, payload, plen);
        x->uout.len += h + plen;
        if (f.opcode == FG_WS_CLOSE && !x->closing) {
            x->closing = true;
            x->end = "client-closed";
            x->close_by_ns = fg_now_ns() + CLOSE_GRACE_S * 1000000000ull;
        } else if (f.opcode <= FG_WS_BINARY)
            x->bytes_in += plen;
        xbuf_eat(&x->cin, f.header_len + plen);
    }
}

/* Moves whole cluster frames to the client's buffer, byte for byte. */
static bool relay_cluster(fg_exec_t *x) {
    for (;;) {
        fg_ws_frame_t f;
        int rc = fg_ws_parse(x->uin.data, x->uin.len, false, MAX_PAYLOAD, &f);
        if (rc == FG_EAGAIN)
            return true;
        if (rc != FG_OK)
            return false;
        size_t total = f.header_len + (size_t)f.payload_len;
        if (XBUF - x->cout.len < total)
            return true;
        const uint8_t *payload = x->uin.data + f.header_len;
        if (f.opcode == FG_WS_BINARY && f.payload_len > 1 && payload[0] == 3)
            read_status(x, payload + 1, (size_t)f.payload_len - 1);
        if (f.opcode == FG_WS_CLOSE && !x->closing) {
            x->closing = true;
            x->end = "cluster-closed";
            x->close_by_ns = fg_now_ns() + CLOSE_GRACE_S * 1000000000ull;
        } else if (f.opcode <= FG_WS_BINARY)
            x->bytes_out += f.payload_len;
        memcpy(x->cout.data + x->cout.len, x->uin.data, total);
        x->cout.len += total;
        xbuf_eat(&x->uin, total);
    }
}

/* ---- moving bytes ------------------------------------------------------- */

/* Reads, relays and writes until nothing moves. Returns the reason to end, or NULL. */
static const char *pump(fg_exec_t *x) {
    for (bool moved = true; moved;) {
        moved = false;
        while (x->cin.len < XBUF) {
            ssize_t r = recv(x->cfd, x->cin.data + x->cin.len, XBUF - x->cin.len, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                return "client-gone";
            if (r < 0)
                break;
            x->cin.len += (size_t)r;
            moved = true;
        }
        while (!x->up_eof && x->uin.len < XBUF) {
            size_t n = 0;
            int rc = fg_kube_conn_recv(x->up, x->uin.data + x->uin.len, XBUF - x->uin.len, &n);
            if (rc == FG_EAGAIN)
                break;
            if (rc != FG_OK || n == 0) {
                /* The cluster is done (often right after its status and close frame): what it
                 * sent still goes to the client, within the grace time. */
                x->up_eof = true;
                if (!x->closing) {
                    x->closing = true;
                    x->end = "cluster-gone";
                    x->close_by_ns = fg_now_ns() + CLOSE_GRACE_S * 1000000000ull;
                }
                break;
            }
            x->uin.len += n;
            moved = true;
        }
        if (!relay_client(x))
            return "client-protocol-error";
        if (!relay_cluster(x))
            return "cluster-protocol-error";
        if (x->cout.len > 0) {
            ssize_t w = send(x->cfd, x->cout.data, x->cout.len, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return "client-gone";
            if (w > 0) {
                xbuf_eat(&x->cout, (size_t)w);
                moved = true;
            }
        }
        if (x->uout.len > 0 && !x->up_eof) {
            size_t n = 0;
            int rc = fg_kube_conn_send(x->up, x->uout.data, x->uout.len, &n);
            if (rc != FG_OK && rc != FG_EAGAIN)
                return "cluster-gone";
            if (n > 0) {
                xbuf_eat(&x->uout, n);
                moved = true;
            }
        }
    }
    if (x->closing && x->cout.len == 0 && (x->uout.len == 0 || x->up_eof))
        return x->end; /* the close frame went on: the other side is told, end both */
    return NULL;
}

static void watch(fg_streams_t *ss, fg_exec_t *x, int op) {
    struct epoll_event ec = {.events = EPOLLRDHUP, .data.ptr = x};
    struct epoll_event eu = {.events = 0, .data.ptr = x};
    if (x->cin.len < XBUF)
        ec.events |= EPOLLIN;
    if (x->cout.len > 0)
        ec.events |= EPOLLOUT;
    if (x->uin.len < XBUF && !x->up_eof)
        eu.events |= EPOLLIN;
    if (x->uout.len > 0)
        eu.events |= EPOLLOUT;
    epoll_ctl(ss->epfd, op, x->cfd, &ec);
    epoll_ctl(ss->epfd, op, x->ufd, &eu);
}

void fg_exec_event(fg_streams_t *ss, fg_exec_t *x) {
    x->last_ns = fg_now_ns();
    const char *why = pump(x);
    if (why != NULL) {
        finish(ss, x, why);
        return;
    }
    watch(ss, x, EPOLL_CTL_MOD);
}

void fg_exec_begin(fg_streams_t *ss, fg_exec_t *x) {
    x->next = ss->execs;
    if (ss->execs)
        ss->execs->prev = x;
    ss->execs = x;
    watch(ss, x, EPOLL_CTL_ADD);
    fg_exec_event(ss, x); /* bytes may have come with the handshake */
}

void fg_exec_tick(fg_streams_t *ss) {
    uint64_t now = fg_now_ns();
    fg_exec_t *next;
    for (fg_exec_t *x = ss->execs; x != NULL; x = next) {
        next = x->next;
        if (x->closing && now >= x->close_by_ns)
            finish(ss, x, x->end);
        else if (now - x->last_ns > (uint64_t)x->opts.idle_timeout_s * 1000000000ull)
            finish(ss, x, "idle-timeout");
        else if (now - x->start_ns > (uint64_t)x->opts.max_session_s * 1000000000ull)
            finish(ss, x, "max-session");
    }
}

void fg_exec_drain(fg_streams_t *ss) {
    while (ss->execs != NULL)
        finish(ss, ss->execs, "drain");
}

void fg_exec_free_all(fg_streams_t *ss) {
    fg_exec_drain(ss);
}

unsigned fg_streams_execs(const fg_streams_t *ss) {
    return atomic_load(&ss->nexecs);
}

/* ---- handing a request over ---------------------------------------------- */

int fg_exec_connect_or_reply(fg_streams_t *ss, fg_req_t *req, const char *cluster, const char *path,
                             const char *protocols, char *chosen, fg_exec_t **out) {
    fg_kube_client_t *client = fg_stream_client(ss, cluster);
    if (client == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no cluster %s is configured",
                                cluster) == FG_OK
                   ? FG_ENOENT
                   : FG_ERR;
    fg_kube_conn_t *up = NULL;
    fg_kube_error_t err;
    int rc = fg_kube_upgrade(client, path, protocols, CONNECT_MS, &up, chosen, &err);
    if (rc != FG_OK) {
        if (err.http_code == 404)
            fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "%s", err.message);
        else if (err.http_code == 400 || err.http_code == 422) {
            json_t *ext = json_pack("{s:[{s:s,s:s}]}", "errors", "parameter", "container", "detail",
                                    err.message);
            fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext, "%s", err.message);
        } else
            fg_reply_problem(
                req, rc == FG_ETIMEOUT ? FG_PROBLEM_UPSTREAM_TIMEOUT : FG_PROBLEM_UPSTREAM_ERROR,
                "cluster %s: %s: %s", cluster, err.reason, err.message);
        return rc;
    }
    fg_exec_t *x = fg_xcalloc(1, sizeof *x);
    x->kind = EP_EXEC;
    x->ss = ss;
    x->up = up;
    x->ufd = fg_kube_conn_fd(up);
    x->cfd = -1;
    x->exit_code = -1;
    *out = x;
    return FG_OK;
}

static void on_upgraded(void *ud, int fd, const char *extra, size_t extra_len,
                        fg_http_upgraded_t *u) {
    fg_exec_t *x = ud;
    x->cfd = fd;
    x->u = u;
    size_t take = extra_len < XBUF ? extra_len : XBUF;
    memcpy(x->cin.data, extra, take);
    x->cin.len = take;
    x->start_ns = x->last_ns = fg_now_ns();
    fg_stream_post(x->ss, CMD_EXEC_START, x);
}

int fg_exec_start(fg_streams_t *ss, fg_req_t *req, fg_exec_t *x, const char *accept,
                  const char *protocol, json_t *base, const fg_exec_opts_t *opts) {
    x->opts = *opts;
    if (x->opts.idle_timeout_s <= 0)
        x->opts.idle_timeout_s = DEFAULT_IDLE;
    if (x->opts.max_session_s <= 0)
        x->opts.max_session_s = DEFAULT_MAX;
    x->audit = base;
    char ts[40];
    fg_format_time_ms(fg_wall_ms(), ts, sizeof ts);
    json_object_set_new(x->audit, "start", json_string(ts));
    json_object_set_new(x->audit, "protocol", json_string(protocol));
    x->cin.data = fg_xmalloc(XBUF);
    x->uin.data = fg_xmalloc(XBUF);
    x->cout.data = fg_xmalloc(XBUF);
    x->uout.data = fg_xmalloc(XBUF);
    atomic_fetch_add(&ss->nexecs, 1);
    const char *hdrs[] = {"Sec-WebSocket-Accept", accept, "Sec-WebSocket-Protocol", protocol, NULL};
    if (fg_reply_upgrade(req, hdrs, on_upgraded, x) != FG_OK) {
        /* the 101 never left: nothing will call on_upgraded */
        atomic_fetch_sub(&ss->nexecs, 1);
        exec_free(x);
        return FG_ERR;
    }
    return FG_OK;
}
