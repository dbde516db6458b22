/* tests/bench/scale_bench.c: the scale figure: 200 scales a second, sustained for 30 s,
 * through two fleetgate replicas (p99 goal under 50 ms, no error), against the same rate of
 * Deployment scales sent straight to kubesim (the reference, measured in the same run).
 *
 * Starts a private redis-server, kubesim with three clusters in three zones and two daemons on
 * the same Redis (informers on; one holds their leases), makes a project and APPS apps of 3
 * replicas (Spread: one Deployment per cluster), then THREADS client threads, each owning its
 * own apps and its own keep-alive connection to one of the two replicas (alternating), send
 * POST .../apps/{app}:scale at RATE/THREADS a second each, open loop (a late request does not
 * push back the next one's schedule), replicas alternating 3 and 4. The reference then sends the
 * same number of merge patches of spec.replicas straight to kubesim at the same rate, to as many
 * Deployments fleetgate does not manage (so its reconciler leaves them alone). Each half starts
 * with WARM_S seconds at the same rate that are not counted (nor in the CPU figures): the stack
 * is still settling from the set-up then (48 Deployments made just before: their pods' starts,
 * watch events and history), which made the first second of a counted 150/s run a p50 of 88 ms
 * against 10-20 ms after (and nothing of the kind after 4 s idle instead). Prints the achieved
 * rate, p50/p99/max and errors of each and the p50/p99 ratios.
 * Usage: scale_bench [SECONDS] [RATE] (default 30 200); FG_BUILD names the build dir;
 * FG_BENCH_TRACE=FILE writes each counted scale through fleetgate as a line "due latency worker"
 * (seconds from the start, ms), to see when the slow ones came. Not part of make test (make
 * bench-scale; tests/bench/scale_sweep.sh runs it over several rates). */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testredis.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define APPS    (THREADS * 3)
#define WARM_S  2

static uint16_t ports[2];
static int sent[THREADS]; /* scales each worker sent so far, warm-ups included */
static char *admin;
static tk_sim_t ks;
static int seconds = 30, rate = 200;

static size_t sink(char *p, size_t sz, size_t n, void *ud) {
    (void)p, (void)ud;
    return sz * n;
}

typedef struct {
    int id;
    bool direct; /* the reference: straight to kubesim */
    int seconds; /* how long it sends */
    double *ms;  /* one latency a request */
    double *at;  /* when each was due, in s from the run's start (FG_BENCH_TRACE) */
    int n, errors;
    long code[8]; /* the statuses of the errors (-1: no answer in 10 s), and how many of each */
    int ncode[8];
} worker_t;

static long scale_through(CURL *c, uint16_t port, int app, int replicas) {
    char url[256], body[64], *auth = fg_xasprintf("Authorization: Bearer %s", admin);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/bench/apps/a%d:scale",
             (unsigned)port, app);
    snprintf(body, sizeof body, "{\"replicas\": %d}", replicas);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    long s = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s);
    curl_slist_free_all(h);
    free(auth);
    return s;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    CURL *c = curl_easy_init();
    double per_s = (double)rate / THREADS;
    int total = (int)(per_s * w->seconds);
    uint64_t start = fg_now_ns(), gap = (uint64_t)(1e9 / per_s);
    w->ms = calloc((size_t)total + 1, sizeof *w->ms);
    w->at = calloc((size_t)total + 1, sizeof *w->at);
    for (int i = 0; i < total; i++) {
        uint64_t due = start + (uint64_t)i * gap + (uint64_t)w->id * gap / THREADS, now;
        while ((now = fg_now_ns()) < due)
            nanosleep(&(struct timespec){0, (long)(due - now)}, NULL);
        /* the sequence goes on from the warm-up, so each scale changes its app's replicas */
        int seq = sent[w->id]++, app = w->id * 3 + seq % 3, replicas = 3 + (seq / 3) % 2;
        long s;
        if (w->direct) {
            char path[160], body[64];
            snprintf(path, sizeof path, "/apis/apps/v1/namespaces/bench/deployments/d%d", app);
            snprintf(body, sizeof body, "{\"spec\": {\"replicas\": %d}}", replicas % 2 + 1);
            s = tk_call(&ks, app % 3, "PATCH", path, body, NULL) == 200 ? 200 : -1;
        } else {
            s = scale_through(c, ports[w->id % 2], app, replicas);
        }
        /* from when it was due: a request that waited for an earlier one counts that wait */
        w->at[w->n] = (double)(due - start) / 1e9;
        w->ms[w->n++] = (double)(fg_now_ns() - due) / 1e6;
        w->errors += s != 200;
        for (int k = 0; s != 200 && k < 8; k++)
            if (w->ncode[k] == 0 || w->code[k] == s) {
                w->code[k] = s;
                w->ncode[k]++;
                break;
            }
    }
    curl_easy_cleanup(c);
    return NULL;
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
    unsigned long ut = fld[11], st = fld[12];
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The CPU (s) the stack has spent so far: both fleetgate replicas, kubesim, Redis; the load
 * generator's (this process, on the same cores); and when. */
