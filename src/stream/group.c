/* stream/group.c: one stream over the logs of several pods (an app's, across its clusters).
 * Each pod is a source on the loop (kube.h's fg_kube_stream_new); its bytes are cut into lines,
 * each written whole into the stream's one buffer behind "[CLUSTER/POD] ", so pods interleave at
 * line ends only. A source whose lines do not fit waits (paused, as a single stream's source
 * does). With follow, the discover callback is asked every 2 s (on the stream worker: it reads
 * Redis) and pods it names that were not seen before join. Everything else here runs on the
 * loop thread, except fg_group_new. */
#include "stream_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES  (16u * 1024u)
#define DISCOVER_NS     2000000000ull
#define GROUP_PATH_MAX  1024
#define GROUP_QUERY_MAX 512

typedef struct gsrc {
    stream_t *st;
    fg_kube_watch_t *up;
    char key[330]; /* "CLUSTER/POD" */
    char prefix[336];
    size_t plen;
    char *line; /* the start of a line whose end has not come (LINE_MAX_BYTES) */
    size_t llen;
    bool done;
    struct gsrc *next;
} gsrc_t;

struct group {
    gsrc_t *srcs;
    size_t nsrcs, live;
    char *ns, *query, *new_query;
    bool follow;
    fg_stream_pod_t *initial;
    size_t ninitial;
    fg_stream_discover_fn discover;
    void *ud;
    void (*ud_free)(void *);
    uint64_t next_ns;
    bool discovering; /* a discover call is out on the worker */
};

/* One discover call's question and answer, owned by the job. */
typedef struct {
    fg_stream_discover_fn discover;
    void *ud;
    fg_stream_pod_t pods[FG_STREAM_GROUP_MAX];
    size_t n;
    bool ok;
} discovery_t;

struct group *fg_group_new(const fg_stream_group_t *g) {
    struct group *gr = fg_xcalloc(1, sizeof *gr);
    gr->ns = fg_xstrdup(g->ns);
    gr->query = fg_xstrdup(g->query);
    gr->new_query = fg_xstrdup(g->new_query);
    gr->follow = g->follow;
    gr->ninitial = g->npods < FG_STREAM_GROUP_MAX ? g->npods : FG_STREAM_GROUP_MAX;
    gr->initial = fg_xcalloc(gr->ninitial ? gr->ninitial : 1, sizeof *gr->initial);
    memcpy(gr->initial, g->pods, gr->ninitial * sizeof *gr->initial);
    gr->discover = g->discover;
    gr->ud = g->ud;
    gr->ud_free = g->ud_free;
    return gr;
}

void fg_group_free(struct group *g) {
    if (g == NULL)
        return;
    gsrc_t *next;
    for (gsrc_t *s = g->srcs; s != NULL; s = next) {
        next = s->next;
        fg_kube_watch_free(s->up);
        free(s->line);
        free(s);
    }
    if (g->ud_free)
        g->ud_free(g->ud);
    free(g->initial);
    free(g->ns);
    free(g->query);
    free(g->new_query);
    free(g);
}

/* ---- a source's bytes into whole prefixed lines --------------------------- */

/* Bytes the complete lines of (s->line + data) take in the buffer, prefixes included; *cut
 * says whether the unfinished rest passes LINE_MAX_BYTES (then it is written as a line too). */
static size_t room_needed(const gsrc_t *s, const char *data, size_t len, bool *cut) {
    size_t need = 0, start = 0, lines = 0;
    for (size_t i = 0; i < len; i++)
        if (data[i] == '\n') {
            need += (lines == 0 ? s->llen : 0) + (i + 1 - start);
            start = i + 1;
            lines++;
        }
    size_t rest = (lines == 0 ? s->llen : 0) + (len - start);
    *cut = rest >= LINE_MAX_BYTES;
    if (*cut) {
        need += rest + 1;
        lines++;
    }
    return need + lines * s->plen;
}

static void put_line(stream_t *st, gsrc_t *s, const char *a, size_t alen, const char *b,
                     size_t blen, bool add_newline) {
    fg_stream_ring_put(st, s->prefix, s->plen);
    fg_stream_ring_put(st, a, alen);
    fg_stream_ring_put(st, b, blen);
    if (add_newline)
        fg_stream_ring_put(st, "\n", 1);
}

static int group_data(void *ud, const char *data, size_t len) {
    gsrc_t *s = ud;
    stream_t *st = s->st;
    if (len == 0)
        return FG_OK;
    bool cut;
    int rc = FG_OK;
    pthread_mutex_lock(&st->mu);
    size_t need = room_needed(s, data, len, &cut);
    if (st->abort || st->eof)
        rc = FG_ERR;
    else if (st->cap - st->len < need) {
        st->up_paused = true; /* the reader asks the loop to resume once it made room */
        rc = FG_EAGAIN;
    } else {
        size_t start = 0;
        for (size_t i = 0; i < len; i++)
            if (data[i] == '\n') {
                put_line(st, s, s->line, s->llen, data + start, i + 1 - start, false);
                s->llen = 0;
                start = i + 1;
            }
        if (cut) {
            put_line(st, s, s->line, s->llen, data + start, len - start, true);
            s->llen = 0;
        } else {
            memcpy(s->line + s->llen, data + start, len - start);
            s->llen += len - start;
        }
        st->bytes_in += len;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc == FG_OK)
        fg_stream_wake(st);
    return rc;
}

