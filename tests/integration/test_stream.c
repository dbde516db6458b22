/* Integration tests of the streams (issue 15: src/stream/, src/api/logs.c, src/api/exec.c): the
 * built daemon, a private redis-server whose cache names the pods (tests/support/testcache.h),
 * and kubesim serving the pods' logs and exec. Real tokens, real HTTP; answers are checked
 * against api/openapi.yaml. Exec is driven by Debian's python3-websocket
 * (tests/integration/exec_client.py), a client no one here wrote. */
#include "contract.h"
#include "fleetgate/core.h"
#include "fleetgate/kube.h"
#include "testcache.h"
#include "testhttp.h"
#include "testjwt.h"
#include "testmain.h"
#include "testredis.h"
#include "teststack.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KS_TOKEN "logs-test-token"
#define CLUSTER  "east-a"
#define ZONE     "zone-a"
#define CLUSTER2 "west-b" /* kubesim's second cluster, at ks_port + 1 */
#define ZONE2    "zone-b"
#define STREAMS  2 /* rate_limits.streams_per_principal */

static tr_redis_t redis;
static tj_keys_t keys;
static tc_t cache;
static pid_t daemon_pid, ks_pid;
static uint16_t port, ks_port;
static char ks_dir[64];
static fg_kube_client_t *kc, *kc2;
static char *dev, *other, *viewer, *op;
static int stall_timeout_s = 30; /* streams.stall_timeout_s (30: the default) */

/* ---- kubesim ------------------------------------------------------------------ */

