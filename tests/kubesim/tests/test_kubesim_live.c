/* kubesim's living cluster: controllers (deployment scale up/down and rollout, job completion and
 * failure, cron firing and suspend, scheduling), pod logs (windows, follow) and exec over
 * WebSocket (handshake, exit status on channel 3), all with zero delays. */
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ks_test.h"
#include "testmain.h"

static ks_cluster_t *live_cluster(void) {
    ks_cluster_t *c = test_cluster(100000);
    c->timing =
        (ks_timing_t){.start_ms = 0, .run_ms = 0, .heartbeat_ms = 60000, .log_lines_per_sec = 10.0};
    ks_node_spec_t nodes = {.count = 2,
                            .cpu_milli = 2000,
                            .memory_bytes = (int64_t)4 << 30,
                            .max_pods = 110,
                            .instance_type = "m5.large"};
    ck_assert_int_eq(ks_ctrl_start(c, &nodes), FG_OK);
    return c;
}

static void post(ks_cluster_t *c, const char *url, const char *body, int want) {
    call_t r;
    call(c, "POST", url, "application/json", body, &r);
    ck_assert_msg(r.resp.code == want, "%s: %d %s", url, r.resp.code, r.resp.body);
    call_free(&r);
}

static void patch(ks_cluster_t *c, const char *url, const char *body) {
    call_t r;
    call(c, "PATCH", url, "application/merge-patch+json", body, &r);
    ck_assert_msg(r.resp.code == 200, "%s: %d", url, r.resp.code);
    call_free(&r);
}

