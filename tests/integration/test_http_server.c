/* Integration tests of the HTTP core: a real server (in this process, on a free port) with a
 * small route table, called over HTTP with libcurl and raw sockets. Covers the dispatcher's
 * generic answers (400, 404, 405, 413, 415, 503), problems with extension members, request ids,
 * keep-alive and draining. */
#include "fleetgate/http.h"
#include "testhttp.h"
#include "testmain.h"

#include <check.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int h_echo(fg_req_t *req) {
    json_t *got = fg_req_json(req);
    return fg_reply_json(req, 200, json_pack("{s:O*}", "got", got));
}

static int h_hello(fg_req_t *req) {
    return fg_reply_json(req, 200, json_pack("{s:s}", "project", fg_req_param(req, "project")));
}

static int h_forgets_to_reply(fg_req_t *req) {
    (void)req;
    return FG_OK;
}

/* A problem with extension members; the "status" member cannot replace the standard one. */
static int h_problem_ext(fg_req_t *req) {
    json_t *ext = json_pack("{s:[{s:s}],s:i}", "errors", "parameter", "limit", "status", 200);
    return fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext, "limit must be %d..%d", 1, 1000);
}

/* Header lines past what the request holds inline (768 bytes) are allocated: all go out. */
static int h_many_headers(fg_req_t *req) {
    char name[16], value[128];
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof name, "X-Many-%d", i);
        memset(value, 'a' + i, sizeof value - 1);
        value[sizeof value - 1] = '\0';
        fg_req_add_header(req, name, value);
    }
    return fg_reply_json(req, 200, json_object());
}

/* A write whose handler waits, at most 5 s, until the test lets it go (held_release); it says
 * whether it was let go or gave up waiting. */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static bool held_entered, held_open, held_gave_up;

static int h_held_write(fg_req_t *req) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&held_mu);
    held_entered = true;
    pthread_cond_broadcast(&held_cv);
    while (!held_open && pthread_cond_timedwait(&held_cv, &held_mu, &until) == 0)
        ;
    held_gave_up = !held_open;
    bool released = held_open;
    pthread_mutex_unlock(&held_mu);
    return fg_reply_json(req, 200, json_pack("{s:b}", "released", released));
}

static void held_reset(void) {
    pthread_mutex_lock(&held_mu);
    held_entered = held_open = held_gave_up = false;
    pthread_mutex_unlock(&held_mu);
}

static bool held_wait_entered(void) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&held_mu);
    while (!held_entered && pthread_cond_timedwait(&held_cv, &held_mu, &until) == 0)
        ;
    bool entered = held_entered;
    pthread_mutex_unlock(&held_mu);
    return entered;
}

static void held_release(void) {
    pthread_mutex_lock(&held_mu);
    held_open = true;
    pthread_cond_broadcast(&held_cv);
    pthread_mutex_unlock(&held_mu);
}

static const fg_route_t routes[] = {
    {.method = "POST", .pattern = "/echo", .handler = h_echo, .body = FG_BODY_JSON},
    {.method = "POST", .pattern = "/held", .handler = h_held_write, .body = FG_BODY_NONE},
    {.method = "POST",
     .pattern = "/small",
     .handler = h_echo,
     .body = FG_BODY_JSON,
     .body_limit = 16},
    {.method = "POST", .pattern = "/maybe", .handler = h_echo, .body = FG_BODY_JSON_OPTIONAL},
    {.method = "GET", .pattern = "/v1/projects/{project}", .handler = h_hello},
    {.method = "GET", .pattern = "/broken", .handler = h_forgets_to_reply},
    {.method = "GET", .pattern = "/problem-ext", .handler = h_problem_ext},
    {.method = "GET", .pattern = "/many-headers", .handler = h_many_headers},
};

static fg_http_server_t *srv;
static char base[64];

static void start_server(unsigned workers) {
    fg_http_options_t o = {.host = "127.0.0.1",
                           .port = 0,
                           .workers = workers,
                           .max_body_bytes = 1024,
                           .max_connections = 64,
                           .connection_timeout_s = 5};
    ck_assert_int_eq(fg_http_server_start(&srv, &o, routes, sizeof routes / sizeof routes[0]),
                     FG_OK);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)fg_http_server_port(srv));
}

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    start_server(2);
}

static void teardown(void) {
    fg_http_server_free(srv);
    fg_metrics_reset();
}

static void call(const char *method, const char *path, const char *const *hdrs, const char *body,
                 int chunked, th_resp_t *r) {
    char url[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    long len = body ? (long)strlen(body) : -1;
    ck_assert_int_eq(th_request(method, url, hdrs, body, len, chunked, r), 0);
}

/* Asserts a problem+json answer with this status and type slug; returns the parsed body. */
static json_t *assert_problem(const th_resp_t *r, long status, const char *slug) {
    char ct[128], rid[128], want_type[128];
    ck_assert_int_eq(r->status, status);
    ck_assert_str_eq(th_header(r, "Content-Type", ct, sizeof ct), "application/problem+json");
    json_error_t e;
    json_t *p = json_loads(r->body, 0, &e);
    ck_assert_msg(p != NULL, "not JSON: %s", r->body);
    snprintf(want_type, sizeof want_type, "urn:fleetgate:problem:%s", slug);
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")), want_type);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "status")), status);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(p, "title")));
    ck_assert_str_eq(json_string_value(json_object_get(p, "requestId")),
                     th_header(r, "X-Request-Id", rid, sizeof rid));
    return p;
}

START_TEST(json_body_reaches_handler) {
    th_resp_t r;
    const char *h[] = {"Content-Type: application/json", NULL};
    call("POST", "/echo", h, "{\"a\": [1, 2]}", 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"got\":{\"a\":[1,2]}}");
    th_resp_free(&r);
}
END_TEST

START_TEST(merge_patch_media_type_is_json) {
    th_resp_t r;
    const char *h[] = {"Content-Type: application/merge-patch+json; charset=utf-8", NULL};
    call("POST", "/echo", h, "{}", 0, &r);
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);
}
END_TEST

