/* Fuzz target: a request head (method, target, query, header fields) sent over loopback to a
 * real fg_http_server, so it goes through libmicrohttpd's parser and fleetgate's own checks
 * (raw target, body framing, head bounds, router, query lookups, problem+json). The input is
 * the head's bytes; the harness ends it with "Connection: close" and an empty line.
 * Properties: nothing crashes or trips a sanitizer, and every final answer is JSON, a
 * problem's status being the status line's: also the refusals libmicrohttpd makes before any
 * callback runs (a head past its pool, a bad request line or version, a bad Content-Length),
 * which src/http/mhd_answers.c makes fleetgate's. */
#include "fleetgate/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *clean_or_null(const char *s) {
    return s ? fg_json_string_clean(s, strlen(s), 256, NULL) : json_null();
}

/* Reads the query and a header too, so their lookups run on every input; client bytes go into
 * the answer cleaned, as handlers must put them. */
static int h_echo(fg_req_t *req) {
    json_t *o = json_object();
    json_object_set_new(o, "cluster", clean_or_null(fg_req_query(req, "cluster")));
    json_object_set_new(o, "auth", json_boolean(fg_req_header(req, "Authorization") != NULL));
    json_object_set_new(o, "project", clean_or_null(fg_req_param(req, "project")));
    return fg_reply_json(req, 200, o);
}

static const fg_route_t routes[] = {
    {.method = "GET", .pattern = "/healthz", .handler = h_echo},
    {.method = "GET", .pattern = "/v1/projects/{project}/pods", .handler = h_echo},
    {.method = "POST",
     .pattern = "/v1/projects/{project}/apps",
     .handler = h_echo,
     .body = FG_BODY_JSON},
};

static uint16_t start_server(void) {
    static fg_http_server_t *srv;
    if (srv == NULL) {
        fg_log_set_level(FG_LOG_ERROR);
        fg_http_options_t o = {.host = "127.0.0.1",
                               .workers = 1,
                               .max_body_bytes = 4096,
                               .max_connections = 64,
                               .connection_timeout_s = 2,
                               .header_timeout_s = 1,
                               .body_timeout_s = 1};
        if (fg_http_server_start(&srv, &o, routes, sizeof routes / sizeof routes[0]) != FG_OK)
            abort();
    }
    return fg_http_server_port(srv);
}

/* The answer's status and whether its body satisfies the properties; aborts when not. The answer
 * to a HEAD has the GET's headers and no body (RFC 9110 §9.3.2): nothing to parse. */
static void check_answer(const char *ans, size_t len, bool head) {
    if (len < 12 || strncmp(ans, "HTTP/1.", 7) != 0 || head)
        return; /* no answer (closed, or still waiting for a body): nothing to check */
    long status = strtol(ans + 9, NULL, 10);
    const char *end = strstr(ans, "\r\n\r\n");
    if (end == NULL)
        return; /* cut short by the read bound */
    if (status < 200)
        return; /* an interim answer (100 Continue): nothing of its own to check */
    const char *ct = strcasestr(ans, "\r\nContent-Type:");
    if (ct == NULL || ct > end)
        abort(); /* an answer that is not fleetgate's (libmicrohttpd's HTML page had none) */
    json_error_t e;
    /* Only this answer's body: a second answer may follow (MHD reading on after a head). */
    json_t *body = json_loadb(end + 4, len - (size_t)(end + 4 - ans), JSON_DISABLE_EOF_CHECK, &e);
    if (body == NULL)
        abort(); /* fleetgate answered with something that is not JSON */
    if (strncasecmp(ct + 15, " application/problem+json", 25) == 0 &&
        json_integer_value(json_object_get(body, "status")) != status)
        abort();
    json_decref(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char tail[] = "\r\nConnection: close\r\n\r\n";
    uint16_t port = start_server();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        abort();
    size_t len = size + sizeof tail - 1;
    char *req = malloc(len);
    memcpy(req, data, size);
    memcpy(req + size, tail, sizeof tail - 1);
    for (size_t sent = 0; sent < len;) {
        ssize_t n = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    free(req);
    /* Read until the server closes, briefly: an input that promises a body gets no answer. */
    char ans[16384];
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got + 1 < sizeof ans && poll(&p, 1, 200) > 0) {
        ssize_t n = recv(fd, ans + got, sizeof ans - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    ans[got] = '\0';
    close(fd);
    check_answer(ans, got, size >= 5 && memcmp(data, "HEAD ", 5) == 0);
    return 0;
}
