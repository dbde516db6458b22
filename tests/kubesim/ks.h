/* kubesim internal interface: the pieces of the Kubernetes API server simulator.
 *
 * Read in this order: resources.c (the table of served kinds), store.c (objects, resourceVersions,
 * the change log and its waiters), selector.c, status.c (Status errors), discovery.c, read.c (GET,
 * LIST, WATCH), write.c + patch.c + managed.c (writes), handler.c (routing of one request),
 * admin.c (/_kubesim/: stats, faults, seeding, churn), controller.c (the living cluster),
 * logs.c + exec.c (pod log and exec), server.c (libmicrohttpd glue, the WebSocket upgrade),
 * tls.c, main.c (flags, config, start-up).
 *
 * The request handler (ks_handle) knows nothing of HTTP libraries: it takes a ks_req_t and fills a
 * ks_resp_t, so the check suites drive it directly.
 */
#ifndef KUBESIM_KS_H
#define KUBESIM_KS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "fleetgate/core.h"

/* Store failures beside the FG_* codes. */
enum {
    KS_EEXIST = -100,    /* create of a key that exists */
    KS_ECONFLICT = -101, /* expected resourceVersion differs */
    KS_EEXPIRED = -102,  /* asked resourceVersion is older than the history window */
    KS_ETOOLARGE = -103, /* asked resourceVersion is newer than the store */
};

/* ---- resources (resources.c) -------------------------------------------- */

typedef struct {
    const char *group; /* "" for core */
    const char *version;
    const char *kind;
    const char *plural;
    const char *singular;
    bool namespaced;
    const char *short_names; /* comma separated, may be "" */
    const char *name_rule;   /* "subdomain" or "label": how metadata.name is validated */
    bool has_status;         /* serves <plural>/status */
    bool has_scale;          /* serves <plural>/scale */
    const char *fields;      /* extra field selector keys, comma separated */
} ks_resource_t;

extern const ks_resource_t ks_resources[];
extern const size_t ks_nresources;

/* "apps/v1" or "v1" into buf. */
void ks_resource_api_version(const ks_resource_t *r, char *buf, size_t len);
/* Index of the resource served at group/version with this plural, or -1. */
int ks_resource_find(const char *group, const char *version, const char *plural);
int ks_resource_by_kind(const char *kind);
/* The member at a dotted path ("status.nodeInfo.bootID") of obj, borrowed; NULL when absent or
 * when a step is not an object. */
json_t *ks_path_get(const json_t *obj, const char *path);

/* ---- objects and the store (store.c) ------------------------------------ */

/* One stored version of an object. Immutable once stored; shared by reference count. */
typedef struct {
    int refs;
    int res;      /* index into ks_resources */
    char *key;    /* "namespace/name" or "name" */
    json_t *json; /* the object without kind/apiVersion (owned); NULL for a raw (seeded) object
                   * until ks_obj_json parses ser */
    char *ser;    /* compact JSON of json, serialised once */
    size_t ser_len;
    int64_t rv;
    bool raw;   /* stored from text (seeding, churn): json starts NULL */
    bool owned; /* it may name owners (ownerReferences): only such objects can be a dependent the
                 * garbage collector looks for, so it skips the others without reading them */
} ks_obj_t;

void ks_obj_ref(ks_obj_t *o);
void ks_obj_unref(ks_obj_t *o);
/* The object's JSON, borrowed (lives as long as o): a raw object is parsed once and keeps the
 * tree. For single-object paths (writes, GET-modify); scans over many objects use ks_obj_parse. */
json_t *ks_obj_json(const ks_obj_t *o);
/* The object's JSON as a new reference the caller decrefs; a raw object is parsed each time and
 * keeps no tree (so a scan of 100k seeded objects does not grow memory). */
json_t *ks_obj_parse(const ks_obj_t *o);

typedef enum { KS_ADDED = 0, KS_MODIFIED, KS_DELETED } ks_event_type_t;