START_TEST(path_params_reach_handler) {
    th_resp_t r;
    call("GET", "/v1/projects/shop", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"project\":\"shop\"}");
    th_resp_free(&r);
}
END_TEST

START_TEST(non_json_body_gets_415) {
    th_resp_t r;
    const char *h[] = {"Content-Type: text/plain", NULL};
    call("POST", "/echo", h, "hello", 0, &r);
    json_t *p = assert_problem(&r, 415, "unsupported-media-type");
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "the body must be application/json (got text/plain)");
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

START_TEST(malformed_json_gets_400_saying_where) {
    th_resp_t r;
    const char *h[] = {"Content-Type: application/json", NULL};
    call("POST", "/echo", h, "{\"a\": 1,\n \"b\": }", 0, &r);
    json_t *p = assert_problem(&r, 400, "malformed-json");
    const char *detail = json_string_value(json_object_get(p, "detail"));
    ck_assert_msg(strstr(detail, "line 2, column") != NULL, "%s", detail);
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

START_TEST(duplicate_keys_get_400) {
    th_resp_t r;
    const char *h[] = {"Content-Type: application/json", NULL};
    call("POST", "/echo", h, "{\"a\": 1, \"a\": 2}", 0, &r);
    json_t *p = assert_problem(&r, 400, "malformed-json");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "duplicate"));
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

START_TEST(missing_required_body_gets_400) {
    th_resp_t r;
    call("POST", "/echo", NULL, NULL, 0, &r);
    json_decref(assert_problem(&r, 400, "bad-request"));
    th_resp_free(&r);
    call("POST", "/maybe", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{}");
    th_resp_free(&r);
}
END_TEST

START_TEST(body_over_server_limit_gets_413) {
    char big[2048];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '1';
    const char *h[] = {"Content-Type: application/json", NULL};
    th_resp_t r;
    call("POST", "/echo", h, big, 0, &r);
    json_decref(assert_problem(&r, 413, "payload-too-large"));
    th_resp_free(&r);
}
END_TEST

START_TEST(chunked_body_over_limit_gets_413) {
    char big[4096];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '1';
    const char *h[] = {"Content-Type: application/json", NULL};
    th_resp_t r;
    call("POST", "/echo", h, big, 1, &r);
    json_decref(assert_problem(&r, 413, "payload-too-large"));
    th_resp_free(&r);
}
END_TEST

START_TEST(route_body_limit_overrides_server_limit) {
    const char *h[] = {"Content-Type: application/json", NULL};
    th_resp_t r;
    call("POST", "/small", h, "{\"k\": \"0123456789\"}", 0, &r);
    json_t *p = assert_problem(&r, 413, "payload-too-large");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "16 bytes"));
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

