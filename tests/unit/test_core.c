/* Unit tests of core/: buffers, number parsing, bounded JSON loads, metrics rendering. */
#include "fleetgate/core.h"
#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(buf_refuses_growth_past_max_and_stays_unchanged) {
    fg_buf_t b;
    fg_buf_init(&b, 8);
    ck_assert_int_eq(fg_buf_append(&b, "abcd", 4), FG_OK);
    ck_assert_int_eq(fg_buf_append(&b, "efghi", 5), FG_ETOOBIG);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_str_eq(b.data, "abcd");
    ck_assert_int_eq(fg_buf_appendf(&b, "%s", "toolong"), FG_ETOOBIG);
    ck_assert_int_eq(fg_buf_appendf(&b, "%d", 1234), FG_OK);
    ck_assert_str_eq(b.data, "abcd1234");
    fg_buf_free(&b);
}
END_TEST

/* appendf formats in place when the room is there: a refused append inside the room (past max)
 * leaves the buffer as it was, and one past the room grows it. */
START_TEST(buf_appendf_in_the_room_and_past_it) {
    fg_buf_t b;
    fg_buf_init(&b, 100);
    ck_assert_int_eq(fg_buf_reserve(&b, 60), FG_OK);
    ck_assert_int_eq(fg_buf_appendf(&b, "%s-%d", "ab", 7), FG_OK);
    ck_assert_str_eq(b.data, "ab-7");
    b.max = 10;
    ck_assert_int_eq(fg_buf_appendf(&b, "%s", "123456789"), FG_ETOOBIG);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_str_eq(b.data, "ab-7");
    b.max = 1000;
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(fg_buf_appendf(&b, "<%s>", big), FG_OK);
    ck_assert_uint_eq(b.len, 4 + 2 + 299);
    ck_assert_int_eq(b.data[b.len - 1], '>');
    ck_assert_int_eq(fg_buf_reserve(&b, 2000), FG_ETOOBIG);
    fg_buf_free(&b);
}
END_TEST

/* Integers written by hand read as printf's "%lld" writes them, at every width and sign. */
START_TEST(format_i64_is_printfs) {
    static const int64_t v[] = {0,
                                1,
                                -1,
                                9,
                                10,
                                99,
                                100,
                                429,
                                1000,
                                -1234567,
                                60000000,
                                INT64_MAX,
                                INT64_MIN,
                                INT64_MAX - 1,
                                INT64_MIN + 1};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char got[FG_INT_CHARS], want[32];
        size_t n = fg_format_i64(v[i], got);
        snprintf(want, sizeof want, "%lld", (long long)v[i]);
        ck_assert_str_eq(got, want);
        ck_assert_uint_eq(n, strlen(want));
    }
}
END_TEST

/* The seconds are formatted once per second per thread: each call still shows its own time. */
START_TEST(time_ms_format_follows_each_call) {
    char t[40];
    fg_format_time_ms(1795996799999, t, sizeof t);
    ck_assert_str_eq(t, "2026-11-29T23:59:59.999Z");
    fg_format_time_ms(1795996800000, t, sizeof t);
    ck_assert_str_eq(t, "2026-11-30T00:00:00.000Z");
    fg_format_time_ms(1795996800042, t, sizeof t);
    ck_assert_str_eq(t, "2026-11-30T00:00:00.042Z");
    fg_format_time_ms(1795996799001, t, sizeof t);
    ck_assert_str_eq(t, "2026-11-29T23:59:59.001Z");
    char small[12];
    fg_format_time_ms(1795996800042, small, sizeof small);
    ck_assert_str_eq(small, "2026-11-30T");
}
END_TEST

START_TEST(buf_json_escape_escapes_quotes_and_controls) {
    fg_buf_t b;
    fg_buf_init(&b, 64);
    ck_assert_int_eq(fg_buf_append_json_escaped(&b, "a\"b\\c\n\x01", 7), FG_OK);
    ck_assert_str_eq(b.data, "a\\\"b\\\\c\\u000a\\u0001");
    fg_buf_free(&b);
}
END_TEST

