/* api/icache.c: the item cache.
 *
 * Presenting an object (parse the cached JSON, build the API's, serialise it) costs far more than
 * moving its bytes, and a page does it hundreds of times for objects that mostly did not change
 * since the last page that showed them. For kinds whose item depends on the object alone (pods),
 * the presented text is kept per object, keyed by a 128-bit hash of the cached bytes it came from:
 * a changed object has other bytes, so another key, and is presented afresh. Direct-mapped,
 * ICACHE_SLOTS entries of at most ICACHE_ITEM_MAX bytes (bounded memory), a mutex per stripe.
 */
#include "reads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ICACHE_SLOTS    16384
#define ICACHE_STRIPES  64
#define ICACHE_ITEM_MAX 4096

typedef struct {
    uint64_t h1, h2;
    char *text;
    size_t len;
    char etag[72];    /* the object's ETag value (its version) */
    rd_facts_t facts; /* what list filters look at (labels owned) */
} icache_ent_t;

static icache_ent_t icache[ICACHE_SLOTS];
static pthread_mutex_t icache_mu[ICACHE_STRIPES] = {[0 ... ICACHE_STRIPES - 1] =
                                                        PTHREAD_MUTEX_INITIALIZER};

rd_icache_key_t rd_icache_key(const char *raw, size_t len) {
    return (rd_icache_key_t){.h1 = fg_hash64(raw, len, 0x243f6a8885a308d3ull),
                             .h2 = fg_hash64(raw, len, 0x13198a2e03707344ull)};
}

bool rd_icache_get(rd_icache_key_t k, fg_buf_t *b, char *etag, size_t etaglen, rd_facts_t *facts) {
    uint64_t h1 = k.h1, h2 = k.h2;
    size_t slot = h1 % ICACHE_SLOTS;
    pthread_mutex_t *mu = &icache_mu[slot % ICACHE_STRIPES];
    bool hit = false;
    pthread_mutex_lock(mu);
    icache_ent_t *e = &icache[slot];
    if (e->text && e->h1 == h1 && e->h2 == h2) {
        hit = fg_buf_append(b, e->text, e->len) == FG_OK;
        if (etag)
            snprintf(etag, etaglen, "%s", e->etag);
        if (facts) {
            *facts = e->facts;
            facts->labels = e->facts.labels ? fg_xstrdup(e->facts.labels) : NULL;
        }
    }
    pthread_mutex_unlock(mu);
    return hit;
}

void rd_icache_put(rd_icache_key_t k, const char *text, size_t len, const char *etag,
                   const rd_facts_t *facts) {
    uint64_t h1 = k.h1, h2 = k.h2;
    if (len > ICACHE_ITEM_MAX)
        return;
    size_t slot = h1 % ICACHE_SLOTS;
    char *copy = fg_xstrndup(text, len), *old, *old_labels;
    char *labels = facts && facts->labels ? fg_xstrdup(facts->labels) : NULL;
    pthread_mutex_t *mu = &icache_mu[slot % ICACHE_STRIPES];
    pthread_mutex_lock(mu);
    icache_ent_t *e = &icache[slot];
    old = e->text;
    old_labels = e->facts.labels;
    *e = (icache_ent_t){.h1 = h1, .h2 = h2, .text = copy, .len = len};
    snprintf(e->etag, sizeof e->etag, "%s", etag ? etag : "");
    if (facts)
        e->facts = *facts;
    e->facts.labels = labels;
    pthread_mutex_unlock(mu);
    free(old);
    free(old_labels);
}

/* The facts of a presented item: its phase, app and labels. */
void rd_facts_of(const json_t *item, rd_facts_t *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->phase, sizeof f->phase, "%s", rd_str(item, "phase") ? rd_str(item, "phase") : "");
    snprintf(f->app, sizeof f->app, "%s", rd_str(item, "app") ? rd_str(item, "app") : "");
    json_t *labels = json_object_get(item, "labels");
    f->labels = json_is_object(labels) ? fg_json_dumps(labels, NULL) : NULL;
}
