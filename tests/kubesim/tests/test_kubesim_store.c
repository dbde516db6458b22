/* kubesim: the store, pagination, list resourceVersion semantics, watch history and 410. */
#include <stdio.h>

#include "ks_test.h"
#include "testmain.h"

START_TEST(create_existing_key_is_eexist_and_stale_update_is_conflict) {
    ks_store_t *s = NULL;
    ks_obj_t *o = NULL;
    ck_assert_int_eq(ks_store_new(10, &s), FG_OK);
    ck_assert_int_eq(
        ks_store_put(s, 2, "ns/a", json_pack("{s:{}}", "metadata"), KS_PUT_CREATE, 0, &o), FG_OK);
    ck_assert_int_eq(o->rv, 2);
    ck_assert_str_eq(jstr(o->json, "metadata", "resourceVersion"), "2");
    ck_assert_int_eq(ks_store_put(s, 2, "ns/a", json_object(), KS_PUT_CREATE, 0, NULL), KS_EEXIST);
    ck_assert_int_eq(ks_store_put(s, 2, "ns/a", json_object(), KS_PUT_UPDATE, 1, NULL),
                     KS_ECONFLICT);
    ck_assert_int_eq(ks_store_put(s, 2, "ns/b", json_object(), KS_PUT_UPDATE, 0, NULL), FG_ENOENT);
    ck_assert_int_eq(ks_store_put(s, 2, "ns/a", json_object(), KS_PUT_UPDATE, 2, NULL), FG_OK);
    ks_obj_unref(o);
    ks_store_free(s);
}
END_TEST

START_TEST(list_at_exact_rv_sees_the_old_state) {
    ks_store_t *s = NULL;
    ks_obj_t **items = NULL;
    size_t n = 0;
    int64_t rv = 0;
    ck_assert_int_eq(ks_store_new(100, &s), FG_OK);
    ks_store_put(s, 2, "ns/a", json_pack("{s:{}}", "metadata"), KS_PUT_CREATE, 0, NULL); /* 2 */
    ks_store_put(s, 2, "ns/b", json_pack("{s:{}}", "metadata"), KS_PUT_CREATE, 0, NULL); /* 3 */
    ks_store_delete(s, 2, "ns/a", NULL);                                                 /* 4 */
    ks_store_put(s, 2, "ns/b", json_pack("{s:{}, s:i}", "metadata", "x", 1), KS_PUT_UPDATE, 0,
                 NULL); /* 5 */
    ck_assert_int_eq(ks_store_list(s, 2, "ns", NULL, 3, &items, &n, &rv), FG_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(items[0]->key, "ns/a");
    ck_assert_int_eq(items[1]->rv, 3);
    ks_objs_free(items, n);
    ck_assert_int_eq(ks_store_list(s, 2, NULL, NULL, 0, &items, &n, &rv), FG_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(rv, 5);
    ks_objs_free(items, n);
    ck_assert_int_eq(ks_store_list(s, 2, NULL, NULL, 99, &items, &n, &rv), KS_ETOOLARGE);
    ks_store_free(s);
}
END_TEST

/* 10,000 pods, limit=500: 20 pages, every page at the first page's RV, even with writes
 * (creates, updates, deletes) between the pages. */
START_TEST(list_10000_pods_limit_500_gives_20_consistent_pages) {
    ks_cluster_t *c = test_cluster(50000);
    char name[32], url[512];
    for (int i = 0; i < 10000; i++) {
        snprintf(name, sizeof(name), "pod-%05d", i);
        make_pod(c, "default", name, "{\"app\":\"web\"}", "node-1");
    }
    char *cont = NULL;
    const char *first_rv = NULL;
    char rv0[32] = "";
    int pages = 0, total = 0;
    char last[64] = "";
    uint64_t t0 = fg_now_ns();
    do {
        call_t r;
        if (cont == NULL)
            snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods?limit=500");
        else
            snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods?limit=500&continue=%s",
                     cont);
        call(c, "GET", url, NULL, NULL, &r);
        ck_assert_int_eq(r.resp.code, 200);
        first_rv = jstr(r.json, "metadata", "resourceVersion");
        if (pages == 0)
            snprintf(rv0, sizeof(rv0), "%s", first_rv);
        ck_assert_str_eq(first_rv, rv0);
        json_t *items = json_object_get(r.json, "items");
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            const char *nm = jstr(json_object_get(it, "metadata"), "name", NULL);
            ck_assert_msg(strcmp(nm, last) > 0, "items out of order or repeated");
            snprintf(last, sizeof(last), "%s", nm);
            ck_assert_str_eq(
                jstr(json_object_get(it, "metadata"), "resourceVersion", NULL)[0] ? "x" : "", "x");
        }
        total += (int)json_array_size(items);
        pages++;
        free(cont);
        cont = jstr(r.json, "metadata", "continue")
                   ? fg_xstrdup(jstr(r.json, "metadata", "continue"))
                   : NULL;
        call_free(&r);
        /* writes between pages: a new pod, a delete of a pod not yet read, a label change */
        snprintf(name, sizeof(name), "new-%03d", pages);
        make_pod(c, "default", name, "{\"app\":\"web\"}", "node-1");
        snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods/pod-%05d", 9999 - pages);
        call(c, "DELETE", url, NULL, NULL, &r);
        ck_assert_int_eq(r.resp.code, 200);
        call_free(&r);
    } while (cont != NULL);
    ck_assert_int_eq(pages, 20);
    ck_assert_int_eq(total, 10000);
    fprintf(stderr, "list 10000 pods in 20 pages (with writes between): %.1f ms\n",
            (double)(fg_now_ns() - t0) / 1e6);
    ks_cluster_free(c);
}
END_TEST

