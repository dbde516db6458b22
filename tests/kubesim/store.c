/* store: one cluster's objects, its resourceVersion counter and its change log.
 *
 * Like etcd behind a real API server, one counter serves every resource of the cluster: each write
 * takes the next RV and appends exactly one event to a bounded ring, so the ring always holds the
 * events with RVs (oldest_rv, rv] in order and event k sits at a computable slot. The state at any
 * RV in [oldest_rv, rv] is rebuilt by undoing the later events (each event keeps the previous
 * object), which gives lists at an exact RV and consistent pages for `continue`. Objects are
 * immutable and reference counted, serialised once when stored. Trees are glibc tsearch trees
 * keyed by "namespace/name", so walks come out in key order.
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

struct ks_store {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change (waiters for every resource) */
    /* Per resource: waiters for changes of that resource only (a watch of Deployments sleeps
     * through pod and Event writes instead of waking on each), the RV of its newest event, and
     * the RV of its newest event dropped from the ring (evicted or compacted): a watch of it has
     * lost nothing while its cursor is at or past that, whatever else was dropped. */
    pthread_cond_t cv_res[16];
    int64_t last_rv[16];
    int64_t lost_rv[16];
    int64_t rv;
    int64_t oldest_rv;
    void *roots[16];
    ks_event_t *ring;
    size_t cap;
    size_t len;
    size_t head; /* slot of the oldest event */
    bool closing;
    size_t counts[16];  /* objects per resource */
    size_t raw[16];     /* of which raw (seeded, text only) */
    size_t owned_n[16]; /* of which owned (may name owners: the garbage collector's candidates) */
    /* Per resource, the tree's slots in key order, valid until the next insert or delete
     * (updates swap the object inside a slot, so they keep it valid): LIST pages binary-search
     * their start instead of walking 120k nodes. */
    ks_obj_t ***index[16];
    size_t index_n[16];
    bool index_ok[16];
};

void ks_obj_ref(ks_obj_t *o) {
    __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
}

