/* Integration tests of what changes while the daemon runs: a delete frees its quota at once on
 * every replica, and SIGHUP re-reads the config. Against the daemon (two replicas where it
 * matters), a private redis-server and kubesim with three clusters in two zones (c0, c1 in
 * zone-a; c2 in zone-b), with real tokens; the config lives in a file of the test's own, so it
 * can be rewritten before a SIGHUP. */
#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"
#include "testmain.h"
#include "testredis.h"
#include "teststack.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static tr_redis_t redis;
static tj_keys_t keys;
static tk_sim_t ks;
static pid_t daemon_pid;
static uint16_t port;
static char *admin, *dev;
static char cfg_path[256];

static long call(const char *method, const char *path, const char *tok, const char *body,
                 bool check, th_resp_t *r) {
    return ts_call(port, method, path, tok, body, NULL, check, r);
}

/* The config as JSON text with the sidecar catalogue and c1's and c2's env labels given
 * (owned). The reconciler rolls at most 2 apps in any 3 s. */
static char *config_text3(const char *sidecars, const char *c1_label, const char *c2_label) {
    char cl[3][512];
    static const char *const zones[] = {"zone-a", "zone-a", "zone-b"};
    for (int i = 0; i < 3; i++)
        snprintf(cl[i], sizeof cl[i],
                 "{\"name\": \"c%d\", \"zone\": \"%s\", \"region\": \"r1\", \"url\": \"%s\","
                 " \"token_file\": \"%s\", \"ca_file\": \"%s\", \"labels\": [\"env=%s\"]}",
                 i, zones[i], tk_url(&ks, i), ks.token_file, ks.ca_file,
                 i == 2   ? c2_label
                 : i == 1 ? c1_label
                          : "prod");
    return fg_xasprintf(
        "{\"workers\": 4, \"redis\": {\"url\": \"%s\"},"
        " \"log\": {\"level\": \"info\", \"access_log\": false},"
        " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
        " \"clusters\": [%s, %s, %s],"
        " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
        "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
        "  \"audit_log\": \"%s/audit.log\"},"
        " \"rate_limits\": {\"enabled\": false},"
        " \"reconciler\": {\"rollout_max_apps\": 2, \"rollout_interval_s\": 3},"
        " \"sidecars\": %s}",
        redis.url, cl[0], cl[1], cl[2], keys.rsa_pub, keys.dir, sidecars);
}

static char *config_text(const char *sidecars, const char *c2_label) {
    return config_text3(sidecars, "dev", c2_label);
}

static void write_config(const char *text) {
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.new", cfg_path);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, cfg_path), 0); /* whole, never half written */
}

