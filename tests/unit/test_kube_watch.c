/* Unit tests of the watch-stream parser (kube/watch.c) and of Status errors (kube/status.c):
 * every split position of a multi-event buffer, the real ndjson streams from kind clusters,
 * and garbage from a broken upstream refused with an error the informer can act on.
 * Fixtures are read from $FG_SHARED/fixtures/k8s (FG_SHARED defaults to tests/, where a copy
 * of ../shared/fixtures/k8s is committed). */
#include "fleetgate/kube.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EVENTS 64

typedef struct {
    int n;
    fg_kube_event_type_t type[MAX_EVENTS];
    char rv[MAX_EVENTS][32];
    char name[MAX_EVENTS][64];
    bool initial_end[MAX_EVENTS];
    long err_code[MAX_EVENTS];
    char err_reason[MAX_EVENTS][32];
    int stop_at; /* return FG_ERR from this event (1-based); 0: never */
} rec_t;

static int record(void *ud, const fg_kube_event_t *ev) {
    rec_t *r = ud;
    ck_assert_int_lt(r->n, MAX_EVENTS);
    int i = r->n++;
    r->type[i] = ev->type;
    ck_assert_ptr_nonnull(ev->object);
    snprintf(r->rv[i], sizeof r->rv[i], "%s", ev->resource_version ? ev->resource_version : "");
    const json_t *meta = json_object_get(ev->object, "metadata");
    const json_t *name = json_object_get(meta, "name");
    snprintf(r->name[i], sizeof r->name[i], "%s",
             json_is_string(name) ? json_string_value(name) : "");
    r->initial_end[i] = ev->initial_events_end;
    r->err_code[i] = ev->error ? ev->error->http_code : 0;
    snprintf(r->err_reason[i], sizeof r->err_reason[i], "%s", ev->error ? ev->error->reason : "");
    if (ev->type == FG_KUBE_EV_ERROR)
        ck_assert_ptr_nonnull(ev->error);
    else
        ck_assert_ptr_null(ev->error);
    return r->stop_at == r->n ? FG_ERR : FG_OK;
}

/* Feeds data in pieces of `chunk` bytes (0: all at once), then finishes. */
static int feed_chunked(const char *data, size_t len, size_t chunk, size_t max, rec_t *r,
                        fg_kube_error_t *err_out) {
    fg_kube_watch_parser_t *p = NULL;
    ck_assert_int_eq(fg_kube_watch_parser_new(&p, max, record, r), FG_OK);
    int rc = FG_OK;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t off = 0; off < len && rc == FG_OK; off += chunk)
        rc = fg_kube_watch_parser_feed(p, data + off, len - off < chunk ? len - off : chunk);
    if (rc == FG_OK)
        rc = fg_kube_watch_parser_finish(p);
    if (err_out)
        *err_out = *fg_kube_watch_parser_error(p);
    fg_kube_watch_parser_free(p);
    return rc;
}

static char *fixture(const char *rel, size_t *len) {
    const char *shared = getenv("FG_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/k8s/%s", shared ? shared : "tests", rel);
    char *data = NULL;
    int rc = fg_read_file(path, 64u << 20, &data, len);
    ck_assert_msg(rc == FG_OK, "cannot read fixture %s (set FG_SHARED)", path);
    return data;
}

/* Five events with the traps a line splitter misses: braces and quotes inside strings,
 * escaped backslashes, unicode escapes, a pretty-printed event, CRLF between events. */
