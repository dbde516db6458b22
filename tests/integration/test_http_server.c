/* Integration tests of the HTTP core: a real server (in this process, on a free port) with a
 * small route table, called over HTTP with libcurl and raw sockets. Covers the dispatcher's
 * generic answers (400, 404, 405, 413, 415, 503), problems with extension members, request ids,
 * keep-alive and draining. */
#include "fleetgate/http.h"
#include "testhttp.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
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

static const fg_route_t routes[] = {
    {.method = "POST", .pattern = "/echo", .handler = h_echo, .body = FG_BODY_JSON},
    {.method = "POST",
     .pattern = "/small",
     .handler = h_echo,
     .body = FG_BODY_JSON,
     .body_limit = 16},
    {.method = "POST", .pattern = "/maybe", .handler = h_echo, .body = FG_BODY_JSON_OPTIONAL},
    {.method = "GET", .pattern = "/v1/projects/{project}", .handler = h_hello},
    {.method = "GET", .pattern = "/broken", .handler = h_forgets_to_reply},
    {.method = "GET", .pattern = "/problem-ext", .handler = h_problem_ext},
};

static fg_http_server_t *srv;
static char base[64];

static void setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    fg_http_options_t o = {.host = "127.0.0.1",
                           .port = 0,
                           .workers = 2,
                           .max_body_bytes = 1024,
                           .max_connections = 64,
                           .connection_timeout_s = 5};
    ck_assert_int_eq(fg_http_server_start(&srv, &o, routes, sizeof routes / sizeof routes[0]),
                     FG_OK);
    snprintf(base, sizeof base, "http://127.0.0.1:%u", (unsigned)fg_http_server_port(srv));
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

static Suite *server_suite(void) {
    Suite *s = suite_create("http-server");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, json_body_reaches_handler);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(server_suite());
}
