/* cache: fleetgate's Redis: the connection pool and server-side scripts, and the informers
 * that keep the cache in step with the member clusters (key schema: cache/SCHEMA.md).
 *
 * A pool holds a few connections (one per worker thread is enough: each thread keeps using the
 * slot it was given first). Every call is bounded by short connect and command timeouts, so a
 * request thread never waits long on Redis; after an error the connection is dropped (a hiredis
 * context cannot be reused after one) and reconnected on a later call, with a backoff during
 * which calls fail at once with FG_EIO. Callers fall back when they see FG_EIO.
 *
 * Only src/cache/ includes hiredis.h.
 */
#ifndef FLEETGATE_CACHE_H
#define FLEETGATE_CACHE_H

#include "fleetgate/core.h"

typedef struct fg_redis fg_redis_t;
typedef struct fg_redis_batch fg_redis_batch_t; /* commands sent in one round trip (below) */

/* A Lua script, called by EVALSHA with its SHA-1 (loaded with SCRIPT LOAD on NOSCRIPT). */
typedef struct {
    const char *source; /* borrowed: must outlive the script */
    char sha1[41];
} fg_redis_script_t;

/* Parses url (redis://[:PASSWORD@]HOST:PORT[/DB] or unix:///PATH) and makes a pool of nconns
 * connections, connected lazily on first use. timeout_ms bounds each connect and each command.
 * FG_OK with *out set (free with fg_redis_free), or FG_EINVAL for a URL it cannot use. */
int fg_redis_new(fg_redis_t **out, const char *url, unsigned nconns, unsigned timeout_ms);
void fg_redis_free(fg_redis_t *r);

/* Computes the script's SHA-1; source is borrowed. */
void fg_redis_script_init(fg_redis_script_t *s, const char *source);

/* Runs a script whose reply is an array of integers: writes up to nout of them to out and their
 * number to *nout_read. FG_OK; FG_EIO when Redis cannot be reached in time (or is in backoff);
 * FG_EINVAL when Redis answered with an error or an unexpected shape (logged). */
int fg_redis_eval_ints(fg_redis_t *r, const fg_redis_script_t *s, size_t nkeys,
                       const char *const *keys, size_t nargs, const char *const *args, int64_t *out,
                       size_t nout, size_t *nout_read);

/* Sends one command (no reply expected beyond status); FG_OK, FG_EIO or FG_EINVAL as above.
 * For tests and maintenance (FLUSHALL, SCRIPT FLUSH). */
int fg_redis_command(fg_redis_t *r, size_t argc, const char *const *argv);

/* Calls that found Redis unreachable since start (for metrics). */
uint64_t fg_redis_failures(const fg_redis_t *r);

/* ---- generic commands and their replies (the read APIs) ------------------ */

/* A reply as Redis gave it; read it with the accessors below, free it with fg_redis_reply_free.
 * Elements of an array are borrowed from it. */
typedef struct fg_redis_reply fg_redis_reply_t;

typedef enum {
    FG_REDIS_NIL = 0,
    FG_REDIS_STRING,
    FG_REDIS_ARRAY,
    FG_REDIS_INTEGER,
    FG_REDIS_STATUS,
    FG_REDIS_ERROR,
} fg_redis_reply_type_t;

/* Runs one command and hands back its reply (*out, owned by the caller; a Redis error is a reply
 * of type FG_REDIS_ERROR, not a failure). FG_OK, or FG_EIO when Redis cannot be reached in time
 * (or is in backoff): then why (may be NULL) says so, "redis: Connection refused (HOST:PORT)". */
int fg_redis_query(fg_redis_t *r, size_t argc, const char *const *argv, fg_redis_reply_t **out,
                   char *why, size_t whylen);
/* Runs ncmds commands in one round trip (pipelined): command i is argvs[i][0..argcs[i]), its reply
 * goes to outs[i] (each owned by the caller). FG_OK with every outs[i] set, or FG_EIO with none. */
int fg_redis_pipeline(fg_redis_t *r, size_t ncmds, const size_t *argcs,
                      const char *const *const *argvs, fg_redis_reply_t **outs, char *why,
                      size_t whylen);
