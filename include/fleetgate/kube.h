/* kube: fleetgate's Kubernetes client (the only module that includes curl.h).
 *
 * - fg_kube_error_t: what went wrong talking to a member cluster (a Kubernetes Status, a
 *   transport failure, or an answer fleetgate refuses), one struct for all of them;
 * - the watch-stream parser: bytes in (any chunking), {type, object} events out;
 * - the translation of Kubernetes objects into fleetgate's simplified model, one table per
 *   kind (src/kube/translate.c; cache/SCHEMA.md says where every output field comes from);
 * - the client: per-cluster credentials and TLS, synchronous requests with JSON bodies, and
 *   watches that run in a caller's event loop (fg_kube_loop_t wraps a curl multi handle).
 *
 * Read src/kube/ in this order: status.c, watch.c, quantity.c, translate.c, client.c.
 */
#ifndef FLEETGATE_KUBE_H
#define FLEETGATE_KUBE_H

#include "fleetgate/core.h"

/* ---- errors ------------------------------------------------------------ */

/* reason values fleetgate sets itself when there is no Kubernetes Status to quote. */
#define FG_KUBE_REASON_TRANSPORT    "Transport"     /* connect, TLS, reset: no HTTP answer */
#define FG_KUBE_REASON_TIMEOUT      "Timeout"       /* the request's deadline passed */
#define FG_KUBE_REASON_BAD_RESPONSE "BadResponse"   /* the cluster answered something unusable */
#define FG_KUBE_REASON_TOO_LARGE    "TooLarge"      /* an answer or an event passed its bound */
#define FG_KUBE_REASON_BAD_STREAM   "BadWatchEvent" /* the watch stream carried garbage */

typedef struct {
    long http_code;        /* HTTP status; for a watch ERROR event the Status's code; 0 if none */
    char reason[64];       /* Status.reason ("NotFound", "Expired", ...) or an FG_KUBE_REASON_* */
    char message[512];     /* Status.message or fleetgate's own text, truncated, never secrets */
    int64_t retry_after_s; /* details.retryAfterSeconds, else the Retry-After header; -1: none */
} fg_kube_error_t;

void fg_kube_error_clear(fg_kube_error_t *err);
/* Fills err from a Kubernetes Status object (borrowed). http_code is the HTTP status of the
 * answer, used when the Status carries no code. Returns FG_OK, or FG_EINVAL when status is not
 * a Status (err is then filled as a BadResponse naming what was wrong). */
int fg_kube_error_from_status(const json_t *status, long http_code, fg_kube_error_t *err);
/* Fills err from an HTTP error answer whose body may or may not be a Status (never fails). */
void fg_kube_error_from_body(long http_code, const char *body, size_t len, fg_kube_error_t *err);
/* True for "the resourceVersion is gone, relist": code 410 (reason Expired, or Gone before 1.18).
 */
bool fg_kube_error_is_gone(const fg_kube_error_t *err);

/* ---- watch-stream parser ----------------------------------------------- */

typedef enum {
    FG_KUBE_EV_ADDED = 0,
    FG_KUBE_EV_MODIFIED,
    FG_KUBE_EV_DELETED,
    FG_KUBE_EV_BOOKMARK,
    FG_KUBE_EV_ERROR,
} fg_kube_event_type_t;

const char *fg_kube_event_type_name(fg_kube_event_type_t t);

/* One watch event, valid only during the callback: everything in it is borrowed. Keep the
 * object past the callback with json_incref. */
typedef struct {
    fg_kube_event_type_t type;
    json_t *object;               /* the event's object (a Status for ERROR); never NULL */
    const char *resource_version; /* object.metadata.resourceVersion; NULL only for ERROR */
    bool initial_events_end;      /* BOOKMARK with annotation k8s.io/initial-events-end "true" */
    const fg_kube_error_t *error; /* ERROR: the Status as an error (410: relist); else NULL */
} fg_kube_event_t;

/* Called once per event. Return FG_OK to go on; any other value stops the parser, which then
 * returns that value from fg_kube_watch_parser_feed (and keeps returning it). */
typedef int (*fg_kube_event_cb)(void *ud, const fg_kube_event_t *ev);

typedef struct fg_kube_watch_parser fg_kube_watch_parser_t;

#define FG_KUBE_DEFAULT_MAX_EVENT_BYTES (8u * 1024u * 1024u)

/* A parser for one watch stream. max_event_bytes bounds one event's JSON text (0: the
 * default, 8 MiB). Returns FG_OK with *out set (free with fg_kube_watch_parser_free). */