/* Starts a replica on the test's config file (kept, unlike th_daemon_start's). */
static pid_t start_replica(uint16_t *p, const char *log_path) {
    *p = th_free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)*p);
    const char *bin = th_bin("fleetgate");
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out >= 0) {
            dup2(out, STDERR_FILENO);
            dup2(out, STDOUT_FILENO);
        }
        execl(bin, bin, "-c", cfg_path, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600; i++) {
        th_resp_t r;
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u/readyz", (unsigned)*p);
        int ok = th_request("GET", url, NULL, NULL, -1, 0, &r) == 0 && r.status == 200;
        th_resp_free(&r);
        if (ok)
            return pid;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return -1;
        ts_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static const char *const default_sidecars =
    "[{\"name\": \"envoy\", \"image\": \"envoyproxy/envoy:v1.30\", \"cpu\": \"50m\","
    " \"memory\": \"64Mi\"}, {\"name\": \"logs\", \"image\": \"fluent/fluent-bit:3.0\"}]";

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    /* job pods run until the test ends: a job set holds its quota while it runs */
    static const char *const extra[] = {"--nodes", "2", "--pod-start-ms", "0", "--job-run-ms",
                                        "600000",  NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    snprintf(cfg_path, sizeof cfg_path, "%s/fleetgate.json", keys.dir);
    char *cfg = config_text(default_sidecars, "prod");
    write_config(cfg);
    free(cfg);
    char log[200];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = start_replica(&port, log);
    ck_assert_int_gt(daemon_pid, 0);
    admin = ts_token(&keys, "ada", "\"groups\": [\"fleetgate-admins\"]");
    dev = ts_token(&keys, "dev", "\"projects\": {\"shop\": \"developer\"}");
}

static void teardown(void) {
    int status = th_daemon_stop(daemon_pid, SIGTERM, 5000);
    char path[200], text[8192] = "";
    snprintf(path, sizeof path, "%s/daemon.log", keys.dir);
    FILE *f = status != 0 ? fopen(path, "r") : NULL;
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    if (getenv("FG_TEST_KEEP_LOG")) { /* for a person looking into a failure */
        char cmd[512];
        snprintf(cmd, sizeof cmd, "cat %s/daemon.log >> %s", keys.dir, getenv("FG_TEST_KEEP_LOG"));
        if (system(cmd) != 0)
            fprintf(stderr, "could not keep the log\n");
    }
    tk_stop(&ks);
    tr_redis_stop(&redis);
    unlink(cfg_path);
    tj_keys_remove(&keys);
    free(admin);
    free(dev);
    ck_assert_msg(status == 0, "the daemon exited with %d:\n%s", status, text);
}

static void create_project(const char *body) {
    th_resp_t r;
    ck_assert_int_eq(call("POST", "/v1/projects", admin, body, true, &r), 201);
    th_resp_free(&r);
}

static char *app_body(const char *name, int replicas, const char *extra) {
    return fg_xasprintf("{\"name\": \"%s\", \"spec\": {\"replicas\": %d, \"containers\": "
                        "[{\"name\": \"app\", \"image\": \"registry.example.net/shop/web:1\", "
                        "\"resources\": {\"requests\": {\"cpu\": \"100m\"}}}]%s}}",
                        name, replicas, extra ? extra : "");
}

static long create_app_at(uint16_t p, const char *name, int replicas, const char *extra,
                          th_resp_t *r) {
    char *body = app_body(name, replicas, extra);
    long s = ts_call(p, "POST", "/v1/projects/shop/apps", dev, body, NULL, true, r);
    free(body);
    return s;
}

static void set_faults_everywhere(const char *json) {
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_faults(&ks, i, json), 0);
}

/* ---- a delete frees its quota at once ------------------------------------------------------ */

START_TEST(delete_frees_quota_at_once_across_replicas) {
    create_project("{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                   "{\"pods\": 4}}}}");
    uint16_t port2;
    pid_t second = start_replica(&port2, NULL);
    ck_assert_int_gt(second, 0);
    th_resp_t r;
    ck_assert_int_eq(create_app_at(port, "a", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "b", 2, NULL, &r), 201);
    th_resp_free(&r);
    /* full: a third app is refused on either replica */
    ck_assert_int_eq(create_app_at(port2, "c", 2, NULL, &r), 409);
    ck_assert_msg(strstr(r.body, "pods would be 6 of a quota of 4") != NULL, "%s", r.body);
    th_resp_free(&r);

    /* a delete that fails in every cluster frees nothing */
    set_faults_everywhere("{\"errorRate\": 1, \"errorStatus\": 503}");
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/apps/a", dev, NULL, true, &r), 502);
    th_resp_free(&r);
    set_faults_everywhere("{}");
    ck_assert_int_eq(create_app_at(port2, "c", 2, NULL, &r), 409);
    ck_assert_msg(strstr(r.body, "pods would be 6 of a quota of 4") != NULL, "%s", r.body);
    th_resp_free(&r);

    /* deleted through one replica, created through the other at once */
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/apps/a", dev, NULL, true, &r), 204);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "c", 2, NULL, &r), 201);
    th_resp_free(&r);
    /* and the quota is full again: "a" is not counted twice, "c" is */
    ck_assert_int_eq(create_app_at(port, "d", 1, NULL, &r), 409);
    ck_assert_msg(strstr(r.body, "pods would be 5 of a quota of 4") != NULL, "%s", r.body);
    th_resp_free(&r);
    /* a name deleted and created again is counted again */
    ck_assert_int_eq(
        ts_call(port2, "DELETE", "/v1/projects/shop/apps/b", dev, NULL, NULL, true, &r), 204);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port, "b", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "d", 1, NULL, &r), 409);
    th_resp_free(&r);
    ck_assert_int_eq(th_daemon_stop(second, SIGTERM, 5000), 0);
}
END_TEST

