/* Unit tests of the Kubernetes client (kube/client.c) against a canned API server: a
 * libmicrohttpd daemon on 127.0.0.1, over plain http and over https with a certificate made
 * by the test (OpenSSL). Covers requests and their methods, connection reuse, Status errors,
 * bad answers, bounds, deadlines, redirects, the bearer token, TLS verification, and watches
 * driven by fg_kube_loop_t. */
#include "fleetgate/kube.h"
#include "testmain.h"

#include <check.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN "s3cret-token.abc"

/* ---- the canned server ------------------------------------------------------ */

typedef struct {
    struct MHD_Daemon *d;
    uint16_t port;
    int connections; /* TCP connections accepted */
    char last_auth[128];
    pthread_mutex_t lock;
} server_t;

static volatile int stopping;

typedef struct {
    fg_buf_t body;
} req_t;

static const char multi_events[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"10\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"11\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"12\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":\"13\","
    "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n";

typedef struct {
    const char *data;
    size_t len, off;
    size_t step; /* bytes per call, to cut events across chunks */
    bool hang;   /* after the data, send a space every 50 ms until stopped */
} stream_t;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_t *s = cls;
    (void)pos;
    if (s->off < s->len) {
        size_t n = s->len - s->off;
        if (n > s->step)
            n = s->step;
        if (n > max)
            n = max;
        memcpy(buf, s->data + s->off, n);
        s->off += n;
        return (ssize_t)n;
    }
    if (!s->hang || stopping)
        return MHD_CONTENT_READER_END_OF_STREAM;
    usleep(50000);
    buf[0] = ' ';
    return 1;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *body,
                             const char *extra_header, const char *extra_value) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (extra_header != NULL)
        MHD_add_response_header(r, extra_header, extra_value);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_stream(struct MHD_Connection *conn, const char *data, size_t step,
                                    bool hang) {
    stream_t *s = fg_xcalloc(1, sizeof *s);
    s->data = data;
    s->len = strlen(data);
    s->step = step;
    s->hang = hang;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_reader, s, free);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static const char not_found[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"pods \\\"p\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":"
    "\"p\",\"kind\":\"pods\"},\"code\":404}";
static const char too_many[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"slow down\",\"reason\":\"TooManyRequests\",\"code\":429}";
static const char gone[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"too old resource version: 1 (3171407)\",\"reason\":\"Expired\",\"code\":410}";
static const char error_event[] =
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (3171407)\","
    "\"reason\":\"Expired\",\"code\":410}}\n";
static const char garbage_stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"5\"}}}\n"
    "<html>upstream reset</html>\n";

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls) {
    server_t *srv = cls;
    (void)version;
    if (*con_cls == NULL) {
        req_t *r = fg_xcalloc(1, sizeof *r);
        fg_buf_init(&r->body, 1 << 20);
        *con_cls = r;
        return MHD_YES;
    }
    req_t *r = *con_cls;
    if (*upload_size > 0) {
        fg_buf_append(&r->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    pthread_mutex_lock(&srv->lock);
    snprintf(srv->last_auth, sizeof srv->last_auth, "%s", auth ? auth : "");
    pthread_mutex_unlock(&srv->lock);
    if (strcmp(url, "/api/v1/namespaces/a/pods/p") == 0)
        return reply(conn, 200,
                     "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\","
                     "\"namespace\":\"a\",\"resourceVersion\":\"5\"}}",
                     NULL, NULL);
    if (strcmp(url, "/notfound") == 0)
        return reply(conn, 404, not_found, NULL, NULL);
    if (strcmp(url, "/retry") == 0)
        return reply(conn, 429, too_many, "Retry-After", "7");
    if (strcmp(url, "/html") == 0)
        return reply(conn, 502, "<html><body>Bad Gateway</body></html>", NULL, NULL);
    if (strcmp(url, "/notjson") == 0)
        return reply(conn, 200, "hello", NULL, NULL);
    if (strcmp(url, "/array") == 0)
        return reply(conn, 200, "[1,2]", NULL, NULL);
    if (strcmp(url, "/redirect") == 0)
        return reply(conn, 302, "{}", "Location", "http://127.0.0.1:1/stolen");
    if (strcmp(url, "/big") == 0) {
        static char big[20000];
        memset(big, ' ', sizeof big - 3);
        big[0] = '{';
        big[sizeof big - 3] = '}';
        big[sizeof big - 2] = '\0';
        return reply(conn, 200, big, NULL, NULL);
    }
    if (strcmp(url, "/slow") == 0) {
        usleep(1500000);
        return reply(conn, 200, "{}", NULL, NULL);
    }
    if (strcmp(url, "/echo") == 0) {
        const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
        json_t *body = NULL;
        char err[64];
        if (r->body.len > 0)
            fg_json_load(r->body.data, r->body.len, &body, err, sizeof err);
        json_t *o = json_pack("{s:s,s:s,s:o?}", "method", method, "contentType", ct ? ct : "",
                              "body", body);
        char *text = fg_json_dumps(o, NULL);
        enum MHD_Result ret = reply(conn, 200, text, NULL, NULL);
        free(text);
        json_decref(o);
        return ret;
    }
    if (strcmp(url, "/watch") == 0)
        return reply_stream(conn, multi_events, 37, false);
    if (strcmp(url, "/watch-garbage") == 0)
        return reply_stream(conn, garbage_stream, 1000, false);
    if (strcmp(url, "/watch-error-event") == 0)
        return reply_stream(conn, error_event, 1000, false);
    if (strcmp(url, "/watch-truncated") == 0)
        return reply_stream(conn, "{\"type\":\"ADDED\",\"object\":{\"meta", 1000, false);
    if (strcmp(url, "/watch-hang") == 0)
        return reply_stream(conn, multi_events, 1000, true);
    if (strcmp(url, "/watch-410") == 0)
        return reply(conn, 410, gone, NULL, NULL);
    return reply(conn, 404, not_found, NULL, NULL);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)conn, (void)toe;
    req_t *r = *con_cls;
    if (r != NULL) {
        fg_buf_free(&r->body);
        free(r);
        *con_cls = NULL;
    }
}

static void notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe) {
    server_t *srv = cls;
    (void)conn, (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        pthread_mutex_lock(&srv->lock);
        srv->connections++;
        pthread_mutex_unlock(&srv->lock);
    }
}

/* GnuTLS's complaint when a client refuses the certificate is expected here: not printed. */
static void quiet_log(void *cls, const char *fmt, va_list ap) {
    (void)cls, (void)fmt, (void)ap;
}

static void server_start(server_t *srv, const char *key_pem, const char *cert_pem) {
    memset(srv, 0, sizeof *srv);
    pthread_mutex_init(&srv->lock, NULL);
    stopping = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (key_pem != NULL)
        flags |= MHD_USE_TLS;
    if (key_pem != NULL)
        srv->d = MHD_start_daemon(
            flags, 0, NULL, NULL, handler, srv, MHD_OPTION_SOCK_ADDR, &sa,
            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
            notify_connection, srv, MHD_OPTION_EXTERNAL_LOGGER, quiet_log, NULL,
            MHD_OPTION_HTTPS_MEM_KEY, key_pem, MHD_OPTION_HTTPS_MEM_CERT, cert_pem, MHD_OPTION_END);
    else
        srv->d =
            MHD_start_daemon(flags, 0, NULL, NULL, handler, srv, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                             MHD_OPTION_NOTIFY_CONNECTION, notify_connection, srv, MHD_OPTION_END);
    ck_assert_ptr_nonnull(srv->d);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info->port;
}

static void server_stop(server_t *srv) {
    stopping = 1;
    MHD_stop_daemon(srv->d);
    pthread_mutex_destroy(&srv->lock);
}

/* ---- a self-signed certificate for 127.0.0.1 --------------------------------- */

typedef struct {
    char *key_pem, *cert_pem;
    char ca_path[64];
} tls_t;

static char *pem_of(int (*write)(BIO *, void *), void *obj) {
    BIO *b = BIO_new(BIO_s_mem());
    ck_assert_int_eq(write(b, obj), 1);
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *s = fg_xstrndup(p, (size_t)n);
    BIO_free(b);
    return s;
}

static int write_key(BIO *b, void *k) {
    return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

static int write_cert(BIO *b, void *x) {
    return PEM_write_bio_X509(b, x);
}

static void add_ext(X509 *x, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    ck_assert_ptr_nonnull(ext);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
}

static void tls_make(tls_t *t) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    ck_assert_ptr_nonnull(key);
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"kube-test", -1, -1,
                               0);
    X509_set_issuer_name(x, name);
    add_ext(x, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(x, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    ck_assert_int_gt(X509_sign(x, key, EVP_sha256()), 0);
    t->key_pem = pem_of(write_key, key);
    t->cert_pem = pem_of(write_cert, x);
    snprintf(t->ca_path, sizeof t->ca_path, "/tmp/fg-kube-ca-XXXXXX");
    int fd = mkstemp(t->ca_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, t->cert_pem, strlen(t->cert_pem)), (ssize_t)strlen(t->cert_pem));
    close(fd);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void tls_free(tls_t *t) {
    unlink(t->ca_path);
    free(t->key_pem);
    free(t->cert_pem);
}

static char *write_temp(const char *content) {
    char *path = fg_xstrdup("/tmp/fg-kube-token-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    return path;
}

/* ---- helpers ------------------------------------------------------------------ */

static fg_kube_client_t *http_client(const server_t *srv, const fg_kube_client_opts_t *opts) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", srv->port);
    fg_cluster_conf_t conf = {.name = "c1", .zone = "z1", .url = url};
    fg_kube_client_t *c = NULL;
    fg_kube_error_t err;
    ck_assert_int_eq(fg_kube_client_new(&c, &conf, opts, &err), FG_OK);
    return c;
}

/* ---- requests over http -------------------------------------------------------- */

START_TEST(get_returns_object_and_reuses_one_connection) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    fg_kube_client_t *c = http_client(&srv, NULL);
    for (int i = 0; i < 5; i++) {
        json_t *o = NULL;
        long code = 0;
        fg_kube_error_t err;
        ck_assert_int_eq(
            fg_kube_request(c, FG_KUBE_GET, "/api/v1/namespaces/a/pods/p", NULL, &o, &code, &err),
            FG_OK);
        ck_assert_int_eq(code, 200);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                         "p");
        json_decref(o);
    }
    ck_assert_int_eq(srv.connections, 1);
    ck_assert_str_eq(fg_kube_client_name(c), "c1");
    fg_kube_client_free(c);
    server_stop(&srv);
}
END_TEST

static const struct {
    const char *path;
    int rc;
    long code;
    const char *reason;
    const char *message_has;
    int64_t retry_after;
} failures[] = {
    {"/notfound", FG_ERR, 404, "NotFound", "pods \"p\" not found", -1},
    {"/retry", FG_ERR, 429, "TooManyRequests", "slow down", 7},
    {"/html", FG_ERR, 502, FG_KUBE_REASON_BAD_RESPONSE, "<html><body>Bad Gateway", -1},
    {"/notjson", FG_EINVAL, 200, FG_KUBE_REASON_BAD_RESPONSE, "not a JSON object", -1},
    {"/array", FG_EINVAL, 200, FG_KUBE_REASON_BAD_RESPONSE, "not a JSON object", -1},
    {"/big", FG_ETOOBIG, 200, FG_KUBE_REASON_TOO_LARGE, "answer larger than 4096 bytes", -1},
    {"/slow", FG_ETIMEOUT, 0, FG_KUBE_REASON_TIMEOUT, "deadline passed", -1},
    {"/redirect", FG_ERR, 302, FG_KUBE_REASON_BAD_RESPONSE, "HTTP 302", -1},
    {"relative", FG_EINVAL, 0, "BadRequest", "invalid method or path", -1},
    {"/with space", FG_EINVAL, 0, "BadRequest", "invalid method or path", -1},
};

START_TEST(failures_become_errors) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    fg_kube_client_opts_t opts = {.timeout_ms = 300, .max_response_bytes = 4096};
    fg_kube_client_t *c = http_client(&srv, &opts);
    json_t *o = NULL;
    fg_kube_error_t err;
    int rc = fg_kube_request(c, FG_KUBE_GET, failures[_i].path, NULL, &o, NULL, &err);
    ck_assert_msg(rc == failures[_i].rc, "%s: rc %d", failures[_i].path, rc);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(err.http_code, failures[_i].code);
    ck_assert_str_eq(err.reason, failures[_i].reason);
    ck_assert_msg(strstr(err.message, failures[_i].message_has) != NULL, "%s: \"%s\"",
                  failures[_i].path, err.message);
    ck_assert_int_eq(err.retry_after_s, failures[_i].retry_after);
    fg_kube_client_free(c);
    server_stop(&srv);
}
END_TEST

