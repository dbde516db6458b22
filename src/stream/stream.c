/* stream/stream.c: the stream loop (one thread) and streams whose source is a member cluster.
 *
 * Threads and what they own:
 * - the loop thread runs the sources (a curl multi through kube's fg_kube_loop_t) and an epoll
 *   set holding the command eventfd and every client's socket (a hang-up; room after a full
 *   socket); it alone starts, pauses, resumes and frees sources, and frees streams; once a
 *   reply's body is under way it also writes it out (fg_http_stream_push, calling sink_read);
 * - HTTP workers call the sink's ops (resume: reply; read: take bytes; closed: the request is
 *   done) and post commands (unpause, closed) to the loop;
 * - stream_t.mu guards the buffer and the flags both sides read (the "shared" block below);
 * - the worker thread runs the blocking calls the loop must not wait on (renewing rate-limit
 *   leases and listing an app's pods: Redis round trips) and hands each result back to the loop
 *   as a command (fg_stream_offload). It is general: any source that needs a blocking read (a
 *   Redis-fed change stream) can offload it the same way.
 * A stream is freed by the loop when it handles CMD_CLOSED, the last thing http says of it, or,
 * when jobs of it are still out then, when the last of them comes back.
 */
#include "stream_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_BUFFER_BYTES (64u * 1024u)
#define MIN_BUFFER_BYTES     (32u * 1024u) /* above curl's largest write (16 KiB) */
#define DEFAULT_STALL_S      30
#define TICK_MS              500
#define LOOP_NICE            5 /* the loop thread's niceness above the process's */

/* ---- commands ------------------------------------------------------------ */

void fg_stream_post(fg_streams_t *ss, cmd_kind_t kind, void *st) {
    cmd_t *c = fg_xcalloc(1, sizeof *c);
    c->kind = kind;
    c->st = st;
    pthread_mutex_lock(&ss->mu);
    if (ss->tail)
        ss->tail->next = c;
    else
        ss->head = c;
    ss->tail = c;
    pthread_mutex_unlock(&ss->mu);
    uint64_t one = 1;
    if (write(ss->evfd, &one, sizeof one) < 0) {
        /* the counter is at its maximum: the loop is awake anyway */
    }
}

/* ---- the sink: ops called by http on its workers ------------------------- */

/* Chooses the reply once the source decided (2xx, failure, end) or the stream was cut. */
static int sink_resume(fg_req_t *req, void *ud) {
    stream_t *st = ud;
    pthread_mutex_lock(&st->mu);
    bool ok = st->headers_ok || (st->eof && !st->failed);
    bool failed = st->failed || (st->abort && !ok);
    fg_problem_t kind = st->problem;
    char detail[sizeof st->detail];
    memcpy(detail, st->detail, sizeof detail);
    pthread_mutex_unlock(&st->mu);
    if (ok)
        return fg_reply_stream(req, 200, st->content_type);
    if (!failed)
        return FG_OK; /* woken early: http puts the connection back to sleep */
    if (kind == FG_PROBLEM_INVALID) {
        bool prev = strstr(detail, "previous") != NULL;
        json_t *ext = json_pack("{s:[{s:s,s:s}]}", "errors", "parameter",
                                prev ? "previous" : "container", "detail", detail);
        return fg_reply_problem_ext(req, kind, ext, "%s", detail);
    }
    return fg_reply_problem(req, kind, "%s", detail);
}

static long sink_read(void *ud, char *out, size_t max) {
    stream_t *st = ud;
    bool unpause = false;
    long n = 0;
    pthread_mutex_lock(&st->mu);
    size_t take = st->len < max ? st->len : max;
    while (take > 0) {
        size_t run = st->cap - st->head < take ? st->cap - st->head : take;
        memcpy(out + n, st->buf + st->head, run);
        st->head = (st->head + run) % st->cap;
        st->len -= run;
        take -= run;
        n += (long)run;
    }
    if (n > 0) {
        st->bytes_out += (uint64_t)n;
        st->progress_ns = fg_now_ns();
        /* Ask the loop for more once half the buffer is free, not at every byte. */
        if (st->up_paused && !st->unpause_queued && st->len <= st->cap / 2) {
            st->unpause_queued = true;
            unpause = true;
        }
    } else if (st->abort)
        n = FG_HTTP_STREAM_ABORT;
    else if (st->eof)
        n = FG_HTTP_STREAM_EOF;
    pthread_mutex_unlock(&st->mu);
    if (unpause)
        fg_stream_post(st->ss, CMD_UNPAUSE, st);
    return n;
}

