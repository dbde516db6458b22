/* kube/client.c: the HTTP side of the Kubernetes client, on libcurl (the only file of
 * fleetgate that includes curl.h).
 *
 * One fg_kube_client_t per member cluster holds its credentials and:
 * - a pool of easy handles for fg_kube_request: a handle keeps its connections open between
 *   requests, so taking one from the pool reuses a warm TLS connection; threads that find the
 *   pool empty make a new handle and give it back afterwards (the pool keeps POOL_MAX);
 * - a share handle (DNS cache and TLS sessions) used by every handle of the client, pooled or
 *   watching, with one mutex per shared data kind as libcurl asks for threaded use.
 * Watches have their own easy handle, added to a caller's fg_kube_loop_t (a curl multi); its
 * write callback feeds the watch parser directly, so events leave the loop as they arrive.
 * One-shot GETs (fg_kube_get_new: the informers' LIST pages) are the same object in "get"
 * mode: the body is buffered up to max_response_bytes and handed over parsed when the transfer
 * ends, so a thread running a loop lists and watches many resources without blocking on any.
 *
 * Security: TLS verification is on unless the cluster's insecure_skip_tls_verify is set;
 * redirects are never followed (a token must not travel to another host); only http and
 * https are allowed; the bearer token lives in one header list and is never logged or put in
 * an error message; a token over plain http is refused here as in the configuration.
 */
#include "fleetgate/kube.h"

#include "fleetgate/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define POOL_MAX         8
#define MAX_TOKEN_BYTES  16384
#define MAX_PATH_BYTES   8192
#define MAX_ERROR_BODY   65536 /* an error answer (a Status) is small */
#define DEFAULT_TIMEOUT  10000
#define DEFAULT_CONNECT  5000
#define DEFAULT_MAX_RESP (32u << 20)
#define DEFAULT_MAX_REQ  (3u << 20)

struct fg_kube_client {
    char *name;
    char *base_url; /* without a trailing '/' */
    char *ca_file, *cert_file, *key_file;
    bool insecure;
    long timeout_ms, connect_timeout_ms;
    size_t max_response, max_request, max_event;
    struct curl_slist *hdr_get;   /* Accept (+ Authorization) */
    struct curl_slist *hdr_json;  /* + Content-Type: application/json */
    struct curl_slist *hdr_merge; /* + Content-Type: application/merge-patch+json */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_lock;
    CURL *pool[POOL_MAX];
    int npool;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void) {
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *e, curl_lock_data data, curl_lock_access access, void *ud) {
    (void)e, (void)access;
    fg_kube_client_t *c = ud;
    pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *e, curl_lock_data data, void *ud) {
    (void)e;
    fg_kube_client_t *c = ud;
    pthread_mutex_unlock(&c->share_locks[data]);
}

