/* Unit tests of the simplified model (kube/translate.c, kube/quantity.c).
 *
 * Golden files: every real fixture object of a served kind under $FG_SHARED/fixtures/k8s
 * (lists, single objects, watch streams, k8s-openapi replays) is translated, and the result is
 * compared with tests/golden/kube/<fixture path with '/' as '__'>. After a deliberate change
 * of the model, regenerate them with
 *     FG_GOLDEN_UPDATE=1 build/tests/unit/test_kube_translate     (or: ... --update)
 * then read the diff before committing it.
 *
 * Also: malformed objects give clear errors, outputs never carry managedFields or the
 * last-applied annotation, huge inputs give bounded outputs, quantities parse as Kubernetes
 * parses them, and the size of a simplified pod against the raw one (printed; asserted on the
 * realistic pods only). */
#include "fleetgate/kube.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool update_mode;

static const fg_kube_origin_t origin = {"kind-a", "zone-1"};

static char *fixture_path(const char *rel) {
    const char *shared = getenv("FG_SHARED");
    return fg_xasprintf("%s/fixtures/k8s/%s", shared ? shared : "tests", rel);
}

static char *fixture(const char *rel, size_t *len) {
    char *path = fixture_path(rel);
    char *data = NULL;
    int rc = fg_read_file(path, 64u << 20, &data, len);
    ck_assert_msg(rc == FG_OK, "cannot read fixture %s (set FG_SHARED)", path);
    free(path);
    return data;
}

/* ---- collecting the objects of a fixture -------------------------------- */

typedef struct {
    json_t *out; /* array of {"kind", "simplified"} or {"kind", "error"} */
    json_t *raw; /* array of the raw objects, same order */
} collect_t;

static void collect_text(collect_t *c, const char *text, size_t len);

static void add_object(collect_t *c, fg_kind_t kind, json_t *obj) {
    json_t *entry = json_object();
    json_t *simple = NULL;
    char err[256];
    json_object_set_new(entry, "kind", json_string(fg_kube_kind_info(kind)->name));
    if (fg_kube_translate(kind, obj, &origin, &simple, err, sizeof err) == FG_OK)
        json_object_set_new(entry, "simplified", simple);
    else
        json_object_set_new(entry, "error", json_string(err));
    json_array_append_new(c->out, entry);
    json_array_append(c->raw, obj);
}

/* Walks a document: objects of served kinds, items of their lists (which carry no kind of
 * their own), objects of watch events, and the response bodies of replay recordings. */
static void walk(collect_t *c, json_t *j) {
    if (json_is_array(j)) {
        size_t i;
        json_t *e;
        json_array_foreach(j, i, e) walk(c, e);
        return;
    }
    if (!json_is_object(j))
        return;
    const json_t *body = json_object_get(j, "response_body");
    if (json_is_string(body)) {
        collect_text(c, json_string_value(body), json_string_length(body));
        return;
    }
    const json_t *type = json_object_get(j, "type");
    json_t *object = json_object_get(j, "object");
    if (json_is_string(type) && json_is_object(object)) {
        if (strcmp(json_string_value(type), "BOOKMARK") != 0 &&
            strcmp(json_string_value(type), "ERROR") != 0)
            walk(c, object);
        return;
    }
    const char *kind = json_string_value(json_object_get(j, "kind"));
    const char *version = json_string_value(json_object_get(j, "apiVersion"));
    json_t *items = json_object_get(j, "items");
    fg_kind_t k;
    if (kind != NULL && json_is_array(items)) {
        size_t n = strlen(kind);
        char item_kind[64];
        if (n > 4 && n < sizeof item_kind && strcmp(kind + n - 4, "List") == 0) {
            snprintf(item_kind, sizeof item_kind, "%.*s", (int)(n - 4), kind);
            if (fg_kube_kind_of(item_kind, version, &k) == FG_OK) {
                size_t i;
                json_t *e;
                json_array_foreach(items, i, e) add_object(c, k, e);
            }
        }
        return;
    }
    if (fg_kube_kind_of(kind, version, &k) == FG_OK)
        add_object(c, k, j);
}

static int collect_event(void *ud, const fg_kube_event_t *ev) {
    collect_t *c = ud;
    if (ev->type != FG_KUBE_EV_BOOKMARK && ev->type != FG_KUBE_EV_ERROR)
        walk(c, ev->object);
    return FG_OK;
}

