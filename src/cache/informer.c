/* cache/informer.c: the informers, which keep Redis in step with the member clusters.
 *
 * One thread per member cluster runs one fg_kube_loop_t (a curl multi) holding that cluster's
 * LIST pages (fg_kube_get_new: asynchronous, so a long list of one resource never stalls the
 * watches of the others) and its watches, and one hiredis connection of its own for the writes.
 * Parsing and translating LIST pages is the expensive part of a sync, so it runs on a few worker
 * threads shared by the clusters (see "LIST" below); watch events are translated in the loop.
 * Every (cluster, resource) informer is a small state machine:
 *
 *   IDLE (no lease) --lease taken--> fg:rv known? WATCH from it : LIST
 *   LIST: pages of list_page_size into temporary keys; 410 on a continue restarts the list;
 *         the last page ends in cache_swap.lua (atomic for readers), then WATCH from the list RV
 *   WATCH: events are pipelined (one EVALSHA each) and flushed once per loop turn; a clean end
 *          (timeoutSeconds) or a cut resumes from the last RV; 410 relists; other errors back
 *          off exponentially with jitter (WAIT) and resume from the last RV
 *
 * Redis is the source of truth for where an informer stands: fg:rv is written in the same
 * script as the objects, so a restarted fleetgate (or one whose Redis connection broke) resumes
 * its watches from there, and relists only on 410 or when fg:epoch says Redis lost its data.
 * When Redis cannot be reached the thread drops everything it holds (watches, lists, leases,
 * pending writes: memory stays bounded) and starts again from Redis's state once it is back.
 * LISTs are limited to MAX_LISTS at a time per cluster and start after a random delay, so a
 * restart or a failover never becomes a LIST storm.
 *
 * Lua scripts (cache/cache_*.lua) are embedded with .incbin (mk/cache.mk makes this object
 * depend on them). They name keys they compute (fg:a:..., temporary keys): fine on a single
 * Redis, which is all hiredis 0.14 speaks.
 */
#include "cache_internal.h"
#include "fleetgate/kube.h"

#include <hiredis/hiredis.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

FG_EMBED_FILE(fg_cache_upsert_lua, "cache/cache_upsert.lua");
FG_EMBED_FILE(fg_cache_delete_lua, "cache/cache_delete.lua");
FG_EMBED_FILE(fg_cache_swap_lua, "cache/cache_swap.lua");
FG_EMBED_FILE(fg_cache_tmpdrop_lua, "cache/cache_tmpdrop.lua");
FG_EMBED_FILE(fg_cache_lease_lua, "cache/cache_lease.lua");
FG_EMBED_FILE(fg_insight_event_lua, "cache/insight_event.lua");
FG_EMBED_FILE(fg_insight_change_lua, "cache/insight_change.lua");
FG_EMBED_FILE(fg_insight_history_lua, "cache/insight_history.lua");
FG_EMBED_FILE(fg_cache_gone_lua, "cache/cache_gone.lua");

enum {
    S_UPSERT,
    S_DELETE,
    S_SWAP,
    S_TMPDROP,
    S_LEASE,
    S_EVENT,
    S_CHANGE,
    S_HISTORY,
    S_GONE,
    S_COUNT
};

#define MAX_LISTS        2 /* LISTs in flight per cluster */
#define MAX_WORKERS      4 /* LIST page workers (parse + translate), shared by the clusters */
#define TMP_TTL_MS       "3600000"
#define EPOCH_PERIOD_NS  (1000ull * 1000000ull)
#define HEALTH_PERIOD_NS (5000ull * 1000000ull)
#define BACKOFF_MIN_MS   100
#define KEY_MAX          FG_CACHE_KEY_MAX

typedef enum { ST_IDLE = 0, ST_WAIT, ST_LISTING, ST_WATCHING } state_t;
typedef enum { NEXT_LIST = 0, NEXT_WATCH } next_t;

typedef struct cluster cluster_t;
typedef struct job job_t;

/* One (cluster, resource) informer; owned by its cluster's thread (struct cluster). */
typedef struct {
    cluster_t *cl;                              /* its cluster (read-only) */
    const fg_kube_kind_info_t *ki;              /* what it caches (read-only) */
    fg_cache_key_t key_rv, key_sync, key_lease; /* fg:rv, fg:sync and fg:lease of this informer */
    state_t st;                                 /* where its state machine stands (file comment) */
    next_t next;                                /* WAIT: what starts when wait_until_ns passes */
    bool leased;  /* this replica holds fg:lease, so this informer runs here */
    bool synced;  /* a complete list or a resume reached Redis in this process */
    bool gone;    /* the watch got a 410 ERROR event */
    bool lagging; /* fg:sync says Lagging: the next event sets Synced again */
    uint64_t wait_until_ns;
    const char *cause;    /* why the next LIST runs (metric label) */
    fg_kube_watch_t *req; /* the LIST page or the watch in flight */
    char rv[64];          /* the last resourceVersion applied */
    char noted_rv[64];    /* the last rv noted as confirmed (through_applied_note) */
    char *cont;           /* LIST: the continue token of the next page */
    char list_rv[64];     /* LIST: the resourceVersion of its first page (the snapshot) */
    fg_cache_key_t tmp;   /* LIST: the temporary key prefix ("" when none) */
    int64_t listed;       /* LIST: objects written so far */
    unsigned errors;      /* consecutive failures, for the backoff */
    uint64_t list_gen;    /* bumped by every LIST start and stop: stale pages are dropped */
    int pages_out;        /* LIST pages at the workers */
    bool fetch_done;      /* LIST: the last page was received */
} inf_t;

/* One member cluster's informers. Who touches what: fg_informers_start and _stop set up and
 * tear down everything before the cluster thread starts and after it is joined; in between the
 * cluster thread alone owns every field, but for `ready` (atomic, read by any thread), `done`
 * (under done_mu, appended to by the page workers) and the read-only conf and owner. */
struct cluster {
    fg_informers_t *owner;         /* read-only */
    const fg_cluster_conf_t *conf; /* read-only, borrowed from the configuration */
    fg_kube_client_t *kc;          /* the cluster's API client */
    fg_kube_loop_t *loop;          /* the curl-multi loop of its LISTs and watches */
    pthread_t thread;
    bool started;   /* thread was created (start/stop only) */
    writer_t w;     /* the Redis connection of this thread's writes */
    char epoch[40]; /* fg:epoch as last seen ("" before the first look) */
    uint64_t next_epoch_ns, next_lease_ns, next_health_ns; /* when each periodic task is due */
    int listing;                                           /* LISTs in flight (at most MAX_LISTS) */
    bool healthy;             /* the last request reached the cluster */
    bool health_known;        /* fg:cluster was written since the last (re)connect */
    char last_error[200];     /* why it is unreachable ("" when healthy) */
    uint64_t rng;             /* xorshift state for jitter */
    atomic_bool ready;        /* fg_informers_ready's answer for this cluster */
    pthread_mutex_t done_mu;  /* guards done */
    job_t *done;              /* LIST pages the workers finished, for apply_pages */
    inf_t inf[FG_KIND_COUNT]; /* one informer per kind, indexed by fg_kind_t */
};

