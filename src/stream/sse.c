/* stream/sse.c: change streams, server-sent events from the projects' Redis streams
 * (stream.h "the change stream").
 *
 * Threads and what they own:
 * - the hub thread (one per process, made by the first change stream) does every Redis call:
 *   XREAD over the streams of the projects someone watches, each from its feed's head; the
 *   stream's state when a feed starts or a client resumes from before it; XRANGE for a client
 *   catching up. It formats each entry once (the api's present callback, then the SSE frame);
 * - the loop thread (stream.c) registers and unregisters clients, and copies frames into each
 *   client's bounded buffer (filters applied), on the hub's wake command, on the client reading
 *   (CMD_UNPAUSE) and every tick (with the keep-alives);
 * - hub.mu guards the feeds, their rings, the clients' hub state and catch-up queues; a client's
 *   buffer is under its stream's mu, always taken after hub.mu, never before.
 *
 * A feed (one per watched project) keeps the newest RING_CAP frames, the ids (base, head]. A
 * client is in one of three states: INIT (just came: where to start is not decided), CATCHUP
 * (resuming from before base: the hub pages the stream with XRANGE into the client's queue, a
 * page at a time as the queue empties) and RING (it reads the ring from seq). A client the ring
 * laps (a slow reader) is dropped: it resumes with its Last-Event-ID. Too old an id (before what
 * the stream still holds: XINFO's max-deleted-entry-id) gets a `reset` event whose id is the
 * ring's base, and the stream goes on from there.
 */
#include "stream_internal.h"

#include "fleetgate/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING_CAP      4096 /* frames a feed keeps */
#define CATCHUP_BATCH 256  /* entries of one XRANGE */
#define READ_BLOCK_MS 100  /* an XREAD's wait: also how soon a new client is placed */
#define READ_COUNT    1024
#define MAX_FEEDS     1024
#define RETRY_LINE    "retry: 3000\n\n"
#define KEEPALIVE     ": keep-alive\n\n"
#define EPOCH_MS      1000 /* how often Redis's data set is looked at (a FLUSHALL) */

static const char *const kind_names[FG_STREAM_CHANGE_KINDS] = {"Project", "App",     "Pod",
                                                               "JobSet",  "CronJob", "Scaler"};

int fg_stream_change_kind(const char *name) {
    for (int i = 0; i < FG_STREAM_CHANGE_KINDS; i++)
        if (strcmp(kind_names[i], name) == 0)
            return i;
    return -1;
}

/* ---- stream ids ("MS-SEQ") ------------------------------------------------ */

typedef struct {
    uint64_t ms, sq;
} sid_t;

static bool sid_parse(const char *s, sid_t *out) {
    const char *dash = strchr(s, '-');
    int64_t ms, sq;
    if (dash == NULL || fg_parse_int64(s, (size_t)(dash - s), 0, INT64_MAX, &ms) != FG_OK ||
        fg_parse_int64(dash + 1, strlen(dash + 1), 0, INT64_MAX, &sq) != FG_OK)
        return false;
    out->ms = (uint64_t)ms;
    out->sq = (uint64_t)sq;
    return true;
}

static bool sid_zero(sid_t a) {
    return a.ms == 0 && a.sq == 0;
}

static int sid_cmp(sid_t a, sid_t b) {
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    return a.sq < b.sq ? -1 : a.sq > b.sq;
}

static void sid_text(sid_t id, char *out, size_t len) {
    snprintf(out, len, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.sq);
}

/* ---- frames, feeds, clients ------------------------------------------------ */

typedef struct frame {
    sid_t id;
    int kind; /* index in kind_names; -1: for every client (reset) */
    char app[64];
    char *text;
    size_t len;
    struct frame *next; /* in a catch-up queue or a list being built */
} frame_t;

typedef struct feed {
    char project[64];
    int subs;         /* clients on it (0: the hub frees it) */
    bool ready;       /* base and head were read from Redis */
    sid_t base, head; /* the ring holds the frames of ids in (base, head] */
    frame_t *ring[RING_CAP];
    uint64_t first_seq, next_seq; /* ring[seq % RING_CAP] for seq in [first_seq, next_seq) */
    struct feed *next;
} feed_t;

