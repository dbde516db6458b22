/* main.c: flags, configuration, wiring, signals, graceful drain and exit.
 *
 * Signals are blocked in every thread and taken synchronously here with sigtimedwait, so no
 * handler runs in async-signal context. SIGTERM or SIGINT starts a drain: stop accepting, let
 * admitted requests finish within limits.drain_timeout_s, answer newcomers 503, exit 0. A second
 * one exits at once (status 1). SIGHUP re-reads the verification keys (PEM and JWKS) and reopens
 * the audit log, and re-reads the configuration file: its live parts (the sidecar catalogue, the
 * clusters' labels and zones) are applied, the rest needs a restart (core/live.c); requests in
 * flight finish with the keys and the configuration snapshot they started with.
 */
#include "fleetgate/api.h"
#include "fleetgate/stream.h"
#include "fleetgate/auth.h"
#include "fleetgate/cache.h"
#include "fleetgate/core.h"
#include "fleetgate/http.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FG_GIT_COMMIT
#define FG_GIT_COMMIT "unknown"
#endif

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

typedef struct {
    const char *config_path;
    const char *listen;
    bool check_only;
} args_t;

static void usage(FILE *f) {
    fprintf(f, "usage: fleetgate -c FILE [--listen HOST:PORT] [--check-config]\n"
               "       fleetgate --version | --help\n"
               "\n"
               "  -c, --config FILE   configuration (JSON; see README.md)\n"
               "  -l, --listen ADDR   listen on HOST:PORT instead of the configured address\n"
               "      --check-config  validate the configuration, print each problem, exit\n"
               "                      (0 valid, 2 invalid)\n"
               "  -V, --version       print the version and exit\n"
               "  -h, --help          print this help and exit\n");
}

/* Returns -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, args_t *a) {
    enum { OPT_CHECK = 256 };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"listen", required_argument, NULL, 'l'},
        {"check-config", no_argument, NULL, OPT_CHECK},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(a, 0, sizeof *a);
    for (;;) {
        c = getopt_long(argc, argv, "c:l:Vh", opts, NULL);
        if (c == -1)
            break;
        switch (c) {
            case 'c':
                a->config_path = optarg;
                break;
            case 'l':
                a->listen = optarg;
                break;
            case OPT_CHECK:
                a->check_only = true;
                break;
            case 'V':
                printf("fleetgate %s (%s)\n", FG_VERSION, FG_GIT_COMMIT);
                return 0;
            case 'h':
                usage(stdout);
                return 0;
            default:
                usage(stderr);
                return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fleetgate: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (a->config_path == NULL) {
        fprintf(stderr, "fleetgate: -c FILE is required\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    return -1;
}

/* Loads the configuration and applies --listen. Prints problems on stderr; EXIT_USAGE on any. */
static int load_config(const args_t *a, fg_config_t **out) {
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 20);
    fg_config_t *cfg = NULL;
    int rc = fg_config_load(a->config_path, &cfg, &errs);
    if (rc == FG_OK && a->listen) {
        char *host = NULL;
        uint16_t port;
        if (fg_parse_hostport(a->listen, &host, &port) != FG_OK) {
            fg_buf_appendf(&errs, "--listen: not HOST:PORT with a port from 1 to 65535 (got %s)\n",
                           a->listen);
            rc = FG_EINVAL;
        } else {
            free(cfg->listen_host);
            cfg->listen_host = host;
            cfg->listen_port = port;
        }
    }
    if (rc != FG_OK) {
        fputs(errs.data ? errs.data : "invalid configuration\n", stderr);
        fg_buf_free(&errs);
        fg_config_free(cfg);
        return EXIT_USAGE;
    }
    fg_buf_free(&errs);
    *out = cfg;
    return 0;
}

/* The keys of a configuration, parsed as the daemon would (for --check-config). */
static int check_keys(const fg_config_t *cfg, const char *path) {
    fg_buf_t errs;
    fg_keyset_t *ks = NULL;
    fg_buf_init(&errs, 1 << 16);
    int rc = fg_keyset_load(&ks, &cfg->auth, &errs);
    if (rc != FG_OK)
        fprintf(stderr, "%s", errs.data ? errs.data : "auth: the keys cannot be loaded\n");
    else
        printf("%s: %zu verification key(s)\n", path, fg_keyset_size(ks));
    fg_keyset_release(ks);
    fg_buf_free(&errs);
    return rc == FG_OK ? 0 : EXIT_USAGE;
}

/* SIGHUP's configuration part: the file is read and validated whole (core/live.c); the live
 * parts are applied, the rest is named as needing a restart. */