static void sink_closed(fg_req_t *req, void *ud, bool client_gone) {
    stream_t *st = ud;
    if (st->fd >= 0)
        epoll_ctl(st->ss->epfd, EPOLL_CTL_DEL, st->fd, NULL); /* before MHD closes the fd */
    pthread_mutex_lock(&st->mu);
    st->req_done = true; /* the loop renews no more (it renews under mu) */
    if (st->end == NULL)
        st->end = client_gone ? "client-gone" : "eof";
    fg_stream_stats_t stats = {
        .cluster = st->cluster,
        .bytes_in = st->bytes_in,
        .bytes_out = st->bytes_out,
        .start_ms = st->start_ms,
        .end_ms = fg_wall_ms(),
        .end = st->end,
    };
    pthread_mutex_unlock(&st->mu);
    if (st->opts.on_end)
        st->opts.on_end(req, &stats, st->opts.end_ud);
    fg_stream_post(st->ss, CMD_CLOSED, st);
}

/* ---- the source: callbacks on the loop thread ---------------------------- */

void fg_stream_ring_put(stream_t *st, const char *data, size_t len) {
    if (st->len == 0)
        st->progress_ns = fg_now_ns(); /* the client was up to date until now */
    size_t tail = (st->head + st->len) % st->cap;
    size_t run = st->cap - tail < len ? st->cap - tail : len;
    memcpy(st->buf + tail, data, run);
    memcpy(st->buf, data + run, len - run);
    st->len += len;
}

static int source_data(void *ud, const char *data, size_t len) {
    stream_t *st = ud;
    int rc = FG_OK;
    pthread_mutex_lock(&st->mu);
    if (st->abort || st->eof)
        rc = FG_ERR; /* the stream is over: stop the transfer */
    else if (len == 0)
        st->headers_ok = true;
    else if (st->cap - st->len < len) {
        st->up_paused = true;
        rc = FG_EAGAIN;
    } else {
        fg_stream_ring_put(st, data, len);
        st->bytes_in += len;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc == FG_OK)
        fg_stream_wake(st);
    return rc;
}

static fg_problem_t problem_of(int rc, const fg_kube_error_t *err) {
    if (rc == FG_ETIMEOUT)
        return FG_PROBLEM_UPSTREAM_TIMEOUT;
    if (err->http_code == 404)
        return FG_PROBLEM_NOT_FOUND;
    if (err->http_code == 400 || err->http_code == 422)
        return FG_PROBLEM_INVALID;
    return FG_PROBLEM_UPSTREAM_ERROR;
}

static void source_done(void *ud, fg_kube_watch_t *w, int rc, const fg_kube_error_t *err) {
    stream_t *st = ud;
    fg_kube_watch_free(w);
    st->up = NULL;
    pthread_mutex_lock(&st->mu);
    if (rc == FG_OK)
        st->eof = true;
    else if (!st->headers_ok && !st->abort) {
        st->failed = true;
        st->problem = problem_of(rc, err);
        if (st->problem == FG_PROBLEM_UPSTREAM_ERROR || st->problem == FG_PROBLEM_UPSTREAM_TIMEOUT)
            snprintf(st->detail, sizeof st->detail, "cluster %s: %s%s%s", st->cluster, err->reason,
                     err->message[0] ? ": " : "", err->message);
        else
            snprintf(st->detail, sizeof st->detail, "%s", err->message);
        st->end = "upstream-error";
    } else if (!st->abort) {
        st->abort = true; /* cut mid-body: the client must not take it for the whole log */
        st->end = "upstream-error";
    }
    pthread_mutex_unlock(&st->mu);
    fg_stream_wake(st);
}

/* ---- the client's side: written out once a loop turn ---------------------- */

void fg_stream_wake(stream_t *st) {
    if (st->dirty)
        return;
    st->dirty = true;
    st->dirty_next = st->ss->dirty;
    st->ss->dirty = st;
}