typedef struct {
    double cpu[3], load, wall;
} stack_cpu_t;

static void stack_cpu(const pid_t d[2], pid_t redis_pid, stack_cpu_t *out) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    out->cpu[0] = cpu_s(d[0]) + cpu_s(d[1]);
    out->cpu[1] = cpu_s(ks.pid);
    out->cpu[2] = cpu_s(redis_pid);
    out->load = cpu_s(getpid());
    out->wall = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* How many cores the stack kept busy between a and b, against the machine's: when it nears
 * them, requests queue for a core and the p99 measures the machine, not fleetgate's path. */
static void busy(const char *what, const stack_cpu_t *a, const stack_cpu_t *b) {
    double wall = b->wall - a->wall, all = 0;
    for (int i = 0; i < 3; i++)
        all += b->cpu[i] - a->cpu[i];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("cores busy during the %s: %.2f of %ld (fleetgate %.2f, kubesim %.2f, redis %.2f; "
           "besides, the load generator %.2f)%s\n",
           what, all / wall, cores, (b->cpu[0] - a->cpu[0]) / wall, (b->cpu[1] - a->cpu[1]) / wall,
           (b->cpu[2] - a->cpu[2]) / wall, (b->load - a->load) / wall,
           all / wall > 0.8 * (double)cores ? ": saturated, latencies are queueing" : "");
}

/* Sends RATE scales a second for secs seconds from THREADS workers; w[] holds what they saw. */
static void send_for(bool direct, int secs, worker_t w[THREADS]) {
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){.id = i, .direct = direct, .seconds = secs};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

/* The warm-up: WARM_S seconds at the rate, nothing kept but its errors (it fails like a run). */
static int warm_up(bool direct) {
    worker_t w[THREADS];
    int errors = 0;
    send_for(direct, WARM_S, w);
    for (int i = 0; i < THREADS; i++) {
        errors += w[i].errors;
        free(w[i].ms);
        free(w[i].at);
    }
    return errors;
}

/* Runs the workers for the counted seconds; prints and returns p50/p99. */
static void run(const char *what, bool direct, double *p50, double *p99, int *errors) {
    worker_t w[THREADS];
    uint64_t t0 = fg_now_ns();
    send_for(direct, seconds, w);
    int n = 0;
    *errors = 0;
    for (int i = 0; i < THREADS; i++) {
        n += w[i].n;
        *errors += w[i].errors;
    }
    double secs = (double)(fg_now_ns() - t0) / 1e9, *all = calloc((size_t)n + 1, sizeof *all);
    const char *trace = getenv("FG_BENCH_TRACE");
    FILE *tf = trace && !direct ? fopen(trace, "w") : NULL;
    for (int i = 0; tf && i < THREADS; i++)
        for (int k = 0; k < w[i].n; k++)
            fprintf(tf, "%.4f %.3f %d\n", w[i].at[k], w[i].ms[k], i);
    if (tf)
        fclose(tf);
    for (int i = 0, k = 0; i < THREADS; i++) {
        memcpy(all + k, w[i].ms, (size_t)w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].ms);
        free(w[i].at);
    }
    qsort(all, (size_t)n, sizeof *all, cmp);
    *p50 = all[n / 2];
    *p99 = all[n * 99 / 100];
    printf("%-40s %6d in %5.1f s (%6.1f/s)  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  "
           "errors %d\n",
           what, n, secs, n / secs, *p50, *p99, all[n - 1], *errors);
    for (int i = 0; i < THREADS; i++) /* what the errors were, one line a status and worker */
        for (int k = 0; k < 8 && w[i].ncode[k] > 0; k++)
            printf("  worker %d: %d answered %ld\n", i, w[i].ncode[k], w[i].code[k]);
    free(all);
}