static const char multi[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\",\"annotations\":{\"x\":\"}{][\\\"\\\\\"}}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\\u00e9\","
    "\"resourceVersion\":\"11\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"args\":[\"{\",\"]\"]}]"
    "}}}"
    "\r\n"
    "{\n  \"type\": \"DELETED\",\n  \"object\": {\"kind\":\"Pod\",\"metadata\":{\"name\":\"c\","
    "\"resourceVersion\":\"12\"}}\n}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"resourceVersion\":\"13\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},"
    "\"spec\":{\"containers\":null},\"status\":{}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (3171407)\",\"reason\":"
    "\"Expired\",\"code\":410}}\n";

static void check_multi(const rec_t *r) {
    ck_assert_int_eq(r->n, 5);
    ck_assert_int_eq(r->type[0], FG_KUBE_EV_ADDED);
    ck_assert_str_eq(r->rv[0], "10");
    ck_assert_int_eq(r->type[1], FG_KUBE_EV_MODIFIED);
    ck_assert_str_eq(r->name[1], "b\xc3\xa9");
    ck_assert_int_eq(r->type[2], FG_KUBE_EV_DELETED);
    ck_assert_str_eq(r->name[2], "c");
    ck_assert_int_eq(r->type[3], FG_KUBE_EV_BOOKMARK);
    ck_assert_str_eq(r->rv[3], "13");
    ck_assert(r->initial_end[3]);
    ck_assert(!r->initial_end[0]);
    ck_assert_int_eq(r->type[4], FG_KUBE_EV_ERROR);
    ck_assert_int_eq(r->err_code[4], 410);
    ck_assert_str_eq(r->err_reason[4], "Expired");
    ck_assert_str_eq(r->rv[4], "");
}

START_TEST(multi_event_buffer_whole_and_byte_by_byte) {
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(multi, strlen(multi), 0, 0, &r, NULL), FG_OK);
    check_multi(&r);
    rec_t r1 = {0};
    ck_assert_int_eq(feed_chunked(multi, strlen(multi), 1, 0, &r1, NULL), FG_OK);
    check_multi(&r1);
}
END_TEST

/* The buffer cut in two at every position, then in three at every pair of positions a
 * prime step apart: the events are the same whatever the cut. */
START_TEST(multi_event_buffer_every_split_position) {
    size_t len = strlen(multi);
    for (size_t i = 0; i <= len; i++) {
        rec_t r = {0};
        fg_kube_watch_parser_t *p = NULL;
        ck_assert_int_eq(fg_kube_watch_parser_new(&p, 0, record, &r), FG_OK);
        ck_assert_int_eq(fg_kube_watch_parser_feed(p, multi, i), FG_OK);
        ck_assert_int_eq(fg_kube_watch_parser_feed(p, multi + i, len - i), FG_OK);
        ck_assert_int_eq(fg_kube_watch_parser_finish(p), FG_OK);
        ck_assert_uint_eq(fg_kube_watch_parser_events(p), 5);
        fg_kube_watch_parser_free(p);
        check_multi(&r);
    }
    for (size_t i = 0; i <= len; i += 7) {
        for (size_t j = i; j <= len; j += 13) {
            rec_t r = {0};
            fg_kube_watch_parser_t *p = NULL;
            ck_assert_int_eq(fg_kube_watch_parser_new(&p, 0, record, &r), FG_OK);
            ck_assert_int_eq(fg_kube_watch_parser_feed(p, multi, i), FG_OK);
            ck_assert_int_eq(fg_kube_watch_parser_feed(p, multi + i, j - i), FG_OK);
            ck_assert_int_eq(fg_kube_watch_parser_feed(p, multi + j, len - j), FG_OK);
            ck_assert_int_eq(fg_kube_watch_parser_finish(p), FG_OK);
            fg_kube_watch_parser_free(p);
            check_multi(&r);
        }
    }
}
END_TEST

static const size_t chunk_sizes[] = {0, 1, 7, 512, 4096, 16384};

START_TEST(real_watch_pods_stream_five_added) {
    size_t len;
    char *data = fixture("real-kind-v1.36.2/watch_event-watch_pods.00.GET.200.ndjson", &len);
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(data, len, chunk_sizes[_i], 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 5);
    for (int i = 0; i < r.n; i++) {
        ck_assert_int_eq(r.type[i], FG_KUBE_EV_ADDED);
        ck_assert_str_ne(r.rv[i], "");
        ck_assert_str_ne(r.name[i], "");
    }
    free(data);
}
END_TEST

