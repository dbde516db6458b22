/* fed/fed_internal.h: what the files of fed/ share; not part of any public surface. */
#ifndef FLEETGATE_FED_INTERNAL_H
#define FLEETGATE_FED_INTERNAL_H

#include "fleetgate/fed.h"

#include <pthread.h>

#define FED_CONNS_IDLE_MAX 16 /* about one per request thread writing at once */

struct fg_fed {
    const fg_config_t *cfg;
    struct fg_redis *redis;
    int64_t max_age_ms;
    pthread_mutex_t mu; /* guards cur and its replacement, and the refresher's flags */
    fg_fed_registry_t *cur;
    /* the refresher (registry.c): reads the next snapshot in the background once the current
     * one is past 3/4 of its max age, so no request waits for a scan while traffic keeps it in
     * use */
    pthread_t refresher;
    bool refresher_started, refresh_wanted, stopping;
    pthread_cond_t refresh_cv;
    /* the write path's Kubernetes clients, in configuration order; thread-safe, set at start */
    fg_kube_client_t *clients[FG_FED_MAX_CLUSTERS];
    size_t nclients;
    /* idle connection sets of the fan-out (fanout.c): a write takes one, so its requests go
     * over connections an earlier write opened (no TCP or TLS set-up), and gives it back */
    pthread_mutex_t conns_mu;
    fg_kube_conns_t *conns[FED_CONNS_IDLE_MAX];
    size_t nconns;
};

/* The client of a configured cluster, or NULL. */
fg_kube_client_t *fed_client(const fg_fed_t *fed, const char *cluster);

/* fed/through.c: write w's answer obj as the cache would hold it (the item a write-through
 * stores), or NULL when the cache would not show it; free with fed_item_free (NULL is fine). */
struct fg_fed_item *fed_item_new(const fg_fed_t *fed, const fg_fed_write_t *w, const json_t *obj);
void fed_item_free(struct fg_fed_item *x);

#endif
