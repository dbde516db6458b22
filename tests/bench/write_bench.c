/* tests/bench/write_bench.c: the latency of creating an app over three clusters through
 * fleetgate, against the same Deployment creates sent straight to kubesim (the ratio:
 * fleetgate's fan-out should cost under 1.5x one direct write, since the three go in parallel).
 *
 * Starts a private redis-server, kubesim with three clusters in three zones and the daemon
 * (informers on), makes a project with a quota, then per round: POST an app of 3 replicas
 * (Spread: one Deployment per cluster; a GET right after shows it) and DELETE it, the same
 * create with ?dryRun=true (everything but the writes), and, for reference, one Deployment
 * created straight in one cluster, and three created straight at once, one a cluster (curl
 * multi, as fleetgate sends them), each deleted again. The direct creates send the Deployments
 * fleetgate sent (read back from each cluster less what the server set: uid, resourceVersion,
 * creationTimestamp, generation, managedFields, status; kubesim's defaults stay), renamed, so
 * the reference carries the same spec, placement explanation and stamps. Then, as latency moves
 * with the machine's load, the CPU (user + system, from /proc) that fleetgate, kubesim and Redis
 * spend per create-and-delete each way, over a block of ROUNDS of each. Every client keeps its
 * connections (a real client or SDK does), so no side pays TCP or TLS set-up per request. Prints
 * p50/p99 of each and the ratios. Usage: write_bench [ROUNDS] (default 100); FG_BUILD names the
 * build dir. Not part of make test (make bench-writes). */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testredis.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint16_t port;
static char *admin;

/* One keep-alive connection to the daemon, as an SDK keeps one. */
static CURL *conn;

static size_t sink(char *p, size_t sz, size_t n, void *ud) {
    (void)p, (void)ud;
    return sz * n;
}