static int ks_try_start(void) {
    ks_port = th_free_ports(2);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return -1;
    char ports[8], tls[96];
    snprintf(ports, sizeof ports, "%u", (unsigned)ks_port);
    snprintf(tls, sizeof tls, "%s/tls", ks_dir);
    ks_pid = fork();
    if (ks_pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
        close(pipefd[0]);
        execl(th_bin("kubesim"), "kubesim", "--clusters", "2", "--base-port", ports, "--token",
              KS_TOKEN, "--tls-dir", tls, "--pod-start-ms", "0", "--log-lines-per-second", "20",
              (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char buf[1024];
    ssize_t r = read(pipefd[0], buf, sizeof buf);
    close(pipefd[0]);
    if (r <= 0) {
        kill(ks_pid, SIGKILL);
        waitpid(ks_pid, NULL, 0);
        return -1;
    }
    return 0;
}

static long ks_call_on(fg_kube_client_t *c, fg_kube_method_t m, const char *path,
                       const char *body) {
    json_t *b = body ? json_loads(body, 0, NULL) : NULL, *out = NULL;
    long code = 0;
    fg_kube_error_t err;
    fg_kube_request(c, m, path, b, &out, &code, &err);
    json_decref(b);
    json_decref(out);
    return code;
}

static long ks_call(fg_kube_method_t m, const char *path, const char *body) {
    return ks_call_on(kc, m, path, body);
}

static void ks_start(void) {
    snprintf(ks_dir, sizeof ks_dir, "/tmp/fg-test-logs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(ks_dir));
    int ok = -1;
    for (int attempt = 0; attempt < 5 && ok != 0; attempt++)
        ok = ks_try_start();
    ck_assert_int_eq(ok, 0);
    static char url[64], token_file[96], ca[96];
    snprintf(url, sizeof url, "https://127.0.0.1:%u", (unsigned)ks_port);
    snprintf(token_file, sizeof token_file, "%s/token", ks_dir);
    snprintf(ca, sizeof ca, "%s/tls/ca.crt", ks_dir);
    FILE *f = fopen(token_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(KS_TOKEN "\n", f);
    fclose(f);
    fg_cluster_conf_t c = {.name = CLUSTER,
                           .zone = ZONE,
                           .region = "r",
                           .url = url,
                           .token_file = token_file,
                           .ca_file = ca};
    fg_kube_error_t err;
    ck_assert_int_eq(fg_kube_client_new(&kc, &c, NULL, &err), FG_OK);
    static char url2[64];
    snprintf(url2, sizeof url2, "https://127.0.0.1:%u", (unsigned)ks_port + 1);
    fg_cluster_conf_t c2 = c;
    c2.name = CLUSTER2;
    c2.zone = ZONE2;
    c2.url = url2;
    ck_assert_int_eq(fg_kube_client_new(&kc2, &c2, NULL, &err), FG_OK);
    static const char ns[] =
        "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"shop\"}}";
    ck_assert_int_eq(ks_call(FG_KUBE_POST, "/api/v1/namespaces", ns), 201);
    ck_assert_int_eq(ks_call_on(kc2, FG_KUBE_POST, "/api/v1/namespaces", ns), 201);
}

/* A running pod of app web in kubesim's cluster 1 or 2, named in the cache as the informers
 * would. */
static void make_pod_in(int cl, const char *name, int containers) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":"
             "{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1\"}"
             "%s]}}",
             name, containers > 1 ? ",{\"name\":\"side\",\"image\":\"envoy:1\"}" : "");
    ck_assert_int_eq(ks_call_on(cl ? kc2 : kc, FG_KUBE_POST, "/api/v1/namespaces/shop/pods", body),
                     201);
    const char *cluster = cl ? CLUSTER2 : CLUSTER, *zone = cl ? ZONE2 : ZONE;
    char *j = tc_pod_json("shop", cluster, zone, name, "web", "Running", NULL, "101");
    ck_assert_int_eq(tc_put(&cache, "pod", cluster, "shop", name, j), 0);
    free(j);
    ts_sleep_ms(300); /* kubesim's kubelet starts it (pod-start-ms 0, next controller pass) */
}

static void make_pod(const char *name, int containers) {
    make_pod_in(0, name, containers);
}

static void setup(void) {
    ck_assert_int_eq(tr_redis_start(&redis), 0);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
    ck_assert_int_eq(tc_open(&cache, redis.url), 0);
    ks_start();
    char cfg[4096];
    snprintf(
        cfg, sizeof cfg,
        "{\"workers\": 2, \"limits\": {\"header_timeout_s\": 2}, \"redis\": {\"url\": \"%s\"}, "
        "\"cache\": {\"enabled\": false},"
        " \"log\": {\"level\": \"error\", \"access_log\": false},"
        " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent\","
        " \"clusters\": [{\"name\": \"" CLUSTER "\", \"zone\": \"" ZONE "\","
        "   \"region\": \"r\", \"url\": \"https://127.0.0.1:%u\", \"token_file\": \"%s/token\","
        "   \"ca_file\": \"%s/tls/ca.crt\"},"
        "  {\"name\": \"" CLUSTER2 "\", \"zone\": \"" ZONE2 "\","
        "   \"region\": \"r\", \"url\": \"https://127.0.0.1:%u\", \"token_file\": \"%s/token\","
        "   \"ca_file\": \"%s/tls/ca.crt\"}],"
        " \"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
        "  \"keys\": [{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]}],"
        "  \"audit_log\": \"%s/audit.log\"},"
        " \"rate_limits\": {\"streams_per_principal\": %d, \"stream_lease_s\": 5,"
        " \"redis_timeout_ms\": 2000},"
        " \"streams\": {\"exec_idle_timeout_s\": 3, \"stall_timeout_s\": %d}}",
        redis.url, (unsigned)ks_port, ks_dir, ks_dir, (unsigned)ks_port + 1, ks_dir, ks_dir,
        keys.rsa_pub, keys.dir, STREAMS, stall_timeout_s);
    char log[160];
    snprintf(log, sizeof log, "%s/daemon.log", keys.dir);
    daemon_pid = th_daemon_start(cfg, &port, log);
    ck_assert_int_gt(daemon_pid, 0);
    ck_assert_int_eq(tc_cluster(&cache, CLUSTER, ZONE, "Healthy", fg_wall_ms(), ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, CLUSTER, "1000", fg_wall_ms()), 0);
    ck_assert_int_eq(tc_cluster(&cache, CLUSTER2, ZONE2, "Healthy", fg_wall_ms(), ""), 0);
    ck_assert_int_eq(tc_sync_all(&cache, CLUSTER2, "1000", fg_wall_ms()), 0);
    dev = ts_token(&keys, "dana", "\"projects\": {\"shop\": \"developer\"}");
    other = ts_token(&keys, "otto", "\"projects\": {\"blog\": \"operator\"}");
    viewer = ts_token(&keys, "vera", "\"projects\": {\"shop\": \"viewer\"}");
    op = ts_token(&keys, "oona", "\"projects\": {\"shop\": \"operator\"}");
}

static void teardown(void) {
    int status = th_daemon_stop(daemon_pid, SIGTERM, 10000);
    char path[192], text[8192];
    ts_log_if_failed(status, keys.dir, text, sizeof text);
    snprintf(path, sizeof path, "%s/daemon.log", keys.dir);
    unlink(path);
    fg_kube_client_free(kc);
    fg_kube_client_free(kc2);
    kill(ks_pid, SIGKILL);
    waitpid(ks_pid, NULL, 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ks_dir);
    ck_assert_int_eq(system(cmd), 0);
    tc_close(&cache);
    tr_redis_stop(&redis);
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    unlink(path);
    tj_keys_remove(&keys);
    free(dev);
    free(other);
    free(viewer);
    free(op);
    ck_assert_msg(status == 0, "the daemon exited with %d:\n%s", status, text);
}

/* GET path with tok; checks the answer against the contract. */
static long get_as(const char *path, const char *tok, th_resp_t *r) {
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    char *auth = fg_xasprintf("Authorization: Bearer %s", tok);
    const char *hdrs[2] = {auth, NULL};
    ck_assert_int_eq(th_request("GET", url, hdrs, NULL, -1, 0, r), 0);
    free(auth);
    char err[2048];
    const char *q = strchr(path, '?');
    char *p = q ? fg_xstrndup(path, (size_t)(q - path)) : fg_xstrdup(path);
    int rc =
        contract_check_headers("GET", p, r->status, r->headers, r->body, r->len, err, sizeof err);
    ck_assert_msg(rc == CONTRACT_VALID, "GET %s -> %ld: %s\n%s", path, r->status, err, r->body);
    free(p);
    return r->status;
}

/* Opens a follow stream on a raw socket; returns the fd (the request is sent). */
static int open_follow(const char *path, const char *tok) {
    int fd = th_connect(port);
    ck_assert_int_ge(fd, 0);
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", path,
                     tok);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    return fd;
}

/* Reads what arrives within ms into buf (appending at *len). */
static void read_for(int fd, char *buf, size_t cap, size_t *len, int ms) {
    uint64_t end = fg_now_ns() + (uint64_t)ms * 1000000u;
    while (*len < cap - 1) {
        int64_t left = (int64_t)(end - fg_now_ns()) / 1000000;
        if (left <= 0 || (int64_t)(end - fg_now_ns()) < 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = read(fd, buf + *len, cap - 1 - *len);
        if (r <= 0)
            break;
        *len += (size_t)r;
    }
    buf[*len] = '\0';
}

/* fleetgate_streams_open from /metrics. */
static int streams_open(void) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/metrics", (unsigned)port);
    th_resp_t r;
    ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
    const char *at = strstr(r.body, "\nfleetgate_streams_open ");
    int v = -1;
    if (at) {
        at += strlen("\nfleetgate_streams_open ");
        v = (int)strtol(at, NULL, 10);
    }
    th_resp_free(&r);
    return v;
}

static bool wait_streams_open(int want, int ms) {
    for (int waited = 0; waited <= ms; waited += 20) {
        if (streams_open() == want)
            return true;
        ts_sleep_ms(20);
    }
    return false;
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* ---- tests -------------------------------------------------------------------- */

START_TEST(logs_tail_and_parameters) {
    setup();
    make_pod("web-1", 1);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?tailLines=3", dev, &r), 200);
    ck_assert_int_eq(count_lines(r.body, "\n"), 3);
    th_resp_free(&r);
    ck_assert_int_eq(
        get_as("/v1/projects/shop/pods/web-1/logs?tailLines=2&timestamps=true", dev, &r), 200);
    ck_assert_int_eq(count_lines(r.body, "\n"), 2);
    ck_assert_msg(r.body[4] == '-' && strchr(r.body, 'T') != NULL, "no timestamp: %s", r.body);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?limitBytes=10", dev, &r), 200);
    ck_assert_int_eq((int)r.len, 10);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?sinceSeconds=1", dev, &r), 200);
    th_resp_free(&r);
    /* parameters checked before anything leaves for the cluster */
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?tailLines=0", dev, &r), 422);
    ck_assert_ptr_nonnull(strstr(r.body, "tailLines"));
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?follow=maybe", dev, &r), 422);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/nope/logs", dev, &r), 404);
    th_resp_free(&r);
    /* the cluster's refusals become problems: previous without a restart, a wrong container */
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?previous=true", dev, &r), 422);
    ck_assert_ptr_nonnull(strstr(r.body, "previous"));
    th_resp_free(&r);
    make_pod("two-1", 2);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/two-1/logs", dev, &r), 422);
    ck_assert_ptr_nonnull(strstr(r.body, "container"));
    th_resp_free(&r);
    ck_assert_int_eq(
        get_as("/v1/projects/shop/pods/two-1/logs?container=side&tailLines=1", dev, &r), 200);
    th_resp_free(&r);
    teardown();
}
END_TEST

START_TEST(logs_refused_to_others) {
    setup();
    make_pod("web-1", 1);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs", other, &r), 403);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs", viewer, &r), 403);
    th_resp_free(&r);
    teardown();
}
END_TEST

