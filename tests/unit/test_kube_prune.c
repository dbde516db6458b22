/* Unit tests of managedFields (and one named annotation) pruned from JSON text before it is
 * parsed (kube/prune.c): a table of shapes (where the member sits, whitespace, escaped JSON in
 * fieldsV1 keys, brackets inside strings, both cuts in one object), the texts it must leave alone
 * (other members of that name, a duplicate, an escaped key, broken text), and every real fixture:
 * the pruned text parses to exactly the original less metadata.managedFields. Fixtures are read
 * from $FG_SHARED/fixtures/k8s (default tests/). */
#include "fleetgate/kube.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    fg_kube_prune_t where;
    const char *in;
    const char *out;        /* NULL: left as it is */
    const char *annotation; /* the annotation cut too, or NULL */
} prune_case_t;

#define PL FG_KUBE_PLACEMENT_ANNOTATION

static const prune_case_t cases[] = {
    {"between_members", FG_KUBE_PRUNE_OBJECT,
     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"manager\":\"m\","
     "\"fieldsV1\":{\"f:spec\":{}}}],\"uid\":\"u\"},\"spec\":{}}",
     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":{}}", NULL},
    {"last_member", FG_KUBE_PRUNE_OBJECT, "{\"metadata\":{\"name\":\"a\",\"managedFields\":[]}}",
     "{\"metadata\":{\"name\":\"a\"}}", NULL},
    {"only_member", FG_KUBE_PRUNE_OBJECT, "{\"metadata\":{\"managedFields\":[1]}}",
     "{\"metadata\":{}}", NULL},
    {"first_member_with_whitespace", FG_KUBE_PRUNE_OBJECT,
     " { \"metadata\" : {\n  \"managedFields\" : [ ] ,\n  \"name\" : \"a\" } } ",
     " { \"metadata\" : {\n  \"name\" : \"a\" } } ", NULL},
    {"escaped_json_in_fieldsv1_keys", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"managedFields\":[{\"fieldsV1\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{}"
     "}}}],\"name\":\"a\"}}",
     "{\"metadata\":{\"name\":\"a\"}}", NULL},
    {"brackets_inside_strings", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"x\":\"}]{[\\\"\"},\"managedFields\":[\"]}\"],\"name\":"
     "\"a\"}}",
     "{\"metadata\":{\"annotations\":{\"x\":\"}]{[\\\"\"},\"name\":\"a\"}}", NULL},
    {"watch_event", FG_KUBE_PRUNE_EVENT,
     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[{}],"
     "\"resourceVersion\":\"5\"}}}",
     "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"5\"}}}",
     NULL},
    {"list_items", FG_KUBE_PRUNE_LIST,
     "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{"
     "\"name\":\"a\",\"managedFields\":[]}}, {\"metadata\":{\"managedFields\":[],\"name\":\"b\"}},"
     "{\"metadata\":{\"name\":\"c\"}}]}",
     "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{"
     "\"name\":\"a\"}}, {\"metadata\":{\"name\":\"b\"}},{\"metadata\":{\"name\":\"c\"}}]}",
     NULL},
    {"list_compacted_in_one_pass", FG_KUBE_PRUNE_LIST,
     "{\"items\":[{\"metadata\":{\"managedFields\":[{\"f:a\":{}},{\"f:b\":{}}],\"name\":\"a\"}},"
     "{\"metadata\":{\"name\":\"b\",\"managedFields\":[{\"x\":\"]}\"}]},\"spec\":{\"n\":1}},"
     "7,{\"metadata\":{\"name\":\"c\"}},{\"metadata\":{\"managedFields\":[[[]]]}}]}",
     "{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"},\"spec\":{"
     "\"n\":1}},7,{\"metadata\":{\"name\":\"c\"}},{\"metadata\":{}}]}",
     NULL},
    {"empty_list", FG_KUBE_PRUNE_LIST, "{\"items\":[]}", NULL, NULL},
    /* the placement annotation too: the informers' cut */
    {"annotation_before_managed_fields", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"a\":\"1\",\"" PL
     "\":\"{\\\"x\\\":[1,\\\"}\\\"]}\",\"b\":\"2\"},"
     "\"managedFields\":[],\"name\":\"n\"}}",
     "{\"metadata\":{\"annotations\":{\"a\":\"1\",\"b\":\"2\"},\"name\":\"n\"}}", PL},
    {"annotation_after_managed_fields_the_only_one", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"managedFields\":[{}],\"annotations\":{\"" PL "\":\"x\"}},\"spec\":{}}",
     "{\"metadata\":{\"annotations\":{}},\"spec\":{}}", PL},
    {"annotation_the_last_one_no_managed_fields", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"a\":\"1\", \"" PL "\" : \"x\" },\"name\":\"n\"}}",
     "{\"metadata\":{\"annotations\":{\"a\":\"1\" },\"name\":\"n\"}}", PL},
    {"annotation_in_a_watch_event", FG_KUBE_PRUNE_EVENT,
     "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"annotations\":{\"" PL "\":\"x\","
     "\"b\":\"2\"},\"resourceVersion\":\"5\"}}}",
     "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"annotations\":{\"b\":\"2\"},"
     "\"resourceVersion\":\"5\"}}}",
     PL},
    {"annotation_and_managed_fields_in_each_item", FG_KUBE_PRUNE_LIST,
     "{\"items\":[{\"metadata\":{\"annotations\":{\"" PL "\":\"x\",\"b\":\"2\"},\"managedFields\":["
     "],\"name\":\"a\"}},{\"metadata\":{\"managedFields\":[],\"annotations\":{\"c\":\"3\",\"" PL
     "\":\"y\"}}},{\"metadata\":{\"name\":\"c\"}}]}",
     "{\"items\":[{\"metadata\":{\"annotations\":{\"b\":\"2\"},\"name\":\"a\"}},{\"metadata\":{"
     "\"annotations\":{\"c\":\"3\"}}},{\"metadata\":{\"name\":\"c\"}}]}",
     PL},
    {"annotation_twice_kept_managed_fields_cut", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"" PL "\":\"x\",\"" PL "\":\"y\"},\"managedFields\":[]}}",
     "{\"metadata\":{\"annotations\":{\"" PL "\":\"x\",\"" PL "\":\"y\"}}}", PL},
    {"annotation_not_named_is_kept", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"" PL "\":\"x\"},\"managedFields\":[]}}",
     "{\"metadata\":{\"annotations\":{\"" PL "\":\"x\"}}}", NULL},
    /* left alone */
    {"elsewhere_than_metadata", FG_KUBE_PRUNE_OBJECT,
     "{\"spec\":{\"managedFields\":[]},\"metadata\":{\"name\":\"a\"}}", NULL, NULL},
    {"annotation_of_that_name", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"managedFields\":\"x\"}}}", NULL, NULL},
    {"twice_in_metadata", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"managedFields\":[],\"name\":\"a\",\"managedFields\":[]}}", NULL, NULL},
    {"escaped_key", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"managed\\u0046ields\":[],\"managedFields\":[]}}", NULL, NULL},
    {"event_without_object", FG_KUBE_PRUNE_EVENT,
     "{\"type\":\"ADDED\",\"metadata\":{\"managedFields\":[]}}", NULL, NULL},
    {"not_an_object", FG_KUBE_PRUNE_OBJECT, "[{\"metadata\":{\"managedFields\":[]}}]", NULL, NULL},
    {"empty_text", FG_KUBE_PRUNE_OBJECT, "", NULL, NULL},
    {"cut_short", FG_KUBE_PRUNE_OBJECT, "{\"metadata\":{\"managedFields\":[1,2", NULL, NULL},
    {"no_colon", FG_KUBE_PRUNE_OBJECT, "{\"metadata\" {\"managedFields\":[]}}", NULL, NULL},
    {"unterminated_key", FG_KUBE_PRUNE_OBJECT, "{\"metadata\":{\"managedFields", NULL, NULL},
    {"annotation_elsewhere", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"labels\":{\"" PL "\":\"x\"}},\"spec\":{\"template\":{\"metadata\":{"
     "\"annotations\":{\"" PL "\":\"x\"}}}}}",
     NULL, PL},
    {"annotation_key_escaped", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"fleetgate.io\\/placement\":\"x\"}}}", NULL, PL},
    {"annotations_twice", FG_KUBE_PRUNE_OBJECT,
     "{\"metadata\":{\"annotations\":{\"" PL "\":\"x\"},\"annotations\":{}}}", NULL, PL},
};