START_TEST(unknown_route_gets_404) {
    th_resp_t r;
    call("GET", "/nope", NULL, NULL, 0, &r);
    json_t *p = assert_problem(&r, 404, "route-not-found");
    ck_assert_str_eq(json_string_value(json_object_get(p, "instance")), "/nope");
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

/* A made-up method is counted as "other": clients choose methods, and each distinct label value
 * would be one more series of the request metric, kept and searched forever. */
START_TEST(made_up_methods_are_one_metric_series) {
    static const char *const methods[] = {"FROBNICATE", "BREW", "X-MADE-UP"};
    for (size_t i = 0; i < 3; i++) {
        th_resp_t r;
        call(methods[i], "/nope", NULL, NULL, 0, &r);
        th_resp_free(&r);
    }
    /* a request is counted when it completes, just after its answer went out */
    const char *want =
        "fleetgate_http_requests_total{route=\"unmatched\",method=\"other\",status=\"404\"} 3";
    fg_buf_t m;
    fg_buf_init(&m, 1 << 20);
    for (int i = 0; i < 200; i++) {
        fg_buf_reset(&m);
        ck_assert_int_eq(fg_metrics_render(&m), FG_OK);
        if (strstr(m.data, want))
            break;
        usleep(10000);
    }
    ck_assert_msg(strstr(m.data, want), "no %s in %s", want, m.data);
    ck_assert_ptr_null(strstr(m.data, "FROBNICATE"));
    fg_buf_free(&m);
}
END_TEST

START_TEST(wrong_method_gets_405_with_allow) {
    th_resp_t r;
    char allow[64];
    call("DELETE", "/echo", NULL, NULL, 0, &r);
    json_decref(assert_problem(&r, 405, "method-not-allowed"));
    ck_assert_str_eq(th_header(&r, "Allow", allow, sizeof allow), "POST");
    th_resp_free(&r);
}
END_TEST

START_TEST(handler_without_reply_gets_500) {
    th_resp_t r;
    call("GET", "/broken", NULL, NULL, 0, &r);
    json_decref(assert_problem(&r, 500, "internal"));
    th_resp_free(&r);
}
END_TEST

START_TEST(problem_ext_adds_members_after_the_standard_ones) {
    th_resp_t r;
    char ct[128];
    const char *h[] = {"X-Request-Id: rid-1", NULL};
    call("GET", "/problem-ext", h, NULL, 0, &r);
    ck_assert_int_eq(r.status, 422);
    ck_assert_str_eq(th_header(&r, "Content-Type", ct, sizeof ct), "application/problem+json");
    ck_assert_str_eq(r.body, "{\"type\":\"urn:fleetgate:problem:invalid\",\"title\":\"Invalid "
                             "request\",\"status\":422,\"detail\":\"limit must be 1..1000\","
                             "\"instance\":\"/problem-ext\",\"requestId\":\"rid-1\","
                             "\"errors\":[{\"parameter\":\"limit\"}]}");
    th_resp_free(&r);
}
END_TEST

START_TEST(request_id_echoed_when_valid_replaced_when_not) {
    th_resp_t r;
    char rid[128];
    const char *good[] = {"X-Request-Id: trace-42.a:b_c", NULL};
    call("GET", "/v1/projects/x", good, NULL, 0, &r);
    ck_assert_str_eq(th_header(&r, "X-Request-Id", rid, sizeof rid), "trace-42.a:b_c");
    th_resp_free(&r);
    const char *bad[] = {"X-Request-Id: <script>", NULL};
    call("GET", "/v1/projects/x", bad, NULL, 0, &r);
    th_header(&r, "X-Request-Id", rid, sizeof rid);
    ck_assert_uint_eq(strlen(rid), 32);
    ck_assert_str_ne(rid, "<script>");
    th_resp_free(&r);
}
END_TEST

START_TEST(keep_alive_serves_two_requests_on_one_connection) {
    int fd = th_connect(fg_http_server_port(srv));
    ck_assert_int_ge(fd, 0);
    const char *two = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      "Content-Length: 2\r\n\r\n{}"
                      "GET /v1/projects/b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    ck_assert_int_eq(write(fd, two, strlen(two)), (int)strlen(two));
    char buf[4096];
    th_read_all(fd, buf, sizeof buf, 2000);
    close(fd);
    ck_assert_msg(strstr(buf, "{\"got\":{}}") && strstr(buf, "{\"project\":\"b\"}"), "%s", buf);
}
END_TEST

START_TEST(drain_finishes_admitted_request_and_refuses_new_ones) {
    uint16_t port = fg_http_server_port(srv);
    /* A request whose body is still coming when the drain starts. */
    int slow = th_connect(port);
    const char *head = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                       "Content-Length: 7\r\n\r\n{\"a\":";
    ck_assert_int_eq(write(slow, head, strlen(head)), (int)strlen(head));
    /* An idle keep-alive connection that will send a request during the drain. */
    int idle = th_connect(port);
    usleep(100 * 1000);
    ck_assert_uint_eq(fg_http_server_in_flight(srv), 1);

    fg_http_server_begin_drain(srv);
    ck_assert(fg_http_server_draining(srv));
    ck_assert_int_lt(th_connect(port), 0); /* no longer accepting */

    const char *late = "GET /v1/projects/c HTTP/1.1\r\nHost: t\r\n\r\n";
    ck_assert_int_eq(write(idle, late, strlen(late)), (int)strlen(late));
    char buf[4096];
    th_read_all(idle, buf, sizeof buf, 2000);
    ck_assert_msg(strstr(buf, "HTTP/1.1 503") && strstr(buf, "shutting-down"), "%s", buf);
    close(idle);

    ck_assert_int_eq(write(slow, "1}", 2), 2);
    th_read_all(slow, buf, sizeof buf, 2000);
    ck_assert_msg(strstr(buf, "HTTP/1.1 200") && strstr(buf, "{\"got\":{\"a\":1}}"), "%s", buf);
    close(slow);
    for (int i = 0; i < 100 && fg_http_server_in_flight(srv) > 0; i++)
        usleep(10 * 1000);
    ck_assert_uint_eq(fg_http_server_in_flight(srv), 0);
}
END_TEST

/* Connections keep arriving, each a request, until *stop. */
typedef struct {
    uint16_t port;
    atomic_bool stop;
    atomic_uint answered;
} hammer_t;

static void *hammer_main(void *arg) {
    hammer_t *h = arg;
    static const char req[] = "GET /v1/projects/h HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    while (!atomic_load(&h->stop)) {
        int fd = th_connect(h->port);
        if (fd < 0)
            continue;
        char buf[1024];
        if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1) &&
            th_read_all(fd, buf, sizeof buf, 1000) > 0)
            atomic_fetch_add(&h->answered, 1);
        close(fd);
    }
    return NULL;
}

/* A drain while connections keep arriving on every worker. The listening socket is
 * fleetgate's, so stopping it shares nothing with libmicrohttpd's workers: MHD_quiesce_daemon,
 * used before, raced them for the socket's place in their epoll sets and aborted the process
 * now and then (CI saw it on a SIGTERM). Each round drains under load, is refused right after,
 * and stops cleanly. */
START_TEST(drain_under_arriving_connections_stops_accepting_every_time) {
    enum { ROUNDS = 30, HAMMERS = 3 };
    fg_http_server_free(srv); /* this test starts its own, with more workers */
    srv = NULL;
    for (int round = 0; round < ROUNDS; round++) {
        fg_http_options_t o = {.host = "127.0.0.1",
                               .workers = 4,
                               .max_body_bytes = 1024,
                               .max_connections = 256,
                               .connection_timeout_s = 5};
        fg_http_server_t *s;
        ck_assert_int_eq(fg_http_server_start(&s, &o, routes, sizeof routes / sizeof routes[0]),
                         FG_OK);
        hammer_t h = {.port = fg_http_server_port(s)};
        pthread_t t[HAMMERS];
        for (int i = 0; i < HAMMERS; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, hammer_main, &h), 0);
        usleep((useconds_t)(10 + round % 7 * 5) * 1000);
        fg_http_server_begin_drain(s);
        ck_assert_int_lt(th_connect(h.port), 0);
        atomic_store(&h.stop, true);
        for (int i = 0; i < HAMMERS; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < 200 && fg_http_server_in_flight(s) > 0; i++)
            usleep(10 * 1000);
        ck_assert_uint_eq(fg_http_server_in_flight(s), 0);
        fg_http_server_free(s);
        ck_assert_uint_gt(atomic_load(&h.answered), 0);
    }
}
END_TEST