static void undirty(fg_streams_t *ss, stream_t *st) {
    if (!st->dirty)
        return;
    for (stream_t **p = &ss->dirty; *p != NULL; p = &(*p)->dirty_next)
        if (*p == st) {
            *p = st->dirty_next;
            break;
        }
    st->dirty = false;
    st->dirty_next = NULL;
}

/* The end of a loop turn: each stream woken during it is written out once, by this thread
 * (fg_http_stream_push) rather than by waking an HTTP worker per line: the workers stay free
 * for the API's requests. */
static void flush_dirty(fg_streams_t *ss) {
    stream_t *st = ss->dirty;
    ss->dirty = NULL;
    while (st != NULL) {
        stream_t *next = st->dirty_next;
        st->dirty = false;
        st->dirty_next = NULL;
        if (st->fd < 0 || st->hung_up)
            fg_http_stream_wake(st->http);
        else /* FG_EAGAIN: the socket's next room (EPOLLOUT) wakes the stream again */
            (void)fg_http_stream_push(st->http);
        st = next;
    }
}

/* ---- the loop ------------------------------------------------------------ */

static void stop_source(stream_t *st) {
    if (st->group != NULL)
        fg_group_stop(st);
    if (st->sse != NULL)
        fg_sse_stop(st);
    if (st->up != NULL) {
        fg_kube_watch_free(st->up);
        st->up = NULL;
    }
}

/* Ends a stream from the loop: abort cuts the body, otherwise it ends cleanly. */
static void end_stream(stream_t *st, bool abort, const char *why, fg_problem_t kind,
                       const char *detail) {
    stop_source(st);
    pthread_mutex_lock(&st->mu);
    if (!st->headers_ok && !st->failed && !st->eof) {
        st->failed = true;
        st->problem = kind;
        snprintf(st->detail, sizeof st->detail, "%s", detail);
    }
    if (abort)
        st->abort = true;
    else
        st->eof = true;
    if (st->end == NULL)
        st->end = why;
    pthread_mutex_unlock(&st->mu);
    fg_stream_wake(st);
}

void fg_stream_end(stream_t *st, bool abort, const char *why) {
    end_stream(st, abort, why, FG_PROBLEM_INTERNAL, why);
}

static void stream_free(stream_t *st) {
    undirty(st->ss, st);
    stop_source(st);
    fg_http_stream_release(st->http);
    pthread_mutex_destroy(&st->mu);
    fg_group_free(st->group);
    fg_sse_free(st->sse);
    free(st->buf);
    free(st->path);
    free(st->cluster);
    free(st->content_type);
    free(st);
}

static void start(fg_streams_t *ss, stream_t *st) {
    if (st->opts.renew_s < 1)
        st->opts.renew_s = 20;
    st->next_renew_ns = fg_now_ns() + (uint64_t)st->opts.renew_s * 1000000000u;
    st->next = ss->all;
    if (ss->all)
        ss->all->prev = st;
    ss->all = st;
    if (st->group != NULL) {
        fg_group_start(ss, st);
        return;
    }
    if (st->sse != NULL) {
        fg_sse_start(ss, st);
        return;
    }
    if (fg_kube_stream_new(&st->up, st->client, st->path, source_data, source_done, st) != FG_OK ||
        fg_kube_loop_add(ss->kloop, st->up) != FG_OK) {
        FG_LOG(FG_LOG_ERROR, NULL, "stream to cluster %s: cannot start %s", st->cluster, st->path);
        end_stream(st, true, "upstream-error", FG_PROBLEM_INTERNAL,
                   "the stream could not be started");
    }
}

static void closed(fg_streams_t *ss, stream_t *st) {
    undirty(ss, st);
    if (st->prev)
        st->prev->next = st->next;
    else
        ss->all = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    atomic_fetch_sub(&ss->open, 1);
    fg_metric_add(ss->m_open, NULL, -1);
    if (st->jobs > 0) { /* the worker still holds it: freed when its last job is back */
        stop_source(st);
        st->zombie = true;
        return;
    }
    stream_free(st);
}

/* ---- the worker ---------------------------------------------------------- */

typedef struct job {
    stream_t *st;
    void (*run)(void *data);
    void (*done)(fg_streams_t *ss, stream_t *st, void *data);
    void *data;
    struct job *next;
} job_t;

