/* logs: GET .../pods/NAME/log and the routing of pod subresources (log, exec).
 *
 * A container's log is generated, not stored: line k of a container instance is written at
 * startedAt + k / rate (rate from the pod annotation kubesim.io/log-lines-per-second or the
 * cluster's timing), so any window (tailLines, sinceSeconds, previous instance, follow) is computed
 * from the pod's status alone. follow streams new lines as their time comes and ends when the pod
 * ends or goes away (or the client hangs up: server.c notices). Errors read like the kubelet's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"

#define MAX_LINES     100000
#define FOLLOW_MAX_MS 1000

int ks_pod_sub(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    if (t->name == NULL || t->sub == NULL)
        return FG_ENOENT;
    if (strcmp(t->sub, "log") == 0 && strcmp(req->method, "GET") == 0) {
        ks_pod_log(c, req, t, out);
        return FG_OK;
    }
    if (strcmp(t->sub, "exec") == 0 &&
        (strcmp(req->method, "GET") == 0 || strcmp(req->method, "POST") == 0)) {
        ks_pod_exec(c, req, t, out);
        return FG_OK;
    }
    return FG_ENOENT;
}

static int64_t parse_ts_ms(const char *s) {
    struct tm tm = {0};
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

static json_t *jpath(json_t *j, const char *a, const char *b, const char *c3) {
    j = json_object_get(j, a);
    if (b != NULL)
        j = json_object_get(j, b);
    if (c3 != NULL)
        j = json_object_get(j, c3);
    return j;
}

/* One container instance's log window: lines [0, end) written from start_ms at lps. */
typedef struct {
    ks_cluster_t *c;
    char *key; /* the pod's store key (follow re-reads it) */
    char *container;
    int64_t start_ms;
    double lps;
    int64_t next; /* next line to send */
    bool timestamps;
    int64_t limit; /* bytes left (limitBytes), -1 = no limit */
    int restarts;  /* the instance followed */
} log_t;

static void log_free(void *p) {
    log_t *l = p;
    free(l->key);
    free(l->container);
    free(l);
}

static const char *const PATHS[] = {"/", "/api/items", "/api/cart", "/healthz", "/api/search"};

