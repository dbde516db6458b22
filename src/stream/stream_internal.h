/* stream/stream_internal.h: what the loop (stream.c) and the exec sessions (exec.c) share. */
#ifndef FG_STREAM_INTERNAL_H
#define FG_STREAM_INTERNAL_H

#include "fleetgate/kube.h"
#include "fleetgate/stream.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_CLUSTERS 64

/* What an epoll entry's data.ptr points at starts with one of these (NULL: the command
 * eventfd). */
typedef enum { EP_STREAM = 1, EP_EXEC } ep_kind_t;

typedef struct stream stream_t;
typedef struct fg_exec fg_exec_t;

typedef enum {
    CMD_START,
    CMD_UNPAUSE,
    CMD_CLOSED,
    CMD_DRAIN,
    CMD_STOP,
    CMD_EXEC_START, /* st is an fg_exec_t */
    CMD_JOB_DONE,   /* st is a job_t the worker ran */
    CMD_SSE_WAKE,   /* the change hub has new events (sse.c) */
} cmd_kind_t;

typedef struct cmd {
    cmd_kind_t kind;
    void *st;
    struct cmd *next;
} cmd_t;

struct stream {
    ep_kind_t kind; /* EP_STREAM: first, for the epoll entry */
    fg_streams_t *ss;
    /* set before the stream is handed to the loop, read-only after */
    fg_kube_client_t *client;
    char *path, *cluster, *content_type;
    fg_stream_opts_t opts; /* content_type points at the copy above */
    fg_req_t *req;         /* valid while !req_done */
    fg_http_stream_t *http;
    int fd;
    int64_t start_ms;
    /* shared, under mu */
    pthread_mutex_t mu;
    char *buf;
    size_t cap, head, len;
    bool headers_ok; /* the source answered 2xx: the reply is 200 */
    bool failed;     /* the source failed before the reply: problem + detail */
    fg_problem_t problem;
    char detail[512];
    bool eof;       /* no more bytes will come: the body ends once the buffer is read */
    bool abort;     /* cut the body */
    bool up_paused; /* the source waits for room */
    bool unpause_queued;
    /* when the client last took bytes, or when bytes came into an empty buffer: bytes that
     * wait longer than the stall timeout since then mean a client that stopped reading */
    uint64_t progress_ns;
    uint64_t bytes_in, bytes_out;
    const char *end;
    bool req_done; /* the request completed: req is gone */
    /* loop thread only */
    uint64_t next_renew_ns;
    int jobs;           /* offloaded jobs not yet done: the stream is not freed before */
    bool zombie;        /* closed while jobs were out: freed by the last one's end */
    bool renew_pending; /* a lease renewal is out */
    fg_kube_watch_t *up;
    struct group *group; /* an app's pods (group.c); NULL for one source. Set before the loop
                            has the stream, then the loop's */
    struct sse *sse;     /* a change stream (sse.c); NULL otherwise. The same ownership */
    stream_t *prev, *next;
    /* the client's side (loop thread only): woken this turn and queued on the loop's dirty
     * list (written out once at the end of the turn, however many lines came) */
    bool dirty;
    stream_t *dirty_next;
    bool hung_up; /* the client hung up: no more pushes (its socket may stay full), MHD ends it */
};

struct fg_streams {
    fg_stream_limits_t limits;
    fg_kube_client_t *clients[MAX_CLUSTERS];
    size_t nclients;
    fg_kube_loop_t *kloop;
    int epfd, evfd;
    stream_t *dirty; /* streams to write out at the end of this loop turn (loop thread) */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards the command queue */
    cmd_t *head, *tail;
    atomic_uint open;
    stream_t *all;      /* loop thread only */
    fg_exec_t *execs;   /* loop thread only */
    atomic_uint nexecs; /* sessions open */
    /* the worker: blocking calls (Redis) off the loop thread */
    pthread_t worker;
    bool worker_started;
    pthread_mutex_t jobs_mu; /* guards jobs_head/jobs_tail and worker_stop */
    pthread_cond_t jobs_cv;
    struct job *jobs_head, *jobs_tail;
    bool worker_stop;
    fg_metric_t *m_open, *m_ended;
    struct sse_hub *sse_hub; /* the change streams' hub (sse.c); made by the first one, under mu */
};

/* Queues a command for the loop thread (thread-safe). */
void fg_stream_post(fg_streams_t *ss, cmd_kind_t kind, void *st);
/* On the loop: st's buffer has news for its client (bytes, or its end); written out at the end
 * of the loop's turn, one write for all that came meanwhile. */
void fg_stream_wake(stream_t *st);
/* Runs run(data) on the worker thread (a blocking call: Redis), then done(ss, st, data) on the
 * loop thread, which owns data again (and frees it). Until done ran, st is not freed: a stream
 * closed meanwhile is a zombie (done must check st->zombie). Loop thread only. */
void fg_stream_offload(fg_streams_t *ss, stream_t *st, void (*run)(void *data),
                       void (*done)(fg_streams_t *ss, stream_t *st, void *data), void *data);
/* The client of the named cluster, or NULL. */
fg_kube_client_t *fg_stream_client(fg_streams_t *ss, const char *cluster);

/* Appends len bytes to st's buffer (the caller holds st->mu and checked the room). */
void fg_stream_ring_put(stream_t *st, const char *data, size_t len);

/* group.c (a stream over several pods' logs): made on the request thread, then run on the loop
 * thread: */
struct group *fg_group_new(const fg_stream_group_t *g);
void fg_group_start(fg_streams_t *ss, stream_t *st);
void fg_group_stop(stream_t *st);   /* stops every source */
void fg_group_resume(stream_t *st); /* unpauses the paused sources */
void fg_group_tick(fg_streams_t *ss, stream_t *st);
void fg_group_free(struct group *g);

/* Parks req with st as its stream (st's source fields set): FG_OK, or an error having replied
 * (st freed). stream.c. */
int fg_stream_hand_over(fg_streams_t *ss, fg_req_t *req, stream_t *st,
                        const fg_stream_opts_t *opts);
/* Ends st from the loop thread: abort cuts the body, otherwise it ends cleanly (stream.c). */
void fg_stream_end(stream_t *st, bool abort, const char *why);

/* sse.c (change streams), on the loop thread: */
void fg_sse_start(fg_streams_t *ss, stream_t *st);
void fg_sse_deliver(fg_streams_t *ss, stream_t *st); /* copies what fits into st's buffer */
void fg_sse_wake(fg_streams_t *ss);                  /* CMD_SSE_WAKE: deliver to every one */
void fg_sse_tick(fg_streams_t *ss);                  /* keep-alives, and delivery */
void fg_sse_stop(stream_t *st);                      /* leaves the hub; idempotent */
void fg_sse_free(struct sse *x);
/* After the loop stopped: the hub's thread and memory. */
void fg_sse_hub_free(struct sse_hub *h);

/* exec.c, on the loop thread: */
void fg_exec_begin(fg_streams_t *ss, fg_exec_t *x); /* CMD_EXEC_START */
void fg_exec_event(fg_streams_t *ss, fg_exec_t *x); /* a socket of x is ready */
void fg_exec_tick(fg_streams_t *ss);                /* timeouts */
void fg_exec_drain(fg_streams_t *ss);               /* CMD_DRAIN */
void fg_exec_free_all(fg_streams_t *ss);            /* at the end */

#endif
