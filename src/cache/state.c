/* cache/state.c: the meaning of the state hashes the informers write (fg:cluster and fg:sync,
 * cache/SCHEMA.md section 2). Readers (readiness, the clusters API, every list and get) go
 * through these functions, so what "Stale" or "ready" means is decided in one place. */
#include "fleetgate/cache.h"

#include <stdio.h>
#include <string.h>

static const char *const sync_names[] = {
    [FG_SYNC_NONE] = "",           [FG_SYNC_SYNCING] = "Syncing",
    [FG_SYNC_SYNCED] = "Synced",   [FG_SYNC_RELISTING] = "Relisting",
    [FG_SYNC_LAGGING] = "Lagging",
};

static const char *const freshness_names[] = {
    [FG_FRESH_CURRENT] = "Current",
    [FG_FRESH_STALE] = "Stale",
    [FG_FRESH_MISSING] = "Missing",
};

/* The value of field in an HGETALL reply, copied into out ("" when absent). */
static const char *hfield(const fg_redis_reply_t *h, const char *field, char *out, size_t outlen) {
    size_t flen = strlen(field);
    out[0] = '\0';
    for (size_t i = 0; i + 1 < fg_redis_reply_len(h); i += 2) {
        size_t klen, vlen;
        const char *k = fg_redis_reply_str(fg_redis_reply_at(h, i), &klen);
        const char *v = fg_redis_reply_str(fg_redis_reply_at(h, i + 1), &vlen);
        if (k && v && klen == flen && memcmp(k, field, klen) == 0) {
            snprintf(out, outlen, "%.*s", (int)vlen, v);
            break;
        }
    }
    return out;
}

/* A non-negative integer field; 0 when absent or not a number. */
static int64_t hfield_int(const fg_redis_reply_t *h, const char *field) {
    char v[32];
    int64_t n = 0;
    hfield(h, field, v, sizeof v);
    if (v[0] && fg_parse_int64(v, strlen(v), 0, INT64_MAX, &n) != FG_OK)
        n = 0;
    return n;
}

void fg_cache_cluster_read(const fg_redis_reply_t *hash, fg_cache_cluster_t *out) {
    char health[32];
    memset(out, 0, sizeof *out);
    if (hash == NULL || fg_redis_reply_len(hash) == 0)
        return; /* FG_HEALTH_UNKNOWN */
    hfield(hash, "health", health, sizeof health);
    /* Only a failed request makes a cluster Unreachable; any other word is a contact. */
    out->health = strcmp(health, "Unreachable") == 0 ? FG_HEALTH_UNREACHABLE : FG_HEALTH_HEALTHY;
    out->last_contact_ms = hfield_int(hash, "lastContactMs");
    hfield(hash, "lastError", out->last_error, sizeof out->last_error);
}

void fg_cache_sync_read(const fg_redis_reply_t *hash, fg_cache_sync_t *out) {
    char state[32];
    memset(out, 0, sizeof *out);
    if (hash == NULL || fg_redis_reply_len(hash) == 0)
        return;
    out->present = true;
    hfield(hash, "state", state, sizeof state);
    for (size_t i = 1; i < sizeof sync_names / sizeof sync_names[0]; i++)
        if (strcmp(state, sync_names[i]) == 0)
            out->state = (fg_sync_state_t)i;
    hfield(hash, "rv", out->rv, sizeof out->rv);
    out->objects = hfield_int(hash, "objects");
    out->last_event_ms = hfield_int(hash, "lastEventMs");
    out->last_sync_ms = hfield_int(hash, "lastSyncMs");
    hfield(hash, "lastError", out->last_error, sizeof out->last_error);
}

const char *fg_cache_sync_state_name(fg_sync_state_t s) {
    return sync_names[s];
}

bool fg_cache_sync_done_once(const fg_cache_sync_t *s) {
    return s->state == FG_SYNC_SYNCED || s->state == FG_SYNC_LAGGING ||
           (s->state == FG_SYNC_RELISTING && s->last_sync_ms != 0);
}

const char *fg_cache_freshness_name(fg_freshness_t s) {
    return freshness_names[s];
}

/* ": <error>" when there is one. */
static void unreachable_reason(const fg_cache_cluster_t *cl, const char *lead, char *out,
                               size_t outlen) {
    snprintf(out, outlen, "%sunreachable%s%.199s", lead, cl->last_error[0] ? ": " : "",
             cl->last_error);
}

void fg_cache_freshness_judge(const fg_cache_cluster_t *cl, const fg_cache_sync_t *sync,
                              fg_cache_freshness_t *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->rv, sizeof out->rv, "%s", sync->rv);
    out->applied_ms =
        sync->last_event_ms > sync->last_sync_ms ? sync->last_event_ms : sync->last_sync_ms;
    if (!sync->present || (sync->state == FG_SYNC_SYNCING && sync->last_sync_ms == 0)) {
        out->state = FG_FRESH_MISSING;
        out->rv[0] = '\0';
        if (cl->health == FG_HEALTH_UNREACHABLE)
            unreachable_reason(cl, "it has not been synced: ", out->reason, sizeof out->reason);
        else
            snprintf(out->reason, sizeof out->reason, "%s",
                     sync->present ? "its first sync is in progress" : "it has not been synced");
        return;
    }
    if (cl->health == FG_HEALTH_UNREACHABLE) {
        out->state = FG_FRESH_STALE;
        out->stale_since_ms = cl->last_contact_ms ? cl->last_contact_ms : out->applied_ms;
        unreachable_reason(cl, "", out->reason, sizeof out->reason);
        return;
    }
    if (sync->state != FG_SYNC_SYNCED) {
        /* The watch is not live (failed and backing off: Lagging; a relist running: Relisting;
         * or a state this build does not know), so what is cached is the cluster as of the last
         * change applied, even while the cluster still answers some requests. */
        out->state = FG_FRESH_STALE;
        out->stale_since_ms = out->applied_ms;
        snprintf(out->reason, sizeof out->reason, "its watch is not live (%s)%s%.199s",
                 sync->state == FG_SYNC_NONE ? "unknown state" : sync_names[sync->state],
                 sync->last_error[0] ? ": " : "", sync->last_error);
        return;
    }
    out->state = FG_FRESH_CURRENT;
}
