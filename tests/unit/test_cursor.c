/* Unit tests of api/cursor.c: list cursors round-trip, and anything a client forges or damages
 * is refused without touching the outputs' bounds. */
#include "../../src/api/cursor.h"

#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *cluster;
} round_cases[] = {
    {"web-7d4b9c", "east-a"},
    {"a", ""}, /* lists grouped by name carry no cluster */
    {"very.long-name.with.dots-0", "c"},
};

START_TEST(cursor_round_trips) {
    char text[2 * RD_CURSOR_MAX], name[RD_CURSOR_NAME_MAX + 1], cluster[64];
    rd_cursor_encode(round_cases[_i].name, round_cases[_i].cluster, text, sizeof text);
    ck_assert(text[0] != '\0');
    ck_assert(strpbrk(text, "+/=") == NULL); /* URL-safe as it is */
    ck_assert_int_eq(rd_cursor_decode(text, name, sizeof name, cluster, sizeof cluster), FG_OK);
    ck_assert_str_eq(name, round_cases[_i].name);
    ck_assert_str_eq(cluster, round_cases[_i].cluster);
}
END_TEST

START_TEST(cursor_of_longest_name_round_trips) {
    char text[2 * RD_CURSOR_MAX], name[RD_CURSOR_NAME_MAX + 1], cluster[64], longest[254];
    memset(longest, 'n', 253);
    longest[253] = '\0';
    rd_cursor_encode(longest, "zone-cluster-with-a-long-name-of-sixty-three-characters-xxxxxxx",
                     text, sizeof text);
    ck_assert_int_eq(rd_cursor_decode(text, name, sizeof name, cluster, sizeof cluster), FG_OK);
    ck_assert_str_eq(name, longest);
}
END_TEST

/* base64url of: "2a|b" (unknown version), "1|b" (no name), "1A|b" (upper case), "1a|B_" (bad
 * cluster), "1a" (no bar), "1a|b\0c" (NUL inside) */
static const char *const bad_cases[] = {
    "MmF8Yg",   "MXxi", "MUF8Yg", "MWF8Ql8", "MWE",
    "MWF8YgBj", "",     "!!!!",   "MWF8Yg=", /* padding is not base64url as encoded here */
    "MWF8Y",                                 /* non-canonical trailing bits */
};

START_TEST(cursor_forgeries_are_refused) {
    char name[RD_CURSOR_NAME_MAX + 1] = "untouched", cluster[64] = "untouched";
    ck_assert_int_eq(rd_cursor_decode(bad_cases[_i], name, sizeof name, cluster, sizeof cluster),
                     FG_EINVAL);
}
END_TEST

START_TEST(cursor_too_long_is_refused_before_decoding) {
    char text[RD_CURSOR_MAX + 8], name[RD_CURSOR_NAME_MAX + 1], cluster[64];
    memset(text, 'A', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    ck_assert_int_eq(rd_cursor_decode(text, name, sizeof name, cluster, sizeof cluster), FG_EINVAL);
}
END_TEST

START_TEST(cursor_small_outputs_are_refused) {
    char text[2 * RD_CURSOR_MAX], name[4], cluster[64];
    rd_cursor_encode("longer-than-four", "c", text, sizeof text);
    ck_assert_int_eq(rd_cursor_decode(text, name, sizeof name, cluster, sizeof cluster), FG_EINVAL);
    rd_cursor_encode("a", "c", text, 8); /* too small an output: empty, never cut */
    ck_assert_str_eq(text, "");
}
END_TEST

static Suite *cursor_suite(void) {
    Suite *s = suite_create("cursor");
    TCase *tc = tcase_create("cursor");
    tcase_add_loop_test(tc, cursor_round_trips, 0, sizeof round_cases / sizeof round_cases[0]);
    tcase_add_test(tc, cursor_of_longest_name_round_trips);
    tcase_add_loop_test(tc, cursor_forgeries_are_refused, 0,
                        sizeof bad_cases / sizeof bad_cases[0]);
    tcase_add_test(tc, cursor_too_long_is_refused_before_decoding);
    tcase_add_test(tc, cursor_small_outputs_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(cursor_suite());
}