/* Sends raw bytes on a fresh connection and reads what comes back until the server closes or
 * timeout_ms passes. */
static void raw_exchange(const char *request, char *buf, size_t buflen, int timeout_ms) {
    int fd = th_connect(fg_http_server_port(srv));
    ck_assert_int_ge(fd, 0);
    /* The server may answer and close before a large head is all sent: no SIGPIPE, no assert. */
    size_t len = strlen(request), sent = 0;
    while (sent < len) {
        ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    th_read_all(fd, buf, buflen, timeout_ms);
    close(fd);
}

static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The body of a raw answer, parsed as the problem it must be. */
static json_t *raw_problem(const char *answer, long status) {
    char line[32];
    snprintf(line, sizeof line, "HTTP/1.1 %ld ", status);
    ck_assert_msg(strncmp(answer, line, strlen(line)) == 0, "got: %.200s", answer);
    ck_assert_ptr_nonnull(strstr(answer, "application/problem+json"));
    const char *body = strstr(answer, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    json_error_t e;
    json_t *p = json_loads(body + 4, JSON_DISABLE_EOF_CHECK, &e);
    ck_assert_msg(p != NULL, "not JSON: %s", body + 4);
    return p;
}

START_TEST(nul_byte_in_target_gets_400) {
    char buf[4096];
    raw_exchange("GET /v1/projects/demo%00/../other HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf,
                 2000);
    json_t *p = raw_problem(buf, 400);
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "the request target holds a NUL byte (%00)");
    json_decref(p);
}
END_TEST

START_TEST(dot_segments_get_400_also_encoded) {
    static const char *const targets[] = {"/v1/projects/demo/../other", "/v1/projects/%2e%2E/x",
                                          "/v1/./projects/demo", "/v1/projects/.%2e"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char req[256], buf[4096];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", targets[i]);
        raw_exchange(req, buf, sizeof buf, 2000);
        json_t *p = raw_problem(buf, 400);
        ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                         "the path holds a \".\" or \"..\" segment");
        json_decref(p);
    }
}
END_TEST

START_TEST(dots_inside_a_name_are_fine) {
    th_resp_t r;
    call("GET", "/v1/projects/a..b", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);
}
END_TEST

START_TEST(two_different_content_lengths_get_400_and_close) {
    char buf[8192];
    /* A hidden second request follows: it must never run. */
    raw_exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 2\r\nContent-Length: 52\r\n\r\n{}"
                 "GET /v1/projects/smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
                 buf, sizeof buf, 3000);
    json_t *p = raw_problem(buf, 400);
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "the request has Content-Length headers that differ");
    json_decref(p);
    ck_assert_ptr_nonnull(strcasestr(buf, "Connection: close"));
    ck_assert_int_eq(count_of(buf, "HTTP/1.1 "), 1);
    ck_assert_ptr_null(strstr(buf, "smuggled\"}"));
}
END_TEST

START_TEST(content_length_with_transfer_encoding_gets_400_and_close) {
    char buf[8192];
    raw_exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                 "GET /v1/projects/smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
                 buf, sizeof buf, 3000);
    json_t *p = raw_problem(buf, 400);
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "the request has both Content-Length and Transfer-Encoding");
    json_decref(p);
    ck_assert_int_eq(count_of(buf, "HTTP/1.1 "), 1);
    ck_assert_ptr_null(strstr(buf, "smuggled\"}"));
}
END_TEST

START_TEST(equal_content_lengths_are_one_length) {
    char buf[8192];
    raw_exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                 buf, sizeof buf, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "got: %.200s", buf);
}
END_TEST

START_TEST(invalid_utf8_path_keeps_detail_and_instance) {
    th_resp_t r;
    call("GET", "/v1/nothing/%ff%fe", NULL, NULL, 0, &r);
    json_t *p = assert_problem(&r, 404, "route-not-found");
    ck_assert_str_eq(json_string_value(json_object_get(p, "instance")), "/v1/nothing/\\xff\\xfe");
    ck_assert_str_eq(json_string_value(json_object_get(p, "detail")),
                     "no route for GET /v1/nothing/\\xff\\xfe");
    json_decref(p);
    th_resp_free(&r);
}
END_TEST

/* Sends a GET whose head carries a header of n bytes (or a target of n bytes), reads the answer. */
static void big_head(size_t header_bytes, size_t target_bytes, char *buf, size_t buflen) {
    size_t cap = header_bytes + target_bytes + 256;
    char *req = malloc(cap);
    size_t at = (size_t)snprintf(req, cap, "GET /v1/projects/");
    memset(req + at, 'p', target_bytes);
    at += target_bytes;
    at += (size_t)snprintf(req + at, cap - at, " HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + at, 'h', header_bytes);
    at += header_bytes;
    snprintf(req + at, cap - at, "\r\n\r\n");
    raw_exchange(req, buf, buflen, 3000);
    free(req);
}

START_TEST(oversized_heads_get_problem_json_431_and_414) {
    char buf[8192];
    big_head(40 << 10, 0, buf, sizeof buf);
    json_t *p = raw_problem(buf, 431);
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")),
                     "urn:fleetgate:problem:headers-too-large");
    json_decref(p);
    ck_assert_ptr_nonnull(strcasestr(buf, "Connection: close"));
    big_head(0, 20 << 10, buf, sizeof buf);
    p = raw_problem(buf, 414);
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")),
                     "urn:fleetgate:problem:uri-too-long");
    ck_assert_ptr_nonnull(json_object_get(p, "instance"));
    json_decref(p);
}
END_TEST

