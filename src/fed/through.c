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

typedef struct {
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

void fg_fed_write_through(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                          size_t n, bool *shown) {
    fg_fed_write_through_keep(fed, w, out, n, shown, NULL);
}

void fg_fed_write_through_keep(fg_fed_t *fed, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                               size_t n, bool *shown, json_t **objs) {
    item_t items[FG_FED_MAX_CLUSTERS];
    fg_cache_through_t its[FG_FED_MAX_CLUSTERS];
    size_t idx[FG_FED_MAX_CLUSTERS], k = 0;
    bool ok[FG_FED_MAX_CLUSTERS];
    for (size_t i = 0; i < n; i++) {
        shown[i] = false;
        if (objs)
            objs[i] = NULL;
        if (k == FG_FED_MAX_CLUSTERS || out[i].outcome != FG_FED_APPLIED || out[i].object == NULL)
            continue;
        memset(&items[k], 0, sizeof items[k]);
        if (!item_of(fed, &w[i], out[i].object, &items[k])) {
            json_decref(items[k].t);
            free(items[k].text);
            continue;
        }
        its[k] = items[k].it;
        idx[k++] = i;
    }
    if (k > 0 && fg_cache_write_through(fed->redis, its, k, ok) == FG_OK)
        for (size_t j = 0; j < k; j++)
            shown[idx[j]] = ok[j];
    for (size_t j = 0; j < k; j++) {
        if (objs && shown[idx[j]])
            objs[idx[j]] = json_incref(items[j].t);
        json_decref(items[j].t);
        free(items[j].text);
    }
}