enum { SUB_INIT, SUB_CATCHUP, SUB_RING };

struct sse {
    /* set before the loop has it, read-only after */
    uint64_t uid;
    char project[64];
    unsigned kinds;
    char app[64];
    bool have_last;
    int keepalive_s;
    stream_t *st;
    /* under hub.mu */
    bool joined; /* in the hub's list */
    feed_t *feed;
    int state;
    sid_t pos;              /* INIT/CATCHUP: the last id queued (or the client's) */
    frame_t *qhead, *qtail; /* catch-up frames for the loop to copy */
    size_t qlen;
    uint64_t seq;     /* RING: the next ring frame to copy */
    sid_t sent;       /* the last id copied to the client (or its Last-Event-ID): a
                         ring frame at or before it is not sent again */
    struct sse *next; /* the hub's list */
    /* loop thread only */
    uint64_t next_keepalive_ns;
};

typedef struct sse_hub {
    fg_streams_t *ss;
    const fg_redis_t *redis;
    fg_stream_present_fn present;
    void *present_ud;
    fg_cache_changes_t *reader; /* the hub thread's */
    pthread_t thread;
    atomic_bool stop, wake_posted;
    pthread_mutex_t mu;
    feed_t *feeds;
    struct sse *subs;
    uint64_t next_uid;
    /* hub thread only: Redis's data set as last seen ("" before), and when to look again */
    char epoch[40];
    uint64_t next_epoch_ns;
} sse_hub_t;

static void frame_free(frame_t *f) {
    if (f == NULL)
        return;
    free(f->text);
    free(f);
}

static void frames_free(frame_t *f) {
    while (f != NULL) {
        frame_t *n = f->next;
        frame_free(f);
        f = n;
    }
}

static void feed_free(feed_t *f) {
    for (uint64_t s = f->first_seq; s < f->next_seq; s++)
        frame_free(f->ring[s % RING_CAP]);
    free(f);
}

/* ---- formatting (hub thread) ---------------------------------------------- */

typedef struct {
    sse_hub_t *hub;
    frame_t *head, *tail;
    size_t n;
    sid_t last;
    bool any;
} batch_t;

/* One entry into an SSE frame; NULL when it cannot be shown (logged). */
static frame_t *format(sse_hub_t *h, const fg_cache_change_t *c) {
    frame_t *f = NULL;
    json_t *obj = NULL, *shown = NULL, *ev = NULL;
    sid_t id;
    int kind = fg_stream_change_kind(c->kind);
    bool upsert = strcmp(c->type, "upsert") == 0;
    if (!sid_parse(c->id, &id) || kind < 0 || (!upsert && strcmp(c->type, "delete") != 0) ||
        c->name[0] == '\0')
        goto out;
    ev = json_pack("{s:s,s:s,s:s}", "type", c->type, "kind", c->kind, "name", c->name);
    if (c->cluster[0])
        json_object_set_new(ev, "cluster", json_string(c->cluster));
    if (c->version[0] && strlen(c->version) <= 64)
        json_object_set_new(ev, "version", json_string(c->version));
    json_object_set_new(ev, "time", json_string(c->time[0] ? c->time : "1970-01-01T00:00:00Z"));
    if (upsert) {
        char err[64];
        if (c->object == NULL ||
            fg_json_load(c->object, c->object_len, &obj, err, sizeof err) != FG_OK)
            goto out;
        shown = h->present(h->present_ud, c->kind, c->cluster, obj);
        if (shown == NULL || json_object_get(ev, "version") == NULL)
            goto out;
        json_object_set_new(ev, "object", shown);
        shown = NULL;
    }
    size_t dlen = 0;
    char *data = fg_json_dumps(ev, &dlen);
    f = fg_xcalloc(1, sizeof *f);
    f->id = id;
    f->kind = kind;
    snprintf(f->app, sizeof f->app, "%s", c->app);
    f->text = fg_xasprintf("id: %s\nevent: %s\ndata: %s\n\n", c->id, c->type, data);
    f->len = strlen(f->text);
    free(data);
out:
    if (f == NULL)
        FG_LOG(FG_LOG_ERROR, NULL, "changes: entry %s (%s %s) cannot be shown: skipped", c->id,
               c->kind, c->name);
    json_decref(obj);
    json_decref(shown);
    json_decref(ev);
    return f;
}