__attribute__((format(printf, 3, 4))) static void set_err(fg_kube_error_t *err, const char *reason,
                                                          const char *fmt, ...) {
    if (err == NULL)
        return;
    fg_kube_error_clear(err);
    snprintf(err->reason, sizeof err->reason, "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

/* Reads the bearer token: at most MAX_TOKEN_BYTES, surrounding whitespace trimmed, no other
 * whitespace or control bytes inside (it goes into an HTTP header). */
static int read_token(const char *path, char **out, fg_kube_error_t *err) {
    char *data = NULL;
    size_t len = 0;
    int rc = fg_read_file(path, MAX_TOKEN_BYTES, &data, &len);
    if (rc != FG_OK) {
        set_err(err, "Config", "token_file %s: %s", path,
                rc == FG_ETOOBIG ? "larger than 16 KiB" : "cannot be read");
        return rc == FG_ETOOBIG ? FG_EINVAL : FG_ENOENT;
    }
    size_t start = 0;
    while (start < len && (data[start] == ' ' || data[start] == '\n' || data[start] == '\r' ||
                           data[start] == '\t'))
        start++;
    while (len > start && (data[len - 1] == ' ' || data[len - 1] == '\n' || data[len - 1] == '\r' ||
                           data[len - 1] == '\t'))
        len--;
    if (len == start) {
        free(data);
        set_err(err, "Config", "token_file %s: empty", path);
        return FG_EINVAL;
    }
    for (size_t i = start; i < len; i++) {
        unsigned char ch = (unsigned char)data[i];
        if (ch <= 0x20 || ch == 0x7f) {
            free(data);
            set_err(err, "Config", "token_file %s: the token holds whitespace or control bytes",
                    path);
            return FG_EINVAL;
        }
    }
    *out = fg_xstrndup(data + start, len - start);
    /* The file's bytes held the secret too: clear them before freeing. */
    explicit_bzero(data, len);
    free(data);
    return FG_OK;
}

static struct curl_slist *append_header(struct curl_slist *l, const char *h) {
    struct curl_slist *n = curl_slist_append(l, h);
    if (n == NULL)
        abort(); /* out of memory */
    return n;
}

void fg_kube_client_free(fg_kube_client_t *c) {
    if (c == NULL)
        return;
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    if (c->share != NULL)
        curl_share_cleanup(c->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->share_locks[i]);
    pthread_mutex_destroy(&c->pool_lock);
    curl_slist_free_all(c->hdr_get);
    curl_slist_free_all(c->hdr_json);
    curl_slist_free_all(c->hdr_merge);
    free(c->name);
    free(c->base_url);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c);
}

int fg_kube_client_new(fg_kube_client_t **out, const fg_cluster_conf_t *conf,
                       const fg_kube_client_opts_t *opts, fg_kube_error_t *err) {
    int rc = FG_OK;
    fg_kube_client_t *c = NULL;
    char *token = NULL, *auth = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        set_err(err, FG_KUBE_REASON_TRANSPORT, "libcurl failed to initialise");
        return FG_EIO;
    }
    if (conf == NULL || conf->url == NULL || conf->name == NULL) {
        set_err(err, "Config", "cluster without a name or url");
        return FG_EINVAL;
    }
    bool https = strncmp(conf->url, "https://", 8) == 0;
    if (!https && strncmp(conf->url, "http://", 7) != 0) {
        set_err(err, "Config", "cluster %s: url is not http(s)", conf->name);
        return FG_EINVAL;
    }
    if (!https && conf->token_file != NULL) {
        set_err(err, "Config", "cluster %s: a bearer token is never sent over plain http",
                conf->name);
        return FG_EINVAL;
    }
    if ((conf->client_cert_file == NULL) != (conf->client_key_file == NULL)) {
        set_err(err, "Config", "cluster %s: client_cert_file and client_key_file go together",
                conf->name);
        return FG_EINVAL;
    }
    if (conf->token_file != NULL) {
        rc = read_token(conf->token_file, &token, err);
        if (rc != FG_OK)
            goto out;
    }
    c = fg_xcalloc(1, sizeof *c);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_locks[i], NULL);
    pthread_mutex_init(&c->pool_lock, NULL);
    c->name = fg_xstrdup(conf->name);
    c->base_url = fg_xstrdup(conf->url);
    size_t n = strlen(c->base_url);
    while (n > 0 && c->base_url[n - 1] == '/')
        c->base_url[--n] = '\0';
    c->ca_file = conf->ca_file ? fg_xstrdup(conf->ca_file) : NULL;
    c->cert_file = conf->client_cert_file ? fg_xstrdup(conf->client_cert_file) : NULL;
    c->key_file = conf->client_key_file ? fg_xstrdup(conf->client_key_file) : NULL;
    c->insecure = conf->insecure_skip_tls_verify;
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT;
    c->connect_timeout_ms =
        opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : DEFAULT_CONNECT;
    c->max_response =
        opts && opts->max_response_bytes > 0 ? opts->max_response_bytes : DEFAULT_MAX_RESP;
    c->max_request =
        opts && opts->max_request_bytes > 0 ? opts->max_request_bytes : DEFAULT_MAX_REQ;
    c->max_event =
        opts && opts->max_event_bytes > 0 ? opts->max_event_bytes : FG_KUBE_DEFAULT_MAX_EVENT_BYTES;
    struct curl_slist **lists[] = {&c->hdr_get, &c->hdr_json, &c->hdr_merge};
    if (token != NULL)
        auth = fg_xasprintf("Authorization: Bearer %s", token);
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        *lists[i] = append_header(NULL, "Accept: application/json");
        if (auth != NULL)
            *lists[i] = append_header(*lists[i], auth);
    }
    c->hdr_json = append_header(c->hdr_json, "Content-Type: application/json");
    c->hdr_merge = append_header(c->hdr_merge, "Content-Type: application/merge-patch+json");
    c->share = curl_share_init();
    if (c->share == NULL) {
        set_err(err, FG_KUBE_REASON_TRANSPORT, "curl_share_init failed");
        rc = FG_EIO;
        goto out;
    }
    curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    *out = c;
    c = NULL;
out:
    if (token != NULL) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    if (auth != NULL) {
        explicit_bzero(auth, strlen(auth));
        free(auth);
    }
    fg_kube_client_free(c);
    return rc;
}

const char *fg_kube_client_name(const fg_kube_client_t *c) {
    return c->name;
}

/* A path is the part after the base URL: it starts with '/' and holds no whitespace or
 * control bytes (it is not escaped here; callers build it from validated names). */
static bool path_ok(const char *path) {
    if (path == NULL || path[0] != '/')
        return false;
    size_t n = strnlen(path, MAX_PATH_BYTES + 1);
    if (n > MAX_PATH_BYTES)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)path[i] <= 0x20 || path[i] == 0x7f)
            return false;
    return true;
}

/* The settings every transfer of this client has: URL, TLS, credentials, limits. */
static void setup_easy(fg_kube_client_t *c, CURL *e, const char *url, struct curl_slist *headers,
                       char *errbuf) {
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_SHARE, c->share);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "fleetgate/" FG_VERSION);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    if (c->ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    if (c->cert_file != NULL) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
    }
}

/* Turns a failed transfer into (rc, err). */
static int transfer_error(CURLcode res, const char *errbuf, fg_kube_error_t *err) {
    const char *detail = errbuf[0] ? errbuf : curl_easy_strerror(res);
    if (res == CURLE_OPERATION_TIMEDOUT) {
        set_err(err, FG_KUBE_REASON_TIMEOUT, "deadline passed: %s", detail);
        return FG_ETIMEOUT;
    }
    set_err(err, FG_KUBE_REASON_TRANSPORT, "%s", detail);
    return FG_EIO;
}

static CURL *pool_take(fg_kube_client_t *c) {
    CURL *e = NULL;
    pthread_mutex_lock(&c->pool_lock);
    if (c->npool > 0)
        e = c->pool[--c->npool];
    pthread_mutex_unlock(&c->pool_lock);
    if (e == NULL) {
        e = curl_easy_init();
        if (e == NULL)
            abort(); /* out of memory */
    }
    return e;
}

static void pool_give(fg_kube_client_t *c, CURL *e) {
    /* reset keeps the handle's open connections and caches, drops the options */
    curl_easy_reset(e);
    pthread_mutex_lock(&c->pool_lock);
    if (c->npool < POOL_MAX) {
        c->pool[c->npool++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&c->pool_lock);
    if (e != NULL)
        curl_easy_cleanup(e);
}

typedef struct {
    fg_buf_t body;
    bool overflow;
    int64_t retry_after_s;
} answer_t;

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    answer_t *a = ud;
    if (fg_buf_append(&a->body, data, size * n) != FG_OK) {
        a->overflow = true;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    return size * n;
}

/* Keeps a Retry-After in seconds (the HTTP-date form is not used by API servers). */
static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    answer_t *a = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
        size_t i = sizeof name - 1, j = len;
        while (i < j && (data[i] == ' ' || data[i] == '\t'))
            i++;
        while (j > i && (data[j - 1] == '\r' || data[j - 1] == '\n' || data[j - 1] == ' '))
            j--;
        int64_t v;
        if (fg_parse_int64(data + i, j - i, 0, 86400, &v) == FG_OK)
            a->retry_after_s = v;
    }
    return len;
}