/* One change: obj is the new state (for DELETED the last state, carrying the deletion RV);
 * prev is the state before (NULL for ADDED). */
typedef struct {
    ks_event_type_t type;
    int64_t rv;
    ks_obj_t *obj;
    ks_obj_t *prev;
} ks_event_t;

typedef struct ks_store ks_store_t;

/* A new, empty store keeping the last `history` changes. Free with ks_store_free. */
int ks_store_new(size_t history, ks_store_t **out);
void ks_store_free(ks_store_t *s);
int64_t ks_store_rv(ks_store_t *s);
/* RV of the oldest state still reconstructible (lists/watches from older RVs expire). */
int64_t ks_store_oldest_rv(ks_store_t *s);
/* Wakes every waiter so they notice shutdown. */
void ks_store_close(ks_store_t *s);
/* Wakes every waiter (they re-check their own end conditions, e.g. a cut-watches). */
void ks_store_kick(ks_store_t *s);
/* Drops the change history: the oldest reconstructible RV becomes the current one. */
void ks_store_compact(ks_store_t *s);
/* Number of stored objects of resource res. */
size_t ks_store_count(ks_store_t *s, int res);
/* Of those, the ones that are not raw (not seeded): the controllers skip a kind when 0. */
size_t ks_store_count_live(ks_store_t *s, int res);
/* Of those, the ones that may name owners (ks_obj_t.owned): the garbage collector skips a kind
 * when 0. */
size_t ks_store_count_owned(ks_store_t *s, int res);

/* FG_OK with *out referenced (caller unrefs), or FG_ENOENT. */
int ks_store_get(ks_store_t *s, int res, const char *key, ks_obj_t **out);

typedef enum { KS_PUT_CREATE, KS_PUT_UPDATE } ks_put_mode_t;
/* Stores obj (stolen) under key. The store sets metadata.resourceVersion. For UPDATE, expect_rv
 * (when > 0) must equal the stored RV, else KS_ECONFLICT; a missing key is FG_ENOENT. CREATE of
 * an existing key is KS_EEXIST. On success *out (may be NULL) is the stored version, referenced. */
int ks_store_put(ks_store_t *s, int res, const char *key, json_t *obj, ks_put_mode_t mode,
                 int64_t expect_rv, ks_obj_t **out);
/* Stores a raw object for seeding: ser (stolen, compact JSON without kind/apiVersion) holds
 * `"resourceVersion":""`, which the store fills in. CREATE only: FG_OK or KS_EEXIST. The object
 * keeps no JSON tree until one is needed (memory: about the size of its text). */
int ks_store_put_raw(ks_store_t *s, int res, const char *key, char *ser, size_t len);
/* The same as an update of an existing key (expect_rv > 0: must match, else KS_ECONFLICT;
 * FG_ENOENT when absent); the churn keeps mutated seeded objects raw this way. */
int ks_store_update_raw(ks_store_t *s, int res, const char *key, char *ser, size_t len,
                        int64_t expect_rv);
/* Deletes key; *out (may be NULL) is the final state, referenced. FG_OK or FG_ENOENT. */
int ks_store_delete(ks_store_t *s, int res, const char *key, ks_obj_t **out);

/* The objects of resource res (in namespace ns, or all when ns is NULL) with key > after (or all
 * when after is NULL), in key order, as they were at resourceVersion at_rv (0 = now). *items is a
 * new array of referenced objects (free with ks_objs_free); *rv_out is the snapshot's RV.
 * FG_OK, KS_EEXPIRED (at_rv is older than the history), KS_ETOOLARGE (newer than the store). */
int ks_store_list(ks_store_t *s, int res, const char *ns, const char *after, int64_t at_rv,
                  ks_obj_t ***items, size_t *n, int64_t *rv_out);