static void append_line(log_t *l, fg_buf_t *b, int64_t k) {
    char ts[48], line[512];
    int64_t at = l->start_ms + (l->lps > 0 ? (int64_t)((double)k * 1000.0 / l->lps) : 0);
    time_t sec = (time_t)(at / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    int n;
    if (k == 0)
        n = snprintf(line, sizeof(line), "level=info container=%s msg=\"starting\" restarts=%d\n",
                     l->container, l->restarts);
    else
        n = snprintf(line, sizeof(line),
                     "level=info container=%s msg=\"handled request\" path=%s status=%d "
                     "duration_ms=%lld seq=%lld\n",
                     l->container, PATHS[k % 5], k % 17 == 0 ? 500 : 200,
                     (long long)(k * 7 % 40 + 1), (long long)k);
    if (l->timestamps)
        fg_buf_appendf(b, "%s.%03lld000000Z ", ts, (long long)(at % 1000));
    size_t len = (size_t)n;
    if (l->limit >= 0 && (int64_t)len > l->limit)
        len = (size_t)l->limit;
    fg_buf_append(b, line, len);
    if (l->limit >= 0)
        l->limit -= (int64_t)len;
}

/* Lines written by now (exclusive bound), capped by the instance's end when it has one. */
static int64_t lines_until(const log_t *l, int64_t until_ms) {
    if (until_ms < l->start_ms)
        return 0;
    if (l->lps <= 0)
        return 1;
    return (int64_t)((double)(until_ms - l->start_ms) * l->lps / 1000.0) + 1;
}

/* The container's status entry in pod p, or NULL. */
static json_t *container_status(json_t *p, const char *name) {
    size_t i;
    json_t *cs;
    json_array_foreach(jpath(p, "status", "containerStatuses", NULL), i, cs) {
        if (strcmp(json_string_value(json_object_get(cs, "name")) ?: "", name) == 0)
            return cs;
    }
    return NULL;
}

/* The window of the current (or previous) instance: start and end (-1 = still running). */
static int instance_window(json_t *cs, bool previous, int64_t *start, int64_t *end) {
    json_t *st = previous ? jpath(cs, "lastState", "terminated", NULL) : NULL;
    if (previous && st == NULL)
        return FG_ENOENT;
    if (!previous) {
        st = jpath(cs, "state", "running", NULL);
        if (st == NULL)
            st = jpath(cs, "state", "terminated", NULL);
    }
    if (st == NULL)
        return FG_ENOENT;
    *start = parse_ts_ms(json_string_value(json_object_get(st, "startedAt")));
    *end = parse_ts_ms(json_string_value(json_object_get(st, "finishedAt")));
    return *start >= 0 ? FG_OK : FG_ENOENT;
}

static void bad(ks_resp_t *out, const char *msg) {
    ks_status_reply(out, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
}

static int log_next(void *st, fg_buf_t *b, int wait_ms) {
    log_t *l = st;
    ks_obj_t *o = NULL;
    if (l->limit == 0 || l->c->stopping)
        return FG_ENOENT;
    if (ks_store_get(l->c->store, ks_resource_by_kind("Pod"), l->key, &o) != FG_OK)
        return FG_ENOENT; /* the pod is gone */
    json_t *p = ks_obj_parse(o);
    json_t *cs = container_status(p, l->container);
    int64_t start = 0, end = -1;
    int restarts = (int)json_integer_value(json_object_get(cs, "restartCount"));
    bool over = restarts != l->restarts || instance_window(cs, false, &start, &end) != FG_OK;
    json_decref(p);
    ks_obj_unref(o);
    int64_t now = ks_now_ms(l->c);
    int64_t upto = lines_until(l, end >= 0 ? end : now);
    for (; l->next < upto && l->limit != 0 && b->len < 65536; l->next++)
        append_line(l, b, l->next);
    if (b->len > 0)
        return FG_OK;
    if (over || end >= 0 || l->lps <= 0)
        return FG_ENOENT; /* the instance ended and everything was sent */
    int64_t due = l->start_ms + (int64_t)((double)l->next * 1000.0 / l->lps) - now;
    int64_t sleep_ms = due < wait_ms ? due : wait_ms;
    if (sleep_ms > FOLLOW_MAX_MS)
        sleep_ms = FOLLOW_MAX_MS;
    if (sleep_ms > 0) {
        struct timespec ts = {.tv_sec = sleep_ms / 1000, .tv_nsec = (sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return FG_OK;
}

/* Reads an optional non-negative integer query parameter; FG_EINVAL with a 400. */
static int query_int_or_reply(const ks_req_t *req, const char *key, int64_t *v, ks_resp_t *out) {
    const char *s = ks_req_query(req, key);
    char msg[128];
    if (s == NULL)
        return FG_OK;
    if (fg_parse_int64(s, strlen(s), 0, INT64_MAX / 2, v) != FG_OK) {
        snprintf(msg, sizeof(msg), "%s: must be a non-negative integer", key);
        bad(out, msg);
        return FG_EINVAL;
    }
    return FG_OK;
}

/* The container named by ?container=, or the only one; NULL with a 400 in out. */
static const char *container_or_reply(const ks_req_t *req, json_t *p, const char *pod,
                                      ks_resp_t *out) {
    json_t *ctrs = jpath(p, "spec", "containers", NULL);
    const char *want = ks_req_query(req, "container");
    char msg[512];
    size_t i;
    json_t *ctr;
    if (want == NULL || want[0] == '\0') {
        if (json_array_size(ctrs) == 1)
            return json_string_value(json_object_get(json_array_get(ctrs, 0), "name"));
        fg_buf_t names;
        fg_buf_init(&names, 4096);
        json_array_foreach(ctrs, i, ctr) {
            fg_buf_appendf(&names, "%s%s", i ? " " : "",
                           json_string_value(json_object_get(ctr, "name")) ?: "");
        }
        snprintf(msg, sizeof(msg),
                 "a container name must be specified for pod %s, choose one of: [%.*s]", pod,
                 (int)names.len, names.data ? names.data : "");
        fg_buf_free(&names);
        bad(out, msg);
        return NULL;
    }
    json_array_foreach(ctrs, i, ctr) {
        const char *n = json_string_value(json_object_get(ctr, "name"));
        if (n != NULL && strcmp(n, want) == 0)
            return n;
    }
    snprintf(msg, sizeof(msg), "container %s is not valid for pod %s", want, pod);
    bad(out, msg);
    return NULL;
}

void ks_pod_log(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    char *key = ks_key(t->ns, t->name);
    ks_obj_t *o = NULL;
    json_t *p = NULL;
    log_t *l = NULL;
    char msg[512];
    int64_t tail = -1, since = -1, limit = -1, start = 0, end = -1;
    bool previous = ks_req_flag(req, "previous");
    bool follow = ks_req_flag(req, "follow");
    if (ks_store_get(c->store, t->res, key, &o) != FG_OK) {
        ks_not_found_reply(out, &ks_resources[t->res], t->name);
        goto out;
    }
    p = ks_obj_parse(o);
    if (query_int_or_reply(req, "tailLines", &tail, out) != FG_OK ||
        query_int_or_reply(req, "sinceSeconds", &since, out) != FG_OK ||
        query_int_or_reply(req, "limitBytes", &limit, out) != FG_OK)
        goto out;
    const char *ctr = container_or_reply(req, p, t->name, out);
    if (ctr == NULL)
        goto out;
    json_t *cs = container_status(p, ctr);
    if (instance_window(cs, previous, &start, &end) != FG_OK) {
        if (previous)
            snprintf(msg, sizeof(msg),
                     "previous terminated container \"%s\" in pod \"%s\" not found", ctr, t->name);
        else
            snprintf(msg, sizeof(msg),
                     "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating", ctr,
                     t->name);
        bad(out, msg);
        goto out;
    }
    const char *rate = json_string_value(json_object_get(jpath(p, "metadata", "annotations", NULL),
                                                         "kubesim.io/log-lines-per-second"));
    int64_t lps_i = -1;
    l = fg_xcalloc(1, sizeof(*l));
    l->c = c;
    l->key = key;
    key = NULL;
    l->container = fg_xstrdup(ctr);
    l->start_ms = start;
    l->lps = c->timing.log_lines_per_sec;
    if (rate != NULL && fg_parse_int64(rate, strlen(rate), 0, 100000, &lps_i) == FG_OK)
        l->lps = (double)lps_i;
    l->timestamps = ks_req_flag(req, "timestamps");
    l->limit = limit >= 0 ? limit : -1;
    l->restarts = (int)json_integer_value(json_object_get(cs, "restartCount"));
    int64_t now = ks_now_ms(c);
    int64_t upto = lines_until(l, end >= 0 ? end : now);
    int64_t from = 0;
    if (since >= 0) {
        int64_t since_ms = now - since * 1000;
        if (since_ms > l->start_ms)
            from = l->lps > 0
                       ? (int64_t)((double)(since_ms - l->start_ms) * l->lps / 1000.0 + 0.999)
                       : 1;
    }
    if (tail >= 0 && upto - tail > from)
        from = upto - tail;
    if (upto - from > MAX_LINES)
        from = upto - MAX_LINES;
    l->next = from < 0 ? 0 : from;
    out->code = 200;
    out->content_type = "text/plain";
    if (follow && !previous) {
        out->stream = (ks_stream_t){.st = l, .next = log_next, .free = log_free};
        l = NULL;
        goto out;
    }
    fg_buf_t b;
    fg_buf_init(&b, (size_t)64 << 20);
    for (; l->next < upto && l->limit != 0; l->next++)
        append_line(l, &b, l->next);
    fg_buf_append(&b, "", 0);
    out->body = fg_buf_steal(&b, &out->len);
    if (out->body == NULL)
        out->body = fg_xstrdup("");
    fg_buf_free(&b);
out:
    if (l != NULL)
        log_free(l);
    json_decref(p);
    ks_obj_unref(o);
    free(key);
}