START_TEST(buf_json_escape_shows_invalid_utf8_as_text) {
    fg_buf_t b;
    fg_buf_init(&b, 128);
    /* é is kept; a stray continuation, an overlong '/', a surrogate and a cut sequence are not
     * UTF-8 and come out as \xNN, so the line stays valid JSON. */
    ck_assert_int_eq(fg_buf_append_json_escaped(&b, "\xc3\xa9\x80\xc0\xaf\xed\xa0\x80\xe2\x82", 10),
                     FG_OK);
    ck_assert_str_eq(b.data, "\xc3\xa9\\\\x80\\\\xc0\\\\xaf\\\\xed\\\\xa0\\\\x80\\\\xe2\\\\x82");
    json_error_t e;
    char doc[256];
    snprintf(doc, sizeof doc, "\"%s\"", b.data);
    json_t *j = json_loads(doc, JSON_DECODE_ANY, &e);
    ck_assert_msg(j != NULL, "not JSON: %s", doc);
    json_decref(j);
    fg_buf_free(&b);
}
END_TEST

START_TEST(json_string_clean_escapes_and_cuts) {
    bool cut = false;
    json_t *j = fg_json_string_clean("/p/\xff\xfe", 5, 64, &cut);
    ck_assert_str_eq(json_string_value(j), "/p/\\xff\\xfe");
    ck_assert(!cut);
    json_decref(j);
    j = fg_json_string_clean("a\0b", 3, 64, NULL);
    ck_assert_str_eq(json_string_value(j), "a\\x00b");
    json_decref(j);
    /* Cut at a character boundary: the 2-byte é does not fit in the last byte. */
    j = fg_json_string_clean("abc\xc3\xa9", 5, 4, &cut);
    ck_assert_str_eq(json_string_value(j), "abc");
    ck_assert(cut);
    json_decref(j);
}
END_TEST

/* The access log formats its strings without jansson: the text must read back as the same
 * string fg_json_string_clean makes, cut at the same place. */
static const struct {
    const char *s;
    size_t n, max;
} clean_cases[] = {
    {"/v1/projects/demo/pods", 22, 64},
    {"/p/\xff\xfe\"q\\", 8, 64},
    {"a\0b\n\tc", 6, 64},
    {"abc\xc3\xa9", 5, 4},
    {"\xe2\x82\xac\xe2\x82\xac", 6, 5},
    {"\x01\x02\x7f", 3, 64},
};

START_TEST(buf_json_clean_reads_back_as_json_string_clean) {
    fg_buf_t b;
    fg_buf_init(&b, 4096);
    fg_buf_append(&b, "\"", 1);
    ck_assert_int_eq(
        fg_buf_append_json_clean(&b, clean_cases[_i].s, clean_cases[_i].n, clean_cases[_i].max),
        FG_OK);
    fg_buf_append(&b, "\"", 1);
    json_t *got = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
    ck_assert_msg(got != NULL, "not JSON: %s", b.data);
    json_t *want =
        fg_json_string_clean(clean_cases[_i].s, clean_cases[_i].n, clean_cases[_i].max, NULL);
    ck_assert_msg(json_equal(got, want), "%s", b.data);
    json_decref(got);
    json_decref(want);
    fg_buf_free(&b);
}
END_TEST

static const struct {
    const char *in;
    int64_t min, max;
    int rc;
    int64_t want;
} int_cases[] = {
    {"0", 0, 10, FG_OK, 0},
    {"10", 0, 10, FG_OK, 10},
    {"11", 0, 10, FG_ETOOBIG, 0},
    {"-5", -10, 10, FG_OK, -5},
    {"", 0, 10, FG_EINVAL, 0},
    {"-", -10, 10, FG_EINVAL, 0},
    {"12a", 0, 100, FG_EINVAL, 0},
    {" 1", 0, 100, FG_EINVAL, 0},
    {"+1", 0, 100, FG_EINVAL, 0},
    {"9223372036854775807", 0, INT64_MAX, FG_OK, INT64_MAX},
    {"9223372036854775808", 0, INT64_MAX, FG_ETOOBIG, 0},
    {"99999999999999999999", 0, INT64_MAX, FG_ETOOBIG, 0},
    {"-9223372036854775808", INT64_MIN, 0, FG_OK, INT64_MIN},
};