/* fg_redis_pipeline in two halves, so that work overlaps the round trip: _send sends the
 * commands and, on FG_OK, keeps the calling thread's connection (locked) until _recv, on the
 * same thread, reads the ncmds replies and gives it back. In between, the thread makes no other
 * call on r. FG_EIO from _send: nothing is pending, _recv is not called. */
int fg_redis_pipeline_send(fg_redis_t *r, size_t ncmds, const size_t *argcs,
                           const char *const *const *argvs, char *why, size_t whylen);
int fg_redis_pipeline_recv(fg_redis_t *r, size_t ncmds, fg_redis_reply_t **outs, char *why,
                           size_t whylen);
void fg_redis_reply_free(fg_redis_reply_t *rep);
fg_redis_reply_type_t fg_redis_reply_type(const fg_redis_reply_t *rep);
/* The bytes of a string, status or error reply (borrowed); NULL and *len 0 for other types. */
const char *fg_redis_reply_str(const fg_redis_reply_t *rep, size_t *len);
/* An integer reply's value (0 for other types). */
int64_t fg_redis_reply_int(const fg_redis_reply_t *rep);
/* An array's number of elements and element i (borrowed; NULL past the end or for non-arrays). */
size_t fg_redis_reply_len(const fg_redis_reply_t *rep);
const fg_redis_reply_t *fg_redis_reply_at(const fg_redis_reply_t *rep, size_t i);

/* ---- the key schema (src/cache/keys.c, cache/SCHEMA.md section 2) ---------
 *
 * Every Redis key fleetgate reads or writes is built here, so the schema has one owner. A
 * builder writes the key into *k and returns its text (k->s) for an argv. Parts are bounded by
 * their validators (DNS-1123 names, token subjects of at most 256 bytes), so a key always fits;
 * a longer part is cut, naming a key that nothing writes. `kind` is fleetgate's kind name
 * (fg_kube_kind_info()->name), `resource` the Kubernetes resource, `scope` a project or "_". */
#define FG_CACHE_KEY_MAX 320
typedef struct {
    char s[FG_CACHE_KEY_MAX];
} fg_cache_key_t;

#define FG_CACHE_KEY_EPOCH "fg:epoch" /* string: the id of Redis's current data set */

/* fg:o:{kind}:{cluster}:{scope}: hash, object name -> simplified object (JSON). */
const char *fg_cache_key_objects(fg_cache_key_t *k, const char *kind, const char *cluster,
                                 const char *scope);
/* fg:o:{kind}: the prefix of every objects hash of a kind (the mirror tracks it). */
const char *fg_cache_key_objects_prefix(fg_cache_key_t *k, const char *kind);
/* fg:i:{kind}:{cluster}:{scope}: zset of the names of that hash, score 0 (keyset walks). */
const char *fg_cache_key_index(fg_cache_key_t *k, const char *kind, const char *cluster,
                               const char *scope);
/* fg:s:{kind}:{cluster}: set of the scopes that hold objects of that kind. */
const char *fg_cache_key_scopes(fg_cache_key_t *k, const char *kind, const char *cluster);
/* fg:cluster:{cluster}: hash, the cluster's health (read it with fg_cache_cluster_read). */
const char *fg_cache_key_cluster(fg_cache_key_t *k, const char *cluster);
/* fg:sync:{cluster}:{resource}: hash, an informer's sync state (fg_cache_sync_read). */
const char *fg_cache_key_sync(fg_cache_key_t *k, const char *cluster, const char *resource);
/* fg:rv:{cluster}:{resource}: string, the resourceVersion of the last change applied. */
const char *fg_cache_key_rv(fg_cache_key_t *k, const char *cluster, const char *resource);
/* fg:lease:{cluster}:{resource}: string, the replica that runs that informer. */
const char *fg_cache_key_lease(fg_cache_key_t *k, const char *cluster, const char *resource);
/* fg:lease:_:{work}: string, the replica that runs a singleton (e.g. "reconciler"). */
const char *fg_cache_key_work_lease(fg_cache_key_t *k, const char *work);
/* Takes or extends (release false) or gives up (true) the lease key for holder: *held says
 * whether holder has it now. FG_OK, FG_EIO, FG_EINVAL (src/cache/lease.c). */