static const char *const work =
    "\"containers\": [{\"name\": \"work\", \"image\": \"registry.example.net/shop/job:1\","
    " \"command\": [\"true\"], \"resources\": {\"requests\": {\"cpu\": \"100m\"}}}]";

START_TEST(deleting_a_job_set_or_a_cron_job_frees_quota_at_once) {
    create_project("{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                   "{\"pods\": 4}}}}");
    uint16_t port2;
    pid_t second = start_replica(&port2, NULL);
    ck_assert_int_gt(second, 0);
    th_resp_t r;
    char *js = fg_xasprintf("{\"name\": \"j1\", \"spec\": {\"completions\": 2, "
                            "\"parallelism\": 2, %s}}",
                            work);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/jobsets", dev, js, true, &r), 201);
    th_resp_free(&r);
    free(js);
    ck_assert_int_eq(create_app_at(port2, "a", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "b", 2, NULL, &r), 409);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/jobsets/j1", dev, NULL, true, &r), 204);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "b", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(
        ts_call(port2, "DELETE", "/v1/projects/shop/apps/b", dev, NULL, NULL, true, &r), 204);
    th_resp_free(&r);

    /* a cron job's triggered run holds 2 pods; deleting the cron job frees them */
    char *cj = fg_xasprintf("{\"name\": \"nightly\", \"spec\": {\"schedule\": \"0 3 * * *\", "
                            "\"jobTemplate\": {\"completions\": 2, \"parallelism\": 2, %s}}}",
                            work);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/cronjobs", dev, cj, true, &r), 201);
    th_resp_free(&r);
    free(cj);
    ck_assert_int_eq(
        call("POST", "/v1/projects/shop/cronjobs/nightly:trigger", dev, NULL, true, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "b", 2, NULL, &r), 409);
    th_resp_free(&r);
    ck_assert_int_eq(call("DELETE", "/v1/projects/shop/cronjobs/nightly", dev, NULL, true, &r),
                     204);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port2, "b", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(th_daemon_stop(second, SIGTERM, 5000), 0);
}
END_TEST

/* ---- SIGHUP re-reads the config -------------------------------------------------------------- */

/* How many times needle is in the daemon's log. */
static int log_count(const char *needle) {
    char path[200];
    snprintf(path, sizeof path, "%s/daemon.log", keys.dir);
    char *text = NULL;
    size_t len;
    if (fg_read_file(path, 64u << 20, &text, &len) != FG_OK)
        return 0;
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    free(text);
    return n;
}

/* How many lines hold needle once at least want do, waiting up to 60 s: a writer logs its write
 * after the clusters answered it and the cache took it, so a test that saw the clusters change
 * can look at the log a moment before the line is there. */
static int log_count_at_least(const char *needle, int want) {
    for (int i = 0; i < 600 && log_count(needle) < want; i++)
        ts_sleep_ms(100);
    return log_count(needle);
}

/* Rewrites the config, sends SIGHUP and waits (bounded) for the reload's log line. */
static void reload_with(const char *text, const char *line) {
    int before = log_count(line);
    write_config(text);
    ck_assert_int_eq(kill(daemon_pid, SIGHUP), 0);
    for (int i = 0; i < 600 && log_count(line) <= before; i++)
        ts_sleep_ms(50);
    ck_assert_msg(log_count(line) > before, "no \"%s\" in the log after SIGHUP", line);
}

/* The image of the container named name in the app's Deployment in cluster i (owned; NULL). */
static char *ks_image(int i, const char *app, const char *name) {
    char path[192];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/shop/deployments/%s", app);
    char *img = NULL;
    if (tk_call(&ks, i, "GET", path, NULL, &o) == 200) {
        const json_t *cs = json_object_get(
            json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "spec"),
            "containers");
        size_t k;
        json_t *c;
        json_array_foreach(cs, k, c) {
            const char *n = json_string_value(json_object_get(c, "name"));
            if (n && strcmp(n, name) == 0)
                img = fg_xstrdup(json_string_value(json_object_get(c, "image")));
        }
    }
    json_decref(o);
    return img;
}