START_TEST(header_lines_inline_and_past_the_inline_room_all_go_out) {
    char buf[8192], want[160];
    raw_exchange("GET /many-headers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf,
                 sizeof buf, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "got: %.200s", buf);
    for (int i = 0; i < 12; i++) {
        char value[128];
        memset(value, 'a' + i, sizeof value - 1);
        value[sizeof value - 1] = '\0';
        snprintf(want, sizeof want, "\r\nX-Many-%d: %s\r\n", i, value);
        ck_assert_msg(strstr(buf, want) != NULL, "no X-Many-%d in %s", i, buf);
    }
}
END_TEST

/* ---- refusals libmicrohttpd makes before any callback: fleetgate's words ----
 * (src/http/mhd_answers.c). Each sends raw bytes, as a careless client or an attacker would. */

/* A problem answer from raw bytes: status line, problem+json, X-Request-Id equal to requestId,
 * the type's slug, and an instance. Returns the parsed body. */
static json_t *raw_refusal(const char *answer, long status, const char *slug) {
    json_t *p = raw_problem(answer, status);
    char want[128];
    snprintf(want, sizeof want, "urn:fleetgate:problem:%s", slug);
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")), want);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "status")), status);
    const char *rid = json_string_value(json_object_get(p, "requestId"));
    ck_assert_ptr_nonnull(rid);
    char line[128];
    snprintf(line, sizeof line, "\r\nX-Request-Id: %s\r\n", rid);
    ck_assert_msg(strcasestr(answer, line) != NULL, "no X-Request-Id %s in %.300s", rid, answer);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(p, "instance")));
    ck_assert_ptr_nonnull(json_string_value(json_object_get(p, "detail")));
    ck_assert_ptr_null(strstr(answer, "<html>"));
    return p;
}

static void assert_counted(const char *status, unsigned n) {
    char want[160];
    snprintf(want, sizeof want,
             "fleetgate_http_requests_total{route=\"unmatched\",method=\"-\",status=\"%s\"} %u",
             status, n);
    fg_buf_t m;
    fg_buf_init(&m, 1 << 20);
    ck_assert_int_eq(fg_metrics_render(&m), FG_OK);
    ck_assert_msg(strstr(m.data, want), "no %s in %s", want, m.data);
    fg_buf_free(&m);
}

/* Past the per-connection pool (16 KiB), MHD stops reading; before, it was its HTML page. */
START_TEST(head_past_the_pool_gets_problem_json_431) {
    char buf[8192];
    big_head(20 << 10, 0, buf, sizeof buf);
    json_t *p = raw_refusal(buf, 431, "headers-too-large");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "12288 bytes"));
    /* the request line was read: the problem names its target */
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(p, "instance")), "/v1/projects/"));
    json_decref(p);
    ck_assert_ptr_nonnull(strcasestr(buf, "Connection: close"));
    assert_counted("431", 1);
}
END_TEST

/* A request line longer than the pool: MHD has not even a target to report (414). */
START_TEST(request_line_past_the_pool_gets_problem_json_414) {
    char buf[8192];
    big_head(0, 20 << 10, buf, sizeof buf);
    json_t *p = raw_refusal(buf, 414, "uri-too-long");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(p, "instance")), "urn:fleetgate:request:"));
    json_decref(p);
    assert_counted("414", 1);
}
END_TEST

START_TEST(unsupported_http_versions_get_problem_json_505) {
    static const char *const heads[] = {
        "GET /v1/projects/a HTTP/2.0\r\nHost: x\r\n\r\n",
        "GET /v1/projects/a HTTP/3.1\r\nHost: x\r\n\r\n",
        "GET /v1/projects/a HTTP/0.9\r\nHost: x\r\n\r\n",
    };
    static const char *const details[] = {"only HTTP/1.0 and HTTP/1.1",
                                          "only HTTP/1.0 and HTTP/1.1", "before 1.0"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char buf[4096];
        raw_exchange(heads[i], buf, sizeof buf, 3000);
        json_t *p = raw_refusal(buf, 505, "http-version-not-supported");
        ck_assert_msg(strstr(json_string_value(json_object_get(p, "detail")), details[i]), "%s: %s",
                      heads[i], json_string_value(json_object_get(p, "detail")));
        json_decref(p);
    }
    assert_counted("505", 3);
}
END_TEST

START_TEST(unparsable_heads_get_problem_json_400) {
    static const char *const heads[] = {
        /* a header line without a colon */
        "GET /v1/projects/a HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
        /* a version that is not HTTP/d.d */
        "GET /v1/projects/a HTTP/1.x\r\nHost: x\r\n\r\n",
        "GET /v1/projects/a HTTX/1.1\r\nHost: x\r\n\r\n",
        /* a length that is not a number */
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 12abc\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char buf[4096];
        raw_exchange(heads[i], buf, sizeof buf, 3000);
        json_decref(raw_refusal(buf, 400, "bad-request"));
        /* one answer: 0.9.75 would send the head of its own twice for a bad Content-Length */
        ck_assert_uint_eq(count_of(buf, "\r\nContent-Length: "), 1);
    }
}
END_TEST

/* The head was fine, so the request was admitted; its body's chunked framing is not. */
START_TEST(malformed_chunk_gets_problem_json_400) {
    char buf[4096];
    raw_exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                 buf, sizeof buf, 3000);
    json_t *p = raw_refusal(buf, 400, "bad-request");
    ck_assert_str_eq(json_string_value(json_object_get(p, "instance")), "/echo");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "chunked"));
    json_decref(p);
}
END_TEST