START_TEST(methods_send_json_bodies) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    fg_kube_client_t *c = http_client(&srv, NULL);
    static const struct {
        fg_kube_method_t m;
        const char *name, *ct;
    } cases[] = {
        {FG_KUBE_POST, "POST", "application/json"},
        {FG_KUBE_PUT, "PUT", "application/json"},
        {FG_KUBE_PATCH, "PATCH", "application/merge-patch+json"},
        {FG_KUBE_DELETE, "DELETE", "application/json"},
    };
    json_t *body = json_pack("{s:{s:i}}", "spec", "replicas", 3);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *o = NULL;
        fg_kube_error_t err;
        ck_assert_int_eq(fg_kube_request(c, cases[i].m, "/echo", body, &o, NULL, &err), FG_OK);
        ck_assert_str_eq(json_string_value(json_object_get(o, "method")), cases[i].name);
        ck_assert_str_eq(json_string_value(json_object_get(o, "contentType")), cases[i].ct);
        ck_assert(json_equal(json_object_get(o, "body"), body));
        json_decref(o);
    }
    json_decref(body);
    fg_kube_client_free(c);
    server_stop(&srv);
}
END_TEST

START_TEST(oversize_request_body_refused_before_sending) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    fg_kube_client_opts_t opts = {.max_request_bytes = 100};
    fg_kube_client_t *c = http_client(&srv, &opts);
    char pad[200];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    json_t *body = json_pack("{s:s}", "pad", pad);
    json_t *o = NULL;
    fg_kube_error_t err;
    ck_assert_int_eq(fg_kube_request(c, FG_KUBE_POST, "/echo", body, &o, NULL, &err), FG_ETOOBIG);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_TOO_LARGE);
    ck_assert_int_eq(srv.connections, 0);
    json_decref(body);
    fg_kube_client_free(c);
    server_stop(&srv);
}
END_TEST