int fg_kube_watch_parser_new(fg_kube_watch_parser_t **out, size_t max_event_bytes,
                             fg_kube_event_cb cb, void *ud);
/* Feeds the next bytes of the stream, split anywhere. Events are JSON objects one after the
 * other (the wire puts a newline after each; whitespace between them is skipped). Returns
 * FG_OK; FG_EINVAL when the stream is garbage (not JSON, unknown type, no object, an object
 * that is not an object, a BOOKMARK without resourceVersion); FG_ETOOBIG when one event passes
 * the bound; or the callback's value. After a failure the parser is dead: every later call
 * returns the same value; fg_kube_watch_parser_error says why. The caller restarts the watch. */
int fg_kube_watch_parser_feed(fg_kube_watch_parser_t *p, const void *data, size_t len);
/* End of stream: FG_OK when no event was left half-received, else FG_EINVAL. */
int fg_kube_watch_parser_finish(fg_kube_watch_parser_t *p);
/* The reason of the last failure ("" when none), as an error the caller can log and act on. */
const fg_kube_error_t *fg_kube_watch_parser_error(const fg_kube_watch_parser_t *p);
/* Events delivered so far. */
uint64_t fg_kube_watch_parser_events(const fg_kube_watch_parser_t *p);
/* An annotation (borrowed: a string that outlives the parser) cut from every event's object
 * before it is parsed (fg_kube_prune): the caller never reads it. */
void fg_kube_watch_parser_unread_annotation(fg_kube_watch_parser_t *p, const char *annotation);
void fg_kube_watch_parser_free(fg_kube_watch_parser_t *p);

/* ---- the simplified model ---------------------------------------------- */

/* Where fg_kube_prune looks: the object the text is (an answer), the "object" member of a
 * watch event, or every element of a LIST page's "items". */
typedef enum { FG_KUBE_PRUNE_OBJECT, FG_KUBE_PRUNE_EVENT, FG_KUBE_PRUNE_LIST } fg_kube_prune_t;
/* Cuts metadata.managedFields out of JSON text in place, before it is parsed (translation drops
 * them; not parsing them halves the cost of parsing a typical object), and also
 * metadata.annotations[annotation] when annotation is not NULL; returns the text's new length.
 * Only a member found where it is expected, once, is cut; text of another shape is left as it
 * is for the parser to judge. The cut text is not validated. Answers (fg_kube_request and the
 * calls of a loop), watch events and LIST pages are parsed this way. */
size_t fg_kube_prune(char *text, size_t len, fg_kube_prune_t where, const char *annotation);

/* The annotation in which fleetgate keeps, on every object it placed, the explanation of the
 * placement (about 1 KB of escaped JSON). The simplified model does not carry it (the writes
 * and the reconciler read it from the clusters' answers), so the informers cut it unparsed. */
#define FG_KUBE_PLACEMENT_ANNOTATION "fleetgate.io/placement"

typedef enum {
    FG_KIND_POD = 0,
    FG_KIND_APP,     /* apps/v1 Deployment */
    FG_KIND_JOBSET,  /* batch/v1 Job */
    FG_KIND_CRONJOB, /* batch/v1 CronJob */
    FG_KIND_SCALER,  /* autoscaling/v2 HorizontalPodAutoscaler */
    FG_KIND_EVENT,   /* v1 Event (events.k8s.io/v1 field names accepted as fallbacks) */
    FG_KIND_NODE,    /* v1 Node */
    FG_KIND_PROJECT, /* v1 Namespace */
    FG_KIND_COUNT
} fg_kind_t;

/* What the informers need to list and watch a kind. Static storage, never freed. */
typedef struct {
    fg_kind_t kind;
    const char *name;       /* fleetgate's name: "pod", "app", ... */
    const char *k8s_kind;   /* "Pod", "Deployment", ... */
    const char *api_prefix; /* "/api/v1", "/apis/apps/v1", ... */
    const char *resource;   /* "pods", "deployments", ... */
    bool namespaced;
} fg_kube_kind_info_t;

const fg_kube_kind_info_t *fg_kube_kind_info(fg_kind_t kind);
/* The kind an object of this Kubernetes kind/apiVersion translates to: FG_OK, or FG_ENOENT
 * when fleetgate does not serve it (e.g. autoscaling/v1 HorizontalPodAutoscaler). */