/* RFC 7396 appendix A, every example. */
static const struct {
    const char *target, *patch, *result;
} merge_cases[] = {
    {"{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
    {"{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}"},
    {"{\"a\":\"b\"}", "{\"a\":null}", "{}"},
    {"{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}"},
    {"{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
    {"{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}"},
    {"{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}"},
    {"{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}"},
    {"[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]"},
    {"{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]"},
    {"{\"a\":\"foo\"}", "null", "null"},
    {"{\"a\":\"foo\"}", "\"bar\"", "\"bar\""},
    {"{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}"},
    {"[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}"},
    {"{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}"},
};

START_TEST(merge_patch_rfc7396_examples) {
    json_t *t = json_loads(merge_cases[_i].target, JSON_DECODE_ANY, NULL);
    json_t *p = json_loads(merge_cases[_i].patch, JSON_DECODE_ANY, NULL);
    json_t *want = json_loads(merge_cases[_i].result, JSON_DECODE_ANY, NULL);
    json_t *got = fg_json_merge_patch(t, p);
    ck_assert_msg(json_equal(got, want), "%s + %s", merge_cases[_i].target, merge_cases[_i].patch);
    json_decref(t);
    json_decref(p);
    json_decref(want);
    json_decref(got);
}
END_TEST

START_TEST(parse_int64_table) {
    int64_t v = -42;
    const char *in = int_cases[_i].in;
    int rc = fg_parse_int64(in, strlen(in), int_cases[_i].min, int_cases[_i].max, &v);
    ck_assert_msg(rc == int_cases[_i].rc, "input '%s': rc %d, want %d", in, rc, int_cases[_i].rc);
    if (rc == FG_OK)
        ck_assert_int_eq(v, int_cases[_i].want);
    else
        ck_assert_int_eq(v, -42); /* untouched on failure */
}
END_TEST

START_TEST(parse_hostport_accepts_v4_v6_names) {
    char *host = NULL;
    uint16_t port = 0;
    ck_assert_int_eq(fg_parse_hostport("127.0.0.1:8080", &host, &port), FG_OK);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 8080);
    free(host);
    ck_assert_int_eq(fg_parse_hostport("[::1]:443", &host, &port), FG_OK);
    ck_assert_str_eq(host, "::1");
    free(host);
    ck_assert_int_eq(fg_parse_hostport("localhost:1", &host, &port), FG_OK);
    free(host);
}
END_TEST

START_TEST(parse_hostport_refuses_bad_forms) {
    static const char *const bad[] = {"",           "8080",   ":8080",   "host:",   "host:0",
                                      "host:65536", "::1:80", "[::1]80", "host:80x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *host = NULL;
        uint16_t port;
        ck_assert_msg(fg_parse_hostport(bad[i], &host, &port) == FG_EINVAL, "'%s' accepted",
                      bad[i]);
        ck_assert_ptr_null(host);
    }
}
END_TEST

START_TEST(dns1123_label_rules) {
    ck_assert(fg_is_dns1123_label("shop", 4));
    ck_assert(fg_is_dns1123_label("a-1", 3));
    ck_assert(!fg_is_dns1123_label("-a", 2));
    ck_assert(!fg_is_dns1123_label("a-", 2));
    ck_assert(!fg_is_dns1123_label("Shop", 4));
    ck_assert(!fg_is_dns1123_label("a_b", 3));
    ck_assert(!fg_is_dns1123_label("", 0));
    char long_name[65];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    ck_assert(fg_is_dns1123_label(long_name, 63));
    ck_assert(!fg_is_dns1123_label(long_name, 64));
}
END_TEST

START_TEST(json_load_refuses_duplicate_keys_with_position) {
    json_t *j = NULL;
    char err[256];
    const char *text = "{\"a\": 1,\n \"a\": 2}";
    ck_assert_int_eq(fg_json_load(text, strlen(text), &j, err, sizeof err), FG_EINVAL);
    ck_assert_ptr_null(j);
    ck_assert_msg(strstr(err, "line 2") != NULL && strstr(err, "duplicate") != NULL, "%s", err);
}
END_TEST

START_TEST(json_load_refuses_deep_nesting) {
    char text[200];
    memset(text, '[', 100);
    memset(text + 100, ']', 100);
    json_t *j = NULL;
    char err[256];
    ck_assert_int_eq(fg_json_load(text, sizeof text, &j, err, sizeof err), FG_EINVAL);
    ck_assert_msg(strstr(err, "column 65") && strstr(err, "nesting"), "%s", err);
    /* Brackets inside strings do not count. */
    const char *ok =
        "{\"k\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}";
    ck_assert_int_eq(fg_json_load(ok, strlen(ok), &j, err, sizeof err), FG_OK);
    json_decref(j);
}
END_TEST

START_TEST(json_load_reports_where_it_broke) {
    json_t *j = NULL;
    char err[256];
    const char *text = "{\"a\": tru}";
    ck_assert_int_eq(fg_json_load(text, strlen(text), &j, err, sizeof err), FG_EINVAL);
    ck_assert_msg(strncmp(err, "line 1, column", 14) == 0, "%s", err);
}
END_TEST

START_TEST(json_type_names_tell_integer_from_number) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{}", "object"},  {"[]", "array"},     {"\"x\"", "string"},  {"7", "integer"},
        {"7.5", "number"}, {"true", "boolean"}, {"false", "boolean"}, {"null", "null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = json_loads(cases[i].text, JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(fg_json_type_name(j), cases[i].want);
        json_decref(j);
    }
    ck_assert_str_eq(fg_json_type_name(NULL), "nothing");
}
END_TEST

