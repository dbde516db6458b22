/* Unit tests of http/: the router (params, verbs, 404 vs 405 and Allow), the problem table and
 * request ids. The server itself is exercised over real HTTP in tests/integration. */
#include "fleetgate/http.h"
#include "testmain.h"

#include <check.h>
#include <string.h>

static int h_dummy(fg_req_t *req) {
    (void)req;
    return FG_OK;
}

static const fg_route_t routes[] = {
    {.method = "GET", .pattern = "/healthz", .handler = h_dummy},
    {.method = "GET", .pattern = "/v1/projects/{project}/apps", .handler = h_dummy},
    {.method = "POST", .pattern = "/v1/projects/{project}/apps", .handler = h_dummy},
    {.method = "GET", .pattern = "/v1/projects/{project}/apps/{app}", .handler = h_dummy},
    {.method = "DELETE", .pattern = "/v1/projects/{project}/apps/{app}", .handler = h_dummy},
    {.method = "POST", .pattern = "/v1/projects/{project}/apps/{app}:scale", .handler = h_dummy},
    {.method = "POST", .pattern = "/v1/projects/{project}/apps/{app}:pause", .handler = h_dummy},
};
#define NROUTES (sizeof routes / sizeof routes[0])

static fg_router_t *router;

static void setup(void) {
    ck_assert_int_eq(fg_router_new(&router, routes, NROUTES), FG_OK);
}

static void teardown(void) {
    fg_router_free(router);
}

static const char *param(const fg_route_match_t *m, const char *name) {
    for (size_t i = 0; i < m->nparams; i++) {
        if (strcmp(m->names[i], name) == 0)
            return m->values[i];
    }
    return NULL;
}

START_TEST(literal_route_matches) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "GET", "/healthz", &m), FG_OK);
    ck_assert_ptr_eq(m.route, &routes[0]);
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(params_are_extracted) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "GET", "/v1/projects/shop/apps/web", &m), FG_OK);
    ck_assert_ptr_eq(m.route, &routes[3]);
    ck_assert_str_eq(param(&m, "project"), "shop");
    ck_assert_str_eq(param(&m, "app"), "web");
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(verb_suffix_selects_verb_route) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "POST", "/v1/projects/shop/apps/web:scale", &m),
                     FG_OK);
    ck_assert_ptr_eq(m.route, &routes[5]);
    ck_assert_str_eq(param(&m, "app"), "web");
    fg_route_match_clear(&m);
    ck_assert_int_eq(fg_router_match(router, "POST", "/v1/projects/shop/apps/web:pause", &m),
                     FG_OK);
    ck_assert_ptr_eq(m.route, &routes[6]);
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(unknown_verb_is_not_found) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "POST", "/v1/projects/shop/apps/web:explode", &m),
                     FG_ENOENT);
    fg_route_match_clear(&m);
    /* A verb with no name before it is no match either. */
    ck_assert_int_eq(fg_router_match(router, "POST", "/v1/projects/shop/apps/:scale", &m),
                     FG_ENOENT);
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(wrong_method_lists_allowed_methods) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "PUT", "/v1/projects/shop/apps", &m), FG_EINVAL);
    ck_assert_str_eq(m.allow, "GET, HEAD, POST");
    fg_route_match_clear(&m);
    ck_assert_int_eq(fg_router_match(router, "GET", "/v1/projects/shop/apps/web:scale", &m),
                     FG_EINVAL);
    ck_assert_str_eq(m.allow, "POST");
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(head_follows_get) {
    fg_route_match_t m;
    ck_assert_int_eq(fg_router_match(router, "HEAD", "/healthz", &m), FG_OK);
    fg_route_match_clear(&m);
}
END_TEST

START_TEST(odd_paths_do_not_match) {
    static const char *const paths[] = {"",
                                        "healthz",
                                        "/healthz/",
                                        "//healthz",
                                        "/v1/projects//apps",
                                        "/v1/projects/shop/apps/web/x",
                                        "/"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        fg_route_match_t m;
        ck_assert_msg(fg_router_match(router, "GET", paths[i], &m) == FG_ENOENT, "'%s' matched",
                      paths[i]);
        fg_route_match_clear(&m);
    }
}
END_TEST

START_TEST(bad_patterns_are_refused) {
    static const char *const patterns[] = {"nope",    "/a/{",  "/a/{}",  "/a/{x}y",
                                           "/a/{x}:", "/a//b", "/a/b{c}"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        fg_route_t bad = {.method = "GET", .pattern = patterns[i], .handler = h_dummy};
        fg_router_t *r = NULL;
        ck_assert_msg(fg_router_new(&r, &bad, 1) == FG_EINVAL, "'%s' accepted", patterns[i]);
        ck_assert_ptr_null(r);
    }
}
END_TEST

