/* tests/bench/cache_probe.c: the measuring half of tests/bench/cache_sync_bench.sh (which starts
 * redis-server, kubesim and fleetgate). Talks to one kubesim cluster through fleetgate's own
 * Kubernetes client and to Redis with hiredis.
 *
 *   cache_probe URL CA TOKEN_FILE REDIS_PORT CLUSTER wait-synced TIMEOUT_S
 *       waits until every fg:sync:CLUSTER:* says Synced; prints the seconds it waited
 *   cache_probe ... fresh NAMESPACE COUNT PER_MINUTE
 *       COUNT label patches on the pods of NAMESPACE at PER_MINUTE; each one's time from the
 *       PATCH answer to the new label being readable in Redis; prints median, p99, max (ms).
 *       With FG_GET_URL (fleetgate's base URL) and FG_GET_TOKEN_FILE set, readable through
 *       fleetgate's GET /v1/projects/NS/pods/NAME instead (the path a user sees, mirror included).
 *   cache_probe ... memory NAMESPACE
 *       raw JSON bytes of the pods of NAMESPACE as the API lists them, against the Redis memory
 *       of their cache keys (MEMORY USAGE of fg:o / fg:i / fg:a / fg:ax), per pod
 */
#include "fleetgate/kube.h"

#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static fg_kube_client_t *kc;
static redisContext *rc;
static const char *cluster;

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static double now_ms(void) {
    return (double)fg_now_ns() / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int wait_synced(int timeout_s) {
    double t0 = now_ms();
    for (;;) {
        int synced = 0;
        for (int k = 0; k < FG_KIND_COUNT; k++) {
            redisReply *r = redisCommand(rc, "HGET fg:sync:%s:%s state", cluster,
                                         fg_kube_kind_info((fg_kind_t)k)->resource);
            if (r == NULL)
                return 1;
            synced += r->type == REDIS_REPLY_STRING && strcmp(r->str, "Synced") == 0;
            freeReplyObject(r);
        }
        if (synced == FG_KIND_COUNT)
            break;
        if (now_ms() - t0 > timeout_s * 1000.0) {
            fprintf(stderr, "not synced after %d s\n", timeout_s);
            return 1;
        }
        sleep_us(20000);
    }
    printf("%.2f\n", (now_ms() - t0) / 1000.0);
    return 0;
}

/* The names of the pods of ns (the first 2000). */
static json_t *pod_names(const char *ns) {
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?limit=2000", ns);
    json_t *out = NULL, *names = json_array();
    fg_kube_error_t err;
    if (fg_kube_request(kc, FG_KUBE_GET, path, NULL, &out, NULL, &err) != FG_OK)
        return names;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(out, "items"), i, item) {
        json_array_append(names, json_object_get(json_object_get(item, "metadata"), "name"));
    }
    json_decref(out);
    return names;
}

/* ---- reading through fleetgate's GET ----------------------------------------- */

static CURL *get_curl;
static struct curl_slist *get_headers;
static const char *get_base;

static size_t collect(char *data, size_t size, size_t n, void *ud) {
    fg_buf_t *b = ud;
    return fg_buf_append(b, data, size * n) == FG_OK ? size * n : 0;
}

static bool get_init(void) {
    get_base = getenv("FG_GET_URL");
    const char *tf = getenv("FG_GET_TOKEN_FILE");
    if (get_base == NULL || tf == NULL)
        return false;
    char *tok = NULL;
    size_t len;
    if (fg_read_file(tf, 1 << 16, &tok, &len) != FG_OK)
        return false;
    while (len && (tok[len - 1] == '\n' || tok[len - 1] == '\r'))
        tok[--len] = '\0';
    char *h = fg_xasprintf("Authorization: Bearer %s", tok);
    free(tok);
    get_headers = curl_slist_append(NULL, h);
    free(h);
    get_curl = curl_easy_init();
    return get_curl != NULL;
}