/* Label values longer than a series key together (a 600-byte method on an unmatched route, as
 * the request-head fuzzer sent) are cut in the key, never written past it. */
START_TEST(metrics_long_label_values_are_cut) {
    static const char *const labels[] = {"route", "method", "status", NULL};
    fg_metric_t *c = fg_metrics_register("t_long_total", "Long.", FG_METRIC_COUNTER, labels);
    char a[600], b[600];
    memset(a, 'a', sizeof a - 1);
    a[sizeof a - 1] = '\0';
    memset(b, 'b', sizeof b - 1);
    b[sizeof b - 1] = '\0';
    const char *v1[] = {"unmatched", a, "400"}, *v2[] = {a, b, "400"}, *v3[] = {a, "", "404"};
    fg_metric_add(c, v1, 1);
    fg_metric_add(c, v2, 1);
    fg_metric_add(c, v3, 1);
    fg_metric_add(c, v1, 1);
    fg_buf_t out;
    fg_buf_init(&out, 1 << 20);
    ck_assert_int_eq(fg_metrics_render(&out), FG_OK);
    ck_assert_ptr_nonnull(strstr(out.data, "t_long_total{route=\"unmatched\""));
    fg_buf_free(&out);
}
END_TEST

START_TEST(metrics_render_counters_gauges_histograms) {
    static const char *const labels[] = {"route", NULL};
    fg_metric_t *c =
        fg_metrics_register("t_requests_total", "Requests.", FG_METRIC_COUNTER, labels);
    fg_metric_t *h =
        fg_metrics_register("t_duration_seconds", "Durations.", FG_METRIC_HISTOGRAM, labels);
    const char *v1[] = {"/a\"b"};
    fg_metric_add(c, v1, 1);
    fg_metric_add(c, v1, 2);
    fg_metric_observe(h, v1, 0.003);
    fg_metric_observe(h, v1, 7.0);
    fg_buf_t b;
    fg_buf_init(&b, 1 << 16);
    ck_assert_int_eq(fg_metrics_render(&b), FG_OK);
    ck_assert_ptr_nonnull(strstr(b.data, "# TYPE t_requests_total counter\n"));
    ck_assert_ptr_nonnull(strstr(b.data, "t_requests_total{route=\"/a\\\"b\"} 3\n"));
    ck_assert_ptr_nonnull(
        strstr(b.data, "t_duration_seconds_bucket{route=\"/a\\\"b\",le=\"0.0025\"} 0\n"));
    ck_assert_ptr_nonnull(
        strstr(b.data, "t_duration_seconds_bucket{route=\"/a\\\"b\",le=\"0.005\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(b.data, "t_duration_seconds_bucket{route=\"/a\\\"b\",le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(b.data, "t_duration_seconds_count{route=\"/a\\\"b\"} 2\n"));
    fg_buf_free(&b);
    fg_buf_init(&b, 16);
    ck_assert_int_eq(fg_metrics_render(&b), FG_ETOOBIG);
    fg_buf_free(&b);
    fg_metrics_reset();
}
END_TEST

/* Label values longer than the series key (a fuzzed request's route and method) are cut: the
 * second value used to get a negative length once the first filled the key. */
START_TEST(metrics_label_values_past_the_key_are_cut) {
    static const char *const labels[] = {"route", "method", "status", NULL};
    fg_metric_t *c = fg_metrics_register("t_longer_total", "Longer.", FG_METRIC_COUNTER, labels);
    char big[2048];
    for (size_t len = 500; len < 520; len++) {
        memset(big, 'x', len);
        big[len] = '\0';
        const char *v[] = {big, big, "200"};
        fg_metric_add(c, v, 1);
        const char *w[] = {big, "GET", big};
        fg_metric_add(c, w, 1);
    }
    fg_buf_t b;
    fg_buf_init(&b, 1 << 22);
    ck_assert_int_eq(fg_metrics_render(&b), FG_OK);
    ck_assert_ptr_nonnull(strstr(b.data, "t_longer_total{"));
    fg_buf_free(&b);
    fg_metrics_reset();
}
END_TEST

static Suite *core_suite(void) {
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, merge_patch_rfc7396_examples, 0,
                        (int)(sizeof merge_cases / sizeof merge_cases[0]));
    tcase_add_test(tc, buf_refuses_growth_past_max_and_stays_unchanged);
    tcase_add_test(tc, buf_appendf_in_the_room_and_past_it);
    tcase_add_test(tc, time_ms_format_follows_each_call);
    tcase_add_test(tc, format_i64_is_printfs);
    tcase_add_test(tc, buf_json_escape_escapes_quotes_and_controls);
    tcase_add_test(tc, buf_json_escape_shows_invalid_utf8_as_text);
    tcase_add_test(tc, json_string_clean_escapes_and_cuts);
    tcase_add_loop_test(tc, buf_json_clean_reads_back_as_json_string_clean, 0,
                        sizeof clean_cases / sizeof clean_cases[0]);
    tcase_add_loop_test(tc, parse_int64_table, 0, sizeof int_cases / sizeof int_cases[0]);
    tcase_add_test(tc, parse_hostport_accepts_v4_v6_names);
    tcase_add_test(tc, parse_hostport_refuses_bad_forms);
    tcase_add_test(tc, dns1123_label_rules);
    tcase_add_test(tc, json_load_refuses_duplicate_keys_with_position);
    tcase_add_test(tc, json_load_refuses_deep_nesting);
    tcase_add_test(tc, json_load_reports_where_it_broke);
    tcase_add_test(tc, json_type_names_tell_integer_from_number);
    tcase_add_test(tc, metrics_render_counters_gauges_histograms);
    tcase_add_test(tc, metrics_long_label_values_are_cut);
    tcase_add_test(tc, metrics_label_values_past_the_key_are_cut);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(core_suite());
}