int fg_cache_lease(fg_redis_t *r, const char *key, const char *holder, int64_t ttl_ms, bool release,
                   bool *held);
/* fg:t:{cluster}:{resource}:{nonce}: the prefix of a relist's temporary keys. */
const char *fg_cache_key_relist(fg_cache_key_t *k, const char *cluster, const char *resource,
                                const char *nonce);
/* fg:rl:{class}:u:{subject} and fg:rl:{class}:p:{project}: GCRA buckets of a caller and of a
 * project; class is 'r' (reads), 'w' (writes) or 's' (stream leases, callers only). */
const char *fg_cache_key_rate_caller(fg_cache_key_t *k, char cls, const char *subject);
const char *fg_cache_key_rate_project(fg_cache_key_t *k, char cls, const char *project);

/* fg:q:{project}:{tier}: hash, app -> its quota reservation (cache/quota_reserve.lua). */
const char *fg_cache_key_quota(fg_cache_key_t *k, const char *project, const char *tier);
/* fg:qu:{project}:{tier}: string, the tier's usage as last read from the cache (quota_reserve.lua).
 */
const char *fg_cache_key_quota_usage(fg_cache_key_t *k, const char *project, const char *tier);

/* fg:ev:{project}: hash, event id -> a folded event of the project's timeline (JSON);
 * fg:evx:{project}: zset, score 0, its order newest first: "{9999999999999 - lastSeenMs, 13
 * digits}|{event id}" (cache/insight_event.lua writes both; cache/SCHEMA.md). */
const char *fg_cache_key_events(fg_cache_key_t *k, const char *project);
const char *fg_cache_key_events_order(fg_cache_key_t *k, const char *project);
/* fg:hist:{project}: hash, history entry id -> entry (JSON); fg:histx:{project}: zset, score 0,
 * newest first: "{9999999999999 - timeMs, 13 digits}|{entry id}" (cache/insight_history.lua
 * writes both; cache/SCHEMA.md). */
const char *fg_cache_key_history(fg_cache_key_t *k, const char *project);
const char *fg_cache_key_history_order(fg_cache_key_t *k, const char *project);

/* fg:chg:{project}: stream, the project's changes (cache/insight_change.lua; SCHEMA.md). */
const char *fg_cache_key_changes(fg_cache_key_t *k, const char *project);
/* fg:pre:{kind}:{cluster}:{scope}: hash, object name -> the object as it was before a
 * write-through stored a version the watch has not brought yet ("" when there was none): what
 * the watch's history and change stream comparisons start from (cache/cache_upsert.lua). */
const char *fg_cache_key_preimage(fg_cache_key_t *k, const char *kind, const char *cluster,
                                  const char *scope);
/* fg:chgv:{kind}:{cluster}:{scope}:{name}: string, the version last added to the change stream
 * for that object, so its two writers (watch, write-through) add a version once, in order. */
const char *fg_cache_key_change_mark(fg_cache_key_t *k, const char *kind, const char *cluster,
                                     const char *scope, const char *name);

/* fg:idem:{id}: hash, an Idempotency-Key's record (id: a hash of caller and key). */
const char *fg_cache_key_idem(fg_cache_key_t *k, const char *id);

/* ---- cluster and sync state (src/cache/state.c) ------------------------------
 *
 * The informers write fg:cluster and fg:sync; these readers are the only code that interprets
 * them. Read both hashes (HGETALL, e.g. with fg_cache_batch_add_state) and hand the replies to
 * the readers; fg_cache_freshness_judge says what a reader may serve from that cluster. */
typedef enum {
    FG_HEALTH_UNKNOWN = 0, /* never contacted: no fg:cluster hash */
    FG_HEALTH_HEALTHY,
    FG_HEALTH_UNREACHABLE,
} fg_cluster_health_t;

typedef struct {
    fg_cluster_health_t health;
    int64_t last_contact_ms; /* 0: never */
    char last_error[512];    /* "" when none */
} fg_cache_cluster_t;