static frame_t *reset_frame(sid_t at, const char *why) {
    char id[48], now[40];
    sid_text(at, id, sizeof id);
    fg_format_time_ms(fg_wall_ms(), now, sizeof now);
    json_t *ev = json_pack("{s:s,s:s,s:s}", "type", "reset", "time", now, "reason", why);
    char *data = fg_json_dumps(ev, NULL);
    json_decref(ev);
    frame_t *f = fg_xcalloc(1, sizeof *f);
    f->id = at;
    f->kind = -1;
    f->text = fg_xasprintf("id: %s\nevent: reset\ndata: %s\n\n", id, data);
    f->len = strlen(f->text);
    free(data);
    return f;
}

static void on_entry(void *ud, size_t stream, const fg_cache_change_t *c) {
    batch_t *b = &((batch_t *)ud)[stream];
    sid_t id;
    if (!sid_parse(c->id, &id))
        return;
    b->last = id;
    b->any = true;
    frame_t *f = format(b->hub, c);
    if (f == NULL)
        return;
    if (b->tail)
        b->tail->next = f;
    else
        b->head = f;
    b->tail = f;
    b->n++;
}

/* ---- the hub thread --------------------------------------------------------- */

static struct sse *find_sub(sse_hub_t *h, uint64_t uid) {
    for (struct sse *x = h->subs; x != NULL; x = x->next)
        if (x->uid == uid)
            return x;
    return NULL;
}

static void post_wake(sse_hub_t *h) {
    if (!atomic_exchange(&h->wake_posted, true))
        fg_stream_post(h->ss, CMD_SSE_WAKE, NULL);
}

/* The first ring seq whose id is after pos (under mu). */
static uint64_t seq_after(const feed_t *f, sid_t pos) {
    uint64_t s = f->first_seq;
    while (s < f->next_seq && sid_cmp(f->ring[s % RING_CAP]->id, pos) <= 0)
        s++;
    return s;
}

static void enqueue(struct sse *x, frame_t *f) {
    f->next = NULL;
    if (x->qtail)
        x->qtail->next = f;
    else
        x->qhead = f;
    x->qtail = f;
    x->qlen++;
}

/* Sends x a reset and places it at the ring's start (under mu). */
static void reset_sub(struct sse *x, const char *why) {
    enqueue(x, reset_frame(x->feed->base, why));
    x->state = SUB_RING;
    x->seq = x->feed->first_seq;
    x->sent = x->feed->base;
}

/* Feeds that started: where their stream stands now. */
static void ready_feeds(sse_hub_t *h) {
    char projects[64][64];
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (feed_t *f = h->feeds; f != NULL && n < 64; f = f->next)
        if (!f->ready)
            snprintf(projects[n++], sizeof projects[0], "%s", f->project);
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < n; i++) {
        char last[48], deleted[48];
        sid_t id;
        if (fg_cache_changes_state(h->reader, projects[i], last, deleted, NULL, NULL) != FG_OK ||
            !sid_parse(last, &id))
            continue;
        pthread_mutex_lock(&h->mu);
        for (feed_t *f = h->feeds; f != NULL; f = f->next)
            if (!f->ready && strcmp(f->project, projects[i]) == 0) {
                f->base = f->head = id;
                f->ready = true;
            }
        pthread_mutex_unlock(&h->mu);
    }
}

typedef struct {
    uint64_t uid;
    char project[64];
    sid_t pos;
    int state;
} todo_t;