START_TEST(connection_refused_is_transport_error) {
    fg_cluster_conf_t conf = {.name = "c1", .url = "http://127.0.0.1:1"};
    fg_kube_client_t *c = NULL;
    fg_kube_error_t err;
    ck_assert_int_eq(fg_kube_client_new(&c, &conf, NULL, &err), FG_OK);
    json_t *o = NULL;
    ck_assert_int_eq(fg_kube_request(c, FG_KUBE_GET, "/api", NULL, &o, NULL, &err), FG_EIO);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_TRANSPORT);
    ck_assert_int_eq(err.http_code, 0);
    fg_kube_client_free(c);
}
END_TEST

/* ---- credentials and TLS ------------------------------------------------------------ */

START_TEST(client_config_refusals) {
    fg_kube_client_t *c = NULL;
    fg_kube_error_t err;
    char *tok = write_temp(TOKEN "\n");
    fg_cluster_conf_t plain = {.name = "c1", .url = "http://127.0.0.1:1", .token_file = tok};
    ck_assert_int_eq(fg_kube_client_new(&c, &plain, NULL, &err), FG_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "never sent over plain http"));
    fg_cluster_conf_t missing = {
        .name = "c1", .url = "https://127.0.0.1:1", .token_file = "/nonexistent/token"};
    ck_assert_int_eq(fg_kube_client_new(&c, &missing, NULL, &err), FG_ENOENT);
    char *empty = write_temp(" \n");
    fg_cluster_conf_t blank = {.name = "c1", .url = "https://127.0.0.1:1", .token_file = empty};
    ck_assert_int_eq(fg_kube_client_new(&c, &blank, NULL, &err), FG_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "empty"));
    char *spaced = write_temp("abc def\n");
    fg_cluster_conf_t inner = {.name = "c1", .url = "https://127.0.0.1:1", .token_file = spaced};
    ck_assert_int_eq(fg_kube_client_new(&c, &inner, NULL, &err), FG_EINVAL);
    fg_cluster_conf_t half = {
        .name = "c1", .url = "https://127.0.0.1:1", .client_cert_file = "/x.pem"};
    ck_assert_int_eq(fg_kube_client_new(&c, &half, NULL, &err), FG_EINVAL);
    fg_cluster_conf_t ftp = {.name = "c1", .url = "ftp://127.0.0.1"};
    ck_assert_int_eq(fg_kube_client_new(&c, &ftp, NULL, &err), FG_EINVAL);
    ck_assert_ptr_null(c);
    unlink(tok);
    unlink(empty);
    unlink(spaced);
    free(tok);
    free(empty);
    free(spaced);
}
END_TEST