/* RFC 9112 §3.2: exactly one Host in HTTP/1.1; HTTP/1.0 may go without. */
START_TEST(host_missing_or_repeated_gets_problem_json_400) {
    char buf[4096];
    raw_exchange("GET /v1/projects/a HTTP/1.1\r\nConnection: close\r\n\r\n", buf, sizeof buf, 3000);
    json_t *p = raw_refusal(buf, 400, "bad-request");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "Host"));
    json_decref(p);
    raw_exchange("GET /v1/projects/a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", buf, sizeof buf,
                 3000);
    json_decref(raw_refusal(buf, 400, "bad-request"));
    raw_exchange("GET /v1/projects/a HTTP/1.0\r\n\r\n", buf, sizeof buf, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0 || strncmp(buf, "HTTP/1.0 200 ", 13) == 0,
                  "got: %.200s", buf);
}
END_TEST

/* What a pre-read of the first head at accept could not do: the second request of a
 * keep-alive connection, pipelined behind a good one, is refused in fleetgate's words too. */
START_TEST(bad_second_head_on_a_kept_alive_connection_gets_problem_json) {
    char buf[8192];
    raw_exchange("GET /v1/projects/first HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /v1/projects/second HTTP/2.0\r\nHost: x\r\n\r\n",
                 buf, sizeof buf, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "got: %.200s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"project\":\"first\""));
    const char *second = strstr(buf + 1, "HTTP/1.1 505 ");
    ck_assert_msg(second != NULL, "no second answer in: %s", buf);
    json_decref(raw_refusal(second, 505, "http-version-not-supported"));
}
END_TEST

/* The pool is small, but what fleetgate accepts fits: an 8 KiB token, and a head just under
 * HEAD_MAX (12 KiB), both on one keep-alive connection; just over it is fleetgate's own 431. */
START_TEST(heads_up_to_the_bound_pass_on_the_small_pool) {
    size_t cap = 16 << 10;
    char *req = malloc(cap), buf[8192];
    int at = snprintf(req, cap, "GET /v1/projects/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ");
    memset(req + at, 't', 8192);
    at += 8192;
    at += snprintf(req + at, cap - (size_t)at, "\r\nX-Pad: ");
    memset(req + at, 'p', 3500); /* the head: about 11.8 KiB */
    at += 3500;
    snprintf(req + at, cap - (size_t)at, "\r\n\r\n");
    raw_exchange(req, buf, sizeof buf, 3000);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 200 ", 13) == 0, "got: %.200s", buf);
    free(req);
    big_head(13 << 10, 0, buf, sizeof buf);
    json_t *p = raw_refusal(buf, 431, "headers-too-large");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(p, "detail")), "about"));
    json_decref(p);
}
END_TEST

/* Another libmicrohttpd server in the process (kubesim links fleetgate's library, tests run
 * their own): its answers, and its own refusals, stay its own, and the socket context it sets
 * is never taken for fleetgate's. */
static int foreign_ctx = 0x5a5a5a5a;

static void foreign_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode code) {
    (void)cls, (void)c, (void)code;
    *socket_context = &foreign_ctx;
}

static enum MHD_Result foreign_access(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version, const char *up,
                                      size_t *up_size, void **con_cls) {
    (void)cls, (void)url, (void)method, (void)version, (void)up, (void)up_size;
    if (*con_cls == NULL) {
        *con_cls = &foreign_ctx;
        return MHD_YES;
    }
    static char body[] = "not fleetgate's";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof body - 1, body, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, 500, r);
    MHD_destroy_response(r);
    return ret;
}

START_TEST(another_libmicrohttpd_server_keeps_its_own_answers) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, foreign_access, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_THREAD_POOL_SIZE, 2u,
        MHD_OPTION_NOTIFY_CONNECTION, foreign_notify, NULL, MHD_OPTION_END);
    ck_assert_ptr_nonnull(d);
    uint16_t port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char buf[4096];
    int fd = th_connect(port);
    static const char get[] = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send(fd, get, sizeof get - 1, MSG_NOSIGNAL);
    th_read_all(fd, buf, sizeof buf, 3000);
    close(fd);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 500 ", 13) == 0, "got: %.200s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "not fleetgate's"));
    fd = th_connect(port);
    static const char bad[] = "GET /x HTTP/2.0\r\nHost: x\r\n\r\n";
    send(fd, bad, sizeof bad - 1, MSG_NOSIGNAL);
    th_read_all(fd, buf, sizeof buf, 3000);
    close(fd);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 505 ", 13) == 0, "got: %.200s", buf);
    ck_assert_ptr_null(strstr(buf, "problem+json"));
    MHD_stop_daemon(d);
    /* fleetgate's own server, running beside it, still answers in its own words */
    raw_exchange(bad, buf, sizeof buf, 3000);
    json_decref(raw_refusal(buf, 505, "http-version-not-supported"));
}
END_TEST

/* Far past the pool (300 KiB): MHD closes with the rest of the head unread, so the client may
 * see a reset instead of the answer; what it sees is never HTML, and the refusal is counted. */
START_TEST(answers_of_the_http_library_are_counted) {
    char buf[8192];
    big_head(300 << 10, 0, buf, sizeof buf);
    if (buf[0] != '\0')
        json_decref(raw_refusal(buf, 431, "headers-too-large"));
    assert_counted("431", 1);
}
END_TEST

/* ---- slow clients: a small slowloris, bounded and on loopback ---------- */

static void setup_slow(void) {
    fg_log_set_level(FG_LOG_ERROR);
    fg_http_options_t o = {.host = "127.0.0.1",
                           .port = 0,
                           .workers = 2,
                           .max_body_bytes = 1024,
                           .max_connections = 64,
                           .connection_timeout_s = 30,
                           .header_timeout_s = 1,
                           .body_timeout_s = 1,
                           .max_connections_per_client = 8};
    ck_assert_int_eq(fg_http_server_start(&srv, &o, routes, sizeof routes / sizeof routes[0]),
                     FG_OK);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)fg_http_server_port(srv));
}

