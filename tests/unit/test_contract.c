/* Tests of the contract check (tests/support/contract.c with tests/contract/validate.mjs): right
 * and wrong answers of the meta routes and problem documents, judged against api/openapi.yaml. */
#include "contract.h"
#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define PROBLEM_404                                                                                \
    "{\"type\":\"urn:fleetgate:problem:not-found\",\"title\":\"Not found\",\"status\":404,"        \
    "\"detail\":\"no app web in project shop\",\"instance\":\"/v1/projects/shop/apps/web\","       \
    "\"requestId\":\"7f9c2a41d3e8b605\"}"

static const struct {
    const char *name, *method, *path;
    long status;
    const char *content_type, *body;
    int want;
} cases[] = {
    {"healthz_ok_is_valid", "GET", "/healthz", 200, "application/json", "{\"status\":\"ok\"}",
     CONTRACT_VALID},
    {"healthz_wrong_status_word_refused", "GET", "/healthz", 200, "application/json",
     "{\"status\":\"fine\"}", CONTRACT_INVALID},
    {"healthz_extra_member_refused", "GET", "/healthz", 200, NULL,
     "{\"status\":\"ok\",\"uptime\":3}", CONTRACT_INVALID},
    {"healthz_not_json_refused", "GET", "/healthz", 200, NULL, "ok", CONTRACT_INVALID},
    {"problem_404_is_valid", "GET", "/v1/projects/shop/apps/web", 404, "application/problem+json",
     PROBLEM_404, CONTRACT_VALID},
    {"problem_without_request_id_refused", "GET", "/v1/projects/shop/apps/web", 404,
     "application/problem+json",
     "{\"type\":\"urn:fleetgate:problem:not-found\",\"title\":\"Not found\",\"status\":404,"
     "\"instance\":\"/v1/projects/shop/apps/web\"}",
     CONTRACT_INVALID},
    {"problem_status_differs_from_answer_refused", "GET", "/v1/projects/shop/apps/web", 404,
     "application/problem+json",
     "{\"type\":\"urn:fleetgate:problem:internal\",\"title\":\"Internal error\",\"status\":500,"
     "\"instance\":\"/v1/projects/shop/apps/web\",\"requestId\":\"r1\"}",
     CONTRACT_INVALID},
    {"problem_as_json_content_type_refused", "GET", "/v1/projects/shop/apps/web", 404,
     "application/json", PROBLEM_404, CONTRACT_INVALID},
    {"status_not_in_contract_refused", "GET", "/healthz", 418, NULL, "{}", CONTRACT_INVALID},
    {"route_not_found_problem_is_valid", "GET", "/nowhere", 404, "application/problem+json",
     "{\"type\":\"urn:fleetgate:problem:route-not-found\",\"title\":\"No such route\","
     "\"status\":404,\"instance\":\"/nowhere\",\"requestId\":\"r2\"}",
     CONTRACT_VALID},
    {"unknown_route_is_usage_error", "GET", "/nowhere", 200, NULL, "{}", CONTRACT_USAGE},
};

START_TEST(answers_judged_against_the_contract) {
    char err[4096];
    int rc =
        contract_check(cases[_i].method, cases[_i].path, cases[_i].status, cases[_i].content_type,
                       cases[_i].body, strlen(cases[_i].body), err, sizeof err);
    ck_assert_msg(rc == cases[_i].want, "%s: got %d, want %d; checker said: %s", cases[_i].name, rc,
                  cases[_i].want, err);
    if (rc == CONTRACT_INVALID)
        ck_assert_msg(strstr(err, "not as the contract says") != NULL, "%s: %s", cases[_i].name,
                      err);
}
END_TEST

START_TEST(headers_required_by_the_contract_are_checked) {
    char err[4096];
    const char *body = "{\"status\":\"ok\"}";
    int rc = contract_check_headers("GET", "/healthz", 200,
                                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    "X-Request-Id: abc-1\r\n\r\n",
                                    body, strlen(body), err, sizeof err);
    ck_assert_msg(rc == CONTRACT_VALID, "with X-Request-Id: %d: %s", rc, err);
    rc = contract_check_headers("GET", "/healthz", 200,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n", body,
                                strlen(body), err, sizeof err);
    ck_assert_int_eq(rc, CONTRACT_INVALID);
    ck_assert_msg(strstr(err, "X-Request-Id") != NULL, "%s", err);
}
END_TEST

START_TEST(large_body_refused_without_sigpipe) {
    /* A body far larger than a socket buffer, for a route the checker refuses before reading. */
    size_t len = 1u << 20;
    char *body = malloc(len);
    ck_assert_ptr_nonnull(body);
    memset(body, 'x', len);
    char err[1024];
    int rc = contract_check("GET", "/nowhere", 200, NULL, body, len, err, sizeof err);
    free(body);
    ck_assert_int_eq(rc, CONTRACT_USAGE);
}
END_TEST

START_TEST(small_err_buffer_is_truncated_and_terminated) {
    char err[8];
    int rc = contract_check("GET", "/healthz", 200, NULL, "{}", 2, err, sizeof err);
    ck_assert_int_eq(rc, CONTRACT_INVALID);
    ck_assert_uint_lt(strlen(err), sizeof err);
}
END_TEST

static Suite *contract_suite(void) {
    Suite *s = suite_create("contract");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, answers_judged_against_the_contract, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, headers_required_by_the_contract_are_checked);
    tcase_add_test(tc, large_body_refused_without_sigpipe);
    tcase_add_test(tc, small_err_buffer_is_truncated_and_terminated);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(contract_suite());
}