START_TEST(https_with_ca_and_token) {
    tls_t t;
    tls_make(&t);
    server_t srv;
    server_start(&srv, t.key_pem, t.cert_pem);
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%u/", srv.port);
    char *tok = write_temp("\n" TOKEN "\n");
    fg_kube_error_t err;
    json_t *o = NULL;
    /* verified against the CA: works, and the token arrives trimmed */
    fg_cluster_conf_t conf = {.name = "c1", .url = url, .token_file = tok, .ca_file = t.ca_path};
    fg_kube_client_t *c = NULL;
    ck_assert_int_eq(fg_kube_client_new(&c, &conf, NULL, &err), FG_OK);
    ck_assert_int_eq(
        fg_kube_request(c, FG_KUBE_GET, "/api/v1/namespaces/a/pods/p", NULL, &o, NULL, &err),
        FG_OK);
    json_decref(o);
    o = NULL;
    ck_assert_str_eq(srv.last_auth, "Bearer " TOKEN);
    /* an error answer never echoes the token */
    ck_assert_int_eq(fg_kube_request(c, FG_KUBE_GET, "/notfound", NULL, &o, NULL, &err), FG_ERR);
    ck_assert_ptr_null(strstr(err.message, TOKEN));
    fg_kube_client_free(c);
    /* without the CA: the self-signed server is refused */
    fg_cluster_conf_t noca = {.name = "c1", .url = url, .token_file = tok};
    ck_assert_int_eq(fg_kube_client_new(&c, &noca, NULL, &err), FG_OK);
    ck_assert_int_eq(
        fg_kube_request(c, FG_KUBE_GET, "/api/v1/namespaces/a/pods/p", NULL, &o, NULL, &err),
        FG_EIO);
    ck_assert_str_eq(err.reason, FG_KUBE_REASON_TRANSPORT);
    ck_assert_ptr_null(strstr(err.message, TOKEN));
    fg_kube_client_free(c);
    /* insecure_skip_tls_verify, and only it, accepts an unverified server */
    fg_cluster_conf_t insecure = {
        .name = "c1", .url = url, .token_file = tok, .insecure_skip_tls_verify = true};
    ck_assert_int_eq(fg_kube_client_new(&c, &insecure, NULL, &err), FG_OK);
    ck_assert_int_eq(
        fg_kube_request(c, FG_KUBE_GET, "/api/v1/namespaces/a/pods/p", NULL, &o, NULL, &err),
        FG_OK);
    json_decref(o);
    fg_kube_client_free(c);
    server_stop(&srv);
    unlink(tok);
    free(tok);
    tls_free(&t);
}
END_TEST