struct fg_informers {
    fg_redis_t *redis_addr; /* where and how to connect (redis.c); its pool is never used */
    fg_cache_conf_t conf;
    fg_insights_conf_t insights; /* the events timeline's retention (insight_feed.c) */
    char replica_id[128];
    char lease_px[24];
    fg_redis_script_t scripts[S_COUNT];
    atomic_bool stop;
    cluster_t *clusters;
    size_t nclusters;
    /* the LIST page workers and their queue */
    pthread_t *workers;
    size_t nworkers;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    job_t *qhead, *qtail;
    bool qstop;
};

/* ---- metrics ------------------------------------------------------------ */

static fg_metric_t *m_events, *m_relists, *m_restarts, *m_lag, *m_redis, *m_objects, *m_errors;

static void register_metrics(void) {
    static const char *const l_ev[] = {"cluster", "resource", "type", NULL};
    static const char *const l_rel[] = {"cluster", "resource", "cause", NULL};
    static const char *const l_res[] = {"cluster", "resource", "reason", NULL};
    static const char *const l_cl[] = {"cluster", NULL};
    static const char *const l_cr[] = {"cluster", "resource", NULL};
    m_events = fg_metrics_register("fleetgate_cache_events_total", "Watch events applied to Redis.",
                                   FG_METRIC_COUNTER, l_ev);
    m_relists = fg_metrics_register("fleetgate_cache_relists_total", "Full LISTs, by cause.",
                                    FG_METRIC_COUNTER, l_rel);
    m_restarts = fg_metrics_register("fleetgate_cache_watch_restarts_total",
                                     "Watches started again, by reason.", FG_METRIC_COUNTER, l_res);
    m_lag = fg_metrics_register("fleetgate_cache_sync_lag_seconds",
                                "From a watch event's arrival to its write acknowledged by Redis.",
                                FG_METRIC_HISTOGRAM, l_cl);
    m_redis = fg_metrics_register("fleetgate_cache_redis_seconds",
                                  "Round trips of the informers' Redis writes.",
                                  FG_METRIC_HISTOGRAM, l_cl);
    m_objects = fg_metrics_register("fleetgate_cache_objects",
                                    "Objects cached after the last LIST.", FG_METRIC_GAUGE, l_cr);
    m_errors = fg_metrics_register("fleetgate_cache_translate_errors_total",
                                   "Objects a cluster sent that could not be translated.",
                                   FG_METRIC_COUNTER, l_cr);
}

static void count3(fg_metric_t *m, const inf_t *in, const char *third) {
    const char *v[] = {in->cl->conf->name, in->ki->resource, third};
    fg_metric_add(m, v, 1);
}

/* ---- small helpers -------------------------------------------------------- */

static uint64_t rnd(cluster_t *c) {
    /* xorshift64*: jitter only, not security */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 2685821657736338717ull;
}

/* Full jitter over [d/2, d]. */
static uint64_t jitter_ms(cluster_t *c, uint64_t d) {
    return d / 2 + (d > 1 ? rnd(c) % (d / 2 + 1) : 0);
}

static uint64_t backoff_ms(inf_t *in) {
    uint64_t cap = (uint64_t)in->cl->owner->conf.resync_backoff_max_ms;
    uint64_t d = BACKOFF_MIN_MS;
    for (unsigned i = 0; i < in->errors && d < cap; i++)
        d *= 2;
    return jitter_ms(in->cl, d < cap ? d : cap);
}

static void random_hex(cluster_t *c, char *out, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i + 1 < n; i++)
        out[i] = hex[rnd(c) & 15];
    out[n - 1] = '\0';
}

/* Percent-encodes a query value (continue tokens are base64 with '+', '/', '='). */
static void append_escaped(fg_buf_t *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~';
        if (plain)
            fg_buf_append(b, s, 1);
        else
            fg_buf_appendf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
    }
}

/* Names and namespaces go into keys separated by ':'; DNS-1123 names never hold one. */
static bool key_part_ok(const char *s) {
    if (s == NULL || s[0] == '\0' || strlen(s) > 253)
        return false;
    for (; *s; s++)
        if (*s == ':' || *s == '|' || (unsigned char)*s <= 0x20)
            return false;
    return true;
}

/* ---- Redis ------------------------------------------------------------------ */

static void pipe_cmd(cluster_t *c, int argc, const char **argv) {
    writer_append(&c->w, argc, argv, NULL);
}

/* Connects the writer when it is due; after a (re)connect, the epoch first, then the leases: an
 * informer taken now lists or resumes knowing whether Redis lost its data, and is not relisted a
 * second time by the next epoch check. fg:cluster is written again: Redis may have lost it. */
static void redis_connect(cluster_t *c) {
    if (!writer_connect(&c->w))
        return;
    c->next_epoch_ns = 0;
    c->next_lease_ns = 0;
    c->health_known = false;
}

/* ---- cluster health and sync state ------------------------------------------ */

static void write_health(cluster_t *c) {
    char ms[24];
    fg_cache_key_t k;
    const char *key = fg_cache_key_cluster(&k, c->conf->name);
    snprintf(ms, sizeof ms, "%lld", (long long)fg_wall_ms());
    const char *region = c->conf->region ? c->conf->region : "";
    if (c->healthy) {
        const char *a[] = {"HSET",          key,    "zone",      c->conf->zone,
                           "region",        region, "health",    "Healthy",
                           "lastContactMs", ms,     "lastError", ""};
        pipe_cmd(c, 12, a);
    } else {
        /* the last contact time stays what it was */
        const char *a[] = {"HSET", key,      "zone",        c->conf->zone, "region",
                           region, "health", "Unreachable", "lastError",   c->last_error};
        pipe_cmd(c, 10, a);
    }
    c->health_known = true;
    c->next_health_ns = fg_now_ns() + HEALTH_PERIOD_NS;
}

static void cluster_ok(cluster_t *c) {
    if (!c->healthy || !c->health_known || fg_now_ns() >= c->next_health_ns) {
        if (!c->healthy)
            FG_LOG(FG_LOG_INFO, NULL, "cache: cluster %s: reachable", c->conf->name);
        c->healthy = true;
        c->last_error[0] = '\0';
        write_health(c);
    }
}

/* A failure talking to the cluster: only transport failures make it Unreachable (an HTTP
 * error is an answer). */
static void cluster_failed(cluster_t *c, const fg_kube_error_t *err) {
    bool transport = err->http_code == 0 && (strcmp(err->reason, FG_KUBE_REASON_TRANSPORT) == 0 ||
                                             strcmp(err->reason, FG_KUBE_REASON_TIMEOUT) == 0);
    if (!transport)
        return;
    snprintf(c->last_error, sizeof c->last_error, "%s: %s", err->reason, err->message);
    if (c->healthy || !c->health_known) {
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: unreachable: %s", c->conf->name,
               c->last_error);
        c->healthy = false;
        write_health(c);
    }
}

static void sync_state(inf_t *in, const char *state, const char *error) {
    if (error != NULL) {
        const char *a[] = {"HSET", in->key_sync.s, "state", state, "lastError", error};
        pipe_cmd(in->cl, 6, a);
    } else {
        const char *a[] = {"HSET", in->key_sync.s, "state", state};
        pipe_cmd(in->cl, 4, a);
    }
}