void ks_obj_unref(ks_obj_t *o) {
    if (o == NULL || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    json_decref(o->json);
    free(o->key);
    free(o->ser);
    free(o);
}

json_t *ks_obj_json(const ks_obj_t *o) {
    ks_obj_t *m = (ks_obj_t *)o; /* the cache is logically const */
    json_t *j = __atomic_load_n(&m->json, __ATOMIC_ACQUIRE);
    if (j != NULL)
        return j;
    json_t *parsed = NULL;
    if (fg_json_load(o->ser, o->ser_len, &parsed, NULL, 0) != FG_OK)
        abort(); /* ser was produced by jansson or the seeder: always valid */
    json_t *expected = NULL;
    if (__atomic_compare_exchange_n(&m->json, &expected, parsed, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return parsed;
    json_decref(parsed);
    return expected;
}

json_t *ks_obj_parse(const ks_obj_t *o) {
    json_t *j = __atomic_load_n(&((ks_obj_t *)o)->json, __ATOMIC_ACQUIRE);
    if (j != NULL)
        return json_incref(j);
    if (fg_json_load(o->ser, o->ser_len, &j, NULL, 0) != FG_OK)
        abort();
    return j;
}

static int cmp_obj(const void *a, const void *b) {
    return strcmp(((const ks_obj_t *)a)->key, ((const ks_obj_t *)b)->key);
}

static int cmp_objp(const void *a, const void *b) {
    return strcmp((*(ks_obj_t *const *)a)->key, (*(ks_obj_t *const *)b)->key);
}

/* Sets metadata.resourceVersion and wraps json (stolen) in a new object with one reference. */
static ks_obj_t *obj_new(int res, const char *key, json_t *json, int64_t rv) {
    ks_obj_t *o = fg_xcalloc(1, sizeof(*o));
    json_t *meta = json_object_get(json, "metadata");
    char rvs[24];
    snprintf(rvs, sizeof(rvs), "%lld", (long long)rv);
    if (json_is_object(meta))
        json_object_set_new(meta, "resourceVersion", json_string(rvs));
    o->refs = 1;
    o->res = res;
    o->key = fg_xstrdup(key);
    o->json = json;
    o->ser = fg_json_dumps(json, &o->ser_len);
    o->rv = rv;
    o->owned = json_array_size(json_object_get(meta, "ownerReferences")) > 0;
    return o;
}

int ks_store_new(size_t history, ks_store_t **out) {
    ks_store_t *s = fg_xcalloc(1, sizeof(*s));
    if (history == 0 || ks_nresources > 16) {
        free(s);
        return FG_EINVAL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    for (size_t i = 0; i < 16; i++)
        pthread_cond_init(&s->cv_res[i], &ca);
    pthread_condattr_destroy(&ca);
    s->rv = 1;
    s->oldest_rv = 1;
    s->cap = history;
    s->ring = fg_xcalloc(history, sizeof(*s->ring));
    *out = s;
    return FG_OK;
}

static void unref_node(void *p) {
    ks_obj_unref(p);
}

void ks_store_free(ks_store_t *s) {
    if (s == NULL)
        return;
    for (size_t i = 0; i < ks_nresources; i++) {
        tdestroy(s->roots[i], unref_node);
        free(s->index[i]);
    }
    for (size_t i = 0; i < s->len; i++) {
        ks_event_t *e = &s->ring[(s->head + i) % s->cap];
        ks_obj_unref(e->obj);
        ks_obj_unref(e->prev);
    }
    free(s->ring);
    pthread_cond_destroy(&s->cv);
    for (size_t i = 0; i < 16; i++)
        pthread_cond_destroy(&s->cv_res[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int64_t ks_store_rv(ks_store_t *s) {
    pthread_mutex_lock(&s->mu);
    int64_t rv = s->rv;
    pthread_mutex_unlock(&s->mu);
    return rv;
}

int64_t ks_store_oldest_rv(ks_store_t *s) {
    pthread_mutex_lock(&s->mu);
    int64_t rv = s->oldest_rv;
    pthread_mutex_unlock(&s->mu);
    return rv;
}

/* Wakes every waiter, of any resource (under the lock). */
static void wake_all(ks_store_t *s) {
    pthread_cond_broadcast(&s->cv);
    for (size_t i = 0; i < 16; i++)
        pthread_cond_broadcast(&s->cv_res[i]);
}

void ks_store_kick(ks_store_t *s) {
    pthread_mutex_lock(&s->mu);
    wake_all(s);
    pthread_mutex_unlock(&s->mu);
}

size_t ks_store_count_live(ks_store_t *s, int res) {
    pthread_mutex_lock(&s->mu);
    size_t n = res >= 0 && res < 16 ? s->counts[res] - s->raw[res] : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t ks_store_count_owned(ks_store_t *s, int res) {
    pthread_mutex_lock(&s->mu);
    size_t n = res >= 0 && res < 16 ? s->owned_n[res] : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t ks_store_count(ks_store_t *s, int res) {
    pthread_mutex_lock(&s->mu);
    size_t n = res >= 0 && res < 16 ? s->counts[res] : 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ks_store_compact(ks_store_t *s) {
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->len; i++) {
        ks_event_t *e = &s->ring[(s->head + i) % s->cap];
        ks_obj_unref(e->obj);
        ks_obj_unref(e->prev);
    }
    s->len = 0;
    s->head = 0;
    s->oldest_rv = s->rv;
    for (size_t i = 0; i < 16; i++)
        s->lost_rv[i] = s->rv;
    wake_all(s);
    pthread_mutex_unlock(&s->mu);
}

void ks_store_close(ks_store_t *s) {
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    wake_all(s);
    pthread_mutex_unlock(&s->mu);
}

/* Appends an event (references stolen) under the lock, evicting the oldest when full. */
static void log_event(ks_store_t *s, ks_event_type_t type, ks_obj_t *obj, ks_obj_t *prev) {
    if (s->len == s->cap) {
        ks_event_t *old = &s->ring[s->head];
        s->oldest_rv = old->rv;
        s->lost_rv[old->obj->res] = old->rv;
        ks_obj_unref(old->obj);
        ks_obj_unref(old->prev);
        s->head = (s->head + 1) % s->cap;
        s->len--;
    }
    ks_event_t *e = &s->ring[(s->head + s->len) % s->cap];
    e->type = type;
    e->rv = obj->rv;
    e->obj = obj;
    e->prev = prev;
    s->len++;
    s->last_rv[obj->res] = obj->rv;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->cv_res[obj->res]);
}

static ks_obj_t **find_slot(ks_store_t *s, int res, const char *key) {
    ks_obj_t probe = {.key = (char *)key};
    return tfind(&probe, &s->roots[res], cmp_obj);
}

int ks_store_get(ks_store_t *s, int res, const char *key, ks_obj_t **out) {
    int rc = FG_ENOENT;
    pthread_mutex_lock(&s->mu);
    ks_obj_t **slot = find_slot(s, res, key);
    if (slot != NULL) {
        ks_obj_ref(*slot);
        *out = *slot;
        rc = FG_OK;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int ks_store_put(ks_store_t *s, int res, const char *key, json_t *obj, ks_put_mode_t mode,
                 int64_t expect_rv, ks_obj_t **out) {
    int rc = FG_OK;
    pthread_mutex_lock(&s->mu);
    ks_obj_t **slot = find_slot(s, res, key);
    if (mode == KS_PUT_CREATE && slot != NULL) {
        rc = KS_EEXIST;
        goto out;
    }
    if (mode == KS_PUT_UPDATE && slot == NULL) {
        rc = FG_ENOENT;
        goto out;
    }
    if (slot != NULL && expect_rv > 0 && (*slot)->rv != expect_rv) {
        rc = KS_ECONFLICT;
        goto out;
    }
    ks_obj_t *o = obj_new(res, key, obj, s->rv + 1);
    obj = NULL;
    s->rv++;
    ks_obj_t *prev = NULL;
    if (slot != NULL) {
        prev = *slot; /* the tree's reference moves to the event */
        *slot = o;
        s->raw[res] -= prev->raw;
        s->owned_n[res] -= prev->owned;
    } else {
        tsearch(o, &s->roots[res], cmp_obj);
        s->counts[res]++;
        s->index_ok[res] = false;
    }
    s->owned_n[res] += o->owned;
    ks_obj_ref(o); /* the tree's */
    ks_obj_ref(o); /* the event's */
    log_event(s, prev != NULL ? KS_MODIFIED : KS_ADDED, o, prev);
    if (out != NULL)
        *out = o;
    else
        ks_obj_unref(o);
out:
    pthread_mutex_unlock(&s->mu);
    json_decref(obj);
    return rc;
}

int ks_store_put_raw(ks_store_t *s, int res, const char *key, char *ser, size_t len) {
    return ks_store_update_raw(s, res, key, ser, len, -1);
}

int ks_store_update_raw(ks_store_t *s, int res, const char *key, char *ser, size_t len,
                        int64_t expect_rv) {
    static const char PH[] = "\"resourceVersion\":\"\"";
    int rc = FG_OK;
    char *at = memmem(ser, len, PH, sizeof(PH) - 1);
    if (at == NULL) {
        free(ser);
        return FG_EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    ks_obj_t **slot = find_slot(s, res, key);
    if (expect_rv < 0 && slot != NULL) {
        rc = KS_EEXIST;
        goto out;
    }
    if (expect_rv >= 0 && slot == NULL) {
        rc = FG_ENOENT;
        goto out;
    }
    if (slot != NULL && expect_rv > 0 && (*slot)->rv != expect_rv) {
        rc = KS_ECONFLICT;
        goto out;
    }
    char rvs[24];
    int64_t rv = s->rv + 1;
    int rvlen = snprintf(rvs, sizeof(rvs), "%lld", (long long)rv);
    size_t head = (size_t)(at - ser) + sizeof(PH) - 2; /* up to the closing quote */
    ks_obj_t *o = fg_xcalloc(1, sizeof(*o));
    o->ser = fg_xmalloc(len + (size_t)rvlen + 1);
    memcpy(o->ser, ser, head);
    memcpy(o->ser + head, rvs, (size_t)rvlen);
    memcpy(o->ser + head + (size_t)rvlen, ser + head, len - head);
    o->ser_len = len + (size_t)rvlen;
    o->ser[o->ser_len] = '\0';
    /* the text names the key somewhere: maybe an owner (never misses one) */
    o->owned = memmem(o->ser, o->ser_len, "\"ownerReferences\"", 17) != NULL;
    o->refs = 2; /* the tree's and the event's */
    o->res = res;
    o->key = fg_xstrdup(key);
    o->rv = rv;
    o->raw = true;
    s->rv = rv;
    s->raw[res]++;
    s->owned_n[res] += o->owned;
    if (slot != NULL) {
        ks_obj_t *prev = *slot; /* the tree's reference moves to the event */
        *slot = o;
        s->raw[res] -= prev->raw;
        s->owned_n[res] -= prev->owned;
        log_event(s, KS_MODIFIED, o, prev);
    } else {
        tsearch(o, &s->roots[res], cmp_obj);
        s->counts[res]++;
        s->index_ok[res] = false;
        log_event(s, KS_ADDED, o, NULL);
    }
out:
    pthread_mutex_unlock(&s->mu);
    free(ser);
    return rc;
}

int ks_store_delete(ks_store_t *s, int res, const char *key, ks_obj_t **out) {
    int rc = FG_OK;
    pthread_mutex_lock(&s->mu);
    ks_obj_t **slot = find_slot(s, res, key);
    if (slot == NULL) {
        rc = FG_ENOENT;
        goto out;
    }
    ks_obj_t *prev = *slot;
    tdelete(prev, &s->roots[res], cmp_obj);
    s->counts[res]--;
    s->raw[res] -= prev->raw;
    s->owned_n[res] -= prev->owned;
    s->index_ok[res] = false;
    /* The DELETED event carries the last state at the deletion's RV, as a real server sends it. */
    json_t *pj = ks_obj_parse(prev);
    /* obj_new writes metadata.resourceVersion: a copy of the top level and of metadata, the
     * rest shared with the stored version (which never changes) */
    json_t *lj = json_copy(pj);
    json_t *lmeta = json_copy(json_object_get(pj, "metadata"));
    if (lmeta != NULL)
        json_object_set_new(lj, "metadata", lmeta);
    ks_obj_t *last = obj_new(res, key, lj, s->rv + 1);
    json_decref(pj);
    s->rv++;
    if (out != NULL) {
        ks_obj_ref(last);
        *out = last;
    }
    log_event(s, KS_DELETED, last, prev);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void ks_objs_free(ks_obj_t **items, size_t n) {
    for (size_t i = 0; i < n; i++)
        ks_obj_unref(items[i]);
    free(items);
}

typedef struct {
    const char *ns;
    size_t nslen;
    const char *after;
    ks_obj_t **items;
    size_t n;
    size_t cap;
    size_t max;   /* keep at most this many */
    size_t total; /* how many were in range */
} collect_t;

static bool key_selected(const collect_t *c, const char *key) {
    if (c->ns != NULL && (strncmp(key, c->ns, c->nslen) != 0 || key[c->nslen] != '/'))
        return false;
    return c->after == NULL || strcmp(key, c->after) > 0;
}

static void collect_push(collect_t *c, ks_obj_t *o) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->items = fg_xrealloc(c->items, c->cap * sizeof(*c->items));
    }
    ks_obj_ref(o);
    c->items[c->n++] = o;
}

typedef struct {
    ks_obj_t ***slots;
    size_t n, cap;
} index_build_t;

static void index_visit(const void *node, VISIT which, void *arg) {
    if (which != postorder && which != leaf)
        return;
    index_build_t *b = arg;
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->slots = fg_xrealloc(b->slots, b->cap * sizeof(*b->slots));
    }
    b->slots[b->n++] = (ks_obj_t **)node; /* a node's first member is its key: our object */
}

/* First index position whose key compares > key (strict) or >= key. */
static size_t index_bound(ks_obj_t ***slots, size_t n, const char *key, bool strict) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp((*slots[mid])->key, key);
        if (c < 0 || (strict && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Collects the range of c (namespace, after) from the sorted index (rebuilt when an insert or
 * delete made it stale), up to c->max items; c->total counts the whole range. */
static void collect_range(ks_store_t *s, int res, collect_t *c) {
    if (!s->index_ok[res]) {
        index_build_t b = {.slots = s->index[res]};
        twalk_r(s->roots[res], index_visit, &b);
        s->index[res] = b.slots;
        s->index_n[res] = b.n;
        s->index_ok[res] = true;
    }
    ks_obj_t ***slots = s->index[res];
    size_t n = s->index_n[res], from = 0, to = n;
    char bound[300];
    if (c->ns != NULL) {
        snprintf(bound, sizeof(bound), "%s/", c->ns);
        from = index_bound(slots, n, bound, false);
        snprintf(bound, sizeof(bound), "%s0", c->ns); /* '0' follows '/' */
        to = index_bound(slots, n, bound, false);
    }
    if (c->after != NULL) {
        size_t a = index_bound(slots, n, c->after, true);
        if (a > from)
            from = a;
    }
    c->total = to > from ? to - from : 0;
    for (size_t i = from; i < to && c->n < c->max; i++)
        collect_push(c, *slots[i]);
}

/* An undo record: key's state at the snapshot is `state` (NULL = absent). */
typedef struct {
    const char *key;
    int64_t rv;
    ks_obj_t *state;
} undo_t;

static int cmp_undo(const void *a, const void *b) {
    const undo_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    return x->rv < y->rv ? -1 : x->rv > y->rv;
}

/* Rewinds c->items (the current state, key-sorted) to RV at_rv. Called under the lock. */
static void rewind_to(ks_store_t *s, int res, int64_t at_rv, collect_t *c) {
    size_t first = (size_t)(at_rv - s->oldest_rv); /* events after at_rv start here */
    undo_t *undo = NULL;
    size_t nundo = 0;
    for (size_t i = first; i < s->len; i++) {
        ks_event_t *e = &s->ring[(s->head + i) % s->cap];
        if (e->obj->res != res || !key_selected(c, e->obj->key))
            continue;
        undo = fg_xrealloc(undo, (nundo + 1) * sizeof(*undo));
        undo[nundo++] = (undo_t){e->obj->key, e->rv, e->prev};
    }
    if (nundo == 0)
        return;
    qsort(undo, nundo, sizeof(*undo), cmp_undo);
    size_t kept = 0;
    for (size_t i = 0; i < c->n; i++) {
        undo_t probe = {.key = c->items[i]->key};
        bool touched = false;
        size_t lo = 0, hi = nundo;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            int cmp = strcmp(undo[mid].key, probe.key);
            if (cmp == 0) {
                touched = true;
                break;
            }
            if (cmp < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (touched)
            ks_obj_unref(c->items[i]);
        else
            c->items[kept++] = c->items[i];
    }
    c->n = kept;
    for (size_t i = 0; i < nundo; i++) {
        if (i > 0 && strcmp(undo[i].key, undo[i - 1].key) == 0)
            continue; /* only the earliest change after at_rv tells the state at at_rv */
        if (undo[i].state != NULL)
            collect_push(c, undo[i].state);
    }
    qsort(c->items, c->n, sizeof(*c->items), cmp_objp);
    free(undo);
}

int ks_store_list(ks_store_t *s, int res, const char *ns, const char *after, int64_t at_rv,
                  ks_obj_t ***items, size_t *n, int64_t *rv_out) {
    size_t total = 0;
    return ks_store_list_max(s, res, ns, after, at_rv, SIZE_MAX, items, n, &total, rv_out);
}

int ks_store_list_max(ks_store_t *s, int res, const char *ns, const char *after, int64_t at_rv,
                      size_t max, ks_obj_t ***items, size_t *n, size_t *total, int64_t *rv_out) {
    int rc = FG_OK;
    collect_t c = {.ns = ns, .nslen = ns ? strlen(ns) : 0, .after = after, .max = SIZE_MAX};
    pthread_mutex_lock(&s->mu);
    if (at_rv > s->rv) {
        rc = KS_ETOOLARGE;
        goto out;
    }
    if (at_rv != 0 && at_rv < s->oldest_rv) {
        rc = KS_EEXPIRED;
        goto out;
    }
    bool rewind = at_rv != 0 && at_rv < s->rv;
    c.max = max;
    if (rewind && max != SIZE_MAX) {
        /* A rewind removes at most one current item per change since at_rv, and every current
         * item past the cap sorts after the kept ones: keeping max + that many is enough for
         * the first max items of the state at at_rv to be exact. */
        size_t changes = 0;
        for (size_t i = (size_t)(at_rv - s->oldest_rv); i < s->len; i++)
            changes += s->ring[(s->head + i) % s->cap].obj->res == res;
        c.max = max + changes;
    }
    collect_range(s, res, &c);
    if (rewind) {
        size_t before = c.n;
        rewind_to(s, res, at_rv, &c);
        /* the in-range count at at_rv, exact when the cap kept everything */
        c.total = c.total + c.n >= before ? c.total + c.n - before : c.n;
    }
    *total = c.total;
    *rv_out = at_rv != 0 ? at_rv : s->rv;
    *items = c.items;
    *n = c.n;
    c.items = NULL;
out:
    pthread_mutex_unlock(&s->mu);
    if (c.items != NULL)
        ks_objs_free(c.items, c.n);
    return rc;
}

void ks_events_release(ks_event_t *evs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        ks_obj_unref(evs[i].obj);
        ks_obj_unref(evs[i].prev);
    }
}

int ks_store_wait_events(ks_store_t *s, int res, int64_t after, int wait_ms, ks_event_t *evs,
                         size_t max, size_t *n_out, int64_t *cursor_out) {
    int rc = FG_OK;
    struct timespec deadline;
    bool one = res >= 0 && res < 16;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    *n_out = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->closing && (one ? s->last_rv[res] : s->rv) <= after) {
        if (pthread_cond_timedwait(one ? &s->cv_res[res] : &s->cv, &s->mu, &deadline) == ETIMEDOUT)
            break;
    }
    if (s->closing) {
        rc = FG_EIO;
        goto out;
    }
    /* other resources' events may have been dropped since `after`: that loses nothing here */
    if (after < s->oldest_rv && (!one || s->lost_rv[res] > after)) {
        rc = KS_EEXPIRED;
        goto out;
    }
    size_t first = after < s->oldest_rv ? 0 : (size_t)(after - s->oldest_rv);
    size_t n = 0, i;
    int64_t cursor = after > s->rv ? after : s->rv;
    for (i = first; i < s->len; i++) {
        ks_event_t *e = &s->ring[(s->head + i) % s->cap];
        if (one && e->obj->res != res)
            continue;
        if (n == max) { /* read up to the event before this one */
            cursor = i > first ? s->ring[(s->head + i - 1) % s->cap].rv : after;
            break;
        }
        evs[n] = *e;
        ks_obj_ref(evs[n].obj);
        if (evs[n].prev != NULL)
            ks_obj_ref(evs[n].prev);
        n++;
    }
    *n_out = n;
    *cursor_out = cursor;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}