START_TEST(continue_token_past_history_gets_410_expired) {
    ks_cluster_t *c = test_cluster(10);
    call_t r;
    char url[512];
    make_pod(c, "default", "a", "{}", "n");
    make_pod(c, "default", "b", "{}", "n");
    call(c, "GET", "/api/v1/namespaces/default/pods?limit=1", NULL, NULL, &r);
    snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods?limit=1&continue=%s",
             jstr(r.json, "metadata", "continue"));
    call_free(&r);
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof(name), "x%d", i);
        make_pod(c, "default", name, "{}", "n");
    }
    call(c, "GET", url, NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 410);
    ck_assert_str_eq(jstr(r.json, "reason", NULL), "Expired");
    ck_assert_str_eq(jstr(r.json, "kind", NULL), "Status");
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

/* The validation table of K8S-SEMANTICS.md §1 (apimachinery validation.go:28-76). */
START_TEST(list_resource_version_options_are_validated) {
    static const struct {
        const char *query;
        int code;
    } CASES[] = {
        {"resourceVersionMatch=Exact", 422},
        {"resourceVersion=0&resourceVersionMatch=Exact", 422},
        {"resourceVersion=1&resourceVersionMatch=Newest", 422},
        {"sendInitialEvents=true", 422},
        {"resourceVersion=1&resourceVersionMatch=NotOlderThan&continue=abc", 422},
        {"resourceVersion=3&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Miwic3RhcnQiOiIifQ", 400},
        {"resourceVersion=abc", 400},
        {"resourceVersion=999999", 504},
        {"resourceVersion=0&resourceVersionMatch=NotOlderThan", 200},
        {"resourceVersion=2&resourceVersionMatch=Exact", 200},
        {"resourceVersion=2&limit=1", 200},
        {"labelSelector=a%20in%20(b", 400},
        {"fieldSelector=spec.color%3Dred", 400},
    };
    ks_cluster_t *c = test_cluster(100);
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        char url[256];
        call_t r;
        snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods?%s", CASES[i].query);
        call(c, "GET", url, NULL, NULL, &r);
        ck_assert_msg(r.resp.code == CASES[i].code, "%s: got %d want %d", CASES[i].query,
                      r.resp.code, CASES[i].code);
        if (r.resp.code != 200)
            ck_assert_str_eq(jstr(r.json, "kind", NULL), "Status");
        call_free(&r);
    }
    ks_cluster_free(c);
}
END_TEST

static ks_watch_t *start_watch(ks_cluster_t *c, const char *url, call_t *r) {
    call(c, "GET", url, NULL, NULL, r);
    ck_assert_int_eq(r->resp.code, 200);
    ck_assert_ptr_nonnull(r->resp.watch);
    return r->resp.watch;
}