/* A JSON document, or else a watch stream (ndjson). */
static void collect_text(collect_t *c, const char *text, size_t len) {
    json_t *j = NULL;
    char err[160];
    if (fg_json_load(text, len, &j, err, sizeof err) == FG_OK) {
        walk(c, j);
        json_decref(j);
        return;
    }
    fg_kube_watch_parser_t *p = NULL;
    ck_assert_int_eq(fg_kube_watch_parser_new(&p, 0, collect_event, c), FG_OK);
    if (fg_kube_watch_parser_feed(p, text, len) == FG_OK)
        fg_kube_watch_parser_finish(p);
    fg_kube_watch_parser_free(p);
}

static void collect_file(collect_t *c, const char *rel) {
    size_t len;
    char *data = fixture(rel, &len);
    c->out = json_array();
    c->raw = json_array();
    collect_text(c, data, len);
    free(data);
}

/* ---- golden files --------------------------------------------------------- */

static const char *const golden_fixtures[] = {
    "api-testdata/HEAD/core.v1.Pod.json",
    "api-testdata/HEAD/apps.v1.Deployment.json",
    "api-testdata/HEAD/batch.v1.Job.json",
    "api-testdata/HEAD/batch.v1.CronJob.json",
    "api-testdata/HEAD/autoscaling.v2.HorizontalPodAutoscaler.json",
    "api-testdata/HEAD/core.v1.Event.json",
    "api-testdata/HEAD/events.k8s.io.v1.Event.json",
    "api-testdata/HEAD/core.v1.Node.json",
    "api-testdata/HEAD/core.v1.Namespace.json",
    "real-kind-v1.36.2/pod-list.00.GET.200.json",
    "real-kind-v1.36.2/deployment-list.00.GET.200.json",
    "real-kind-v1.36.2/job-create.00.POST.201.json",
    "real-kind-v1.36.2/job-create.01.GET.200.json",
    "real-kind-v1.36.2/job-create.02.GET.200.json",
    "real-kind-v1.36.2/job-create.03.GET.200.json",
    "real-kind-v1.36.2/job-create.04.GET.200.json",
    "real-kind-v1.36.2/job-create.05.GET.200.json",
    "real-kind-v1.36.2/job-create.06.GET.200.json",
    "real-kind-v1.36.2/job-create.07.GET.200.json",
    "real-kind-v1.36.2/job-create.08.DELETE.200.json",
    "real-kind-v1.36.2/job-create.09.DELETE.200.json",
    "real-kind-v1.36.2/patch-deployment.00.POST.201.json",
    "real-kind-v1.36.2/patch-deployment.01.PATCH.200.json",
    "real-kind-v1.36.2/patch-deployment.02.PATCH.200.json",
    "real-kind-v1.36.2/patch-deployment.03.PATCH.200.json",
    "real-kind-v1.36.2/watch_event-watch_pods.00.GET.200.ndjson",
    "real-kind-v1.36.2/watch_event-watch_pods_without_initial_events.00.GET.200.ndjson",
    "k8s-openapi-replays/v1-36/pod-list.json",
    "k8s-openapi-replays/v1-36/deployment-list.json",
    "k8s-openapi-replays/v1-36/job-create.json",
    "k8s-openapi-replays/v1-36/patch-deployment.json",
    "k8s-openapi-replays/v1-36/watch_event-watch_pods.json",
    "k8s-openapi-replays/v1-36/watch_event-watch_pods_without_initial_events.json",
    "k8s-openapi-replays/v1-27/logs-get.json",
    "real-captures/apiserver-testdata.exemplar_pod.json",
    "real-captures/k9s/p1.json",
    "real-captures/k9s/ev.json",
    "real-captures/k9s/no.json",
    "real-captures/k9s/cj.json",
    "real-captures/k9s/job.json",
    "real-captures/kubeclient/pod_list.json",
    "real-captures/kubeclient/pods_1.json",
    "real-captures/kubeclient/pods_2.json",
    "real-captures/kubeclient/event_list.json",
    "real-captures/kubeclient/namespace_list.json",
    "real-captures/kubeclient/node_notice.json",
    "real-captures/kubeclient/watch_stream.json",
};

#define NGOLDEN (sizeof golden_fixtures / sizeof golden_fixtures[0])

/* tests/golden/kube/<fixture path, '/' written "__">.golden.json */
static char *golden_path(const char *rel) {
    fg_buf_t b;
    fg_buf_init(&b, 1024);
    fg_buf_appendf(&b, "tests/golden/kube/");
    for (const char *p = rel; *p; p++)
        fg_buf_append(&b, *p == '/' ? "__" : p, *p == '/' ? 2 : 1);
    fg_buf_appendf(&b, ".golden.json");
    return fg_buf_steal(&b, NULL);
}