/* The same, where only the first max items (in key order) must be exact and complete: *n may
 * be larger (a rewind keeps max + the number of changes since at_rv). *total is how many
 * objects were in range (>= *n). LIST pages use it so a page of 500 out of 120k does not
 * reference every object. */
int ks_store_list_max(ks_store_t *s, int res, const char *ns, const char *after, int64_t at_rv,
                      size_t max, ks_obj_t ***items, size_t *n, size_t *total, int64_t *rv_out);
void ks_objs_free(ks_obj_t **items, size_t n);

/* Copies up to max events with rv > after into evs (referenced; release with ks_events_release),
 * waiting up to wait_ms for one to appear; with res >= 0 only events of that resource are
 * waited for and copied (-1: every resource). *n_out may be 0 (timeout); *cursor_out is the RV
 * up to which the log was read (events of other resources included). KS_EEXPIRED when events
 * after `after` (of res, when given) have fallen out of the history; FG_EIO when the store is
 * closing. */
int ks_store_wait_events(ks_store_t *s, int res, int64_t after, int wait_ms, ks_event_t *evs,
                         size_t max, size_t *n_out, int64_t *cursor_out);
void ks_events_release(ks_event_t *evs, size_t n);

/* ---- selectors (selector.c) --------------------------------------------- */

typedef struct ks_selector ks_selector_t;

/* Parses a labelSelector; FG_OK with *out (free with ks_selector_free; NULL text = match all),
 * or FG_EINVAL with a message in err. */
int ks_label_selector_parse(const char *text, ks_selector_t **out, char *err, size_t errlen);
/* Parses a fieldSelector for resource res (unsupported field labels are FG_EINVAL). */
int ks_field_selector_parse(int res, const char *text, ks_selector_t **out, char *err,
                            size_t errlen);
bool ks_label_selector_matches(const ks_selector_t *sel, const json_t *obj);
bool ks_field_selector_matches(const ks_selector_t *sel, const json_t *obj);
bool ks_selector_empty(const ks_selector_t *sel);
void ks_selector_free(ks_selector_t *sel);

/* ---- requests and responses --------------------------------------------- */

#define KS_MAX_QUERY 32

typedef struct {
    const char *method;
    const char *path;
    const char *keys[KS_MAX_QUERY];
    const char *values[KS_MAX_QUERY];
    size_t nquery;
    const char *content_type;  /* may be NULL */
    const char *user_agent;    /* may be NULL */
    const char *authorization; /* the Authorization header, may be NULL */
    const char *ws_key;        /* Sec-WebSocket-Key (an upgrade request), may be NULL */
    const char *ws_protocol;   /* Sec-WebSocket-Protocol offered, may be NULL */
    const char *accept;        /* the Accept header, may be NULL */
    const char *body;
    size_t body_len;
} ks_req_t;

/* Value of query parameter key, or NULL. */
const char *ks_req_query(const ks_req_t *req, const char *key);

/* A boolean query flag read as the API server reads every one (apimachinery's
 * Convert_Slice_string_To_bool): absent, "0" or any case of "false" is false; anything else,
 * "True", "t" and the empty value included, is true. */
bool ks_req_flag(const ks_req_t *req, const char *key);

typedef struct ks_watch ks_watch_t;

/* A generic streaming answer (pod logs with follow): next appends to b, waiting up to wait_ms;
 * FG_OK (b may be empty) or FG_ENOENT at the end. free releases st. */
typedef struct {
    void *st;
    int (*next)(void *st, fg_buf_t *b, int wait_ms);
    void (*free)(void *st);
} ks_stream_t;

/* An upgraded connection (exec over WebSocket): the server sends the 101 with these headers, then
 * calls run(st, fd, extra, extra_len) on a thread of its own with the raw (non-blocking) socket;
 * run owns st and frees it. */
