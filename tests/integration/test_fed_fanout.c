/* Integration tests of the write path's fan-out (kube/ fg_kube_request_all, fed/fanout.c)
 * against kubesim with three clusters: writes go out concurrently, each cluster's outcome is
 * its own (applied, refused with its Status, timed out, unreachable), and only the clusters
 * written to see the requests (kubesim's counters). */
#include "fleetgate/fed.h"

#include "testkubesim.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tk_sim_t ks;
static fg_config_t *cfg;
static fg_fed_t *fed;

static void setup(void) {
    static const char *const extra[] = {"--nodes", "1", "--heartbeat-ms", "60000", NULL};
    ck_assert_int_eq(tk_start(&ks, 3, extra), 0);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"clusters\": ["
             "{\"name\": \"c0\", \"zone\": \"z1\", \"url\": \"%s\", \"token_file\": \"%s\", "
             "\"ca_file\": \"%s\"},"
             "{\"name\": \"c1\", \"zone\": \"z1\", \"url\": \"%s\", \"token_file\": \"%s\", "
             "\"ca_file\": \"%s\"},"
             "{\"name\": \"c2\", \"zone\": \"z2\", \"url\": \"%s\", \"token_file\": \"%s\", "
             "\"ca_file\": \"%s\"}]}",
             tk_url(&ks, 0), ks.token_file, ks.ca_file, tk_url(&ks, 1), ks.token_file, ks.ca_file,
             tk_url(&ks, 2), ks.token_file, ks.ca_file);
    fg_buf_t errs;
    fg_buf_init(&errs, 4096);
    ck_assert_msg(fg_config_load_text("t.json", text, strlen(text), &cfg, &errs) == FG_OK, "%s",
                  errs.data ? errs.data : "");
    fg_buf_free(&errs);
    ck_assert_int_eq(fg_fed_new(&fed, cfg, NULL, 1000), FG_OK);
}

static void teardown(void) {
    fg_fed_free(fed);
    fg_config_free(cfg);
    tk_stop(&ks);
}

static json_t *namespace(const char *name) {
    return json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                     "name", name);
}

static void writes_to_all(fg_fed_write_t *w, const json_t *body, fg_kube_method_t m,
                          const char *path) {
    static const char *const names[] = {"c0", "c1", "c2"};
    for (int i = 0; i < 3; i++)
        w[i] = (fg_fed_write_t){.cluster = names[i], .method = m, .path = path, .body = body};
}

START_TEST(write_reaches_every_cluster_once) {
    json_t *ns = namespace("shop");
    fg_fed_write_t w[3];
    fg_fed_outcome_t o[3];
    writes_to_all(w, ns, FG_KUBE_POST, "/api/v1/namespaces");
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 2000, o), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(o[i].outcome, FG_FED_APPLIED);
        ck_assert_int_eq(o[i].status, 201);
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(o[i].object, "metadata"), "name")),
            "shop");
        ck_assert_int_eq(tk_requests(&ks, i, "create"), 1);
    }
    fg_fed_outcomes_clear(o, 3);
    /* Again: AlreadyExists is a failure, unless the write says a retried create is fine. */
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 2000, o), 3);
    ck_assert_int_eq(o[0].status, 409);
    ck_assert_str_eq(o[0].reason, "AlreadyExists");
    for (int i = 0; i < 3; i++)
        w[i].exists_ok = true;
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 2000, o), 0);
    /* Only c1: the others see nothing. */
    ck_assert_int_eq(fg_fed_write_all(fed, &w[1], 1, 2000, o), 0);
    ck_assert_int_eq(tk_requests(&ks, 0, "create"), 3);
    ck_assert_int_eq(tk_requests(&ks, 1, "create"), 4);
    ck_assert_int_eq(tk_requests(&ks, 2, "create"), 3);
    /* A delete of what is gone counts as done when the write says so. */
    writes_to_all(w, NULL, FG_KUBE_DELETE, "/api/v1/namespaces/nowhere");
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 2000, o), 3);
    ck_assert_int_eq(o[2].status, 404);
    for (int i = 0; i < 3; i++)
        w[i].absent_ok = true;
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 2000, o), 0);
    json_decref(ns);
}
END_TEST

/* c0 applies, c1 refuses with 503, c2 is slower than the deadline: each outcome is its own,
 * and the answer comes after one deadline, not the sum of the clusters' times. */
