/* cache/cache_internal.h: what the files of cache/ share and nobody else needs (hiredis types
 * stay inside the module). */
#ifndef FG_CACHE_INTERNAL_H
#define FG_CACHE_INTERNAL_H

#include "fleetgate/cache.h"
#include "fleetgate/kube.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>

/* A new connection to the pool's server, outside the pool, authenticated and on the pool's
 * database, for a long-lived use (the mirror's subscriber and tracking connections). Commands
 * time out as the pool's do; with blocking_reads the socket's read timeout is removed, for a
 * connection that waits on pushes. NULL on failure with why filled; the caller redisFree()s it. */
redisContext *fg_redis_connect_raw(const fg_redis_t *r, bool blocking_reads, char *why,
                                   size_t whylen);

/* The informers' upsert script (embedded by informer.c), which write-through (through.c) runs
 * too, in its 'through' mode. */
extern const char fg_cache_upsert_lua[];
extern const char fg_insight_history_lua[];
extern const char fg_insight_change_lua[];

/* ---- backoff: redis.c's pool slots and the informers' writers ------------------------ */

typedef struct {
    uint64_t delay_ns;    /* the last wait (0: no failure since the last success) */
    uint64_t retry_at_ns; /* no attempt before this */
} backoff_t;

/* A failure: the next attempt waits twice the last wait, min_ns first, at most max_ns. */
static inline void backoff_failed(backoff_t *b, uint64_t min_ns, uint64_t max_ns) {
    b->delay_ns = b->delay_ns ? 2 * b->delay_ns : min_ns;
    if (b->delay_ns > max_ns)
        b->delay_ns = max_ns;
    b->retry_at_ns = fg_now_ns() + b->delay_ns;
}

static inline void backoff_succeeded(backoff_t *b) {
    b->delay_ns = 0;
}

static inline bool backoff_waiting(const backoff_t *b, uint64_t now_ns) {
    return now_ns < b->retry_at_ns;
}

/* ---- the informers' writer (writer.c) ------------------------------------------------
 *
 * One hiredis connection of an informer thread, used by that thread alone: commands are
 * pipelined and flushed in bounds (count and bytes), so writes cost one round trip per loop turn.
 * After any failure the connection is dropped, `lost` is set for the owner to reset what it
 * holds, and connecting again waits for a backoff (100 ms doubling to 2 s). */
typedef struct {
    const fg_redis_t *addr;           /* where and how to connect (borrowed) */
    const char *name;                 /* the cluster, for logs and metric labels (borrowed) */
    const fg_redis_script_t *scripts; /* loaded on every connect (borrowed) */
    size_t nscripts;
    fg_metric_t *m_round_trip, *m_lag; /* histograms labelled by name (borrowed) */
    redisContext *rc;                  /* NULL while disconnected */
    bool lost;                         /* dropped since the owner last reset */
    backoff_t backoff;
    size_t pending, pending_bytes; /* commands sent whose replies are unread */
    uint64_t oldest_pending_ns;    /* when the oldest unflushed change arrived (0: none) */
} writer_t;

/* Connects when the backoff allows: true when connected (scripts loaded), false otherwise. */
bool writer_connect(writer_t *w);
/* Drops the connection (logging why) and starts the backoff. */
void writer_fail(writer_t *w, const char *why);
/* Reads every pending reply; false (and the connection dropped) on an I/O error or a NOSCRIPT;
 * other error replies are logged (a script that refused one object). */
bool writer_flush(writer_t *w);
/* Pipelines a command (lens NULL: NUL-terminated arguments); flushes past the bounds. */
void writer_append(writer_t *w, int argc, const char **argv, const size_t *lens);
/* Pipelines ncmds commands already in RESP form (a LIST page formatted by a worker). */
void writer_append_resp(writer_t *w, const char *resp, size_t len, size_t ncmds);
/* A command whose reply the caller needs (pending writes are flushed first). NULL when Redis
 * cannot be reached (the connection is then dropped); the caller frees the reply. */
redisReply *writer_command(writer_t *w, int argc, const char **argv);
/* Reads the replies of the last n pipelined commands into out (the caller frees them); false
 * (connection dropped, nothing in out) on failure. */
bool writer_replies(writer_t *w, size_t n, redisReply **out);
/* Closes the connection without counting a failure (shutdown). */
void writer_close(writer_t *w);

/* ---- what this process's informers confirmed (through.c) ------------------------------
 *
 * After each flush Redis confirmed, an informer notes the resourceVersion its watch applied up
 * to (fg:rv as it just wrote it). A write-through skips, without a round trip, an object whose
 * version that already covers: cache_upsert.lua's through mode would store nothing for it (fg:rv
 * at or past its version), and the watch's scripts have compared it. What is noted stays true
 * while Redis keeps its data, so a dropped connection or a new epoch forgets the cluster. A
 * replica whose informers do not hold a resource's lease notes nothing for it: its writes go
 * through Redis as before. */