START_TEST(golden_translation_of_every_real_fixture) {
    const char *rel = golden_fixtures[_i];
    collect_t c;
    collect_file(&c, rel);
    ck_assert_msg(json_array_size(c.out) > 0, "%s: no object of a served kind", rel);
    char *gpath = golden_path(rel);
    if (update_mode) {
        ck_assert_int_eq(json_dump_file(c.out, gpath, JSON_INDENT(2)), 0);
        fprintf(stderr, "updated %s (%zu objects)\n", gpath, json_array_size(c.out));
    } else {
        char *text = NULL;
        size_t len;
        json_t *want = NULL;
        char err[160];
        ck_assert_msg(fg_read_file(gpath, 16u << 20, &text, &len) == FG_OK,
                      "%s missing: run with FG_GOLDEN_UPDATE=1", gpath);
        ck_assert_int_eq(fg_json_load(text, len, &want, err, sizeof err), FG_OK);
        if (!json_equal(want, c.out)) {
            char *got = json_dumps(c.out, JSON_INDENT(2));
            ck_abort_msg("%s differs from %s; got:\n%.4000s", rel, gpath, got);
        }
        json_decref(want);
        free(text);
    }
    free(gpath);
    json_decref(c.out);
    json_decref(c.raw);
}
END_TEST

/* What the simplified model never carries, in any real object. */
START_TEST(no_managed_fields_or_last_applied_anywhere) {
    size_t seen = 0;
    for (size_t f = 0; f < NGOLDEN; f++) {
        collect_t c;
        collect_file(&c, golden_fixtures[f]);
        char *text = json_dumps(c.out, JSON_COMPACT);
        ck_assert_msg(strstr(text, "managedFields") == NULL, "%s", golden_fixtures[f]);
        ck_assert_msg(strstr(text, "last-applied-configuration") == NULL, "%s", golden_fixtures[f]);
        ck_assert_msg(strstr(text, "pod-template-hash") == NULL, "%s", golden_fixtures[f]);
        seen += json_array_size(c.out);
        free(text);
        json_decref(c.out);
        json_decref(c.raw);
    }
    ck_assert_uint_gt(seen, 40);
}
END_TEST

/* The kinds every served fixture file covers, at least one real object of each. */
START_TEST(every_kind_has_a_real_fixture) {
    bool seen[FG_KIND_COUNT] = {false};
    for (size_t f = 0; f < NGOLDEN; f++) {
        collect_t c;
        collect_file(&c, golden_fixtures[f]);
        size_t i;
        json_t *e;
        json_array_foreach(c.out, i, e) {
            fg_kind_t k;
            for (k = 0; k < FG_KIND_COUNT; k++)
                if (strcmp(fg_kube_kind_info(k)->name,
                           json_string_value(json_object_get(e, "kind"))) == 0)
                    break;
            ck_assert_int_lt(k, FG_KIND_COUNT);
            if (json_object_get(e, "simplified") != NULL)
                seen[k] = true;
        }
        json_decref(c.out);
        json_decref(c.raw);
    }
    for (int k = 0; k < FG_KIND_COUNT; k++)
        ck_assert_msg(seen[k], "no fixture translates as %s", fg_kube_kind_info(k)->name);
}
END_TEST

/* ---- particular fields, on the real coredns pod ----------------------------- */

START_TEST(real_pod_fields) {
    collect_t c;
    collect_file(&c, "real-kind-v1.36.2/pod-list.00.GET.200.json");
    const json_t *p = json_object_get(json_array_get(c.out, 0), "simplified");
    ck_assert_str_eq(json_string_value(json_object_get(p, "name")), "coredns-589f44dc88-4fpns");
    ck_assert_str_eq(json_string_value(json_object_get(p, "project")), "kube-system");
    ck_assert_str_eq(json_string_value(json_object_get(p, "app")), "coredns");
    ck_assert_str_eq(json_string_value(json_object_get(p, "cluster")), "kind-a");
    ck_assert_str_eq(json_string_value(json_object_get(p, "zone")), "zone-1");
    ck_assert_str_eq(json_string_value(json_object_get(p, "version")), "481");
    ck_assert_str_eq(json_string_value(json_object_get(p, "node")), "v1.36-control-plane");
    ck_assert_str_eq(json_string_value(json_object_get(p, "phase")), "Running");
    ck_assert(json_is_true(json_object_get(p, "ready")));
    const json_t *c0 = json_array_get(json_object_get(p, "containers"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c0, "image")),
                     "registry.k8s.io/coredns/coredns:v1.14.2");
    ck_assert_str_eq(json_string_value(json_object_get(c0, "state")), "running");
    ck_assert_int_eq(json_integer_value(json_object_get(c0, "restarts")), 0);
    const json_t *req = json_object_get(json_object_get(c0, "resources"), "requests");
    ck_assert_str_eq(json_string_value(json_object_get(req, "cpu")), "100m");
    const json_t *units = json_object_get(p, "requestUnits");
    ck_assert_int_eq(json_integer_value(json_object_get(units, "cpuMilli")), 100);
    ck_assert_int_eq(json_integer_value(json_object_get(units, "memoryBytes")), 70 << 20);
    const json_t *labels = json_object_get(p, "labels");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "k8s-app")), "kube-dns");
    ck_assert_ptr_null(json_object_get(labels, "pod-template-hash"));
    json_decref(c.out);
    json_decref(c.raw);
}
END_TEST