int fg_kube_kind_of(const char *k8s_kind, const char *api_version, fg_kind_t *out);

/* Where the object came from; both strings are copied into the output. */
typedef struct {
    const char *cluster;
    const char *zone;
} fg_kube_origin_t;

/* Translates one Kubernetes object (borrowed) of the given kind into a new simplified object.
 * Returns FG_OK with *out (a new reference: json_decref it), or FG_EINVAL with err set to
 * "PATH: what is wrong (got TYPE)" when the object is malformed (missing metadata or name,
 * a field of the wrong type). Output sizes are bounded (see FG_KUBE_MAX_*). */
int fg_kube_translate(fg_kind_t kind, const json_t *obj, const fg_kube_origin_t *origin,
                      json_t **out, char *err, size_t errlen);

/* Bounds on what one translation emits; what is cut is counted in an "…Omitted" field. */
#define FG_KUBE_MAX_CONTAINERS 64
#define FG_KUBE_MAX_LIST_ITEMS 64 /* conditions, taints, metrics, IPs, active jobs */
#define FG_KUBE_MAX_LABELS     128

/* A Kubernetes quantity ("500m", "1Gi", "1.5", "2e3") as an integer: in thousandths of the
 * unit when milli is true (cpu in millicores), else in units (bytes, GPUs), rounded up as
 * Kubernetes rounds. FG_OK, FG_EINVAL (not a quantity), or FG_ETOOBIG (outside int64). */
int fg_kube_quantity_parse(const char *s, size_t len, bool milli, int64_t *out);

/* ---- the client -------------------------------------------------------- */

typedef struct fg_kube_client fg_kube_client_t;

/* Zero means the default. */
typedef struct {
    long timeout_ms;           /* whole-request deadline of fg_kube_request (default 10 s) */
    long connect_timeout_ms;   /* TCP + TLS handshake (default 5 s) */
    size_t max_response_bytes; /* one answer of fg_kube_request (default 32 MiB, decoded) */
    size_t max_request_bytes;  /* one request body (default 3 MiB, what an API server takes) */
    size_t max_event_bytes;    /* one watch event (default FG_KUBE_DEFAULT_MAX_EVENT_BYTES) */
} fg_kube_client_opts_t;

/* A client for one member cluster (conf is copied; opts may be NULL). Reads the bearer token
 * from conf->token_file now (at most 16 KiB, surrounding whitespace trimmed; it is never
 * logged). Returns FG_OK with *out (free with fg_kube_client_free after every watch made from
 * it is freed), or FG_EINVAL / FG_ENOENT with err saying which setting is wrong. The client
 * is thread-safe: requests from several threads share its connections, TLS sessions and DNS. */
int fg_kube_client_new(fg_kube_client_t **out, const fg_cluster_conf_t *conf,
                       const fg_kube_client_opts_t *opts, fg_kube_error_t *err);
void fg_kube_client_free(fg_kube_client_t *c);
const char *fg_kube_client_name(const fg_kube_client_t *c);

typedef enum {
    FG_KUBE_GET = 0,
    FG_KUBE_POST,
    FG_KUBE_PUT,
    FG_KUBE_PATCH, /* body sent as application/merge-patch+json */
    FG_KUBE_DELETE,
} fg_kube_method_t;

/* One request, blocking the calling thread until the answer or the deadline. path is the part
 * after the cluster URL, with its query ("/api/v1/namespaces/a/pods?limit=500"); body
 * (borrowed, may be NULL) is sent as JSON. On a 2xx JSON answer returns FG_OK with *out (a
 * new reference) and *http_code (may be NULL). Otherwise returns FG_ERR (the cluster answered
 * an error: err holds its Status), FG_ETIMEOUT, FG_EIO (no answer), FG_ETOOBIG (body or answer
 * over its bound) or FG_EINVAL (an answer that is not JSON), always with err filled. */
int fg_kube_request(fg_kube_client_t *c, fg_kube_method_t method, const char *path,
                    const json_t *body, json_t **out, long *http_code, fg_kube_error_t *err);

/* One request of a batch run by fg_kube_request_all: the inputs are borrowed, the results are
 * filled by the run (out, when set, belongs to the call: fg_kube_calls_clear releases it). */