/* Places new clients and pages the catching-up ones (at most 64 per turn). */
static void serve_subs(sse_hub_t *h) {
    todo_t todo[64];
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (struct sse *x = h->subs; x != NULL && n < 64; x = x->next) {
        if (!x->feed->ready)
            continue;
        if (x->state == SUB_INIT) {
            if (!x->have_last) {
                x->state = SUB_RING;
                x->seq = x->feed->next_seq;
            } else if (sid_cmp(x->pos, x->feed->base) >= 0 &&
                       (!sid_zero(x->feed->base) || sid_zero(x->pos))) {
                /* a feed that began with no stream (base 0-0) cannot tell an id of a stream
                 * gone since (a FLUSHALL) from one of the new stream: the state is asked */
                x->state = SUB_RING;
                x->seq = seq_after(x->feed, x->pos);
            }
        }
        if ((x->state == SUB_INIT || x->state == SUB_CATCHUP) && x->qlen < CATCHUP_BATCH) {
            todo[n] = (todo_t){.uid = x->uid, .pos = x->pos, .state = x->state};
            snprintf(todo[n].project, sizeof todo[n].project, "%s", x->project);
            n++;
        }
    }
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < n; i++) {
        todo_t *t = &todo[i];
        bool trimmed = false;
        if (t->state == SUB_INIT) {
            char last[48], deleted[48], first[48];
            sid_t del, fst;
            bool exists;
            if (fg_cache_changes_state(h->reader, t->project, last, deleted, first, &exists) !=
                    FG_OK ||
                !sid_parse(deleted, &del) || !sid_parse(first, &fst))
                continue;
            /* trimmed away; or an id this stream never had (before its first entry, nothing ever
             * deleted, or no stream at all): the stream was made again, e.g. after a FLUSHALL,
             * so what came between is lost. "0-0" (from the beginning) always resumes. */
            trimmed = sid_cmp(t->pos, del) < 0 ||
                      (!sid_zero(t->pos) && (!exists || sid_cmp(t->pos, fst) < 0));
        }
        batch_t b = {.hub = h};
        size_t got = 0;
        char after[48];
        sid_text(t->pos, after, sizeof after);
        if (!trimmed && fg_cache_changes_range(h->reader, t->project, after, CATCHUP_BATCH,
                                               on_entry, &b, &got) != FG_OK)
            continue;
        pthread_mutex_lock(&h->mu);
        struct sse *x = find_sub(h, t->uid);
        if (x == NULL) {
            pthread_mutex_unlock(&h->mu);
            frames_free(b.head);
            continue;
        }
        if (trimmed || (got == 0 && sid_cmp(x->pos, x->feed->base) < 0)) {
            /* what follows the client's id is no longer kept (or was trimmed meanwhile) */
            frames_free(b.head);
            char why[160];
            snprintf(why, sizeof why,
                     "Last-Event-ID %s is older than the stream's history; list again", after);
            reset_sub(x, why);
            pthread_mutex_unlock(&h->mu);
            continue;
        }
        x->state = SUB_CATCHUP;
        for (frame_t *f = b.head, *next; f != NULL; f = next) {
            next = f->next;
            enqueue(x, f);
        }
        if (b.any)
            x->pos = b.last;
        if (sid_cmp(x->pos, x->feed->base) >= 0) {
            x->state = SUB_RING;
            x->seq = seq_after(x->feed, x->pos);
        }
        pthread_mutex_unlock(&h->mu);
        post_wake(h);
    }
}

static bool check_epoch(sse_hub_t *h, bool due);