START_TEST(real_watch_list_stream_ends_with_initial_events_bookmark) {
    size_t len;
    char *data = fixture(
        "real-kind-v1.36.2/watch_event-watch_pods_without_initial_events.00.GET.200.ndjson", &len);
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(data, len, chunk_sizes[_i], 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 9);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(r.type[i], FG_KUBE_EV_ADDED);
        ck_assert(!r.initial_end[i]);
    }
    ck_assert_int_eq(r.type[8], FG_KUBE_EV_BOOKMARK);
    ck_assert_str_eq(r.rv[8], "550");
    ck_assert(r.initial_end[8]);
    free(data);
}
END_TEST

START_TEST(real_watch_error_410_is_gone) {
    size_t len;
    char *data = fixture("status/watch-ERROR-410-Expired.kind-v1.36.1.ndjson", &len);
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(data, len, chunk_sizes[_i], 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.type[0], FG_KUBE_EV_ERROR);
    ck_assert_int_eq(r.err_code[0], 410);
    ck_assert_str_eq(r.err_reason[0], "Expired");
    free(data);
}
END_TEST

START_TEST(real_old_streams_modified_deleted_and_pretty_printed) {
    size_t len;
    char *data = fixture("real-captures/kubeclient/watch_stream.json", &len);
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(data, len, 3, 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.type[0], FG_KUBE_EV_ADDED);
    ck_assert_int_eq(r.type[1], FG_KUBE_EV_MODIFIED);
    ck_assert_int_eq(r.type[2], FG_KUBE_EV_DELETED);
    free(data);
    data = fixture("real-captures/kubeclient/node_notice.json", &len);
    rec_t n = {0};
    ck_assert_int_eq(feed_chunked(data, len, 5, 0, &n, NULL), FG_OK);
    ck_assert_int_eq(n.n, 1);
    free(data);
}
END_TEST