START_TEST(watch_from_compacted_rv_gets_410) {
    ks_cluster_t *c = test_cluster(5);
    call_t r;
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%d", i);
        make_pod(c, "default", name, "{}", "n");
    }
    ks_watch_t *w = start_watch(c, "/api/v1/pods?watch=1&resourceVersion=2", &r);
    char *out = watch_read(w, 1, 5);
    json_t *ev = NULL;
    ck_assert_int_eq(fg_json_load(out, strlen(out), &ev, NULL, 0), FG_OK);
    ck_assert_str_eq(jstr(ev, "type", NULL), "ERROR");
    json_t *st = json_object_get(ev, "object");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 410);
    ck_assert_str_eq(jstr(st, "reason", NULL), "Expired");
    ck_assert_ptr_nonnull(strstr(jstr(st, "message", NULL), "too old resource version: 2 ("));
    fg_buf_t b;
    fg_buf_init(&b, 1024);
    ck_assert_int_eq(ks_watch_next(w, &b, 10), FG_ENOENT); /* the stream ends after the ERROR */
    fg_buf_free(&b);
    json_decref(ev);
    free(out);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

/* A watch of one kind waits for and reads that kind's events only: other kinds' writes
 * overflowing the history lose it nothing (as the API server's per-resource watch cache), while
 * losing its own kind's events is still 410. */