int main(int argc, char **argv) {
    seconds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 30;
    rate = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 200;
    seconds = seconds < 1 ? 1 : seconds;
    rate = rate < THREADS ? THREADS : rate;
    fg_log_set_level(FG_LOG_ERROR);
    tr_redis_t redis;
    tj_keys_t keys;
    static const char *const extra[] = {"--nodes", "4", "--pod-start-ms", "0", NULL};
    if (tr_redis_start(&redis) != 0 || tj_keys_make(&keys) != 0 || tk_start(&ks, 3, extra) != 0) {
        fprintf(stderr, "scale_bench: cannot start redis, keys or kubesim\n");
        return 1;
    }
    char cfg[8192], cl[3][512];
    for (int i = 0; i < 3; i++)
        snprintf(cl[i], sizeof cl[i],
                 "{\"name\": \"c%d\", \"zone\": \"zone-%d\", \"url\": \"%s\", \"token_file\": "
                 "\"%s\", \"ca_file\": \"%s\"}",
                 i, i, tk_url(&ks, i), ks.token_file, ks.ca_file);
    snprintf(cfg, sizeof cfg,
             "{\"workers\": 8, \"redis\": {\"url\": \"%s\"}, \"log\": {\"level\": \"error\", "
             "\"access_log\": false}, \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": "
             "\"/nonexistent\", \"clusters\": [%s, %s, %s], \"auth\": {\"issuer\": "
             "\"https://id.test\", \"audience\": \"fleetgate\", \"keys\": [{\"kid\": \"rsa1\", "
             "\"pem_file\": \"%s\", \"algs\": [\"RS256\"]}], \"audit_log\": \"/dev/null\"}, "
             "\"rate_limits\": {\"enabled\": false}}",
             redis.url, cl[0], cl[1], cl[2], keys.rsa_pub);
    pid_t d[2];
    for (int i = 0; i < 2; i++)
        d[i] = th_daemon_start(cfg, &ports[i], NULL);
    char claims[256];
    snprintf(claims, sizeof claims,
             "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"bench\", \"exp\": "
             "%ld, \"groups\": [\"fleetgate-admins\"]}",
             (long)time(NULL) + 3600);
    admin = tj_sign("RS256", keys.rsa_priv, "rsa1", claims);
    char *auth = fg_xasprintf("Authorization: Bearer %s", admin);
    const char *hdrs[] = {auth, "Content-Type: application/json", NULL};
    char url[256];
    th_resp_t r;
    long st = 0;
    for (int i = 0; i < 200 && st != 200; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%u/readyz", (unsigned)ports[0]);
        st = th_request("GET", url, NULL, NULL, -1, 0, &r) == 0 ? r.status : -1;
        th_resp_free(&r);
        if (st != 200)
            nanosleep(&(struct timespec){0, 50000000L}, NULL);
    }
    const char *project = "{\"name\": \"bench\", \"quotas\": {\"OnDemand\": {\"limits\": "
                          "{\"pods\": 100000}}}}";
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects", (unsigned)ports[0]);
    st = th_request("POST", url, hdrs, project, (long)strlen(project), 0, &r) == 0 ? r.status : -1;
    th_resp_free(&r);
    int bad = d[0] <= 0 || d[1] <= 0 || st != 201;
    for (int a = 0; !bad && a < APPS; a++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"name\": \"a%d\", \"spec\": {\"replicas\": 3, \"containers\": [{\"name\": "
                 "\"c\", \"image\": \"nginx:1\"}]}}",
                 a);
        snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/bench/apps",
                 (unsigned)ports[a % 2]);
        bad =
            th_request("POST", url, hdrs, body, (long)strlen(body), 0, &r) != 0 || r.status != 201;
        th_resp_free(&r);
    }
    for (int a = 0; !bad && a < APPS; a++) {
        char dep[512];
        snprintf(dep, sizeof dep,
                 "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"metadata\": "
                 "{\"name\": \"d%d\"}, \"spec\": {\"replicas\": 1, \"selector\": "
                 "{\"matchLabels\": {\"d\": \"d%d\"}}, \"template\": {\"metadata\": "
                 "{\"labels\": {\"d\": \"d%d\"}}, \"spec\": {\"containers\": [{\"name\": "
                 "\"c\", \"image\": \"nginx:1\"}]}}}}",
                 a, a, a);
        bad = tk_call(&ks, a % 3, "POST", "/apis/apps/v1/namespaces/bench/deployments", dep,
                      NULL) != 201;
    }
    free(auth);
    if (bad) {
        fprintf(stderr, "scale_bench: the daemons, the project or the apps did not come up\n");
        return 1;
    }
    printf("%d apps of 3 replicas over 3 clusters; %d client threads; %d scales/s for %d s, each "
           "half after %d s at that rate not counted\n",
           APPS, THREADS, rate, seconds, WARM_S);
    double f50, f99, d50, d99;
    int ferr, derr, werr = warm_up(false);
    stack_cpu_t before, after;
    stack_cpu(d, redis.pid, &before);
    run("scale through fleetgate (2 replicas)", false, &f50, &f99, &ferr);
    stack_cpu(d, redis.pid, &after);
    /* CPU per scale is what load on the machine changes least: the figure to compare builds */
    double n = (double)rate * seconds;
    printf("CPU per scale: fleetgate (both replicas) %.2f ms, kubesim %.2f ms, redis %.2f ms\n",
           (after.cpu[0] - before.cpu[0]) * 1e3 / n, (after.cpu[1] - before.cpu[1]) * 1e3 / n,
           (after.cpu[2] - before.cpu[2]) * 1e3 / n);
    busy("fleetgate run", &before, &after);
    werr += warm_up(true);
    stack_cpu(d, redis.pid, &before);
    run("replicas patch straight to kubesim", true, &d50, &d99, &derr);
    stack_cpu(d, redis.pid, &after);
    busy("direct run", &before, &after);
    printf("ratio fleetgate / direct: p50 %.2f  p99 %.2f   (goal: p99 < 50 ms, no error)\n",
           f50 / d50, f99 / d99);
    if (werr)
        printf("errors in the warm-ups (not counted above): %d\n", werr);
    for (int i = 0; i < 2; i++)
        th_daemon_stop(d[i], SIGTERM, 5000);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    free(admin);
    return ferr || derr || werr ? 1 : 0;
}