/* Garbage from a broken upstream: each refused with the rc and a message naming the fault. */
static const struct {
    const char *name;
    const char *in;
    int rc;
    const char *reason;
    const char *message_has;
    int events_before;
} garbage[] = {
    {"non_json_line",
     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}\n"
     "<html>502 Bad Gateway</html>\n",
     FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "not a JSON object at stream byte", 1},
    {"unknown_type", "{\"type\":\"UPSERTED\",\"object\":{}}", FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
     "type: unknown (got \"UPSERTED\")", 0},
    {"type_not_string", "{\"type\":1,\"object\":{}}", FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
     "type: missing or not a string", 0},
    {"missing_object", "{\"type\":\"ADDED\"}\n", FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
     "object: missing", 0},
    {"object_not_object", "{\"type\":\"ADDED\",\"object\":[1,2]}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "object: not an object (got array)", 0},
    {"object_string", "{\"type\":\"MODIFIED\",\"object\":\"pod\"}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "object: not an object (got string)", 0},
    {"object_integer", "{\"type\":\"ADDED\",\"object\":7}", FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
     "object: not an object (got integer)", 0},
    {"broken_json_inside_braces", "{\"type\": ADDED, \"object\": {}}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "not JSON", 0},
    {"duplicate_keys", "{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "not JSON", 0},
    {"bookmark_without_rv", "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "BOOKMARK: object.metadata.resourceVersion missing", 0},
    {"added_rv_not_string",
     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":5}}}", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "ADDED: object.metadata.resourceVersion", 0},
    {"truncated_at_end", "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVer", FG_EINVAL,
     FG_KUBE_REASON_BAD_STREAM, "stream ended inside an event", 0},
    {"top_level_array", "[{\"type\":\"ADDED\"}]", FG_EINVAL, FG_KUBE_REASON_BAD_STREAM,
     "got byte 0x5b", 0},
    {"deep_nesting",
     "{\"type\":\"ADDED\",\"object\":{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
     "[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
     FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, "nesting deeper than", 0},
};

START_TEST(garbage_refused_with_reason) {
    rec_t r = {0};
    fg_kube_error_t err;
    const char *in = garbage[_i].in;
    int rc = feed_chunked(in, strlen(in), 5, 0, &r, &err);
    ck_assert_msg(rc == garbage[_i].rc, "%s: rc %d", garbage[_i].name, rc);
    ck_assert_str_eq(err.reason, garbage[_i].reason);
    ck_assert_msg(strstr(err.message, garbage[_i].message_has) != NULL, "%s: message \"%s\"",
                  garbage[_i].name, err.message);
    ck_assert_int_eq(r.n, garbage[_i].events_before);
}
END_TEST

START_TEST(dead_parser_keeps_failing) {
    rec_t r = {0};
    fg_kube_watch_parser_t *p = NULL;
    ck_assert_int_eq(fg_kube_watch_parser_new(&p, 0, record, &r), FG_OK);
    ck_assert_int_eq(fg_kube_watch_parser_feed(p, "oops\n", 5), FG_EINVAL);
    const char *good = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"}}}";
    ck_assert_int_eq(fg_kube_watch_parser_feed(p, good, strlen(good)), FG_EINVAL);
    ck_assert_int_eq(fg_kube_watch_parser_finish(p), FG_EINVAL);
    ck_assert_int_eq(r.n, 0);
    fg_kube_watch_parser_free(p);
}
END_TEST

START_TEST(oversize_event_refused_too_large) {
    char big[4096];
    int n = snprintf(big, sizeof big,
                     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"1\"},"
                     "\"pad\":\"%0*d\"}}\n",
                     2000, 0);
    rec_t r = {0};
    fg_kube_error_t err;
    ck_assert_int_eq(feed_chunked(big, (size_t)n, 100, 1024, &r, &err), FG_ETOOBIG);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_TOO_LARGE);
    ck_assert_ptr_nonnull(strstr(err.message, "larger than 1024 bytes"));
    ck_assert_int_eq(r.n, 0);
    /* The same event fits a bound just above its size, whole and in one-byte pieces. */
    rec_t ok = {0};
    ck_assert_int_eq(feed_chunked(big, (size_t)n, 1, (size_t)n, &ok, NULL), FG_OK);
    ck_assert_int_eq(ok.n, 1);
}
END_TEST

/* A 6 MiB object under the default 8 MiB bound, in 16 KiB reads as curl delivers them. */
START_TEST(large_object_under_default_bound_accepted) {
    size_t pad = 6u << 20;
    const char *head = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"big\","
                       "\"resourceVersion\":\"77\"},\"data\":\"";
    const char *tail = "\"}}\n";
    size_t len = strlen(head) + pad + strlen(tail);
    char *buf = malloc(len);
    memcpy(buf, head, strlen(head));
    memset(buf + strlen(head), 'x', pad);
    memcpy(buf + strlen(head) + pad, tail, strlen(tail));
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(buf, len, 16384, 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 1);
    ck_assert_str_eq(r.rv[0], "77");
    free(buf);
}
END_TEST

START_TEST(callback_stop_ends_the_stream) {
    rec_t r = {.stop_at = 2};
    fg_kube_error_t err;
    ck_assert_int_eq(feed_chunked(multi, strlen(multi), 0, 0, &r, &err), FG_ERR);
    ck_assert_int_eq(r.n, 2);
    ck_assert_str_eq(err.reason, "Stopped");
}
END_TEST

START_TEST(blank_and_whitespace_only_stream_is_empty) {
    rec_t r = {0};
    ck_assert_int_eq(feed_chunked(" \n\r\n\t\n", 6, 1, 0, &r, NULL), FG_OK);
    ck_assert_int_eq(r.n, 0);
    ck_assert_int_eq(feed_chunked("", 0, 0, 0, &r, NULL), FG_OK);
}
END_TEST

/* ---- Status bodies ------------------------------------------------------ */

static const struct {
    const char *file;
    long code;
    const char *reason;
    const char *message_has;
} statuses[] = {
    {"status/404-NotFound.pod.api-conventions.json", 404, "NotFound", "not found"},
    {"status/409-Conflict.resourcequota.helm-test.json", 409, "Conflict",
     "the object has been modified"},
    {"status/409-AlreadyExists.namespace.kubeclient.json", 409, "AlreadyExists", "already exists"},
    {"status/410-Expired.continue.kubeclient.json", 410, "Expired", "too old"},
    {"status/422-Invalid.crd.kind-v1.36.2.json", 422, "Invalid", ""},
};

START_TEST(status_fixtures_become_errors) {
    size_t len;
    char *data = fixture(statuses[_i].file, &len);
    fg_kube_error_t err;
    fg_kube_error_from_body(500, data, len, &err);
    ck_assert_int_eq(err.http_code, statuses[_i].code);
    ck_assert_str_eq(err.reason, statuses[_i].reason);
    ck_assert_msg(strstr(err.message, statuses[_i].message_has) != NULL, "message \"%s\"",
                  err.message);
    ck_assert_int_eq(err.retry_after_s, -1);
    ck_assert(fg_kube_error_is_gone(&err) == (statuses[_i].code == 410));
    free(data);
}
END_TEST

START_TEST(status_retry_after_and_bad_bodies) {
    const char *s = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                    "\"message\":\"too many requests\",\"reason\":\"TooManyRequests\","
                    "\"details\":{\"retryAfterSeconds\":3},\"code\":429}";
    fg_kube_error_t err;
    fg_kube_error_from_body(429, s, strlen(s), &err);
    ck_assert_int_eq(err.http_code, 429);
    ck_assert_int_eq(err.retry_after_s, 3);
    ck_assert_str_eq(err.reason, "TooManyRequests");
    const char *html = "<html><body>502 Bad\nGateway</body></html>";
    fg_kube_error_from_body(502, html, strlen(html), &err);
    ck_assert_int_eq(err.http_code, 502);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_BAD_RESPONSE);
    ck_assert_ptr_nonnull(strstr(err.message, "<html><body>502 Bad Gateway"));
    fg_kube_error_from_body(503, NULL, 0, &err);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_BAD_RESPONSE);
    const char *pod = "{\"kind\":\"Pod\",\"code\":\"x\"}";
    fg_kube_error_from_body(500, pod, strlen(pod), &err);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_BAD_RESPONSE);
    const char *wrong = "{\"kind\":\"Status\",\"code\":\"410\",\"reason\":7,\"details\":[]}";
    fg_kube_error_from_body(500, wrong, strlen(wrong), &err);
    ck_assert_int_eq(err.http_code, 500); /* a code of the wrong type is not believed */
    ck_assert_str_eq(err.reason, "Unknown");
}
END_TEST