START_TEST(watch_of_one_kind_expires_only_when_its_own_events_are_dropped) {
    ks_store_t *s = NULL;
    ks_event_t evs[8];
    size_t n = 9;
    int64_t cursor = 0;
    char key[16];
    ck_assert_int_eq(ks_store_new(5, &s), FG_OK);
    ks_store_put(s, 2, "ns/a", json_pack("{s:{}}", "metadata"), KS_PUT_CREATE, 0, NULL); /* 2 */
    for (int i = 0; i < 10; i++) { /* 3..12: the ring keeps 8..12 */
        snprintf(key, sizeof(key), "ns/p%d", i);
        ks_store_put(s, 3, key, json_pack("{s:{}}", "metadata"), KS_PUT_CREATE, 0, NULL);
    }
    ck_assert_int_eq(ks_store_wait_events(s, 2, 2, 0, evs, 8, &n, &cursor), FG_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(cursor, 12);
    ck_assert_int_eq(ks_store_wait_events(s, -1, 2, 0, evs, 8, &n, &cursor), KS_EEXPIRED);
    ks_store_put(s, 2, "ns/a", json_pack("{s:{}}", "metadata"), KS_PUT_UPDATE, 0, NULL); /* 13 */
    ks_store_put(s, 3, "ns/p0", json_pack("{s:{}}", "metadata"), KS_PUT_UPDATE, 0, NULL);
    ck_assert_int_eq(ks_store_wait_events(s, 2, 2, 0, evs, 8, &n, &cursor), FG_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(evs[0].rv, 13);
    ck_assert_int_eq(evs[0].type, KS_MODIFIED);
    ck_assert_int_eq(cursor, 14);
    ks_events_release(evs, n);
    for (int i = 0; i < 6; i++) /* 15..20: the ring keeps 16..20, 15 (ns/a's) is dropped */
        ks_store_put(s, 2, "ns/a", json_pack("{s:{}}", "metadata"), KS_PUT_UPDATE, 0, NULL);
    ck_assert_int_eq(ks_store_wait_events(s, 2, 14, 0, evs, 8, &n, &cursor), KS_EEXPIRED);
    ck_assert_int_eq(ks_store_wait_events(s, 2, 15, 0, evs, 8, &n, &cursor), FG_OK);
    ck_assert_int_eq(n, 5);
    ks_events_release(evs, n);
    ks_store_free(s);
}
END_TEST

START_TEST(watch_from_rv_streams_added_modified_deleted_in_order) {
    ks_cluster_t *c = test_cluster(100);
    call_t r, w2;
    char url[128];
    snprintf(url, sizeof(url), "/api/v1/namespaces/default/pods?watch=true&resourceVersion=%lld",
             (long long)ks_store_rv(c->store));
    ks_watch_t *w = start_watch(c, url, &r);
    make_pod(c, "default", "a", "{\"app\":\"x\"}", "n");
    call(c, "PATCH", "/api/v1/namespaces/default/pods/a", "application/merge-patch+json",
         "{\"metadata\":{\"labels\":{\"v\":\"2\"}}}", &w2);
    call_free(&w2);
    call(c, "DELETE", "/api/v1/namespaces/default/pods/a", NULL, NULL, &w2);
    call_free(&w2);
    char *out = watch_read(w, 3, 20);
    const char *p1 = strstr(out, "\"type\":\"ADDED\"");
    const char *p2 = strstr(out, "\"type\":\"MODIFIED\"");
    const char *p3 = strstr(out, "\"type\":\"DELETED\"");
    ck_assert_msg(p1 && p2 && p3 && p1 < p2 && p2 < p3, "got: %.300s", out);
    free(out);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

START_TEST(watch_label_selector_turns_leaving_into_deleted) {
    ks_cluster_t *c = test_cluster(100);
    call_t r, p;
    make_pod(c, "default", "a", "{\"app\":\"x\"}", "n");
    ks_watch_t *w = start_watch(c, "/api/v1/pods?watch=1&labelSelector=app%3Dx", &r);
    char *out = watch_read(w, 1, 5);
    ck_assert_ptr_nonnull(strstr(out, "\"type\":\"ADDED\""));
    free(out);
    make_pod(c, "default", "other", "{\"app\":\"y\"}", "n");
    call(c, "PATCH", "/api/v1/namespaces/default/pods/a", "application/merge-patch+json",
         "{\"metadata\":{\"labels\":{\"app\":\"z\"}}}", &p);
    call_free(&p);
    out = watch_read(w, 1, 20);
    ck_assert_ptr_nonnull(strstr(out, "\"type\":\"DELETED\""));
    ck_assert_ptr_null(strstr(out, "\"other\""));
    free(out);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

START_TEST(watch_send_initial_events_ends_with_annotated_bookmark) {
    ks_cluster_t *c = test_cluster(100);
    call_t r;
    make_pod(c, "default", "a", "{}", "n");
    make_pod(c, "default", "b", "{}", "n");
    ks_watch_t *w = start_watch(c,
                                "/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks="
                                "true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
                                &r);
    char *out = watch_read(w, 3, 10);
    char *bm = strstr(out, "\"type\":\"BOOKMARK\"");
    ck_assert_ptr_nonnull(bm);
    ck_assert_ptr_nonnull(strstr(bm, "\"k8s.io/initial-events-end\":\"true\""));
    ck_assert_ptr_nonnull(strstr(bm, "\"spec\":{\"containers\":null},\"status\":{}"));
    ck_assert(strstr(out, "\"name\":\"b\"") < bm);
    free(out);
    call_free(&r);
    call(c, "GET", "/api/v1/pods?watch=1&sendInitialEvents=true", NULL, NULL, &r);
    ck_assert_int_eq(r.resp.code, 422);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

START_TEST(watch_sends_periodic_bookmarks_and_ends_at_timeout) {
    ks_cluster_t *c = test_cluster(100);
    call_t r;
    c->bookmark_ms = 100;
    ks_watch_t *w = start_watch(
        c, "/api/v1/pods?watch=1&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=1", &r);
    fg_buf_t b;
    fg_buf_init(&b, 1 << 20);
    uint64_t t0 = fg_now_ns();
    int rc = FG_OK;
    while (rc == FG_OK && fg_now_ns() - t0 < 5000000000ULL)
        rc = ks_watch_next(w, &b, 200);
    ck_assert_int_eq(rc, FG_ENOENT);
    ck_assert_uint_lt(fg_now_ns() - t0, 2500000000ULL);
    fg_buf_append(&b, "", 1);
    ck_assert_ptr_nonnull(strstr(b.data, "\"type\":\"BOOKMARK\""));
    fg_buf_free(&b);
    call_free(&r);
    ks_cluster_free(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kubesim_store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_existing_key_is_eexist_and_stale_update_is_conflict);
    tcase_add_test(tc, list_at_exact_rv_sees_the_old_state);
    tcase_add_test(tc, list_10000_pods_limit_500_gives_20_consistent_pages);
    tcase_add_test(tc, continue_token_past_history_gets_410_expired);
    tcase_add_test(tc, list_resource_version_options_are_validated);
    tcase_add_test(tc, watch_from_compacted_rv_gets_410);
    tcase_add_test(tc, watch_from_rv_streams_added_modified_deleted_in_order);
    tcase_add_test(tc, watch_label_selector_turns_leaving_into_deleted);
    tcase_add_test(tc, watch_send_initial_events_ends_with_annotated_bookmark);
    tcase_add_test(tc, watch_sends_periodic_bookmarks_and_ends_at_timeout);
    tcase_add_test(tc, watch_of_one_kind_expires_only_when_its_own_events_are_dropped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
