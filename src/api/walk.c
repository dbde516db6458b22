/* api/walk.c: one page of a list, walked over the per-cluster sorted indexes (rd_list_reply).
 *
 * Each part's index fg:i:{kind}:{cluster}:{scope} is a zset of names (score 0) read with
 * ZRANGEBYLEX in batches of limit+1 from just after the cursor. The batches are merged in
 * (name, cluster) order; a batch that runs dry while its index has more is refilled before the
 * merge goes on, so the order is exact. A round loads the objects of at most one page (HMGET per
 * cluster, one pipeline), filters and presents them; rounds repeat until the page is full, the
 * indexes end, or SCAN_BUDGET names were examined (a filter that matches little: the page is
 * short and its cursor goes on from where the scan stopped). The cursor is the last (name,
 * cluster) examined: objects inserted or deleted elsewhere never shift it.
 *
 * All of a walk's state is one walk_t (as Redis's zrange_result_handler carries a ZRANGE's), so
 * each step takes the walk and what is particular to it.
 */
#include "reads.h"

#include "cursor.h"
#include "fleetgate/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_BUDGET 20000       /* names examined by one page at most */
#define BODY_MAX    (64u << 20) /* a page of 1000 objects of 64 KiB at most */

/* One part's index, read a batch at a time. */
typedef struct {
    fg_redis_reply_t *rep; /* the current batch of names (owned) */
    size_t pos, n;
    bool done;                  /* the index holds nothing past this batch */
    char from[RD_NAME_MAX + 2]; /* ZRANGEBYLEX min for the next batch */
} stream_t;

/* A name of one part, picked for the page. */
typedef struct {
    size_t part;
    const char *name; /* borrowed from the stream's batch */
    size_t len;
    size_t slot; /* index into the part's HMGET */
} cand_t;

/* The groups a round loads and presents: group g is cands[group_start[g] .. group_start[g+1]). */
typedef struct {
    size_t ncands, ngroups;
    fg_redis_reply_t *reps[RD_MAX_CLUSTERS]; /* each part's HMGET (owned; NULL when none) */
} round_t;

typedef struct {
    /* what the handler asked for */
    rd_ctx_t *c;
    bool by_name; /* a group is a name's objects from every cluster, not one (name, cluster) */
    rd_match_fn match;
    rd_present_fn present;
    void *arg;
    size_t limit;
    /* where the walk stands */
    stream_t st[RD_MAX_CLUSTERS];
    cand_t *cands;                                     /* the current round's candidates */
    size_t *group_start;                               /* the current round's groups */
    size_t nitems;                                     /* items on the page */
    size_t scanned;                                    /* groups examined */
    bool more;                                         /* something may follow the page */
    char last_name[RD_NAME_MAX + 1], last_cluster[64]; /* the last group examined */
    fg_buf_t body;                                     /* the answer as it grows */
} walk_t;

static const char *head(const stream_t *s, size_t *len) {
    return fg_redis_reply_str(fg_redis_reply_at(s->rep, s->pos), len);
}

static int cmp_name(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    return r ? r : (alen < blen ? -1 : alen > blen);
}

/* Sets each part's starting point: after the cursor, or the beginning. */
static bool start_or_reply(walk_t *w) {
    rd_ctx_t *c = w->c;
    char cname[RD_NAME_MAX + 1], ccluster[64];
    bool have_cursor;
    if (!rd_cursor_or_reply(c->req, cname, ccluster, &have_cursor))
        return false;
    for (size_t i = 0; i < c->nparts; i++) {
        if (c->parts[i].fresh.state == FG_FRESH_MISSING) {
            w->st[i].done = true; /* never synced: nothing of it is served */
            continue;
        }
        if (!have_cursor)
            snprintf(w->st[i].from, sizeof w->st[i].from, "-");
        else
            snprintf(w->st[i].from, sizeof w->st[i].from, "%c%s",
                     !w->by_name && strcmp(c->parts[i].conf->name, ccluster) > 0 ? '[' : '(',
                     cname);
    }
    return true;
}