START_TEST(prune_cases) {
    const prune_case_t *c = &cases[_i];
    size_t len = strlen(c->in);
    char *text = fg_xstrdup(c->in);
    size_t got = fg_kube_prune(text, len, c->where, c->annotation);
    const char *want = c->out ? c->out : c->in;
    ck_assert_msg(got == strlen(want) && memcmp(text, want, got) == 0, "%s: got %.*s", c->name,
                  (int)got, text);
    free(text);
}
END_TEST

/* ---- real objects ------------------------------------------------------------------------- */

static const char *const fixtures[] = {
    "real-kind-v1.36.2/pod-list.00.GET.200.json",
    "real-kind-v1.36.2/deployment-list.00.GET.200.json",
    "real-kind-v1.36.2/job-create.00.POST.201.json",
    "real-kind-v1.36.2/job-create.05.GET.200.json",
    "real-kind-v1.36.2/patch-deployment.00.POST.201.json",
    "real-kind-v1.36.2/patch-deployment.03.PATCH.200.json",
    "real-kind-v1.36.2/watch_event-watch_pods.00.GET.200.ndjson",
    "real-kind-v1.36.2/watch_event-watch_pods_without_initial_events.00.GET.200.ndjson",
    "real-captures/apiserver-testdata.exemplar_pod.json",
    "api-testdata/HEAD/apps.v1.Deployment.json",
};