/* New entries of every ready feed into their rings. False when there was nothing to read. */
static bool read_feeds(sse_hub_t *h) {
    char(*projects)[64] = fg_xcalloc(MAX_FEEDS, sizeof *projects);
    char(*heads)[48] = fg_xcalloc(MAX_FEEDS, sizeof *heads);
    const char **p = fg_xcalloc(MAX_FEEDS, sizeof *p), **a = fg_xcalloc(MAX_FEEDS, sizeof *a);
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    for (feed_t *f = h->feeds; f != NULL && n < MAX_FEEDS; f = f->next) {
        if (!f->ready || f->subs == 0)
            continue;
        snprintf(projects[n], sizeof projects[0], "%s", f->project);
        sid_text(f->head, heads[n], sizeof heads[0]);
        p[n] = projects[n];
        a[n] = heads[n];
        n++;
    }
    pthread_mutex_unlock(&h->mu);
    batch_t *b = fg_xcalloc(n ? n : 1, sizeof *b);
    for (size_t i = 0; i < n; i++)
        b[i].hub = h;
    int rc = n ? fg_cache_changes_read(h->reader, p, a, n, READ_BLOCK_MS, READ_COUNT, on_entry, b)
               : FG_ENOENT;
    bool woke = false, any = false;
    for (size_t i = 0; i < n; i++)
        any = any || b[i].any;
    if (rc == FG_OK && any && check_epoch(h, false))
        rc = FG_EIO; /* entries of a new data set: read again from 0-0, after the reset */
    if (rc == FG_OK) {
        pthread_mutex_lock(&h->mu);
        for (size_t i = 0; i < n; i++) {
            if (!b[i].any)
                continue;
            feed_t *f = h->feeds;
            while (f != NULL && strcmp(f->project, projects[i]) != 0)
                f = f->next;
            if (f == NULL || !f->ready) {
                frames_free(b[i].head);
                continue;
            }
            for (frame_t *fr = b[i].head, *next; fr != NULL; fr = next) {
                next = fr->next;
                fr->next = NULL;
                if (sid_cmp(fr->id, f->head) <= 0) {
                    frame_free(fr);
                    continue;
                }
                if (f->next_seq - f->first_seq == RING_CAP) {
                    frame_t *old = f->ring[f->first_seq % RING_CAP];
                    f->base = old->id;
                    frame_free(old);
                    f->first_seq++;
                }
                f->ring[f->next_seq % RING_CAP] = fr;
                f->next_seq++;
            }
            /* entries that could not be shown still move the head past them */
            if (sid_cmp(b[i].last, f->head) > 0) {
                if (f->next_seq == f->first_seq)
                    f->base = b[i].last;
                f->head = b[i].last;
            }
            woke = true;
        }
        pthread_mutex_unlock(&h->mu);
    } else {
        for (size_t i = 0; i < n; i++)
            frames_free(b[i].head);
    }
    if (woke)
        post_wake(h);
    free(b);
    free(projects);
    free(heads);
    free(p);
    free(a);
    return rc != FG_ENOENT;
}

static void drop_idle_feeds(sse_hub_t *h) {
    pthread_mutex_lock(&h->mu);
    for (feed_t **pf = &h->feeds; *pf != NULL;) {
        feed_t *f = *pf;
        if (f->subs == 0) {
            *pf = f->next;
            feed_free(f);
        } else {
            pf = &f->next;
        }
    }
    pthread_mutex_unlock(&h->mu);
}

/* Redis lost its data (a FLUSHALL: fg:epoch changed or is gone): every stream began again, so
 * the ids of the feeds mean nothing there and what came between is lost. Each client, connected
 * or catching up, gets `reset` with the id 0-0, as a client resuming from before the FLUSHALL
 * does, and its feed starts again from the new stream's beginning: every change since the
 * FLUSHALL follows the reset (a relist streams nothing of what it finds). Looked at once a
 * second (due), and after each read that brought entries, so none of a new data set is sent
 * before the reset. True when it was lost. */
static bool check_epoch(sse_hub_t *h, bool due) {
    uint64_t now = fg_now_ns();
    if (due && now < h->next_epoch_ns)
        return false;
    h->next_epoch_ns = now + EPOCH_MS * 1000000ull;
    char epoch[40];
    if (fg_cache_changes_epoch(h->reader, epoch, sizeof epoch) != FG_OK)
        return false;
    bool lost = h->epoch[0] != '\0' && strcmp(h->epoch, epoch) != 0;
    snprintf(h->epoch, sizeof h->epoch, "%s", epoch);
    if (!lost)
        return false;
    FG_LOG(FG_LOG_WARN, NULL, "changes: redis lost its data (epoch changed): streams reset");
    pthread_mutex_lock(&h->mu);
    for (feed_t *f = h->feeds; f != NULL; f = f->next) {
        for (uint64_t q = f->first_seq; q < f->next_seq; q++)
            frame_free(f->ring[q % RING_CAP]);
        f->first_seq = f->next_seq;
        f->base = f->head = (sid_t){0, 0};
        f->ready = true;
    }
    for (struct sse *x = h->subs; x != NULL; x = x->next) {
        frames_free(x->qhead); /* nothing of the old data set is sent any more */
        x->qhead = x->qtail = NULL;
        x->qlen = 0;
        reset_sub(x, "the change stream's store lost its data (Redis was flushed); list again");
    }
    pthread_mutex_unlock(&h->mu);
    post_wake(h);
    return true;
}