static void reload_config(void) {
    fg_buf_t errs, applied, restart;
    fg_buf_init(&errs, 1 << 16);
    fg_buf_init(&applied, 1 << 14);
    fg_buf_init(&restart, 1 << 14);
    if (fg_live_reload(&errs, &applied, &restart) != FG_OK) {
        /* one line: the problems, each "PATH: KEY: what is wrong" */
        for (size_t i = 0; errs.data && i + 1 < errs.len; i++)
            if (errs.data[i] == '\n')
                errs.data[i] = ';';
        fg_log(FG_LOG_ERROR, NULL, "SIGHUP: the configuration is not valid, nothing changed: %s",
               errs.data ? errs.data : "?");
    } else {
        fg_log(FG_LOG_INFO, NULL, "SIGHUP: configuration reloaded, applied: %s",
               applied.len ? applied.data : "nothing changed");
        if (restart.len)
            fg_log(FG_LOG_WARN, NULL, "SIGHUP: changed, needs a restart (not applied): %s",
                   restart.data);
    }
    fg_buf_free(&errs);
    fg_buf_free(&applied);
    fg_buf_free(&restart);
}

static void reload(fg_auth_t *auth) {
    reload_config();
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    if (fg_auth_reload(auth, &errs) == FG_OK)
        fg_log(FG_LOG_INFO, NULL, "SIGHUP: keys reloaded, audit log reopened");
    else
        fg_log(FG_LOG_ERROR, NULL, "SIGHUP: reload failed, the old keys stay: %s",
               errs.data ? errs.data : "?");
    fg_buf_free(&errs);
}

/* Waits for in-flight requests to finish, up to the deadline; a second signal cuts it short. */
static void drain(fg_http_server_t *srv, const sigset_t *sigs, int64_t timeout_s) {
    uint64_t deadline = fg_now_ns() + (uint64_t)timeout_s * 1000000000u;
    fg_http_server_begin_drain(srv);
    fg_log(FG_LOG_INFO, NULL, "draining: %u request(s) in flight, up to %llds",
           fg_http_server_in_flight(srv), (long long)timeout_s);
    while (fg_http_server_in_flight(srv) > 0 && fg_now_ns() < deadline) {
        struct timespec tick = {0, 20 * 1000000};
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            fg_log_flush(); /* the access lines of what was answered */
            fg_log(FG_LOG_WARN, NULL, "second signal: exiting now");
            _exit(EXIT_RUNTIME);
        }
    }
    if (fg_http_server_in_flight(srv) > 0)
        fg_log(FG_LOG_WARN, NULL, "drain timeout: %u request(s) cut",
               fg_http_server_in_flight(srv));
}

static void register_build_info(void) {
    static const char *const labels[] = {"version", "commit", NULL};
    fg_metric_t *m =
        fg_metrics_register("fleetgate_build_info", "The running build; the value is always 1.",
                            FG_METRIC_GAUGE, labels);
    const char *values[] = {FG_VERSION, FG_GIT_COMMIT};
    fg_metric_set(m, values, 1);
}

static void wipe_free(char *s) {
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

/* The TLS listener's certificate and key (tls.cert_file, tls.key_file) into opts, when set.
 * The texts are the caller's (the key wiped with wipe_free once the server has started). */
static int load_tls(const fg_config_t *cfg, fg_http_options_t *opts, char **cert, char **key) {
    size_t len;
    if (cfg->tls.cert_file == NULL)
        return FG_OK;
    if (fg_read_file(cfg->tls.cert_file, 1u << 20, cert, &len) != FG_OK ||
        fg_read_file(cfg->tls.key_file, 1u << 20, key, &len) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "tls: cannot read tls.cert_file or tls.key_file");
        return FG_EIO;
    }
    opts->tls_host = cfg->tls.listen_host;
    opts->tls_port = cfg->tls.listen_port;
    opts->tls_cert_pem = *cert;
    opts->tls_key_pem = *key;
    return FG_OK;
}