/* Refills every stream whose batch is used up and whose index may hold more. */
static bool refill_or_reply(walk_t *w) {
    rd_ctx_t *c = w->c;
    size_t which[RD_MAX_CLUSTERS], n = 0, batch = w->limit + 1;
    char count[24];
    snprintf(count, sizeof count, "%zu", batch);
    fg_redis_batch_t *b = fg_redis_batch_new();
    for (size_t i = 0; i < c->nparts; i++) {
        if (w->st[i].done || w->st[i].pos < w->st[i].n)
            continue;
        fg_cache_key_t k;
        fg_cache_key_index(&k, c->kind, c->parts[i].conf->name, c->scope);
        fg_redis_batch_addv(b, "ZRANGEBYLEX", k.s, w->st[i].from, "+", "LIMIT", "0", count, NULL);
        which[n++] = i;
    }
    if (n > 0 && !rd_batch_or_reply(c->req, c->api, b)) {
        fg_redis_batch_free(b);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        stream_t *s = &w->st[which[k]];
        fg_redis_reply_free(s->rep);
        s->rep = fg_redis_batch_take_reply(b, k);
        s->pos = 0;
        s->n = fg_redis_reply_len(s->rep);
        s->done = s->n < batch;
        if (s->n) {
            size_t len;
            const char *last = fg_redis_reply_str(fg_redis_reply_at(s->rep, s->n - 1), &len);
            snprintf(s->from, sizeof s->from, "(%.*s", (int)(len < RD_NAME_MAX ? len : RD_NAME_MAX),
                     last ? last : "");
        }
    }
    fg_redis_batch_free(b);
    return true;
}

/* Picks the next group in (name, cluster) order into cands (one candidate per part of the group);
 * returns how many, 0 when every stream has ended or one needs a refill first (*refill). */
static size_t pick(walk_t *w, cand_t *cands, bool *refill) {
    const rd_ctx_t *c = w->c;
    stream_t *st = w->st;
    *refill = false;
    for (size_t i = 0; i < c->nparts; i++)
        if (st[i].pos >= st[i].n && !st[i].done) {
            *refill = true;
            return 0;
        }
    size_t best = SIZE_MAX, blen = 0;
    const char *bname = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        if (st[i].pos >= st[i].n)
            continue;
        size_t len;
        const char *h = head(&st[i], &len);
        if (bname == NULL || cmp_name(h, len, bname, blen) < 0) {
            best = i, bname = h, blen = len;
        }
    }
    if (bname == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = best; i < c->nparts; i++) {
        size_t len;
        if (st[i].pos >= st[i].n)
            continue;
        const char *h = head(&st[i], &len);
        if (cmp_name(h, len, bname, blen) != 0)
            continue;
        cands[n++] = (cand_t){.part = i, .name = h, .len = len};
        st[i].pos++;
        if (!w->by_name)
            break; /* parts are sorted by cluster name, so the first is the smallest */
    }
    return n;
}

/* Collects up to what the page still needs of groups into r, refilling batches as they run dry;
 * false when a refill failed (the problem was sent). Clears w->more when the indexes ended. */
static bool collect_or_reply(walk_t *w, round_t *r) {
    while (r->ngroups < w->limit - w->nitems) {
        bool refill;
        size_t n = pick(w, w->cands + r->ncands, &refill);
        if (n == 0 && refill) {
            /* A refill frees the batches the candidates point into: end the round first. */
            if (r->ncands > 0)
                break;
            if (!refill_or_reply(w))
                return false;
            continue;
        }
        if (n == 0) {
            w->more = false;
            break;
        }
        w->group_start[r->ngroups++] = r->ncands;
        r->ncands += n;
    }
    w->group_start[r->ngroups] = r->ncands;
    return true;
}