typedef struct {
    void *st;
    const char *protocol; /* Sec-WebSocket-Protocol answered */
    char accept[32];      /* Sec-WebSocket-Accept */
    void (*run)(void *st, int fd, const char *extra, size_t extra_len);
    void (*free)(void *st); /* when the upgrade never happens */
} ks_upgrade_t;

typedef struct {
    int code;
    char *body; /* malloc'd; NULL when watch is set */
    size_t len;
    const char *content_type;
    ks_watch_t *watch;    /* a streaming answer: read it with ks_watch_next */
    ks_stream_t stream;   /* another streaming answer when stream.next is set */
    ks_upgrade_t upgrade; /* a WebSocket upgrade when upgrade.run is set */
    bool drop;            /* close the connection without an answer (fault "down") */
} ks_resp_t;

void ks_resp_free(ks_resp_t *r);

/* ---- clusters and the handler (handler.c) ------------------------------- */

/* Request verbs counted by /_kubesim/stats, in its key order. */
typedef enum {
    KS_VERB_LIST = 0,
    KS_VERB_WATCH,
    KS_VERB_GET,
    KS_VERB_CREATE,
    KS_VERB_UPDATE,
    KS_VERB_PATCH,
    KS_VERB_DELETE,
    KS_NVERBS
} ks_verb_t;

/* Fault settings of one cluster (POST /_kubesim/faults replaces them whole). */
typedef struct {
    int64_t latency_ms;
    double error_rate; /* 0..1 */
    int error_status;
    bool down;
} ks_faults_t;

/* Timings of the simulated kubelet and controllers (zero delays for fast tests). */
typedef struct {
    int64_t start_ms;         /* scheduled -> Running */
    int64_t run_ms;           /* how long a Job pod runs before it ends */
    int64_t heartbeat_ms;     /* node Ready heartbeat period */
    double log_lines_per_sec; /* generated log lines per container */
    int64_t event_ttl_ms;     /* events not seen for this long are deleted (0: 1 h) */
} ks_timing_t;

typedef struct ks_churn ks_churn_t;
typedef struct ks_ctrl ks_ctrl_t;
typedef struct ks_gc_item ks_gc_item_t;

typedef struct {
    char *name;
    char *region;
    char *zone;
    char *token;
    uint16_t port;
    ks_store_t *store;
    int64_t bookmark_ms; /* period of BOOKMARK events on watches that allow them */
    volatile int stopping;
    /* part 2: admin state (admin.c) */
    pthread_mutex_t admin_mu; /* guards faults and churn */
    ks_faults_t faults;
    uint64_t requests[KS_NVERBS]; /* atomic counters */
    volatile int cut_gen;         /* bumped by cut-watches: older watches end */
    ks_churn_t *churn;
    /* part 2: the living cluster (controller.c) */
    ks_timing_t timing;
    ks_ctrl_t *ctrl;
    int64_t clock_offset_s; /* added to the controller's wall clock (tests move time) */
    /* the garbage collector's work (write.c): owners deleted since its last pass */
    pthread_mutex_t gc_mu;
    ks_gc_item_t *gc;
} ks_cluster_t;

/* A cluster with an empty store holding the namespaces every cluster has (default, kube-system,
 * kube-public, kube-node-lease). Strings are copied; token may be NULL (no auth). */
int ks_cluster_new(const char *name, const char *region, const char *zone, const char *token,
                   uint16_t port, size_t history, int64_t bookmark_ms, ks_cluster_t **out);
void ks_cluster_free(ks_cluster_t *c);

/* Answers one request. Always fills *out (a Status on failure); returns FG_OK. */
int ks_handle(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);
/* The same without auth, faults or counting: the controllers' own API calls. */
void ks_handle_internal(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);

/* ---- controllers and the simulated kubelet (controller.c) -------------- */

/* Node shape for the nodes a cluster starts with. */
typedef struct {
    int64_t count;
    int64_t cpu_milli;
    int64_t memory_bytes;
    int64_t gpus;
    int64_t max_pods;
    const char *instance_type;
} ks_node_spec_t;