static Suite *kube_watch_suite(void) {
    Suite *s = suite_create("kube_watch");
    TCase *tc = tcase_create("watch");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, multi_event_buffer_whole_and_byte_by_byte);
    tcase_add_test(tc, multi_event_buffer_every_split_position);
    int nchunks = (int)(sizeof chunk_sizes / sizeof chunk_sizes[0]);
    tcase_add_loop_test(tc, real_watch_pods_stream_five_added, 0, nchunks);
    tcase_add_loop_test(tc, real_watch_list_stream_ends_with_initial_events_bookmark, 0, nchunks);
    tcase_add_loop_test(tc, real_watch_error_410_is_gone, 0, nchunks);
    tcase_add_test(tc, real_old_streams_modified_deleted_and_pretty_printed);
    tcase_add_loop_test(tc, garbage_refused_with_reason, 0, sizeof garbage / sizeof garbage[0]);
    tcase_add_test(tc, dead_parser_keeps_failing);
    tcase_add_test(tc, oversize_event_refused_too_large);
    tcase_add_test(tc, large_object_under_default_bound_accepted);
    tcase_add_test(tc, callback_stop_ends_the_stream);
    tcase_add_test(tc, blank_and_whitespace_only_stream_is_empty);
    tcase_add_loop_test(tc, status_fixtures_become_errors, 0, sizeof statuses / sizeof statuses[0]);
    tcase_add_test(tc, status_retry_after_and_bad_bodies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(kube_watch_suite());
}
