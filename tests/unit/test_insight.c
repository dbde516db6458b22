/* Unit tests of src/insight/ (insight.h) and of fg_parse_time_ms (core): timeline order members
 * and cursors round-trip and refuse forgeries; stored entries become the API's Event, filtered,
 * with the fold's bookkeeping left out; RFC 3339 times parse exactly and refuse bad ones. */
#include "fleetgate/insight.h"

#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(member_orders_newest_first) {
    char a[FG_INSIGHT_MEMBER_MAX + 1], b[FG_INSIGHT_MEMBER_MAX + 1];
    fg_insight_member(1732284187120LL, "c0/web.0123456789abcdef", a, sizeof a);
    fg_insight_member(1732284187121LL, "c0/web.0123456789abcdef", b, sizeof b);
    ck_assert_str_eq(a, "8267715812879|c0/web.0123456789abcdef");
    ck_assert_int_lt(strcmp(b, a), 0); /* later sorts first */
    ck_assert_int_eq(fg_insight_member_ms(a), 1732284187120LL);
    fg_insight_member(5, "Bad_Id", a, sizeof a);
    ck_assert_str_eq(a, "");
    ck_assert_int_eq(fg_insight_member_ms("12|x"), -1);
}
END_TEST

START_TEST(cursor_round_trips_and_refuses) {
    char m[FG_INSIGHT_MEMBER_MAX + 1], text[FG_INSIGHT_CURSOR_MAX + 1], back[sizeof m];
    char longest[FG_INSIGHT_ID_MAX + 1];
    memset(longest, 'a', FG_INSIGHT_ID_MAX);
    longest[FG_INSIGHT_ID_MAX] = '\0';
    const char *ids[] = {"c0/web.0123456789abcdef", "x", longest};
    for (size_t i = 0; i < 3; i++) {
        fg_insight_member(1000 + (int64_t)i, ids[i], m, sizeof m);
        fg_insight_cursor_encode(m, text, sizeof text);
        ck_assert(text[0] != '\0');
        ck_assert(strpbrk(text, "+/=") == NULL);
        ck_assert_int_eq(fg_insight_cursor_decode(text, back, sizeof back), FG_OK);
        ck_assert_str_eq(back, m);
    }
    /* base64url of "1" + not a member; "2" + a member; "" ; too long; not base64url */
    const char *bad[] = {"MW5vdA", "Mjk5OTk5OTk5OTk5OTl8eA", "", "!!!!", "MQ"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(fg_insight_cursor_decode(bad[i], back, sizeof back) == FG_EINVAL, "%s",
                      bad[i]);
    char huge[FG_INSIGHT_CURSOR_MAX + 8];
    memset(huge, 'A', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    ck_assert_int_eq(fg_insight_cursor_decode(huge, back, sizeof back), FG_EINVAL);
}
END_TEST

static const char entry[] =
    "{\"id\":\"c0/web-1.00aa\",\"type\":\"Warning\",\"reason\":\"BackOff\",\"message\":\"m\","
    "\"object\":{\"kind\":\"Pod\",\"name\":\"web-1\"},\"app\":\"web\",\"cluster\":\"c0\","
    "\"zone\":\"z\",\"source\":\"kubelet\",\"count\":4,\"_src\":{\"e.1\":1,\"e.2\":3},"
    "\"_srcn\":2,\"_carry\":0,\"_f\":1732284180000,\"_l\":1732284187120}";

START_TEST(entry_presented_without_bookkeeping) {
    json_t *e = fg_insight_event_present(entry, strlen(entry), NULL, NULL);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(json_string_value(json_object_get(e, "firstSeenAt")),
                     "2024-11-22T14:03:00.000Z");
    ck_assert_str_eq(json_string_value(json_object_get(e, "lastSeenAt")),
                     "2024-11-22T14:03:07.120Z");
    ck_assert_int_eq(json_integer_value(json_object_get(e, "count")), 4);
    ck_assert_ptr_null(json_object_get(e, "_src"));
    ck_assert_ptr_null(json_object_get(e, "_l"));
    ck_assert_str_eq(json_string_value(json_object_get(e, "app")), "web");
    json_decref(e);
}
END_TEST

START_TEST(entry_filters) {
    struct {
        fg_insight_event_filter_t f;
        bool pass;
    } cases[] = {
        {{.kind = "Pod"}, true},
        {{.kind = "App"}, false},
        {{.name = "web-1"}, true},
        {{.name = "web-2"}, false},
        {{.app = "web"}, true},
        {{.app = "api"}, false},
        {{.type = "Warning", .reason = "BackOff", .cluster = "c0"}, true},
        {{.type = "Normal"}, false},
        {{.reason = "Pulled"}, false},
        {{.cluster = "c1"}, false},
        {{.since_ms = 1732284187120LL}, true},
        {{.since_ms = 1732284187121LL}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool damaged = true;
        json_t *e = fg_insight_event_present(entry, strlen(entry), &cases[i].f, &damaged);
        ck_assert_msg((e != NULL) == cases[i].pass, "case %zu", i);
        ck_assert(!damaged);
        json_decref(e);
    }
}
END_TEST

START_TEST(damaged_entries_refused) {
    const char *bad[] = {
        "not json",
        "[]",
        "{}",
        "{\"id\":\"x\",\"type\":\"Odd\",\"reason\":\"r\",\"message\":\"m\",\"object\":{\"kind\":"
        "\"Pod\",\"name\":\"p\"},\"cluster\":\"c\",\"zone\":\"z\",\"count\":1,\"_f\":1,\"_l\":2}",
        "{\"id\":\"x\",\"type\":\"Normal\",\"reason\":\"r\",\"message\":\"m\",\"object\":{\"kind\":"
        "\"Pod\",\"name\":\"p\"},\"cluster\":\"c\",\"zone\":\"z\",\"count\":0,\"_f\":1,\"_l\":2}",
        "{\"id\":\"x\",\"type\":\"Normal\",\"reason\":\"r\",\"message\":\"m\",\"object\":{\"kind\":"
        "\"Pod\"},\"cluster\":\"c\",\"zone\":\"z\",\"count\":1,\"_f\":1,\"_l\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool damaged = false;
        ck_assert_ptr_null(fg_insight_event_present(bad[i], strlen(bad[i]), NULL, &damaged));
        ck_assert_msg(damaged, "%s", bad[i]);
    }
}
END_TEST

START_TEST(times_parse) {
    struct {
        const char *s;
        int64_t ms;
    } good[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2026-11-22T14:03:07Z", 1795356187000LL},
        {"2026-11-22T14:03:07.12Z", 1795356187120LL},
        {"2026-11-22T14:03:07.123456789z", 1795356187123LL},
        {"2026-11-22T15:03:07+01:00", 1795356187000LL},
        {"2024-02-29t00:00:00Z", 1709164800000LL},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -1;
        ck_assert_msg(fg_parse_time_ms(good[i].s, strlen(good[i].s), &ms) == FG_OK, "%s",
                      good[i].s);
        ck_assert_msg(ms == good[i].ms, "%s: %lld", good[i].s, (long long)ms);
    }
    const char *bad[] = {"",
                         "yesterday",
                         "2026-11-22",
                         "2026-11-22T14:03:07",
                         "2026-13-01T00:00:00Z",
                         "2025-02-29T00:00:00Z",
                         "2026-04-31T00:00:00Z",
                         "2026-11-22T24:00:00Z",
                         "2026-11-22T14:03:07.Z",
                         "2026-11-22T14:03:07Zjunk",
                         "2026-11-22T14:03:07+1:00",
                         "1969-12-31T23:59:59Z",
                         "2026-11-22 14:03:07Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms;
        ck_assert_msg(fg_parse_time_ms(bad[i], strlen(bad[i]), &ms) == FG_EINVAL, "%s", bad[i]);
    }
}
END_TEST

static const char *const hist =
    "{\"id\":\"h0123456789abcdef0123456789abcdef\",\"time\":1800000000000,\"object\":{\"kind\":"
    "\"App\",\"name\":\"web\"},\"app\":\"web\",\"change\":\"ReplicasChanged\",\"summary\":"
    "\"replicas 3 \xe2\x86\x92 "
    "2\",\"cluster\":\"c2\",\"from\":{\"replicas\":3},\"to\":{\"replicas\":2},"
    "\"actor\":\"dev\",\"requestId\":\"sc-web\",\"_ms\":1800000000000,\"version\":\"812\"}";

START_TEST(history_entry_presented_and_filtered) {
    bool damaged = true;
    json_t *e = fg_insight_history_present(hist, strlen(hist), NULL, &damaged);
    ck_assert_ptr_nonnull(e);
    ck_assert(!damaged);
    ck_assert_str_eq(json_string_value(json_object_get(e, "time")), "2027-01-15T08:00:00.000Z");
    ck_assert_str_eq(json_string_value(json_object_get(e, "requestId")), "sc-web");
    ck_assert_ptr_null(json_object_get(e, "_ms"));
    ck_assert_ptr_null(json_object_get(e, "version"));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(e, "to"), "replicas")), 2);
    json_decref(e);
    fg_insight_history_filter_t f = {.kind = "App",
                                     .name = "web",
                                     .app = "web",
                                     .change = "ReplicasChanged",
                                     .since_ms = 1800000000000};
    e = fg_insight_history_present(hist, strlen(hist), &f, &damaged);
    ck_assert_ptr_nonnull(e);
    json_decref(e);
    fg_insight_history_filter_t miss[] = {{.kind = "Pod"},
                                          {.name = "api"},
                                          {.app = "api"},
                                          {.change = "Created"},
                                          {.since_ms = 1800000000001}};
    for (size_t i = 0; i < sizeof miss / sizeof miss[0]; i++) {
        ck_assert_ptr_null(fg_insight_history_present(hist, strlen(hist), &miss[i], &damaged));
        ck_assert(!damaged);
    }
    /* damaged: not JSON, an unknown change, a bad id, no time, from not an object */
    static const char *const bad[] = {
        "nope",
        "{\"id\":\"h1\",\"_ms\":1,\"object\":{\"kind\":\"App\",\"name\":\"w\"},\"change\":"
        "\"Exploded\",\"summary\":\"\"}",
        "{\"id\":\"H!\",\"_ms\":1,\"object\":{\"kind\":\"App\",\"name\":\"w\"},\"change\":"
        "\"Created\",\"summary\":\"\"}",
        "{\"id\":\"h1\",\"object\":{\"kind\":\"App\",\"name\":\"w\"},\"change\":\"Created\","
        "\"summary\":\"\"}",
        "{\"id\":\"h1\",\"_ms\":1,\"object\":{\"kind\":\"App\",\"name\":\"w\"},\"change\":"
        "\"Created\",\"summary\":\"\",\"from\":[1]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(fg_insight_history_present(bad[i], strlen(bad[i]), NULL, &damaged));
        ck_assert_msg(damaged, "%s", bad[i]);
    }
    /* a request id outside the contract's pattern is presented as null */
    const char *odd = "{\"id\":\"h1\",\"_ms\":1,\"object\":{\"kind\":\"App\",\"name\":\"w\"},"
                      "\"change\":\"Created\",\"summary\":\"s\",\"requestId\":\"a b\"}";
    e = fg_insight_history_present(odd, strlen(odd), NULL, &damaged);
    ck_assert_ptr_nonnull(e);
    ck_assert(json_is_null(json_object_get(e, "requestId")));
    ck_assert(json_is_null(json_object_get(e, "actor")));
    json_decref(e);
}
END_TEST

static Suite *insight_suite(void) {
    Suite *s = suite_create("insight");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, member_orders_newest_first);
    tcase_add_test(tc, cursor_round_trips_and_refuses);
    tcase_add_test(tc, entry_presented_without_bookkeeping);
    tcase_add_test(tc, entry_filters);
    tcase_add_test(tc, damaged_entries_refused);
    tcase_add_test(tc, times_parse);
    tcase_add_test(tc, history_entry_presented_and_filtered);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(insight_suite());
}