/* Loads the objects of a round's candidates: r->reps[p] is part p's HMGET (NULL when none). */
static bool load_or_reply(walk_t *w, round_t *r) {
    const rd_ctx_t *c = w->c;
    size_t per[RD_MAX_CLUSTERS] = {0}, cmd[RD_MAX_CLUSTERS];
    for (size_t k = 0; k < r->ncands; k++)
        w->cands[k].slot = per[w->cands[k].part]++;
    fg_redis_batch_t *b = fg_redis_batch_new();
    /* One HMGET per part that has candidates; names come from their batches, NUL-free but not
     * NUL-terminated, so they go with their lengths. */
    for (size_t p = 0; p < c->nparts; p++) {
        r->reps[p] = NULL;
        if (per[p] == 0)
            continue;
        const char **argv = fg_xcalloc(per[p] + 2, sizeof *argv);
        size_t *lens = fg_xcalloc(per[p] + 2, sizeof *lens);
        fg_cache_key_t k;
        argv[0] = "HMGET";
        argv[1] = fg_cache_key_objects(&k, c->kind, c->parts[p].conf->name, c->scope);
        lens[0] = 5;
        lens[1] = strlen(argv[1]);
        for (size_t i = 0; i < r->ncands; i++)
            if (w->cands[i].part == p) {
                argv[2 + w->cands[i].slot] = w->cands[i].name;
                lens[2 + w->cands[i].slot] = w->cands[i].len;
            }
        cmd[p] = fg_redis_batch_add(b, per[p] + 2, argv, lens);
        free(lens);
        free(argv);
    }
    bool ok = rd_batch_or_reply(c->req, c->api, b);
    for (size_t p = 0; ok && p < c->nparts; p++)
        if (per[p] > 0)
            r->reps[p] = fg_redis_batch_take_reply(b, cmd[p]);
    fg_redis_batch_free(b);
    return ok;
}

/* Presents group g of round r and appends it to the page; false when it was left out. With
 * match (one object per group), the item may come from the item cache and is kept when match
 * says so. */
static bool append_item(walk_t *w, const round_t *r, size_t g) {
    rd_ctx_t *c = w->c;
    const cand_t *group = &w->cands[w->group_start[g]];
    size_t count = w->group_start[g + 1] - w->group_start[g];
    size_t mark = w->body.len;
    bool cacheable = w->match && count == 1, keep = false;
    rd_icache_key_t key = {0, 0};
    rd_facts_t facts = {.labels = NULL};
    char *text = NULL;
    if (w->nitems > 0 && fg_buf_append(&w->body, ",", 1) != FG_OK)
        return false;
    if (cacheable) {
        size_t len;
        const fg_redis_reply_t *v = fg_redis_reply_at(r->reps[group->part], group->slot);
        const char *raw = v ? fg_redis_reply_str(v, &len) : NULL;
        if (raw == NULL)
            goto out; /* deleted between the index read and this one */
        key = rd_icache_key(raw, len);
        if (rd_icache_get(key, &w->body, NULL, 0, &facts)) {
            keep = w->match(&facts, w->arg);
            goto out;
        }
    }
    json_t *objs[RD_MAX_CLUSTERS] = {NULL};
    bool any = false;
    for (size_t k = 0; k < count; k++) {
        size_t p = group[k].part;
        objs[p] = rd_parse_object(fg_redis_reply_at(r->reps[p], group[k].slot), fg_req_id(c->req));
        any = any || objs[p];
    }
    json_t *item = any ? w->present(c, w->last_name, objs, w->arg) : NULL;
    rd_objs_free(objs, c->nparts);
    size_t len = 0;
    text = item ? fg_json_dumps(item, &len) : NULL;
    char etag[72];
    snprintf(etag, sizeof etag, "%s", rd_str(item, "version") ? rd_str(item, "version") : "");
    if (cacheable && item)
        rd_facts_of(item, &facts);
    json_decref(item);
    if (text == NULL)
        goto out;
    if (cacheable)
        rd_icache_put(key, text, len, etag, &facts); /* its version: a get may use it */
    keep = (!cacheable || w->match(&facts, w->arg)) && fg_buf_append(&w->body, text, len) == FG_OK;
out:
    if (!keep) {
        w->body.len = mark;
        w->body.data[mark] = '\0';
    }
    free(facts.labels);
    free(text);
    return keep;
}