/* Creates the cluster's nodes and starts its controller thread (Deployments, ReplicaSets, Jobs,
 * CronJobs, scheduling, pod phases, node heartbeats, Events). FG_OK or FG_EIO. */
int ks_ctrl_start(ks_cluster_t *c, const ks_node_spec_t *nodes);
/* Stops and joins the controller thread (safe when none was started). */
void ks_ctrl_stop(ks_cluster_t *c);
/* One reconcile pass now, on the caller's thread (tests drive time with it). */
void ks_ctrl_tick(ks_cluster_t *c);
/* Whether a pod object is a seeded one (the controllers leave those alone). */
bool ks_obj_seeded(const ks_obj_t *o);
/* The cluster's clock for the controllers (wall time + clock_offset_s), in ms. */
int64_t ks_now_ms(const ks_cluster_t *c);

/* ---- admin API (admin.c) ------------------------------------------------- */

/* FG_OK when req is an admin path (/_kubesim/...; out filled), FG_ENOENT otherwise. */
int ks_admin(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);
/* Applies the fault settings to a Kubernetes-path request: FG_OK to serve it, or FG_EIO with out
 * filled (an injected error, or drop when down). Sleeps the injected latency. */
int ks_faults_apply(ks_cluster_t *c, ks_resp_t *out);
/* Seeds ns (created if missing) with nodes and pods; FG_OK or FG_EINVAL. */
int ks_seed(ks_cluster_t *c, const char *ns, int64_t nodes, int64_t pods);
/* Starts (per_minute > 0), retunes or stops (0) the churn of pod mutations in ns. */
void ks_churn_set(ks_cluster_t *c, int64_t per_minute, const char *ns);
void ks_churn_stop(ks_cluster_t *c);

/* ---- server-side printing (table.c) --------------------------------------- */

/* Whether the client asked for a meta.k8s.io Table (Accept: ...;as=Table;g=meta.k8s.io). */
bool ks_wants_table(const ks_req_t *req);
/* An empty Table (new reference) of resource res at resourceVersion rv; columnDefinitions are
 * null without with_columns (watch events after the first, as a real server sends them). */
json_t *ks_table_new(int res, const char *rv, bool with_columns);
/* Appends obj's row; include is ?includeObject= (NULL/"Metadata", "Object" or "None"). */
void ks_table_add_row(json_t *table, int res, const json_t *obj, const char *include,
                      int64_t now_ms);

/* ---- Status errors (status.c) ------------------------------------------- */

/* Fills out with a Failure Status. name/kind/group may be NULL; causes (stolen) may be NULL. */
void ks_status_reply(ks_resp_t *out, int code, const char *reason, const char *message,
                     const char *name, const char *group, const char *kind, json_t *causes);
/* The Status object itself (new reference), for watch ERROR events. */
json_t *ks_status_new(int code, const char *reason, const char *message);
/* Fills out with 200 and the compact JSON of j (stolen). */
void ks_json_reply(ks_resp_t *out, int code, json_t *j);

/* ---- discovery (discovery.c) -------------------------------------------- */

/* FG_OK when path is a discovery path (out filled), FG_ENOENT otherwise. */
int ks_discovery(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);

/* ---- reads (read.c) ----------------------------------------------------- */

typedef struct {
    int res;
    const char *ns;   /* NULL for cluster-scoped or all namespaces */
    const char *name; /* NULL for collections */
    const char *sub;  /* "status", "scale" or NULL */
    bool v1;          /* autoscaling/v1: the stored v2 HPA converted in and out (convert.c) */
} ks_target_t;

/* ---- autoscaling/v1 (convert.c) ------------------------------------------- */