START_TEST(follow_sees_new_lines_and_disconnect_closes_upstream) {
    setup();
    make_pod("web-1", 1);
    int fd = open_follow("/v1/projects/shop/pods/web-1/logs?follow=true&tailLines=1", dev);
    static char buf[1 << 16];
    size_t len = 0;
    read_for(fd, buf, sizeof buf, &len, 500);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    ck_assert_ptr_nonnull(strcasestr(buf, "transfer-encoding: chunked"));
    size_t first = len;
    read_for(fd, buf, sizeof buf, &len, 700);
    ck_assert_msg(len > first, "no new line in 700 ms at 20 lines/s");
    ck_assert_int_eq(streams_open(), 1);
    /* the client goes: fleetgate's stream (and its request to the cluster) ends within 1 s */
    close(fd);
    ck_assert_msg(wait_streams_open(0, 1000), "the stream outlived its client");
    /* one audit line for the session, with its bytes */
    ts_sleep_ms(100);
    char path[192], audit[1 << 14] = "";
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    audit[fread(audit, 1, sizeof audit - 1, f)] = '\0';
    fclose(f);
    ck_assert_int_eq(count_lines(audit, "\"verb\":\"session\""), 1);
    ck_assert_ptr_nonnull(strstr(audit, "\"endedBy\":\"client-gone\""));
    ck_assert_ptr_nonnull(strstr(audit, "\"principal\":\"dana\""));
    teardown();
}
END_TEST