/* ---- malformed objects ---------------------------------------------------- */

static const struct {
    const char *name;
    fg_kind_t kind;
    const char *json;
    const char *err;
} malformed[] = {
    {"root_not_object", FG_KIND_POD, "[1]", "(object): not an object (got array)"},
    {"metadata_missing", FG_KIND_POD, "{\"spec\":{}}", "metadata: missing"},
    {"metadata_null", FG_KIND_NODE, "{\"metadata\":null}", "metadata: missing"},
    {"metadata_string", FG_KIND_APP, "{\"metadata\":\"x\"}",
     "metadata: not an object (got string)"},
    {"name_missing", FG_KIND_POD, "{\"metadata\":{\"namespace\":\"a\",\"resourceVersion\":\"1\"}}",
     "metadata.name: missing"},
    {"name_number", FG_KIND_PROJECT, "{\"metadata\":{\"name\":7}}",
     "metadata.name: not a string (got integer)"},
    {"namespace_missing", FG_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"1\"}}",
     "metadata.namespace: missing"},
    {"resource_version_missing", FG_KIND_NODE, "{\"metadata\":{\"name\":\"n\"}}",
     "metadata.resourceVersion: missing"},
    {"replicas_string", FG_KIND_APP,
     "{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"replicas\":\"3\"}}",
     "spec.replicas: not an integer (got string)"},
    {"replicas_real", FG_KIND_APP,
     "{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"replicas\":2.5}}",
     "spec.replicas: not an integer (got number)"},
    {"spec_string", FG_KIND_APP,
     "{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":\"big\"}",
     "spec: not an object (got string)"},
    {"containers_not_array", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"containers\":{\"name\":\"c\"}}}",
     "spec.containers: not an array (got object)"},
    {"container_not_object", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"containers\":[\"c\"]}}",
     "spec.containers[0]: not an object (got string)"},
    {"container_image_number", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":5}]}}",
     "spec.containers[0].image: not a string (got integer)"},
    {"container_name_missing", FG_KIND_APP,
     "{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}}}",
     "spec.template.spec.containers[0].name: missing"},
    {"quantity_garbage", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}"
     "}",
     "spec.containers[0].resources.requests[\"cpu\"]: not a quantity (got \"lots\")"},
    {"capacity_number", FG_KIND_NODE,
     "{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"1\"},\"status\":{\"capacity\":{\"cpu\":8}"
     "}}",
     "status.capacity[\"cpu\"]: not a quantity string (got integer)"},
    {"label_not_string", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\","
     "\"labels\":{\"app\":1}}}",
     "metadata.labels[\"app\"]: not a string (got integer)"},
    {"owner_refs_object", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\","
     "\"ownerReferences\":{}}}",
     "metadata.ownerReferences: not an array (got object)"},
    {"conditions_not_array", FG_KIND_NODE,
     "{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"1\"},\"status\":{\"conditions\":7}}",
     "status.conditions: not an array (got integer)"},
    {"condition_status_missing", FG_KIND_APP,
     "{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"status\":{\"conditions\":[{\"type\":\"Available\"}]}}",
     "status.conditions[0].status: missing"},
    {"job_active_string", FG_KIND_JOBSET,
     "{\"metadata\":{\"name\":\"j\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"status\":{\"active\":\"1\"}}",
     "status.active: not an integer (got string)"},
    {"container_state_string", FG_KIND_POD,
     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"containers\":[{\"name\":\"c\"}]},"
     "\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"state\":\"running\"}]}}",
     "status.containerStatuses[0].state: not an object (got string)"},
    {"hpa_metric_type_missing", FG_KIND_SCALER,
     "{\"metadata\":{\"name\":\"h\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"spec\":{\"metrics\":[{\"resource\":{\"name\":\"cpu\"}}]}}",
     "spec.metrics[0].type: missing"},
    {"event_involved_string", FG_KIND_EVENT,
     "{\"metadata\":{\"name\":\"e\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"involvedObject\":\"pod/x\"}",
     "involvedObject: not an object (got string)"},
    {"cronjob_active_numbers", FG_KIND_CRONJOB,
     "{\"metadata\":{\"name\":\"c\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
     "\"status\":{\"active\":[1]}}",
     "status.active[0].name: not a string (got integer)"},
};