static const char *const method_names[] = {
    [FG_KUBE_GET] = "GET",     [FG_KUBE_POST] = "POST",     [FG_KUBE_PUT] = "PUT",
    [FG_KUBE_PATCH] = "PATCH", [FG_KUBE_DELETE] = "DELETE",
};

/* One request's transfer: set up by xfer_start, run by curl_easy_perform (fg_kube_request) or
 * by a multi handle (fg_kube_request_all), turned into (rc, out, err) by xfer_finish. */
typedef struct {
    fg_kube_client_t *c;
    CURL *e;
    char *url, *text;
    char errbuf[CURL_ERROR_SIZE];
    answer_t a;
} xfer_t;

/* text, when not NULL, is body already serialized (borrowed). */
static int xfer_start(xfer_t *x, fg_kube_client_t *c, fg_kube_method_t method, const char *path,
                      const json_t *body, const char *text, long timeout_ms, fg_kube_error_t *err) {
    size_t text_len = 0;
    memset(x, 0, sizeof *x);
    x->c = c;
    x->a.retry_after_s = -1;
    fg_buf_init(&x->a.body, c->max_response);
    if ((unsigned)method > FG_KUBE_DELETE || !path_ok(path)) {
        set_err(err, "BadRequest", "invalid method or path");
        return FG_EINVAL;
    }
    if (text != NULL) {
        text_len = strlen(text);
    } else if (body != NULL) {
        x->text = fg_json_dumps(body, &text_len);
        text = x->text;
    }
    if (text != NULL && text_len > c->max_request) {
        set_err(err, FG_KUBE_REASON_TOO_LARGE, "request body of %zu bytes is over %zu", text_len,
                c->max_request);
        return FG_ETOOBIG;
    }
    x->url = fg_xasprintf("%s%s", c->base_url, path);
    x->e = pool_take(c);
    CURL *e = x->e;
    setup_easy(c, e, x->url,
               method == FG_KUBE_PATCH ? c->hdr_merge : (text ? c->hdr_json : c->hdr_get),
               x->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* API servers gzip large lists */
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &x->a);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &x->a);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    if (method != FG_KUBE_GET)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method_names[method]);
    if (text != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)text_len);
    }
    return FG_OK;
}

static int xfer_finish(xfer_t *x, CURLcode res, json_t **out, long *http_code,
                       fg_kube_error_t *err) {
    long code = 0;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &code);
    if (http_code != NULL)
        *http_code = code;
    if (res == CURLE_WRITE_ERROR && x->a.overflow) {
        set_err(err, FG_KUBE_REASON_TOO_LARGE, "answer larger than %zu bytes", x->c->max_response);
        err->http_code = code;
        return FG_ETOOBIG;
    }
    if (res != CURLE_OK)
        return transfer_error(res, x->errbuf, err);
    if (code < 200 || code > 299) {
        fg_kube_error_from_body(code, x->a.body.data, x->a.body.len, err);
        if (err->retry_after_s < 0)
            err->retry_after_s = x->a.retry_after_s;
        return FG_ERR;
    }
    json_t *j = NULL;
    char jerr[160];
    if (x->a.body.data != NULL) { /* an fg_buf_t: it stays NUL-terminated */
        x->a.body.len = fg_kube_prune(x->a.body.data, x->a.body.len, FG_KUBE_PRUNE_OBJECT, NULL);
        x->a.body.data[x->a.body.len] = '\0';
    }
    if (fg_json_load(x->a.body.data ? x->a.body.data : "", x->a.body.len, &j, jerr, sizeof jerr) !=
            FG_OK ||
        !json_is_object(j)) {
        json_decref(j);
        set_err(err, FG_KUBE_REASON_BAD_RESPONSE, "HTTP %ld answer is not a JSON object%s%s", code,
                j == NULL ? ": " : "", j == NULL ? jerr : "");
        err->http_code = code;
        return FG_EINVAL;
    }
    *out = j;
    return FG_OK;
}

static void xfer_free(xfer_t *x) {
    if (x->e != NULL)
        pool_give(x->c, x->e);
    x->e = NULL;
    fg_buf_free(&x->a.body);
    free(x->url);
    free(x->text);
    x->url = x->text = NULL;
}

int fg_kube_request(fg_kube_client_t *c, fg_kube_method_t method, const char *path,
                    const json_t *body, json_t **out, long *http_code, fg_kube_error_t *err) {
    xfer_t x;
    fg_kube_error_t scratch;
    if (err == NULL)
        err = &scratch;
    fg_kube_error_clear(err);
    int rc = xfer_start(&x, c, method, path, body, NULL, 0, err);
    if (rc == FG_OK)
        rc = xfer_finish(&x, curl_easy_perform(x.e), out, http_code, err);
    xfer_free(&x);
    return rc;
}

/* ---- several requests at once ---------------------------------------------- */

/* Every call's transfer is added to one multi handle and driven until all have ended; each has
 * its own deadline (CURLOPT_TIMEOUT_MS), so a slow cluster costs the others nothing. A call
 * that cannot start (bad path, body too large) ends at once with its rc. */
struct fg_kube_conns {
    CURLM *multi; /* its connection cache is what is kept */
};