typedef struct fg_kube_call {
    fg_kube_client_t *client; /* the member cluster it goes to */
    fg_kube_method_t method;
    const char *path;
    const json_t *body; /* may be NULL */
    /* body already serialized (may be NULL): sent as it is instead of body, so that a caller
     * can serialize while it waits for something else */
    const char *text;
    /* called (may be NULL), on the run's thread, as soon as this call's results are set, while
     * the others may still be on their way: work on one answer overlaps the wait for the next */
    void (*done)(struct fg_kube_call *k, void *ud);
    void *done_ud;
    /* results */
    int rc;         /* as fg_kube_request returns it */
    long http_code; /* 0 when no answer came */
    json_t *out;    /* FG_OK: the answer (a reference owned by the call) */
    fg_kube_error_t err;
} fg_kube_call_t;

/* Runs the n calls concurrently on one curl multi handle in the calling thread, each bounded by
 * deadline_ms (0: its client's timeout), and returns when every one has ended: a slow cluster
 * delays the answer by at most its deadline and fails only its own call (FG_ETIMEOUT). Every
 * call's rc, http_code, out and err are set. Returns FG_OK, or FG_EIO when the multi handle
 * itself failed (the calls not finished then hold FG_EIO). Thread-safe across distinct call
 * arrays (clients are shared safely). */
int fg_kube_request_all(fg_kube_call_t *calls, size_t n, long deadline_ms);
/* Connections kept between runs of calls (a curl multi handle's connection cache): runs through
 * the same fg_kube_conns_t reuse the TCP and TLS connections earlier runs opened, at most
 * FG_KUBE_CONNS_MAX of them. One run at a time on one (pool them across threads). Free it
 * before the clients its calls went through. */
#define FG_KUBE_CONNS_MAX 64
typedef struct fg_kube_conns fg_kube_conns_t;
fg_kube_conns_t *fg_kube_conns_new(void);
void fg_kube_conns_free(fg_kube_conns_t *k); /* NULL is fine */
/* fg_kube_request_all through conns (kept for the next run). */
int fg_kube_request_all_in(fg_kube_conns_t *conns, fg_kube_call_t *calls, size_t n,
                           long deadline_ms);
/* Releases the answers the calls hold. */
void fg_kube_calls_clear(fg_kube_call_t *calls, size_t n);

/* ---- watches in an event loop ------------------------------------------ */

/* An event loop for long-lived transfers (a curl multi handle). Used by one thread at a time. */
typedef struct fg_kube_loop fg_kube_loop_t;

int fg_kube_loop_new(fg_kube_loop_t **out);
/* Frees the loop; every watch still in it is removed first (its done callback is not called). */
void fg_kube_loop_free(fg_kube_loop_t *loop);
/* Runs the loop for at most timeout_ms: waits for sockets, moves bytes, calls the event and
 * done callbacks. *running (may be NULL) gets the number of watches still going. Returns FG_OK
 * or FG_EIO (the multi handle failed: the caller frees the loop). */
int fg_kube_loop_run(fg_kube_loop_t *loop, int timeout_ms, int *running);
/* Makes a fg_kube_loop_run in another thread return early (thread-safe). */
void fg_kube_loop_wakeup(fg_kube_loop_t *loop);

typedef struct fg_kube_watch fg_kube_watch_t;

/* Called once when a watch ends, from fg_kube_loop_run: rc FG_OK when the server closed the
 * stream cleanly (its timeoutSeconds passed: re-watch from the last resourceVersion), else the
 * failure with err filled (HTTP Status such as 410, transport, garbage, deadline). The watch is
 * out of the loop by then; the callback may free it. */
typedef void (*fg_kube_watch_done_cb)(void *ud, fg_kube_watch_t *w, int rc,
                                      const fg_kube_error_t *err);

typedef struct {
    fg_kube_event_cb on_event;     /* required; non-FG_OK stops the watch with that rc */
    fg_kube_watch_done_cb on_done; /* required */
    void *ud;
    long deadline_ms;    /* whole-stream bound (0: none; set timeoutSeconds in the path too) */
    long idle_timeout_s; /* end the watch when no byte came for this long (0: never) */
    const char *unread_annotation; /* cut from each event's object unparsed (fg_kube_prune) */
} fg_kube_watch_opts_t;

/* A watch of path (a collection URL with watch=true and its options) on client c (borrowed:
 * it must outlive the watch). Starts when added to a loop. Returns FG_OK with *out (free with
 * fg_kube_watch_free), or FG_EINVAL. */