START_TEST(malformed_objects_give_clear_errors) {
    json_t *in = NULL, *out = NULL;
    char err[256];
    ck_assert_int_eq(
        fg_json_load(malformed[_i].json, strlen(malformed[_i].json), &in, err, sizeof err), FG_OK);
    int rc = fg_kube_translate(malformed[_i].kind, in, &origin, &out, err, sizeof err);
    ck_assert_msg(rc == FG_EINVAL, "%s: rc %d", malformed[_i].name, rc);
    ck_assert_ptr_null(out);
    ck_assert_msg(strcmp(err, malformed[_i].err) == 0, "%s: got \"%s\", want \"%s\"",
                  malformed[_i].name, err, malformed[_i].err);
    json_decref(in);
}
END_TEST

/* The smallest valid object of each kind translates; wrong-kind input still never crashes. */
START_TEST(minimal_objects_and_any_kind_on_any_object) {
    const char *min =
        "{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\",\"resourceVersion\":\"1\"}}";
    json_t *in = NULL;
    char err[256];
    ck_assert_int_eq(fg_json_load(min, strlen(min), &in, err, sizeof err), FG_OK);
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        json_t *out = NULL;
        ck_assert_int_eq(fg_kube_translate((fg_kind_t)k, in, &origin, &out, err, sizeof err),
                         FG_OK);
        ck_assert_str_eq(json_string_value(json_object_get(out, "name")), "x");
        json_decref(out);
    }
    json_decref(in);
    collect_t c;
    collect_file(&c, "api-testdata/HEAD/core.v1.Pod.json");
    json_t *pod = json_array_get(c.raw, 0);
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        json_t *out = NULL;
        err[0] = '\0';
        int rc = fg_kube_translate((fg_kind_t)k, pod, &origin, &out, err, sizeof err);
        ck_assert(rc == FG_OK || (rc == FG_EINVAL && err[0] != '\0'));
        json_decref(out);
    }
    ck_assert_int_eq(fg_kube_translate(FG_KIND_COUNT, pod, &origin, &in, err, sizeof err),
                     FG_EINVAL);
    json_decref(c.out);
    json_decref(c.raw);
}
END_TEST

/* 10,000 containers with statuses and 1,000 labels: the output stays small. */
START_TEST(huge_pod_gives_bounded_output) {
    json_t *pod = json_pack("{s:{s:s,s:s,s:s,s:{}},s:{s:[]},s:{s:[]}}", "metadata", "name", "big",
                            "namespace", "a", "resourceVersion", "9", "labels", "spec",
                            "containers", "status", "containerStatuses");
    json_t *specs = json_object_get(json_object_get(pod, "spec"), "containers");
    json_t *statuses = json_object_get(json_object_get(pod, "status"), "containerStatuses");
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    for (int i = 0; i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof name, "c%d", i);
        json_array_append_new(specs, json_pack("{s:s,s:s,s:{s:{s:s}}}", "name", name, "image",
                                               "busybox", "resources", "requests", "cpu", "1m"));
        json_array_append_new(
            statuses, json_pack("{s:s,s:b,s:i}", "name", name, "ready", 1, "restartCount", 2));
    }
    for (int i = 0; i < 1000; i++) {
        char key[32];
        snprintf(key, sizeof key, "l%d", i);
        json_object_set_new(labels, key, json_string("v"));
    }
    json_t *out = NULL;
    char err[256];
    ck_assert_int_eq(fg_kube_translate(FG_KIND_POD, pod, &origin, &out, err, sizeof err), FG_OK);
    ck_assert_uint_eq(json_array_size(json_object_get(out, "containers")), FG_KUBE_MAX_CONTAINERS);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "containersOmitted")),
                     10000 - FG_KUBE_MAX_CONTAINERS);
    ck_assert_uint_eq(json_object_size(json_object_get(out, "labels")), FG_KUBE_MAX_LABELS);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "labelsOmitted")),
                     1000 - FG_KUBE_MAX_LABELS);
    size_t len;
    char *text = fg_json_dumps(out, &len);
    ck_assert_uint_lt(len, 32768);
    free(text);
    json_decref(out);
    json_decref(pod);
}
END_TEST

