/* stream: long-lived streams in their own event loop, never pinning an HTTP worker thread.
 *
 * A stream is an upstream source, a downstream sink and limits. The sink is a parked request
 * (http.h, fg_req_park): its connection sleeps whenever the stream has nothing for it. The
 * source runs on the stream loop's thread: today a byte stream from a member cluster (pod logs,
 * kube.h's fg_kube_stream_new); the insights change stream adds a Redis source to the same loop.
 * Between them is one bounded buffer per stream: when it is full the source is paused (the
 * cluster's TCP window fills, nothing grows here), and a client that reads nothing for
 * stall_timeout_s while it is full is dropped. A client that hangs up (its socket, watched with
 * epoll) stops the source at once. fg_streams_drain (SIGTERM) ends every stream cleanly.
 *
 * A request thread only authenticates, authorizes (the gate holds the route's `stream` slot for
 * the request's lifetime, which is the stream's) and hands the request over with
 * fg_stream_start_kube.
 */
#ifndef FLEETGATE_STREAM_H
#define FLEETGATE_STREAM_H

#include "fleetgate/core.h"
#include "fleetgate/http.h"

typedef struct fg_streams fg_streams_t;

typedef struct {
    size_t buffer_bytes; /* per stream, between the source and the client (0: 64 KiB) */
    int stall_timeout_s; /* a client reading nothing this long while the buffer is full is
                            dropped (0: 30 s) */
} fg_stream_limits_t;

/* What one stream did, for its audit line. */
typedef struct {
    const char *cluster;
    uint64_t bytes_in;  /* from the source */
    uint64_t bytes_out; /* handed to the client's connection */
    int64_t start_ms, end_ms;
    const char *end; /* "eof", "client-gone", "stalled", "upstream-error", "drain" */
} fg_stream_stats_t;

/* Called once when the stream's request completes, on an HTTP worker thread, with req still
 * valid (for an audit line). */
typedef void (*fg_stream_end_fn)(fg_req_t *req, const fg_stream_stats_t *st, void *ud);
/* Called every renew_s seconds on the stream loop's thread while req is valid (never at the
 * same time as the end callback): keeps the request's stream slot (rate limit) alive. */
typedef void (*fg_stream_renew_fn)(const fg_req_t *req);

/* What a stream's request asks of the loop besides its bytes. */
typedef struct {
    const char *content_type; /* of the 200 answer */
    fg_stream_end_fn on_end;  /* may be NULL */
    void *end_ud;
    fg_stream_renew_fn renew; /* may be NULL */
    int renew_s;
} fg_stream_opts_t;

/* Starts the stream loop's thread and one Kubernetes client per configured cluster (cfg is
 * borrowed and must outlive the result; limits may be NULL). FG_OK with *out, FG_EINVAL when a
 * cluster's client cannot be made (logged), FG_EIO when the loop cannot start. */
int fg_streams_new(fg_streams_t **out, const fg_config_t *cfg, const fg_stream_limits_t *limits);
/* Ends every open stream cleanly (the body ends; sources stop). Thread-safe. */
void fg_streams_drain(fg_streams_t *ss);
/* Stops the loop and frees everything. Call after the HTTP server is freed. NULL is fine. */
void fg_streams_free(fg_streams_t *ss);
/* Streams open now. */
unsigned fg_streams_open(const fg_streams_t *ss);

/* Hands req (from its handler) over to a stream whose source is GET path on the named cluster:
 * a 2xx answer is relayed as `200 opts->content_type` with a chunked body; an error before the
 * first byte becomes a problem (the cluster's 404 a 404, its 400 a 422 naming `container`, other
 * answers 502, a timeout 504). opts (copied) say
 * what else the request needs. Returns FG_OK when the
 * request is parked (the handler returns FG_OK without replying), or FG_ENOENT (no such
 * cluster) / FG_ERR having replied with the problem. */
int fg_stream_start_kube(fg_streams_t *ss, fg_req_t *req, const char *cluster, const char *path,
                         const fg_stream_opts_t *opts);

/* ---- several pods in one stream (an app's logs) --------------------------- */

typedef struct {
    char cluster[64];
    char pod[254];
} fg_stream_pod_t;

/* Lists the pods to follow now (at most max into pods) and returns how many; *ok false when it
 * cannot tell now (the set is kept). Called on the stream worker thread (it may block on Redis),
 * one call at a time per stream. */
typedef size_t (*fg_stream_discover_fn)(void *ud, fg_stream_pod_t *pods, size_t max, bool *ok);

#define FG_STREAM_GROUP_MAX 64 /* pods in one stream */