/* ---- state changes ------------------------------------------------------------ */

static void start_list(inf_t *in);
static void start_watch(inf_t *in);

static void drop_tmp(inf_t *in) {
    if (in->tmp.s[0] == '\0')
        return;
    const fg_redis_script_t *s = &in->cl->owner->scripts[S_TMPDROP];
    const char *a[] = {"EVALSHA", s->sha1, "0", in->tmp.s};
    pipe_cmd(in->cl, 4, a);
    in->tmp.s[0] = '\0';
}

/* Ends whatever the informer does (not from inside its own watch callback). */
static void stop_inf(inf_t *in) {
    if (in->req != NULL) {
        fg_kube_watch_free(in->req);
        in->req = NULL;
    }
    if (in->st == ST_LISTING) {
        in->cl->listing--;
        drop_tmp(in);
    }
    in->list_gen++;
    in->pages_out = 0;
    free(in->cont);
    in->cont = NULL;
    in->st = ST_IDLE;
}

static void schedule(inf_t *in, next_t next, uint64_t delay_ms, const char *cause) {
    in->st = ST_WAIT;
    in->next = next;
    in->cause = cause;
    in->wait_until_ns = fg_now_ns() + delay_ms * 1000000ull;
}

/* Relist after delay (jittered by the caller). */
static void relist(inf_t *in, uint64_t delay_ms, const char *cause) {
    stop_inf(in);
    schedule(in, NEXT_LIST, delay_ms, cause);
}

/* Everything stops: Redis was lost (its state decides what happens next) or shutdown. */
static void reset_all(cluster_t *c) {
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        inf_t *in = &c->inf[k];
        stop_inf(in);
        in->leased = false;
    }
    c->listing = 0;
    c->w.lost = false;
    atomic_store(&c->ready, false);
}

/* ---- LIST ------------------------------------------------------------------------- *
 *
 * A page's answer is not parsed in the loop thread: only its metadata (resourceVersion and the
 * continue token, found by a scan of the top-level object) is, so the next page is asked for at
 * once, and the page goes to a worker (parse, translate, format the Redis commands). Finished
 * pages come back through the cluster's done list; the loop thread writes them (in any order:
 * they are independent writes to the temporary keys) and swaps when the last one is written.
 * At most MAX_PAGES_OUT pages of an informer are at the workers, which bounds memory. */

#define MAX_PAGES_OUT 4

struct job {
    job_t *next;
    inf_t *in;
    uint64_t gen; /* the informer's list_gen when the page was asked for */
    char *body;   /* the page as received (owned until parsed) */
    size_t len;
    char tmp[KEY_MAX];
    fg_buf_t resp; /* the page's Redis commands, formatted */
    size_t ncmds;
    int64_t listed;
    bool bad; /* the page is not a list */
};

static void job_free(job_t *j) {
    free(j->body);
    fg_buf_free(&j->resp);
    free(j);
}

static void on_page(void *ud, fg_kube_watch_t *req, int rc, char *body, size_t len,
                    const fg_kube_error_t *err);

static void request_page(inf_t *in) {
    cluster_t *c = in->cl;
    fg_buf_t path;
    fg_buf_init(&path, 16384);
    fg_buf_appendf(&path, "%s/%s?limit=%lld", in->ki->api_prefix, in->ki->resource,
                   (long long)c->owner->conf.list_page_size);
    if (in->cont != NULL) {
        fg_buf_appendf(&path, "&continue=");
        append_escaped(&path, in->cont);
    }
    int rc = fg_kube_get_new(&in->req, c->kc, path.data, on_page, in);
    if (rc == FG_OK)
        rc = fg_kube_loop_add(c->loop, in->req);
    fg_buf_free(&path);
    if (rc != FG_OK) {
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: cannot start a LIST", c->conf->name,
               in->ki->resource);
        in->errors++;
        relist(in, backoff_ms(in), "error");
    }
}

static void start_list(inf_t *in) {
    cluster_t *c = in->cl;
    char nonce[17];
    random_hex(c, nonce, sizeof nonce);
    fg_cache_key_relist(&in->tmp, c->conf->name, in->ki->resource, nonce);
    in->st = ST_LISTING;
    c->listing++;
    in->list_gen++;
    in->pages_out = 0;
    in->fetch_done = false;
    in->listed = 0;
    in->list_rv[0] = '\0';
    free(in->cont);
    in->cont = NULL;
    count3(m_relists, in, in->cause ? in->cause : "initial");
    sync_state(in, in->synced || in->rv[0] ? "Relisting" : "Syncing", NULL);
    request_page(in);
}

/* Appends one command, formatted, to a page's commands (worker side). */
static void emit(job_t *j, int argc, const char **argv, const size_t *lens) {
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0)
        abort(); /* out of memory */
    if (fg_buf_append(&j->resp, cmd, (size_t)n) != FG_OK)
        abort(); /* the buffer is unbounded (SIZE_MAX) */
    free(cmd);
    j->ncmds++;
}

static void emit_str(job_t *j, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    emit(j, argc, argv, lens);
}

/* A command of three NUL-terminated arguments (SADD, PEXPIRE). */
static void emit3(job_t *j, const char *cmd, const char *key, const char *arg) {
    const char *a[] = {cmd, key, arg};
    emit_str(j, 3, a);
}

typedef struct {
    char o[KEY_MAX], a[KEY_MAX];
} last_keys_t;

/* Gives a temporary key a TTL once per run of objects going to it, so an abandoned relist
 * (a crash) leaves nothing behind for long. */
static void expire_once(job_t *j, char *last, const char *key) {
    if (strcmp(last, key) == 0)
        return;
    snprintf(last, KEY_MAX, "%s", key);
    emit3(j, "PEXPIRE", key, TMP_TTL_MS);
}

/* The commands writing one translated object of a LIST page to the temporary keys. */
static void write_tmp(job_t *j, last_keys_t *last, const char *name, const char *scope,
                      const char *app, const char *json, size_t json_len) {
    char ko[KEY_MAX], ki[KEY_MAX], ks[KEY_MAX];
    snprintf(ko, sizeof ko, "%so:%s", j->tmp, scope);
    snprintf(ki, sizeof ki, "%si:%s", j->tmp, scope);
    snprintf(ks, sizeof ks, "%ss", j->tmp);
    const char *h[] = {"HSET", ko, name, json};
    size_t hl[] = {4, strlen(ko), strlen(name), json_len};
    emit(j, 4, h, hl);
    const char *z[] = {"ZADD", ki, "0", name};
    emit_str(j, 4, z);
    if (strcmp(last->o, ko) != 0) {
        emit3(j, "SADD", ks, scope);
        expire_once(j, last->o, ko);
        emit3(j, "PEXPIRE", ki, TMP_TTL_MS);
        emit3(j, "PEXPIRE", ks, TMP_TTL_MS);
    }
    if (app != NULL && app[0] != '\0') {
        char ka[KEY_MAX], kx[KEY_MAX], pa[KEY_MAX];
        snprintf(ka, sizeof ka, "%sa:%s:%s", j->tmp, scope, app);
        snprintf(kx, sizeof kx, "%sax", j->tmp);
        snprintf(pa, sizeof pa, "%s:%s", scope, app);
        emit3(j, "SADD", ka, name);
        if (strcmp(last->a, ka) != 0) {
            emit3(j, "SADD", kx, pa);
            expire_once(j, last->a, ka);
            emit3(j, "PEXPIRE", kx, TMP_TTL_MS);
        }
    }
}