/* ---- watches ------------------------------------------------------------------------ */

typedef struct {
    int events;
    fg_kube_event_type_t types[16];
    bool initial_end;
    long error_code;
    bool done;
    int rc;
    fg_kube_error_t err;
} watch_rec_t;

static int on_event(void *ud, const fg_kube_event_t *ev) {
    watch_rec_t *r = ud;
    if (r->events < 16)
        r->types[r->events] = ev->type;
    r->events++;
    if (ev->initial_events_end)
        r->initial_end = true;
    if (ev->error != NULL)
        r->error_code = ev->error->http_code;
    return FG_OK;
}

static void on_done(void *ud, fg_kube_watch_t *w, int rc, const fg_kube_error_t *err) {
    watch_rec_t *r = ud;
    (void)w;
    r->done = true;
    r->rc = rc;
    r->err = *err;
}

/* Runs one watch to its end (at most 5 s). */
static void run_watch(const server_t *srv, const char *path, long deadline_ms, watch_rec_t *r,
                      char *last_rv, size_t last_rv_len) {
    fg_kube_client_t *c = http_client(srv, NULL);
    fg_kube_loop_t *loop = NULL;
    fg_kube_watch_t *w = NULL;
    ck_assert_int_eq(fg_kube_loop_new(&loop), FG_OK);
    fg_kube_watch_opts_t opts = {
        .on_event = on_event, .on_done = on_done, .ud = r, .deadline_ms = deadline_ms};
    ck_assert_int_eq(fg_kube_watch_new(&w, c, path, &opts), FG_OK);
    ck_assert_int_eq(fg_kube_loop_add(loop, w), FG_OK);
    ck_assert_int_eq(fg_kube_loop_add(loop, w), FG_EINVAL);
    uint64_t end = fg_now_ns() + 5000000000ull;
    while (!r->done && fg_now_ns() < end)
        ck_assert_int_eq(fg_kube_loop_run(loop, 100, NULL), FG_OK);
    ck_assert(r->done);
    if (last_rv != NULL)
        snprintf(last_rv, last_rv_len, "%s",
                 fg_kube_watch_last_rv(w) ? fg_kube_watch_last_rv(w) : "");
    fg_kube_watch_free(w);
    fg_kube_loop_free(loop);
    fg_kube_client_free(c);
}