START_TEST(streams_past_the_limit_get_429) {
    setup();
    make_pod("web-1", 1);
    int fds[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        fds[i] = open_follow("/v1/projects/shop/pods/web-1/logs?follow=true", dev);
        char buf[512];
        size_t len = 0;
        read_for(fds[i], buf, sizeof buf, &len, 300);
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    }
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs", dev, &r), 429);
    th_resp_free(&r);
    /* past the 5 s lease the open streams still hold their slots: the loop renews them */
    ts_sleep_ms(6500);
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs", dev, &r), 429);
    th_resp_free(&r);
    close(fds[0]);
    ck_assert(wait_streams_open(1, 1000));
    ck_assert_int_eq(get_as("/v1/projects/shop/pods/web-1/logs?tailLines=1", dev, &r), 200);
    th_resp_free(&r);
    close(fds[1]);
    teardown();
}
END_TEST

START_TEST(slow_reader_keeps_memory_bounded_and_drain_ends_streams) {
    setup();
    make_pod("web-1", 1);
    /* a follow nobody reads: fleetgate's buffer fills, the cluster's side is paused */
    int fd = open_follow("/v1/projects/shop/pods/web-1/logs?follow=true", dev);
    int rcv = 32 * 1024; /* fixed: no autotuning to hide the reader's pace */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    ts_sleep_ms(1500);
    ck_assert_int_eq(streams_open(), 1);
    /* SIGTERM: the stream ends cleanly and the daemon exits 0 (teardown checks) */
    close(fd);
    teardown();
}
END_TEST

/* VmRSS of pid in KiB, from /proc/PID/status; -1 when it cannot be read. */
static long rss_kib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

/* How long the stalled reader below reads nothing: FG_TEST_STALL_S (default 5), which is also
 * the daemon's streams.stall_timeout_s for that test. The behaviour is the same at the default
 * 30 s (FG_TEST_STALL_S=30 runs it so); 5 keeps make test short. */
static int stall_test_s(void) {
    const char *e = getenv("FG_TEST_STALL_S");
    long v = e ? strtol(e, NULL, 10) : 0;
    return v >= 2 && v <= 120 ? (int)v : 5;
}

#define FAST_LPS      50000      /* the fast pod's lines per second (kubesim's annotation) */
#define RSS_BOUND_KIB (2 * 1024) /* what fleetgate may grow while a client reads nothing */