/* Translates obj; on success *out (a new reference), name, scope and app point into it.
 * Thread-safe (workers call it). */
static bool translate(inf_t *in, const json_t *obj, json_t **out, const char **name,
                      const char **scope, const char **app) {
    char err[256];
    fg_kube_origin_t origin = {in->cl->conf->name, in->cl->conf->zone};
    json_t *t = NULL;
    if (fg_kube_translate(in->ki->kind, obj, &origin, &t, err, sizeof err) != FG_OK) {
        const char *l[] = {in->cl->conf->name, in->ki->resource};
        fg_metric_add(m_errors, l, 1);
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: object not cached: %s",
               in->cl->conf->name, in->ki->resource, err);
        return false;
    }
    *name = json_string_value(json_object_get(t, "name"));
    *scope = in->ki->namespaced ? json_string_value(json_object_get(t, "project")) : "_";
    *app = in->ki->kind == FG_KIND_POD ? json_string_value(json_object_get(t, "app")) : NULL;
    if (!key_part_ok(*name) || !key_part_ok(*scope) || (*app != NULL && !key_part_ok(*app))) {
        if (key_part_ok(*name) && key_part_ok(*scope)) {
            *app = NULL; /* an app name fleetgate cannot key: the pod is cached without it */
        } else {
            FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: a name fleetgate cannot key",
                   in->cl->conf->name, in->ki->resource);
            json_decref(t);
            return false;
        }
    }
    *out = t;
    return true;
}

/* Worker side: the page's items into Redis commands. */
static void page_work(job_t *j) {
    json_t *answer = NULL;
    char err[160];
    fg_buf_init(&j->resp, SIZE_MAX);
    j->len = fg_kube_prune(j->body, j->len, FG_KUBE_PRUNE_LIST, FG_KUBE_PLACEMENT_ANNOTATION);
    int rc = fg_json_load(j->body, j->len, &answer, err, sizeof err);
    free(j->body);
    j->body = NULL;
    json_t *items = json_object_get(answer, "items");
    if (rc != FG_OK || !json_is_object(answer) || !(json_is_array(items) || json_is_null(items))) {
        j->bad = true;
        json_decref(answer);
        return;
    }
    last_keys_t last = {"", ""};
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item) {
        json_t *t = NULL;
        const char *name, *scope, *app;
        if (!translate(j->in, item, &t, &name, &scope, &app))
            continue;
        size_t len = 0;
        char *text = fg_json_dumps(t, &len);
        const fg_informers_t *o = j->in->cl->owner;
        const char *version = json_string_value(json_object_get(t, "version"));
        /* a change the watch missed (the cache holds an older version) is streamed */
        insight_change_cmd_t chg;
        if (insight_change_cmd(&chg, o->scripts[S_CHANGE].sha1, &o->insights, j->in->ki->name,
                               j->in->cl->conf->name, name, scope, text, len, version, HIST_LIST))
            emit(j, chg.argc, chg.argv, chg.lens);
        /* history: this item against the object the cache holds (none: nothing, never Created) */
        insight_history_cmd_t hc;
        if (insight_history_cmd(&hc, o->scripts[S_HISTORY].sha1, &o->insights, j->in->ki->name,
                                j->in->cl->conf->name, name, scope, text, len, version, HIST_LIST))
            emit(j, INSIGHT_HISTORY_ARGC, hc.argv, hc.lens);
        write_tmp(j, &last, name, scope, app, text, len);
        insight_event_cmd_t ev;
        if (j->in->ki->kind == FG_KIND_EVENT &&
            insight_event_cmd(&ev, o->scripts[S_EVENT].sha1, &o->insights, j->in->cl->conf->name, t,
                              text, len))
            emit(j, INSIGHT_EVENT_ARGC, ev.argv, ev.lens);
        free(text);
        json_decref(t);
        j->listed++;
    }
    json_decref(answer);
}

static void *worker_main(void *arg) {
    fg_informers_t *o = arg;
    pthread_mutex_lock(&o->qmu);
    for (;;) {
        while (o->qhead == NULL && !o->qstop)
            pthread_cond_wait(&o->qcv, &o->qmu);
        if (o->qhead == NULL)
            break; /* stopping, and nothing left */
        job_t *j = o->qhead;
        o->qhead = j->next;
        if (o->qhead == NULL)
            o->qtail = NULL;
        pthread_mutex_unlock(&o->qmu);
        page_work(j);
        cluster_t *c = j->in->cl;
        pthread_mutex_lock(&c->done_mu);
        j->next = c->done;
        c->done = j;
        pthread_mutex_unlock(&c->done_mu);
        fg_kube_loop_wakeup(c->loop);
        pthread_mutex_lock(&o->qmu);
    }
    pthread_mutex_unlock(&o->qmu);
    return NULL;
}

static void submit(fg_informers_t *o, job_t *j) {
    pthread_mutex_lock(&o->qmu);
    j->next = NULL;
    if (o->qtail != NULL)
        o->qtail->next = j;
    else
        o->qhead = j;
    o->qtail = j;
    pthread_cond_signal(&o->qcv);
    pthread_mutex_unlock(&o->qmu);
}

/* The list's top-level "metadata" object, parsed on its own (a new reference), or NULL. A
 * scan, not a parse: other members are skipped byte by byte, and API servers put metadata
 * before the items, so the scan stops early. */
static json_t *list_metadata(const char *s, size_t n) {
    size_t i = fg_json_scan_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return NULL;
    i++;
    while (i < n) {
        i = fg_json_scan_ws(s, n, i);
        if (i >= n || s[i] != '"')
            return NULL;
        size_t key = i + 1, key_end = fg_json_scan_value(s, n, i);
        if (key_end <= key || key_end > n)
            return NULL;
        key_end--; /* the closing quote */
        i = fg_json_scan_ws(s, n, key_end + 1);
        if (i >= n || s[i] != ':')
            return NULL;
        size_t v = fg_json_scan_ws(s, n, i + 1);
        size_t v_end = fg_json_scan_value(s, n, v);
        if (key_end - key == 8 && memcmp(s + key, "metadata", 8) == 0) {
            json_t *m = NULL;
            if (fg_json_load(s + v, v_end - v, &m, NULL, 0) != FG_OK || !json_is_object(m)) {
                json_decref(m);
                return NULL;
            }
            return m;
        }
        i = fg_json_scan_ws(s, n, v_end);
        if (i >= n || s[i] != ',')
            return NULL;
        i++;
    }
    return NULL;
}

/* The objects the cache holds that the LIST no longer has (deleted while no watch ran): a delete
 * of the change stream and a "Deleted" of the history each, pipelined before the swap drops them.
 * Their version is the LIST's (the deletion's own is not known; the ids stay unique). */
