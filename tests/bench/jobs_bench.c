/* tests/bench/jobs_bench.c: job sets and cron jobs through fleetgate (issue 14's figures).
 *
 * Starts a private redis-server, kubesim with three clusters in two zones (c0, c1 in zone-a,
 * c2 in zone-b; c0 and c2 labelled env=prod) and the daemon (informers on), makes a project,
 * then:
 *  1. per round: POST a job set of 2 completions placed on the two env=prod clusters (one Job
 *     each; the answer waits until the cache shows both) and DELETE it; and, for comparison, one
 *     Job created straight in one cluster (and deleted). p50/p99 and the ratio.
 *  2. per round: POST :trigger of a cron job over the same two clusters (a Job each, from the
 *     CronJob's template) against the same direct Job create. p50/p99 and the ratio.
 *  3. N job sets (default 1,000) created one after another in a project whose OnDemand quota holds
 *     20 pods, each running 2 pods at once: a create refused for quota (409) waits for others to
 *     finish and is retried. When every one has finished, the tier's usage is read through the
 *     quota's own refusal ("pods would be U+21 of a quota of 20" for a job set of 21 pods): it must
 *     be 0, and the number of job sets Succeeded must be N.
 * Usage: jobs_bench [ROUNDS] [N] (defaults 100, 1000); FG_BUILD names the build dir. Exit 1 on
 * any error or a usage that is not 0. Not part of make test (make bench-jobs). */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testredis.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint16_t port;
static char *admin;

static long call(const char *method, const char *path, const char *body, char **answer) {
    char url[256], *auth = fg_xasprintf("Authorization: Bearer %s", admin);
    const char *hdrs[] = {auth, "Content-Type: application/json", NULL};
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    th_resp_t r;
    long s = th_request(method, url, hdrs, body, body ? (long)strlen(body) : -1, 0, &r) == 0
                 ? r.status
                 : -1;
    if (answer)
        *answer = s > 0 ? fg_xstrdup(r.body ? r.body : "") : NULL;
    th_resp_free(&r);
    free(auth);
    return s;
}

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 0 when status is want; else 1, and the first few answers that were not are shown. */
static int expect(const char *what, long status, long want, char **answer) {
    static int shown;
    int bad = status != want;
    if (bad && shown++ < 5)
        fprintf(stderr, "jobs_bench: %s answered %ld: %.300s\n", what, status,
                *answer ? *answer : "");
    free(*answer);
    *answer = NULL;
    return bad;
}

static double report(const char *what, double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    printf("%-50s p50 %7.2f ms  p99 %7.2f ms  (n=%d)\n", what, ms[n / 2], ms[n * 99 / 100], n);
    return ms[n / 2];
}

static char *jobset(const char *name, int completions, int parallelism) {
    return fg_xasprintf(
        "{\"name\": \"%s\", \"spec\": {\"completions\": %d, \"parallelism\": %d, \"placement\": "
        "{\"clusterSelector\": {\"matchLabels\": {\"env\": \"prod\"}}}, \"containers\": "
        "[{\"name\": \"w\", \"image\": \"busybox:1\", \"command\": [\"true\"], \"resources\": "
        "{\"requests\": {\"cpu\": \"10m\", \"memory\": \"16Mi\"}}}]}}",
        name, completions, parallelism);
}

static const char *const direct_job =
    "{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", \"metadata\": {\"name\": \"d\"}, "
    "\"spec\": {\"template\": {\"spec\": {\"restartPolicy\": \"Never\", \"containers\": "
    "[{\"name\": \"w\", \"image\": \"busybox:1\", \"command\": [\"true\"]}]}}}}";

/* One Job created straight in cluster i (ms), then deleted with its pods. */
static double direct(tk_sim_t *ks, int i, int *bad) {
    uint64_t t0 = fg_now_ns();
    *bad += tk_call(ks, i, "POST", "/apis/batch/v1/namespaces/bench/jobs", direct_job, NULL) != 201;
    double ms = (double)(fg_now_ns() - t0) / 1e6;
    *bad += tk_call(ks, i, "DELETE",
                    "/apis/batch/v1/namespaces/bench/jobs/d?propagationPolicy=Background", NULL,
                    NULL) != 200;
    return ms;
}

/* The pods the OnDemand tier of project uses, read through the quota's refusal; -1 if unread. */
static long usage(const char *project) {
    char path[128], *answer = NULL, *body = jobset("probe", 21, 21);
    snprintf(path, sizeof path, "/v1/projects/%s/jobsets", project);
    long s = call("POST", path, body, &answer), used = -1;
    const char *at = answer ? strstr(answer, "pods would be ") : NULL;
    if (s == 409 && at)
        used = strtol(at + 14, NULL, 10) - 21;
    free(answer);
    free(body);
    return used;
}

