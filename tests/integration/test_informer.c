/* Integration tests of the informers (src/cache/informer.c): kubesim ($FG_BUILD/kubesim) and a
 * private redis-server on free ports, the cache module driven directly (and the daemon for the
 * lease takeover). The check is always the same: fleetgate's Redis view (cache/SCHEMA.md
 * section 2) against kubesim's LIST, object by object, through the same translation. */
#include "fleetgate/cache.h"
#include "fleetgate/kube.h"
#include "testhttp.h"
#include "testredis.h"
#include "testmain.h"

#include <check.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN    "informer-test-token"
#define MAX_CL   2
#define LEASE_MS 1200
#define NS       "team-a"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- kubesim ------------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    uint16_t port; /* cluster i listens on port + i */
    int n;
    char dir[64]; /* tls/, token */
    char token_file[96], ca_file[96];
    fg_cluster_conf_t conf[MAX_CL];
    char names[MAX_CL][16], urls[MAX_CL][64];
    fg_kube_client_t *kc[MAX_CL];
} ks_t;

static ks_t ks;
static int64_t own_lists[MAX_CL]; /* LISTs the test itself sent (the comparison) */
static tr_redis_t rd;
static fg_config_t *cfg;

static int ks_try_start(ks_t *k, int n, const char *history) {
    k->port = th_free_ports(n);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return -1;
    char clusters[8], port[8], tls[96];
    snprintf(clusters, sizeof clusters, "%d", n);
    snprintf(port, sizeof port, "%u", (unsigned)k->port);
    snprintf(tls, sizeof tls, "%s/tls", k->dir);
    k->pid = fork();
    if (k->pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
        close(pipefd[0]);
        execl(th_bin("kubesim"), "kubesim", "--clusters", clusters, "--base-port", port, "--token",
              TOKEN, "--tls-dir", tls, "--history", history, "--bookmark-interval-ms", "300",
              (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    /* ready: one line per cluster */
    char buf[4096];
    size_t len = 0;
    int lines = 0;
    while (lines < n && len < sizeof buf - 1) {
        ssize_t r = read(pipefd[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            lines += buf[len + (size_t)i] == '\n';
        len += (size_t)r;
    }
    close(pipefd[0]);
    if (lines < n) {
        kill(k->pid, SIGKILL);
        waitpid(k->pid, NULL, 0);
        k->pid = 0;
        return -1;
    }
    return 0;
}

static void ks_start(ks_t *k, int n, const char *history) {
    memset(k, 0, sizeof *k);
    memset(own_lists, 0, sizeof own_lists);
    snprintf(k->dir, sizeof k->dir, "/tmp/fg-test-inf-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(k->dir));
    snprintf(k->token_file, sizeof k->token_file, "%s/token", k->dir);
    snprintf(k->ca_file, sizeof k->ca_file, "%s/tls/ca.crt", k->dir);
    FILE *f = fopen(k->token_file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(TOKEN "\n", f);
    fclose(f);
    k->n = n;
    int ok = -1;
    for (int attempt = 0; attempt < 5 && ok != 0; attempt++)
        ok = ks_try_start(k, n, history);
    ck_assert_int_eq(ok, 0);
    for (int i = 0; i < n; i++) {
        snprintf(k->names[i], sizeof k->names[i], "cluster-%d", i + 1);
        snprintf(k->urls[i], sizeof k->urls[i], "https://127.0.0.1:%u", (unsigned)k->port + i);
        fg_cluster_conf_t *c = &k->conf[i];
        c->name = k->names[i];
        c->zone = "zone-a";
        c->region = "region-1";
        c->url = k->urls[i];
        c->token_file = k->token_file;
        c->ca_file = k->ca_file;
        fg_kube_error_t err;
        ck_assert_int_eq(fg_kube_client_new(&k->kc[i], c, NULL, &err), FG_OK);
    }
}

static void ks_stop(ks_t *k) {
    for (int i = 0; i < k->n; i++)
        fg_kube_client_free(k->kc[i]);
    if (k->pid > 0) {
        kill(k->pid, SIGKILL);
        waitpid(k->pid, NULL, 0);
    }
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* One request to cluster i; the answer is dropped. Returns the HTTP code (0: no answer). */
static long ks_call(int i, fg_kube_method_t m, const char *path, const char *body) {
    json_t *b = NULL, *out = NULL;
    if (body != NULL) {
        b = json_loads(body, 0, NULL);
        ck_assert_ptr_nonnull(b);
    }
    long code = 0;
    fg_kube_error_t err;
    fg_kube_request(ks.kc[i], m, path, b, &out, &code, &err);
    json_decref(b);
    json_decref(out);
    return code;
}

/* requests.<verb> from /_kubesim/stats of cluster i; LISTs sent by the test are not counted. */
static int64_t ks_requests(int i, const char *verb) {
    json_t *out = NULL;
    fg_kube_error_t err;
    ck_assert_int_eq(
        fg_kube_request(ks.kc[i], FG_KUBE_GET, "/_kubesim/stats", NULL, &out, NULL, &err), FG_OK);
    int64_t v = json_integer_value(json_object_get(json_object_get(out, "requests"), verb));
    json_decref(out);
    if (strcmp(verb, "list") == 0)
        v -= own_lists[i];
    return v;
}

/* objects.<resource> from /_kubesim/stats of cluster i. */
static int64_t ks_objects(int i, const char *resource) {
    json_t *out = NULL;
    fg_kube_error_t err;
    ck_assert_int_eq(
        fg_kube_request(ks.kc[i], FG_KUBE_GET, "/_kubesim/stats", NULL, &out, NULL, &err), FG_OK);
    int64_t v = json_integer_value(json_object_get(json_object_get(out, "objects"), resource));
    json_decref(out);
    return v;
}

/* A pod of app `app`: owned (controller) by the ReplicaSet "<app>-h1" of the Deployment <app>,
 * as fleetgate reads a pod's app (an `app` label alone is not one). */
static void create_pod(int i, const char *ns, const char *name, const char *app) {
    char path[160], body[768];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":"
             "{\"app\":\"%s\",\"pod-template-hash\":\"h1\"},\"ownerReferences\":[{\"apiVersion\":"
             "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"%s-h1\",\"uid\":\"rs-%s\","
             "\"controller\":true}]},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"nginx:1\"}]}}",
             name, app, app, app);
    ck_assert_int_eq(ks_call(i, FG_KUBE_POST, path, body), 201);
}

static void create_namespace(int i, const char *ns) {
    char body[160];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", ns);
    ck_assert_int_eq(ks_call(i, FG_KUBE_POST, "/api/v1/namespaces", body), 201);
}

/* One object of every kind fleetgate serves, in namespace NS. */
static void create_every_kind(int i) {
    create_namespace(i, NS);
    create_pod(i, NS, "web-1", "web");
    static const struct {
        const char *path, *body;
    } objs[] = {
        {"/apis/apps/v1/namespaces/" NS "/deployments",
         "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},"
         "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":"
         "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
         "\"image\":\"nginx:1\"}]}}}}"},
        {"/apis/batch/v1/namespaces/" NS "/jobs",
         "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"train\"},\"spec\":"
         "{\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\","
         "\"image\":\"busybox\"}]}}}}"},
        {"/apis/batch/v1/namespaces/" NS "/cronjobs",
         "{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"nightly\"},"
         "\"spec\":{\"schedule\":\"0 3 * * *\",\"jobTemplate\":{\"spec\":{\"template\":{\"spec\":"
         "{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}}}}"
         "}"},
        {"/apis/autoscaling/v2/namespaces/" NS "/horizontalpodautoscalers",
         "{\"apiVersion\":\"autoscaling/v2\",\"kind\":\"HorizontalPodAutoscaler\",\"metadata\":"
         "{\"name\":\"web\"},\"spec\":{\"scaleTargetRef\":{\"apiVersion\":\"apps/v1\",\"kind\":"
         "\"Deployment\",\"name\":\"web\"},\"minReplicas\":1,\"maxReplicas\":4}}"},
        {"/api/v1/namespaces/" NS "/events",
         "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"web-1.1\"},"
         "\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"web-1\"},\"reason\":\"Pulled\","
         "\"message\":\"pulled\",\"type\":\"Normal\"}"},
        {"/api/v1/nodes", "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n-1\","
                          "\"labels\":{\"topology.kubernetes.io/zone\":\"zone-a\"}}}"},
    };
    for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
        ck_assert_int_eq(ks_call(i, FG_KUBE_POST, objs[k].path, objs[k].body), 201);
}

/* ---- Redis --------------------------------------------------------------------- */

static redisContext *rconn(void) {
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rd.port, tv);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->err, 0);
    return c;
}

static redisReply *rcmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Kills the private redis-server, lets the informers run without it for down_ms while pods are
 * created in kubesim, and starts it again on the same port, empty. */
static void redis_restart(int down_ms) {
    uint16_t port = rd.port;
    kill(rd.pid, SIGKILL);
    waitpid(rd.pid, NULL, 0);
    for (int p = 0; p < 20; p++) {
        char name[32];
        snprintf(name, sizeof name, "while-down-%d", p);
        create_pod(0, NS, name, "down");
    }
    sleep_ms(down_ms);
    char p[8];
    snprintf(p, sizeof p, "%u", (unsigned)port);
    rd.pid = fork();
    if (rd.pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--dir", rd.dir,
               "--save", "", "--appendonly", "no", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        struct timeval tv = {0, 200000};
        redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
        bool ok = c != NULL && c->err == 0;
        redisFree(c);
        if (ok)
            return;
        sleep_ms(10);
    }
    ck_abort_msg("redis did not come back");
}

/* ---- the comparison -------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct {
    char **v;
    size_t n, cap;
} strs_t;

static void strs_add(strs_t *s, char *x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = x;
}

static void strs_free(strs_t *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* Differences between kubesim's LIST of cluster i (translated) and the cache; prints the first
 * few. -1 when kubesim could not be listed. */
static int diff_cluster(int i, bool verbose) {
    int diffs = 0;
    redisContext *rc = rconn();
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        const fg_kube_kind_info_t *ki = fg_kube_kind_info((fg_kind_t)k);
        strs_t want = {0}, have = {0};
        char *cont = NULL;
        do {
            char path[512];
            snprintf(path, sizeof path, "%s/%s?limit=500%s%s", ki->api_prefix, ki->resource,
                     cont ? "&continue=" : "", cont ? cont : "");
            json_t *out = NULL;
            fg_kube_error_t err;
            own_lists[i]++;
            if (fg_kube_request(ks.kc[i], FG_KUBE_GET, path, NULL, &out, NULL, &err) != FG_OK) {
                free(cont);
                strs_free(&want);
                redisFree(rc);
                return -1;
            }
            free(cont);
            const char *c =
                json_string_value(json_object_get(json_object_get(out, "metadata"), "continue"));
            cont = c && c[0] ? strdup(c) : NULL;
            size_t idx;
            json_t *item;
            json_array_foreach(json_object_get(out, "items"), idx, item) {
                fg_kube_origin_t origin = {ks.conf[i].name, ks.conf[i].zone};
                json_t *t = NULL;
                char e[128];
                if (fg_kube_translate((fg_kind_t)k, item, &origin, &t, e, sizeof e) != FG_OK)
                    continue;
                const char *scope =
                    ki->namespaced ? json_string_value(json_object_get(t, "project")) : "_";
                char *text = fg_json_dumps(t, NULL);
                char *line = fg_xasprintf("%s/%s %s", scope,
                                          json_string_value(json_object_get(t, "name")), text);
                free(text);
                json_decref(t);
                strs_add(&want, line);
            }
            json_decref(out);
        } while (cont != NULL);
        redisReply *scopes = rcmd(rc, "SMEMBERS fg:s:%s:%s", ki->name, ks.conf[i].name);
        for (size_t s = 0; s < scopes->elements; s++) {
            const char *scope = scopes->element[s]->str;
            redisReply *h = rcmd(rc, "HGETALL fg:o:%s:%s:%s", ki->name, ks.conf[i].name, scope);
            redisReply *z = rcmd(rc, "ZCARD fg:i:%s:%s:%s", ki->name, ks.conf[i].name, scope);
            if ((size_t)z->integer * 2 != h->elements || h->elements == 0) {
                if (verbose)
                    fprintf(stderr, "diff: %s %s: index holds %lld, hash %zu\n", ki->name, scope,
                            z->integer, h->elements / 2);
                diffs++;
            }
            for (size_t e = 0; e + 1 < h->elements; e += 2)
                strs_add(&have, fg_xasprintf("%s/%s %s", scope, h->element[e]->str,
                                             h->element[e + 1]->str));
            freeReplyObject(h);
            freeReplyObject(z);
        }
        freeReplyObject(scopes);
        if (want.n > 1)
            qsort(want.v, want.n, sizeof *want.v, cmp_str);
        if (have.n > 1)
            qsort(have.v, have.n, sizeof *have.v, cmp_str);
        size_t a = 0, b = 0;
        while (a < want.n || b < have.n) {
            int c = a == want.n ? 1 : b == have.n ? -1 : strcmp(want.v[a], have.v[b]);
            if (c == 0) {
                a++, b++;
                continue;
            }
            if (verbose && diffs < 5)
                fprintf(stderr, "diff: %s: %s %.160s\n", ki->name, c < 0 ? "missing" : "extra",
                        c < 0 ? want.v[a] : have.v[b]);
            diffs++;
            if (c < 0)
                a++;
            else
                b++;
        }
        strs_free(&want);
        strs_free(&have);
    }
    /* pods by app: every cached pod with an app is in its app set */
    redisReply *pairs = rcmd(rc, "SMEMBERS fg:ax:%s", ks.conf[i].name);
    for (size_t p = 0; p < pairs->elements; p++) {
        redisReply *n = rcmd(rc, "SCARD fg:a:%s:%s", ks.conf[i].name, pairs->element[p]->str);
        if (n->integer == 0)
            diffs++;
        freeReplyObject(n);
    }
    freeReplyObject(pairs);
    redisFree(rc);
    return diffs;
}

/* Waits until the cache equals kubesim on every cluster; asserts on timeout. */
static void converge(int timeout_ms) {
    int d = 0;
    for (int waited = 0;; waited += 100) {
        d = 0;
        for (int i = 0; i < ks.n; i++) {
            int x = diff_cluster(i, false);
            d += x < 0 ? 1 : x;
        }
        if (d == 0)
            return;
        if (waited >= timeout_ms)
            break;
        sleep_ms(100);
    }
    for (int i = 0; i < ks.n; i++)
        diff_cluster(i, true);
    ck_abort_msg("the cache did not converge: %d difference(s)", d);
}

/* Every fg:sync of every cluster says Synced. */
static bool all_synced(void) {
    redisContext *rc = rconn();
    bool ok = true;
    for (int i = 0; i < ks.n && ok; i++)
        for (int k = 0; k < FG_KIND_COUNT && ok; k++) {
            redisReply *r = rcmd(rc, "HGET fg:sync:%s:%s state", ks.conf[i].name,
                                 fg_kube_kind_info((fg_kind_t)k)->resource);
            ok = r->type == REDIS_REPLY_STRING && strcmp(r->str, "Synced") == 0;
            freeReplyObject(r);
        }
    redisFree(rc);
    return ok;
}

static void wait_synced(int timeout_ms) {
    for (int waited = 0; !all_synced(); waited += 50) {
        ck_assert_msg(waited < timeout_ms, "not synced after %d ms", timeout_ms);
        sleep_ms(50);
    }
}

/* ---- fixture --------------------------------------------------------------------- */

static char *config_text(const char *replica) {
    fg_buf_t b;
    fg_buf_init(&b, 1 << 16);
    fg_buf_appendf(
        &b,
        "{\"workers\":2,\"redis\":{\"url\":\"%s\"},\"openapi_file\":\"api/openapi.yaml\","
        "\"docs_file\":\"/nonexistent\",\"log\":{\"level\":\"warn\",\"access_log\":false},"
        "\"rate_limits\":{\"enabled\":false},"
        "\"cache\":{\"lease_ms\":%d,\"list_page_size\":50,\"watch_timeout_s\":5,"
        "\"resync_backoff_max_ms\":500,\"redis_timeout_ms\":500,\"replica_id\":\"%s\"},"
        "\"clusters\":[",
        rd.url, LEASE_MS, replica);
    for (int i = 0; i < ks.n; i++)
        fg_buf_appendf(
            &b,
            "%s{\"name\":\"%s\",\"zone\":\"zone-a\",\"region\":\"region-1\",\"url\":\"%s\","
            "\"token_file\":\"%s\",\"ca_file\":\"%s\"}",
            i ? "," : "", ks.conf[i].name, ks.conf[i].url, ks.token_file, ks.ca_file);
    fg_buf_appendf(&b, "]}");
    return fg_buf_steal(&b, NULL);
}

static fg_informers_t *informers_start(const char *replica) {
    char *text = config_text(replica);
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    if (cfg == NULL)
        ck_assert_msg(fg_config_load_text("test", text, strlen(text), &cfg, &errs) == FG_OK, "%s",
                      errs.data ? errs.data : "");
    free(text);
    fg_informers_t *inf = NULL;
    ck_assert_int_eq(fg_informers_start(&inf, cfg, &errs), FG_OK);
    fg_buf_free(&errs);
    return inf;
}

static void setup_n(int n, const char *history) {
    fg_log_set_level(getenv("FG_TEST_VERBOSE") ? FG_LOG_DEBUG : FG_LOG_ERROR);
    ck_assert_int_eq(tr_redis_start(&rd), 0);
    ks_start(&ks, n, history);
    cfg = NULL;
}

static void teardown(void) {
    fg_config_free(cfg);
    cfg = NULL;
    ks_stop(&ks);
    tr_redis_stop(&rd);
    fg_metrics_reset();
}

/* ---- tests ------------------------------------------------------------------------- */

START_TEST(initial_sync_of_every_kind) {
    setup_n(2, "10000");
    for (int i = 0; i < 2; i++) {
        create_every_kind(i);
        for (int p = 0; p < 120; p++) { /* several LIST pages of 50 */
            char name[32];
            snprintf(name, sizeof name, "batch-%03d", p);
            create_pod(i, NS, name, p % 3 ? "batch" : "other");
        }
    }
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(10000);
    converge(3000);
    ck_assert(fg_informers_ready(inf));
    redisContext *rc = rconn();
    redisReply *r = rcmd(rc, "HGET fg:cluster:cluster-1 health");
    ck_assert_str_eq(r->str, "Healthy");
    freeReplyObject(r);
    r = rcmd(rc, "GET fg:lease:cluster-2:pods");
    ck_assert_str_eq(r->str, "replica-a");
    freeReplyObject(r);
    r = rcmd(rc, "SCARD fg:a:cluster-1:" NS ":batch");
    ck_assert_int_eq(r->integer, 80);
    freeReplyObject(r);
    r = rcmd(rc, "HGET fg:sync:cluster-1:pods objects");
    char want[24];
    snprintf(want, sizeof want, "%lld", (long long)ks_objects(0, "pods"));
    ck_assert_str_eq(r->str, want); /* 121 and the pods kubesim's controller made, if any */
    freeReplyObject(r);
    r = rcmd(rc, "EXISTS fg:epoch");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    fg_informers_stop(inf);
    /* the leases are released on shutdown */
    r = rcmd(rc, "EXISTS fg:lease:cluster-2:pods");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    /* no temporary keys stay behind */
    r = rcmd(rc, "KEYS fg:t:*");
    ck_assert_int_eq(r->elements, 0);
    freeReplyObject(r);
    redisFree(rc);
    teardown();
}
END_TEST

START_TEST(every_event_type_applied) {
    setup_n(1, "10000");
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    create_every_kind(0); /* ADDED, every kind */
    create_namespace(0, "solo-ns");
    create_pod(0, "solo-ns", "solo-1", "solo");
    converge(5000);
    /* MODIFIED: a pod moves to another app, a deployment scales (kubesim's controller, when it
     * has one, makes and removes pods of the deployment meanwhile) */
    ck_assert_int_eq(ks_call(0, FG_KUBE_PATCH, "/api/v1/namespaces/solo-ns/pods/solo-1",
                             "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
                             "\"kind\":\"ReplicaSet\",\"name\":\"solo2-h1\",\"uid\":\"rs-solo2\","
                             "\"controller\":true}]}}"),
                     200);
    ck_assert_int_eq(ks_call(0, FG_KUBE_PATCH, "/apis/apps/v1/namespaces/" NS "/deployments/web",
                             "{\"spec\":{\"replicas\":5}}"),
                     200);
    converge(5000);
    redisContext *rc = rconn();
    redisReply *r = rcmd(rc, "SISMEMBER fg:a:cluster-1:solo-ns:solo2 solo-1");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    r = rcmd(rc, "EXISTS fg:a:cluster-1:solo-ns:solo");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    /* DELETED: the last pod of a project takes the scope (and its app) with it */
    static const char *const paths[] = {
        "/api/v1/namespaces/solo-ns/pods/solo-1",
        "/api/v1/namespaces/" NS "/pods/web-1",
        "/apis/batch/v1/namespaces/" NS "/jobs/train",
        "/apis/autoscaling/v2/namespaces/" NS "/horizontalpodautoscalers/web",
        "/api/v1/namespaces/" NS "/events/web-1.1",
        "/api/v1/nodes/n-1",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        ck_assert_int_eq(ks_call(0, FG_KUBE_DELETE, paths[i], NULL), 200);
    converge(5000);
    r = rcmd(rc, "SISMEMBER fg:s:pod:cluster-1 solo-ns");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    r = rcmd(rc, "SISMEMBER fg:ax:cluster-1 solo-ns:solo2");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    /* BOOKMARK: an idle watch (pods) still moves fg:rv up to the cluster's RV */
    ck_assert_int_eq(ks_call(0, FG_KUBE_PATCH, "/apis/apps/v1/namespaces/" NS "/deployments/web",
                             "{\"spec\":{\"replicas\":6}}"),
                     200);
    char deploy_rv[64] = "";
    for (int waited = 0; waited < 3000; waited += 50) {
        r = rcmd(rc, "GET fg:rv:cluster-1:deployments");
        snprintf(deploy_rv, sizeof deploy_rv, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
        freeReplyObject(r);
        r = rcmd(rc, "GET fg:rv:cluster-1:pods");
        bool same = r->type == REDIS_REPLY_STRING && strcmp(r->str, deploy_rv) == 0;
        freeReplyObject(r);
        if (same)
            break;
        sleep_ms(50);
    }
    r = rcmd(rc, "GET fg:rv:cluster-1:pods");
    ck_assert_str_eq(r->str, deploy_rv);
    freeReplyObject(r);
    redisFree(rc);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

START_TEST(watch_cut_resumes_without_relist) {
    setup_n(1, "10000");
    create_namespace(0, NS);
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    int64_t lists = ks_requests(0, "list");
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "cut-%d", round);
        ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/cut-watches", NULL), 200);
        create_pod(0, NS, name, "cut");
        sleep_ms(100);
    }
    converge(5000);
    ck_assert_int_eq(ks_requests(0, "list"), lists); /* resumed from the last RV every time */
    fg_informers_stop(inf);
    teardown();
}
END_TEST

START_TEST(restart_resumes_and_replays_deletes) {
    setup_n(1, "10000");
    create_namespace(0, NS);
    for (int p = 0; p < 10; p++) {
        char name[32];
        snprintf(name, sizeof name, "p-%d", p);
        create_pod(0, NS, name, "app");
    }
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    converge(3000);
    fg_informers_stop(inf);
    /* while fleetgate is away: deletes and a create */
    int64_t lists = ks_requests(0, "list");
    for (int p = 0; p < 5; p++) {
        char path[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/" NS "/pods/p-%d", p);
        ck_assert_int_eq(ks_call(0, FG_KUBE_DELETE, path, NULL), 200);
    }
    create_pod(0, NS, "late", "app");
    inf = informers_start("replica-a");
    converge(5000);
    ck_assert_int_eq(ks_requests(0, "list"), lists); /* resumed from fg:rv: no LIST at all */
    fg_informers_stop(inf);
    teardown();
}
END_TEST

START_TEST(compacted_history_relists_and_drops_deleted) {
    setup_n(1, "10000");
    create_namespace(0, NS);
    for (int p = 0; p < 10; p++) {
        char name[32];
        snprintf(name, sizeof name, "p-%d", p);
        create_pod(0, NS, name, "app");
    }
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    fg_informers_stop(inf);
    for (int p = 0; p < 10; p += 2) {
        char path[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/" NS "/pods/p-%d", p);
        ck_assert_int_eq(ks_call(0, FG_KUBE_DELETE, path, NULL), 200);
    }
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/compact", NULL), 200);
    int64_t lists = ks_requests(0, "list");
    inf = informers_start("replica-a");
    converge(5000);
    /* 410 on the resumed watches: one LIST per resource, no more */
    int64_t relists = ks_requests(0, "list") - lists;
    ck_assert_int_ge(relists, 1);
    ck_assert_int_le(relists, FG_KIND_COUNT);
    redisContext *rc = rconn();
    redisReply *r = rcmd(rc, "HEXISTS fg:o:pod:cluster-1:" NS " p-0");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    redisFree(rc);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

START_TEST(redis_flushall_and_restart_resync) {
    setup_n(1, "10000");
    create_every_kind(0);
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    converge(3000);
    int64_t lists = ks_requests(0, "list");
    redisContext *rc = rconn();
    freeReplyObject(rcmd(rc, "FLUSHALL"));
    redisFree(rc);
    sleep_ms(100);
    create_pod(0, NS, "after-flush", "web");
    wait_synced(8000);
    converge(5000);
    int64_t after_flush = ks_requests(0, "list") - lists;
    ck_assert_int_ge(after_flush, FG_KIND_COUNT); /* every resource relisted ... */
    ck_assert_int_le(after_flush, FG_KIND_COUNT); /* ... once: no LIST storm */
    redis_restart(1500);
    create_pod(0, NS, "after-restart", "web");
    wait_synced(10000);
    converge(5000);
    /* one more LIST per resource (kubesim counts pages: events, which its controller makes,
     * may take a few pages of 50 by now) */
    ck_assert_int_le(ks_requests(0, "list") - lists, 2 * FG_KIND_COUNT + 4);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

START_TEST(second_replica_takes_over_the_leases) {
    setup_n(1, "10000");
    create_namespace(0, NS);
    /* replica A is the daemon, killed without a chance to release its leases */
    char *text = config_text("replica-a");
    uint16_t port;
    pid_t a = th_daemon_start(text, &port, NULL);
    free(text);
    ck_assert_int_gt(a, 0);
    wait_synced(5000);
    fg_informers_t *b = informers_start("replica-b");
    sleep_ms(LEASE_MS / 2);
    redisContext *rc = rconn();
    redisReply *r = rcmd(rc, "GET fg:lease:cluster-1:pods");
    ck_assert_str_eq(r->str, "replica-a"); /* B waits while A renews */
    freeReplyObject(r);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    create_pod(0, NS, "while-a-is-dead", "web");
    int waited = 0;
    for (;; waited += 50) {
        r = rcmd(rc, "GET fg:lease:cluster-1:pods");
        bool b_holds = r->type == REDIS_REPLY_STRING && strcmp(r->str, "replica-b") == 0;
        freeReplyObject(r);
        if (b_holds)
            break;
        ck_assert_int_lt(waited, 2 * LEASE_MS);
        sleep_ms(50);
    }
    converge(5000);
    redisFree(rc);
    fg_informers_stop(b);
    teardown();
}
END_TEST

static bool redis_field_is(const char *key, const char *field, const char *want) {
    redisContext *rc = rconn();
    redisReply *r = rcmd(rc, "HGET %s %s", key, field);
    bool same = r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0;
    freeReplyObject(r);
    redisFree(rc);
    return same;
}

static void wait_field(const char *key, const char *field, const char *want, int timeout_ms) {
    for (int waited = 0; !redis_field_is(key, field, want); waited += 50) {
        ck_assert_msg(waited < timeout_ms, "%s %s is not %s after %d ms", key, field, want,
                      timeout_ms);
        sleep_ms(50);
    }
}

START_TEST(cluster_down_is_unreachable_then_recovers) {
    setup_n(1, "10000");
    create_namespace(0, NS);
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/faults", "{\"down\":true}"), 200);
    wait_field("fg:cluster:cluster-1", "health", "Unreachable", 5000);
    wait_field("fg:sync:cluster-1:pods", "state", "Lagging", 5000);
    ck_assert(fg_informers_ready(inf)); /* an unreachable cluster does not hold readiness */
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/faults", "{\"down\":false}"), 200);
    create_pod(0, NS, "after-outage", "web");
    converge(5000);
    wait_field("fg:cluster:cluster-1", "health", "Healthy", 5000);
    wait_field("fg:sync:cluster-1:pods", "state", "Synced", 5000);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

/* Thousands of random changes, with watch cuts and compactions in between: the cache ends up
 * equal to kubesim, object by object. */
START_TEST(convergence_under_random_changes) {
    setup_n(2, "2000");
    for (int i = 0; i < 2; i++)
        create_every_kind(i);
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    unsigned seed = 12345;
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/seed",
                             "{\"namespace\":\"seeded\",\"nodes\":20,\"pods\":400}"),
                     200);
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/churn",
                             "{\"perMinute\":60000,\"namespace\":\"seeded\"}"),
                     200);
    /* one request in ten fails (503), the informers' LISTs and watches included */
    ck_assert_int_eq(
        ks_call(0, FG_KUBE_POST, "/_kubesim/faults", "{\"errorRate\":0.1,\"errorStatus\":503}"),
        200);
    int ops = 0;
    for (int step = 0; step < 1500; step++) {
        int i = (int)(rand_r(&seed) % 2);
        int p = (int)(rand_r(&seed) % 60);
        char name[32], path[128], body[256];
        snprintf(name, sizeof name, "r-%d", p);
        snprintf(path, sizeof path, "/api/v1/namespaces/" NS "/pods/%s", name);
        switch (rand_r(&seed) % 4) {
            case 0:
            case 1: {
                char pp[96];
                snprintf(pp, sizeof pp, "/api/v1/namespaces/" NS "/pods");
                snprintf(body, sizeof body,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
                         "\"labels\":{\"app\":\"a%d\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
                         "\"image\":\"img:%d\"}]}}",
                         name, p % 5, step);
                ks_call(i, FG_KUBE_POST, pp, body);
                break;
            }
            case 2:
                snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"app\":\"a%d\"}}}",
                         step % 7);
                ks_call(i, FG_KUBE_PATCH, path, body);
                break;
            default:
                ks_call(i, FG_KUBE_DELETE, path, NULL);
                break;
        }
        ops++;
        if (step % 300 == 150)
            ks_call(i, FG_KUBE_POST, "/_kubesim/cut-watches", NULL);
        if (step % 500 == 499)
            ks_call(i, FG_KUBE_POST, "/_kubesim/compact", NULL);
    }
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/churn", "{\"perMinute\":0}"), 200);
    ck_assert_int_eq(ks_call(0, FG_KUBE_POST, "/_kubesim/faults", "{\"errorRate\":0}"), 200);
    ck_assert_int_ge(ops, 1500);
    converge(15000);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

/* The write-through (cache/through.c) sends nothing for an object whose version this process's
 * informer has seen Redis confirm: what its script would answer ("shown already") comes without
 * the round trip, so a write-through to a Redis that cannot be reached still succeeds for it. A
 * version the watch has not reached still needs Redis. */
static int through_dead(const char *rv, bool *shown) {
    fg_redis_t *dead = NULL;
    ck_assert_int_eq(fg_redis_new(&dead, "redis://127.0.0.1:1", 1, 200), FG_OK);
    fg_cache_through_t it = {.kind = "app",
                             .cluster = ks.conf[0].name,
                             .resource = "deployments",
                             .scope = NS,
                             .name = "web",
                             .object = "{}",
                             .rv = rv};
    int rc = fg_cache_write_through(dead, &it, 1, shown);
    fg_redis_free(dead);
    return rc;
}

START_TEST(write_through_skips_what_the_watch_confirmed) {
    setup_n(1, "10000");
    fg_informers_t *inf = informers_start("replica-a");
    wait_synced(5000);
    create_every_kind(0);
    json_t *out = NULL, *scale = json_pack("{s:{s:i}}", "spec", "replicas", 4);
    fg_kube_error_t err;
    ck_assert_int_eq(fg_kube_request(ks.kc[0], FG_KUBE_PATCH,
                                     "/apis/apps/v1/namespaces/" NS "/deployments/web", scale, &out,
                                     NULL, &err),
                     FG_OK);
    json_decref(scale);
    char rv[32];
    snprintf(
        rv, sizeof rv, "%s",
        json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion")));
    json_decref(out);
    bool shown = false;
    int rc = FG_EIO;
    for (int waited = 0; waited < 5000 && rc != FG_OK; waited += 20) {
        rc = through_dead(rv, &shown);
        if (rc != FG_OK)
            sleep_ms(20);
    }
    ck_assert_msg(rc == FG_OK && shown, "the watch's confirmed version %s was sent to Redis", rv);
    char later[40];
    snprintf(later, sizeof later, "%llu", strtoull(rv, NULL, 10) + 1000000);
    ck_assert_int_ne(through_dead(later, &shown), FG_OK);
    ck_assert(!shown);
    fg_informers_stop(inf);
    teardown();
}
END_TEST

/* FG_TEST_ONLY=NAME runs one test (debugging). */
#define ADD_TEST(tc, t)                                                                            \
    do {                                                                                           \
        const char *only = getenv("FG_TEST_ONLY");                                                 \
        if (only == NULL || strcmp(only, #t) == 0)                                                 \
            tcase_add_test(tc, t);                                                                 \
    } while (0)

static Suite *suite(void) {
    Suite *s = suite_create("informer");
    TCase *tc = tcase_create("informer");
    tcase_set_timeout(tc, 60);
    ADD_TEST(tc, initial_sync_of_every_kind);
    ADD_TEST(tc, every_event_type_applied);
    ADD_TEST(tc, watch_cut_resumes_without_relist);
    ADD_TEST(tc, restart_resumes_and_replays_deletes);
    ADD_TEST(tc, compacted_history_relists_and_drops_deleted);
    ADD_TEST(tc, redis_flushall_and_restart_resync);
    ADD_TEST(tc, second_replica_takes_over_the_leases);
    ADD_TEST(tc, cluster_down_is_unreachable_then_recovers);
    ADD_TEST(tc, convergence_under_random_changes);
    ADD_TEST(tc, write_through_skips_what_the_watch_confirmed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(suite());
}
