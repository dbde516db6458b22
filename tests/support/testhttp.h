/* tests/support/testhttp.h: what integration tests share: an HTTP client on libcurl, raw
 * sockets for slow clients, and starting/stopping the built daemon on a free port. */
#ifndef FG_TESTHTTP_H
#define FG_TESTHTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    long status;
    char *body; /* NUL-terminated */
    size_t len;
    char *headers; /* raw header block */
} th_resp_t;

/* A port that was free a moment ago on 127.0.0.1. */
uint16_t th_free_port(void);
/* The first of n consecutive ports that were all free a moment ago (kubesim serves cluster i on
 * base + i), or 0. */
uint16_t th_free_ports(int n);
/* Sends one request. headers is NULL-terminated ("Name: value"), may be NULL. body_len < 0
 * sends no body; chunked != 0 sends the body with chunked transfer encoding. 0 on success. */
int th_request(const char *method, const char *url, const char *const *headers, const char *body,
               long body_len, int chunked, th_resp_t *out);
/* The value of a response header (case-insensitive name) copied into buf, or NULL. */
const char *th_header(const th_resp_t *r, const char *name, char *buf, size_t buflen);
void th_resp_free(th_resp_t *r);

/* A connected TCP socket to 127.0.0.1:port, or -1. */
int th_connect(uint16_t port);
/* The same from a chosen local address (another 127.x.y.z is another client), or -1. */
int th_connect_from(const char *src, uint16_t port);
/* Reads until the peer closes or timeout_ms passes; returns bytes read into buf (NUL-ended). */
size_t th_read_all(int fd, char *buf, size_t buflen, int timeout_ms);

/* Writes config_json to a temp file and starts $FG_BUILD/fleetgate on a free port with it,
 * waiting until /healthz answers. Returns the pid (and *port), or -1. The daemon's stderr goes
 * to log_path when not NULL. */
pid_t th_daemon_start(const char *config_json, uint16_t *port, const char *log_path);
/* Sends sig and waits up to timeout_ms for the exit; returns the exit status, or -1. */
int th_daemon_stop(pid_t pid, int sig, int timeout_ms);
/* Path of a built binary: $FG_BUILD/name (FG_BUILD defaults to "build"). Static buffer. */
const char *th_bin(const char *name);

#endif