fg_kube_conns_t *fg_kube_conns_new(void) {
    pthread_once(&curl_once, curl_init);
    fg_kube_conns_t *k = fg_xcalloc(1, sizeof *k);
    k->multi = curl_multi_init();
    if (k->multi == NULL)
        abort(); /* out of memory */
    /* keep a connection to every member cluster, however few calls a run has */
    curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, (long)FG_KUBE_CONNS_MAX);
    return k;
}

void fg_kube_conns_free(fg_kube_conns_t *k) {
    if (k == NULL)
        return;
    curl_multi_cleanup(k->multi);
    free(k);
}

int fg_kube_request_all(fg_kube_call_t *calls, size_t n, long deadline_ms) {
    fg_kube_conns_t *k = fg_kube_conns_new();
    int rc = fg_kube_request_all_in(k, calls, n, deadline_ms);
    fg_kube_conns_free(k);
    return rc;
}

int fg_kube_request_all_in(fg_kube_conns_t *conns, fg_kube_call_t *calls, size_t n,
                           long deadline_ms) {
    int rc = FG_OK;
    xfer_t *xs = fg_xcalloc(n ? n : 1, sizeof *xs);
    CURLM *m = conns->multi;
    for (size_t i = 0; i < n; i++) {
        fg_kube_call_t *k = &calls[i];
        fg_kube_error_clear(&k->err);
        k->out = NULL;
        k->http_code = 0;
        k->rc = xfer_start(&xs[i], k->client, k->method, k->path, k->body, k->text, deadline_ms,
                           &k->err);
        if (k->rc == FG_OK && curl_multi_add_handle(m, xs[i].e) != CURLM_OK) {
            set_err(&k->err, FG_KUBE_REASON_TRANSPORT, "curl_multi_add_handle failed");
            k->rc = FG_EIO;
        }
    }
    int running = 1;
    while (running > 0) {
        if (curl_multi_perform(m, &running) != CURLM_OK ||
            (running > 0 && curl_multi_poll(m, NULL, 0, 100, NULL) != CURLM_OK)) {
            rc = FG_EIO;
            break;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            xfer_t *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            fg_kube_call_t *k = &calls[x - xs];
            CURLcode res = msg->data.result;
            curl_multi_remove_handle(m, msg->easy_handle);
            k->rc = xfer_finish(x, res, &k->out, &k->http_code, &k->err);
            if (k->done != NULL)
                k->done(k, k->done_ud);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (rc != FG_OK && calls[i].rc == FG_OK && calls[i].out == NULL) {
            set_err(&calls[i].err, FG_KUBE_REASON_TRANSPORT, "the transfer loop failed");
            calls[i].rc = FG_EIO;
        }
        if (xs[i].e != NULL)
            curl_multi_remove_handle(m, xs[i].e); /* harmless when already removed */
        xfer_free(&xs[i]);
    }
    free(xs);
    return rc;
}

void fg_kube_calls_clear(fg_kube_call_t *calls, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_decref(calls[i].out);
        calls[i].out = NULL;
    }
}

/* ---- watches in a loop ---------------------------------------------------- */

/* A loop is socket-driven (curl_multi_socket_action): curl tells it which sockets to watch and
 * when its next timer is due, the loop waits on its own epoll set, and only transfers whose
 * socket is ready (or whose timer is due) run. With a thousand log streams open, a line on one
 * costs that one transfer, not a pass over all of them (curl_multi_perform runs every handle
 * and polls each one's socket). Owned by the thread that runs it; only wakeup is thread-safe. */
struct fg_kube_loop {
    CURLM *multi;
    fg_kube_watch_t *head; /* watches in the loop */
    int ep;                /* epoll: the transfers' sockets, wake_fd and the caller's extra fd */
    int wake_fd;           /* eventfd: fg_kube_loop_wakeup */
    int extra_fd;          /* the caller's fd in ep (-1: none) */
    bool timer_set;        /* curl asked to be called back at timer_at_ns */
    uint64_t timer_at_ns;
};

struct fg_kube_watch {
    fg_kube_client_t *client;
    CURL *easy;
    char *url;
    fg_kube_watch_opts_t opts;
    fg_kube_watch_parser_t *parser;
    fg_kube_loop_t *loop; /* while in the loop */
    fg_kube_watch_t *prev, *next;
    bool started;
    long http_code;   /* 0 until the first body byte */
    fg_buf_t errbody; /* the body of a non-2xx answer */
    int stop_rc;      /* the parser's or the handler's failure */
    char *last_rv;
    char errbuf[CURL_ERROR_SIZE];
    fg_kube_get_done_cb on_answer; /* get mode: set, and on_event/on_done are unused */
    void *answer_ud;
    answer_t answer;         /* get mode: the buffered body */
    fg_kube_data_cb on_data; /* stream mode: set, and the parser is unused */
    bool headers_told;       /* stream mode: on_data had its len-0 call */
};

/* curl's socket callback: keep ep in step with what each transfer waits for. */
static int on_loop_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
    (void)e, (void)socketp;
    fg_kube_loop_t *l = userp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL); /* may be closed already: ignored */
        return 0;
    }
    struct epoll_event ev = {.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                                       ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
                             .data.fd = fd};
    if (epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
        epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

/* curl's timer callback: when to call it with CURL_SOCKET_TIMEOUT (-1: never). */
static int on_loop_timer(CURLM *m, long timeout_ms, void *userp) {
    (void)m;
    fg_kube_loop_t *l = userp;
    l->timer_set = timeout_ms >= 0;
    l->timer_at_ns = fg_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    return 0;
}

int fg_kube_loop_new(fg_kube_loop_t **out) {
    fg_kube_loop_t *l = fg_xcalloc(1, sizeof *l);
    pthread_once(&curl_once, curl_init);
    l->extra_fd = -1;
    l->multi = curl_multi_init();
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l->wake_fd};
    if (l->multi == NULL || l->ep < 0 || l->wake_fd < 0 ||
        epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake_fd, &ev) != 0) {
        if (l->multi)
            curl_multi_cleanup(l->multi);
        if (l->ep >= 0)
            close(l->ep);
        if (l->wake_fd >= 0)
            close(l->wake_fd);
        free(l);
        return FG_EIO;
    }
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, on_loop_socket);
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, on_loop_timer);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
    *out = l;
    return FG_OK;
}