typedef enum {
    FG_SYNC_NONE = 0, /* no fg:sync hash, or a state this build does not know */
    FG_SYNC_SYNCING,  /* before the first complete list */
    FG_SYNC_SYNCED,
    FG_SYNC_RELISTING,
    FG_SYNC_LAGGING,
} fg_sync_state_t;

typedef struct {
    bool present; /* the hash exists (state may still be FG_SYNC_NONE: unknown) */
    fg_sync_state_t state;
    char rv[65]; /* "" when none */
    int64_t objects;
    int64_t last_event_ms, last_sync_ms; /* Unix ms, 0: never */
    char last_error[200];
} fg_cache_sync_t;

/* Reads an HGETALL reply of fg:cluster / fg:sync (an empty or NULL reply: the hash is absent). */
void fg_cache_cluster_read(const fg_redis_reply_t *hash, fg_cache_cluster_t *out);
void fg_cache_sync_read(const fg_redis_reply_t *hash, fg_cache_sync_t *out);
/* "Synced", "Relisting"...; "" for FG_SYNC_NONE. */
const char *fg_cache_sync_state_name(fg_sync_state_t s);
/* Whether the informer finished its first complete sync (what readiness waits for). */
bool fg_cache_sync_done_once(const fg_cache_sync_t *s);

/* What a reader may serve from one cluster's cache. */
typedef enum {
    FG_FRESH_CURRENT = 0, /* in step with the cluster */
    FG_FRESH_STALE,       /* cached, but the cluster cannot be reached or its watch is not live */
    FG_FRESH_MISSING,     /* nothing complete cached: serve nothing of it */
} fg_freshness_t;

typedef struct {
    fg_freshness_t state;
    int64_t stale_since_ms; /* Stale: the last contact, or the last change applied (0: unknown) */
    int64_t applied_ms;     /* the last event or relist applied (0: none) */
    char rv[65];            /* the watermark ("" when none) */
    char reason[256];       /* why it is not Current ("" when it is) */
} fg_cache_freshness_t;

void fg_cache_freshness_judge(const fg_cache_cluster_t *cl, const fg_cache_sync_t *sync,
                              fg_cache_freshness_t *out);
/* "Current", "Stale", "Missing". */
const char *fg_cache_freshness_name(fg_freshness_t s);

/* ---- read your writes (src/cache/state.c) ------------------------------------------------
 *
 * A write answered by a member cluster shows in the cache once that cluster's informer applied
 * it. A write handler waits for that before it answers, so a GET on any replica right after
 * shows the change: the cluster's fg:rv:{cluster}:{resource} at or past the resourceVersion the
 * write got (fg:rv never runs ahead of the objects), or, for a delete, the object's field gone. */
typedef struct {
    const char *cluster;
    const char *resource; /* for rv: "deployments" */
    const char *rv;       /* the write's resourceVersion */
    bool gone;            /* wait for the object below to be absent instead */
    const char *kind, *scope, *name;
} fg_cache_wait_t;

/* Whether resourceVersion have is at or past want. Both are compared as the decimal numbers
 * etcd-backed API servers give out (Kubernetes calls them opaque; fleetgate relies on the
 * ordering for this wait only); anything else is "not reached". */
bool fg_cache_rv_reached(const char *have, const char *want);
/* Polls Redis (every 2 ms, one round trip for all n, at most 64) until every wait is satisfied.
 * FG_OK, FG_ETIMEOUT after timeout_ms, or FG_EIO when Redis cannot be read. */
int fg_cache_wait_applied(fg_redis_t *r, const fg_cache_wait_t *w, size_t n, int timeout_ms);

/* ---- write-through (src/cache/through.c) -----------------------------------------------------
 *
 * What a write handler does instead of waiting: it stores the translated object the cluster
 * answered itself, guarded by resourceVersion against the watch, which applies the same change
 * later (cache/cache_upsert.lua explains the guard). Removals are left to the watch. */