void fg_stream_offload(fg_streams_t *ss, stream_t *st, void (*run)(void *data),
                       void (*done)(fg_streams_t *ss, stream_t *st, void *data), void *data) {
    job_t *j = fg_xcalloc(1, sizeof *j);
    j->st = st;
    j->run = run;
    j->done = done;
    j->data = data;
    st->jobs++;
    pthread_mutex_lock(&ss->jobs_mu);
    if (ss->jobs_tail)
        ss->jobs_tail->next = j;
    else
        ss->jobs_head = j;
    ss->jobs_tail = j;
    pthread_cond_signal(&ss->jobs_cv);
    pthread_mutex_unlock(&ss->jobs_mu);
}

/* Runs every job queued, in order, until told to stop with the queue empty. */
static void *worker_main(void *arg) {
    fg_streams_t *ss = arg;
    pthread_mutex_lock(&ss->jobs_mu);
    for (;;) {
        while (ss->jobs_head == NULL && !ss->worker_stop)
            pthread_cond_wait(&ss->jobs_cv, &ss->jobs_mu);
        job_t *j = ss->jobs_head;
        if (j == NULL)
            break; /* stop, and nothing left */
        ss->jobs_head = j->next;
        if (ss->jobs_head == NULL)
            ss->jobs_tail = NULL;
        pthread_mutex_unlock(&ss->jobs_mu);
        j->run(j->data);
        j->next = NULL;
        fg_stream_post(ss, CMD_JOB_DONE, j);
        pthread_mutex_lock(&ss->jobs_mu);
    }
    pthread_mutex_unlock(&ss->jobs_mu);
    return NULL;
}

/* On the loop: the job's result, then the stream it held (a zombie goes with its last job). */
static void job_done(fg_streams_t *ss, job_t *j) {
    stream_t *st = j->st;
    j->done(ss, st, j->data);
    if (--st->jobs == 0 && st->zombie)
        stream_free(st);
    free(j);
}

/* Runs the queued commands; false once CMD_STOP came. */
static bool run_commands(fg_streams_t *ss) {
    uint64_t v;
    if (read(ss->evfd, &v, sizeof v) < 0) {
        /* nothing was posted: the queue is empty too */
    }
    pthread_mutex_lock(&ss->mu);
    cmd_t *c = ss->head;
    ss->head = ss->tail = NULL;
    pthread_mutex_unlock(&ss->mu);
    bool go_on = true;
    while (c != NULL) {
        cmd_t *next = c->next;
        stream_t *st = c->st;
        switch (c->kind) {
            case CMD_EXEC_START:
                fg_exec_begin(ss, c->st);
                break;
            case CMD_START:
                start(ss, st);
                break;
            case CMD_UNPAUSE:
                pthread_mutex_lock(&st->mu);
                st->unpause_queued = false;
                st->up_paused = false;
                pthread_mutex_unlock(&st->mu);
                if (st->up != NULL)
                    fg_kube_stream_resume(st->up); /* may call source_data at once */
                if (st->group != NULL)
                    fg_group_resume(st);
                if (st->sse != NULL)
                    fg_sse_deliver(ss, st);
                break;
            case CMD_SSE_WAKE:
                fg_sse_wake(ss);
                break;
            case CMD_CLOSED:
                closed(ss, st);
                break;
            case CMD_JOB_DONE:
                job_done(ss, c->st);
                break;
            case CMD_DRAIN:
                for (stream_t *s = ss->all; s != NULL; s = s->next)
                    end_stream(s, false, "drain", FG_PROBLEM_SHUTTING_DOWN,
                               "fleetgate is draining; retry on another replica");
                break;
            case CMD_STOP:
                go_on = false;
                break;
        }
        free(c);
        c = next;
    }
    return go_on;
}

/* Keeps each stream's rate-limit slot alive: the renewal (a Redis call) runs on the worker,
 * under mu, so the request cannot complete (and its gate state go) meanwhile. */
static void renew_run(void *data) {
    stream_t *st = data;
    pthread_mutex_lock(&st->mu);
    if (!st->req_done)
        st->opts.renew(st->req);
    pthread_mutex_unlock(&st->mu);
}

static void renew_done(fg_streams_t *ss, stream_t *st, void *data) {
    (void)ss, (void)data;
    st->renew_pending = false;
}