START_TEST(stalled_reader_keeps_rss_bounded_and_is_dropped) {
    int stall = stall_test_s();
    stall_timeout_s = stall;
    setup();
    stall_timeout_s = 30;
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"fast-1\","
             "\"labels\":{\"app\":\"fast\"},\"annotations\":{\"kubesim.io/"
             "log-lines-per-second\":\"%d\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
             "\"image\":\"nginx:1\"}]}}",
             FAST_LPS);
    ck_assert_int_eq(ks_call(FG_KUBE_POST, "/api/v1/namespaces/shop/pods", body), 201);
    char *j = tc_pod_json("shop", CLUSTER, ZONE, "fast-1", "fast", "Running", NULL, "101");
    ck_assert_int_eq(tc_put(&cache, "pod", CLUSTER, "shop", "fast-1", j), 0);
    free(j);
    ts_sleep_ms(300);
    const char *path = "/v1/projects/shop/pods/fast-1/logs?follow=true";
    /* 1. How fast the lines come through fleetgate to a client that reads: what an unbounded
     *    gateway would have to hold for a client that does not. */
    int fd = open_follow(path, dev);
    static char buf[1 << 20];
    size_t len = 0, total = 0;
    uint64_t t0 = fg_now_ns();
    while (fg_now_ns() - t0 < 1500000000ull) {
        len = 0;
        read_for(fd, buf, sizeof buf, &len, 100);
        total += len;
    }
    double rate = (double)total / ((double)(fg_now_ns() - t0) / 1e9);
    close(fd);
    ck_assert(wait_streams_open(0, 2000));
    /* 2. A client that reads the answer's head and then nothing. */
    fd = open_follow(path, dev);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 3000), 1);
    char head[256];
    ck_assert_int_gt(read(fd, head, sizeof head - 1), 12);
    ck_assert_msg(strncmp(head, "HTTP/1.1 200", 12) == 0, "%.200s", head);
    uint64_t stalled_at = fg_now_ns();
    ts_sleep_ms(1000); /* fleetgate's buffer fills and the cluster's side is paused */
    long rss0 = rss_kib(daemon_pid), rss_max = rss0;
    ck_assert_int_gt(rss0, 0);
    ck_assert_int_eq(streams_open(), 1);
    /* 3. Held at the bounded buffer until the stall timeout, then dropped. */
    uint64_t dropped_at = 0;
    for (int i = 0; fg_now_ns() - stalled_at < (uint64_t)(stall + 4) * 1000000000ull; i++) {
        long r = rss_kib(daemon_pid);
        if (r > rss_max)
            rss_max = r;
        /* /metrics once a second only: under ASan each request's freed memory sits in the
         * quarantine and would count as growth */
        if (i % 5 == 4 && streams_open() == 0) {
            dropped_at = fg_now_ns();
            break;
        }
        ts_sleep_ms(200);
    }
    double offered_kib = rate * stall / 1024.0;
    fprintf(stderr,
            "stalled reader: %d s, lines through fleetgate at %.0f KiB/s (%.0f KiB offered in "
            "the stall), fleetgate RSS %ld -> max %ld KiB (+%ld), dropped after %.1f s\n",
            stall, rate / 1024.0, offered_kib, rss0, rss_max, rss_max - rss0,
            dropped_at ? (double)(dropped_at - stalled_at) / 1e9 : -1.0);
    /* the test can fail: what came in the stall is several times the bound */
    ck_assert_msg(offered_kib > 4.0 * RSS_BOUND_KIB, "the source was too slow: %.0f KiB/s",
                  rate / 1024.0);
    ck_assert_msg(rss_max - rss0 < RSS_BOUND_KIB, "fleetgate grew %ld KiB for a stalled reader",
                  rss_max - rss0);
    ck_assert_msg(dropped_at != 0, "the stalled client was never dropped");
    ck_assert_msg(dropped_at - stalled_at >= (uint64_t)(stall - 1) * 1000000000ull,
                  "dropped after %.1f s, before the %d s stall timeout",
                  (double)(dropped_at - stalled_at) / 1e9, stall);
    /* 4. The client then sees the end: what was in flight, then the connection closes. */
    len = 0;
    size_t got = 0;
    uint64_t t1 = fg_now_ns();
    for (;;) {
        ck_assert_msg(fg_now_ns() - t1 < 5000000000ull,
                      "the dropped client's socket stays open (%zu bytes read after the drop)",
                      got);
        p.revents = 0;
        if (poll(&p, 1, 500) <= 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    ck_assert_uint_lt(got, 4u * 1024u * 1024u);
    close(fd);
    /* the session's audit line says why it ended */
    ts_sleep_ms(100);
    char apath[192], audit[1 << 14] = "";
    snprintf(apath, sizeof apath, "%s/audit.log", keys.dir);
    FILE *f = fopen(apath, "r");
    ck_assert_ptr_nonnull(f);
    audit[fread(audit, 1, sizeof audit - 1, f)] = '\0';
    fclose(f);
    /* From 30 s on, libmicrohttpd's idle timeout (limits.connection_timeout_s, 30) races the
     * stall rule: either drops the client, the first as "client-gone". */
    ck_assert_msg(strstr(audit, "\"endedBy\":\"stalled\"") != NULL ||
                      (stall >= 30 && count_lines(audit, "\"endedBy\":\"client-gone\"") == 2),
                  "%s", audit);
    teardown();
}
END_TEST

/* Decodes the chunked body after the head in raw[0..len) strictly into out: a chunk cut by the
 * end of what was read is left out. False when the framing is wrong anywhere. */
static bool dechunk(const char *raw, size_t len, char *out, size_t *olen, char *why, size_t wlen) {
    const char *p = strstr(raw, "\r\n\r\n"), *end = raw + len;
    *olen = 0;
    if (p == NULL) {
        snprintf(why, wlen, "no head");
        return false;
    }
    for (p += 4; p < end;) {
        const char *crlf = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (crlf == NULL)
            return true; /* the size line is still coming */
        char *hex_end;
        unsigned long n = strtoul(p, &hex_end, 16);
        if (hex_end == p || hex_end != crlf) {
            snprintf(why, wlen, "bad chunk size line at body byte %zu: %.20s", *olen, p);
            return false;
        }
        if (n == 0)
            return true; /* the last chunk */
        if ((size_t)(end - (crlf + 2)) < n + 2)
            return true; /* the chunk is still coming */
        memcpy(out + *olen, crlf + 2, n);
        *olen += n;
        p = crlf + 2 + n;
        if (p[0] != '\r' || p[1] != '\n') {
            snprintf(why, wlen, "chunk of %lu bytes not followed by CRLF", n);
            return false;
        }
        p += 2;
    }
    return true;
}

/* A pod of app busy in the cache and in kubesim, writing 20,000 log lines a second. */
static void busy_pod(void) {
    char body[1024];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"busy-1\","
             "\"labels\":{\"app\":\"busy\"},\"annotations\":{\"kubesim.io/"
             "log-lines-per-second\":\"20000\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
             "\"image\":\"nginx:1\"}]}}");
    ck_assert_int_eq(ks_call(FG_KUBE_POST, "/api/v1/namespaces/shop/pods", body), 201);
    char *j = tc_pod_json("shop", CLUSTER, ZONE, "busy-1", "busy", "Running", NULL, "101");
    ck_assert_int_eq(tc_put(&cache, "pod", CLUSTER, "shop", "busy-1", j), 0);
    free(j);
    ts_sleep_ms(300);
}

/* A follow of busy-1's log over HTTP/version, from a socket with a 4 KiB receive window (so
 * fleetgate's socket to it fills soon): the connected socket, the request sent. */
static int follow_busy(const char *version) {
    int rcv = 4096;
    int fd = th_connect(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv), 0);
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET /v1/projects/shop/pods/busy-1/logs?follow=true HTTP/%s\r\n"
                     "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n",
                     version, dev);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    return fd;
}

/* Lines through fleetgate to a client slower than the pod: the body stays whole HTTP/1.1
 * chunks (or, over HTTP/1.0, the bare lines) and no line is lost or repeated while fleetgate's
 * socket to the client keeps filling (the loop writes the body itself, keeping what the socket
 * does not take). */