typedef struct {
    const char *kind;     /* fleetgate's kind name: "app" */
    const char *cluster;  /* the member cluster written to */
    const char *resource; /* its watch's resource: "deployments" */
    const char *scope;    /* the project, "_" for cluster-scoped kinds */
    const char *name;
    const char *app;    /* a pod's app, else NULL */
    const char *object; /* the simplified object (JSON) */
    const char *rv;     /* the resourceVersion the cluster gave the write */
} fg_cache_through_t;

/* Writes the n items through in one round trip. shown[i] says whether the cache shows item i's
 * write now (stored, or the cache already shows it or a newer version); false when its
 * resourceVersion is not a decimal number (cannot be ordered) or Redis refused it: the caller
 * then waits for the watch (fg_cache_wait_applied). FG_OK, or FG_EIO (every shown[i] false). */
int fg_cache_write_through(fg_redis_t *r, const fg_cache_through_t *items, size_t n, bool *shown);
/* fg_cache_write_through in two halves, so that work overlaps the round trip: _begin sends
 * (items, and the strings they point to, must live until _end); _end, on the same thread, with
 * no other call on r in between, reads the answers into shown, frees p and returns what
 * fg_cache_write_through returns. Every _begin is followed by its _end. */
typedef struct fg_cache_through_pending fg_cache_through_pending_t;
fg_cache_through_pending_t *fg_cache_write_through_begin(fg_redis_t *r,
                                                         const fg_cache_through_t *items, size_t n);
int fg_cache_write_through_end(fg_cache_through_pending_t *p, bool *shown);

/* ---- tier quota reservations (src/cache/quota.c, cache/quota_reserve.lua) -------------------
 *
 * Amounts are {cpu millicores, memory bytes, pods}. A write reserves what its app will take
 * (replacing the app's earlier reservation) before it reaches a cluster; the script counts every
 * other app once, by its live reservation or else by what the cache shows of it (uses[], which
 * the caller reads from the cache), and refuses when any limit would be passed. Reservations
 * expire after ttl_ms, so one whose write died is forgotten; a write that failed releases its
 * own at once. */
typedef struct {
    const char *app;
    int64_t amount[3];
} fg_cache_quota_use_t;

typedef struct {
    bool reserved;
    int resource;     /* refused: 0 cpu, 1 memory, 2 pods */
    int64_t would_be; /* refused: the usage with this app */
    int64_t limit;
    bool need_uses; /* called without uses and none kept: nothing was done */
} fg_cache_quota_verdict_t;

/* limit[i] < 0: no limit on that resource. fresh[]: what the cache shows now of usage that
 * changes on its own (running job sets); uses[]: the tier's apps as the cache shows them, which
 * is kept in Redis for usage_keep_ms (0: not kept) so that the next writes of the tier, from any
 * replica, need not read every app again. Either may hold the caller's own entry (skipped).
 * uses NULL: the kept usage is used, and out->need_uses is set (nothing reserved) when there is
 * none or it expired: then call again with the apps read from the cache. FG_OK with *out,
 * FG_EIO, or FG_EINVAL. */
int fg_cache_quota_reserve(fg_redis_t *r, const char *project, const char *tier, const char *app,
                           const int64_t want[3], const int64_t limit[3], int64_t ttl_ms,
                           const fg_cache_quota_use_t *fresh, size_t nfresh,
                           const fg_cache_quota_use_t *uses, size_t nuses, int64_t usage_keep_ms,
                           fg_cache_quota_verdict_t *out);
/* What a guarded reserve checks first: the project's object in each member cluster still has
 * the version the caller took the limits from ("" when it had none). */
#define FG_CACHE_QUOTA_MAX_CLUSTERS 64
typedef struct {
    const char *const *clusters; /* every member cluster, by name */
    const char *const *versions;
    size_t n;
} fg_cache_quota_guard_t;
/* fg_cache_quota_reserve with the kept usage (uses NULL), as a command of batch b that goes with
 * the caller's first reads, before it has read the project: it reserves only when g holds, no
 * cluster holds app and the project has no job sets (quota_reserve.lua's guarded form); else
 * nothing is done and out->need_uses is set, for the caller to read and call
 * fg_cache_quota_reserve. Returns the command's index in b. */
