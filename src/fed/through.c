/* fed/through.c: read your writes without waiting for the watch.
 *
 * After a fan-out, each object a member cluster answered is translated as the informer would
 * translate it (kind from the answer's kind/apiVersion, the cluster's configured name and zone)
 * and written through to the cache (cache/through.c, guarded by resourceVersion so the watch and
 * the write-through never undo each other). An object a delete left in place, being deleted
 * (deletionTimestamp: finalizers, a pod's grace period), is stored as it is; one a delete
 * removed is left to the watch (cache/through.c says why). An answer that says nothing usable
 * (a Status, an object without a resourceVersion, a kind fleetgate does not cache) is not shown
 * here either: the caller waits for the watch for that one.
 */
#include "fed_internal.h"

#include "fleetgate/cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct fg_fed_item {
    fg_cache_through_t it;
    json_t *t;  /* the translated object (owned) */
    char *text; /* its JSON (owned) */
} item_t;

static const fg_cluster_conf_t *cluster_conf(const fg_fed_t *fed, const char *name) {
    for (size_t i = 0; i < fed->cfg->nclusters; i++)
        if (strcmp(fed->cfg->clusters[i].name, name) == 0)
            return &fed->cfg->clusters[i];
    return NULL;
}

/* Builds the cache item of write w's answer obj; false when it cannot be written through. */
static bool item_of(const fg_fed_t *fed, const fg_fed_write_t *w, const json_t *obj, item_t *x) {
    memset(x, 0, sizeof *x);
    const json_t *meta = json_object_get(obj, "metadata");
    const char *k8s_kind = json_string_value(json_object_get(obj, "kind")),
               *api = json_string_value(json_object_get(obj, "apiVersion")),
               *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    const fg_cluster_conf_t *cc = cluster_conf(fed, w->cluster);
    fg_kind_t kind;
    if (cc == NULL || k8s_kind == NULL || api == NULL || rv == NULL ||
        fg_kube_kind_of(k8s_kind, api, &kind) != FG_OK)
        return false;
    const fg_kube_kind_info_t *ki = fg_kube_kind_info(kind);
    fg_kube_origin_t origin = {cc->name, cc->zone};
    char err[200];
    if (w->method == FG_KUBE_DELETE && json_object_get(meta, "deletionTimestamp") == NULL)
        return false; /* removed: the watch removes it */
    if (fg_kube_translate(kind, obj, &origin, &x->t, err, sizeof err) != FG_OK)
        return false;
    x->it = (fg_cache_through_t){
        .kind = ki->name,
        .cluster = cc->name,
        .resource = ki->resource,
        .scope = ki->namespaced ? json_string_value(json_object_get(x->t, "project")) : "_",
        .name = json_string_value(json_object_get(x->t, "name")),
        .app = kind == FG_KIND_POD ? json_string_value(json_object_get(x->t, "app")) : NULL,
        .rv = json_string_value(json_object_get(x->t, "version")),
    };
    if (x->it.scope == NULL || x->it.name == NULL || x->it.rv == NULL)
        return false;
    x->text = fg_json_dumps(x->t, NULL);
    x->it.object = x->text;
    return true;
}

static void item_clear(item_t *x) {
    json_decref(x->t);
    free(x->text);
    memset(x, 0, sizeof *x);
}

item_t *fed_item_new(const fg_fed_t *fed, const fg_fed_write_t *w, const json_t *obj) {
    item_t *x = fg_xcalloc(1, sizeof *x);
    if (item_of(fed, w, obj, x))
        return x;
    fed_item_free(x);
    return NULL;
}

void fed_item_free(item_t *x) {
    if (x == NULL)
        return;
    item_clear(x);
    free(x);
}

void fg_fed_write_through(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                          size_t n, bool *shown) {
    fg_fed_write_through_keep(fed, w, out, n, shown, NULL);
}

struct fg_fed_through {
    item_t items[FG_FED_MAX_CLUSTERS];
    fg_cache_through_t its[FG_FED_MAX_CLUSTERS];
    size_t idx[FG_FED_MAX_CLUSTERS], k; /* items[j] is write idx[j]'s */
    fg_cache_through_pending_t *pending;
};

fg_fed_through_t *fg_fed_write_through_begin(fg_fed_t *fed, const fg_fed_write_t *w,
                                             const fg_fed_outcome_t *out, size_t n,
                                             const bool *only, json_t **objs) {
    fg_fed_through_t *t = fg_xcalloc(1, sizeof *t);
    for (size_t i = 0; i < n && t->k < FG_FED_MAX_CLUSTERS; i++) {
        if ((only && !only[i]) || out[i].outcome != FG_FED_APPLIED || out[i].object == NULL)
            continue;
        item_t *x = &t->items[t->k];
        if (out[i].item != NULL) { /* translated as the answer came */
            *x = *out[i].item;
            json_incref(x->t);
            x->text = fg_xstrdup(x->text);
            x->it.object = x->text;
        } else if (!item_of(fed, &w[i], out[i].object, x)) {
            item_clear(x);
            continue;
        }
        if (objs)
            objs[i] = json_incref(x->t);
        t->its[t->k] = x->it;
        t->idx[t->k++] = i;
    }
    t->pending = fg_cache_write_through_begin(fed->redis, t->its, t->k);
    return t;
}

void fg_fed_write_through_end(fg_fed_through_t *t, bool *shown, json_t **objs) {
    if (t == NULL)
        return;
    bool ok[FG_FED_MAX_CLUSTERS];
    bool sent = fg_cache_write_through_end(t->pending, ok) == FG_OK;
    for (size_t j = 0; j < t->k; j++) {
        size_t i = t->idx[j];
        shown[i] = sent && ok[j];
        if (objs && !shown[i]) { /* not what the cache shows: the caller reads it back */
            json_decref(objs[i]);
            objs[i] = NULL;
        }
        item_clear(&t->items[j]);
    }
    free(t);
}

void fg_fed_write_through_keep(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                               size_t n, bool *shown, json_t **objs) {
    for (size_t i = 0; i < n; i++) {
        shown[i] = false;
        if (objs)
            objs[i] = NULL;
    }
    fg_fed_write_through_end(fg_fed_write_through_begin(fed, w, out, n, NULL, objs), shown, objs);
}