/* Polls url until path (dotted) has the integer want, or 10 s pass. */
static bool wait_int(ks_cluster_t *c, const char *url, const char *k1, const char *k2,
                     int64_t want) {
    for (int i = 0; i < 200; i++) {
        call_t r;
        call(c, "GET", url, NULL, NULL, &r);
        json_t *v = json_object_get(json_object_get(r.json, k1), k2);
        bool ok = json_is_integer(v) && json_integer_value(v) == want;
        call_free(&r);
        if (ok)
            return true;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Polls until the deployment's rollout is complete the way kubectl rollout status reads it. */
static bool wait_rolled_out(ks_cluster_t *c, const char *url, int64_t replicas) {
    for (int i = 0; i < 200; i++) {
        call_t r;
        call(c, "GET", url, NULL, NULL, &r);
        json_t *st = json_object_get(r.json, "status");
        json_t *meta = json_object_get(r.json, "metadata");
        bool ok = json_integer_value(json_object_get(st, "observedGeneration")) ==
                      json_integer_value(json_object_get(meta, "generation")) &&
                  json_integer_value(json_object_get(st, "updatedReplicas")) == replicas &&
                  json_integer_value(json_object_get(st, "replicas")) == replicas &&
                  json_integer_value(json_object_get(st, "availableReplicas")) == replicas;
        call_free(&r);
        if (ok)
            return true;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static size_t count_items(ks_cluster_t *c, const char *url) {
    call_t r;
    call(c, "GET", url, NULL, NULL, &r);
    size_t n = json_array_size(json_object_get(r.json, "items"));
    call_free(&r);
    return n;
}

static const char DEP[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},"
    "\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{"
    "\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"app\","
    "\"image\":\"nginx:1.25\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}}}}";

START_TEST(deployment_scales_and_rolls_out) {
    ks_cluster_t *c = live_cluster();
    const char *dep = "/apis/apps/v1/namespaces/default/deployments/web";
    post(c, "/apis/apps/v1/namespaces/default/deployments", DEP, 201);
    ck_assert(wait_rolled_out(c, dep, 3));
    ck_assert_int_eq(
        count_items(c, "/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DRunning"), 3);
    ck_assert_int_eq(count_items(c, "/apis/apps/v1/namespaces/default/replicasets"), 1);
    patch(c, dep, "{\"spec\":{\"replicas\":5}}");
    ck_assert(wait_rolled_out(c, dep, 5));
    patch(c, dep, "{\"spec\":{\"replicas\":2}}");
    ck_assert(wait_rolled_out(c, dep, 2));
    /* a template change rolls to a new ReplicaSet and scales the old one to 0 */
    patch(c, dep,
          "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":"
          "\"nginx:1.26\"}]}}}}");
    ck_assert(wait_rolled_out(c, dep, 2));
    ck_assert_int_eq(count_items(c, "/apis/apps/v1/namespaces/default/replicasets"), 2);
    ck_assert_int_eq(count_items(c, "/api/v1/namespaces/default/pods"), 2);
    /* paused: a template change makes no new ReplicaSet */
    patch(c, dep,
          "{\"spec\":{\"paused\":true,\"template\":{\"metadata\":{\"labels\":{\"v\":\"3\"}}}}}");
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300000000L};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(count_items(c, "/apis/apps/v1/namespaces/default/replicasets"), 2);
    ck_assert_uint_gt(
        count_items(c,
                    "/api/v1/namespaces/default/events?fieldSelector=metadata.namespace%3Ddefault"),
        5);
    ks_ctrl_stop(c);
    ks_cluster_free(c);
}
END_TEST

START_TEST(jobs_complete_or_fail_and_pods_that_do_not_fit_wait) {
    ks_cluster_t *c = live_cluster();
    post(c, "/apis/batch/v1/namespaces/default/jobs",
         "{\"metadata\":{\"name\":\"ok\"},\"spec\":{\"completions\":3,\"parallelism\":2,"
         "\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"w\","
         "\"image\":\"busybox:1.36\"}]}}}}",
         201);
    ck_assert(wait_int(c, "/apis/batch/v1/namespaces/default/jobs/ok", "status", "succeeded", 3));
    call_t r;
    call(c, "GET", "/apis/batch/v1/namespaces/default/jobs/ok", NULL, NULL, &r);
    ck_assert_ptr_nonnull(jstr(r.json, "status", "completionTime"));
    call_free(&r);
    post(c, "/apis/batch/v1/namespaces/default/jobs",
         "{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"backoffLimit\":1,\"template\":{"
         "\"metadata\":{\"annotations\":{\"kubesim.io/exit-code\":\"2\"}},\"spec\":{"
         "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"w\",\"image\":\"busybox\"}]}}}}",
         201);
    ck_assert(wait_int(c, "/apis/batch/v1/namespaces/default/jobs/bad", "status", "failed", 2));
    /* a pod too big for any node stays Pending with FailedScheduling */
    post(c, "/api/v1/namespaces/default/pods",
         "{\"metadata\":{\"name\":\"huge\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":"
         "\"x\",\"resources\":{\"requests\":{\"cpu\":\"64\"}}}]}}",
         201);
    bool failed_sched = false;
    for (int i = 0; i < 100 && !failed_sched; i++) {
        call(c, "GET", "/api/v1/namespaces/default/events", NULL, NULL, &r);
        failed_sched = r.resp.body && strstr(r.resp.body, "FailedScheduling") != NULL;
        call_free(&r);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert(failed_sched);
    call(c, "GET", "/api/v1/namespaces/default/pods/huge", NULL, NULL, &r);
    ck_assert_str_eq(jstr(r.json, "status", "phase"), "Pending");
    call_free(&r);
    ks_ctrl_stop(c);
    ks_cluster_free(c);
}
END_TEST

START_TEST(cronjob_fires_on_schedule_unless_suspended) {
    ks_cluster_t *c = live_cluster();
    ks_ctrl_stop(c); /* driven by hand: ticks and the clock */
    /* the ticks below count minutes of the wall clock (plus the offset): none of them may
     * straddle a minute boundary, or a tick meant to be "the same minute" sees the next one */
    time_t wall = time(NULL);
    if (wall % 60 > 50)
        sleep((unsigned)(61 - wall % 60));
#define CJ                                                                                         \
    "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"schedule\":\"*/1 * * * *\","                      \
    "\"suspend\":%s,\"jobTemplate\":{\"spec\":{\"template\":{\"spec\":{"                           \
    "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"w\",\"image\":"                       \
    "\"busybox\"}]}}}}}}"
    char body[512];
    snprintf(body, sizeof(body), CJ, "tick", "false");
    post(c, "/apis/batch/v1/namespaces/default/cronjobs", body, 201);
    snprintf(body, sizeof(body), CJ, "quiet", "true");
    post(c, "/apis/batch/v1/namespaces/default/cronjobs", body, 201);
    ks_ctrl_tick(c);
    ck_assert_int_eq(count_items(c, "/apis/batch/v1/namespaces/default/jobs"), 0);
    c->clock_offset_s = 125;
    ks_ctrl_tick(c);
    ck_assert_int_eq(count_items(c, "/apis/batch/v1/namespaces/default/jobs"), 1);
    ck_assert_int_eq(
        count_items(
            c, "/apis/batch/v1/namespaces/default/jobs?labelSelector=kubesim.io%2Fcronjob%3Dtick"),
        1);
    ks_ctrl_tick(c); /* the same minute does not fire twice */
    ck_assert_int_eq(count_items(c, "/apis/batch/v1/namespaces/default/jobs"), 1);
    call_t r;
    call(c, "GET", "/apis/batch/v1/namespaces/default/cronjobs/tick", NULL, NULL, &r);
    ck_assert_ptr_nonnull(jstr(r.json, "status", "lastScheduleTime"));
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

START_TEST(logs_windows_errors_and_follow) {
    ks_cluster_t *c = live_cluster();
    post(c, "/api/v1/namespaces/default/pods",
         "{\"metadata\":{\"name\":\"two\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":"
         "\"x\"},{\"name\":\"b\",\"image\":\"y\"}]}}",
         201);
    call_t r;
    for (int i = 0; i < 100; i++) {
        call(c, "GET", "/api/v1/namespaces/default/pods/two", NULL, NULL, &r);
        bool running = strcmp(jstr(r.json, "status", "phase") ?: "", "Running") == 0;
        call_free(&r);
        if (running)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
        nanosleep(&ts, NULL);
    }
    call(c, "GET", "/api/v1/namespaces/default/pods/two/log", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 400);
    ck_assert_str_eq(jstr(r.json, "message", NULL),
                     "a container name must be specified for pod two, choose one of: [a b]");
    call_free(&r);
    call(c, "GET", "/api/v1/namespaces/default/pods/two/log?container=a&previous=true", NULL, NULL,
         &r);
    ck_assert_int_eq(r.resp.code, 400);
    call_free(&r);
    c->clock_offset_s = 3; /* 3 s at 10 lines/s */
    call(c, "GET", "/api/v1/namespaces/default/pods/two/log?container=a", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 200);
    ck_assert_str_eq(r.resp.content_type, "text/plain");
    ck_assert_ptr_nonnull(strstr(r.resp.body, "msg=\"starting\""));
    call_free(&r);
    call(c, "GET",
         "/api/v1/namespaces/default/pods/two/log?container=b&tailLines=2&timestamps=true", NULL,
         NULL, &r);
    int lines = 0;
    for (size_t i = 0; i < r.resp.len; i++)
        lines += r.resp.body[i] == '\n';
    ck_assert_int_eq(lines, 2);
    ck_assert_ptr_nonnull(strstr(r.resp.body, "Z level=info"));
    call_free(&r);
    call(c, "GET", "/api/v1/namespaces/default/pods/two/log?container=b&limitBytes=10", NULL, NULL,
         &r);
    ck_assert_int_eq(r.resp.len, 10);
    call_free(&r);
    /* follow: lines keep coming, and the stream ends when the pod goes away */
    call(c, "GET", "/api/v1/namespaces/default/pods/two/log?container=a&follow=true&tailLines=1",
         NULL, NULL, &r);
    ck_assert_ptr_nonnull(r.resp.stream.next);
    fg_buf_t b;
    fg_buf_init(&b, 1 << 20);
    ck_assert_int_eq(r.resp.stream.next(r.resp.stream.st, &b, 100), FG_OK);
    size_t first = b.len;
    ck_assert_uint_gt(first, 0);
    c->clock_offset_s = 5;
    ck_assert_int_eq(r.resp.stream.next(r.resp.stream.st, &b, 100), FG_OK);
    ck_assert_uint_gt(b.len, first);
    call_t d;
    call(c, "DELETE", "/api/v1/namespaces/default/pods/two", NULL, NULL, &d);
    call_free(&d);
    ck_assert_int_eq(r.resp.stream.next(r.resp.stream.st, &b, 100), FG_ENOENT);
    fg_buf_free(&b);
    call_free(&r);
    ks_ctrl_stop(c);
    ks_cluster_free(c);
}
END_TEST

typedef struct {
    ks_upgrade_t up;
    int fd;
} run_arg_t;

static void *run_session(void *arg) {
    run_arg_t *a = arg;
    a->up.run(a->up.st, a->fd, NULL, 0);
    return NULL;
}

START_TEST(exec_reports_the_exit_status_on_channel_3) {
    ks_cluster_t *c = live_cluster();
    post(c, "/api/v1/namespaces/default/pods",
         "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\","
         "\"image\":\"x\"}]}}",
         201);
    call_t r;
    for (int i = 0; i < 100; i++) {
        call(c, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, &r);
        bool running = strcmp(jstr(r.json, "status", "phase") ?: "", "Running") == 0;
        call_free(&r);
        if (running)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
        nanosleep(&ts, NULL);
    }
    const char *url = "/api/v1/namespaces/default/pods/p/exec?command=sh&command=-c&command="
                      "echo%20hi%3B%20exit%203&stdout=true&stderr=true";
    call(c, "GET", url, NULL, NULL, &r); /* no upgrade headers */
    ck_assert_int_eq(r.resp.code, 400);
    call_free(&r);
    ks_req_t req = {.method = "GET",
                    .path = "/api/v1/namespaces/default/pods/p/exec",
                    .authorization = "Bearer tok",
                    .ws_key = "dGhlIHNhbXBsZSBub25jZQ==",
                    .ws_protocol = "v5.channel.k8s.io, v4.channel.k8s.io"};
    const char *keys[] = {"command", "command", "command", "stdout", "stderr"};
    const char *vals[] = {"sh", "-c", "echo hi; exit 3", "true", "true"};
    for (size_t i = 0; i < 5; i++) {
        req.keys[i] = keys[i];
        req.values[i] = vals[i];
    }
    req.nquery = 5;
    ks_resp_t resp;
    ks_handle(c, &req, &resp);
    ck_assert_int_eq(resp.code, 101);
    ck_assert_str_eq(resp.upgrade.protocol, "v5.channel.k8s.io");
    ck_assert_str_eq(resp.upgrade.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    /* a client offering only v4 gets v4; one offering neither gets a 400 */
    ks_resp_t r4;
    req.ws_protocol = "v4.channel.k8s.io";
    ks_handle(c, &req, &r4);
    ck_assert_int_eq(r4.code, 101);
    ck_assert_str_eq(r4.upgrade.protocol, "v4.channel.k8s.io");
    ks_resp_free(&r4);
    req.ws_protocol = "channel.k8s.io";
    ks_handle(c, &req, &r4);
    ck_assert_int_eq(r4.code, 400);
    ks_resp_free(&r4);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    run_arg_t arg = {.up = resp.upgrade, .fd = sv[0]};
    resp.upgrade.run = NULL;
    pthread_t th;
    pthread_create(&th, NULL, run_session, &arg);
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(sv[1], buf + len, sizeof(buf) - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        if (memmem(buf, len, "\x88\x02", 2) != NULL) /* the close frame */
            break;
    }
    pthread_join(th, NULL);
    buf[len] = '\0';
    /* frame 1: binary, 4 bytes: channel 1 + "hi\n" */
    ck_assert_int_ge(len, 6);
    ck_assert_int_eq((unsigned char)buf[0], 0x82);
    ck_assert_int_eq(buf[1], 4);
    ck_assert_int_eq(buf[2], 1);
    ck_assert(memcmp(buf + 3, "hi\n", 3) == 0);
    const char *st = memmem(buf, len, "NonZeroExitCode", 15);
    ck_assert_ptr_nonnull(st);
    ck_assert_ptr_nonnull(memmem(buf, len, "{\"reason\":\"ExitCode\",\"message\":\"3\"}", 35));
    close(sv[1]);
    close(sv[0]);
    ks_resp_free(&resp);
    ks_ctrl_stop(c);
    ks_cluster_free(c);
}
END_TEST

static uint64_t test_start;

static void timer_start(void) {
    test_start = fg_now_ns();
}

static void timer_report(void) {
    fprintf(stderr, "  %.2f s\n", (double)(fg_now_ns() - test_start) / 1e9);
}

static Suite *suite(void) {
    Suite *s = suite_create("kubesim_live");
    TCase *tc = tcase_create("live");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, timer_start, timer_report);
    tcase_add_test(tc, deployment_scales_and_rolls_out);
    tcase_add_test(tc, jobs_complete_or_fail_and_pods_that_do_not_fit_wait);
    tcase_add_test(tc, cronjob_fires_on_schedule_unless_suspended);
    tcase_add_test(tc, logs_windows_errors_and_follow);
    tcase_add_test(tc, exec_reports_the_exit_status_on_channel_3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