/* The one cluster index (0..2) holding the app, or -1. */
static int holder(const char *app) {
    for (int i = 0; i < 3; i++) {
        char *img = ks_image(i, app, "app");
        free(img);
        if (img)
            return i;
    }
    return -1;
}

static const char *const new_sidecars =
    "[{\"name\": \"envoy\", \"image\": \"envoyproxy/envoy:v1.31\", \"cpu\": \"50m\","
    " \"memory\": \"64Mi\"}, {\"name\": \"logs\", \"image\": \"fluent/fluent-bit:3.0\"}]";

#define RELOADED "SIGHUP: configuration reloaded"
#define REFUSED  "SIGHUP: the configuration is not valid, nothing changed"

START_TEST(sighup_applies_the_catalogue_and_refuses_a_bad_file) {
    create_project("{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                   "{\"pods\": 40}}}}");
    th_resp_t r;
    const char *mesh = ", \"sidecars\": [\"envoy\"]";
    ck_assert_int_eq(create_app_at(port, "w1", 1, mesh, &r), 201);
    th_resp_free(&r);
    int h = holder("w1");
    ck_assert_int_ge(h, 0);
    char *img = ks_image(h, "w1", "envoy");
    ck_assert_str_eq(img, "envoyproxy/envoy:v1.30");
    free(img);

    /* a new envoy image, and a key that is not live (workers): applied / named */
    char *cfg = config_text(new_sidecars, "prod");
    char *more = fg_xasprintf("{\"workers\": 3,%s", cfg + strlen("{\"workers\": 4,"));
    reload_with(more, RELOADED);
    free(more);
    free(cfg);
    ck_assert_int_ge(log_count("applied: sidecars"), 1);
    ck_assert_int_ge(log_count("needs a restart (not applied): workers"), 1);
    ck_assert_int_eq(create_app_at(port, "w2", 1, mesh, &r), 201);
    th_resp_free(&r);
    h = holder("w2");
    ck_assert_int_ge(h, 0);
    img = ks_image(h, "w2", "envoy");
    ck_assert_str_eq(img, "envoyproxy/envoy:v1.31");
    free(img);

    /* a bad file (a sidecar without an image) changes nothing, and the log names the key */
    cfg = config_text("[{\"name\": \"envoy\"}]", "staging");
    reload_with(cfg, REFUSED);
    free(cfg);
    ck_assert_int_ge(log_count("sidecars[0].image"), 1);
    ck_assert_int_eq(create_app_at(port, "w3", 1, mesh, &r), 201);
    th_resp_free(&r);
    h = holder("w3");
    ck_assert_int_ge(h, 0);
    img = ks_image(h, "w3", "envoy");
    ck_assert_str_eq(img, "envoyproxy/envoy:v1.31");
    free(img);
    /* nor did its labels: nothing is labelled env=staging */
    char *body = app_body("w4", 1,
                          ", \"placement\": {\"clusterSelector\": {\"matchLabels\": "
                          "{\"env\": \"staging\"}}}");
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps?dryRun=true", dev, body, true, &r), 409);
    th_resp_free(&r);

    /* a label change is live: placement admits c2 for env=staging (the registry is re-read) */
    cfg = config_text(new_sidecars, "staging");
    reload_with(cfg, RELOADED);
    free(cfg);
    ck_assert_int_ge(log_count("applied: clusters[c2].labels"), 1);
    long s = 0;
    for (int i = 0; i < 300; i++) {
        s = call("POST", "/v1/projects/shop/apps?dryRun=true", dev, body, true, &r);
        th_resp_free(&r);
        if (s == 200)
            break;
        ts_sleep_ms(50);
    }
    ck_assert_int_eq(s, 200);
    ck_assert_int_eq(call("POST", "/v1/projects/shop/apps", dev, body, true, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(holder("w4"), 2);
    free(body);
    /* a sidecar gone from the catalogue is refused for new uses with the 422 */
    cfg = config_text("[{\"name\": \"logs\", \"image\": \"fluent/fluent-bit:3.0\"}]", "staging");
    reload_with(cfg, RELOADED);
    free(cfg);
    ck_assert_int_eq(create_app_at(port, "w5", 1, mesh, &r), 422);
    ck_assert_msg(strstr(r.body, "/spec/sidecars/0") != NULL, "%s", r.body);
    th_resp_free(&r);
}
END_TEST

/* ---- the reconciler rolls a changed catalogue, and moves apps a label change refuses ----------
 */

/* The app's Deployment (a new reference) in the first cluster holding it, or NULL; *at its
 * index. */
static json_t *ks_deployment(const char *app, int *at) {
    char path[192];
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/shop/deployments/%s", app);
    for (int i = 0; i < 3; i++) {
        json_t *o = NULL;
        if (tk_call(&ks, i, "GET", path, NULL, &o) == 200) {
            if (at)
                *at = i;
            return o;
        }
        json_decref(o);
    }
    return NULL;
}

static const char *meta_str(const json_t *o, const char *member, const char *key) {
    const json_t *m = json_object_get(json_object_get(o, "metadata"), member);
    return json_string_value(key ? json_object_get(m, key) : m);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The cron job's CronJob in the first cluster holding it (a new reference), or NULL. */
static json_t *ks_cron_object(const char *cron) {
    char path[192];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/shop/cronjobs/%s", cron);
    for (int i = 0; i < 3; i++) {
        json_t *o = NULL;
        if (tk_call(&ks, i, "GET", path, NULL, &o) == 200)
            return o;
        json_decref(o);
    }
    return NULL;
}

/* The cron job's CronJobs in kubesim: how many clusters hold one (*held) and how many of those
 * run container name from image in their job template; *by (when given) says who asked for the
 * last write of each, "" when they differ. */
static int ks_cron_images(const char *cron, const char *name, const char *image, int *held,
                          char *by, size_t bylen) {
    char path[192];
    int with = 0;
    *held = 0;
    if (by)
        by[0] = '\0';
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/shop/cronjobs/%s", cron);
    for (int i = 0; i < 3; i++) {
        json_t *o = NULL;
        if (tk_call(&ks, i, "GET", path, NULL, &o) == 200) {
            (*held)++;
            const json_t *tmpl = json_object_get(
                json_object_get(json_object_get(json_object_get(o, "spec"), "jobTemplate"), "spec"),
                "template");
            size_t k;
            json_t *c;
            json_array_foreach(json_object_get(json_object_get(tmpl, "spec"), "containers"), k, c) {
                const char *n = json_string_value(json_object_get(c, "name")),
                           *img = json_string_value(json_object_get(c, "image"));
                with += n && img && strcmp(n, name) == 0 && strcmp(img, image) == 0;
            }
            const char *who = meta_str(o, "annotations", "fleetgate.io/requested-by");
            if (by && *held == 1)
                snprintf(by, bylen, "%s", who ? who : "");
            else if (by && (who == NULL || strcmp(by, who) != 0))
                by[0] = '\0';
        }
        json_decref(o);
    }
    return with;
}

static long create_cron(const char *name, const char *sidecars) {
    th_resp_t r;
    char *body =
        fg_xasprintf("{\"name\": \"%s\", \"spec\": {\"schedule\": \"0 0 1 1 *\", \"jobTemplate\": "
                     "{\"completions\": 3, \"parallelism\": 3, %s\"containers\": [{\"name\": "
                     "\"w\", \"image\": \"registry.example.net/shop/w:1\","
                     " \"command\": [\"true\"]}]}}}",
                     name, sidecars);
    long s = call("POST", "/v1/projects/shop/cronjobs", dev, body, true, &r);
    free(body);
    th_resp_free(&r);
    return s;
}

START_TEST(catalogue_change_rolls_the_apps_using_it_at_a_bounded_rate) {
    create_project("{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                   "{\"pods\": 40}}}}");
    th_resp_t r;
    enum { N = 5 };
    char name[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(name[i], sizeof name[i], "m%d", i);
        ck_assert_int_eq(create_app_at(port, name[i], 1, ", \"sidecars\": [\"envoy\"]", &r), 201);
        th_resp_free(&r);
    }
    ck_assert_int_eq(create_app_at(port, "plain", 1, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port, "lg", 1, ", \"sidecars\": [\"logs\"]", &r), 201);
    th_resp_free(&r);
    /* a cron job's template takes sidecars too; one without any is left alone */
    ck_assert_int_eq(create_cron("nightly", "\"sidecars\": [\"envoy\"], "), 201);
    ck_assert_int_eq(create_cron("hourly", ""), 201);
    int held = 0;
    ck_assert_int_ge(ks_cron_images("nightly", "envoy", "envoyproxy/envoy:v1.30", &held, NULL, 0),
                     1);
    char rv_plain[32], rv_lg[32], rv_cron[32];
    json_t *d = ks_cron_object("hourly");
    ck_assert_ptr_nonnull(d);
    snprintf(rv_cron, sizeof rv_cron, "%s", meta_str(d, "resourceVersion", NULL));
    json_decref(d);
    d = ks_deployment("plain", NULL);
    ck_assert_ptr_nonnull(d);
    snprintf(rv_plain, sizeof rv_plain, "%s", meta_str(d, "resourceVersion", NULL));
    json_decref(d);
    d = ks_deployment("lg", NULL);
    ck_assert_ptr_nonnull(d);
    snprintf(rv_lg, sizeof rv_lg, "%s", meta_str(d, "resourceVersion", NULL));
    json_decref(d);

    char *cfg = config_text(new_sidecars, "prod");
    reload_with(cfg, RELOADED);
    free(cfg);
    /* every app using envoy rolls: its Deployment carries the new image */
    int rolled = 0;
    for (int t = 0; t < 1200 && rolled < N; t++) {
        rolled = 0;
        for (int i = 0; i < N; i++) {
            int h = -1;
            json_t *o = ks_deployment(name[i], &h);
            char *img = h >= 0 ? ks_image(h, name[i], "envoy") : NULL;
            rolled += img && strcmp(img, "envoyproxy/envoy:v1.31") == 0;
            free(img);
            json_decref(o);
        }
        if (rolled < N)
            ts_sleep_ms(100);
    }
    if (rolled < N) { /* what the daemon said, for the failure */
        char cmd[512];
        snprintf(cmd, sizeof cmd, "grep -v '\"access\"' %s/daemon.log | tail -40 >&2", keys.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "no log\n");
    }
    ck_assert_int_eq(rolled, N);
    /* never more than 2 in any 3 s, by the writes' own record (fleetgate.io/spec-at), and each
     * one is the reconciler's */
    int64_t at[N];
    for (int i = 0; i < N; i++) {
        json_t *o = ks_deployment(name[i], NULL);
        ck_assert_ptr_nonnull(o);
        ck_assert_str_eq(meta_str(o, "annotations", "fleetgate.io/requested-by"),
                         "fleetgate-reconciler");
        const char *s = meta_str(o, "annotations", "fleetgate.io/spec-at");
        ck_assert_ptr_nonnull(s);
        at[i] = strtoll(s, NULL, 10);
        json_decref(o);
    }
    qsort(at, N, sizeof at[0], cmp_i64);
    for (int i = 0; i + 2 < N; i++)
        ck_assert_msg(at[i + 2] - at[i] >= 3000, "3 rolls within %lld ms",
                      (long long)(at[i + 2] - at[i]));
    /* the apps not using envoy were not written */
    d = ks_deployment("plain", NULL);
    ck_assert_str_eq(meta_str(d, "resourceVersion", NULL), rv_plain);
    json_decref(d);
    d = ks_deployment("lg", NULL);
    ck_assert_str_eq(meta_str(d, "resourceVersion", NULL), rv_lg);
    json_decref(d);
    ck_assert_int_ge(log_count_at_least("rolled to the changed sidecar catalogue", N), N);
    /* the cron job using envoy rolls too (its CronJobs, within the same rate), by the
     * reconciler; the one without sidecars is not written */
    int with = 0;
    char by[64] = "";
    for (int t = 0; t < 600; t++) {
        with = ks_cron_images("nightly", "envoy", "envoyproxy/envoy:v1.31", &held, by, sizeof by);
        if (held > 0 && with == held)
            break;
        ts_sleep_ms(100);
    }
    ck_assert_int_ge(held, 1);
    ck_assert_int_eq(with, held);
    ck_assert_str_eq(by, "fleetgate-reconciler");
    ck_assert_int_ge(log_count_at_least("cron job shop/nightly rolled to the changed sidecar", 1),
                     1);
    d = ks_cron_object("hourly");
    ck_assert_str_eq(meta_str(d, "resourceVersion", NULL), rv_cron);
    json_decref(d);
    /* a user's change of a cron job takes the catalogue as reloaded, at once */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/cronjobs/hourly", dev,
                          "{\"spec\": {\"jobTemplate\": {\"sidecars\": [\"envoy\"]}}}", true, &r),
                     200);
    th_resp_free(&r);
    ck_assert_int_eq(ks_cron_images("hourly", "envoy", "envoyproxy/envoy:v1.31", &held, NULL, 0),
                     held);
    ck_assert_int_ge(held, 1);
    /* and so does an app's */
    ck_assert_int_eq(call("PATCH", "/v1/projects/shop/apps/plain", dev,
                          "{\"spec\": {\"sidecars\": [\"envoy\"]}}", true, &r),
                     200);
    th_resp_free(&r);
    int at_plain = -1;
    d = ks_deployment("plain", &at_plain);
    char *envoy = ks_image(at_plain, "plain", "envoy");
    ck_assert_str_eq(envoy ? envoy : "(none)", "envoyproxy/envoy:v1.31");
    free(envoy);
    json_decref(d);

    /* envoy removed from the catalogue: the apps keep running it, and it is said */
    cfg = config_text("[{\"name\": \"logs\", \"image\": \"fluent/fluent-bit:3.0\"}]", "prod");
    reload_with(cfg, RELOADED);
    free(cfg);
    ck_assert_int_ge(log_count_at_least("which the catalogue no longer holds", N + 1), N + 1);
    ck_assert_int_ge(log_count_at_least("cron job shop/nightly uses sidecar envoy", 1), 1);
    ck_assert_int_eq(ks_cron_images("nightly", "envoy", "envoyproxy/envoy:v1.31", &held, NULL, 0),
                     held);
    /* a repair then keeps it as it runs: one CronJob deleted by hand comes back with it */
    ck_assert_int_ge(held, 2);
    int gone_from = -1;
    for (int i = 0; i < 3 && gone_from < 0; i++)
        if (tk_call(&ks, i, "DELETE", "/apis/batch/v1/namespaces/shop/cronjobs/nightly", NULL,
                    NULL) == 200)
            gone_from = i;
    ck_assert_int_ge(gone_from, 0);
    int back = 0, was_held = held;
    for (int t = 0; t < 600 && !(held == was_held && back == held); t++) {
        ts_sleep_ms(100);
        back = ks_cron_images("nightly", "envoy", "envoyproxy/envoy:v1.31", &held, NULL, 0);
    }
    ck_assert_int_eq(held, was_held);
    ck_assert_int_eq(back, held);
    for (int i = 0; i < N; i++) {
        int h = -1;
        json_t *o = ks_deployment(name[i], &h);
        char *img = ks_image(h, name[i], "envoy");
        ck_assert_str_eq(img, "envoyproxy/envoy:v1.31");
        free(img);
        json_decref(o);
    }
    /* the app's status says so (the contract checks the answer); an app without it does not */
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/m0", dev, NULL, true, &r), 200);
    json_t *app = NULL;
    ck_assert_int_eq(fg_json_load(r.body, r.len, &app, NULL, 0), FG_OK);
    th_resp_free(&r);
    const json_t *conds = json_object_get(json_object_get(app, "status"), "conditions"), *gone;
    size_t i;
    bool said = false;
    json_array_foreach(conds, i, gone) {
        if (strcmp(json_string_value(json_object_get(gone, "type")), "SidecarsAvailable"))
            continue;
        ck_assert_str_eq(json_string_value(json_object_get(gone, "status")), "False");
        ck_assert_str_eq(json_string_value(json_object_get(gone, "reason")), "SidecarRemoved");
        ck_assert_msg(strstr(json_string_value(json_object_get(gone, "message")),
                             "sidecar envoy is no longer in the catalogue"),
                      "%s", json_string_value(json_object_get(gone, "message")));
        said = true;
    }
    ck_assert_msg(said, "m0's status does not say envoy is gone");
    json_decref(app);
    ck_assert_int_eq(call("GET", "/v1/projects/shop/apps/lg", dev, NULL, true, &r), 200);
    ck_assert_ptr_null(strstr(r.body, "SidecarsAvailable"));
    th_resp_free(&r);
}
END_TEST

START_TEST(label_change_moves_the_apps_it_refuses) {
    create_project("{\"name\": \"shop\", \"quotas\": {\"OnDemand\": {\"limits\": "
                   "{\"pods\": 40}}}}");
    th_resp_t r;
    const char *dev_only = ", \"placement\": {\"clusterSelector\": {\"matchLabels\": "
                           "{\"env\": \"dev\"}}}";
    ck_assert_int_eq(create_app_at(port, "sel", 2, dev_only, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(create_app_at(port, "free", 2, NULL, &r), 201);
    th_resp_free(&r);
    ck_assert_int_eq(holder("sel"), 1);
    json_t *o = ks_deployment("free", NULL);
    char rv_free[32];
    snprintf(rv_free, sizeof rv_free, "%s", meta_str(o, "resourceVersion", NULL));
    json_decref(o);
    /* c1 is prod now, c2 dev: the app moves to c2 */
    char *cfg = config_text3(default_sidecars, "prod", "dev");
    reload_with(cfg, RELOADED);
    free(cfg);
    ck_assert_int_ge(log_count("clusters[c1].labels"), 1);
    bool moved = false;
    for (int t = 0; t < 600 && !moved; t++) {
        json_t *in2 = NULL, *in1 = NULL;
        long s2 =
            tk_call(&ks, 2, "GET", "/apis/apps/v1/namespaces/shop/deployments/sel", NULL, &in2);
        long s1 =
            tk_call(&ks, 1, "GET", "/apis/apps/v1/namespaces/shop/deployments/sel", NULL, &in1);
        moved = s2 == 200 && s1 == 404;
        json_decref(in1);
        json_decref(in2);
        if (!moved)
            ts_sleep_ms(100);
    }
    ck_assert(moved);
    int h = -1;
    o = ks_deployment("sel", &h);
    ck_assert_int_eq(h, 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(o, "spec"), "replicas")),
                     2);
    ck_assert_str_eq(meta_str(o, "annotations", "fleetgate.io/requested-by"),
                     "fleetgate-reconciler");
    json_decref(o);
    ck_assert_int_ge(log_count_at_least("reconciler: app shop/sel: moved by", 1), 1);
    /* an app its placement still admits where it runs is not written */
    o = ks_deployment("free", NULL);
    ck_assert_str_eq(meta_str(o, "resourceVersion", NULL), rv_free);
    json_decref(o);
}
END_TEST

static Suite *reload_suite(void) {
    Suite *s = suite_create("reload");
    TCase *tq = tcase_create("quota");
    tcase_add_checked_fixture(tq, setup, teardown);
    tcase_set_timeout(tq, 120);
    tcase_add_test(tq, delete_frees_quota_at_once_across_replicas);
    tcase_add_test(tq, deleting_a_job_set_or_a_cron_job_frees_quota_at_once);
    suite_add_tcase(s, tq);
    TCase *th = tcase_create("sighup");
    tcase_add_checked_fixture(th, setup, teardown);
    tcase_set_timeout(th, 120);
    tcase_add_test(th, sighup_applies_the_catalogue_and_refuses_a_bad_file);
    suite_add_tcase(s, th);
    TCase *tr = tcase_create("reconciler");
    tcase_add_checked_fixture(tr, setup, teardown);
    tcase_set_timeout(tr, 240);
    tcase_add_test(tr, catalogue_change_rolls_the_apps_using_it_at_a_bounded_rate);
    tcase_add_test(tr, label_change_moves_the_apps_it_refuses);
    suite_add_tcase(s, tr);
    return s;
}

int main(void) {
    return tm_run(reload_suite());
}