static void unlink_watch(fg_kube_watch_t *w) {
    fg_kube_loop_t *l = w->loop;
    curl_multi_remove_handle(l->multi, w->easy);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->loop = NULL;
}

void fg_kube_loop_free(fg_kube_loop_t *loop) {
    if (loop == NULL)
        return;
    while (loop->head != NULL)
        unlink_watch(loop->head);
    curl_multi_cleanup(loop->multi); /* may still call on_loop_socket: ep closes after */
    close(loop->ep);
    close(loop->wake_fd);
    free(loop);
}

void fg_kube_loop_wakeup(fg_kube_loop_t *loop) {
    uint64_t one = 1;
    if (write(loop->wake_fd, &one, sizeof one) < 0) {
        /* the counter is at its maximum: the loop wakes anyway */
    }
}

static int watch_event(void *ud, const fg_kube_event_t *ev) {
    fg_kube_watch_t *w = ud;
    if (ev->resource_version != NULL) {
        free(w->last_rv);
        w->last_rv = fg_xstrdup(ev->resource_version);
    }
    return w->opts.on_event(w->opts.ud, ev);
}

static size_t stream_body(fg_kube_watch_t *w, const char *data, size_t len) {
    int rc = w->on_data(w->opts.ud, data, len);
    if (rc == FG_OK)
        return len;
    if (rc == FG_EAGAIN)
        return CURL_WRITEFUNC_PAUSE; /* curl keeps the bytes and offers them again */
    w->stop_rc = rc;
    return 0;
}

/* Stream mode: the blank line that ends a final (non-1xx) header block tells on_data that the
 * answer is a 2xx, before any body byte. */
static size_t stream_header(char *data, size_t size, size_t n, void *ud) {
    fg_kube_watch_t *w = ud;
    size_t len = size * n;
    if (w->headers_told || !(len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')))
        return len;
    long code = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200)
        return len; /* 100 Continue and the like: the real answer follows */
    w->headers_told = true;
    w->http_code = code;
    if (code > 299)
        return len;
    int rc = w->on_data(w->opts.ud, "", 0);
    if (rc != FG_OK) {
        w->stop_rc = rc;
        return 0;
    }
    return len;
}

static size_t watch_body(char *data, size_t size, size_t n, void *ud) {
    fg_kube_watch_t *w = ud;
    size_t len = size * n;
    if (w->on_answer != NULL)
        return on_body(data, size, n, &w->answer);
    if (w->http_code == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->http_code);
    if (w->http_code < 200 || w->http_code > 299) {
        fg_buf_append(&w->errbody, data, len); /* past the bound, the rest is dropped */
        return len;
    }
    if (w->on_data != NULL)
        return stream_body(w, data, len);
    int rc = fg_kube_watch_parser_feed(w->parser, data, len);
    if (rc != FG_OK) {
        w->stop_rc = rc;
        return 0; /* aborts the transfer */
    }
    return len;
}

int fg_kube_watch_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                      const fg_kube_watch_opts_t *opts) {
    if (c == NULL || opts == NULL || opts->on_event == NULL || opts->on_done == NULL ||
        !path_ok(path))
        return FG_EINVAL;
    fg_kube_watch_t *w = fg_xcalloc(1, sizeof *w);
    w->client = c;
    w->opts = *opts;
    w->url = fg_xasprintf("%s%s", c->base_url, path);
    fg_buf_init(&w->errbody, MAX_ERROR_BODY);
    fg_kube_watch_parser_new(&w->parser, c->max_event, watch_event, w);
    fg_kube_watch_parser_unread_annotation(w->parser, opts->unread_annotation);
    w->easy = curl_easy_init();
    if (w->easy == NULL)
        abort(); /* out of memory */
    setup_easy(c, w->easy, w->url, c->hdr_get, w->errbuf);
    curl_easy_setopt(w->easy, CURLOPT_PRIVATE, w);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_body);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, opts->deadline_ms > 0 ? opts->deadline_ms : 0L);
    if (opts->idle_timeout_s > 0) {
        curl_easy_setopt(w->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(w->easy, CURLOPT_LOW_SPEED_TIME, opts->idle_timeout_s);
    }
    *out = w;
    return FG_OK;
}

int fg_kube_stream_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                       fg_kube_data_cb on_data, fg_kube_watch_done_cb on_done, void *ud) {
    if (c == NULL || on_data == NULL || on_done == NULL || !path_ok(path))
        return FG_EINVAL;
    fg_kube_watch_t *w = fg_xcalloc(1, sizeof *w);
    w->client = c;
    w->on_data = on_data;
    w->opts.on_done = on_done;
    w->opts.ud = ud;
    w->url = fg_xasprintf("%s%s", c->base_url, path);
    fg_buf_init(&w->errbody, MAX_ERROR_BODY);
    w->easy = curl_easy_init();
    if (w->easy == NULL)
        abort(); /* out of memory */
    setup_easy(c, w->easy, w->url, c->hdr_get, w->errbuf);
    curl_easy_setopt(w->easy, CURLOPT_PRIVATE, w);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_body);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, stream_header);
    curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, 0L);
    *out = w;
    return FG_OK;
}

void fg_kube_stream_resume(fg_kube_watch_t *w) {
    curl_easy_pause(w->easy, CURLPAUSE_CONT);
}

