/* cache/changes.c: readers of the projects' change streams (cache.h "the change streams"): one
 * hiredis connection each, with no read timeout (XREAD BLOCK bounds the wait), dropped after any
 * failure and made again at the next call. */
#include "cache_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS 1024

struct fg_cache_changes {
    const fg_redis_t *pool;
    redisContext *rc;
};

fg_cache_changes_t *fg_cache_changes_new(const fg_redis_t *pool) {
    fg_cache_changes_t *c = fg_xcalloc(1, sizeof *c);
    c->pool = pool;
    return c;
}

void fg_cache_changes_free(fg_cache_changes_t *c) {
    if (c == NULL)
        return;
    if (c->rc)
        redisFree(c->rc);
    free(c);
}

/* Sends argv and returns the reply (the caller frees it), or NULL having dropped the
 * connection (logged once per failure). */
static redisReply *command(fg_cache_changes_t *c, int argc, const char **argv) {
    char why[256];
    if (c->rc == NULL) {
        c->rc = fg_redis_connect_raw(c->pool, true, why, sizeof why);
        if (c->rc == NULL) {
            FG_LOG(FG_LOG_WARN, NULL, "changes: redis: %s", why);
            return NULL;
        }
    }
    redisReply *r = redisCommandArgv(c->rc, argc, argv, NULL);
    if (r == NULL) {
        FG_LOG(FG_LOG_WARN, NULL, "changes: redis: %s", c->rc->errstr);
        redisFree(c->rc);
        c->rc = NULL;
    }
    return r;
}

static const char *field(const redisReply *kv, const char *name, size_t *len) {
    for (size_t i = 0; i + 1 < kv->elements; i += 2) {
        const redisReply *k = kv->element[i], *v = kv->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
            strcmp(k->str, name) == 0) {
            if (len)
                *len = v->len;
            return v->str;
        }
    }
    return NULL;
}

static const char *or_empty(const char *s) {
    return s ? s : "";
}

/* Hands each [id, [k, v, ...]] of entries to fn; returns how many. */
static size_t entries(const redisReply *list, size_t stream, fg_cache_change_fn fn, void *ud) {
    size_t n = 0;
    if (list == NULL || list->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        const redisReply *kv = e->element[1];
        fg_cache_change_t ch = {.id = e->element[0]->str};
        ch.type = or_empty(field(kv, "t", NULL));
        ch.kind = or_empty(field(kv, "k", NULL));
        ch.name = or_empty(field(kv, "n", NULL));
        ch.cluster = or_empty(field(kv, "c", NULL));
        ch.version = or_empty(field(kv, "v", NULL));
        ch.time = or_empty(field(kv, "ts", NULL));
        ch.app = or_empty(field(kv, "a", NULL));
        ch.object = field(kv, "o", &ch.object_len);
        fn(ud, stream, &ch);
        n++;
    }
    return n;
}

int fg_cache_changes_read(fg_cache_changes_t *c, const char *const *projects,
                          const char *const *after, size_t n, int block_ms, size_t count,
                          fg_cache_change_fn fn, void *ud) {
    if (n == 0 || n > MAX_STREAMS)
        return FG_EINVAL;
    char block[16], cnt[16];
    snprintf(block, sizeof block, "%d", block_ms);
    snprintf(cnt, sizeof cnt, "%zu", count);
    const char **argv = fg_xcalloc(6 + 2 * n, sizeof *argv);
    fg_cache_key_t *keys = fg_xcalloc(n, sizeof *keys);
    int argc = 0;
    argv[argc++] = "XREAD";
    argv[argc++] = "COUNT";
    argv[argc++] = cnt;
    argv[argc++] = "BLOCK";
    argv[argc++] = block;
    argv[argc++] = "STREAMS";
    for (size_t i = 0; i < n; i++)
        argv[argc++] = fg_cache_key_changes(&keys[i], projects[i]);
    for (size_t i = 0; i < n; i++)
        argv[argc++] = after[i];
    redisReply *r = command(c, argc, argv);
    int rc = FG_OK;
    if (r == NULL) {
        rc = FG_EIO;
    } else if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *s = r->element[i];
            if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
                s->element[0]->type != REDIS_REPLY_STRING)
                continue;
            for (size_t k = 0; k < n; k++)
                if (strcmp(keys[k].s, s->element[0]->str) == 0)
                    entries(s->element[1], k, fn, ud);
        }
    } else if (r->type == REDIS_REPLY_ERROR) {
        FG_LOG(FG_LOG_ERROR, NULL, "changes: XREAD refused: %s", r->str);
        rc = FG_EIO;
    }
    freeReplyObject(r);
    free(argv);
    free(keys);
    return rc;
}