static void list_gone(inf_t *in) {
    cluster_t *c = in->cl;
    const fg_informers_t *o = c->owner;
    const char *a[] = {"EVALSHA",    o->scripts[S_GONE].sha1, "0",
                       in->ki->name, c->conf->name,           in->tmp.s};
    redisReply *r = writer_command(&c->w, 6, a);
    if (r == NULL)
        return;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const char *scope = r->element[i]->str, *name = r->element[i + 1]->str;
        if (scope == NULL || name == NULL)
            continue;
        insight_change_cmd_t chg;
        if (insight_change_cmd(&chg, o->scripts[S_CHANGE].sha1, &o->insights, in->ki->name,
                               c->conf->name, name, scope, "", 0, in->list_rv, HIST_WATCH))
            writer_append(&c->w, chg.argc, chg.argv, chg.lens);
        insight_history_cmd_t hc;
        if (insight_history_cmd(&hc, o->scripts[S_HISTORY].sha1, &o->insights, in->ki->name,
                                c->conf->name, name, scope, "", 0, in->list_rv, HIST_LIST))
            writer_append(&c->w, INSIGHT_HISTORY_ARGC, hc.argv, hc.lens);
    }
    if (r->type == REDIS_REPLY_ERROR)
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: relist deletions not found: %s",
               c->conf->name, in->ki->resource, r->str);
    freeReplyObject(r);
}

static void finish_list(inf_t *in) {
    cluster_t *c = in->cl;
    list_gone(in);
    char ms[24], count[24];
    snprintf(ms, sizeof ms, "%lld", (long long)fg_wall_ms());
    snprintf(count, sizeof count, "%lld", (long long)in->listed);
    const fg_redis_script_t *s = &c->owner->scripts[S_SWAP];
    const char *a[] = {"EVALSHA",      s->sha1,      "2",           in->key_rv.s,
                       in->key_sync.s, in->ki->name, c->conf->name, in->tmp.s,
                       in->list_rv,    ms,           count};
    redisReply *r = writer_command(&c->w, 11, a);
    if (r == NULL)
        return; /* Redis lost: reset_all follows */
    bool ok = r->type == REDIS_REPLY_INTEGER;
    if (!ok)
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: relist swap failed: %s", c->conf->name,
               in->ki->resource, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
    c->listing--;
    in->st = ST_IDLE;
    in->list_gen++;
    if (!ok) {
        drop_tmp(in);
        in->errors++;
        schedule(in, NEXT_LIST, backoff_ms(in), "error");
        return;
    }
    in->tmp.s[0] = '\0';
    snprintf(in->rv, sizeof in->rv, "%s", in->list_rv);
    in->synced = true;
    in->errors = 0;
    const char *l[] = {c->conf->name, in->ki->resource};
    fg_metric_set(m_objects, l, (double)in->listed);
    FG_LOG(FG_LOG_INFO, NULL, "cache: cluster %s: %s: %lld object(s) listed at rv %s",
           c->conf->name, in->ki->resource, (long long)in->listed, in->rv);
    start_watch(in);
}

/* Loop side: writes the pages the workers finished; asks for held-back pages; swaps. */
static void apply_pages(cluster_t *c) {
    pthread_mutex_lock(&c->done_mu);
    job_t *list = c->done;
    c->done = NULL;
    pthread_mutex_unlock(&c->done_mu);
    while (list != NULL) {
        job_t *j = list;
        list = j->next;
        inf_t *in = j->in;
        if (j->gen != in->list_gen || in->st != ST_LISTING || c->w.rc == NULL) {
            job_free(j); /* a list that was abandoned meanwhile */
            continue;
        }
        in->pages_out--;
        if (j->bad) {
            job_free(j);
            FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: a LIST page is not a list",
                   c->conf->name, in->ki->resource);
            in->errors++;
            relist(in, backoff_ms(in), "error");
            continue;
        }
        writer_append_resp(&c->w, j->resp.data, j->resp.len, j->ncmds);
        in->listed += j->listed;
        job_free(j);
        if (!writer_flush(&c->w))
            continue; /* the jobs left are dropped above: c->w.rc is NULL */
        if (in->cont != NULL && in->req == NULL && in->pages_out < MAX_PAGES_OUT)
            request_page(in);
        else if (in->fetch_done && in->pages_out == 0)
            finish_list(in);
    }
}

static void on_page(void *ud, fg_kube_watch_t *req, int rc, char *body, size_t len,
                    const fg_kube_error_t *err) {
    inf_t *in = ud;
    cluster_t *c = in->cl;
    fg_kube_watch_free(req);
    in->req = NULL;
    if (c->w.lost || c->w.rc == NULL) {
        free(body);
        return; /* reset_all takes it from here */
    }
    if (rc != FG_OK) {
        cluster_failed(c, err);
        sync_state(in, in->synced ? "Relisting" : "Syncing", err->message);
        if (fg_kube_error_is_gone(err) && in->cont != NULL) {
            /* the snapshot of the continue token is compacted away: list again from the top */
            c->listing--;
            drop_tmp(in);
            in->cause = "continue_expired";
            start_list(in);
            return;
        }
        FG_LOG(FG_LOG_WARN, NULL, "cache: cluster %s: %s: LIST failed: %s %s", c->conf->name,
               in->ki->resource, err->reason, err->message);
        in->errors++;
        relist(in, backoff_ms(in), "error");
        return;
    }
    cluster_ok(c);
    json_t *meta = list_metadata(body, len);
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    const char *cont = json_string_value(json_object_get(meta, "continue"));
    if (in->list_rv[0] == '\0' && rv != NULL)
        snprintf(in->list_rv, sizeof in->list_rv, "%s", rv);
    free(in->cont);
    in->cont = cont != NULL && cont[0] != '\0' ? fg_xstrdup(cont) : NULL;
    json_decref(meta);
    if (in->list_rv[0] == '\0') {
        free(body);
        FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: %s: LIST without a resourceVersion",
               c->conf->name, in->ki->resource);
        in->errors++;
        relist(in, backoff_ms(in), "error");
        return;
    }
    job_t *j = fg_xcalloc(1, sizeof *j);
    j->in = in;
    j->gen = in->list_gen;
    j->body = body;
    j->len = len;
    snprintf(j->tmp, sizeof j->tmp, "%s", in->tmp.s);
    in->pages_out++;
    in->fetch_done = in->cont == NULL;
    submit(c->owner, j);
    /* ask for the next page now: the cluster prepares it while the workers translate */
    if (in->cont != NULL && in->pages_out < MAX_PAGES_OUT)
        request_page(in);
}

/* ---- WATCH ---------------------------------------------------------------------- */

static int on_event(void *ud, const fg_kube_event_t *ev);
static void on_watch_done(void *ud, fg_kube_watch_t *w, int rc, const fg_kube_error_t *err);

static void start_watch(inf_t *in) {
    cluster_t *c = in->cl;
    const fg_cache_conf_t *cf = &c->owner->conf;
    char path[1024];
    snprintf(path, sizeof path,
             "%s/%s?watch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%lld",
             in->ki->api_prefix, in->ki->resource, in->rv, (long long)cf->watch_timeout_s);
    fg_kube_watch_opts_t o = {
        .on_event = on_event,
        .on_done = on_watch_done,
        .ud = in,
        .deadline_ms = (cf->watch_timeout_s + 60) * 1000,
        .unread_annotation = FG_KUBE_PLACEMENT_ANNOTATION, /* the cache keeps no explanation */
    };
    in->gone = false;
    int rc = fg_kube_watch_new(&in->req, c->kc, path, &o);
    if (rc == FG_OK)
        rc = fg_kube_loop_add(c->loop, in->req);
    if (rc != FG_OK) {
        fg_kube_watch_free(in->req);
        in->req = NULL;
        in->errors++;
        schedule(in, NEXT_WATCH, backoff_ms(in), NULL);
        return;
    }
    in->st = ST_WATCHING;
}