int fg_kube_get_new(fg_kube_watch_t **out, fg_kube_client_t *c, const char *path,
                    fg_kube_get_done_cb on_done, void *ud) {
    if (c == NULL || on_done == NULL || !path_ok(path))
        return FG_EINVAL;
    fg_kube_watch_t *w = fg_xcalloc(1, sizeof *w);
    w->client = c;
    w->on_answer = on_done;
    w->answer_ud = ud;
    w->answer.retry_after_s = -1;
    fg_buf_init(&w->answer.body, c->max_response);
    w->url = fg_xasprintf("%s%s", c->base_url, path);
    fg_buf_init(&w->errbody, MAX_ERROR_BODY);
    w->easy = curl_easy_init();
    if (w->easy == NULL)
        abort(); /* out of memory */
    setup_easy(c, w->easy, w->url, c->hdr_get, w->errbuf);
    curl_easy_setopt(w->easy, CURLOPT_PRIVATE, w);
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(w->easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_body);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, &w->answer);
    *out = w;
    return FG_OK;
}

int fg_kube_loop_add(fg_kube_loop_t *loop, fg_kube_watch_t *w) {
    if (loop == NULL || w == NULL || w->started)
        return FG_EINVAL;
    if (curl_multi_add_handle(loop->multi, w->easy) != CURLM_OK)
        return FG_EIO;
    w->started = true;
    w->loop = loop;
    w->next = loop->head;
    if (loop->head != NULL)
        loop->head->prev = w;
    loop->head = w;
    return FG_OK;
}

void fg_kube_watch_free(fg_kube_watch_t *w) {
    if (w == NULL)
        return;
    if (w->loop != NULL)
        unlink_watch(w);
    curl_easy_cleanup(w->easy);
    fg_kube_watch_parser_free(w->parser);
    fg_buf_free(&w->errbody);
    fg_buf_free(&w->answer.body);
    free(w->url);
    free(w->last_rv);
    free(w);
}

const char *fg_kube_watch_last_rv(const fg_kube_watch_t *w) {
    return w->last_rv;
}

/* The outcome of a finished GET: FG_OK for a 2xx answer (its bytes stay in w->answer.body),
 * else the failure with err filled, as fg_kube_request reports it. */
static int get_outcome(fg_kube_watch_t *w, CURLcode res, fg_kube_error_t *err) {
    fg_kube_error_clear(err);
    long code = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
    if (res == CURLE_WRITE_ERROR && w->answer.overflow) {
        set_err(err, FG_KUBE_REASON_TOO_LARGE, "answer larger than %zu bytes",
                w->client->max_response);
        err->http_code = code;
        return FG_ETOOBIG;
    }
    if (res != CURLE_OK) {
        int rc = transfer_error(res, w->errbuf, err);
        err->http_code = code;
        return rc;
    }
    fg_buf_t *b = &w->answer.body;
    if (code < 200 || code > 299) {
        fg_kube_error_from_body(code, b->data, b->len, err);
        if (err->retry_after_s < 0)
            err->retry_after_s = w->answer.retry_after_s;
        return FG_ERR;
    }
    return FG_OK;
}

/* The outcome of a finished watch transfer. */
static int watch_outcome(fg_kube_watch_t *w, CURLcode res, fg_kube_error_t *err) {
    fg_kube_error_clear(err);
    if (w->stop_rc != FG_OK && w->on_data != NULL) {
        set_err(err, FG_KUBE_REASON_TRANSPORT, "the stream was stopped by its reader");
        return w->stop_rc;
    }
    if (w->stop_rc != FG_OK) {
        *err = *fg_kube_watch_parser_error(w->parser);
        return w->stop_rc;
    }
    if (w->http_code == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->http_code);
    if (res != CURLE_OK) {
        int rc = transfer_error(res, w->errbuf, err);
        err->http_code = w->http_code;
        return rc;
    }
    if (w->http_code < 200 || w->http_code > 299) {
        fg_kube_error_from_body(w->http_code, w->errbody.data, w->errbody.len, err);
        return FG_ERR;
    }
    if (w->on_data != NULL)
        return FG_OK;
    int rc = fg_kube_watch_parser_finish(w->parser);
    if (rc != FG_OK)
        *err = *fg_kube_watch_parser_error(w->parser);
    return rc;
}

int fg_kube_loop_run(fg_kube_loop_t *loop, int timeout_ms, int *running) {
    return fg_kube_loop_run_fd(loop, timeout_ms, -1, running);
}

/* Waits on ep at most timeout_ms (less when curl's timer is due sooner), then hands curl the
 * ready sockets and, when due, its timer. */
static int loop_wait_and_act(fg_kube_loop_t *loop, int timeout_ms, int extra_fd) {
    if (extra_fd != loop->extra_fd) {
        if (loop->extra_fd >= 0)
            epoll_ctl(loop->ep, EPOLL_CTL_DEL, loop->extra_fd, NULL);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = extra_fd};
        if (extra_fd >= 0 && epoll_ctl(loop->ep, EPOLL_CTL_ADD, extra_fd, &ev) != 0)
            return FG_EIO;
        loop->extra_fd = extra_fd;
    }
    int wait = timeout_ms;
    if (loop->timer_set) {
        uint64_t now = fg_now_ns();
        uint64_t due = loop->timer_at_ns > now ? (loop->timer_at_ns - now + 999999u) / 1000000u : 0;
        if (due < (uint64_t)wait)
            wait = (int)due;
    }
    struct epoll_event evs[256];
    int n = epoll_wait(loop->ep, evs, 256, wait);
    if (n < 0 && errno != EINTR)
        return FG_EIO;
    int running = 0;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        if (fd == loop->wake_fd) {
            uint64_t v;
            if (read(fd, &v, sizeof v) < 0) {
                /* nothing to take: another read got it */
            }
            continue;
        }
        if (fd == loop->extra_fd)
            continue; /* the caller's: it looks at it itself */
        int flags = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                    ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                    ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        if (curl_multi_socket_action(loop->multi, fd, flags, &running) != CURLM_OK)
            return FG_EIO;
    }
    if (loop->timer_set && fg_now_ns() >= loop->timer_at_ns) {
        loop->timer_set = false;
        if (curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
            return FG_EIO;
    }
    return FG_OK;
}