START_TEST(watch_delivers_events_cut_across_chunks) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    watch_rec_t r = {0};
    char rv[32];
    run_watch(&srv, "/watch", 0, &r, rv, sizeof rv);
    ck_assert_int_eq(r.rc, FG_OK);
    ck_assert_int_eq(r.events, 4);
    ck_assert_int_eq(r.types[0], FG_KUBE_EV_ADDED);
    ck_assert_int_eq(r.types[1], FG_KUBE_EV_MODIFIED);
    ck_assert_int_eq(r.types[2], FG_KUBE_EV_DELETED);
    ck_assert_int_eq(r.types[3], FG_KUBE_EV_BOOKMARK);
    ck_assert(r.initial_end);
    ck_assert_str_eq(rv, "13");
    server_stop(&srv);
}
END_TEST

static const struct {
    const char *path;
    long deadline_ms;
    int rc;
    const char *reason;
    long code;
    int events;
} watch_failures[] = {
    {"/watch-garbage", 0, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, 0, 1},
    {"/watch-truncated", 0, FG_EINVAL, FG_KUBE_REASON_BAD_STREAM, 0, 0},
    {"/watch-410", 0, FG_ERR, "Expired", 410, 0},
    {"/watch-hang", 400, FG_ETIMEOUT, FG_KUBE_REASON_TIMEOUT, 200, 4},
};

