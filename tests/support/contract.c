/* tests/support/contract.c: see contract.h. The child's stdin is a socket pair, so that writing a
 * body the checker never reads (it exits early on a usage error) gives EPIPE through MSG_NOSIGNAL
 * instead of killing the test with SIGPIPE; its stdout and stderr share one pipe, read while the
 * body is written, so neither side can block the other. */
#include "contract.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK_TIMEOUT_MS 60000

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_err(char *err, size_t errlen, const char *msg) {
    if (errlen > 0)
        snprintf(err, errlen, "%s", msg);
}

/* Appends n bytes to err, keeping it NUL-terminated and dropping what does not fit. */
static void append_err(char *err, size_t errlen, size_t *used, const char *p, size_t n) {
    if (errlen == 0 || *used + 1 >= errlen)
        return;
    size_t room = errlen - 1 - *used;
    size_t take = n < room ? n : room;
    memcpy(err + *used, p, take);
    *used += take;
    err[*used] = '\0';
}

static void child_exec(int in_fd, int out_fd, char *const argv[]) {
    if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
        dup2(out_fd, STDERR_FILENO) < 0)
        _exit(126);
    close(in_fd);
    close(out_fd);
    execvp(argv[0], argv);
    _exit(127);
}

/* Runs the checker with argv, feeding body; returns its outcome. */
static int run_checker(char *const argv[], const char *body, size_t len, char *err, size_t errlen) {
    int sv[2] = {-1, -1}, out[2] = {-1, -1};
    int rc = CONTRACT_NOT_RUN;
    size_t used = 0, sent = 0;
    pid_t pid = -1;

    set_err(err, errlen, "");
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        set_err(err, errlen, "contract_check: cannot create pipes");
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        set_err(err, errlen, "contract_check: fork failed");
        goto out;
    }
    if (pid == 0)
        child_exec(sv[1], out[1], argv);
    close(sv[1]);
    close(out[1]);
    sv[1] = out[1] = -1;
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    if (len == 0) {
        close(sv[0]);
        sv[0] = -1;
    }

    long long deadline = now_ms() + CHECK_TIMEOUT_MS;
    for (;;) {
        struct pollfd p[2] = {{.fd = out[0], .events = POLLIN}, {.fd = sv[0], .events = POLLOUT}};
        long long left = deadline - now_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            set_err(err, errlen, "contract_check: the checker did not finish in time");
            used = strlen(err);
            break;
        }
        if (poll(p, sv[0] >= 0 ? 2 : 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            kill(pid, SIGKILL);
            break;
        }
        if (sv[0] >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = send(sv[0], body + sent, len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || sent == len) {
                close(sv[0]); /* end of the body (or the checker stopped reading) */
                sv[0] = -1;
            }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[4096];
            ssize_t n = read(out[0], buf, sizeof buf);
            if (n > 0)
                append_err(err, errlen, &used, buf, (size_t)n);
            else if (n == 0 || errno != EINTR)
                break; /* the checker closed its output: it is exiting */
        }
    }

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    pid = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) <= 2) {
        rc = WEXITSTATUS(status);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        const char *m = "contract_check: cannot run node (is it installed? `make npm-ensure`)";
        append_err(err, errlen, &used, m, strlen(m));
    }
out:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (out[0] >= 0)
        close(out[0]);
    if (out[1] >= 0)
        close(out[1]);
    return rc;
}

static int check(const char *method, const char *path, long status, const char *content_type,
                 const char *raw_headers, const char *body, size_t len, char *err, size_t errlen) {
    char script[4096], status_s[24];
    const char *root = getenv("FG_ROOT");
    if (root == NULL || root[0] == '\0')
        root = ".";
    snprintf(script, sizeof script, "%s/tests/contract/validate.mjs", root);
    snprintf(status_s, sizeof status_s, "%ld", status);
    const char *argv[16];
    size_t n = 0;
    argv[n++] = "node";
    argv[n++] = script;
    argv[n++] = "--method";
    argv[n++] = method;
    argv[n++] = "--path";
    argv[n++] = path;
    argv[n++] = "--status";
    argv[n++] = status_s;
    if (content_type != NULL) {
        argv[n++] = "--content-type";
        argv[n++] = content_type;
    }
    if (raw_headers != NULL) {
        argv[n++] = "--headers";
        argv[n++] = raw_headers;
    }
    argv[n] = NULL;
    /* execvp takes char *const[]; the strings are not modified. */
    return run_checker((char *const *)argv, body ? body : "", body ? len : 0, err, errlen);
}

int contract_check(const char *method, const char *path, long status, const char *content_type,
                   const char *body, size_t len, char *err, size_t errlen) {
    return check(method, path, status, content_type, NULL, body, len, err, errlen);
}

int contract_check_headers(const char *method, const char *path, long status,
                           const char *raw_headers, const char *body, size_t len, char *err,
                           size_t errlen) {
    return check(method, path, status, NULL, raw_headers ? raw_headers : "", body, len, err,
                 errlen);
}