size_t fg_cache_quota_reserve_add(fg_redis_batch_t *b, const char *project, const char *tier,
                                  const char *app, const int64_t want[3], const int64_t limit[3],
                                  int64_t ttl_ms, const fg_cache_quota_guard_t *g);
/* The verdict of that command, once b has run: FG_OK with *out, or FG_EIO (an error reply, such
 * as NOSCRIPT on a Redis that never ran the script: call fg_cache_quota_reserve). */
int fg_cache_quota_reserve_read(const fg_redis_batch_t *b, size_t i, fg_cache_quota_verdict_t *out);
/* Drops the app's reservation (a write that failed, an app deleted). */
int fg_cache_quota_release(fg_redis_t *r, const char *project, const char *tier, const char *app);
/* name (an app, "jobset/<name>") was deleted: its quota is free at once on every replica. One
 * script (cache/quota_forget.lua): drops its reservation, and for ttl_ms (or until name is
 * reserved again) what the cache or the tier's kept usage still shows of it is not counted.
 * FG_OK or FG_EIO. */
int fg_cache_quota_forget(fg_redis_t *r, const char *project, const char *tier, const char *name,
                          int64_t ttl_ms);

/* ---- Idempotency-Key records (src/cache/idem.c, cache/idem_begin.lua) ---------------------
 *
 * id names the (caller, key) pair (hex, made by the caller); fingerprint the request (method,
 * path, body). begin makes a pending record when none exists, atomically, so two replicas
 * receiving the same retry cannot both run it; finish stores the answer for ttl; abandon
 * forgets a request that changed nothing (its retry runs again). */
typedef enum {
    FG_IDEM_NEW = 0,
    FG_IDEM_PENDING,
    FG_IDEM_MISMATCH,
    FG_IDEM_DONE
} fg_cache_idem_state_t;

typedef struct {
    fg_cache_idem_state_t state;
    unsigned status;              /* DONE: the first answer */
    char *body, *etag, *location; /* DONE: owned; fg_cache_idem_clear */
} fg_cache_idem_t;

int fg_cache_idem_begin(fg_redis_t *r, const char *id, const char *fingerprint,
                        int64_t pending_ttl_ms, fg_cache_idem_t *out);
void fg_cache_idem_clear(fg_cache_idem_t *s);
int fg_cache_idem_finish(fg_redis_t *r, const char *id, unsigned status, const char *body,
                         const char *etag, const char *location, int64_t ttl_ms);
int fg_cache_idem_abandon(fg_redis_t *r, const char *id);

/* ---- the change streams (src/cache/changes.c) --------------------------------------------
 *
 * Each project's changes are a Redis stream, fg:chg:{project}, written by the informers
 * (cache/insight_change.lua) and bounded (MAXLEN ~ insights.changes_max_per_project). A reader is
 * one connection of its own, used by one thread: XREAD over many projects' streams, XRANGE to
 * catch up, and the stream's state (what was trimmed). Entry ids are Redis stream ids
 * ("MS-SEQ"). */
typedef struct fg_cache_changes fg_cache_changes_t;

/* One entry; every pointer is borrowed from the reply and valid during the callback only. */
typedef struct {
    const char *id;                                           /* "MS-SEQ" */
    const char *type;                                         /* "upsert" or "delete" */
    const char *kind, *name, *cluster, *version, *time, *app; /* "" when absent */
    const char *object;                                       /* upsert: compact JSON; else NULL */
    size_t object_len;
} fg_cache_change_t;

typedef void (*fg_cache_change_fn)(void *ud, size_t stream, const fg_cache_change_t *c);

/* A reader on the pool's server (pool borrowed: it must outlive the reader); it connects at its
 * first use and again after a failure. */
fg_cache_changes_t *fg_cache_changes_new(const fg_redis_t *pool);
void fg_cache_changes_free(fg_cache_changes_t *c);
/* XREAD BLOCK block_ms COUNT count over the n projects' streams, each after after[i]: fn for each
 * entry with its stream's index. FG_OK (nothing new within block_ms is FG_OK too) or FG_EIO (the
 * connection is dropped; the next call connects again). */