START_TEST(kind_of_maps_versions) {
    fg_kind_t k;
    ck_assert_int_eq(fg_kube_kind_of("Pod", "v1", &k), FG_OK);
    ck_assert_int_eq(k, FG_KIND_POD);
    ck_assert_int_eq(fg_kube_kind_of("Deployment", "apps/v1", &k), FG_OK);
    ck_assert_int_eq(k, FG_KIND_APP);
    ck_assert_int_eq(fg_kube_kind_of("CronJob", "batch/v1beta1", &k), FG_OK);
    ck_assert_int_eq(k, FG_KIND_CRONJOB);
    ck_assert_int_eq(fg_kube_kind_of("HorizontalPodAutoscaler", "autoscaling/v2", &k), FG_OK);
    ck_assert_int_eq(fg_kube_kind_of("HorizontalPodAutoscaler", "autoscaling/v1", &k), FG_ENOENT);
    ck_assert_int_eq(fg_kube_kind_of("Event", "events.k8s.io/v1", &k), FG_OK);
    ck_assert_int_eq(k, FG_KIND_EVENT);
    ck_assert_int_eq(fg_kube_kind_of("Pod", "apps/v1", &k), FG_ENOENT);
    ck_assert_int_eq(fg_kube_kind_of("Secret", "v1", &k), FG_ENOENT);
    ck_assert_int_eq(fg_kube_kind_of(NULL, "v1", &k), FG_ENOENT);
    const fg_kube_kind_info_t *info = fg_kube_kind_info(FG_KIND_SCALER);
    ck_assert_str_eq(info->api_prefix, "/apis/autoscaling/v2");
    ck_assert_str_eq(info->resource, "horizontalpodautoscalers");
    ck_assert(!fg_kube_kind_info(FG_KIND_NODE)->namespaced);
    ck_assert_ptr_null(fg_kube_kind_info(FG_KIND_COUNT));
}
END_TEST

/* ---- quantities ------------------------------------------------------------ */

static const struct {
    const char *in;
    bool milli;
    int rc;
    int64_t want;
} quantities[] = {
    {"100m", true, FG_OK, 100},
    {"1", true, FG_OK, 1000},
    {"1.5", true, FG_OK, 1500},
    {"0.0001", true, FG_OK, 1}, /* rounded up, as Kubernetes does */
    {"250u", true, FG_OK, 1},
    {"2e3", true, FG_OK, 2000000},
    {"1E-3", true, FG_OK, 1},
    {"8", false, FG_OK, 8},
    {"70Mi", false, FG_OK, 73400320},
    {"1Gi", false, FG_OK, 1073741824},
    {"1.5Gi", false, FG_OK, 1610612736},
    {"128974848", false, FG_OK, 128974848},
    {"129e6", false, FG_OK, 129000000},
    {"123M", false, FG_OK, 123000000},
    {"1k", false, FG_OK, 1000},
    {"1Ki", false, FG_OK, 1024},
    {"500m", false, FG_OK, 1},
    {"0", false, FG_OK, 0},
    {".5", true, FG_OK, 500},
    {"5.", true, FG_OK, 5000},
    {"+1", false, FG_OK, 1},
    {"-1", true, FG_OK, -1000},
    {"8Ei", false, FG_ETOOBIG, 0},
    {"7Ei", false, FG_OK, 8070450532247928832},
    {"10E", true, FG_ETOOBIG, 0},
    {"", false, FG_EINVAL, 0},
    {"m", true, FG_EINVAL, 0},
    {"1 Gi", false, FG_EINVAL, 0},
    {"1GB", false, FG_EINVAL, 0},
    {"1gi", false, FG_EINVAL, 0},
    {"1e", false, FG_EINVAL, 0},
    {"1e99", false, FG_EINVAL, 0},
    {"1..2", false, FG_EINVAL, 0},
    {"abc", false, FG_EINVAL, 0},
    {"99999999999999999999999999999999999", false, FG_ETOOBIG, 0},
};

