/* main: kubesim's flags, its JSON config, start-up and shutdown.
 *
 *   kubesim --clusters N --base-port P [--token T] [--tls-dir DIR] [--config FILE.json]
 *           [--history N] [--bookmark-interval-ms MS]
 *
 * Config file: {"clusters":[{"name","region","zone","port","token"}...], "history": N,
 * "bookmarkIntervalMs": MS}; flags given on the command line win over the file's globals. Prints
 * one line per cluster when it listens, then waits for SIGTERM/SIGINT and stops cleanly. */
#include <signal.h>
#include <stddef.h>
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
    int64_t seed_nodes;
    int64_t seed_pods;
    const char *seed_ns;
    int64_t nodes;
    int64_t node_cpu;
    int64_t node_memory_gi;
    int64_t node_gpus;
    int64_t pod_start_ms;
    int64_t job_run_ms;
    int64_t heartbeat_ms;
    int64_t log_lps;
    int64_t no_controllers;
    int64_t event_ttl_ms;
} opts_t;

/* Integer flags: name, range, target offset (a table, so a flag is one row). */
static const struct {
    const char *name;
    int64_t min, max;
    size_t off;
} INT_FLAGS[] = {
    {"--clusters", 1, MAX_CLUSTERS, offsetof(opts_t, nclusters)},
    {"--base-port", 1, 65535, offsetof(opts_t, base_port)},
    {"--history", 1, 10000000, offsetof(opts_t, history)},
    {"--bookmark-interval-ms", 1, 3600000, offsetof(opts_t, bookmark_ms)},
    {"--seed-nodes", 0, 100000, offsetof(opts_t, seed_nodes)},
    {"--seed-pods", 0, 2000000, offsetof(opts_t, seed_pods)},
    {"--nodes", 0, 5000, offsetof(opts_t, nodes)},
    {"--node-cpu", 1, 1024, offsetof(opts_t, node_cpu)},
    {"--node-memory-gi", 1, 16384, offsetof(opts_t, node_memory_gi)},
    {"--node-gpus", 0, 64, offsetof(opts_t, node_gpus)},
    {"--pod-start-ms", 0, 3600000, offsetof(opts_t, pod_start_ms)},
    {"--job-run-ms", 0, 86400000, offsetof(opts_t, job_run_ms)},
    {"--heartbeat-ms", 100, 3600000, offsetof(opts_t, heartbeat_ms)},
    {"--log-lines-per-second", 0, 10000, offsetof(opts_t, log_lps)},
    {"--no-controllers", 0, 1, offsetof(opts_t, no_controllers)},
    {"--event-ttl-ms", 1, 86400000, offsetof(opts_t, event_ttl_ms)},
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: kubesim --clusters N --base-port P [--token T] [--tls-dir DIR]\n"
            "               [--config FILE.json] [--history N] [--bookmark-interval-ms MS]\n"
            "               [--seed-nodes N] [--seed-pods M] [--seed-namespace NS]\n"
            "               [--nodes N] [--node-cpu CORES] [--node-memory-gi GI] [--node-gpus N]\n"
            "               [--pod-start-ms MS] [--job-run-ms MS] [--heartbeat-ms MS]\n"
            "               [--log-lines-per-second N] [--no-controllers 1]\n"
            "               [--event-ttl-ms MS]\n");
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
        bool known = false;
        for (size_t k = 0; k < sizeof(INT_FLAGS) / sizeof(INT_FLAGS[0]); k++) {
            if (strcmp(a, INT_FLAGS[k].name) == 0) {
                known = true;
                rc = int_flag(a, v, INT_FLAGS[k].min, INT_FLAGS[k].max,
                              (int64_t *)((char *)o + INT_FLAGS[k].off));
            }
        }
        if (known)
            ;
        else if (strcmp(a, "--seed-namespace") == 0 && v != NULL &&
                 fg_is_dns1123_label(v, strlen(v)))
            o->seed_ns = v;
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
/* Node shapes per cluster: the flags' shape unless the config's "nodes" object says otherwise. */
static ks_node_spec_t node_specs[MAX_CLUSTERS];
static char instance_types[MAX_CLUSTERS][64];

static const struct {
    const char *key;
    int64_t min, max;
    size_t off;
} NODE_KEYS[] = {
    {"count", 0, 5000, offsetof(ks_node_spec_t, count)},
    {"cpu", 1, 1024, offsetof(ks_node_spec_t, cpu_milli)},
    {"memoryGi", 1, 16384, offsetof(ks_node_spec_t, memory_bytes)},
    {"gpus", 0, 64, offsetof(ks_node_spec_t, gpus)},
};

