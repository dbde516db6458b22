/* Unit tests of api/selector.c: label selectors as `labelSelector` takes them. Each case is a
 * selector, a label set and whether it matches; refusals name what is wrong. */
#include "../../src/api/selector.h"

#include "testmain.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *selector, *labels; /* labels: a JSON object, or NULL for none */
    bool match;
} match_cases[] = {
    {"app=web", "{\"app\": \"web\"}", true},
    {"app==web", "{\"app\": \"web\"}", true},
    {"app=web", "{\"app\": \"api\"}", false},
    {"app=web", NULL, false},
    {"app!=web", "{\"app\": \"api\"}", true},
    {"app!=web", NULL, true}, /* a missing label is not equal, as in Kubernetes */
    {"app!=web", "{\"app\": \"web\"}", false},
    {"tier in (front, back)", "{\"tier\": \"back\"}", true},
    {"tier in (front,back)", "{\"tier\": \"db\"}", false},
    {"tier notin (front, back)", "{\"tier\": \"db\"}", true},
    {"tier notin (front)", NULL, true},
    {"tier notin (front)", "{\"tier\": \"front\"}", false},
    {"canary", "{\"canary\": \"\"}", true},
    {"canary", "{\"app\": \"web\"}", false},
    {"!canary", "{\"app\": \"web\"}", true},
    {"!canary", "{\"canary\": \"yes\"}", false},
    {"app=web,tier in (front),!canary", "{\"app\": \"web\", \"tier\": \"front\"}", true},
    {"app=web,tier in (front),!canary",
     "{\"app\": \"web\", \"tier\": \"front\", \"canary\": \"1\"}", false},
    {"example.com/team = payments", "{\"example.com/team\": \"payments\"}", true},
    {"app=", "{\"app\": \"\"}", true}, /* an empty value is a value */
};

START_TEST(selector_matches_as_kubernetes_does) {
    rd_selector_t *s = NULL;
    const char *why = NULL;
    ck_assert_msg(rd_selector_parse(match_cases[_i].selector, &s, &why) == FG_OK, "%s: %s",
                  match_cases[_i].selector, why ? why : "");
    json_t *labels = match_cases[_i].labels ? json_loads(match_cases[_i].labels, 0, NULL) : NULL;
    ck_assert_msg(rd_selector_match(s, labels) == match_cases[_i].match, "%s against %s",
                  match_cases[_i].selector,
                  match_cases[_i].labels ? match_cases[_i].labels : "no labels");
    json_decref(labels);
    rd_selector_free(s);
}
END_TEST

static const struct {
    const char *selector, *why;
} bad_cases[] = {
    {"", "must be 1 to 1024 characters"},
    {"=web", "a requirement needs a label key"},
    {"app=web,", "a requirement needs a label key"},
    {"app>3", "expected =, ==, !=, in or notin after the key"},
    {"app in web", "in and notin need a (value, ...) list"},
    {"app in (a, b", "a set must end with )"},
    {"app=web tier=db", "requirements must be separated by commas"},
    {"app=w@b", "requirements must be separated by commas"},
};

START_TEST(selector_refusals_say_why) {
    rd_selector_t *s = (rd_selector_t *)1;
    const char *why = NULL;
    ck_assert_int_eq(rd_selector_parse(bad_cases[_i].selector, &s, &why), FG_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(why, bad_cases[_i].why);
}
END_TEST

START_TEST(selector_bounds_are_enforced) {
    rd_selector_t *s = NULL;
    const char *why = NULL;
    char text[2048];
    /* 1025 characters */
    memset(text, 'a', 1025);
    text[1025] = '\0';
    ck_assert_int_eq(rd_selector_parse(text, &s, &why), FG_EINVAL);
    ck_assert_str_eq(why, "must be 1 to 1024 characters");
    /* 33 requirements */
    fg_buf_t b;
    fg_buf_init(&b, 4096);
    for (int i = 0; i < 33; i++)
        fg_buf_appendf(&b, "%sk", i ? "," : "");
    ck_assert_int_eq(rd_selector_parse(b.data, &s, &why), FG_EINVAL);
    ck_assert_str_eq(why, "has too many requirements");
    /* 33 values in one set */
    fg_buf_reset(&b);
    fg_buf_appendf(&b, "k in (v");
    for (int i = 0; i < 32; i++)
        fg_buf_appendf(&b, ",v");
    fg_buf_appendf(&b, ")");
    ck_assert_int_eq(rd_selector_parse(b.data, &s, &why), FG_EINVAL);
    ck_assert_str_eq(why, "too many values in a set");
    fg_buf_free(&b);
    /* a value of 318 bytes */
    memset(text, 'v', sizeof text);
    memcpy(text, "k=", 2);
    text[2 + 318] = '\0';
    ck_assert_int_eq(rd_selector_parse(text, &s, &why), FG_EINVAL);
    ck_assert_str_eq(why, "a label value is too long");
}
END_TEST

START_TEST(selector_null_matches_everything) {
    ck_assert(rd_selector_match(NULL, NULL));
    rd_selector_free(NULL);
}
END_TEST

static Suite *selector_suite(void) {
    Suite *s = suite_create("selector");
    TCase *tc = tcase_create("selector");
    tcase_add_loop_test(tc, selector_matches_as_kubernetes_does, 0,
                        sizeof match_cases / sizeof match_cases[0]);
    tcase_add_loop_test(tc, selector_refusals_say_why, 0, sizeof bad_cases / sizeof bad_cases[0]);
    tcase_add_test(tc, selector_bounds_are_enforced);
    tcase_add_test(tc, selector_null_matches_everything);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(selector_suite());
}