static void *hub_main(void *arg) {
    sse_hub_t *h = arg;
    while (!atomic_load(&h->stop)) {
        drop_idle_feeds(h);
        check_epoch(h, true);
        ready_feeds(h);
        serve_subs(h);
        if (!read_feeds(h)) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL); /* nothing to watch */
        }
    }
    return NULL;
}

/* The hub of ss, made by the first change stream (under ss->mu). NULL when it cannot start. */
static sse_hub_t *hub_of(fg_streams_t *ss, const fg_stream_changes_t *c) {
    pthread_mutex_lock(&ss->mu);
    sse_hub_t *h = ss->sse_hub;
    if (h == NULL) {
        h = fg_xcalloc(1, sizeof *h);
        h->ss = ss;
        h->redis = c->redis;
        h->present = c->present;
        h->present_ud = c->present_ud;
        h->reader = fg_cache_changes_new(c->redis);
        pthread_mutex_init(&h->mu, NULL);
        atomic_init(&h->stop, false);
        atomic_init(&h->wake_posted, false);
        if (pthread_create(&h->thread, NULL, hub_main, h) != 0) {
            fg_cache_changes_free(h->reader);
            pthread_mutex_destroy(&h->mu);
            free(h);
            h = NULL;
        } else {
            ss->sse_hub = h;
        }
    }
    pthread_mutex_unlock(&ss->mu);
    return h;
}