int fg_kube_loop_run_fd(fg_kube_loop_t *loop, int timeout_ms, int extra_fd, int *running) {
    /* Wait first, then move bytes: the callbacks run last, so what they hand the caller (events
     * to write out) is dealt with as soon as this returns, not after another wait. A transfer
     * added since the last call has its timer due now, so the wait does not delay its start. */
    if (loop_wait_and_act(loop, timeout_ms, extra_fd) != FG_OK)
        return FG_EIO;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(loop->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        fg_kube_watch_t *w = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&w);
        CURLcode res = msg->data.result;
        fg_kube_error_t err;
        if (w->on_answer != NULL) {
            int grc = get_outcome(w, res, &err);
            size_t len = 0;
            char *body = grc == FG_OK ? fg_buf_steal(&w->answer.body, &len) : NULL;
            fg_buf_free(&w->answer.body);
            unlink_watch(w);
            w->on_answer(w->answer_ud, w, grc, body, len, &err);
            continue;
        }
        int rc = watch_outcome(w, res, &err);
        unlink_watch(w);
        /* the callback may free w: nothing touches it afterwards */
        w->opts.on_done(w->opts.ud, w, rc, &err);
    }
    if (running != NULL) {
        int count = 0;
        for (fg_kube_watch_t *w = loop->head; w != NULL; w = w->next)
            count++;
        *running = count;
    }
    return FG_OK;
}

/* ---- upgraded connections -------------------------------------------------- */

struct fg_kube_conn {
    CURL *easy;
    int fd;
    char *early; /* bytes after the 101 answer's headers, returned first */
    size_t early_len, early_at;
};

#define UPGRADE_HEAD_MAX 8192

/* Two hex digits as a byte (a request id's). */
static void hex_byte(const char *s, int64_t *v) {
    static const char digits[] = "0123456789abcdef";
    const char *hi = strchr(digits, s[0]), *lo = strchr(digits, s[1]);
    *v = (hi && s[0] ? (hi - digits) * 16 : 0) + (lo && s[1] ? lo - digits : 0);
}

static int wait_fd(int fd, short events, uint64_t deadline_ns) {
    uint64_t now = fg_now_ns();
    if (now >= deadline_ns)
        return FG_ETIMEOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int ms = (int)((deadline_ns - now) / 1000000u) + 1;
    return poll(&p, 1, ms) > 0 ? FG_OK : FG_ETIMEOUT;
}

/* Sends the whole request text before the deadline. */
static int send_all(fg_kube_conn_t *k, const char *data, size_t len, uint64_t deadline_ns) {
    while (len > 0) {
        size_t n = 0;
        CURLcode r = curl_easy_send(k->easy, data, len, &n);
        if (r == CURLE_AGAIN) {
            if (wait_fd(k->fd, POLLOUT, deadline_ns) != FG_OK)
                return FG_ETIMEOUT;
            continue;
        }
        if (r != CURLE_OK)
            return FG_EIO;
        data += n;
        len -= n;
    }
    return FG_OK;
}

/* The value of header name in the head block (case-insensitive), copied into out; false when
 * absent. */
static bool head_value(const char *head, const char *name, char *out, size_t outlen) {
    size_t nl = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l != NULL; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            h += nl + 1;
            while (*h == ' ' || *h == '\t')
                h++;
            size_t vl = strcspn(h, "\r\n");
            while (vl > 0 && (h[vl - 1] == ' ' || h[vl - 1] == '\t'))
                vl--;
            if (vl >= outlen)
                vl = outlen - 1;
            memcpy(out, h, vl);
            out[vl] = '\0';
            return true;
        }
    }
    return false;
}

/* Reads the answer's head (and what follows it) before the deadline. */
static int read_head(fg_kube_conn_t *k, fg_buf_t *b, size_t *head_len, uint64_t deadline_ns) {
    char tmp[4096];
    for (;;) {
        size_t n = 0;
        CURLcode r = curl_easy_recv(k->easy, tmp, sizeof tmp, &n);
        if (r == CURLE_AGAIN) {
            if (wait_fd(k->fd, POLLIN, deadline_ns) != FG_OK)
                return FG_ETIMEOUT;
            continue;
        }
        if (r != CURLE_OK || n == 0)
            return FG_EIO;
        if (fg_buf_append(b, tmp, n) != FG_OK)
            return FG_EIO;
        const char *end = memmem(b->data, b->len, "\r\n\r\n", 4);
        if (end != NULL) {
            *head_len = (size_t)(end - b->data) + 4;
            return FG_OK;
        }
    }
}

static bool offered(const char *protocols, const char *p) {
    size_t pl = strlen(p);
    for (const char *s = protocols; *s;) {
        while (*s == ' ' || *s == ',')
            s++;
        size_t n = strcspn(s, ", ");
        if (n == pl && n > 0 && strncmp(s, p, n) == 0)
            return true;
        s += n;
    }
    return false;
}

