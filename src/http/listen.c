/* http/listen.c: fleetgate's listening sockets. One thread per listener accepts and hands each
 * connection to libmicrohttpd (MHD_add_connection), whose worker threads serve it.
 *
 * Why not MHD's own listener: a drain must stop accepting at once (a client connecting then is
 * refused and tries another replica), and the only way MHD 0.9.75 offers with worker threads is
 * MHD_quiesce_daemon(), which races its own workers on an epoll daemon: both remove the listening
 * socket from a worker's epoll set, and the loser aborts the process ("Failed to remove listen FD
 * from epoll set", an open MHD defect; CI hit it on a SIGTERM). Owning the socket, a drain is
 * this thread stopping and the socket closing, with nothing shared with MHD.
 *
 * The connection limit is enforced here too, before the hand-over: a connection MHD 0.9.75's
 * worker refuses at its own limit leaves that worker's cleanup mutex locked, and the worker
 * deadlocks (then so does MHD_stop_daemon). So MHD's limit is set out of reach (server.c), and a
 * connection past max is closed here at once, counted and logged (at most every 10 s). */
#include "http_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_BATCH         64  /* connections taken per wake-up before polling again */
#define ACCEPT_PAUSE_MS      100 /* after running out of descriptors: let connections close */
#define REFUSED_LOG_EVERY_NS (10 * 1000000000ull)

struct fg_http_listener {
    int fd;
    int wake[2]; /* a pipe: a byte on it stops the accepting thread */
    struct MHD_Daemon *mhd;
    atomic_uint *open; /* the server's connections, counted across its listeners */
    unsigned max;
    fg_metric_t *m_refused;
    uint64_t refused_logged_ns; /* the last line that said so; this thread only */
    unsigned refused_since;     /* refusals since that line */
    pthread_t thread;
    bool running;
};

int fg_http_listener_open(const char *host, uint16_t port, fg_http_listener_t **out,
                          uint16_t *bound) {
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0) {
        fg_log(FG_LOG_ERROR, NULL, "listen %s:%s: %s", host, portstr, gai_strerror(gai));
        return FG_EIO;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    /* SO_REUSEADDR only: a restart binds past TIME_WAIT, but a second fleetgate on the same port
     * fails rather than silently sharing it (SO_REUSEPORT). An IPv6 address means IPv6 only. */
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
              (ai->ai_family != AF_INET6 ||
               setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0) &&
              bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0;
    int err = errno;
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (ok && getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fg_log(FG_LOG_ERROR, NULL, "cannot listen on %s:%u: %s", host, (unsigned)port,
               strerror(err));
        if (fd >= 0)
            close(fd);
        return FG_EIO;
    }
    fg_http_listener_t *l = fg_xcalloc(1, sizeof *l);
    l->fd = fd;
    l->wake[0] = l->wake[1] = -1;
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    *out = l;
    return FG_OK;
}

/* A connection past the limit was closed: counted, and said in one line per 10 s at most (an
 * attacker chooses how often this happens). */
static void refused(fg_http_listener_t *l) {
    fg_metric_add(l->m_refused, NULL, 1);
    l->refused_since++;
    uint64_t now = fg_now_ns();
    if (l->refused_logged_ns != 0 && now - l->refused_logged_ns < REFUSED_LOG_EVERY_NS)
        return;
    FG_LOG(FG_LOG_WARN, NULL,
           "closed %u new connection(s) at once: %u connections are open, the limit "
           "(limits.max_connections)",
           l->refused_since, l->max);
    l->refused_logged_ns = now;
    l->refused_since = 0;
}

/* Takes what the backlog holds, up to a batch. False when the thread should pause: out of
 * descriptors or memory, where accepting again at once would only spin. */
static bool accept_batch(fg_http_listener_t *l) {
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue; /* that one client gave up: the next may be there */
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return true;
            bool pause = errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
            FG_LOG(FG_LOG_WARN, NULL, "accept: %s%s", strerror(errno),
                   pause ? " (pausing new connections briefly)" : "");
            return !pause;
        }
        if (atomic_fetch_add(l->open, 1) >= l->max) {
            atomic_fetch_sub(l->open, 1);
            close(fd);
            refused(l);
            continue;
        }
        /* MHD owns fd from here. It gives the place back when the connection closes (server.c);
         * when it refuses at once (one address's limit, which it logs) it closes fd itself. A
         * worker out of memory for the connection's pool drops it without a notification: that
         * place stays taken (MHD logs "Failed to start serving new connection"). */
        if (MHD_add_connection(l->mhd, fd, (struct sockaddr *)&ss, len) != MHD_YES)
            atomic_fetch_sub(l->open, 1);
    }
    return true;
}

static void *accept_main(void *arg) {
    fg_http_listener_t *l = arg;
    struct pollfd p[2] = {{.fd = l->fd, .events = POLLIN}, {.fd = l->wake[0], .events = POLLIN}};
    int timeout = -1;
    for (;;) {
        int n = poll(p, 2, timeout);
        if (n < 0 && errno != EINTR) {
            FG_LOG(FG_LOG_ERROR, NULL, "listener poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents != 0)
            break;
        timeout = -1;
        if (n > 0 && p[0].revents != 0 && !accept_batch(l))
            timeout = ACCEPT_PAUSE_MS; /* wait on the stop pipe alone for a while */
        p[0].fd = timeout < 0 ? l->fd : -1;
    }
    return NULL;
}

int fg_http_listener_serve(fg_http_listener_t *l, struct MHD_Daemon *mhd, atomic_uint *open,
                           unsigned max) {
    l->mhd = mhd;
    l->open = open;
    l->max = max;
    l->m_refused = fg_metrics_register(
        "fleetgate_http_connections_refused_total",
        "New connections closed at once because limits.max_connections were open.",
        FG_METRIC_COUNTER, NULL);
    if (pipe2(l->wake, O_CLOEXEC) != 0) {
        fg_log(FG_LOG_ERROR, NULL, "listener: pipe: %s", strerror(errno));
        return FG_ERR;
    }
    if (pthread_create(&l->thread, NULL, accept_main, l) != 0) {
        fg_log(FG_LOG_ERROR, NULL, "listener: cannot start its thread");
        return FG_ERR;
    }
    l->running = true;
    return FG_OK;
}

void fg_http_listener_close(fg_http_listener_t *l) {
    if (l == NULL)
        return;
    if (l->running) {
        ssize_t w;
        do
            w = write(l->wake[1], "x", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; i < 2; i++)
        if (l->wake[i] >= 0)
            close(l->wake[i]);
    close(l->fd); /* from here a client connecting is refused */
    free(l);
}