/* Presents a loaded round's groups until the page is full. */
static void present_round(walk_t *w, const round_t *r) {
    size_t g = 0;
    for (; g < r->ngroups && w->nitems < w->limit; g++) {
        const cand_t *first = &w->cands[w->group_start[g]];
        snprintf(w->last_name, sizeof w->last_name, "%.*s", (int)first->len, first->name);
        snprintf(w->last_cluster, sizeof w->last_cluster, "%s",
                 w->by_name ? "" : w->c->parts[first->part].conf->name);
        w->scanned++;
        if (append_item(w, r, g))
            w->nitems++;
    }
    if (g < r->ngroups)
        w->more = true; /* the page filled before the round's last group */
}

/* Walks rounds until the page is full, the indexes end or the scan budget is spent. */
static bool walk_or_reply(walk_t *w) {
    while (w->nitems < w->limit && w->scanned < SCAN_BUDGET) {
        round_t r = {.ncands = 0, .ngroups = 0};
        if (!collect_or_reply(w, &r))
            return false;
        if (r.ngroups == 0)
            break;
        if (!load_or_reply(w, &r))
            return false;
        present_round(w, &r);
        for (size_t p = 0; p < w->c->nparts; p++)
            fg_redis_reply_free(r.reps[p]);
        if (!w->more)
            break;
    }
    if (w->more && w->nitems == w->limit) {
        /* The page is full: is anything left past it? */
        bool left = false;
        for (size_t i = 0; i < w->c->nparts; i++)
            left = left || w->st[i].pos < w->st[i].n || !w->st[i].done;
        w->more = left;
    }
    return true;
}

/* Closes the page (cursor, per-cluster states) and sends it. */
static int finish_reply(walk_t *w) {
    char cursor[2 * RD_CURSOR_MAX] = "";
    if (w->more && w->last_name[0])
        rd_cursor_encode(w->last_name, w->last_cluster, cursor, sizeof cursor);
    json_t *parts = rd_parts_json(w->c);
    char *ptext = fg_json_dumps(parts, NULL);
    json_decref(parts);
    int rc = fg_buf_appendf(&w->body, "],\"cursor\":%s%s%s,\"clusters\":%s}", cursor[0] ? "\"" : "",
                            cursor[0] ? cursor : "null", cursor[0] ? "\"" : "", ptext);
    free(ptext);
    if (rc != FG_OK)
        return fg_reply_problem(w->c->req, FG_PROBLEM_INTERNAL, "the page is larger than %u bytes",
                                (unsigned)BODY_MAX);
    fg_auth_charge_items(w->c->req, w->nitems);
    size_t len;
    char *text = fg_buf_steal(&w->body, &len);
    return rd_reply_text_etag(w->c->req, text, len, NULL);
}

int rd_list_reply(rd_ctx_t *c, bool by_name, rd_match_fn match, size_t limit, rd_present_fn present,
                  void *arg) {
    walk_t *w = fg_xcalloc(1, sizeof *w);
    *w = (walk_t){.c = c,
                  .by_name = by_name,
                  .match = match,
                  .present = present,
                  .arg = arg,
                  .limit = limit,
                  .more = true};
    w->cands = fg_xcalloc(limit * (by_name ? c->nparts : 1) + c->nparts, sizeof *w->cands);
    w->group_start = fg_xcalloc(limit + 2, sizeof *w->group_start);
    fg_buf_init(&w->body, BODY_MAX);
    fg_buf_append(&w->body, "{\"items\":[", 10);
    if (start_or_reply(w) && walk_or_reply(w))
        finish_reply(w);
    for (size_t i = 0; i < c->nparts; i++)
        fg_redis_reply_free(w->st[i].rep);
    free(w->cands);
    free(w->group_start);
    fg_buf_free(&w->body);
    free(w);
    return FG_OK; /* the answer or the problem was sent */
}