static void renew_leases(fg_streams_t *ss) {
    uint64_t now = fg_now_ns();
    for (stream_t *st = ss->all; st != NULL; st = st->next) {
        if (st->opts.renew == NULL || now < st->next_renew_ns || st->renew_pending)
            continue;
        st->next_renew_ns = now + (uint64_t)st->opts.renew_s * 1000000000u;
        st->renew_pending = true;
        fg_stream_offload(ss, st, renew_run, renew_done, st);
    }
}

/* Drops the clients that take nothing of what waits for them for the stall timeout. Bytes
 * waiting is the rule, not a source refused for room: the last event may fit, and a client
 * that never reads it must go too (its socket's kernel buffers are full, not ours). A stream
 * ended already (a change stream's client the ring lapped, say) whose client still takes
 * nothing is shut the same way: its cut body would wait for that client forever. */
static void check_stalls(fg_streams_t *ss) {
    uint64_t now = fg_now_ns(), limit = (uint64_t)ss->limits.stall_timeout_s * 1000000000u;
    for (stream_t *st = ss->all; st != NULL; st = st->next) {
        pthread_mutex_lock(&st->mu);
        bool stuck = st->len > 0 && now - st->progress_ns > limit,
             stalled = stuck && !st->abort; /* not ended yet: ended here */
        /* libmicrohttpd writes nothing more to a client that reads nothing, so it would see the
         * end only once the socket drains: shut the socket so the connection closes now. The
         * fd is libmicrohttpd's and still open while req_done is false (sink_closed sets it
         * under mu before the fd is closed). */
        if (stalled && st->end == NULL)
            st->end = "stalled"; /* before the shutdown: MHD may close on it before end_stream */
        if (stuck && !st->req_done && st->fd >= 0)
            shutdown(st->fd, SHUT_RDWR);
        pthread_mutex_unlock(&st->mu);
        if (stalled) {
            FG_LOG(FG_LOG_INFO, NULL,
                   "stream from cluster %s: the client read nothing for %ds: "
                   "dropped",
                   st->cluster, ss->limits.stall_timeout_s);
            fg_metric_add(ss->m_ended, (const char *[]){"stalled"}, 1);
            end_stream(st, true, "stalled", FG_PROBLEM_INTERNAL, "stalled");
        }
    }
}