int fg_cache_changes_read(fg_cache_changes_t *c, const char *const *projects,
                          const char *const *after, size_t n, int block_ms, size_t count,
                          fg_cache_change_fn fn, void *ud);
/* XRANGE of project's stream after `after` (exclusive), at most count entries; *got counts them. */
int fg_cache_changes_range(fg_cache_changes_t *c, const char *project, const char *after,
                           size_t count, fg_cache_change_fn fn, void *ud, size_t *got);
/* The stream's last id ever added and the greatest id trimmed away ("0-0" when none, or when the
 * stream does not exist), each into 48 bytes. When first_id is not NULL (48 bytes): the id of
 * the stream's first entry when it never lost one (every id before it belongs to no entry it
 * ever had, e.g. an id from before a FLUSHALL), else "0-0"; *exists: the stream exists (a
 * FLUSHALL removes it). FG_OK or FG_EIO. */
int fg_cache_changes_state(fg_cache_changes_t *c, const char *project, char *last_id,
                           char *max_deleted, char *first_id, bool *exists);
/* The id of Redis's current data set (FG_CACHE_KEY_EPOCH, set by the informers) into out (len
 * bytes), "" while it is not set (just after a FLUSHALL). A change means the streams were lost
 * with everything else. FG_OK or FG_EIO. */
int fg_cache_changes_epoch(fg_cache_changes_t *c, char *out, size_t len);

/* ---- batches: commands sent in one round trip (src/cache/batch.c) -------------
 *
 * A batch collects commands (their arguments copied), sends them pipelined, and keeps the
 * replies until it is freed: build, run, read replies by the index add returned. */

fg_redis_batch_t *fg_redis_batch_new(void); /* free with fg_redis_batch_free */
void fg_redis_batch_free(fg_redis_batch_t *b);
/* Appends a command of argc arguments (copied), argument i being lens[i] bytes holding no NUL,
 * or NUL-terminated when lens is NULL; returns its index. */
size_t fg_redis_batch_add(fg_redis_batch_t *b, size_t argc, const char *const *argv,
                          const size_t *lens);
/* The same with the arguments as a NULL-terminated list: fg_redis_batch_addv(b, "GET", k, NULL). */
size_t fg_redis_batch_addv(fg_redis_batch_t *b, const char *arg0, ...);
/* Adds HGETALL of fg:cluster:{cluster}, then of fg:sync:{cluster}:{resource}, or, when resource
 * is NULL, of every kind's sync hash in fg_kind_t order (FG_KIND_COUNT of them); returns the
 * index of the cluster's (the sync hashes follow it). */
size_t fg_cache_batch_add_state(fg_redis_batch_t *b, const char *cluster, const char *resource);
size_t fg_redis_batch_len(const fg_redis_batch_t *b);
/* Sends every command not yet sent in one round trip. FG_OK with every reply kept, or FG_EIO
 * (why says so) with none: the batch may be run again. */
int fg_redis_batch_run(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen);
/* fg_redis_batch_run in two halves (fg_redis_pipeline_send's rules): _send sends, and on FG_OK
 * the thread's connection is b's until _recv reads the replies. Nothing else may be added to b
 * in between. */
int fg_redis_batch_send(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen);
int fg_redis_batch_recv(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen);
/* Command i's reply (borrowed from the batch), NULL before a successful run. */
const fg_redis_reply_t *fg_redis_batch_reply(const fg_redis_batch_t *b, size_t i);
/* Command i's reply handed to the caller (free with fg_redis_reply_free); the batch forgets it. */
fg_redis_reply_t *fg_redis_batch_take_reply(fg_redis_batch_t *b, size_t i);
/* Forgets every command and reply, keeping the memory for the next ones. */
void fg_redis_batch_reset(fg_redis_batch_t *b);