/* An autoscaling/v2 HPA as autoscaling/v1, and back (new references). */
json_t *ks_hpa_to_v1(const json_t *v2);
json_t *ks_hpa_from_v1(const json_t *v1);
/* Converts a successful answer's HPA or HPA list in out to autoscaling/v1. */
void ks_v1_reply(ks_resp_t *out);

void ks_get(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_list(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_watch_start(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
/* Appends the next events (newline-terminated JSON) to b, waiting up to wait_ms.
 * FG_OK (b may be empty), FG_ENOENT when the stream has ended (timeout, ERROR sent, shutdown). */
int ks_watch_next(ks_watch_t *w, fg_buf_t *b, int wait_ms);
void ks_watch_free(ks_watch_t *w);
/* "{"kind":K,"apiVersion":V," + rest of o->ser: the object as GET answers it (caller frees). */
char *ks_obj_full_json(const ks_obj_t *o, size_t *len_out);

/* Helpers shared by the read and write paths (read.c). The *_or_reply ones fill out and return
 * FG_EINVAL when the input is refused. */
char *ks_key(const char *ns, const char *name); /* caller frees */
void ks_not_found_reply(ks_resp_t *out, const ks_resource_t *r, const char *name);
void ks_invalid_reply(ks_resp_t *out, const ks_target_t *t, const char *name, const char *field,
                      const char *cause_reason, const char *detail);
int ks_parse_rv_or_reply(const char *s, int64_t *out, ks_resp_t *resp);
int ks_selectors_or_reply(const ks_req_t *req, int res, ks_selector_t **labels,
                          ks_selector_t **fields, ks_resp_t *out);
void ks_too_large_reply(ks_resp_t *out, int64_t asked, int64_t current);
char *ks_continue_encode(int64_t rv, const char *last_key);
int ks_continue_decode(const char *tok, int64_t *rv, char **last_key);
/* The autoscaling/v1 Scale view of a Deployment (new reference). */
json_t *ks_scale_of(const ks_obj_t *o);

/* ---- writes (write.c, patch.c, managed.c) ------------------------------- */

void ks_create(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_update(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_patch(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_delete(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);

/* The garbage collector's pass (kube-controller-manager's, run by the controller thread):
 * deletes the dependents of owners deleted since the last pass (background propagation) and
 * finishes the deletion of owners held by the `orphan` finalizer (their dependents lose the
 * owner reference, then the owner goes). Without controllers nothing collects, as in a cluster
 * without a controller manager. */
void ks_gc_run(ks_cluster_t *c);
void ks_gc_free(ks_cluster_t *c);

/* Patch application: FG_OK with *out a new object, or FG_EINVAL with err filled. The merge
 * patches copy only what they change: *out shares the other members with target (as stored
 * versions do), so neither may be changed below the top level without copying the member. */
int ks_merge_patch(const json_t *target, const json_t *patch, json_t **out);
int ks_json_patch(const json_t *target, const json_t *patch, json_t **out, char *err,
                  size_t errlen);
int ks_strategic_merge_patch(const json_t *target, const json_t *patch, json_t **out);
/* The same on a reference to target the caller gives up (stolen). JSON patch changes target
 * in place (the caller owns it whole); the merge patches copy what they change, as above.
 * FG_EINVAL (target released) when the patch is not an object / a list. */
int ks_merge_patch_into(json_t *target, const json_t *patch, json_t **out);
int ks_strategic_merge_patch_into(json_t *target, const json_t *patch, json_t **out);
int ks_json_patch_into(json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);

/* The FieldsV1 trie of the fields set in obj (new reference). */
json_t *ks_fields_v1(const json_t *obj);

/* ---- pod log and exec (logs.c, exec.c) --------------------------------- */

/* FG_OK when t is a pod's log or exec subresource (out filled), FG_ENOENT otherwise. */
int ks_pod_sub(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_pod_log(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
void ks_pod_exec(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out);
/* Kills every running exec child (and its process group): kubesim is stopping. */
void ks_exec_kill_all(void);

#endif