int main(int argc, char **argv) {
    args_t a;
    int status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;

    fg_config_t *cfg = NULL;
    status = load_config(&a, &cfg);
    if (status != 0)
        return status;
    if (a.check_only) {
        status = check_keys(cfg, a.config_path);
        if (status == 0)
            printf("%s: configuration is valid\n", a.config_path);
        fg_config_free(cfg);
        return status;
    }
    fg_log_level_t level;
    if (fg_log_level_parse(cfg->log_level, &level) == FG_OK)
        fg_log_set_level(level);
    {
        fg_buf_t lerrs;
        fg_buf_init(&lerrs, 1 << 16);
        if (fg_live_start(a.config_path, cfg, &lerrs) != FG_OK)
            fg_log(FG_LOG_WARN, NULL, "SIGHUP will not re-read the configuration: %s",
                   lerrs.data ? lerrs.data : "?");
        fg_buf_free(&lerrs);
    }

    /* Block the signals before any thread starts, so every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    fg_api_t *api = NULL;
    fg_http_server_t *srv = NULL;
    char *tls_cert = NULL, *tls_key = NULL;
    fg_redis_t *redis = NULL;
    fg_auth_t *auth = NULL;
    fg_informers_t *informers = NULL;
    fg_streams_t *streams = NULL;
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    status = EXIT_RUNTIME;
    register_build_info();
    if (fg_api_new(&api, cfg) != FG_OK)
        goto out;
    if (fg_redis_new(&redis, cfg->redis_url, (unsigned)cfg->workers,
                     (unsigned)cfg->rate.redis_timeout_ms) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "redis.url: cannot use it");
        goto out;
    }
    if (fg_auth_new(&auth, cfg, redis, &errs) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "auth: %s", errs.data ? errs.data : "cannot start");
        goto out;
    }
    fg_stream_limits_t slimits = {.buffer_bytes = (size_t)cfg->streams.buffer_kib << 10,
                                  .stall_timeout_s = (int)cfg->streams.stall_timeout_s};
    if (fg_streams_new(&streams, cfg, &slimits) != FG_OK)
        goto out;
    fg_api_set_streams(api, streams);
    size_t nroutes;
    const fg_route_t *routes = fg_api_routes(&nroutes);
    fg_http_options_t hopts = {
        .host = cfg->listen_host,
        .port = cfg->listen_port,
        .workers = (unsigned)cfg->workers,
        .max_body_bytes = (size_t)cfg->max_body_bytes,
        .max_connections = (unsigned)cfg->max_connections,
        .connection_timeout_s = (unsigned)cfg->connection_timeout_s,
        .header_timeout_s = (unsigned)cfg->header_timeout_s,
        .body_timeout_s = (unsigned)cfg->body_timeout_s,
        .max_connections_per_client = (unsigned)cfg->max_connections_per_client,
        .access_log = cfg->access_log,
        .app = api,
        .gate = fg_auth_gate,
        .seal = fg_auth_seal,
        .gate_ctx = auth,
        .cors_origins = (const char *const *)cfg->cors_allowed_origins,
        .ncors_origins = cfg->ncors_allowed_origins,
        .cors_max_age_s = (unsigned)cfg->cors_max_age_s,
    };
    if (load_tls(cfg, &hopts, &tls_cert, &tls_key) != FG_OK)
        goto out;
    int started = fg_http_server_start(&srv, &hopts, routes, nroutes);
    wipe_free(tls_key); /* MHD keeps its own copy */
    tls_key = NULL;
    if (started != FG_OK)
        goto out;
    fg_log(FG_LOG_INFO, NULL, "fleetgate %s listening on http://%s:%u (%u workers)", FG_VERSION,
           cfg->listen_host, (unsigned)fg_http_server_port(srv), (unsigned)cfg->workers);
    if (fg_http_server_tls_port(srv))
        fg_log(FG_LOG_INFO, NULL, "fleetgate listening on https://%s:%u", cfg->tls.listen_host,
               (unsigned)fg_http_server_tls_port(srv));
    /* The informers start after the server, so /healthz answers while the first sync runs. */
    if (cfg->cache.enabled && cfg->nclusters > 0 &&
        fg_informers_start(&informers, cfg, &errs) != FG_OK) {
        fg_log(FG_LOG_ERROR, NULL, "cache: %s", errs.data ? errs.data : "cannot start");
        goto out;
    }

    for (;;) {
        int sig;
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            fg_log_flush(); /* lines before the reload stay before its own */
            reload(auth);
            continue;
        }
        fg_log(FG_LOG_INFO, NULL, "%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
    }
    fg_streams_drain(streams); /* log follows end cleanly; the drain then sees them complete */
    drain(srv, &sigs, cfg->drain_timeout_s);
    status = 0;
out:
    fg_informers_stop(informers); /* releases the leases: another replica takes over at once */
    fg_http_server_free(srv);
    fg_streams_free(streams); /* after the server: its requests' last words reach the loop */
    fg_log_flush();           /* every access line of the drained requests, before "stopped" */
    fg_auth_free(auth);
    fg_redis_free(redis);
    fg_buf_free(&errs);
    free(tls_cert);
    wipe_free(tls_key);
    fg_api_free(api);
    fg_live_stop(); /* after every user of a snapshot; the first borrows cfg */
    fg_config_free(cfg);
    fg_metrics_reset();
    if (status == 0)
        fg_log(FG_LOG_INFO, NULL, "stopped");
    return status;
}
