/* cluster: one simulated member cluster: identity, token, store, and the objects a fresh
 * cluster starts with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

static const char *const BASE_NAMESPACES[] = {"default", "kube-system", "kube-public",
                                              "kube-node-lease", NULL};

static void seed_namespace(ks_cluster_t *c, const char *name) {
    char body[256];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\",\"labels\":{"
             "\"kubernetes.io/metadata.name\":\"%s\"}}}",
             name, name);
    ks_req_t req = {.method = "POST",
                    .path = "/api/v1/namespaces",
                    .body = body,
                    .body_len = strlen(body),
                    .content_type = "application/json",
                    .user_agent = "kube-apiserver/v1.32.0"};
    ks_resp_t resp;
    ks_target_t t = {.res = ks_resource_by_kind("Namespace")};
    memset(&resp, 0, sizeof(resp));
    ks_create(c, &req, &t, &resp);
    ks_resp_free(&resp);
}

int ks_cluster_new(const char *name, const char *region, const char *zone, const char *token,
                   uint16_t port, size_t history, int64_t bookmark_ms, ks_cluster_t **out) {
    ks_cluster_t *c = fg_xcalloc(1, sizeof(*c));
    if (ks_store_new(history, &c->store) != FG_OK) {
        free(c);
        return FG_EINVAL;
    }
    c->name = fg_xstrdup(name);
    c->region = fg_xstrdup(region);
    c->zone = fg_xstrdup(zone);
    c->token = token ? fg_xstrdup(token) : NULL;
    c->port = port;
    c->bookmark_ms = bookmark_ms;
    pthread_mutex_init(&c->admin_mu, NULL);
    pthread_mutex_init(&c->gc_mu, NULL);
    c->faults.error_status = 503;
    c->timing =
        (ks_timing_t){.start_ms = 0, .run_ms = 0, .heartbeat_ms = 10000, .log_lines_per_sec = 1.0};
    for (size_t i = 0; BASE_NAMESPACES[i] != NULL; i++)
        seed_namespace(c, BASE_NAMESPACES[i]);
    *out = c;
    return FG_OK;
}

void ks_cluster_free(ks_cluster_t *c) {
    if (c == NULL)
        return;
    ks_churn_stop(c);
    ks_ctrl_stop(c);
    ks_gc_free(c);
    ks_store_free(c->store);
    pthread_mutex_destroy(&c->admin_mu);
    pthread_mutex_destroy(&c->gc_mu);
    free(c->name);
    free(c->region);
    free(c->zone);
    free(c->token);
    free(c);
}