START_TEST(follow_to_a_slow_reader_is_whole_chunks_in_order) {
    setup();
    busy_pod();
    for (int v = 0; v < 2; v++) { /* HTTP/1.1 (chunks), then HTTP/1.0 (the bytes as they are) */
        /* a small receive window, read in small bites with pauses: fleetgate's sends come short */
        const char *version = v == 0 ? "1.1" : "1.0";
        int fd = follow_busy(version);
        static char raw[256 << 10], out[256 << 10];
        size_t len = 0;
        int slow_reads = 0;
        uint64_t t0 = fg_now_ns();
        while (fg_now_ns() - t0 < 20000000000ull && len < 160u * 1024u) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 200) <= 0)
                continue;
            ssize_t r = read(fd, raw + len, 4096);
            if (r <= 0)
                break;
            len += (size_t)r;
            if (++slow_reads % 2 == 0)
                ts_sleep_ms(4); /* at most about 2 MB/s, less than the pod writes */
        }
        close(fd);
        raw[len] = '\0';
        ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "%.300s", raw);
        size_t olen;
        char why[256] = "";
        if (v == 0) {
            ck_assert_ptr_nonnull(strcasestr(raw, "transfer-encoding: chunked"));
            ck_assert_msg(dechunk(raw, len, out, &olen, why, sizeof why), "%s", why);
        } else { /* HTTP/1.0: the lines as they are, up to the end of the connection */
            ck_assert_ptr_null(strcasestr(raw, "transfer-encoding"));
            const char *at = strstr(raw, "\r\n\r\n");
            ck_assert_ptr_nonnull(at);
            olen = len - (size_t)(at + 4 - raw);
            memcpy(out, at + 4, olen);
        }
        out[olen] = '\0';
        /* every whole line in order: seq goes up by one (the first line has none) */
        long prev = -1, lines = 0;
        for (char *line = out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
            *nl = '\0';
            const char *at = strstr(line, " seq=");
            if (at == NULL) {
                ck_assert_msg(strstr(line, "msg=\"starting\"") != NULL, "a cut line: %.200s", line);
                continue;
            }
            long seq = strtol(at + 5, NULL, 10);
            ck_assert_msg(prev < 0 || seq == prev + 1, "seq %ld after %ld", seq, prev);
            prev = seq;
            lines++;
        }
        /* several buffers' worth came, each through a socket that kept filling */
        ck_assert_msg(olen > 128u * 1024u, "only %zu bytes of lines in 20 s", olen);
        fprintf(stderr, "slow reader over HTTP/%s: %ld lines in order, %zu bytes\n", version, lines,
                olen);
        ck_assert(wait_streams_open(0, 2000));
    }
    ck_assert(wait_streams_open(0, 2000));
    teardown();
}
END_TEST

START_TEST(app_logs_merge_every_pod_and_follow_new_ones) {
    setup();
    make_pod_in(0, "web-a1", 1);
    make_pod_in(1, "web-b1", 1);
    th_resp_t r;
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/web/logs?tailLines=2", dev, &r), 200);
    ck_assert_int_eq(count_lines(r.body, "[" CLUSTER "/web-a1] "), 2);
    ck_assert_int_eq(count_lines(r.body, "[" CLUSTER2 "/web-b1] "), 2);
    ck_assert_int_eq(count_lines(r.body, "\n"), 4);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/nope/logs", dev, &r), 404);
    th_resp_free(&r);
    ck_assert_int_eq(get_as("/v1/projects/shop/apps/web/logs", other, &r), 403);
    th_resp_free(&r);
    /* follow: both pods' lines come, then a pod that appears (a scale) joins */
    int fd = open_follow("/v1/projects/shop/apps/web/logs?follow=true&tailLines=1", dev);
    static char buf[1 << 18];
    size_t len = 0;
    read_for(fd, buf, sizeof buf, &len, 800);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "[" CLUSTER "/web-a1] "));
    ck_assert_ptr_nonnull(strstr(buf, "[" CLUSTER2 "/web-b1] "));
    make_pod_in(1, "web-b2", 1);
    read_for(fd, buf, sizeof buf, &len, 3500);
    ck_assert_msg(strstr(buf, "[" CLUSTER2 "/web-b2] ") != NULL, "the new pod did not join");
    close(fd);
    ck_assert(wait_streams_open(0, 1000));
    teardown();
}
END_TEST

/* ---- exec ---------------------------------------------------------------------- */

/* Runs exec_client.py MODE with protocol as tok; returns its exit status, its output in out. */
static int exec_client(const char *tok, const char *protocol, const char *mode, char *out,
                       size_t outlen) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 tests/integration/exec_client.py "
             "ws://127.0.0.1:%u/v1/projects/shop/pods/web-1/exec '%s' %s %s 2>&1",
             (unsigned)port, tok, protocol, mode);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* kubesim's children running comm (the exec sessions' processes). */
static int ks_children(const char *comm) {
    DIR *d = opendir("/proc");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], stat[512] = "";
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = e->d_name[0] >= '1' && e->d_name[0] <= '9' ? fopen(path, "r") : NULL;
        if (f == NULL)
            continue;
        stat[fread(stat, 1, sizeof stat - 1, f)] = '\0';
        fclose(f);
        char want[64];
        snprintf(want, sizeof want, "(%s)", comm);
        const char *close_paren = strrchr(stat, ')');
        if (strstr(stat, want) == NULL || close_paren == NULL)
            continue;
        long ppid = strtol(close_paren + 4, NULL, 10); /* ") S PPID" */
        n += ppid == (long)ks_pid;
    }
    closedir(d);
    return n;
}