START_TEST(faults_give_each_cluster_its_outcome) {
    ck_assert_int_eq(tk_faults(&ks, 1, "{\"errorRate\": 1, \"errorStatus\": 503}"), 0);
    ck_assert_int_eq(tk_faults(&ks, 2, "{\"latencyMs\": 3000}"), 0);
    json_t *ns = namespace("shop");
    fg_fed_write_t w[3];
    fg_fed_outcome_t o[3];
    writes_to_all(w, ns, FG_KUBE_POST, "/api/v1/namespaces");
    uint64_t t0 = fg_now_ns();
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 800, o), 2);
    double s = (double)(fg_now_ns() - t0) / 1e9;
    ck_assert_msg(s < 2.5, "took %.2f s", s); /* the deadline, not c2's 3 s */
    ck_assert_int_eq(o[0].outcome, FG_FED_APPLIED);
    ck_assert_int_eq(o[1].outcome, FG_FED_FAILED);
    ck_assert_int_eq(o[1].status, 503);
    ck_assert_int_eq(o[2].outcome, FG_FED_TIMED_OUT);
    char sum[1024];
    bool timed_out;
    fg_fed_outcomes_summary(w, o, 3, sum, sizeof sum, &timed_out);
    ck_assert(!timed_out);
    ck_assert_msg(strstr(sum, "2 of 3 clusters failed the write: c1 answered 503 (") == sum, "%s",
                  sum);
    ck_assert_msg(strstr(sum, "; c2 did not answer in time") != NULL, "%s", sum);
    json_t *j = fg_fed_outcomes_json(w, o, 3);
    char *text = json_dumps(j, JSON_COMPACT);
    ck_assert_msg(strstr(text, "{\"cluster\":\"c0\",\"outcome\":\"Applied\",\"status\":201}") !=
                      NULL,
                  "%s", text);
    ck_assert_msg(strstr(text, "{\"cluster\":\"c2\",\"outcome\":\"TimedOut\",\"detail\":") != NULL,
                  "%s", text);
    free(text);
    json_decref(j);
    fg_fed_outcomes_clear(o, 3);
    /* A cluster that is down fails with the transport's reason; a name not configured too. */
    ck_assert_int_eq(tk_faults(&ks, 2, "{\"down\": true}"), 0);
    ck_assert_int_eq(tk_faults(&ks, 1, "{}"), 0);
    w[0].cluster = "nowhere";
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 800, o), 2);
    ck_assert_str_eq(o[0].detail, "no member cluster nowhere is configured");
    ck_assert_int_eq(o[1].outcome, FG_FED_APPLIED);
    ck_assert_int_eq(o[2].outcome, FG_FED_FAILED);
    ck_assert_str_eq(o[2].reason, FG_KUBE_REASON_TRANSPORT);
    fg_fed_outcomes_clear(o, 3);
    json_decref(ns);
}
END_TEST

/* Three clusters each 1 s slow: together well under the 3 s one after the other would take
 * (connections warmed first, so TLS handshakes, slow under the sanitizers, are not timed). */
START_TEST(writes_run_concurrently) {
    fg_fed_write_t w[3];
    fg_fed_outcome_t o[3];
    writes_to_all(w, NULL, FG_KUBE_GET, "/api/v1/namespaces");
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 5000, o), 0);
    fg_fed_outcomes_clear(o, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tk_faults(&ks, i, "{\"latencyMs\": 1000}"), 0);
    json_t *ns = namespace("par");
    writes_to_all(w, ns, FG_KUBE_POST, "/api/v1/namespaces");
    uint64_t t0 = fg_now_ns();
    ck_assert_int_eq(fg_fed_write_all(fed, w, 3, 8000, o), 0);
    double s = (double)(fg_now_ns() - t0) / 1e9;
    ck_assert_msg(s < 2.0, "took %.2f s: not concurrent", s);
    fg_fed_outcomes_clear(o, 3);
    json_decref(ns);
}
END_TEST

static Suite *fed_fanout_suite(void) {
    Suite *s = suite_create("fed_fanout");
    TCase *tc = tcase_create("fanout");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, write_reaches_every_cluster_once);
    tcase_add_test(tc, faults_give_each_cluster_its_outcome);
    tcase_add_test(tc, writes_run_concurrently);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(fed_fanout_suite());
}