static void *loop_main(void *arg) {
    fg_streams_t *ss = arg;
    /* The streams are bulk work: when a core is contended, the threads serving the API's
     * requests go first (a GET must not wait behind a burst of log lines). */
    pid_t tid = gettid();
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, (id_t)tid, nice_now + LOOP_NICE);
    uint64_t last_tick = fg_now_ns();
    for (;;) {
        if (fg_kube_loop_run_fd(ss->kloop, TICK_MS, ss->epfd, NULL) != FG_OK)
            FG_LOG(FG_LOG_ERROR, NULL, "stream loop: the transfer loop failed");
        struct epoll_event evs[64];
        int n = epoll_wait(ss->epfd, evs, 64, 0);
        bool go_on = true, commands = false;
        for (int i = 0; i < n; i++) {
            stream_t *st = evs[i].data.ptr;
            if (st == NULL) { /* after the sockets' events: a CMD_CLOSED may free their stream */
                commands = true;
                continue;
            }
            if (st->kind == EP_EXEC) {
                fg_exec_event(ss, (fg_exec_t *)(void *)st);
                continue;
            }
            if (!(evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
                fg_stream_wake(st); /* room in the client's socket: what it did not take goes */
                continue;
            }
            /* The client hung up: stop the cluster's side now, not at the next byte. What
             * waits for it is dropped, and libmicrohttpd ends the request (the body's cut)
             * rather than a push waiting for room in a socket no one reads any more (it is not
             * watched now either). */
            epoll_ctl(ss->epfd, EPOLL_CTL_DEL, st->fd, NULL);
            st->hung_up = true;
            pthread_mutex_lock(&st->mu);
            st->len = 0;
            pthread_mutex_unlock(&st->mu);
            end_stream(st, true, "client-gone", FG_PROBLEM_BAD_REQUEST, "the client went away");
        }
        if (commands)
            go_on = run_commands(ss);
        if (!go_on) {
            flush_dirty(ss); /* a drain's last words */
            break;
        }
        if (fg_now_ns() - last_tick >= (uint64_t)TICK_MS * 1000000u) {
            last_tick = fg_now_ns();
            check_stalls(ss);
            renew_leases(ss);
            for (stream_t *g = ss->all; g != NULL; g = g->next)
                if (g->group != NULL)
                    fg_group_tick(ss, g);
            fg_exec_tick(ss);
            fg_sse_tick(ss);
        }
        flush_dirty(ss);
    }
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------- */

int fg_streams_new(fg_streams_t **out, const fg_config_t *cfg, const fg_stream_limits_t *limits) {
    int rc = FG_OK;
    fg_streams_t *ss = fg_xcalloc(1, sizeof *ss);
    ss->epfd = ss->evfd = -1;
    pthread_mutex_init(&ss->mu, NULL);
    pthread_mutex_init(&ss->jobs_mu, NULL);
    pthread_cond_init(&ss->jobs_cv, NULL);
    if (limits)
        ss->limits = *limits;
    if (ss->limits.buffer_bytes == 0)
        ss->limits.buffer_bytes = DEFAULT_BUFFER_BYTES;
    if (ss->limits.buffer_bytes < MIN_BUFFER_BYTES)
        ss->limits.buffer_bytes = MIN_BUFFER_BYTES;
    if (ss->limits.stall_timeout_s <= 0)
        ss->limits.stall_timeout_s = DEFAULT_STALL_S;
    static const char *const end_labels[] = {"end", NULL};
    ss->m_open = fg_metrics_register("fleetgate_streams_open", "Long-lived streams open now.",
                                     FG_METRIC_GAUGE, NULL);
    fg_metric_add(ss->m_open, NULL, 0);
    ss->m_ended =
        fg_metrics_register("fleetgate_streams_dropped_total", "Streams fleetgate cut, by why.",
                            FG_METRIC_COUNTER, end_labels);
    for (size_t i = 0; i < cfg->nclusters && i < MAX_CLUSTERS; i++) {
        fg_kube_error_t err;
        fg_kube_client_opts_t copts = {.connect_timeout_ms = 5000};
        if (fg_kube_client_new(&ss->clients[i], &cfg->clusters[i], &copts, &err) != FG_OK) {
            fg_log(FG_LOG_ERROR, NULL, "streams: cluster %s: %s", cfg->clusters[i].name,
                   err.message);
            rc = FG_EINVAL;
            goto out;
        }
        ss->nclients = i + 1;
    }
    ss->epfd = epoll_create1(EPOLL_CLOEXEC);
    ss->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (ss->epfd < 0 || ss->evfd < 0 || epoll_ctl(ss->epfd, EPOLL_CTL_ADD, ss->evfd, &ev) != 0 ||
        fg_kube_loop_new(&ss->kloop) != FG_OK ||
        pthread_create(&ss->worker, NULL, worker_main, ss) != 0) {
        fg_log(FG_LOG_ERROR, NULL, "streams: cannot start the stream loop");
        rc = FG_EIO;
        goto out;
    }
    ss->worker_started = true;
    if (pthread_create(&ss->thread, NULL, loop_main, ss) != 0) {
        fg_log(FG_LOG_ERROR, NULL, "streams: cannot start the stream loop");
        rc = FG_EIO;
        goto out;
    }
    ss->started = true;
out:
    if (rc != FG_OK) {
        fg_streams_free(ss);
        return rc;
    }
    *out = ss;
    return FG_OK;
}

void fg_streams_drain(fg_streams_t *ss) {
    if (ss == NULL)
        return;
    fg_stream_post(ss, CMD_DRAIN, NULL);
    /* Exec sessions are not requests the HTTP drain waits for: give their close frames a moment
     * to leave before the server stops. */
    for (int i = 0; i < 100 && atomic_load(&ss->nexecs) > 0; i++) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

unsigned fg_streams_open(const fg_streams_t *ss) {
    return atomic_load(&ss->open);
}

void fg_streams_free(fg_streams_t *ss) {
    if (ss == NULL)
        return;
    if (ss->started) {
        fg_stream_post(ss, CMD_STOP, NULL);
        pthread_join(ss->thread, NULL);
    }
    if (ss->worker_started) { /* it runs what is queued, then stops */
        pthread_mutex_lock(&ss->jobs_mu);
        ss->worker_stop = true;
        pthread_cond_signal(&ss->jobs_cv);
        pthread_mutex_unlock(&ss->jobs_mu);
        pthread_join(ss->worker, NULL);
    }
    /* With the server gone every request completed; what is left never heard of it (and every
     * job's end is queued: zombies go with it). */
    run_commands(ss);
    while (ss->all != NULL)
        closed(ss, ss->all);
    fg_exec_free_all(ss);
    fg_sse_hub_free(ss->sse_hub);
    fg_kube_loop_free(ss->kloop);
    for (size_t i = 0; i < ss->nclients; i++)
        fg_kube_client_free(ss->clients[i]);
    if (ss->epfd >= 0)
        close(ss->epfd);
    if (ss->evfd >= 0)
        close(ss->evfd);
    pthread_mutex_destroy(&ss->mu);
    pthread_mutex_destroy(&ss->jobs_mu);
    pthread_cond_destroy(&ss->jobs_cv);
    free(ss);
}

/* ---- handing a request over ---------------------------------------------- */

fg_kube_client_t *fg_stream_client(fg_streams_t *ss, const char *cluster) {
    for (size_t i = 0; i < ss->nclients; i++)
        if (strcmp(fg_kube_client_name(ss->clients[i]), cluster) == 0)
            return ss->clients[i];
    return NULL;
}

/* Builds a stream for req and parks it; FG_OK, or an error having replied. */
static int hand_over(fg_streams_t *ss, fg_req_t *req, stream_t *st, const fg_stream_opts_t *opts) {
    st->kind = EP_STREAM;
    st->ss = ss;
    st->content_type = fg_xstrdup(opts->content_type);
    st->opts = *opts;
    st->opts.content_type = st->content_type;
    st->req = req;
    st->start_ms = fg_wall_ms();
    st->cap = ss->limits.buffer_bytes;
    st->buf = fg_xmalloc(st->cap);
    st->progress_ns = fg_now_ns();
    pthread_mutex_init(&st->mu, NULL);
    fg_http_stream_ops_t ops = {
        .resume = sink_resume, .read = sink_read, .closed = sink_closed, .ud = st};
    if (fg_req_park(req, &ops, &st->http) != FG_OK) {
        st->http = NULL;
        stream_free(st);
        fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the stream could not be started");
        return FG_ERR;
    }
    st->fd = fg_http_stream_fd(st->http);
    /* The client's socket holds at most about the stream's own buffer: left to autotuning, a
     * client that reads nothing would park up to tcp_wmem's maximum (4 MiB) of kernel memory
     * per stream before the stall rule even starts counting. */
    int sndbuf = (int)st->cap;
    if (st->fd >= 0)
        (void)setsockopt(st->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    /* Watched for a hang-up and, edge-triggered, for room after a push found it full: set once
     * here, never modified (the fd may be another connection's once the request completed). */
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLOUT | EPOLLET, .data.ptr = st};
    if (st->fd >= 0 && epoll_ctl(ss->epfd, EPOLL_CTL_ADD, st->fd, &ev) != 0)
        st->fd = -1; /* a hang-up is then noticed at the next write */
    atomic_fetch_add(&ss->open, 1);
    fg_metric_add(ss->m_open, NULL, 1);
    fg_stream_post(ss, CMD_START, st);
    return FG_OK;
}

int fg_stream_start_kube(fg_streams_t *ss, fg_req_t *req, const char *cluster, const char *path,
                         const fg_stream_opts_t *opts) {
    fg_kube_client_t *client = fg_stream_client(ss, cluster);
    if (client == NULL) {
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no cluster %s is configured", cluster);
        return FG_ENOENT;
    }
    stream_t *st = fg_xcalloc(1, sizeof *st);
    st->client = client;
    st->path = fg_xstrdup(path);
    st->cluster = fg_xstrdup(cluster);
    return hand_over(ss, req, st, opts);
}

int fg_stream_hand_over(fg_streams_t *ss, fg_req_t *req, stream_t *st,
                        const fg_stream_opts_t *opts) {
    return hand_over(ss, req, st, opts);
}

int fg_stream_start_group(fg_streams_t *ss, fg_req_t *req, const fg_stream_group_t *g,
                          const fg_stream_opts_t *opts) {
    stream_t *st = fg_xcalloc(1, sizeof *st);
    st->cluster = fg_xstrdup("*");
    st->group = fg_group_new(g);
    st->headers_ok = true; /* one answer for many pods: 200 now, each pod's trouble is a line */
    return hand_over(ss, req, st, opts);
}