static void apply_event(inf_t *in, const fg_kube_event_t *ev) {
    cluster_t *c = in->cl;
    const fg_redis_script_t *s = NULL;
    json_t *t = NULL;
    const char *name = NULL, *scope = NULL, *app = NULL;
    char *text = NULL;
    size_t len = 0;
    if (ev->type == FG_KUBE_EV_DELETED) {
        json_t *meta = json_object_get(ev->object, "metadata");
        name = json_string_value(json_object_get(meta, "name"));
        scope = in->ki->namespaced ? json_string_value(json_object_get(meta, "namespace")) : "_";
        if (!key_part_ok(name) || !key_part_ok(scope))
            return;
        s = &c->owner->scripts[S_DELETE];
        text = fg_xstrdup("");
    } else {
        if (!translate(in, ev->object, &t, &name, &scope, &app))
            return;
        s = &c->owner->scripts[S_UPSERT];
        text = fg_json_dumps(t, &len);
    }
    fg_cache_key_t ko, ki, ks, kp;
    char ms[24];
    fg_cache_key_objects(&ko, in->ki->name, c->conf->name, scope);
    fg_cache_key_index(&ki, in->ki->name, c->conf->name, scope);
    fg_cache_key_scopes(&ks, in->ki->name, c->conf->name);
    fg_cache_key_preimage(&kp, in->ki->name, c->conf->name, scope);
    snprintf(ms, sizeof ms, "%lld", (long long)fg_wall_ms());
    const char *a[] = {"EVALSHA",
                       s->sha1,
                       "6",
                       ko.s,
                       ki.s,
                       ks.s,
                       in->key_rv.s,
                       in->key_sync.s,
                       kp.s,
                       name,
                       text,
                       scope,
                       ev->resource_version,
                       ms,
                       app ? app : "",
                       c->conf->name,
                       in->ki->name};
    enum { NA = sizeof a / sizeof a[0] };
    size_t lens[NA];
    for (int i = 0; i < NA; i++)
        lens[i] = strlen(a[i]);
    lens[10] = len; /* text */
    if (c->w.oldest_pending_ns == 0)
        c->w.oldest_pending_ns = fg_now_ns();
    /* the change stream first: its script compares the event with the object cached now */
    insight_change_cmd_t chg;
    const char *version = ev->resource_version;
    if (ev->type == FG_KUBE_EV_DELETED)
        version = json_string_value(
            json_object_get(json_object_get(ev->object, "metadata"), "resourceVersion"));
    else
        version = json_string_value(json_object_get(t, "version"));
    if (insight_change_cmd(&chg, c->owner->scripts[S_CHANGE].sha1, &c->owner->insights,
                           in->ki->name, c->conf->name, name, scope, text, len, version,
                           HIST_WATCH)) {
        if (in->ki->kind == FG_KIND_POD && t != NULL) {
            const char *papp = json_string_value(json_object_get(t, "app"));
            insight_change_cmd_app(&chg, papp ? papp : "");
        }
        writer_append(&c->w, chg.argc, chg.argv, chg.lens);
    }
    insight_history_cmd_t hc;
    if (insight_history_cmd(&hc, c->owner->scripts[S_HISTORY].sha1, &c->owner->insights,
                            in->ki->name, c->conf->name, name, scope, text, len, version,
                            ev->type == FG_KUBE_EV_MODIFIED ? HIST_MODIFIED : HIST_WATCH))
        writer_append(&c->w, INSIGHT_HISTORY_ARGC, hc.argv, hc.lens);
    writer_append(&c->w, NA, a, lens);
    insight_event_cmd_t iev;
    if (in->ki->kind == FG_KIND_EVENT && t != NULL &&
        insight_event_cmd(&iev, c->owner->scripts[S_EVENT].sha1, &c->owner->insights, c->conf->name,
                          t, text, len))
        writer_append(&c->w, INSIGHT_EVENT_ARGC, iev.argv, iev.lens);
    free(text);
    json_decref(t);
}

static int on_event(void *ud, const fg_kube_event_t *ev) {
    inf_t *in = ud;
    cluster_t *c = in->cl;
    if (c->w.lost || c->w.rc == NULL)
        return FG_ERR; /* stop: Redis decides where to resume once it is back */
    count3(m_events, in, fg_kube_event_type_name(ev->type));
    if (!c->healthy)
        cluster_ok(c);
    if (in->lagging && ev->type != FG_KUBE_EV_ERROR) {
        sync_state(in, "Synced", "");
        in->lagging = false;
    }
    switch (ev->type) {
        case FG_KUBE_EV_ERROR:
            in->gone = ev->error != NULL && fg_kube_error_is_gone(ev->error);
            return FG_ERR;
        case FG_KUBE_EV_BOOKMARK: {
            const char *a[] = {"SET", in->key_rv.s, ev->resource_version};
            pipe_cmd(c, 3, a);
            break;
        }
        default:
            apply_event(in, ev);
            break;
    }
    if (ev->resource_version != NULL)
        snprintf(in->rv, sizeof in->rv, "%s", ev->resource_version);
    return FG_OK;
}

static void on_watch_done(void *ud, fg_kube_watch_t *w, int rc, const fg_kube_error_t *err) {
    inf_t *in = ud;
    cluster_t *c = in->cl;
    fg_kube_watch_free(w);
    in->req = NULL;
    in->st = ST_IDLE;
    if (c->w.lost || c->w.rc == NULL)
        return;
    if (in->gone || fg_kube_error_is_gone(err)) {
        FG_LOG(FG_LOG_INFO, NULL, "cache: cluster %s: %s: rv %s is gone: relisting", c->conf->name,
               in->ki->resource, in->rv);
        count3(m_restarts, in, "gone");
        relist(in, jitter_ms(c, 200), "gone");
        return;
    }
    if (rc == FG_OK) {
        cluster_ok(c);
        in->errors = 0;
        if (in->lagging) {
            sync_state(in, "Synced", "");
            in->lagging = false;
        }
        count3(m_restarts, in, "timeout");
        start_watch(in);
        return;
    }
    cluster_failed(c, err);
    count3(m_restarts, in, "error");
    if (err->http_code == 0 && in->errors == 0) {
        /* a cut connection: resume at once the first time */
        in->errors++;
        start_watch(in);
        return;
    }
    FG_LOG(FG_LOG_WARN, NULL, "cache: cluster %s: %s: watch failed: %s %s", c->conf->name,
           in->ki->resource, err->reason, err->message);
    sync_state(in, in->synced ? "Lagging" : "Syncing", err->message);
    in->lagging = in->synced;
    in->errors++;
    schedule(in, NEXT_WATCH, backoff_ms(in), NULL);
}

/* ---- leases and the epoch ---------------------------------------------------------- */