void through_applied_note(const char *cluster, const char *resource, const char *rv);
void through_applied_forget(const char *cluster);

/* ---- the insights feed (insight_feed.c) -------------------------------------------------
 *
 * What the informers add to Redis beside the cache for the insight APIs: each Event they see
 * (watch or LIST) is folded into its project's timeline by cache/insight_event.lua, pipelined
 * with the cache's own writes, so only the informer's lease holder writes it. */
#define INSIGHT_EVENT_ARGC 12

typedef struct {
    fg_cache_key_t ev, evx, pods;
    char first[24], last[24], now[24], max_age[24], max_n[24];
    const char *argv[INSIGHT_EVENT_ARGC];
    size_t lens[INSIGHT_EVENT_ARGC];
} insight_event_cmd_t;

/* Fills cmd with the EVALSHA (sha1: insight_event.lua's) of one translated event t, whose
 * compact JSON is text (len bytes, borrowed: it must outlive cmd). False when t names no
 * project (nothing to send). */
bool insight_event_cmd(insight_event_cmd_t *cmd, const char *sha1, const fg_insights_conf_t *conf,
                       const char *cluster, const json_t *t, const char *text, size_t len);

/* The change stream: each watch event of a pod, app, job set, cron job, scaler or project is
 * offered to its project's stream by cache/insight_change.lua, sent just before the cache's own
 * write of it (the script compares it with the cached object, or with what a write-through
 * replaced, and streams each version of an object once, in order). */
#define INSIGHT_CHANGE_ARGC 17 /* at most: 16, and the app when the caller knows it */

/* Where one object comes from, for insight_change_cmd and insight_history_cmd: a watch event or
 * a LIST item (a relist). HIST_MODIFIED is a watch's MODIFIED event: the object
 * existed before, so, as a LIST item, it is compared only with an object the cache holds and is
 * never "Created" (after a FLUSHALL, an event may come before the informer sees the new data
 * set and lists again). */
typedef enum { HIST_WATCH, HIST_MODIFIED, HIST_LIST } insight_history_from_t;

typedef struct {
    fg_cache_key_t objects, stream, pre, mark;
    char time[40], maxlen[24];
    int argc; /* of argv */
    const char *argv[INSIGHT_CHANGE_ARGC];
    size_t lens[INSIGHT_CHANGE_ARGC];
} insight_change_cmd_t;

/* Fills cmd with the EVALSHA (sha1: insight_change.lua's) of one object of cache kind kind
 * ("app"...) in cluster: name and scope as the cache keys it, text
 * the translated object's compact JSON ("" for a delete; borrowed), version its
 * resourceVersion; from: where it comes from (a LIST item is streamed only when the cache holds
 * an older version of it: a change the watch missed). False when the kind has no change stream
 * or no project. */
bool insight_change_cmd(insight_change_cmd_t *cmd, const char *sha1, const fg_insights_conf_t *conf,
                        const char *kind, const char *cluster, const char *name, const char *scope,
                        const char *text, size_t len, const char *version,
                        insight_history_from_t from);

/* Adds to cmd (filled by insight_change_cmd) the app its object belongs to, as the translated
 * object's "app" member says ("" when it has none; borrowed), so the script need not decode the
 * object to find it. Only for an object whose app is that member (a pod). */
void insight_change_cmd_app(insight_change_cmd_t *cmd, const char *app);

/* The workload history: each watch event and each LIST item of a pod, app, job set, cron job or
 * scaler is compared with the cached object (or with what a write-through replaced) by
 * cache/insight_history.lua, sent just before the cache's own write of it (LIST items: only
 * objects the cache holds). */
#define INSIGHT_HISTORY_ARGC 16

typedef struct {
    fg_cache_key_t objects, hist, histx, pre;
    char now[24], max_age[24], max_n[24];
    const char *argv[INSIGHT_HISTORY_ARGC];
    size_t lens[INSIGHT_HISTORY_ARGC];
} insight_history_cmd_t;

/* Fills cmd with the EVALSHA (sha1: insight_history.lua's) of one object of cache kind kind
 * ("app"...) in cluster: name and scope as the cache keys it, text
 * the translated object's compact JSON ("" for a delete; borrowed), version its
 * resourceVersion. False when the kind has no history. */
bool insight_history_cmd(insight_history_cmd_t *cmd, const char *sha1,
                         const fg_insights_conf_t *conf, const char *kind, const char *cluster,
                         const char *name, const char *scope, const char *text, size_t len,
                         const char *version, insight_history_from_t from);

#endif