static long call(const char *method, const char *path, const char *body) {
    char url[256], *auth = fg_xasprintf("Authorization: Bearer %s", admin);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    curl_easy_reset(conn);
    curl_easy_setopt(conn, CURLOPT_URL, url);
    curl_easy_setopt(conn, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(conn, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(conn, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(conn, CURLOPT_TIMEOUT_MS, 10000L);
    if (body) {
        curl_easy_setopt(conn, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(conn, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    long s = -1;
    if (curl_easy_perform(conn) == CURLE_OK)
        curl_easy_getinfo(conn, CURLINFO_RESPONSE_CODE, &s);
    curl_slist_free_all(h);
    free(auth);
    return s;
}

/* The three creates (or deletes) straight to kubesim at once, one a cluster, over kept
 * connections; the number that did not answer want. */
static int direct3(tk_sim_t *ks, fg_kube_conns_t *kc, fg_kube_method_t m, const char *path,
                   json_t *const *bodies, long want) {
    fg_kube_call_t calls[3];
    for (int i = 0; i < 3; i++)
        calls[i] = (fg_kube_call_t){
            .client = ks->kc[i], .method = m, .path = path, .body = bodies ? bodies[i] : NULL};
    fg_kube_request_all_in(kc, calls, 3, 5000);
    int bad = 0;
    for (int i = 0; i < 3; i++)
        bad += calls[i].http_code != want;
    fg_kube_calls_clear(calls, 3);
    return bad;
}

/* CPU seconds (user + system) a process has used so far, from /proc; 0 when unknown. */
static double cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long fld[13] = {0};       /* fields 3..15 of proc(5): utime is 14, stime 15 */
    for (size_t k = 0; p && k < 13; k++) {
        while (*++p == ' ')
            ;
        fld[k] = k == 0 ? 0 : strtoul(p, NULL, 10);
        p = strchr(p, ' ');
    }
    if (p == NULL)
        return 0;
    return (double)(fld[11] + fld[12]) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU of the three processes so far, once what they were doing has settled. */
static void cpu_now(const pid_t *pids, double *out) {
    nanosleep(&(struct timespec){1, 0}, NULL); /* the watch events of the last writes */
    for (int i = 0; i < 3; i++)
        out[i] = cpu_s(pids[i]);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *ms, int n, double *p50, double *p99) {
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    *p50 = ms[n / 2];
    *p99 = ms[n * 99 / 100];
    printf("%-44s p50 %7.2f ms  p99 %7.2f ms  (n=%d)\n", what, ms[n / 2], ms[n * 99 / 100], n);
}

static tr_redis_t redis; /* the servers main starts, stopped by stop_servers */
static tj_keys_t keys;
static tk_sim_t ks;

/* Stops what main started (a bench that gives up early must not leave its servers running);
 * returns rc. */
static int stop_servers(pid_t d, int rc) {
    if (d > 0)
        th_daemon_stop(d, SIGTERM, 5000);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    return rc;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100;
    rounds = rounds < 2 ? 2 : rounds;
    fg_log_set_level(FG_LOG_ERROR);
    static const char *const extra[] = {"--nodes", "4", "--pod-start-ms", "0", NULL};
    if (tr_redis_start(&redis) != 0 || tj_keys_make(&keys) != 0 || tk_start(&ks, 3, extra) != 0) {
        fprintf(stderr, "write_bench: cannot start redis, keys or kubesim\n");
        return 1;
    }
    char cfg[8192], cl[3][512];
    for (int i = 0; i < 3; i++)
        snprintf(cl[i], sizeof cl[i],
                 "{\"name\": \"c%d\", \"zone\": \"zone-%d\", \"url\": \"%s\", \"token_file\": "
                 "\"%s\", \"ca_file\": \"%s\"}",
                 i, i, tk_url(&ks, i), ks.token_file, ks.ca_file);
    snprintf(cfg, sizeof cfg,
             "{\"workers\": 4, \"redis\": {\"url\": \"%s\"}, \"log\": {\"level\": \"error\", "
             "\"access_log\": false}, \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": "
             "\"/nonexistent\", \"clusters\": [%s, %s, %s], \"auth\": {\"issuer\": "
             "\"https://id.test\", \"audience\": \"fleetgate\", \"keys\": [{\"kid\": \"rsa1\", "
             "\"pem_file\": \"%s\", \"algs\": [\"RS256\"]}], \"audit_log\": \"/dev/null\"}, "
             "\"rate_limits\": {\"enabled\": false}}",
             redis.url, cl[0], cl[1], cl[2], keys.rsa_pub);
    pid_t d = th_daemon_start(cfg, &port, NULL);
    char claims[256];
    snprintf(claims, sizeof claims,
             "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"bench\", \"exp\": "
             "%ld, \"groups\": [\"fleetgate-admins\"]}",
             (long)time(NULL) + 3600);
    conn = curl_easy_init();
    admin = tj_sign("RS256", keys.rsa_priv, "rsa1", claims);
    for (int i = 0; i < 200 && call("GET", "/readyz", NULL) != 200; i++)
        nanosleep(&(struct timespec){0, 50000000L}, NULL);
    if (d <= 0 || call("POST", "/v1/projects",
                       "{\"name\": \"bench\", \"quotas\": {\"OnDemand\": {\"limits\": {\"pods\": "
                       "100000}}}}") != 201) {
        fprintf(stderr, "write_bench: the daemon or the project did not come up\n");
        return stop_servers(d, 1);
    }
    double *fg = calloc((size_t)rounds, sizeof *fg), *direct = calloc((size_t)rounds, sizeof *fg),
           *dry = calloc((size_t)rounds, sizeof *fg), *three = calloc((size_t)rounds, sizeof *fg);
    const char *app = "{\"name\": \"b\", \"spec\": {\"replicas\": 3, \"containers\": [{\"name\": "
                      "\"c\", \"image\": \"nginx:1\"}]}}";
    fg_kube_conns_t *kc = fg_kube_conns_new();
    const char *coll = "/apis/apps/v1/namespaces/bench/deployments",
               *one = "/apis/apps/v1/namespaces/bench/deployments/d";
    /* The reference's bodies: the Deployments of one create through fleetgate, as sent. */
    json_t *depj[3] = {NULL};
    char *dep[3] = {NULL};
    size_t dep_bytes = 0;
    int bad = call("POST", "/v1/projects/bench/apps", app) != 201;
    for (int i = 0; i < 3 && !bad; i++) {
        bad += tk_call(&ks, i, "GET", "/apis/apps/v1/namespaces/bench/deployments/b", NULL,
                       &depj[i]) != 200;
        json_t *meta = json_object_get(depj[i], "metadata");
        static const char *const server_set[] = {"uid", "resourceVersion", "creationTimestamp",
                                                 "generation", "managedFields"};
        for (size_t f = 0; f < sizeof server_set / sizeof server_set[0]; f++)
            json_object_del(meta, server_set[f]);
        json_object_del(depj[i], "status");
        json_object_set_new(meta, "name", json_string("d"));
        dep[i] = json_dumps(depj[i], JSON_COMPACT);
        dep_bytes += dep[i] ? strlen(dep[i]) : 0;
    }
    bad += call("DELETE", "/v1/projects/bench/apps/b", NULL) != 204;
    if (bad) {
        fprintf(stderr, "write_bench: the first create through fleetgate failed\n");
        return stop_servers(d, 1);
    }
    printf("direct creates send the Deployments fleetgate sent: %zu bytes each on average\n",
           dep_bytes / 3);
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = fg_now_ns();
        bad += call("POST", "/v1/projects/bench/apps?dryRun=true", app) != 200;
        dry[r] = (double)(fg_now_ns() - t0) / 1e6;
        t0 = fg_now_ns();
        bad += call("POST", "/v1/projects/bench/apps", app) != 201;
        fg[r] = (double)(fg_now_ns() - t0) / 1e6;
        bad += call("DELETE", "/v1/projects/bench/apps/b", NULL) != 204;
        t0 = fg_now_ns();
        bad += tk_call(&ks, r % 3, "POST", coll, dep[r % 3], NULL) != 201;
        direct[r] = (double)(fg_now_ns() - t0) / 1e6;
        bad += tk_call(&ks, r % 3, "DELETE", one, NULL, NULL) != 200;
        t0 = fg_now_ns();
        bad += direct3(&ks, kc, FG_KUBE_POST, coll, depj, 201);
        three[r] = (double)(fg_now_ns() - t0) / 1e6;
        bad += direct3(&ks, kc, FG_KUBE_DELETE, one, NULL, 200);
    }
    double p_fg, p_direct, p_dry, p_three, q_fg, q_direct, q_dry, q_three;
    report("the same with ?dryRun=true (no cluster write)", dry, rounds, &p_dry, &q_dry);
    report("create app over 3 clusters through fleetgate", fg, rounds, &p_fg, &q_fg);
    report("one Deployment create straight to kubesim", direct, rounds, &p_direct, &q_direct);
    report("3 creates straight to kubesim at once", three, rounds, &p_three, &q_three);
    printf("ratio (p50) fleetgate / one direct create: %.2f   / 3 direct at once: %.2f   "
           "errors: %d\n",
           p_fg / p_direct, p_fg / p_three, bad);
    printf("ratio (p99) fleetgate / one direct create: %.2f   / 3 direct at once: %.2f\n",
           q_fg / q_direct, q_fg / q_three);
    (void)q_dry;
    /* CPU per create-and-delete: a block through fleetgate, then a block straight */
    pid_t pids[3] = {d, ks.pid, redis.pid};
    double c0[3], c1[3], c2[3];
    cpu_now(pids, c0);
    for (int r = 0; r < rounds; r++) {
        bad += call("POST", "/v1/projects/bench/apps", app) != 201;
        bad += call("DELETE", "/v1/projects/bench/apps/b", NULL) != 204;
    }
    cpu_now(pids, c1);
    for (int r = 0; r < rounds; r++) {
        bad += direct3(&ks, kc, FG_KUBE_POST, coll, depj, 201);
        bad += direct3(&ks, kc, FG_KUBE_DELETE, one, NULL, 200);
    }
    cpu_now(pids, c2);
    printf("CPU per create + delete over 3 clusters (ms): through fleetgate: fleetgate %.2f, "
           "kubesim %.2f, redis %.2f; straight: fleetgate (its watches) %.2f, kubesim %.2f, "
           "redis %.2f   errors: %d\n",
           (c1[0] - c0[0]) * 1e3 / rounds, (c1[1] - c0[1]) * 1e3 / rounds,
           (c1[2] - c0[2]) * 1e3 / rounds, (c2[0] - c1[0]) * 1e3 / rounds,
           (c2[1] - c1[1]) * 1e3 / rounds, (c2[2] - c1[2]) * 1e3 / rounds, bad);
    fg_kube_conns_free(kc);
    for (int i = 0; i < 3; i++) {
        json_decref(depj[i]);
        free(dep[i]);
    }
    stop_servers(d, 0);
    free(fg);
    free(direct);
    free(dry);
    free(three);
    free(admin);
    curl_easy_cleanup(conn);
    return bad ? 1 : 0;
}