START_TEST(watch_failures_end_with_errors) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    watch_rec_t r = {0};
    run_watch(&srv, watch_failures[_i].path, watch_failures[_i].deadline_ms, &r, NULL, 0);
    ck_assert_msg(r.rc == watch_failures[_i].rc, "%s: rc %d (%s: %s)", watch_failures[_i].path,
                  r.rc, r.err.reason, r.err.message);
    ck_assert_str_eq(r.err.reason, watch_failures[_i].reason);
    ck_assert_int_eq(r.err.http_code, watch_failures[_i].code);
    ck_assert_int_eq(r.events, watch_failures[_i].events);
    ck_assert(fg_kube_error_is_gone(&r.err) == (watch_failures[_i].code == 410));
    server_stop(&srv);
}
END_TEST

START_TEST(watch_error_event_410_then_clean_end) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    watch_rec_t r = {0};
    run_watch(&srv, "/watch-error-event", 0, &r, NULL, 0);
    ck_assert_int_eq(r.rc, FG_OK);
    ck_assert_int_eq(r.events, 1);
    ck_assert_int_eq(r.types[0], FG_KUBE_EV_ERROR);
    ck_assert_int_eq(r.error_code, 410);
    server_stop(&srv);
}
END_TEST

/* A watch freed while it streams, and a loop freed with a watch in it: no leak, no callback. */
START_TEST(watch_freed_while_running) {
    server_t srv;
    server_start(&srv, NULL, NULL);
    fg_kube_client_t *c = http_client(&srv, NULL);
    fg_kube_loop_t *loop = NULL;
    fg_kube_watch_t *w1 = NULL, *w2 = NULL;
    watch_rec_t r1 = {0}, r2 = {0};
    ck_assert_int_eq(fg_kube_loop_new(&loop), FG_OK);
    fg_kube_watch_opts_t o1 = {.on_event = on_event, .on_done = on_done, .ud = &r1};
    fg_kube_watch_opts_t o2 = {.on_event = on_event, .on_done = on_done, .ud = &r2};
    ck_assert_int_eq(fg_kube_watch_new(&w1, c, "/watch-hang", &o1), FG_OK);
    ck_assert_int_eq(fg_kube_watch_new(&w2, c, "/watch-hang", &o2), FG_OK);
    ck_assert_int_eq(fg_kube_loop_add(loop, w1), FG_OK);
    ck_assert_int_eq(fg_kube_loop_add(loop, w2), FG_OK);
    int running = 0;
    uint64_t end = fg_now_ns() + 3000000000ull;
    while ((r1.events < 4 || r2.events < 4) && fg_now_ns() < end)
        ck_assert_int_eq(fg_kube_loop_run(loop, 50, &running), FG_OK);
    ck_assert_int_eq(running, 2);
    fg_kube_watch_free(w1);
    ck_assert_int_eq(fg_kube_loop_run(loop, 10, &running), FG_OK);
    ck_assert_int_eq(running, 1);
    fg_kube_loop_free(loop);
    fg_kube_watch_free(w2);
    ck_assert(!r1.done && !r2.done);
    fg_kube_client_free(c);
    server_stop(&srv);
}
END_TEST

static Suite *kube_client_suite(void) {
    Suite *s = suite_create("kube_client");
    TCase *tc = tcase_create("client");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, get_returns_object_and_reuses_one_connection);
    tcase_add_loop_test(tc, failures_become_errors, 0, sizeof failures / sizeof failures[0]);
    tcase_add_test(tc, methods_send_json_bodies);
    tcase_add_test(tc, oversize_request_body_refused_before_sending);
    tcase_add_test(tc, connection_refused_is_transport_error);
    tcase_add_test(tc, client_config_refusals);
    tcase_add_test(tc, https_with_ca_and_token);
    tcase_add_test(tc, watch_delivers_events_cut_across_chunks);
    tcase_add_loop_test(tc, watch_failures_end_with_errors, 0,
                        sizeof watch_failures / sizeof watch_failures[0]);
    tcase_add_test(tc, watch_error_event_410_then_clean_end);
    tcase_add_test(tc, watch_freed_while_running);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(kube_client_suite());
}
