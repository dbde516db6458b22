/* tests/support/testhttp.c: see testhttp.h. */
#include "testhttp.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Binds 127.0.0.1:port (0: the kernel picks) and answers the port bound, or 0. */
static uint16_t try_bind(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(port)};
    socklen_t len = sizeof a;
    uint16_t bound = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        bound = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return bound;
}

uint16_t th_free_port(void) {
    return try_bind(0);
}

uint16_t th_free_ports(int n) {
    for (int attempt = 0; attempt < 64; attempt++) {
        uint16_t base = try_bind(0);
        int ok = base != 0 && (int)base + n - 1 <= 65535;
        for (int i = 1; ok && i < n; i++)
            ok = try_bind((uint16_t)(base + i)) != 0;
        if (ok)
            return base;
    }
    return 0;
}

typedef struct {
    char *data;
    size_t len;
} grow_t;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
    grow_t *g = ud;
    size_t add = size * n;
    g->data = realloc(g->data, g->len + add + 1);
    memcpy(g->data + g->len, p, add);
    g->len += add;
    g->data[g->len] = '\0';
    return add;
}

typedef struct {
    const char *data;
    size_t left;
} feed_t;

static size_t on_read(char *p, size_t size, size_t n, void *ud) {
    feed_t *f = ud;
    size_t take = size * n < f->left ? size * n : f->left;
    memcpy(p, f->data, take);
    f->data += take;
    f->left -= take;
    return take;
}

int th_request(const char *method, const char *url, const char *const *headers, const char *body,
               long body_len, int chunked, th_resp_t *out) {
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (c == NULL)
        return -1;
    grow_t b = {0}, h = {0};
    feed_t feed = {body, body_len > 0 ? (size_t)body_len : 0};
    struct curl_slist *hl = NULL;
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    hl = curl_slist_append(hl, "Expect:"); /* no 100-continue round trip */
    if (chunked)
        hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    if (body_len >= 0) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &feed);
        if (!chunked)
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    out->body = b.data ? b.data : calloc(1, 1);
    out->len = b.len;
    out->headers = h.data ? h.data : calloc(1, 1);
    return rc == CURLE_OK ? 0 : -1;
}

const char *th_header(const th_resp_t *r, const char *name, char *buf, size_t buflen) {
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len > n && line[n] == ':' && strncasecmp(line, name, n) == 0) {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t vl = len - (size_t)(v - line);
            if (vl >= buflen)
                vl = buflen - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        line = eol ? eol + 2 : line + len;
    }
    return NULL;
}

void th_resp_free(th_resp_t *r) {
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

int th_connect(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int th_connect_from(const char *src, uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

size_t th_read_all(int fd, char *buf, size_t buflen, int timeout_ms) {
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got + 1 < buflen && poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = read(fd, buf + got, buflen - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

const char *th_bin(const char *name) {
    static char path[512];
    const char *build = getenv("FG_BUILD");
    snprintf(path, sizeof path, "%s/%s", build && *build ? build : "build", name);
    return path;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

pid_t th_daemon_start(const char *config_json, uint16_t *port, const char *log_path) {
    char cfg_path[] = "/tmp/fg-test-config-XXXXXX";
    int fd = mkstemp(cfg_path);
    if (fd < 0)
        return -1;
    size_t n = strlen(config_json);
    if (write(fd, config_json, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    close(fd);
    *port = th_free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)*port);
    const char *bin = th_bin("fleetgate");
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out >= 0) {
            dup2(out, STDERR_FILENO);
            dup2(out, STDOUT_FILENO);
        }
        execl(bin, bin, "-c", cfg_path, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/healthz", (unsigned)*port);
    for (int i = 0; i < 100; i++) {
        th_resp_t r;
        int ok = th_request("GET", url, NULL, NULL, -1, 0, &r) == 0 && r.status == 200;
        th_resp_free(&r);
        if (ok) {
            unlink(cfg_path);
            return pid;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        sleep_ms(50);
    }
    unlink(cfg_path);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int th_daemon_stop(pid_t pid, int sig, int timeout_ms) {
    kill(pid, sig);
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0 && errno != EINTR)
            return -1;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}