typedef struct {
    const char *ns;        /* the pods' namespace */
    const char *query;     /* the log query of the pods there at the start ("?follow=true...") */
    const char *new_query; /* of pods that appear later (their log from its start) */
    bool follow;
    const fg_stream_pod_t *pods; /* the pods at the start (copied) */
    size_t npods;
    fg_stream_discover_fn discover; /* with follow: asked every 2 s; NULL: none */
    void *ud;                       /* owned by the stream from now on: freed with ud_free */
    void (*ud_free)(void *);
} fg_stream_group_t;

/* Hands req over to a stream of the logs of several pods, each line prefixed "[CLUSTER/POD] "
 * (lines of different pods interleave only at line ends; a line longer than 16 KiB is cut).
 * Answers 200 at once. Without follow it ends when every pod's log has; with follow it stays
 * open and pods that discover lists later join it. FG_OK (parked), or an error having replied.
 */
int fg_stream_start_group(fg_streams_t *ss, fg_req_t *req, const fg_stream_group_t *g,
                          const fg_stream_opts_t *opts);

/* ---- exec sessions (WebSocket, v5/v4 channels passed through) ----------- */

typedef struct fg_exec fg_exec_t;

typedef struct {
    int idle_timeout_s; /* no frame either way for this long ends the session (0: 600) */
    int max_session_s;  /* the longest a session lives (0: 14400) */
    /* Called once on the loop thread when the session ends, with the audit line: base (given
     * to fg_exec_start, stolen) plus end, exitCode, bytesIn, bytesOut, endedBy. Borrowed. */
    void (*write_audit)(void *ud, const json_t *line);
    void *ud;
} fg_exec_opts_t;

/* Opens the cluster's side of an exec (GET path as a WebSocket upgrade offering protocols),
 * blocking up to 10 s. FG_OK with *out and the subprotocol the cluster chose in chosen (64
 * bytes); otherwise it has replied the problem (the cluster's 404 a 404, 400 a 422, no answer
 * 502/504) and returns an error. */
int fg_exec_connect_or_reply(fg_streams_t *ss, fg_req_t *req, const char *cluster, const char *path,
                             const char *protocols, char *chosen, fg_exec_t **out);
/* Answers 101 (accept, protocol) and hands the session to the loop, which relays frames both
 * ways unchanged until either side closes (then the other is closed too, within a second), the
 * process's status arrives and the cluster closes, or a limit is hit. base is the audit line so
 * far (stolen). FG_OK, or an error having replied (x is then freed). */
int fg_exec_start(fg_streams_t *ss, fg_req_t *req, fg_exec_t *x, const char *accept,
                  const char *protocol, json_t *base, const fg_exec_opts_t *opts);
/* Exec sessions open now. */
unsigned fg_streams_execs(const fg_streams_t *ss);

/* ---- the change stream (server-sent events from the projects' Redis streams) ----------
 *
 * One hub thread per process reads every watched project's Redis stream (cache.h "the change
 * streams": XREAD for what is new, XRANGE for a client catching up, the stream's state for
 * resets) and keeps each project's recent events, formatted once, in a bounded ring; the stream
 * loop copies them into each client's buffer (filters applied). No thread per stream: the loop
 * does the fan-out, the hub the Redis I/O. A client whose buffer stays full is dropped (the
 * loop's stall rule), and so is one the ring laps; it resumes with Last-Event-ID. */

/* The API's object kinds (ObjectKind), the bits of fg_stream_changes_t.kinds. */
#define FG_STREAM_CHANGE_KINDS 6
/* The index of an ObjectKind name (Project, App, Pod, JobSet, CronJob, Scaler), or -1. */
int fg_stream_change_kind(const char *name);

/* Turns one cached (simplified) object into the API's object as GET answers it (a new
 * reference), or NULL. kind is the API kind ("App"), cluster the member cluster it came from.
 * Called on the hub's thread. */
typedef json_t *(*fg_stream_present_fn)(void *ud, const char *kind, const char *cluster,
                                        const json_t *obj);

struct fg_redis;

typedef struct {
    const char *project;
    unsigned kinds;            /* bit i: kind i wanted (fg_stream_change_kind); 0: every kind */
    const char *app;           /* only changes of this app; NULL: all */
    const char *last_event_id; /* resume after this id ("MS-SEQ"); NULL: from now */
    int keepalive_s;           /* a comment line this often */
    /* the same for every stream of a process (the first call's are kept), borrowed for its life */
    const struct fg_redis *redis;
    fg_stream_present_fn present;
    void *present_ud;
} fg_stream_changes_t;

/* Hands req over to a change stream: 200 text/event-stream at once, `retry: 3000`, then the
 * project's changes (after last_event_id, or a `reset` event when they are no longer kept),
 * keep-alives, until the client goes or fleetgate drains. FG_OK (parked), or an error having
 * replied. */
int fg_stream_start_changes(fg_streams_t *ss, fg_req_t *req, const fg_stream_changes_t *c,
                            const fg_stream_opts_t *opts);

#endif