/* The informer just got its lease: resume from fg:rv, or list. */
static void on_lease(inf_t *in) {
    cluster_t *c = in->cl;
    const char *a[] = {"GET", in->key_rv.s};
    redisReply *r = writer_command(&c->w, 2, a);
    if (r == NULL)
        return;
    bool have = r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < sizeof in->rv;
    if (have)
        snprintf(in->rv, sizeof in->rv, "%s", r->str);
    freeReplyObject(r);
    in->errors = 0;
    FG_LOG(FG_LOG_INFO, NULL, "cache: cluster %s: %s: lease taken (%s)", c->conf->name,
           in->ki->resource, have ? "resuming" : "listing");
    if (have) {
        in->synced = true;  /* the cache holds a complete set at that RV */
        in->lagging = true; /* the first event says Synced (a crash may have left Relisting) */
        schedule(in, NEXT_WATCH, 0, NULL);
    } else {
        in->rv[0] = '\0';
        schedule(in, NEXT_LIST, jitter_ms(c, 300), "initial");
    }
}

static void lease_tick(cluster_t *c) {
    fg_informers_t *o = c->owner;
    const fg_redis_script_t *s = &o->scripts[S_LEASE];
    if (!writer_flush(&c->w))
        return;
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        const char *a[] = {"EVALSHA",     s->sha1,     "1",   c->inf[k].key_lease.s,
                           o->replica_id, o->lease_px, "take"};
        pipe_cmd(c, 7, a);
    }
    redisReply *reps[FG_KIND_COUNT];
    if (!writer_replies(&c->w, FG_KIND_COUNT, reps))
        return;
    bool got[FG_KIND_COUNT];
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        got[k] = reps[k]->type == REDIS_REPLY_INTEGER && reps[k]->integer == 1;
        freeReplyObject(reps[k]);
    }
    for (int k = 0; k < FG_KIND_COUNT && c->w.rc != NULL; k++) {
        inf_t *in = &c->inf[k];
        if (got[k] && !in->leased) {
            in->leased = true;
            on_lease(in);
        } else if (!got[k] && in->leased) {
            FG_LOG(FG_LOG_WARN, NULL, "cache: cluster %s: %s: lease lost to another replica",
                   c->conf->name, in->ki->resource);
            stop_inf(in);
            in->leased = false;
            in->synced = false;
        }
    }
    /* renewed after a sixth to a third of the lease, at random: the replicas' and the
     * clusters' renewals do not fall on Redis together (it was every third, in step) */
    c->next_lease_ns = fg_now_ns() + jitter_ms(c, (uint64_t)o->conf.lease_ms / 3) * 1000000ull;
}

static void epoch_tick(cluster_t *c) {
    c->next_epoch_ns = fg_now_ns() + EPOCH_PERIOD_NS;
    const char *get[] = {"GET", FG_CACHE_KEY_EPOCH};
    redisReply *r = writer_command(&c->w, 2, get);
    if (r == NULL)
        return;
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        char fresh[33];
        random_hex(c, fresh, sizeof fresh);
        const char *set[] = {"SET", FG_CACHE_KEY_EPOCH, fresh, "NX"};
        r = writer_command(&c->w, 4, set);
        if (r == NULL)
            return;
        freeReplyObject(r);
        r = writer_command(&c->w, 2, get);
        if (r == NULL)
            return;
    }
    char now[40] = "";
    if (r->type == REDIS_REPLY_STRING)
        snprintf(now, sizeof now, "%s", r->str);
    freeReplyObject(r);
    if (c->epoch[0] != '\0' && strcmp(c->epoch, now) != 0) {
        FG_LOG(FG_LOG_WARN, NULL,
               "cache: cluster %s: redis lost its data (epoch changed): relisting", c->conf->name);
        for (int k = 0; k < FG_KIND_COUNT; k++) {
            inf_t *in = &c->inf[k];
            if (in->leased) {
                in->synced = false;
                in->rv[0] = '\0';
                relist(in, jitter_ms(c, 1000), "epoch");
            }
        }
        c->health_known = false;
        through_applied_forget(c->conf->name);
    }
    snprintf(c->epoch, sizeof c->epoch, "%s", now);
}

static void release_leases(cluster_t *c) {
    fg_informers_t *o = c->owner;
    const fg_redis_script_t *s = &o->scripts[S_LEASE];
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        const char *a[] = {"EVALSHA",     s->sha1,     "1",      c->inf[k].key_lease.s,
                           o->replica_id, o->lease_px, "release"};
        pipe_cmd(c, 7, a);
    }
    writer_flush(&c->w);
}

/* ---- the cluster thread -------------------------------------------------------------- */

static void timers(cluster_t *c, uint64_t now) {
    for (int k = 0; k < FG_KIND_COUNT && c->w.rc != NULL; k++) {
        inf_t *in = &c->inf[k];
        if (in->st != ST_WAIT || now < in->wait_until_ns)
            continue;
        if (in->next == NEXT_WATCH) {
            start_watch(in);
        } else if (c->listing < MAX_LISTS) {
            start_list(in);
        }
    }
}

static bool all_synced(const cluster_t *c) {
    for (int k = 0; k < FG_KIND_COUNT; k++)
        if (c->inf[k].leased && !c->inf[k].synced)
            return false;
    return true;
}

/* After a flush Redis confirmed: each watch's rv, for the write-through (through.c). */
static void note_applied(cluster_t *c) {
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        inf_t *in = &c->inf[k];
        if (!in->leased || in->st != ST_WATCHING || strcmp(in->noted_rv, in->rv) == 0)
            continue;
        through_applied_note(c->conf->name, in->ki->resource, in->rv);
        snprintf(in->noted_rv, sizeof in->noted_rv, "%s", in->rv);
    }
}

static void *cluster_main(void *arg) {
    cluster_t *c = arg;
    fg_informers_t *o = c->owner;
    while (!atomic_load(&o->stop)) {
        uint64_t now = fg_now_ns();
        if (c->w.lost && c->w.rc == NULL)
            reset_all(c);
        if (c->w.rc == NULL)
            redis_connect(c);
        if (c->w.rc != NULL) {
            if (now >= c->next_epoch_ns)
                epoch_tick(c);
            if (c->w.rc != NULL && now >= c->next_lease_ns)
                lease_tick(c);
            if (c->w.rc != NULL && c->health_known && now >= c->next_health_ns && c->healthy)
                write_health(c);
            timers(c, now);
        }
        atomic_store(&c->ready, c->w.rc != NULL && (all_synced(c) || !c->healthy));
        if (fg_kube_loop_run(c->loop, c->w.rc != NULL ? 50 : 100, NULL) != FG_OK) {
            FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: the event loop failed", c->conf->name);
            break;
        }
        apply_pages(c);
        if (c->w.rc != NULL && writer_flush(&c->w))
            note_applied(c);
    }
    reset_all(c);
    if (c->w.rc != NULL) {
        release_leases(c);
        writer_close(&c->w);
    }
    return NULL;
}

/* ---- public ---------------------------------------------------------------------- */