/* Part 3: n job sets through a quota of 20 pods; returns 0 when all succeeded and usage is 0. */
static int many(int n) {
    if (call("POST", "/v1/projects",
             "{\"name\": \"many\", \"quotas\": {\"OnDemand\": {\"limits\": {\"pods\": 20}}}}",
             NULL) != 201)
        return 1;
    uint64_t t0 = fg_now_ns();
    long refused = 0, errors = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "js-%04d", i);
        char *body = jobset(name, 2, 2);
        long s;
        char *answer = NULL;
        while ((s = call("POST", "/v1/projects/many/jobsets", body, &answer)) == 409 && answer &&
               strstr(answer, "quota-exceeded")) {
            refused++;
            free(answer);
            answer = NULL;
            sleep_ms(20);
        }
        errors += expect("create in many", s, 201, &answer);
        free(body);
    }
    double create_s = (double)(fg_now_ns() - t0) / 1e9;
    long done = 0;
    for (int wait = 0; wait < 600; wait++) { /* every one Succeeded (60 s at most) */
        char *answer = NULL;
        done = 0;
        if (call("GET", "/v1/projects/many/jobsets?phase=Succeeded&limit=1000", NULL, &answer) ==
            200) {
            json_t *list = NULL;
            if (fg_json_load(answer, strlen(answer), &list, NULL, 0) == FG_OK)
                done = (long)json_array_size(json_object_get(list, "items"));
            json_decref(list);
        }
        free(answer);
        if (done >= n)
            break;
        sleep_ms(100);
    }
    long used = usage("many");
    printf("%d job sets (2 pods each, quota 20 pods): created in %.1f s, %ld creates refused "
           "for quota and retried, %ld errors, %ld Succeeded, tier usage after: %ld pods\n",
           n, create_s, refused, errors, done, used);
    return errors == 0 && done >= n && used == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100;
    int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 1000;
    rounds = rounds < 2 ? 2 : rounds;
    n = n < 1 || n > 1000 ? 1000 : n; /* one page of the list counts them */
    fg_log_set_level(FG_LOG_ERROR);
    tr_redis_t redis;
    tj_keys_t keys;
    tk_sim_t ks;
    static const char *const extra[] = {"--nodes", "4", "--pod-start-ms", "0", "--job-run-ms",
                                        "50",      NULL};
    if (tr_redis_start(&redis) != 0 || tj_keys_make(&keys) != 0 || tk_start(&ks, 3, extra) != 0) {
        fprintf(stderr, "jobs_bench: cannot start redis, keys or kubesim\n");
        return 1;
    }
    char cfg[8192], cl[3][512];
    static const char *const zones[] = {"zone-a", "zone-a", "zone-b"};
    for (int i = 0; i < 3; i++)
        snprintf(cl[i], sizeof cl[i],
                 "{\"name\": \"c%d\", \"zone\": \"%s\", \"url\": \"%s\", \"token_file\": \"%s\", "
                 "\"ca_file\": \"%s\", \"labels\": [\"env=%s\"]}",
                 i, zones[i], tk_url(&ks, i), ks.token_file, ks.ca_file, i == 1 ? "dev" : "prod");
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
    admin = tj_sign("RS256", keys.rsa_priv, "rsa1", claims);
    for (int i = 0; i < 200 && call("GET", "/readyz", NULL, NULL) != 200; i++)
        sleep_ms(50);
    const char *cron = "{\"name\": \"c\", \"spec\": {\"schedule\": \"@yearly\", "
                       "\"concurrencyPolicy\": \"Allow\", \"jobTemplate\": {\"completions\": 2, "
                       "\"parallelism\": 2, \"placement\": {\"clusterSelector\": {\"matchLabels\": "
                       "{\"env\": \"prod\"}}}, \"containers\": [{\"name\": \"w\", \"image\": "
                       "\"busybox:1\", \"command\": [\"true\"]}]}}}";
    if (d <= 0 ||
        call("POST", "/v1/projects",
             "{\"name\": \"bench\", \"quotas\": {\"OnDemand\": {\"limits\": {\"pods\": 100000}}}}",
             NULL) != 201 ||
        call("POST", "/v1/projects/bench/cronjobs", cron, NULL) != 201) {
        fprintf(stderr, "jobs_bench: the daemon, the project or the cron job did not come up\n");
        return 1;
    }
    double *fg = calloc((size_t)rounds, sizeof *fg), *trig = calloc((size_t)rounds, sizeof *fg),
           *dir = calloc((size_t)rounds, sizeof *fg);
    int bad = 0;
    char *body = jobset("b", 2, 2), *answer = NULL;
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = fg_now_ns();
        bad += expect("create", call("POST", "/v1/projects/bench/jobsets", body, &answer), 201,
                      &answer);
        fg[r] = (double)(fg_now_ns() - t0) / 1e6;
        bad += expect("delete", call("DELETE", "/v1/projects/bench/jobsets/b", NULL, &answer), 204,
                      &answer);
        t0 = fg_now_ns();
        bad +=
            expect("trigger", call("POST", "/v1/projects/bench/cronjobs/c:trigger", NULL, &answer),
                   201, &answer);
        trig[r] = (double)(fg_now_ns() - t0) / 1e6;
        dir[r] = direct(&ks, r % 2 ? 2 : 0, &bad);
    }
    free(body);
    double p_fg = report("job set create over 2 clusters through fleetgate", fg, rounds);
    double p_trig = report("cron job trigger over 2 clusters through fleetgate", trig, rounds);
    double p_dir = report("one Job create straight to kubesim", dir, rounds);
    printf("ratio create / direct (p50): %.2f   trigger / direct (p50): %.2f   errors: %d\n",
           p_fg / p_dir, p_trig / p_dir, bad);
    int rc = many(n) || bad ? 1 : 0; /* part 3 runs even after errors, to be seen */
    th_daemon_stop(d, SIGTERM, 5000);
    tk_stop(&ks);
    tr_redis_stop(&redis);
    tj_keys_remove(&keys);
    free(fg);
    free(trig);
    free(dir);
    free(admin);
    return rc;
}