START_TEST(exec_over_v5_and_v4_with_python_websocket) {
    setup();
    make_pod("web-1", 1);
    static const char *const protocols[] = {"v5.channel.k8s.io", "v4.channel.k8s.io"};
    static const char *const modes[] = {"exit3", "stdin", "resize"};
    char out[4096];
    for (int p = 0; p < 2; p++)
        for (int m = 0; m < 3; m++) {
            int st = exec_client(op, protocols[p], modes[m], out, sizeof out);
            ck_assert_msg(st == 0, "%s %s: %s", protocols[p], modes[m], out);
        }
    /* one audit line per session, with the command and the exit code */
    ts_sleep_ms(200);
    char path[192], audit[1 << 16] = "";
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    audit[fread(audit, 1, sizeof audit - 1, f)] = '\0';
    fclose(f);
    ck_assert_int_eq(count_lines(audit, "\"kind\":\"exec\""), 6);
    ck_assert_int_eq(count_lines(audit, "\"exitCode\":3"), 2);
    ck_assert_ptr_nonnull(
        strstr(audit, "\"command\":[\"sh\",\"-c\",\"echo hi; echo err >&2; exit 3\"]"));
    ck_assert_ptr_nonnull(strstr(audit, "\"principal\":\"oona\""));
    teardown();
}
END_TEST

START_TEST(exec_client_gone_ends_the_cluster_session) {
    setup();
    make_pod("web-1", 1);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 tests/integration/exec_client.py "
             "ws://127.0.0.1:%u/v1/projects/shop/pods/web-1/exec '%s' v5.channel.k8s.io hold",
             (unsigned)port, op);
    int to_child[2], from_child[2];
    ck_assert_int_eq(pipe(to_child), 0);
    ck_assert_int_eq(pipe(from_child), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], STDIN_FILENO);
        dup2(from_child[1], STDOUT_FILENO);
        close(to_child[1]);
        close(from_child[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    char line[64] = "";
    ssize_t r = read(from_child[0], line, sizeof line - 1);
    ck_assert_msg(r > 0 && strncmp(line, "open", 4) == 0, "no session: %s", line);
    ts_sleep_ms(200);
    ck_assert_int_eq(ks_children("sleep"), 1);
    ck_assert_int_eq(write(to_child[1], "\n", 1), 1);
    int st;
    waitpid(pid, &st, 0);
    /* the client went without a close frame: kubesim's process ends within 1 s */
    int waited = 0;
    while (ks_children("sleep") > 0 && waited < 1000) {
        ts_sleep_ms(20);
        waited += 20;
    }
    ck_assert_msg(ks_children("sleep") == 0, "the shell outlived its client by 1 s");
    close(to_child[1]);
    close(from_child[0]);
    teardown();
}
END_TEST

START_TEST(exec_idle_session_is_ended) {
    setup();
    make_pod("web-1", 1);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "(sleep 8 | /usr/bin/python3 tests/integration/exec_client.py "
             "ws://127.0.0.1:%u/v1/projects/shop/pods/web-1/exec '%s' v4.channel.k8s.io hold) "
             ">/dev/null 2>&1 &",
             (unsigned)port, op);
    ck_assert_int_eq(system(cmd), 0);
    int waited = 0;
    while (ks_children("sleep") == 0 && waited < 3000) {
        ts_sleep_ms(50);
        waited += 50;
    }
    ck_assert_int_eq(ks_children("sleep"), 1);
    /* exec_idle_timeout_s is 3: no frame either way, so fleetgate ends it (and kubesim's side);
     * the 2 s head timeout of the HTTP watchdog does not apply to an upgraded connection */
    waited = 0;
    while (ks_children("sleep") > 0 && waited < 5000) {
        ts_sleep_ms(50);
        waited += 50;
    }
    ck_assert_msg(ks_children("sleep") == 0, "the idle session lived on");
    ts_sleep_ms(100);
    char path[192], audit[1 << 14] = "";
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    audit[fread(audit, 1, sizeof audit - 1, f)] = '\0';
    fclose(f);
    ck_assert_ptr_nonnull(strstr(audit, "\"endedBy\":\"idle-timeout\""));
    teardown();
}
END_TEST