int fg_cache_changes_range(fg_cache_changes_t *c, const char *project, const char *after,
                           size_t count, fg_cache_change_fn fn, void *ud, size_t *got) {
    fg_cache_key_t key;
    char from[64], cnt[16];
    snprintf(from, sizeof from, "(%s", after);
    snprintf(cnt, sizeof cnt, "%zu", count);
    const char *argv[] = {"XRANGE", fg_cache_key_changes(&key, project), from, "+", "COUNT", cnt};
    *got = 0;
    redisReply *r = command(c, 6, argv);
    if (r == NULL)
        return FG_EIO;
    int rc = FG_OK;
    if (r->type == REDIS_REPLY_ARRAY)
        *got = entries(r, 0, fn, ud);
    else
        rc = FG_EIO;
    freeReplyObject(r);
    return rc;
}

/* The integer member name of an XINFO STREAM reply, or -1. */
static long long int_field(const redisReply *kv, const char *name) {
    for (size_t i = 0; i + 1 < kv->elements; i += 2) {
        const redisReply *k = kv->element[i], *v = kv->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_INTEGER &&
            strcmp(k->str, name) == 0)
            return v->integer;
    }
    return -1;
}

/* The id of the first entry of an XINFO STREAM reply, or NULL. */
static const char *first_entry_id(const redisReply *kv) {
    for (size_t i = 0; i + 1 < kv->elements; i += 2) {
        const redisReply *k = kv->element[i], *v = kv->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, "first-entry") == 0 &&
            v->type == REDIS_REPLY_ARRAY && v->elements == 2 &&
            v->element[0]->type == REDIS_REPLY_STRING)
            return v->element[0]->str;
    }
    return NULL;
}

int fg_cache_changes_state(fg_cache_changes_t *c, const char *project, char *last_id,
                           char *max_deleted, char *first_id, bool *exists) {
    fg_cache_key_t key;
    const char *argv[] = {"XINFO", "STREAM", fg_cache_key_changes(&key, project)};
    snprintf(last_id, 48, "0-0");
    snprintf(max_deleted, 48, "0-0");
    if (first_id)
        snprintf(first_id, 48, "0-0");
    if (exists)
        *exists = false;
    redisReply *r = command(c, 3, argv);
    if (r == NULL)
        return FG_EIO;
    if (r->type == REDIS_REPLY_ARRAY) {
        const char *l = field(r, "last-generated-id", NULL);
        const char *m = field(r, "max-deleted-entry-id", NULL);
        if (l)
            snprintf(last_id, 48, "%s", l);
        if (m)
            snprintf(max_deleted, 48, "%s", m);
        if (exists)
            *exists = true;
        /* nothing ever deleted: the entries are all it ever had */
        long long added = int_field(r, "entries-added"), length = int_field(r, "length");
        const char *first = first_entry_id(r);
        if (first_id && first && added >= 0 && added == length)
            snprintf(first_id, 48, "%s", first);
    } /* an error reply: no such key, so nothing was ever added nor trimmed (or a FLUSHALL) */
    freeReplyObject(r);
    return FG_OK;
}

int fg_cache_changes_epoch(fg_cache_changes_t *c, char *out, size_t len) {
    const char *argv[] = {"GET", FG_CACHE_KEY_EPOCH};
    redisReply *r = command(c, 2, argv);
    if (r == NULL)
        return FG_EIO;
    int rc = FG_OK;
    if (r->type == REDIS_REPLY_STRING)
        snprintf(out, len, "%s", r->str);
    else if (r->type == REDIS_REPLY_NIL)
        snprintf(out, len, "%s", "");
    else
        rc = FG_EIO;
    freeReplyObject(r);
    return rc;
}