/* Whether fleetgate's GET of the pod shows marker. */
static bool seen_through_get(const char *ns, const char *name, const char *marker) {
    char url[512];
    snprintf(url, sizeof url, "%s/v1/projects/%s/pods/%s?cluster=%s", get_base, ns, name, cluster);
    fg_buf_t b;
    fg_buf_init(&b, 1 << 22);
    curl_easy_setopt(get_curl, CURLOPT_URL, url);
    curl_easy_setopt(get_curl, CURLOPT_HTTPHEADER, get_headers);
    curl_easy_setopt(get_curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(get_curl, CURLOPT_WRITEDATA, &b);
    long code = 0;
    bool seen = curl_easy_perform(get_curl) == CURLE_OK &&
                curl_easy_getinfo(get_curl, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
                code == 200 && fg_buf_append(&b, "", 1) == FG_OK && strstr(b.data, marker);
    fg_buf_free(&b);
    return seen;
}

static int fresh(const char *ns, int count, int per_minute) {
    bool via_get = get_init();
    json_t *names = pod_names(ns);
    size_t n = json_array_size(names);
    if (n == 0) {
        fprintf(stderr, "no pods in %s\n", ns);
        return 1;
    }
    double *lat = calloc((size_t)count, sizeof *lat);
    double period_ms = 60000.0 / per_minute;
    double start = now_ms();
    int done = 0, missed = 0;
    unsigned seed = (unsigned)fg_now_ns();
    for (int i = 0; i < count; i++) {
        double due = start + i * period_ms;
        while (now_ms() < due)
            sleep_us(200);
        const char *name = json_string_value(json_array_get(names, (size_t)rand_r(&seed) % n));
        char path[256], body[160], marker[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
        snprintf(marker, sizeof marker, "\"fresh\":\"p%d-%u\"", i, seed);
        snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"fresh\":\"p%d-%u\"}}}", i, seed);
        json_t *b = json_loads(body, 0, NULL), *out = NULL;
        fg_kube_error_t err;
        int rc1 = fg_kube_request(kc, FG_KUBE_PATCH, path, b, &out, NULL, &err);
        json_decref(b);
        json_decref(out);
        if (rc1 != FG_OK)
            continue;
        double t0 = now_ms();
        for (;;) {
            bool seen;
            if (via_get) {
                seen = seen_through_get(ns, name, marker);
            } else {
                redisReply *r = redisCommand(rc, "HGET fg:o:pod:%s:%s %s", cluster, ns, name);
                seen = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, marker);
                if (r != NULL)
                    freeReplyObject(r);
            }
            if (seen) {
                lat[done++] = now_ms() - t0;
                break;
            }
            if (now_ms() - t0 > 10000) {
                missed++;
                break;
            }
            sleep_us(250);
        }
    }
    qsort(lat, (size_t)done, sizeof *lat, cmp_double);
    if (done == 0) {
        fprintf(stderr, "no mutation became visible\n");
        return 1;
    }
    printf("mutations %d at %d/min: visible %s after median %.1f ms, p99 %.1f ms, max %.1f "
           "ms (%d not seen within 10 s)\n",
           done, per_minute, via_get ? "through fleetgate's GET" : "in Redis", lat[done / 2],
           lat[(size_t)((done - 1) * 0.99)], lat[done - 1], missed);
    free(lat);
    json_decref(names);
    if (via_get) {
        curl_easy_cleanup(get_curl);
        curl_slist_free_all(get_headers);
    }
    return missed > 0;
}

static long long key_memory(const char *pattern) {
    long long total = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
            return -1;
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *m =
                redisCommand(rc, "MEMORY USAGE %s SAMPLES 0", r->element[1]->element[i]->str);
            if (m != NULL && m->type == REDIS_REPLY_INTEGER)
                total += m->integer;
            if (m != NULL)
                freeReplyObject(m);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return total;
}

static int memory(const char *ns) {
    long long raw = 0, pods = 0;
    char *cont = NULL;
    do {
        char path[1024];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?limit=1000%s%s", ns,
                 cont ? "&continue=" : "", cont ? cont : "");
        free(cont);
        cont = NULL;
        json_t *out = NULL;
        fg_kube_error_t err;
        if (fg_kube_request(kc, FG_KUBE_GET, path, NULL, &out, NULL, &err) != FG_OK) {
            fprintf(stderr, "LIST failed: %s\n", err.message);
            return 1;
        }
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(out, "items"), i, item) {
            size_t len = 0;
            free(fg_json_dumps(item, &len));
            raw += (long long)len;
            pods++;
        }
        const char *c =
            json_string_value(json_object_get(json_object_get(out, "metadata"), "continue"));
        if (c != NULL && c[0] != '\0') {
            /* continue tokens here are URL-safe enough for kubesim; escape '=' and '+' anyway */
            fg_buf_t b;
            fg_buf_init(&b, 4096);
            for (const char *p = c; *p; p++) {
                if (*p == '=' || *p == '+' || *p == '/')
                    fg_buf_appendf(&b, "%%%02X", (unsigned char)*p);
                else
                    fg_buf_append(&b, p, 1);
            }
            cont = fg_buf_steal(&b, NULL);
        }
        json_decref(out);
    } while (cont != NULL);
    char pat[256];
    long long mem = 0;
    snprintf(pat, sizeof pat, "fg:o:pod:%s:%s", cluster, ns);
    mem += key_memory(pat);
    snprintf(pat, sizeof pat, "fg:i:pod:%s:%s", cluster, ns);
    mem += key_memory(pat);
    snprintf(pat, sizeof pat, "fg:a:%s:%s:*", cluster, ns);
    mem += key_memory(pat);
    snprintf(pat, sizeof pat, "fg:ax:%s", cluster);
    mem += key_memory(pat);
    if (pods == 0) {
        fprintf(stderr, "no pods\n");
        return 1;
    }
    printf("pods %lld: raw JSON %.0f B/pod, Redis %.0f B/pod (hash + index + app sets): %.1f%%\n",
           pods, (double)raw / pods, (double)mem / pods, 100.0 * mem / raw);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: cache_probe URL CA TOKEN_FILE REDIS_PORT CLUSTER MODE ARGS...\n");
        return 2;
    }
    fg_cluster_conf_t conf = {
        .name = argv[5], .zone = "z", .url = argv[1], .ca_file = argv[2], .token_file = argv[3]};
    cluster = argv[5];
    fg_kube_error_t err;
    fg_kube_client_opts_t o = {.timeout_ms = 60000};
    if (fg_kube_client_new(&kc, &conf, &o, &err) != FG_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    int64_t port;
    if (fg_parse_int64(argv[4], strlen(argv[4]), 1, 65535, &port) != FG_OK)
        return 2;
    struct timeval tv = {5, 0};
    rc = redisConnectWithTimeout("127.0.0.1", (int)port, tv);
    if (rc == NULL || rc->err) {
        fprintf(stderr, "redis: cannot connect\n");
        return 1;
    }
    int status = 2;
    int64_t a = 0, b = 0;
    if (strcmp(argv[6], "wait-synced") == 0 && argc == 8 &&
        fg_parse_int64(argv[7], strlen(argv[7]), 1, 3600, &a) == FG_OK)
        status = wait_synced((int)a);
    else if (strcmp(argv[6], "fresh") == 0 && argc == 10 &&
             fg_parse_int64(argv[8], strlen(argv[8]), 1, 1000000, &a) == FG_OK &&
             fg_parse_int64(argv[9], strlen(argv[9]), 1, 6000000, &b) == FG_OK)
        status = fresh(argv[7], (int)a, (int)b);
    else if (strcmp(argv[6], "memory") == 0 && argc == 8)
        status = memory(argv[7]);
    redisFree(rc);
    fg_kube_client_free(kc);
    return status;
}