/* ---- informers (src/cache/informer.c) ------------------------------------
 *
 * The writer side of the cache: for every configured member cluster and every kind fleetgate
 * serves, an informer LISTs (paginated) and WATCHes the cluster and keeps the keys of
 * cache/SCHEMA.md section 2 in step. One thread per cluster runs all of that cluster's
 * informers on one curl-multi loop; each (cluster, resource) runs in one fleetgate replica at a
 * time (lease fg:lease:...). Configuration: cfg->cache (README.md "The cache").
 *
 * Readiness: readers compute it from Redis, which covers every replica's informers: a
 * (cluster, resource) is ready when fg:sync:{cluster}:{resource} has state Synced, Lagging or
 * (after a first sync) Relisting, and a cluster whose fg:cluster:{cluster} health is Unreachable
 * does not hold readiness back. fg_informers_ready gives the same answer for the informers
 * this process holds, for a process that wants it without a Redis round trip.
 */
typedef struct fg_informers fg_informers_t;

/* Starts the informer threads (cfg is borrowed and must outlive the informers). Returns FG_OK
 * with *out (stop with fg_informers_stop), or FG_EINVAL / FG_EIO with a line in errs. Starting
 * does not wait for Redis or any cluster: the informers connect and retry on their own. */
int fg_informers_start(fg_informers_t **out, const fg_config_t *cfg, fg_buf_t *errs);
/* Stops every informer, releases this replica's leases (so another replica takes over at
 * once) and frees everything. NULL is fine. */
void fg_informers_stop(fg_informers_t *inf);
/* True when, in every cluster, each informer this process holds a lease for finished its first
 * sync, or the cluster is unreachable; false while Redis cannot be reached. Thread-safe. */
bool fg_informers_ready(const fg_informers_t *inf);
/* The id this replica writes into leases (cache.replica_id or hostname-pid-random). */
const char *fg_informers_replica_id(const fg_informers_t *inf);

/* ---- the mirror: process-local copies of hash fields (cache/mirror.c) ----------------------
 * Redis's client-side caching (CLIENT TRACKING, BCAST mode, invalidations on a subscribed
 * connection) keeps the copies exact; while the mirror is not live it holds nothing and every
 * read goes to Redis. Use: seq = begin(); if get() misses, fetch from Redis and put(seq, ...). */
typedef struct fg_redis_mirror fg_redis_mirror_t;
typedef struct {
    bool live;
    uint64_t hits, misses, invalidations, resets;
    size_t bytes;
} fg_redis_mirror_stats_t;

/* Starts the mirror's thread for keys under prefix (e.g. "fg:o:pod:"), holding at most
 * max_bytes; pool is borrowed for where and how to connect and must outlive the mirror. */
int fg_redis_mirror_new(fg_redis_mirror_t **out, const fg_redis_t *pool, const char *prefix,
                        size_t max_bytes);
void fg_redis_mirror_free(fg_redis_mirror_t *m);
/* A snapshot to take before fetching from Redis; 0 when the mirror is not live (put ignores 0). */
uint64_t fg_redis_mirror_begin(fg_redis_mirror_t *m);
/* FG_OK with *value (a new copy, NULL when the field is known to be absent) and *len, or
 * FG_ENOENT when the mirror does not hold an exact copy. m may be NULL (always FG_ENOENT). */
int fg_redis_mirror_get(fg_redis_mirror_t *m, const char *key, const char *field, char **value,
                        size_t *len);
/* Keeps what a fetch begun at seq returned (value NULL: the field is absent); dropped when the
 * key changed since seq. */
void fg_redis_mirror_put(fg_redis_mirror_t *m, const char *key, const char *field, uint64_t seq,
                         const char *value, size_t len);
void fg_redis_mirror_stats(const fg_redis_mirror_t *m, fg_redis_mirror_stats_t *out);
/* Without copying anything: FG_OK when the mirror holds an exact copy of the field, with
 * *present (false: known absent) and *prep (a new reference the caller lets go of with
 * fg_prepared_unref, or NULL when no answer was attached yet); FG_ENOENT when it holds none. */
int fg_redis_mirror_peek(fg_redis_mirror_t *m, const char *key, const char *field, bool *present,
                         fg_prepared_t **prep);
/* Attaches prep (the answer made from value; a new reference is kept) to the entry of key and
 * field, only while that entry still holds exactly value; replaces an earlier attachment. */
void fg_redis_mirror_attach(fg_redis_mirror_t *m, const char *key, const char *field,
                            const char *value, size_t len, fg_prepared_t *prep);

#endif