START_TEST(problem_rows_are_stable) {
    /* Numbers, statuses and type URIs are a public contract: this pins them. */
    ck_assert_int_eq(FG_PROBLEM_BAD_REQUEST, 0);
    ck_assert_int_eq(FG_PROBLEM_ROUTE_NOT_FOUND, 10);
    ck_assert_int_eq(FG_PROBLEM_UNAUTHORIZED, 11);
    ck_assert_int_eq(FG_PROBLEM_FORBIDDEN, 12);
    ck_assert_int_eq(FG_PROBLEM_RATE_LIMITED, 13);
    ck_assert_int_eq(FG_PROBLEM_AUDIT_UNAVAILABLE, 14);
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_UNAUTHORIZED), 401);
    ck_assert_str_eq(fg_problem_type(FG_PROBLEM_UNAUTHORIZED),
                     "urn:fleetgate:problem:unauthorized");
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_FORBIDDEN), 403);
    ck_assert_str_eq(fg_problem_type(FG_PROBLEM_FORBIDDEN), "urn:fleetgate:problem:forbidden");
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_RATE_LIMITED), 429);
    ck_assert_str_eq(fg_problem_type(FG_PROBLEM_RATE_LIMITED),
                     "urn:fleetgate:problem:rate-limited");
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_AUDIT_UNAVAILABLE), 503);
    ck_assert_str_eq(fg_problem_type(FG_PROBLEM_AUDIT_UNAVAILABLE),
                     "urn:fleetgate:problem:audit-unavailable");
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_PAYLOAD_TOO_LARGE), 413);
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_UNSUPPORTED_MEDIA_TYPE), 415);
    ck_assert_uint_eq(fg_problem_status(FG_PROBLEM_METHOD_NOT_ALLOWED), 405);
    ck_assert_str_eq(fg_problem_type(FG_PROBLEM_MALFORMED_JSON),
                     "urn:fleetgate:problem:malformed-json");
    for (int k = 0; k < FG_PROBLEM__COUNT; k++) {
        ck_assert_msg(fg_problem_type((fg_problem_t)k) != NULL, "kind %d has no row", k);
        ck_assert_uint_ge(fg_problem_status((fg_problem_t)k), 400);
    }
    json_t *p = fg_problem_new(FG_PROBLEM_INVALID, "replicas: must be >= 0", "rid-1", "/x");
    ck_assert_str_eq(json_string_value(json_object_get(p, "title")), "Invalid request");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "status")), 422);
    ck_assert_str_eq(json_string_value(json_object_get(p, "requestId")), "rid-1");
    ck_assert_str_eq(json_string_value(json_object_get(p, "instance")), "/x");
    json_decref(p);
}
END_TEST

START_TEST(request_id_rules) {
    ck_assert(fg_request_id_valid("abc-123_X.y:z"));
    ck_assert(!fg_request_id_valid(""));
    ck_assert(!fg_request_id_valid(NULL));
    ck_assert(!fg_request_id_valid("has space"));
    ck_assert(!fg_request_id_valid("quote\""));
    ck_assert(!fg_request_id_valid("new\nline"));
    char id[65];
    memset(id, 'a', 64);
    id[64] = '\0';
    ck_assert(fg_request_id_valid(id));
    char longer[66];
    memset(longer, 'a', 65);
    longer[65] = '\0';
    ck_assert(!fg_request_id_valid(longer));
    char a[33], b[33];
    fg_request_id_generate(a);
    fg_request_id_generate(b);
    ck_assert_uint_eq(strlen(a), 32);
    ck_assert(fg_request_id_valid(a));
    ck_assert_str_ne(a, b);
}
END_TEST

static Suite *http_suite(void) {
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("router");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, literal_route_matches);
    tcase_add_test(tc, params_are_extracted);
    tcase_add_test(tc, verb_suffix_selects_verb_route);
    tcase_add_test(tc, unknown_verb_is_not_found);
    tcase_add_test(tc, wrong_method_lists_allowed_methods);
    tcase_add_test(tc, head_follows_get);
    tcase_add_test(tc, odd_paths_do_not_match);
    tcase_add_test(tc, bad_patterns_are_refused);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("problem-and-ids");
    tcase_add_test(tp, problem_rows_are_stable);
    tcase_add_test(tp, request_id_rules);
    suite_add_tcase(s, tp);
    return s;
}

int main(void) {
    return tm_run(http_suite());
}
