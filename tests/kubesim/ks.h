/* kubesim internal interface: the pieces of the Kubernetes API server simulator.
 *
 * Read in this order: resources.c (the table of served kinds), store.c (objects, resourceVersions,
 * the change log and its waiters), selector.c, status.c (Status errors), discovery.c, read.c (GET,
 * LIST, WATCH), write.c + patch.c + managed.c (writes), handler.c (routing of one request),
 * server.c (libmicrohttpd glue), tls.c, main.c (flags, config, start-up).
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

/* ---- objects and the store (store.c) ------------------------------------ */

/* One stored version of an object. Immutable once stored; shared by reference count. */
typedef struct {
    int refs;
    int res;      /* index into ks_resources */
    char *key;    /* "namespace/name" or "name" */
    json_t *json; /* the object without kind/apiVersion (owned) */
    char *ser;    /* compact JSON of json, serialised once */
    size_t ser_len;
    int64_t rv;
} ks_obj_t;

void ks_obj_ref(ks_obj_t *o);
void ks_obj_unref(ks_obj_t *o);

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

/* FG_OK with *out referenced (caller unrefs), or FG_ENOENT. */
int ks_store_get(ks_store_t *s, int res, const char *key, ks_obj_t **out);

typedef enum { KS_PUT_CREATE, KS_PUT_UPDATE } ks_put_mode_t;
/* Stores obj (stolen) under key. The store sets metadata.resourceVersion. For UPDATE, expect_rv
 * (when > 0) must equal the stored RV, else KS_ECONFLICT; a missing key is FG_ENOENT. CREATE of
 * an existing key is KS_EEXIST. On success *out (may be NULL) is the stored version, referenced. */
int ks_store_put(ks_store_t *s, int res, const char *key, json_t *obj, ks_put_mode_t mode,
                 int64_t expect_rv, ks_obj_t **out);
/* Deletes key; *out (may be NULL) is the final state, referenced. FG_OK or FG_ENOENT. */
int ks_store_delete(ks_store_t *s, int res, const char *key, ks_obj_t **out);

/* The objects of resource res (in namespace ns, or all when ns is NULL) with key > after (or all
 * when after is NULL), in key order, as they were at resourceVersion at_rv (0 = now). *items is a
 * new array of referenced objects (free with ks_objs_free); *rv_out is the snapshot's RV.
 * FG_OK, KS_EEXPIRED (at_rv is older than the history), KS_ETOOLARGE (newer than the store). */
int ks_store_list(ks_store_t *s, int res, const char *ns, const char *after, int64_t at_rv,
                  ks_obj_t ***items, size_t *n, int64_t *rv_out);
void ks_objs_free(ks_obj_t **items, size_t n);

/* Copies up to max events with rv > after into evs (referenced; release with ks_events_release),
 * waiting up to wait_ms for one to appear. *n_out may be 0 (timeout); *cursor_out is the RV up to
 * which the log was read (events of other resources included). KS_EEXPIRED when `after` has
 * fallen out of the history; FG_EIO when the store is closing. */
int ks_store_wait_events(ks_store_t *s, int64_t after, int wait_ms, ks_event_t *evs, size_t max,
                         size_t *n_out, int64_t *cursor_out);
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
    const char *body;
    size_t body_len;
} ks_req_t;

/* Value of query parameter key, or NULL. */
const char *ks_req_query(const ks_req_t *req, const char *key);

typedef struct ks_watch ks_watch_t;

typedef struct {
    int code;
    char *body; /* malloc'd; NULL when watch is set */
    size_t len;
    const char *content_type;
    ks_watch_t *watch; /* a streaming answer: read it with ks_watch_next */
} ks_resp_t;

void ks_resp_free(ks_resp_t *r);

/* ---- clusters and the handler (handler.c) ------------------------------- */

typedef struct {
    char *name;
    char *region;
    char *zone;
    char *token;
    uint16_t port;
    ks_store_t *store;
    int64_t bookmark_ms; /* period of BOOKMARK events on watches that allow them */
    volatile int stopping;
} ks_cluster_t;

/* A cluster with an empty store holding the namespaces every cluster has (default, kube-system,
 * kube-public, kube-node-lease). Strings are copied; token may be NULL (no auth). */
int ks_cluster_new(const char *name, const char *region, const char *zone, const char *token,
                   uint16_t port, size_t history, int64_t bookmark_ms, ks_cluster_t **out);
void ks_cluster_free(ks_cluster_t *c);

/* Answers one request. Always fills *out (a Status on failure); returns FG_OK. */
int ks_handle(ks_cluster_t *c, const ks_req_t *req, ks_resp_t *out);

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
} ks_target_t;

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

/* Patch application: FG_OK with *out a new object, or FG_EINVAL with err filled. */
int ks_merge_patch(const json_t *target, const json_t *patch, json_t **out);
int ks_json_patch(const json_t *target, const json_t *patch, json_t **out, char *err,
                  size_t errlen);
int ks_strategic_merge_patch(const json_t *target, const json_t *patch, json_t **out);

/* The FieldsV1 trie of the fields set in obj (new reference). */
json_t *ks_fields_v1(const json_t *obj);

#endif