START_TEST(quantity_table) {
    int64_t v = -42;
    const char *in = quantities[_i].in;
    int rc = fg_kube_quantity_parse(in, strlen(in), quantities[_i].milli, &v);
    ck_assert_msg(rc == quantities[_i].rc, "'%s': rc %d, want %d", in, rc, quantities[_i].rc);
    if (rc == FG_OK)
        ck_assert_msg(v == quantities[_i].want, "'%s': %lld, want %lld", in, (long long)v,
                      (long long)quantities[_i].want);
    else
        ck_assert_int_eq(v, -42);
}
END_TEST

/* ---- behaviours the fixtures do not show ------------------------------------- */

static json_t *translate_text(fg_kind_t kind, const char *text) {
    json_t *in = NULL, *out = NULL;
    char err[256];
    ck_assert_int_eq(fg_json_load(text, strlen(text), &in, err, sizeof err), FG_OK);
    ck_assert_msg(fg_kube_translate(kind, in, &origin, &out, err, sizeof err) == FG_OK, "%s", err);
    json_decref(in);
    return out;
}

/* A pod that cannot be scheduled, and one crash-looping: the conditions and states that
 * matter are kept, with their reasons. */
START_TEST(unschedulable_and_crashlooping_pods) {
    json_t *p = translate_text(
        FG_KIND_POD,
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\"},"
        "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
        "\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/3 nodes are "
        "available: 3 Insufficient nvidia.com/gpu.\",\"lastProbeTime\":null}]}}");
    const json_t *c = json_array_get(json_object_get(p, "conditions"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "type")), "PodScheduled");
    ck_assert_str_eq(json_string_value(json_object_get(c, "reason")), "Unschedulable");
    ck_assert(json_is_false(json_object_get(p, "ready")));
    json_decref(p);
    p = translate_text(
        FG_KIND_POD,
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"resourceVersion\":\"1\","
        "\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"main\","
        "\"image\":\"web:1\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.9\",\"conditions\":[{\"type\":"
        "\"PodScheduled\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"False\"}],"
        "\"containerStatuses\":[{\"name\":\"main\",\"ready\":false,\"restartCount\":7,"
        "\"state\":{\"waiting\":{\"reason\":\"CrashLoopBackOff\",\"message\":\"back-off 5m0s\"}},"
        "\"lastState\":{\"terminated\":{\"reason\":\"Error\",\"exitCode\":137,"
        "\"finishedAt\":\"2026-01-01T00:00:00Z\"}}}]}}");
    ck_assert_str_eq(json_string_value(json_object_get(p, "app")), "web");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "restarts")), 7);
    ck_assert_uint_eq(json_array_size(json_object_get(p, "conditions")), 1); /* Ready only */
    const json_t *m = json_array_get(json_object_get(p, "containers"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(m, "state")), "waiting");
    ck_assert_str_eq(json_string_value(json_object_get(m, "reason")), "CrashLoopBackOff");
    const json_t *last = json_object_get(m, "lastTermination");
    ck_assert_int_eq(json_integer_value(json_object_get(last, "exitCode")), 137);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(p, "limitUnits"), "gpu")),
                     2);
    ck_assert_ptr_null(json_object_get(p, "requestUnits"));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(p, "podIPs"), 0)),
                     "10.0.0.9");
    json_decref(p);
}
END_TEST

START_TEST(namespace_quota_annotations) {
    json_t *p = translate_text(
        FG_KIND_PROJECT,
        "{\"metadata\":{\"name\":\"team\",\"resourceVersion\":\"3\",\"annotations\":{"
        "\"fleetgate.io/quota-reserved-cpu\":\"100\",\"fleetgate.io/quota-reserved-memory\":"
        "\"200Gi\",\"fleetgate.io/quota-reserved-gpu\":\"4\",\"fleetgate.io/quota-ondemand-cpu"
        "\":\"1500m\",\"fleetgate.io/quota-preemptible-cpu\":\"lots\",\"kubectl.kubernetes.io/"
        "last-applied-configuration\":\"{}\"}},\"status\":{\"phase\":\"Active\"}}");
    const json_t *q = json_object_get(p, "quota");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(q, "reserved"), "memory")),
                     "200Gi");
    const json_t *u = json_object_get(p, "quotaUnits");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(u, "reserved"), "cpuMilli")), 100000);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(u, "reserved"), "memoryBytes")),
        200LL << 30);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(u, "onDemand"), "cpuMilli")), 1500);
    ck_assert_ptr_null(json_object_get(q, "preemptible"));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(p, "quotaInvalid"), 0)),
                     "fleetgate.io/quota-preemptible-cpu");
    char *text = fg_json_dumps(p, NULL);
    ck_assert_ptr_null(strstr(text, "last-applied"));
    free(text);
    json_decref(p);
}
END_TEST

