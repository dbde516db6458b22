/* core/live.c: the parts of the configuration that change while the daemon runs (SIGHUP).
 *
 * Owns the live snapshot: a whole fg_config_t (the running configuration with the new file's
 * sidecar catalogue and cluster labels and zones put in), reference counted and swapped under a
 * mutex, so a request in flight keeps the snapshot it took while new ones see the new. A reload
 * parses and validates the file whole with the same code as at start (fg_config_load_text);
 * a bad file changes nothing. Every other key that differs from the running configuration is
 * reported as needing a restart and not applied: the merged document is built from the running
 * one (kept as JSON), so what is not live can never slip in.
 */
#include "fleetgate/core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct fg_live {
    atomic_uint refs;
    fg_config_t *cfg; /* owned, unless borrowed (the start's, which main owns) */
    bool borrowed;
    uint64_t generation;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static fg_live_t *current; /* one reference held here */
static json_t *applied;    /* the running configuration as JSON (the file's, merged) */
static char *applied_path; /* the file a reload reads */

static void live_free(fg_live_t *l) {
    if (!l->borrowed)
        fg_config_free(l->cfg);
    free(l);
}

fg_live_t *fg_live_acquire(void) {
    pthread_mutex_lock(&mu);
    fg_live_t *l = current;
    if (l)
        atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&mu);
    return l;
}

void fg_live_release(fg_live_t *l) {
    if (l && atomic_fetch_sub(&l->refs, 1) == 1)
        live_free(l);
}

const fg_config_t *fg_live_config(const fg_live_t *l) {
    return l ? l->cfg : NULL;
}

uint64_t fg_live_generation(const fg_live_t *l) {
    return l ? l->generation : 0;
}

const fg_cluster_conf_t *fg_live_cluster(const fg_live_t *l, const char *name) {
    for (size_t i = 0; l && i < l->cfg->nclusters; i++)
        if (strcmp(l->cfg->clusters[i].name, name) == 0)
            return &l->cfg->clusters[i];
    return NULL;
}

static void publish(fg_config_t *cfg, bool borrowed) {
    fg_live_t *l = fg_xcalloc(1, sizeof *l);
    atomic_init(&l->refs, 1);
    l->cfg = cfg;
    l->borrowed = borrowed;
    pthread_mutex_lock(&mu);
    fg_live_t *old = current;
    l->generation = old ? old->generation + 1 : 1;
    current = l;
    pthread_mutex_unlock(&mu);
    fg_live_release(old);
}

static json_t *read_json(const char *path, fg_buf_t *errs) {
    char *text = NULL, jerr[256];
    size_t len;
    json_t *j = NULL;
    if (fg_read_file(path, 16u << 20, &text, &len) != FG_OK) {
        fg_buf_appendf(errs, "%s: cannot read the file\n", path);
        return NULL;
    }
    if (fg_json_load(text, len, &j, jerr, sizeof jerr) != FG_OK)
        fg_buf_appendf(errs, "%s: %s\n", path, jerr);
    free(text);
    return j;
}

int fg_live_start(const char *path, const fg_config_t *boot, fg_buf_t *errs) {
    json_t *j = read_json(path, errs);
    if (j == NULL)
        return FG_EINVAL;
    pthread_mutex_lock(&mu);
    json_decref(applied);
    applied = j;
    free(applied_path);
    applied_path = fg_xstrdup(path);
    pthread_mutex_unlock(&mu);
    publish((fg_config_t *)boot, true);
    return FG_OK;
}

void fg_live_stop(void) {
    pthread_mutex_lock(&mu);
    fg_live_t *l = current;
    current = NULL;
    json_decref(applied);
    applied = NULL;
    free(applied_path);
    applied_path = NULL;
    pthread_mutex_unlock(&mu);
    fg_live_release(l);
}

/* The cluster named name in a "clusters" array, or NULL. */
static json_t *cluster_named(const json_t *clusters, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(clusters, i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, name) == 0)
            return c;
    }
    return NULL;
}