static void maybe_end(stream_t *st) {
    struct group *g = st->group;
    if (g->follow || g->live > 0)
        return;
    pthread_mutex_lock(&st->mu);
    st->eof = true;
    pthread_mutex_unlock(&st->mu);
    fg_stream_wake(st);
}

static void group_done(void *ud, fg_kube_watch_t *w, int rc, const fg_kube_error_t *err) {
    gsrc_t *s = ud;
    stream_t *st = s->st;
    fg_kube_watch_free(w);
    s->up = NULL;
    s->done = true;
    st->group->live--;
    pthread_mutex_lock(&st->mu);
    char note[600];
    int n = 0;
    if (rc != FG_OK)
        n = snprintf(note, sizeof note, "%s(no log: %s)\n", s->prefix, err->message);
    else if (s->llen > 0 && st->cap - st->len >= s->plen + s->llen + 1)
        put_line(st, s, s->line, s->llen, "", 0, true); /* the last line had no newline */
    if (n > 0 && (size_t)n < sizeof note && st->cap - st->len >= (size_t)n && !st->abort)
        fg_stream_ring_put(st, note, (size_t)n);
    pthread_mutex_unlock(&st->mu);
    fg_stream_wake(st);
    maybe_end(st);
}

/* ---- the set of pods ------------------------------------------------------ */

static bool known(const struct group *g, const char *key) {
    for (const gsrc_t *s = g->srcs; s != NULL; s = s->next)
        if (strcmp(s->key, key) == 0)
            return true;
    return false;
}

static void add_source(fg_streams_t *ss, stream_t *st, const fg_stream_pod_t *p,
                       const char *query) {
    struct group *g = st->group;
    char key[330], path[GROUP_PATH_MAX];
    snprintf(key, sizeof key, "%s/%s", p->cluster, p->pod);
    fg_kube_client_t *client = fg_stream_client(ss, p->cluster);
    if (known(g, key) || client == NULL || g->nsrcs >= FG_STREAM_GROUP_MAX)
        return;
    gsrc_t *s = fg_xcalloc(1, sizeof *s);
    s->st = st;
    memcpy(s->key, key, sizeof key);
    s->plen = (size_t)snprintf(s->prefix, sizeof s->prefix, "[%s] ", key);
    s->line = fg_xmalloc(LINE_MAX_BYTES);
    s->next = g->srcs;
    g->srcs = s;
    g->nsrcs++;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log%s", g->ns, p->pod, query);
    if (fg_kube_stream_new(&s->up, client, path, group_data, group_done, s) != FG_OK ||
        fg_kube_loop_add(ss->kloop, s->up) != FG_OK) {
        fg_kube_watch_free(s->up);
        s->up = NULL;
        s->done = true;
        return;
    }
    g->live++;
}

void fg_group_start(fg_streams_t *ss, stream_t *st) {
    struct group *g = st->group;
    for (size_t i = 0; i < g->ninitial; i++)
        add_source(ss, st, &g->initial[i], g->query);
    g->next_ns = fg_now_ns() + DISCOVER_NS;
    maybe_end(st);
}

void fg_group_stop(stream_t *st) {
    for (gsrc_t *s = st->group->srcs; s != NULL; s = s->next)
        if (s->up != NULL) {
            fg_kube_watch_free(s->up);
            s->up = NULL;
            s->done = true;
        }
    st->group->live = 0;
}

void fg_group_resume(stream_t *st) {
    for (gsrc_t *s = st->group->srcs; s != NULL; s = s->next)
        if (s->up != NULL)
            fg_kube_stream_resume(s->up);
}

static void discover_run(void *data) {
    discovery_t *d = data;
    d->n = d->discover(d->ud, d->pods, FG_STREAM_GROUP_MAX, &d->ok);
}

static void discover_done(fg_streams_t *ss, stream_t *st, void *data) {
    discovery_t *d = data;
    struct group *g = st->group;
    g->discovering = false;
    pthread_mutex_lock(&st->mu);
    bool over = st->abort || st->eof;
    pthread_mutex_unlock(&st->mu);
    for (size_t i = 0; d->ok && !st->zombie && !over && i < d->n && i < FG_STREAM_GROUP_MAX; i++)
        add_source(ss, st, &d->pods[i], g->new_query);
    free(d);
}

void fg_group_tick(fg_streams_t *ss, stream_t *st) {
    struct group *g = st->group;
    uint64_t now = fg_now_ns();
    if (!g->follow || g->discover == NULL || now < g->next_ns)
        return;
    g->next_ns = now + DISCOVER_NS;
    pthread_mutex_lock(&st->mu);
    bool over = st->abort || st->eof;
    pthread_mutex_unlock(&st->mu);
    if (over)
        return;
    if (g->discovering)
        return;
    g->discovering = true;
    discovery_t *d = fg_xcalloc(1, sizeof *d);
    d->discover = g->discover;
    d->ud = g->ud; /* read-only for discover; freed with the group, which outlives the job */
    fg_stream_offload(ss, st, discover_run, discover_done, d);
}