void fg_informers_stop(fg_informers_t *o) {
    if (o == NULL)
        return;
    atomic_store(&o->stop, true);
    for (size_t i = 0; i < o->nclusters; i++)
        if (o->clusters[i].started && o->clusters[i].loop != NULL)
            fg_kube_loop_wakeup(o->clusters[i].loop);
    for (size_t i = 0; i < o->nclusters; i++)
        if (o->clusters[i].started)
            pthread_join(o->clusters[i].thread, NULL);
    /* the workers finish what is queued (its results are dropped below), then exit */
    pthread_mutex_lock(&o->qmu);
    o->qstop = true;
    pthread_cond_broadcast(&o->qcv);
    pthread_mutex_unlock(&o->qmu);
    for (size_t i = 0; i < o->nworkers; i++)
        pthread_join(o->workers[i], NULL);
    free(o->workers);
    for (size_t i = 0; i < o->nclusters; i++) {
        cluster_t *c = &o->clusters[i];
        while (c->done != NULL) {
            job_t *j = c->done;
            c->done = j->next;
            job_free(j);
        }
        for (int k = 0; k < FG_KIND_COUNT; k++)
            free(c->inf[k].cont);
        fg_kube_loop_free(c->loop);
        fg_kube_client_free(c->kc);
        pthread_mutex_destroy(&c->done_mu);
    }
    pthread_mutex_destroy(&o->qmu);
    pthread_cond_destroy(&o->qcv);
    free(o->clusters);
    fg_redis_free(o->redis_addr);
    free(o->conf.replica_id);
    free(o);
}

int fg_informers_start(fg_informers_t **out, const fg_config_t *cfg, fg_buf_t *errs) {
    int rc = FG_OK;
    fg_informers_t *o = fg_xcalloc(1, sizeof *o);
    atomic_init(&o->stop, false);
    pthread_mutex_init(&o->qmu, NULL);
    pthread_cond_init(&o->qcv, NULL);
    o->conf = cfg->cache;
    o->conf.replica_id = NULL;
    if (fg_redis_new(&o->redis_addr, cfg->redis_url, 1, (unsigned)cfg->cache.redis_timeout_ms) !=
        FG_OK) {
        fg_buf_appendf(errs, "redis.url: cannot use it\n");
        rc = FG_EINVAL;
        goto out;
    }
    if (cfg->cache.replica_id != NULL) {
        snprintf(o->replica_id, sizeof o->replica_id, "%s", cfg->cache.replica_id);
    } else {
        char host[64] = "host";
        unsigned char r[4] = {0};
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        fg_random_bytes(r, sizeof r);
        snprintf(o->replica_id, sizeof o->replica_id, "%s-%ld-%02x%02x%02x%02x", host,
                 (long)getpid(), r[0], r[1], r[2], r[3]);
    }
    o->conf.replica_id = fg_xstrdup(o->replica_id);
    snprintf(o->lease_px, sizeof o->lease_px, "%lld", (long long)cfg->cache.lease_ms);
    fg_redis_script_init(&o->scripts[S_UPSERT], fg_cache_upsert_lua);
    fg_redis_script_init(&o->scripts[S_DELETE], fg_cache_delete_lua);
    fg_redis_script_init(&o->scripts[S_SWAP], fg_cache_swap_lua);
    fg_redis_script_init(&o->scripts[S_TMPDROP], fg_cache_tmpdrop_lua);
    fg_redis_script_init(&o->scripts[S_LEASE], fg_cache_lease_lua);
    fg_redis_script_init(&o->scripts[S_EVENT], fg_insight_event_lua);
    fg_redis_script_init(&o->scripts[S_CHANGE], fg_insight_change_lua);
    fg_redis_script_init(&o->scripts[S_HISTORY], fg_insight_history_lua);
    fg_redis_script_init(&o->scripts[S_GONE], fg_cache_gone_lua);
    o->insights = cfg->insights;
    register_metrics();
    /* Parsing a LIST page makes glibc consolidate its fastbins on every allocation of 1 KiB or
     * more (jansson's growing arrays and strings): a fifth of a sync's CPU. Without fastbins
     * (tcache still serves small sizes) that work is gone. Process-wide, set once here. */
    mallopt(M_MXFAST, 0);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
    o->nclusters = cfg->nclusters;
    o->clusters = fg_xcalloc(o->nclusters ? o->nclusters : 1, sizeof *o->clusters);
    for (size_t i = 0; i < o->nclusters; i++) {
        cluster_t *c = &o->clusters[i];
        c->owner = o;
        c->conf = &cfg->clusters[i];
        c->w = (writer_t){.addr = o->redis_addr,
                          .name = c->conf->name,
                          .scripts = o->scripts,
                          .nscripts = S_COUNT,
                          .m_round_trip = m_redis,
                          .m_lag = m_lag};
        pthread_mutex_init(&c->done_mu, NULL);
        atomic_init(&c->ready, false);
        fg_random_bytes(&c->rng, sizeof c->rng);
        c->rng |= 1;
        fg_kube_error_t kerr;
        fg_kube_client_opts_t kopts = {.timeout_ms = 60000};
        if (fg_kube_client_new(&c->kc, c->conf, &kopts, &kerr) != FG_OK) {
            fg_buf_appendf(errs, "clusters[%zu] (%s): %s\n", i, c->conf->name, kerr.message);
            rc = FG_EINVAL;
            goto out;
        }
        if (fg_kube_loop_new(&c->loop) != FG_OK) {
            rc = FG_EIO;
            goto out;
        }
        for (int k = 0; k < FG_KIND_COUNT; k++) {
            inf_t *in = &c->inf[k];
            in->cl = c;
            in->ki = fg_kube_kind_info((fg_kind_t)k);
            fg_cache_key_rv(&in->key_rv, c->conf->name, in->ki->resource);
            fg_cache_key_sync(&in->key_sync, c->conf->name, in->ki->resource);
            fg_cache_key_lease(&in->key_lease, c->conf->name, in->ki->resource);
        }
    }
    /* LIST page workers: one per core, 1 to MAX_WORKERS */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = ncpu < 1 ? 1 : ncpu > MAX_WORKERS ? MAX_WORKERS : (size_t)ncpu;
    o->workers = fg_xcalloc(want, sizeof *o->workers);
    for (; o->nworkers < want; o->nworkers++) {
        if (pthread_create(&o->workers[o->nworkers], NULL, worker_main, o) != 0) {
            fg_buf_appendf(errs, "cannot start an informer worker thread\n");
            rc = FG_EIO;
            goto out;
        }
    }
    for (size_t i = 0; i < o->nclusters; i++) {
        cluster_t *c = &o->clusters[i];
        if (pthread_create(&c->thread, NULL, cluster_main, c) != 0) {
            fg_buf_appendf(errs, "cannot start an informer thread\n");
            rc = FG_EIO;
            goto out;
        }
        c->started = true;
    }
    FG_LOG(FG_LOG_INFO, NULL, "cache: informers for %zu cluster(s) started as replica %s",
           o->nclusters, o->replica_id);
    *out = o;
    o = NULL;
out:
    fg_informers_stop(o);
    return rc;
}

bool fg_informers_ready(const fg_informers_t *o) {
    if (o == NULL)
        return false;
    for (size_t i = 0; i < o->nclusters; i++)
        if (!atomic_load(&((fg_informers_t *)o)->clusters[i].ready))
            return false;
    return true;
}

const char *fg_informers_replica_id(const fg_informers_t *o) {
    return o->replica_id;
}