/* Sets key of dst to src's (removes it when src has none); true when it changed. */
static bool take_key(json_t *dst, const json_t *src, const char *key) {
    json_t *want = json_object_get(src, key), *have = json_object_get(dst, key);
    if (json_equal(want, have) || (want == NULL && have == NULL))
        return false;
    if (want)
        json_object_set(dst, key, want);
    else
        json_object_del(dst, key);
    return true;
}

/* The live parts of next put into a copy of run; what changed said in changed. */
static json_t *merge_live(const json_t *run, const json_t *next, fg_buf_t *changed) {
    json_t *m = json_deep_copy(run);
    if (take_key(m, next, "sidecars"))
        fg_buf_appendf(changed, "%ssidecars", changed->len ? ", " : "");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(m, "clusters"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const json_t *nc = name ? cluster_named(json_object_get(next, "clusters"), name) : NULL;
        if (nc == NULL)
            continue; /* a removed cluster needs a restart: the comparison below says so */
        static const char *const keys[] = {"labels", "zone"};
        for (size_t k = 0; k < 2; k++)
            if (take_key(c, nc, keys[k]))
                fg_buf_appendf(changed, "%sclusters[%s].%s", changed->len ? ", " : "", name,
                               keys[k]);
    }
    return m;
}

/* Every top-level key (and cluster) whose value in next differs from merged: not applied. */
static void not_live(const json_t *merged, const json_t *next, fg_buf_t *out) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)next, key, v) {
        if (strcmp(key, "clusters") == 0 && json_is_array(v)) {
            size_t i;
            json_t *c;
            json_array_foreach(v, i, c) {
                const char *name = json_string_value(json_object_get(c, "name"));
                const json_t *mc =
                    name ? cluster_named(json_object_get(merged, "clusters"), name) : NULL;
                if (!json_equal(c, (json_t *)mc))
                    fg_buf_appendf(out, "%sclusters[%s]", out->len ? ", " : "", name ? name : "?");
            }
            if (json_array_size(v) != json_array_size(json_object_get(merged, "clusters")))
                fg_buf_appendf(out, "%sclusters (added or removed)", out->len ? ", " : "");
        } else if (!json_equal(v, json_object_get(merged, key))) {
            fg_buf_appendf(out, "%s%s", out->len ? ", " : "", key);
        }
    }
    json_object_foreach((json_t *)merged, key, v) {
        if (json_object_get(next, key) == NULL)
            fg_buf_appendf(out, "%s%s", out->len ? ", " : "", key);
    }
}

int fg_live_reload(fg_buf_t *errs, fg_buf_t *applied_out, fg_buf_t *restart_out) {
    pthread_mutex_lock(&mu);
    char *path = applied_path ? fg_xstrdup(applied_path) : NULL;
    json_t *run = json_incref(applied);
    pthread_mutex_unlock(&mu);
    int rc = FG_EINVAL;
    fg_config_t *whole = NULL, *merged_cfg = NULL;
    json_t *next = NULL, *merged = NULL;
    char *text = NULL;
    size_t len;
    if (path == NULL || run == NULL) {
        fg_buf_appendf(errs, "no configuration file to read again\n");
        goto out;
    }
    /* the whole file, validated as at start: a bad file changes nothing */
    if (fg_read_file(path, 16u << 20, &text, &len) != FG_OK) {
        fg_buf_appendf(errs, "%s: cannot read the file\n", path);
        goto out;
    }
    if (fg_config_load_text(path, text, len, &whole, errs) != FG_OK)
        goto out;
    next = read_json(path, errs);
    if (next == NULL)
        goto out;
    merged = merge_live(run, next, applied_out);
    not_live(merged, next, restart_out);
    char *mtext = fg_json_dumps(merged, NULL);
    rc = fg_config_load_text(path, mtext, strlen(mtext), &merged_cfg, errs);
    free(mtext);
    if (rc != FG_OK)
        goto out;
    if (applied_out->len > 0) {
        pthread_mutex_lock(&mu);
        json_decref(applied);
        applied = json_incref(merged);
        pthread_mutex_unlock(&mu);
        publish(merged_cfg, false);
        merged_cfg = NULL;
    }
out:
    fg_config_free(whole);
    fg_config_free(merged_cfg);
    json_decref(next);
    json_decref(merged);
    json_decref(run);
    free(text);
    free(path);
    return rc;
}