/* Reads clusters[i].nodes into node_specs[i]; FG_EINVAL with a message naming the key. */
static int node_spec_from(const char *file, size_t i, json_t *nodes) {
    ks_node_spec_t *ns = &node_specs[i];
    if (nodes == NULL)
        return FG_OK;
    if (!json_is_object(nodes)) {
        fprintf(stderr, "kubesim: %s: clusters[%zu].nodes: must be an object\n", file, i);
        return FG_EINVAL;
    }
    for (size_t k = 0; k < sizeof(NODE_KEYS) / sizeof(NODE_KEYS[0]); k++) {
        json_t *v = json_object_get(nodes, NODE_KEYS[k].key);
        if (v == NULL)
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < NODE_KEYS[k].min ||
            json_integer_value(v) > NODE_KEYS[k].max) {
            fprintf(stderr,
                    "kubesim: %s: clusters[%zu].nodes.%s: must be an integer in [%lld, %lld]\n",
                    file, i, NODE_KEYS[k].key, (long long)NODE_KEYS[k].min,
                    (long long)NODE_KEYS[k].max);
            return FG_EINVAL;
        }
        *(int64_t *)((char *)ns + NODE_KEYS[k].off) = json_integer_value(v);
    }
    if (json_object_get(nodes, "cpu") != NULL)
        ns->cpu_milli *= 1000;
    if (json_object_get(nodes, "memoryGi") != NULL)
        ns->memory_bytes <<= 30;
    json_t *it = json_object_get(nodes, "instanceType");
    if (it != NULL) {
        const char *t = json_string_value(it);
        if (t == NULL || strlen(t) == 0 || strlen(t) >= sizeof(instance_types[i])) {
            fprintf(stderr,
                    "kubesim: %s: clusters[%zu].nodes.instanceType: must be a string of 1..63\n",
                    file, i);
            return FG_EINVAL;
        }
        snprintf(instance_types[i], sizeof(instance_types[i]), "%s", t);
        ns->instance_type = instance_types[i];
    }
    return FG_OK;
}

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
        if (node_spec_from(o->config, i, json_object_get(e, "nodes")) != FG_OK)
            goto out;
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
    opts_t o = {.history = 10000,
                .bookmark_ms = 60000,
                .nodes = 3,
                .node_cpu = 8,
                .node_memory_gi = 32,
                .pod_start_ms = 500,
                .job_run_ms = 2000,
                .heartbeat_ms = 10000,
                .log_lps = 1};
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
    for (size_t i = 0; i < MAX_CLUSTERS; i++)
        node_specs[i] = (ks_node_spec_t){.count = o.nodes,
                                         .cpu_milli = o.node_cpu * 1000,
                                         .memory_bytes = o.node_memory_gi << 30,
                                         .gpus = o.node_gpus,
                                         .max_pods = 110,
                                         .instance_type = "m5.2xlarge"};
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
    if (o.seed_pods > 0 && o.seed_nodes == 0) {
        fprintf(stderr, "kubesim: --seed-pods needs --seed-nodes (pods need nodes to run on)\n");
        goto out;
    }
    for (size_t i = 0; i < n && (o.seed_nodes > 0 || o.seed_pods > 0); i++) {
        uint64_t t0 = fg_now_ns();
        if (ks_seed(clusters[i], o.seed_ns ? o.seed_ns : "demo", o.seed_nodes, o.seed_pods) !=
            FG_OK) {
            fprintf(stderr, "kubesim: %s: seeding failed\n", clusters[i]->name);
            goto out;
        }
        fprintf(stderr, "kubesim: %s: seeded %lld nodes, %lld pods in %llu ms\n", clusters[i]->name,
                (long long)o.seed_nodes, (long long)o.seed_pods,
                (unsigned long long)((fg_now_ns() - t0) / 1000000ULL));
    }
    for (size_t i = 0; i < n; i++) {
        clusters[i]->timing = (ks_timing_t){.start_ms = o.pod_start_ms,
                                            .run_ms = o.job_run_ms,
                                            .heartbeat_ms = o.heartbeat_ms,
                                            .log_lines_per_sec = (double)o.log_lps,
                                            .event_ttl_ms = o.event_ttl_ms};
        if (!o.no_controllers && ks_ctrl_start(clusters[i], &node_specs[i]) != FG_OK) {
            fprintf(stderr, "kubesim: %s: cannot start the controllers\n", clusters[i]->name);
            goto out;
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
    ks_exec_kill_all(); /* their sessions end, so the upgraded connections close */
    for (size_t i = 0; i < n; i++) {
        ks_ctrl_stop(clusters[i]);
        ks_churn_stop(clusters[i]);
    }
    for (size_t i = 0; i < n; i++)
        ks_server_stop(servers[i]);
    for (size_t i = 0; i < n; i++)
        ks_cluster_free(clusters[i]);
    ks_tls_free(&tls);
    return rc;
}