/* ---- size: simplified pod bytes / raw pod bytes ------------------------------ */

typedef struct {
    size_t raw, simple, n;
    double worst;
} size_sum_t;

static void measure(const char *rel, size_sum_t *sum, bool print) {
    collect_t c;
    collect_file(&c, rel);
    for (size_t i = 0; i < json_array_size(c.out); i++) {
        const json_t *s = json_object_get(json_array_get(c.out, i), "simplified");
        const json_t *raw = json_array_get(c.raw, i);
        if (s == NULL ||
            strcmp(json_string_value(json_object_get(json_array_get(c.out, i), "kind")), "pod"))
            continue;
        size_t rl, sl;
        char *rt = fg_json_dumps(raw, &rl);
        char *st = fg_json_dumps(s, &sl);
        double ratio = (double)sl / (double)rl;
        if (print)
            printf("  %-44.44s raw %6zu B  simplified %5zu B  %5.1f%%\n",
                   json_string_value(json_object_get(s, "name")), rl, sl, 100.0 * ratio);
        sum->raw += rl;
        sum->simple += sl;
        sum->n++;
        if (ratio > sum->worst)
            sum->worst = ratio;
        free(rt);
        free(st);
    }
    json_decref(c.out);
    json_decref(c.raw);
}

/* Realistic pods (a real kind cluster's, and the apiserver's production-like exemplar, both
 * with managedFields): issue 5's target is a simplified pod at most 35% of the raw bytes. */
static const char *const realistic_pods[] = {
    "real-kind-v1.36.2/pod-list.00.GET.200.json",
    "real-kind-v1.36.2/job-create.07.GET.200.json",
    "real-captures/apiserver-testdata.exemplar_pod.json",
};

START_TEST(simplified_pod_size_at_most_35_percent) {
    size_sum_t sum = {0};
    printf("simplified pod size (compact JSON bytes):\n");
    for (size_t f = 0; f < sizeof realistic_pods / sizeof realistic_pods[0]; f++)
        measure(realistic_pods[f], &sum, true);
    printf("  realistic pods: %zu, raw %zu B, simplified %zu B, overall %.1f%%, worst %.1f%%\n",
           sum.n, sum.raw, sum.simple, 100.0 * (double)sum.simple / (double)sum.raw,
           100.0 * sum.worst);
    ck_assert_uint_ge(sum.n, 10);
    ck_assert_msg(sum.worst <= 0.35, "worst pod ratio %.3f > 0.35", sum.worst);
    /* For information: old pods without managedFields and the fuzzer pod (every field set). */
    size_sum_t other = {0};
    const char *const others[] = {"real-captures/k9s/p1.json",
                                  "real-captures/kubeclient/pod_list.json",
                                  "api-testdata/HEAD/core.v1.Pod.json"};
    for (size_t f = 0; f < sizeof others / sizeof others[0]; f++)
        measure(others[f], &other, false);
    printf("  other pods (no managedFields / fuzzer-filled): %zu, overall %.1f%%, worst %.1f%%\n",
           other.n, 100.0 * (double)other.simple / (double)other.raw, 100.0 * other.worst);
}
END_TEST

static Suite *kube_translate_suite(void) {
    Suite *s = suite_create("kube_translate");
    TCase *tc = tcase_create("translate");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, golden_translation_of_every_real_fixture, 0, NGOLDEN);
    tcase_add_test(tc, no_managed_fields_or_last_applied_anywhere);
    tcase_add_test(tc, every_kind_has_a_real_fixture);
    tcase_add_test(tc, real_pod_fields);
    tcase_add_loop_test(tc, malformed_objects_give_clear_errors, 0,
                        sizeof malformed / sizeof malformed[0]);
    tcase_add_test(tc, minimal_objects_and_any_kind_on_any_object);
    tcase_add_test(tc, huge_pod_gives_bounded_output);
    tcase_add_test(tc, kind_of_maps_versions);
    tcase_add_loop_test(tc, quantity_table, 0, sizeof quantities / sizeof quantities[0]);
    tcase_add_test(tc, unschedulable_and_crashlooping_pods);
    tcase_add_test(tc, namespace_quota_annotations);
    tcase_add_test(tc, simplified_pod_size_at_most_35_percent);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) {
    const char *env = getenv("FG_GOLDEN_UPDATE");
    update_mode = (argc > 1 && strcmp(argv[1], "--update") == 0) || (env && strcmp(env, "1") == 0);
    return update_mode ? tm_run_nofork(kube_translate_suite()) : tm_run(kube_translate_suite());
}
