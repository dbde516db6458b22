/* cache/writer.c: the informers' Redis writer: one pipelined hiredis connection per informer
 * thread (cache_internal.h says how it behaves). It owns the connection's life (connect, load
 * the scripts, drop on failure with a backoff) so informer.c deals only in what it writes. */
#include "cache_internal.h"

#include <stdio.h>
#include <string.h>

#define PIPE_MAX       4096            /* pipelined commands before a flush */
#define PIPE_MAX_BYTES (1024u * 1024u) /* pipelined bytes before a flush (bounds the buffer) */
#define BACKOFF_MIN_NS (100ull * 1000000ull)
#define BACKOFF_MAX_NS (2000ull * 1000000ull)

static bool is_noscript(const redisReply *rep) {
    return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0;
}

static void observe(fg_metric_t *m, const writer_t *w, uint64_t since_ns) {
    const char *l[] = {w->name};
    if (m != NULL)
        fg_metric_observe(m, l, (double)(fg_now_ns() - since_ns) / 1e9);
}

void writer_fail(writer_t *w, const char *why) {
    if (w->rc != NULL) {
        FG_LOG(FG_LOG_WARN, NULL,
               "cache: cluster %s: redis: %s (%s); informers stop until it is back", w->name, why,
               w->rc->errstr[0] ? w->rc->errstr : "error reply");
        redisFree(w->rc);
    }
    w->rc = NULL;
    w->lost = true;
    w->pending = w->pending_bytes = 0;
    w->oldest_pending_ns = 0;
    through_applied_forget(w->name); /* what Redis confirmed may be gone with it */
    backoff_failed(&w->backoff, BACKOFF_MIN_NS, BACKOFF_MAX_NS);
}

void writer_close(writer_t *w) {
    if (w->rc != NULL)
        redisFree(w->rc);
    w->rc = NULL;
    w->pending = w->pending_bytes = 0;
}

bool writer_connect(writer_t *w) {
    if (w->rc != NULL)
        return true;
    if (backoff_waiting(&w->backoff, fg_now_ns()))
        return false;
    char why[256];
    w->rc = fg_redis_connect_raw(w->addr, false, why, sizeof why);
    if (w->rc == NULL) {
        w->lost = true;
        backoff_failed(&w->backoff, BACKOFF_MIN_NS, BACKOFF_MAX_NS);
        return false;
    }
    for (size_t i = 0; i < w->nscripts; i++) {
        const char *a[] = {"SCRIPT", "LOAD", w->scripts[i].source};
        redisReply *r = writer_command(w, 3, a);
        if (r == NULL)
            return false;
        bool ok = r->type == REDIS_REPLY_STRING;
        freeReplyObject(r);
        if (!ok) {
            writer_fail(w, "SCRIPT LOAD refused");
            return false;
        }
    }
    backoff_succeeded(&w->backoff);
    w->lost = false;
    FG_LOG(FG_LOG_INFO, NULL, "cache: cluster %s: redis connected", w->name);
    return true;
}

bool writer_flush(writer_t *w) {
    if (w->rc == NULL)
        return false;
    w->pending_bytes = 0;
    if (w->pending == 0)
        return true;
    uint64_t t0 = fg_now_ns();
    for (; w->pending > 0; w->pending--) {
        void *r = NULL;
        if (redisGetReply(w->rc, &r) != REDIS_OK) {
            writer_fail(w, "pipeline");
            return false;
        }
        redisReply *rep = r;
        bool noscript = is_noscript(rep);
        if (rep->type == REDIS_REPLY_ERROR)
            FG_LOG(FG_LOG_ERROR, NULL, "cache: cluster %s: redis refused a write: %s", w->name,
                   rep->str);
        freeReplyObject(rep);
        if (noscript) {
            writer_fail(w, "scripts were flushed");
            return false;
        }
    }
    observe(w->m_round_trip, w, t0);
    if (w->oldest_pending_ns != 0)
        observe(w->m_lag, w, w->oldest_pending_ns);
    w->oldest_pending_ns = 0;
    return true;
}

void writer_append(writer_t *w, int argc, const char **argv, const size_t *lens) {
    if (w->rc == NULL)
        return;
    if (redisAppendCommandArgv(w->rc, argc, argv, lens) != REDIS_OK) {
        writer_fail(w, "append");
        return;
    }
    for (int i = 0; i < argc; i++)
        w->pending_bytes += (lens ? lens[i] : strlen(argv[i])) + 16;
    if (++w->pending >= PIPE_MAX || w->pending_bytes >= PIPE_MAX_BYTES)
        writer_flush(w);
}

void writer_append_resp(writer_t *w, const char *resp, size_t len, size_t ncmds) {
    if (w->rc == NULL || len == 0)
        return;
    if (redisAppendFormattedCommand(w->rc, resp, len) != REDIS_OK) {
        writer_fail(w, "append");
        return;
    }
    w->pending += ncmds;
}

redisReply *writer_command(writer_t *w, int argc, const char **argv) {
    if (!writer_flush(w) && w->rc == NULL)
        return NULL;
    uint64_t t0 = fg_now_ns();
    redisReply *rep = redisCommandArgv(w->rc, argc, argv, NULL);
    if (rep == NULL) {
        writer_fail(w, "command");
        return NULL;
    }
    observe(w->m_round_trip, w, t0);
    if (is_noscript(rep)) {
        freeReplyObject(rep);
        writer_fail(w, "scripts were flushed");
        return NULL;
    }
    return rep;
}

bool writer_replies(writer_t *w, size_t n, redisReply **out) {
    if (w->rc == NULL || n > w->pending)
        return false;
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(w->rc, &r) != REDIS_OK) {
            for (size_t k = 0; k < i; k++)
                freeReplyObject(out[k]);
            writer_fail(w, "reply");
            return false;
        }
        out[i] = r;
        w->pending--;
    }
    if (w->pending == 0)
        w->pending_bytes = 0;
    return true;
}
