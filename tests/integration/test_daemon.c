/* Integration tests of the built daemon (build/fleetgate): flags, --check-config, the meta
 * endpoints over HTTP, and the graceful drain on SIGTERM with a request in flight. */
#include "fleetgate/core.h"
#include "testhttp.h"
#include "testredis.h"
#include "testmain.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const base_config =
    "{\"workers\": 2, \"limits\": {\"max_body_bytes\": 1024, \"drain_timeout_s\": %d},"
    " \"openapi_file\": \"api/openapi.yaml\", \"docs_file\": \"/nonexistent/docs.html\"}";

/* Runs the daemon binary with args, capturing stdout+stderr; returns the exit status. */
static int run_daemon(const char *const *args, char *out, size_t outlen) {
    char path[] = "/tmp/fg-test-out-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        const char *argv[16] = {th_bin("fleetgate")};
        for (size_t i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, outlen - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *write_temp(const char *text) {
    char *path = fg_xstrdup("/tmp/fg-test-cfg-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

START_TEST(version_and_help_exit_0) {
    char out[4096];
    const char *v[] = {"--version", NULL};
    ck_assert_int_eq(run_daemon(v, out, sizeof out), 0);
    ck_assert_msg(strncmp(out, "fleetgate " FG_VERSION, 10 + strlen(FG_VERSION)) == 0, "%s", out);
    const char *h[] = {"--help", NULL};
    ck_assert_int_eq(run_daemon(h, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "--check-config"));
}
END_TEST

START_TEST(bad_usage_exits_2) {
    char out[4096];
    const char *none[] = {NULL};
    ck_assert_int_eq(run_daemon(none, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "-c FILE is required"));
    const char *bogus[] = {"--bogus", NULL};
    ck_assert_int_eq(run_daemon(bogus, out, sizeof out), 2);
}
END_TEST

/* conf/demo.json trusts the demo's JWT key, which `make demo` generates (no key is committed):
 * make it first, as `make demo` would (idempotent, and serialised between concurrent runs). */
static void demo_key(void) {
    ck_assert_int_eq(system("conf/demo-auth.sh build/demo --keys-only"), 0);
}

START_TEST(check_config_valid_exits_0) {
    char out[4096];
    demo_key();
    const char *a[] = {"-c", "conf/demo.json", "--check-config", NULL};
    ck_assert_msg(run_daemon(a, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "configuration is valid"));
}
END_TEST

/* The demo's JWT secrets (its signing key and tokens) are readable by their owner only. */
START_TEST(demo_auth_secrets_are_private_files) {
    char dir[] = "/tmp/fg-demo-auth-XXXXXX", cmd[256], path[320];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "umask 022; conf/demo-auth.sh %s/d >/dev/null", dir);
    ck_assert_int_eq(system(cmd), 0);
    static const char *const secrets[] = {"jwt-private.pem", "token", "admin-token"};
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/d/%s", dir, secrets[i]);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg((st.st_mode & 077) == 0, "%s is mode %o", secrets[i], st.st_mode & 0777);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(check_config_invalid_exits_2_naming_each_key) {
    char *path = write_temp("{\"workers\": 0, \"clusters\": [{\"name\": \"a\", \"zone\": \"z\","
                            " \"url\": \"ftp://x\"}], \"typo\": 1}");
    char out[4096], want[512];
    const char *a[] = {"-c", path, "--check-config", NULL};
    ck_assert_int_eq(run_daemon(a, out, sizeof out), 2);
    snprintf(want, sizeof want,
             "%s: workers: must be from 1 to 256 (got 0)\n"
             "%s: clusters[0].url: not an http(s) URL (got \"ftp://x\")\n"
             "%s: typo: unknown key\n",
             path, path, path);
    ck_assert_str_eq(out, want);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(bad_listen_flag_exits_2) {
    char out[4096];
    demo_key();
    const char *a[] = {"-c", "conf/demo.json", "--listen", "nowhere", "--check-config", NULL};
    ck_assert_int_eq(run_daemon(a, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--listen: not HOST:PORT"));
}
END_TEST

static pid_t start(uint16_t *port, int drain_s) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, base_config, drain_s);
    pid_t pid = th_daemon_start(cfg, port, NULL);
    ck_assert_int_gt(pid, 0);
    return pid;
}

static void get(uint16_t port, const char *path, th_resp_t *r) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, r), 0);
}

START_TEST(meta_endpoints_answer) {
    uint16_t port;
    /* /readyz needs Redis to answer: a private one. */
    tr_redis_t rs;
    ck_assert_int_eq(tr_redis_start(&rs), 0);
    char cfg[768];
    snprintf(cfg, sizeof cfg,
             "{\"workers\": 2, \"redis\": {\"url\": \"%s\"}, \"limits\": {\"max_body_bytes\":"
             " 1024}, \"openapi_file\": \"api/openapi.yaml\","
             " \"docs_file\": \"/nonexistent/docs.html\"}",
             rs.url);
    pid_t pid = th_daemon_start(cfg, &port, NULL);
    ck_assert_int_gt(pid, 0);
    th_resp_t r;
    char ct[128];

    get(port, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"status\":\"ok\"}");
    th_resp_free(&r);

    get(port, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body,
                     "{\"status\":\"ready\",\"checks\":{\"server\":\"ok\",\"redis\":\"ok\"}}");
    th_resp_free(&r);

    get(port, "/openapi.yaml", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(th_header(&r, "Content-Type", ct, sizeof ct), "application/yaml");
    char *spec = NULL;
    size_t spec_len;
    ck_assert_int_eq(fg_read_file("api/openapi.yaml", 8 << 20, &spec, &spec_len), FG_OK);
    ck_assert_uint_eq(r.len, spec_len);
    ck_assert(memcmp(r.body, spec, spec_len) == 0);
    free(spec);
    th_resp_free(&r);

    get(port, "/docs", &r); /* docs_file points nowhere in this config */
    ck_assert_int_eq(r.status, 404);
    th_resp_free(&r);

    get(port, "/metrics", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(th_header(&r, "Content-Type", ct, sizeof ct),
                     "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_ptr_nonnull(
        strstr(r.body,
               "fleetgate_http_requests_total{route=\"/readyz\",method=\"GET\",status=\"200\"} 1"));
    ck_assert_ptr_nonnull(strstr(r.body,
                                 "fleetgate_http_request_duration_seconds_bucket{route="
                                 "\"/readyz\",method=\"GET\",status=\"200\",le=\"+Inf\"} 1"));
    ck_assert_ptr_nonnull(strstr(r.body, "fleetgate_build_info{version=\"" FG_VERSION "\""));
    th_resp_free(&r);
    /* in flight: this /metrics request itself, once the ones before have completed (a client
     * may have its answer a moment before the server counts the request done) */
    for (int waited = 0;; waited += 20) {
        get(port, "/metrics", &r);
        bool one = strstr(r.body, "fleetgate_http_requests_in_flight 1\n") != NULL;
        const char *line = strstr(r.body, "fleetgate_http_requests_in_flight ");
        char seen[64];
        snprintf(seen, sizeof seen, "%.*s", line ? (int)strcspn(line, "\n") : 4,
                 line ? line : "none");
        th_resp_free(&r);
        if (one)
            break;
        ck_assert_msg(waited < 2000, "requests in flight never came back to 1: %s", seen);
        usleep(20 * 1000);
    }

    ck_assert_int_eq(th_daemon_stop(pid, SIGTERM, 5000), 0);
    tr_redis_stop(&rs);
}
END_TEST

START_TEST(error_statuses_are_problems) {
    uint16_t port;
    pid_t pid = start(&port, 5);
    th_resp_t r;
    char ct[128], url[128];

    get(port, "/v1/nothing-here", &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(th_header(&r, "Content-Type", ct, sizeof ct), "application/problem+json");
    th_resp_free(&r);

    snprintf(url, sizeof url, "http://127.0.0.1:%u/healthz", (unsigned)port);
    ck_assert_int_eq(th_request("DELETE", url, NULL, NULL, -1, 0, &r), 0);
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(th_header(&r, "Allow", ct, sizeof ct), "GET, HEAD");
    th_resp_free(&r);

    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *h[] = {"Content-Type: application/json", NULL};
    ck_assert_int_eq(th_request("POST", url, h, big, (long)strlen(big), 0, &r), 0);
    ck_assert_int_eq(r.status, 413);
    ck_assert_str_eq(th_header(&r, "Content-Type", ct, sizeof ct), "application/problem+json");
    th_resp_free(&r);

    ck_assert_int_eq(th_daemon_stop(pid, SIGTERM, 5000), 0);
}
END_TEST

START_TEST(sigterm_lets_in_flight_request_finish_then_exits_0) {
    uint16_t port;
    pid_t pid = start(&port, 10);
    int fd = th_connect(port);
    const char *head = "GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab";
    ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    usleep(200 * 1000);
    kill(pid, SIGTERM);
    usleep(300 * 1000);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, WNOHANG), 0); /* still draining */
    ck_assert_int_lt(th_connect(port), 0);               /* but no longer accepting */
    ck_assert_int_eq(write(fd, "cd", 2), 2);
    char buf[2048];
    th_read_all(fd, buf, sizeof buf, 3000);
    close(fd);
    ck_assert_msg(strstr(buf, "HTTP/1.1 200") && strstr(buf, "{\"status\":\"ok\"}"), "%s", buf);
    ck_assert_int_eq(th_daemon_stop(pid, 0, 5000), 0);
}
END_TEST

/* The access log is written in batches: after SIGTERM every request answered has its line, each
 * a whole JSON object with the same members as before (nothing lost in the batch). */
START_TEST(access_lines_complete_after_sigterm) {
    uint16_t port;
    char log_path[] = "/tmp/fg-test-access-XXXXXX";
    int lfd = mkstemp(log_path);
    ck_assert_int_ge(lfd, 0);
    close(lfd);
    char *cfg = fg_xasprintf(base_config, 10);
    pid_t pid = th_daemon_start(cfg, &port, log_path);
    free(cfg);
    ck_assert_int_gt(pid, 0);
    enum { N = 300 };
    char url[128];
    for (int i = 0; i < N; i++) {
        th_resp_t r;
        snprintf(url, sizeof url, "http://127.0.0.1:%u/healthz?i=%d", (unsigned)port, i);
        ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
        th_resp_free(&r);
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/%%ff%%fe%%22%%0a", (unsigned)port);
    th_resp_t r;
    ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
    th_resp_free(&r);
    ck_assert_int_eq(th_daemon_stop(pid, SIGTERM, 5000), 0);

    FILE *f = fopen(log_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[65536];
    int healthz = 0, odd = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = NULL;
        ck_assert_msg(fg_json_load(line, strlen(line), &j, NULL, 0) == FG_OK, "not JSON: %s", line);
        const char *msg = json_string_value(json_object_get(j, "msg"));
        if (msg && strcmp(msg, "access") == 0) {
            static const char *const members[] = {"ts",     "level",     "requestId", "method",
                                                  "client", "path",      "route",     "status",
                                                  "bytes",  "durationMs"};
            for (size_t k = 0; k < sizeof members / sizeof members[0]; k++)
                ck_assert_msg(json_object_get(j, members[k]) != NULL, "no %s in %s", members[k],
                              line);
            ck_assert(json_is_real(json_object_get(j, "durationMs")));
            const char *path = json_string_value(json_object_get(j, "path"));
            healthz += strcmp(path, "/healthz") == 0;
            odd += strncmp(path, "/v1/\\xff\\xfe\"\n", 11) == 0;
        }
        json_decref(j);
    }
    fclose(f);
    unlink(log_path);
    ck_assert_int_ge(healthz, N); /* and the start-up probes of /healthz */
    ck_assert_int_eq(odd, 1);
}
END_TEST

START_TEST(drain_timeout_bounds_the_wait) {
    uint16_t port;
    pid_t pid = start(&port, 1);
    int fd = th_connect(port);
    const char *head = "GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab";
    ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    usleep(200 * 1000);
    uint64_t t0 = fg_now_ns();
    ck_assert_int_eq(th_daemon_stop(pid, SIGTERM, 5000), 0);
    double waited = (double)(fg_now_ns() - t0) / 1e9;
    ck_assert_msg(waited >= 0.9 && waited < 4.0, "waited %.2fs", waited);
    close(fd);
}
END_TEST

START_TEST(second_signal_exits_at_once) {
    uint16_t port;
    pid_t pid = start(&port, 30);
    int fd = th_connect(port);
    const char *head = "GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab";
    ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    usleep(200 * 1000);
    kill(pid, SIGTERM);
    usleep(200 * 1000);
    ck_assert_int_eq(th_daemon_stop(pid, SIGINT, 2000), 1);
    close(fd);
}
END_TEST

static Suite *daemon_suite(void) {
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, version_and_help_exit_0);
    tcase_add_test(tc, bad_usage_exits_2);
    tcase_add_test(tc, check_config_valid_exits_0);
    tcase_add_test(tc, demo_auth_secrets_are_private_files);
    tcase_add_test(tc, check_config_invalid_exits_2_naming_each_key);
    tcase_add_test(tc, bad_listen_flag_exits_2);
    tcase_add_test(tc, meta_endpoints_answer);
    tcase_add_test(tc, error_statuses_are_problems);
    tcase_add_test(tc, sigterm_lets_in_flight_request_finish_then_exits_0);
    tcase_add_test(tc, access_lines_complete_after_sigterm);
    tcase_add_test(tc, drain_timeout_bounds_the_wait);
    tcase_add_test(tc, second_signal_exits_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(daemon_suite());
}