START_TEST(exec_handshake_checked_strictly) {
    setup();
    make_pod("web-1", 1);
    static const struct {
        const char *why;
        const char *headers[5];
    } cases[] = {
        {"no upgrade", {"Sec-WebSocket-Protocol: v5.channel.k8s.io", NULL}},
        {"version 8",
         {"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 8",
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", NULL}},
        {"short key",
         {"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
          "Sec-WebSocket-Key: c2hvcnQ=", NULL}},
        {"no channel protocol",
         {"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[256];
        snprintf(url, sizeof url,
                 "http://127.0.0.1:%u/v1/projects/shop/pods/web-1/exec?command=true",
                 (unsigned)port);
        char *auth = fg_xasprintf("Authorization: Bearer %s", op);
        const char *h[8];
        size_t n = 0;
        h[n++] = auth;
        for (size_t j = 0; cases[i].headers[j]; j++)
            h[n++] = cases[i].headers[j];
        h[n] = NULL;
        th_resp_t r;
        ck_assert_int_eq(th_request("GET", url, h, NULL, -1, 0, &r), 0);
        free(auth);
        ck_assert_msg(r.status == 400, "%s: %ld", cases[i].why, r.status);
        char err[2048];
        ck_assert_msg(contract_check_headers("GET", "/v1/projects/shop/pods/web-1/exec", r.status,
                                             r.headers, r.body, r.len, err,
                                             sizeof err) == CONTRACT_VALID,
                      "%s: %s", cases[i].why, err);
        th_resp_free(&r);
    }
    /* a developer may read logs but not exec; another project's operator neither */
    char out[4096];
    ck_assert_int_ne(exec_client(dev, "v5.channel.k8s.io", "exit3", out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "403"));
    ck_assert_int_ne(exec_client(other, "v5.channel.k8s.io", "exit3", out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "403"));
    teardown();
}
END_TEST

/* A browser cannot set Authorization on a WebSocket: its token comes as one more offered
 * subprotocol, base64url.bearer.authorization.k8s.io.<base64url>, as Kubernetes accepts it. It
 * authenticates like the header, is never echoed (the client checks the 101 names the channel
 * protocol), and a malformed one is a 401. */
START_TEST(exec_token_as_a_subprotocol) {
    setup();
    make_pod("web-1", 1);
    char out[4096], tok[4096];
    snprintf(tok, sizeof tok, "subprotocol:%s", op);
    int st = exec_client(tok, "v5.channel.k8s.io", "exit3", out, sizeof out);
    ck_assert_msg(st == 0, "%s", out);
    st = exec_client(tok, "v4.channel.k8s.io", "stdin", out, sizeof out);
    ck_assert_msg(st == 0, "%s", out);
    snprintf(tok, sizeof tok, "subprotocol:%s", other);
    ck_assert_int_ne(exec_client(tok, "v5.channel.k8s.io", "exit3", out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "403"));
    static const char *const bad[] = {"subprotocol-raw:not*base64", "subprotocol-raw:IA",
                                      "subprotocol:not.a.jwt"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_ne(exec_client(bad[i], "v5.channel.k8s.io", "exit3", out, sizeof out), 0);
        ck_assert_msg(strstr(out, "401") != NULL, "%s: %s", bad[i], out);
    }
    /* not taken from a request that is no WebSocket upgrade */
    char url[256], *proto = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/projects/shop/pods/web-1", (unsigned)port);
    char b64[2048];
    fg_b64url_encode(op, strlen(op), b64);
    proto = fg_xasprintf("Sec-WebSocket-Protocol: base64url.bearer.authorization.k8s.io.%s", b64);
    const char *h[] = {proto, NULL};
    th_resp_t r;
    ck_assert_int_eq(th_request("GET", url, h, NULL, -1, 0, &r), 0);
    ck_assert_int_eq(r.status, 401);
    th_resp_free(&r);
    free(proto);
    teardown();
}
END_TEST

/* A client that hangs up (a FIN) while its socket is full is let go at once. Nothing makes
 * room in that socket any more, so a push that finds it full must not wait for room: it did,
 * until the stall timeout, when a client's hang-up came between such a push and its reset. */
START_TEST(follow_hang_up_with_a_full_socket_ends_at_once) {
    setup();
    busy_pod();
    int fd = follow_busy("1.1");
    ck_assert(wait_streams_open(1, 2000));
    ts_sleep_ms(1500); /* nothing read: both sockets' buffers fill, pushes find them full */
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    ck_assert_msg(wait_streams_open(0, 2000), "the stream outlived its client's hang-up");
    close(fd);
    teardown();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("logs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, logs_tail_and_parameters);
    tcase_add_test(tc, logs_refused_to_others);
    tcase_add_test(tc, follow_sees_new_lines_and_disconnect_closes_upstream);
    tcase_add_test(tc, streams_past_the_limit_get_429);
    tcase_add_test(tc, slow_reader_keeps_memory_bounded_and_drain_ends_streams);
    tcase_add_test(tc, app_logs_merge_every_pod_and_follow_new_ones);
    tcase_add_test(tc, follow_to_a_slow_reader_is_whole_chunks_in_order);
    tcase_add_test(tc, follow_hang_up_with_a_full_socket_ends_at_once);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("stall");
    tcase_set_timeout(ts, 60 + stall_test_s());
    tcase_add_test(ts, stalled_reader_keeps_rss_bounded_and_is_dropped);
    suite_add_tcase(s, ts);
    TCase *tx = tcase_create("exec");
    tcase_set_timeout(tx, 90);
    tcase_add_test(tx, exec_over_v5_and_v4_with_python_websocket);
    tcase_add_test(tx, exec_client_gone_ends_the_cluster_session);
    tcase_add_test(tx, exec_handshake_checked_strictly);
    tcase_add_test(tx, exec_idle_session_is_ended);
    tcase_add_test(tx, exec_token_as_a_subprotocol);
    suite_add_tcase(s, tx);
    return s;
}

int main(void) {
    return tm_run(suite());
}