static bool has_managed(const json_t *obj) {
    return json_object_get(json_object_get(obj, "metadata"), "managedFields") != NULL;
}

static void drop_managed(json_t *obj) {
    json_object_del(json_object_get(obj, "metadata"), "managedFields");
}

/* Prunes one document of len bytes at text as where says and checks that it parses to the
 * original less its managedFields; returns the bytes cut. */
static size_t check_document(const char *rel, const char *text, size_t len, fg_kube_prune_t where) {
    json_t *orig = NULL, *pruned = NULL;
    char err[160];
    ck_assert_msg(fg_json_load(text, len, &orig, err, sizeof err) == FG_OK, "%s: %s", rel, err);
    char *copy = fg_xmalloc(len + 1);
    memcpy(copy, text, len);
    size_t n = fg_kube_prune(copy, len, where, NULL);
    ck_assert_msg(fg_json_load(copy, n, &pruned, err, sizeof err) == FG_OK, "%s: pruned: %s", rel,
                  err);
    size_t i;
    json_t *item;
    if (where == FG_KUBE_PRUNE_LIST) {
        json_array_foreach(json_object_get(orig, "items"), i, item) drop_managed(item);
        json_array_foreach(json_object_get(pruned, "items"), i, item) {
            ck_assert_msg(!has_managed(item), "%s: item %zu kept its managedFields", rel, i);
        }
    } else {
        drop_managed(where == FG_KUBE_PRUNE_EVENT ? json_object_get(orig, "object") : orig);
        ck_assert_msg(
            !has_managed(where == FG_KUBE_PRUNE_EVENT ? json_object_get(pruned, "object") : pruned),
            "%s: managedFields kept", rel);
    }
    ck_assert_msg(json_equal(orig, pruned), "%s: the pruned text parses to something else", rel);
    json_decref(orig);
    json_decref(pruned);
    free(copy);
    return len - n;
}

START_TEST(real_objects_lose_their_managed_fields_only) {
    size_t cut = 0, before = 0;
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        const char *shared = getenv("FG_SHARED");
        char *path = fg_xasprintf("%s/fixtures/k8s/%s", shared ? shared : "tests", fixtures[f]);
        char *data = NULL;
        size_t len = 0;
        ck_assert_msg(fg_read_file(path, 64u << 20, &data, &len) == FG_OK, "cannot read %s", path);
        before += len;
        if (strstr(fixtures[f], ".ndjson") != NULL) {
            for (char *line = data, *nl; line < data + len; line = nl + 1) {
                nl = memchr(line, '\n', (size_t)(data + len - line));
                if (nl == NULL)
                    nl = data + len;
                if (nl > line)
                    cut +=
                        check_document(fixtures[f], line, (size_t)(nl - line), FG_KUBE_PRUNE_EVENT);
            }
        } else {
            json_t *probe = NULL;
            ck_assert_int_eq(fg_json_load(data, len, &probe, NULL, 0), FG_OK);
            fg_kube_prune_t where = json_is_array(json_object_get(probe, "items"))
                                        ? FG_KUBE_PRUNE_LIST
                                        : FG_KUBE_PRUNE_OBJECT;
            json_decref(probe);
            cut += check_document(fixtures[f], data, len, where);
        }
        free(data);
        free(path);
    }
    /* the fixtures are real objects: managedFields are about a third of their bytes */
    ck_assert_msg(cut * 5 > before, "cut %zu of %zu bytes", cut, before);
}
END_TEST

static Suite *kube_prune_suite(void) {
    Suite *s = suite_create("kube_prune");
    TCase *tc = tcase_create("prune");
    tcase_add_loop_test(tc, prune_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, real_objects_lose_their_managed_fields_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(kube_prune_suite());
}