void fg_sse_hub_free(sse_hub_t *h) {
    if (h == NULL)
        return;
    atomic_store(&h->stop, true);
    pthread_join(h->thread, NULL);
    while (h->feeds != NULL) {
        feed_t *f = h->feeds;
        h->feeds = f->next;
        feed_free(f);
    }
    fg_cache_changes_free(h->reader);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ---- the loop's side ------------------------------------------------------------ */

/* Appends text to st's buffer when it fits; false when it does not (the client is behind). */
static bool put(stream_t *st, const char *text, size_t len) {
    bool ok;
    pthread_mutex_lock(&st->mu);
    ok = !st->abort && !st->eof && st->cap - st->len >= len;
    if (ok) {
        fg_stream_ring_put(st, text, len);
        st->bytes_in += len;
    } else if (!st->abort && !st->eof) {
        st->up_paused = true; /* the stall rule drops it if it never reads */
    }
    pthread_mutex_unlock(&st->mu);
    return ok;
}

static bool wanted(const struct sse *x, const frame_t *f) {
    if (f->kind < 0)
        return true;
    if (x->kinds != 0 && !(x->kinds & (1u << f->kind)))
        return false;
    return x->app[0] == '\0' || strcmp(x->app, f->app) == 0;
}

void fg_sse_start(fg_streams_t *ss, stream_t *st) {
    struct sse *x = st->sse;
    sse_hub_t *h = ss->sse_hub;
    x->next_keepalive_ns = fg_now_ns() + (uint64_t)x->keepalive_s * 1000000000ull;
    put(st, RETRY_LINE, strlen(RETRY_LINE));
    fg_stream_wake(st);
    pthread_mutex_lock(&h->mu);
    feed_t *f = h->feeds;
    while (f != NULL && strcmp(f->project, x->project) != 0)
        f = f->next;
    if (f == NULL) {
        f = fg_xcalloc(1, sizeof *f);
        snprintf(f->project, sizeof f->project, "%s", x->project);
        f->next = h->feeds;
        h->feeds = f;
    }
    f->subs++;
    x->feed = f;
    x->uid = ++h->next_uid;
    x->state = SUB_INIT;
    x->joined = true;
    x->next = h->subs;
    h->subs = x;
    pthread_mutex_unlock(&h->mu);
}

void fg_sse_deliver(fg_streams_t *ss, stream_t *st) {
    struct sse *x = st->sse;
    sse_hub_t *h = ss->sse_hub;
    bool copied = false, lapped = false, too_big = false;
    if (h == NULL || x == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    if (!x->joined) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    while (x->qhead != NULL) {
        frame_t *f = x->qhead;
        if (wanted(x, f)) {
            if (f->len > st->cap)
                too_big = true;
            if (too_big || !put(st, f->text, f->len))
                break;
            copied = true;
        }
        x->sent = f->id;
        x->qhead = f->next;
        if (x->qhead == NULL)
            x->qtail = NULL;
        x->qlen--;
        frame_free(f);
    }
    if (x->qhead == NULL && !too_big && x->state == SUB_RING) {
        feed_t *fd = x->feed;
        if (x->seq < fd->first_seq)
            lapped = true;
        while (!lapped && x->seq < fd->next_seq) {
            const frame_t *f = fd->ring[x->seq % RING_CAP];
            if (sid_cmp(f->id, x->sent) > 0 && wanted(x, f)) {
                if (f->len > st->cap) {
                    too_big = true;
                    break;
                }
                if (!put(st, f->text, f->len))
                    break;
                copied = true;
                x->sent = f->id;
            }
            x->seq++;
        }
    }
    pthread_mutex_unlock(&h->mu);
    if (copied) {
        x->next_keepalive_ns = fg_now_ns() + (uint64_t)x->keepalive_s * 1000000000ull;
        fg_stream_wake(st);
    }
    if (lapped || too_big) {
        FG_LOG(FG_LOG_INFO, NULL, "change stream of project %s: %s: dropped", x->project,
               lapped ? "the client fell a whole ring behind" : "an event larger than its buffer");
        fg_metric_add(ss->m_ended, (const char *[]){lapped ? "slow-consumer" : "too-large"}, 1);
        fg_stream_end(st, true, lapped ? "slow-consumer" : "too-large");
    }
}

void fg_sse_wake(fg_streams_t *ss) {
    if (ss->sse_hub == NULL)
        return;
    atomic_store(&ss->sse_hub->wake_posted, false);
    for (stream_t *st = ss->all; st != NULL; st = st->next)
        if (st->sse != NULL)
            fg_sse_deliver(ss, st);
}

void fg_sse_tick(fg_streams_t *ss) {
    uint64_t now = fg_now_ns();
    for (stream_t *st = ss->all; st != NULL; st = st->next) {
        struct sse *x = st->sse;
        if (x == NULL)
            continue;
        fg_sse_deliver(ss, st);
        if (now >= x->next_keepalive_ns) {
            x->next_keepalive_ns = now + (uint64_t)x->keepalive_s * 1000000000ull;
            if (put(st, KEEPALIVE, strlen(KEEPALIVE)))
                fg_stream_wake(st);
        }
    }
}

void fg_sse_stop(stream_t *st) {
    struct sse *x = st->sse;
    sse_hub_t *h = st->ss->sse_hub;
    if (x == NULL || h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    if (x->joined) {
        for (struct sse **p = &h->subs; *p != NULL; p = &(*p)->next)
            if (*p == x) {
                *p = x->next;
                break;
            }
        x->feed->subs--;
        x->joined = false;
        frames_free(x->qhead);
        x->qhead = x->qtail = NULL;
        x->qlen = 0;
    }
    pthread_mutex_unlock(&h->mu);
}

void fg_sse_free(struct sse *x) {
    if (x == NULL)
        return;
    frames_free(x->qhead);
    free(x);
}

/* ---- handing a request over ------------------------------------------------------ */

int fg_stream_start_changes(fg_streams_t *ss, fg_req_t *req, const fg_stream_changes_t *c,
                            const fg_stream_opts_t *opts) {
    if (hub_of(ss, c) == NULL)
        return fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the change streams cannot start");
    struct sse *x = fg_xcalloc(1, sizeof *x);
    snprintf(x->project, sizeof x->project, "%s", c->project);
    x->kinds = c->kinds;
    if (c->app)
        snprintf(x->app, sizeof x->app, "%s", c->app);
    x->keepalive_s = c->keepalive_s > 0 ? c->keepalive_s : 15;
    if (c->last_event_id != NULL && !sid_parse(c->last_event_id, &x->pos)) {
        free(x);
        return fg_reply_problem(req, FG_PROBLEM_INVALID, "Last-Event-ID is not an event id");
    }
    x->have_last = c->last_event_id != NULL;
    x->sent = x->pos;
    stream_t *st = fg_xcalloc(1, sizeof *st);
    st->cluster = fg_xstrdup("*");
    st->sse = x;
    x->st = st;
    st->headers_ok = true; /* 200 at once: the events come as they come */
    return fg_stream_hand_over(ss, req, st, opts);
}