/* True when the server has closed fd (EOF or reset) within timeout_ms. */
static bool closed_within(int fd, int timeout_ms) {
    char buf[4096];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return true;
    }
    return false;
}

START_TEST(slowloris_is_cut_and_others_keep_being_served) {
    enum { ATTACKERS = 24, ROUNDS = 15 };
    uint16_t port = fg_http_server_port(srv);
    int fds[ATTACKERS];
    /* 127.0.0.2 is the attacker: each connection trickles one header line every 200 ms, which
     * restarts an idle timeout forever. */
    for (int i = 0; i < ATTACKERS; i++) {
        fds[i] = th_connect_from("127.0.0.2", port);
        ck_assert_int_ge(fds[i], 0);
        static const char line[] = "GET /v1/projects/slow HTTP/1.1\r\nHost: x\r\n";
        send(fds[i], line, sizeof line - 1, MSG_NOSIGNAL);
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < ATTACKERS; i++)
            send(fds[i], "X-Slow: 1\r\n", strlen("X-Slow: 1\r\n"), MSG_NOSIGNAL);
        th_resp_t r;
        call("GET", "/v1/projects/ok", NULL, NULL, 0, &r); /* another client, meanwhile */
        ck_assert_int_eq(r.status, 200);
        th_resp_free(&r);
        usleep(200000);
    }
    /* 3 s of trickling against a 1 s bound: every attacker connection is gone by now, or within
     * a generous margin (the machine may be loaded). */
    for (int i = 0; i < ATTACKERS; i++) {
        ck_assert_msg(closed_within(fds[i], 5000), "attacker connection %d still open", i);
        close(fds[i]);
    }
}
END_TEST

START_TEST(one_client_cannot_take_every_connection) {
    uint16_t port = fg_http_server_port(srv);
    int fds[12];
    for (int i = 0; i < 12; i++)
        fds[i] = th_connect_from("127.0.0.2", port);
    /* Past its 8 connections the address is cut at once, not after the head bound. */
    int cut = 0;
    for (int i = 0; i < 12; i++) {
        if (fds[i] < 0 || closed_within(fds[i], 300))
            cut++;
    }
    ck_assert_int_ge(cut, 4);
    th_resp_t r;
    call("GET", "/v1/projects/ok", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);
    for (int i = 0; i < 12; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }
}
END_TEST

/* Past limits.max_connections a new connection is closed at once and counted, the places come
 * back as connections close, and the server still stops. (libmicrohttpd 0.9.75 refusing one at
 * its own limit left a worker deadlocked, and stopping the server hung; listen.c refuses first.) */
START_TEST(connections_past_the_limit_are_closed_and_the_server_still_stops) {
    enum { MAX = 4, TRIES = 10 };
    fg_http_server_free(srv); /* this test starts its own, with a small limit */
    srv = NULL;
    fg_metrics_reset(); /* its families go with the server that registered them */
    fg_http_options_t o = {.host = "127.0.0.1",
                           .workers = 2,
                           .max_body_bytes = 1024,
                           .max_connections = MAX,
                           .connection_timeout_s = 30};
    ck_assert_int_eq(fg_http_server_start(&srv, &o, routes, sizeof routes / sizeof routes[0]),
                     FG_OK);
    uint16_t port = fg_http_server_port(srv);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)port);
    int fds[TRIES];
    for (int i = 0; i < TRIES; i++)
        fds[i] = th_connect(port);
    int cut = 0;
    for (int i = 0; i < TRIES; i++)
        if (fds[i] < 0 || closed_within(fds[i], 300))
            cut++;
    ck_assert_int_eq(cut, TRIES - MAX);
    fg_buf_t m;
    fg_buf_init(&m, 1 << 20);
    ck_assert_int_eq(fg_metrics_render(&m), FG_OK);
    char want[96];
    snprintf(want, sizeof want, "fleetgate_http_connections_refused_total %d", TRIES - MAX);
    ck_assert_msg(strstr(m.data, want), "no %s in %s", want, m.data);
    fg_buf_free(&m);
    for (int i = 0; i < TRIES; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* The places come back once MHD has seen the connections close. */
    th_resp_t r = {0};
    for (int i = 0; i < 50 && r.status != 200; i++) {
        th_resp_free(&r);
        usleep(20 * 1000);
        char url[128];
        snprintf(url, sizeof url, "%s/v1/projects/ok", base);
        if (th_request("GET", url, NULL, NULL, -1, 0, &r) != 0)
            r.status = 0;
    }
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);
    /* teardown stops it: with a deadlocked worker that would hang past the case's timeout */
}
END_TEST

/* One write sent on its own connection; its raw answer into buf. */
typedef struct {
    uint16_t port;
    char buf[4096];
} held_client_t;

static void *held_client_main(void *arg) {
    held_client_t *c = arg;
    static const char req[] = "POST /held HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    int fd = th_connect(c->port);
    if (fd >= 0 && send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1))
        th_read_all(fd, c->buf, sizeof c->buf, 8000);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Starts the fixture's server again with one worker: every connection is on that worker. */
static void one_worker_server(void) {
    fg_http_server_free(srv);
    fg_metrics_reset();
    start_server(1);
}

/* A write's handler waiting on something (a member cluster) holds no other connection up, even
 * one that libmicrohttpd serves on the same worker thread: the read is answered while the write
 * still waits, and the write's answer, made on another thread, goes out whole once it is done.
 * (With the handler on the worker, the read waited until the write gave up after 5 s.) */