int fg_kube_watch_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                      const fg_kube_watch_opts_t *opts);
/* Starts the watch in loop. FG_OK, or FG_EINVAL when it already ran or is in a loop. */
int fg_kube_loop_add(fg_kube_loop_t *loop, fg_kube_watch_t *w);
/* Stops the watch if it runs (no done callback) and frees it. Not from its own on_event. */
void fg_kube_watch_free(fg_kube_watch_t *w);
/* One GET in a loop (a LIST page). on_done gets FG_OK for a 2xx answer with body, its bytes
 * (at most max_response_bytes, NUL-terminated, not parsed: the caller parses it where it wants,
 * e.g. in a worker thread), which the callback owns and frees with free(); otherwise rc as
 * fg_kube_request returns it, body NULL and err filled. The request is an fg_kube_watch_t in
 * "get" mode: started with fg_kube_loop_add, freed with fg_kube_watch_free (the callback may
 * free it). FG_OK with *out, or FG_EINVAL. */
typedef void (*fg_kube_get_done_cb)(void *ud, fg_kube_watch_t *req, int rc, char *body, size_t len,
                                    const fg_kube_error_t *err);
int fg_kube_get_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                    fg_kube_get_done_cb on_done, void *ud);
/* A raw byte stream in a loop (pod logs): on_data gets the body of a 2xx answer as it arrives,
 * first once with len 0 when the headers are in (so the caller can answer before any byte),
 * then with the bytes. on_data returns FG_OK when it took all len bytes, FG_EAGAIN to take none
 * now: the transfer pauses (nothing more is read from the cluster, whose TCP window then fills)
 * until fg_kube_stream_resume offers them again; anything else stops it. on_done as a watch's:
 * FG_OK when the cluster ended the body, else the failure with err (a non-2xx answer's Status:
 * its bytes never reach on_data). Freed with fg_kube_watch_free. FG_OK with *out, or
 * FG_EINVAL. */
typedef int (*fg_kube_data_cb)(void *ud, const char *data, size_t len);
int fg_kube_stream_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                       fg_kube_data_cb on_data, fg_kube_watch_done_cb on_done, void *ud);
/* Unpauses a stream paused by on_data's FG_EAGAIN. From the loop's thread, between runs. */
void fg_kube_stream_resume(fg_kube_watch_t *w);
/* fg_kube_loop_run that also returns when extra_fd (an epoll or event fd of the caller's own
 * loop; -1: none) is readable. */
int fg_kube_loop_run_fd(fg_kube_loop_t *loop, int timeout_ms, int extra_fd, int *running);
/* ---- upgraded connections (exec over WebSocket) --------------------------- */
/* A connection to a member cluster switched to WebSocket (RFC 6455) by a 101 answer: after
 * fg_kube_upgrade, bytes go both ways unchanged (the caller frames them). Non-blocking. */
typedef struct fg_kube_conn fg_kube_conn_t;
/* Connects (TLS and credentials as the client's requests), sends `GET path` as a WebSocket
 * upgrade offering the subprotocols in protocols (a Sec-WebSocket-Protocol value), and waits up
 * to timeout_ms for the answer. FG_OK with *out and the chosen subprotocol in chosen (at least
 * 64 bytes; the cluster's answer must be 101 with the right Sec-WebSocket-Accept and one of the
 * offered subprotocols). Otherwise FG_ERR (the cluster answered an error: err holds its
 * Status), FG_ETIMEOUT, FG_EIO (no or a broken answer), FG_EINVAL (bad path), err filled. Blocks
 * the calling thread. */
int fg_kube_upgrade(fg_kube_client_t *c, const char *path, const char *protocols, long timeout_ms,
                    fg_kube_conn_t **out, char *chosen, fg_kube_error_t *err);
/* The socket, to wait on (never read or write it directly: TLS is in between). */
int fg_kube_conn_fd(const fg_kube_conn_t *k);
/* Sends up to len bytes: FG_OK with *n (may be less than len), FG_EAGAIN, or FG_EIO. */
int fg_kube_conn_send(fg_kube_conn_t *k, const void *data, size_t len, size_t *n);
/* Receives up to len bytes: FG_OK with *n (0: the cluster closed), FG_EAGAIN, or FG_EIO. Bytes
 * that came with the 101 answer are returned first. */
int fg_kube_conn_recv(fg_kube_conn_t *k, void *buf, size_t len, size_t *n);
void fg_kube_conn_free(fg_kube_conn_t *k);

/* The last resourceVersion the watch delivered (an event's or a bookmark's), or NULL. The
 * string belongs to the watch. */
const char *fg_kube_watch_last_rv(const fg_kube_watch_t *w);

#endif
