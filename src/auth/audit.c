/* auth/audit.c: the audit log, one JSON line per mutating or refused call.
 *
 * Each line is written with a single write(2) on a file opened with O_APPEND, under a mutex, so
 * lines from several threads (and several processes sharing the file) never interleave. "Written"
 * means the kernel accepted the whole line; a failed or short write is reported to the caller,
 * which refuses the call it was recording (fail closed). The file is reopened on SIGHUP so log
 * rotation works.
 */
#include "auth_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AUDIT_LINE_MAX (16u << 10)

struct fg_audit {
    pthread_mutex_t mu;
    char *path; /* NULL: stdout */
    int fd;
    atomic_bool failing;
};

static int open_path(const char *path, int *fd_out) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        fg_log(FG_LOG_ERROR, NULL, "audit log %s: cannot open: %s", path, strerror(errno));
        return FG_EIO;
    }
    *fd_out = fd;
    return FG_OK;
}

int fg_audit_open(fg_audit_t **out, const char *path) {
    int fd = STDOUT_FILENO;
    bool to_stdout = path == NULL || strcmp(path, "-") == 0;
    if (!to_stdout && open_path(path, &fd) != FG_OK)
        return FG_EIO;
    fg_audit_t *a = fg_xcalloc(1, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->path = to_stdout ? NULL : fg_xstrdup(path);
    a->fd = fd;
    atomic_init(&a->failing, false);
    *out = a;
    return FG_OK;
}

void fg_audit_close(fg_audit_t *a) {
    if (a == NULL)
        return;
    if (a->path && a->fd >= 0)
        close(a->fd);
    pthread_mutex_destroy(&a->mu);
    free(a->path);
    free(a);
}

int fg_audit_reopen(fg_audit_t *a) {
    int fd;
    if (a->path == NULL)
        return FG_OK;
    if (open_path(a->path, &fd) != FG_OK)
        return FG_EIO;
    pthread_mutex_lock(&a->mu);
    int old = a->fd;
    a->fd = fd;
    atomic_store(&a->failing, false);
    pthread_mutex_unlock(&a->mu);
    if (old >= 0)
        close(old);
    return FG_OK;
}

bool fg_audit_failing(const fg_audit_t *a) {
    return atomic_load(&((fg_audit_t *)a)->failing);
}

int fg_audit_write(fg_audit_t *a, const json_t *line) {
    size_t len;
    char *text = fg_json_dumps(line, &len);
    int rc = FG_OK;
    if (len + 1 > AUDIT_LINE_MAX) {
        free(text);
        return FG_ETOOBIG;
    }
    text = fg_xrealloc(text, len + 2);
    text[len++] = '\n';
    pthread_mutex_lock(&a->mu);
    ssize_t n;
    do {
        n = write(a->fd, text, len);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len) {
        if (!atomic_load(&a->failing))
            fg_log(FG_LOG_ERROR, NULL, "audit log %s: write failed: %s",
                   a->path ? a->path : "stdout", n < 0 ? strerror(errno) : "short write");
        atomic_store(&a->failing, true);
        rc = FG_EIO;
    } else {
        atomic_store(&a->failing, false);
    }
    pthread_mutex_unlock(&a->mu);
    free(text);
    return rc;
}