int fg_kube_upgrade(fg_kube_client_t *c, const char *path, const char *protocols, long timeout_ms,
                    fg_kube_conn_t **out, char *chosen, fg_kube_error_t *err) {
    int rc = FG_OK;
    char *url = NULL, *req = NULL, errbuf[CURL_ERROR_SIZE] = "";
    fg_buf_t b;
    fg_buf_init(&b, UPGRADE_HEAD_MAX + 65536);
    fg_kube_error_clear(err);
    fg_kube_conn_t *k = fg_xcalloc(1, sizeof *k);
    k->fd = -1;
    uint64_t deadline = fg_now_ns() + (uint64_t)timeout_ms * 1000000u;
    if (!path_ok(path) || strpbrk(protocols, "\r\n") != NULL) {
        set_err(err, "BadRequest", "invalid path or subprotocols");
        rc = FG_EINVAL;
        goto out;
    }
    pthread_once(&curl_once, curl_init);
    k->easy = curl_easy_init();
    if (k->easy == NULL)
        abort(); /* out of memory */
    url = fg_xasprintf("%s%s", c->base_url, path);
    setup_easy(c, k->easy, url, NULL, errbuf);
    curl_easy_setopt(k->easy, CURLOPT_SHARE, NULL); /* this connection is never reused */
    curl_easy_setopt(k->easy, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(k->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode res = curl_easy_perform(k->easy);
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (res == CURLE_OK)
        curl_easy_getinfo(k->easy, CURLINFO_ACTIVESOCKET, &sock);
    if (res != CURLE_OK || sock == CURL_SOCKET_BAD) {
        rc = transfer_error(res != CURLE_OK ? res : CURLE_COULDNT_CONNECT, errbuf, err);
        goto out;
    }
    k->fd = (int)sock;
    /* A fresh random key (a request id's 16 random bytes); the cluster proves it speaks
     * WebSocket by answering its accept value. */
    char hex[FG_REQUEST_ID_MAX + 1], key[32], accept[32], got[64];
    uint8_t raw[16];
    fg_request_id_generate(hex);
    for (int i = 0; i < 16; i++) {
        int64_t v = 0;
        hex_byte(hex + 2 * i, &v);
        raw[i] = (uint8_t)v;
    }
    fg_ws_key_from(raw, key);
    fg_ws_accept(key, accept);
    const char *host = strstr(c->base_url, "://");
    host = host ? host + 3 : c->base_url;
    size_t hl = strcspn(host, "/");
    fg_buf_t rq;
    fg_buf_init(&rq, 16384);
    fg_buf_appendf(&rq,
                   "GET %s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: fleetgate/" FG_VERSION
                   "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: "
                   "13\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Protocol: %s\r\n",
                   path, (int)hl, host, key, protocols);
    for (struct curl_slist *h = c->hdr_get; h != NULL; h = h->next)
        if (strncasecmp(h->data, "Authorization:", 14) == 0)
            fg_buf_appendf(&rq, "%s\r\n", h->data);
    fg_buf_append(&rq, "\r\n", 2);
    size_t rlen = 0;
    req = fg_buf_steal(&rq, &rlen);
    fg_buf_free(&rq);
    size_t head_len = 0;
    rc = send_all(k, req, rlen, deadline);
    if (rc == FG_OK)
        rc = read_head(k, &b, &head_len, deadline);
    if (rc != FG_OK) {
        set_err(err, rc == FG_ETIMEOUT ? FG_KUBE_REASON_TIMEOUT : FG_KUBE_REASON_TRANSPORT,
                "the exec upgrade got no answer");
        goto out;
    }
    char *head = fg_xstrndup(b.data, head_len);
    int code = 0;
    if (strncmp(head, "HTTP/1.1 ", 9) == 0)
        code = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    if (code != 101) {
        fg_kube_error_from_body(code, b.data + head_len, b.len - head_len, err);
        free(head);
        rc = code >= 400 ? FG_ERR : FG_EIO;
        goto out;
    }
    bool ok = head_value(head, "Sec-WebSocket-Accept", got, sizeof got) &&
              strcmp(got, accept) == 0 && head_value(head, "Sec-WebSocket-Protocol", chosen, 64) &&
              offered(protocols, chosen);
    free(head);
    if (!ok) {
        set_err(err, FG_KUBE_REASON_BAD_RESPONSE,
                "the cluster's 101 answer has a wrong accept value or subprotocol");
        rc = FG_EIO;
        goto out;
    }
    if (b.len > head_len) {
        k->early_len = b.len - head_len;
        k->early = fg_xmalloc(k->early_len);
        memcpy(k->early, b.data + head_len, k->early_len);
    }
out:
    fg_buf_free(&b);
    free(url);
    if (req != NULL) {
        explicit_bzero(req, strlen(req)); /* it held the cluster's token */
        free(req);
    }
    if (rc != FG_OK) {
        fg_kube_conn_free(k);
        return rc;
    }
    *out = k;
    return FG_OK;
}

int fg_kube_conn_fd(const fg_kube_conn_t *k) {
    return k->fd;
}

int fg_kube_conn_send(fg_kube_conn_t *k, const void *data, size_t len, size_t *n) {
    *n = 0;
    CURLcode r = curl_easy_send(k->easy, data, len, n);
    if (r == CURLE_AGAIN)
        return FG_EAGAIN;
    return r == CURLE_OK ? FG_OK : FG_EIO;
}

int fg_kube_conn_recv(fg_kube_conn_t *k, void *buf, size_t len, size_t *n) {
    *n = 0;
    if (k->early_at < k->early_len) {
        size_t take = k->early_len - k->early_at < len ? k->early_len - k->early_at : len;
        memcpy(buf, k->early + k->early_at, take);
        k->early_at += take;
        *n = take;
        return FG_OK;
    }
    CURLcode r = curl_easy_recv(k->easy, buf, len, n);
    if (r == CURLE_AGAIN)
        return FG_EAGAIN;
    return r == CURLE_OK ? FG_OK : FG_EIO;
}

void fg_kube_conn_free(fg_kube_conn_t *k) {
    if (k == NULL)
        return;
    if (k->easy != NULL)
        curl_easy_cleanup(k->easy);
    free(k->early);
    free(k);
}
