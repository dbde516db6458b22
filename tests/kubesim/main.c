/* main: kubesim's flags, its JSON config, start-up and shutdown.
 *
 *   kubesim --clusters N --base-port P [--token T] [--tls-dir DIR] [--config FILE.json]
 *           [--history N] [--bookmark-interval-ms MS]
 *
 * Config file: {"clusters":[{"name","region","zone","port","token"}...], "history": N,
 * "bookmarkIntervalMs": MS}; flags given on the command line win over the file's globals. Prints
 * one line per cluster when it listens, then waits for SIGTERM/SIGINT and stops cleanly. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"
#include "ks_server.h"
#include "ks_tls.h"

#define MAX_CLUSTERS 64
#define CONFIG_MAX   (1024 * 1024)

typedef struct {
    int64_t nclusters;
    int64_t base_port;
    const char *token;
    const char *tls_dir;
    const char *config;
    int64_t history;
    int64_t bookmark_ms;
} opts_t;

static void usage(FILE *f) {
    fprintf(f, "usage: kubesim --clusters N --base-port P [--token T] [--tls-dir DIR]\n"
               "               [--config FILE.json] [--history N] [--bookmark-interval-ms MS]\n");
}

static int int_flag(const char *name, const char *v, int64_t min, int64_t max, int64_t *out) {
    if (v == NULL || fg_parse_int64(v, strlen(v), min, max, out) != FG_OK) {
        fprintf(stderr, "kubesim: %s: must be an integer in [%lld, %lld] (got \"%s\")\n", name,
                (long long)min, (long long)max, v ? v : "");
        return FG_EINVAL;
    }
    return FG_OK;
}

static int parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = FG_OK;
        if (strcmp(a, "--clusters") == 0)
            rc = int_flag(a, v, 1, MAX_CLUSTERS, &o->nclusters);
        else if (strcmp(a, "--base-port") == 0)
            rc = int_flag(a, v, 1, 65535, &o->base_port);
        else if (strcmp(a, "--history") == 0)
            rc = int_flag(a, v, 1, 10000000, &o->history);
        else if (strcmp(a, "--bookmark-interval-ms") == 0)
            rc = int_flag(a, v, 1, 3600000, &o->bookmark_ms);
        else if (strcmp(a, "--token") == 0 && v != NULL)
            o->token = v;
        else if (strcmp(a, "--tls-dir") == 0 && v != NULL)
            o->tls_dir = v;
        else if (strcmp(a, "--config") == 0 && v != NULL)
            o->config = v;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "kubesim: unknown or incomplete flag \"%s\"\n", a);
            usage(stderr);
            return FG_EINVAL;
        }
        if (rc != FG_OK)
            return rc;
        i++;
    }
    return FG_OK;
}

static const char *str_or(json_t *o, const char *key, const char *dflt) {
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? v : dflt;
}

/* Builds the clusters from the config file. Errors name the key: "FILE: clusters[1].port: ...". */
static int clusters_from_config(const opts_t *o, ks_cluster_t **cl, size_t *n) {
    char *text = NULL, err[160];
    size_t len = 0;
    json_t *root = NULL;
    int rc = FG_EINVAL;
    if (fg_read_file(o->config, CONFIG_MAX, &text, &len) != FG_OK) {
        fprintf(stderr, "kubesim: %s: cannot read\n", o->config);
        goto out;
    }
    if (fg_json_load(text, len, &root, err, sizeof(err)) != FG_OK) {
        fprintf(stderr, "kubesim: %s: %s\n", o->config, err);
        goto out;
    }
    json_t *arr = json_object_get(root, "clusters");
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > MAX_CLUSTERS) {
        fprintf(stderr, "kubesim: %s: clusters: must be a non-empty array of at most %d\n",
                o->config, MAX_CLUSTERS);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *port = json_object_get(e, "port");
        if (name == NULL || !fg_is_dns1123_label(name, strlen(name))) {
            fprintf(stderr, "kubesim: %s: clusters[%zu].name: not a DNS-1123 label\n", o->config,
                    i);
            goto out;
        }
        if (!json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535) {
            fprintf(stderr, "kubesim: %s: clusters[%zu].port: must be an integer in [1, 65535]\n",
                    o->config, i);
            goto out;
        }
        ks_cluster_new(name, str_or(e, "region", "region-1"), str_or(e, "zone", "zone-a"),
                       str_or(e, "token", o->token), (uint16_t)json_integer_value(port),
                       (size_t)o->history, o->bookmark_ms, &cl[i]);
        *n = i + 1;
    }
    rc = FG_OK;
out:
    free(text);
    json_decref(root);
    return rc;
}

int main(int argc, char **argv) {
    opts_t o = {.history = 10000, .bookmark_ms = 60000};
    ks_cluster_t *clusters[MAX_CLUSTERS] = {0};
    ks_server_t *servers[MAX_CLUSTERS] = {0};
    size_t n = 0;
    ks_tls_t tls = {0};
    char tmpdir[] = "/tmp/kubesim-tls-XXXXXX";
    int rc = 1;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* before any thread, so only sigwait sees them */
    signal(SIGPIPE, SIG_IGN);
    if (parse_args(argc, argv, &o) != FG_OK)
        goto out;
    if (o.config == NULL && (o.nclusters == 0 || o.base_port == 0)) {
        usage(stderr);
        goto out;
    }
    if (o.tls_dir == NULL) {
        if (mkdtemp(tmpdir) == NULL) {
            fprintf(stderr, "kubesim: cannot create a TLS directory under /tmp\n");
            goto out;
        }
        o.tls_dir = tmpdir;
    }
    if (ks_tls_setup(o.tls_dir, &tls) != FG_OK) {
        fprintf(stderr, "kubesim: %s: cannot load or create ca.crt/server.crt/server.key\n",
                o.tls_dir);
        goto out;
    }
    if (o.config != NULL) {
        if (clusters_from_config(&o, clusters, &n) != FG_OK)
            goto out;
    } else {
        for (int64_t i = 0; i < o.nclusters; i++) {
            char name[32], zone[32];
            snprintf(name, sizeof(name), "cluster-%lld", (long long)i + 1);
            snprintf(zone, sizeof(zone), "zone-%c", (char)('a' + i % 26));
            if (o.base_port + i > 65535) {
                fprintf(stderr, "kubesim: --base-port + --clusters goes past port 65535\n");
                goto out;
            }
            ks_cluster_new(name, "region-1", zone, o.token, (uint16_t)(o.base_port + i),
                           (size_t)o.history, o.bookmark_ms, &clusters[n++]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ks_server_start(clusters[i], tls.cert_pem, tls.key_pem, &servers[i]) != FG_OK) {
            fprintf(stderr, "kubesim: %s: cannot listen on 127.0.0.1:%u\n", clusters[i]->name,
                    (unsigned)clusters[i]->port);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++)
        printf("cluster %s region %s zone %s url https://127.0.0.1:%u ca %s/ca.crt\n",
               clusters[i]->name, clusters[i]->region, clusters[i]->zone,
               (unsigned)clusters[i]->port, o.tls_dir);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    rc = 0;
out:
    for (size_t i = 0; i < n; i++) {
        clusters[i]->stopping = 1;
        ks_store_close(clusters[i]->store);
    }
    for (size_t i = 0; i < n; i++)
        ks_server_stop(servers[i]);
    for (size_t i = 0; i < n; i++)
        ks_cluster_free(clusters[i]);
    ks_tls_free(&tls);
    return rc;
}