START_TEST(a_waiting_write_holds_up_no_read_on_its_worker) {
    one_worker_server();
    held_reset();
    held_client_t c = {.port = fg_http_server_port(srv)};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, held_client_main, &c), 0);
    ck_assert(held_wait_entered());
    th_resp_t r;
    call("GET", "/v1/projects/p", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    th_resp_free(&r);
    pthread_mutex_lock(&held_mu);
    bool gave_up = held_gave_up;
    pthread_mutex_unlock(&held_mu);
    ck_assert_msg(!gave_up, "the read was answered only after the write gave up waiting");
    held_release();
    pthread_join(th, NULL);
    ck_assert_msg(strstr(c.buf, "HTTP/1.1 200") && strstr(c.buf, "{\"released\":true}") &&
                      strcasestr(c.buf, "X-Request-Id: "),
                  "%s", c.buf);
}
END_TEST

/* Stopping the server while a write's handler still runs waits for it (its connection sleeps
 * meanwhile, and libmicrohttpd must hold none asleep when it stops), then stops cleanly. */
static void *release_later(void *arg) {
    (void)arg;
    usleep(200 * 1000);
    held_release();
    return NULL;
}

START_TEST(the_server_stops_after_a_write_in_flight_is_done) {
    one_worker_server();
    held_reset();
    held_client_t c = {.port = fg_http_server_port(srv)};
    pthread_t th, rel;
    ck_assert_int_eq(pthread_create(&th, NULL, held_client_main, &c), 0);
    ck_assert(held_wait_entered());
    ck_assert_int_eq(pthread_create(&rel, NULL, release_later, NULL), 0);
    fg_http_server_free(srv);
    srv = NULL;
    pthread_join(rel, NULL);
    pthread_join(th, NULL);
    pthread_mutex_lock(&held_mu);
    ck_assert(!held_gave_up);
    pthread_mutex_unlock(&held_mu);
}
END_TEST

static Suite *server_suite(void) {
    Suite *s = suite_create("http-server");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, json_body_reaches_handler);
    tcase_add_test(tc, a_waiting_write_holds_up_no_read_on_its_worker);
    tcase_add_test(tc, the_server_stops_after_a_write_in_flight_is_done);
    tcase_add_test(tc, merge_patch_media_type_is_json);
    tcase_add_test(tc, path_params_reach_handler);
    tcase_add_test(tc, non_json_body_gets_415);
    tcase_add_test(tc, malformed_json_gets_400_saying_where);
    tcase_add_test(tc, duplicate_keys_get_400);
    tcase_add_test(tc, missing_required_body_gets_400);
    tcase_add_test(tc, body_over_server_limit_gets_413);
    tcase_add_test(tc, chunked_body_over_limit_gets_413);
    tcase_add_test(tc, route_body_limit_overrides_server_limit);
    tcase_add_test(tc, unknown_route_gets_404);
    tcase_add_test(tc, wrong_method_gets_405_with_allow);
    tcase_add_test(tc, handler_without_reply_gets_500);
    tcase_add_test(tc, problem_ext_adds_members_after_the_standard_ones);
    tcase_add_test(tc, request_id_echoed_when_valid_replaced_when_not);
    tcase_add_test(tc, keep_alive_serves_two_requests_on_one_connection);
    tcase_add_test(tc, drain_finishes_admitted_request_and_refuses_new_ones);
    tcase_add_test(tc, drain_under_arriving_connections_stops_accepting_every_time);
    tcase_add_test(tc, connections_past_the_limit_are_closed_and_the_server_still_stops);
    tcase_add_test(tc, nul_byte_in_target_gets_400);
    tcase_add_test(tc, dot_segments_get_400_also_encoded);
    tcase_add_test(tc, dots_inside_a_name_are_fine);
    tcase_add_test(tc, two_different_content_lengths_get_400_and_close);
    tcase_add_test(tc, content_length_with_transfer_encoding_gets_400_and_close);
    tcase_add_test(tc, equal_content_lengths_are_one_length);
    tcase_add_test(tc, invalid_utf8_path_keeps_detail_and_instance);
    tcase_add_test(tc, oversized_heads_get_problem_json_431_and_414);
    tcase_add_test(tc, answers_of_the_http_library_are_counted);
    tcase_add_test(tc, header_lines_inline_and_past_the_inline_room_all_go_out);
    tcase_add_test(tc, head_past_the_pool_gets_problem_json_431);
    tcase_add_test(tc, request_line_past_the_pool_gets_problem_json_414);
    tcase_add_test(tc, unsupported_http_versions_get_problem_json_505);
    tcase_add_test(tc, unparsable_heads_get_problem_json_400);
    tcase_add_test(tc, malformed_chunk_gets_problem_json_400);
    tcase_add_test(tc, host_missing_or_repeated_gets_problem_json_400);
    tcase_add_test(tc, bad_second_head_on_a_kept_alive_connection_gets_problem_json);
    tcase_add_test(tc, heads_up_to_the_bound_pass_on_the_small_pool);
    tcase_add_test(tc, another_libmicrohttpd_server_keeps_its_own_answers);
    tcase_add_test(tc, made_up_methods_are_one_metric_series);
    suite_add_tcase(s, tc);
    TCase *slow = tcase_create("slow-clients");
    tcase_add_checked_fixture(slow, setup_slow, teardown);
    tcase_set_timeout(slow, 60);
    tcase_add_test(slow, slowloris_is_cut_and_others_keep_being_served);
    tcase_add_test(slow, one_client_cannot_take_every_connection);
    suite_add_tcase(s, slow);
    return s;
}

int main(void) {
    return tm_run(server_suite());
}
