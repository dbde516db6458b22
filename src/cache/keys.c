/* cache/keys.c: the Redis key schema (cache/SCHEMA.md section 2). Every key fleetgate reads or
 * writes is built by one function here; nothing else in src/ spells a key. The Lua scripts of
 * cache/ compute the keys they derive (fg:a, fg:ax) from the ones they are given. */
#include "fleetgate/cache.h"

#include <string.h>

/* Joins prefix and the parts with ':' into k (cut at FG_CACHE_KEY_MAX - 1 bytes). */
static const char *join(fg_cache_key_t *k, const char *prefix, size_t nparts,
                        const char *const *parts) {
    size_t used = 0, cap = sizeof k->s - 1;
    for (size_t i = 0; i <= nparts; i++) {
        const char *p = i == 0 ? prefix : parts[i - 1];
        size_t n = strlen(p);
        if (i > 0 && used < cap)
            k->s[used++] = ':';
        if (n > cap - used)
            n = cap - used;
        memcpy(k->s + used, p, n);
        used += n;
    }
    k->s[used] = '\0';
    return k->s;
}

const char *fg_cache_key_objects(fg_cache_key_t *k, const char *kind, const char *cluster,
                                 const char *scope) {
    const char *parts[] = {kind, cluster, scope};
    return join(k, "fg:o", 3, parts);
}

const char *fg_cache_key_objects_prefix(fg_cache_key_t *k, const char *kind) {
    const char *parts[] = {kind, ""}; /* the trailing ':' keeps "pod" from matching "pods" */
    return join(k, "fg:o", 2, parts);
}

const char *fg_cache_key_index(fg_cache_key_t *k, const char *kind, const char *cluster,
                               const char *scope) {
    const char *parts[] = {kind, cluster, scope};
    return join(k, "fg:i", 3, parts);
}

const char *fg_cache_key_scopes(fg_cache_key_t *k, const char *kind, const char *cluster) {
    const char *parts[] = {kind, cluster};
    return join(k, "fg:s", 2, parts);
}

const char *fg_cache_key_cluster(fg_cache_key_t *k, const char *cluster) {
    return join(k, "fg:cluster", 1, &cluster);
}

const char *fg_cache_key_sync(fg_cache_key_t *k, const char *cluster, const char *resource) {
    const char *parts[] = {cluster, resource};
    return join(k, "fg:sync", 2, parts);
}

const char *fg_cache_key_rv(fg_cache_key_t *k, const char *cluster, const char *resource) {
    const char *parts[] = {cluster, resource};
    return join(k, "fg:rv", 2, parts);
}

const char *fg_cache_key_lease(fg_cache_key_t *k, const char *cluster, const char *resource) {
    const char *parts[] = {cluster, resource};
    return join(k, "fg:lease", 2, parts);
}

const char *fg_cache_key_relist(fg_cache_key_t *k, const char *cluster, const char *resource,
                                const char *nonce) {
    const char *parts[] = {cluster, resource, nonce, ""}; /* sub-keys follow the last ':' */
    return join(k, "fg:t", 4, parts);
}

const char *fg_cache_key_rate_caller(fg_cache_key_t *k, char cls, const char *subject) {
    const char c[2] = {cls, '\0'};
    const char *parts[] = {c, "u", subject};
    return join(k, "fg:rl", 3, parts);
}

const char *fg_cache_key_rate_project(fg_cache_key_t *k, char cls, const char *project) {
    const char c[2] = {cls, '\0'};
    const char *parts[] = {c, "p", project};
    return join(k, "fg:rl", 3, parts);
}

const char *fg_cache_key_quota(fg_cache_key_t *k, const char *project, const char *tier) {
    const char *parts[] = {project, tier};
    return join(k, "fg:q", 2, parts);
}

const char *fg_cache_key_quota_usage(fg_cache_key_t *k, const char *project, const char *tier) {
    const char *parts[] = {project, tier};
    return join(k, "fg:qu", 2, parts);
}

const char *fg_cache_key_idem(fg_cache_key_t *k, const char *id) {
    const char *parts[] = {id};
    return join(k, "fg:idem", 1, parts);
}

const char *fg_cache_key_work_lease(fg_cache_key_t *k, const char *work) {
    return fg_cache_key_lease(k, "_", work); /* "_" is no cluster's name (DNS-1123) */
}

const char *fg_cache_key_events(fg_cache_key_t *k, const char *project) {
    const char *parts[] = {project};
    return join(k, "fg:ev", 1, parts);
}

const char *fg_cache_key_events_order(fg_cache_key_t *k, const char *project) {
    const char *parts[] = {project};
    return join(k, "fg:evx", 1, parts);
}

const char *fg_cache_key_history(fg_cache_key_t *k, const char *project) {
    const char *parts[] = {project};
    return join(k, "fg:hist", 1, parts);
}

const char *fg_cache_key_history_order(fg_cache_key_t *k, const char *project) {
    const char *parts[] = {project};
    return join(k, "fg:histx", 1, parts);
}

const char *fg_cache_key_changes(fg_cache_key_t *k, const char *project) {
    const char *parts[] = {project};
    return join(k, "fg:chg", 1, parts);
}

const char *fg_cache_key_preimage(fg_cache_key_t *k, const char *kind, const char *cluster,
                                  const char *scope) {
    const char *parts[] = {kind, cluster, scope};
    return join(k, "fg:pre", 3, parts);
}

const char *fg_cache_key_change_mark(fg_cache_key_t *k, const char *kind, const char *cluster,
                                     const char *scope, const char *name) {
    const char *parts[] = {kind, cluster, scope, name};
    return join(k, "fg:chgv", 4, parts);
}
