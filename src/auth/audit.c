/* auth/audit.c: the audit log, one JSON line per mutating or refused call.
 *
 * Each line is written with a single write(2) on a file opened with O_APPEND, under a mutex, so
 * lines from several threads (and several processes sharing the file) never interleave. "Written"
 * means the kernel accepted the whole line; a failed or short write is reported to the caller,
 * which refuses the call it was recording (fail closed). The file is reopened on SIGHUP so log
 * rotation works.
 *
 * Folding: a flood of identical refusals (the same client, status, route, reason...) must not
 * become a flood of lines. The first refusal of a kind is written at once, in full; the ones
 * of the same kind in the next FOLD_INTERVAL_MS are counted, and one line with that count
 * ("repeated") is written when the interval ends (by a small flusher thread, so a flood that
 * stops is still accounted for). A kind is a slot of a fixed table: a new kind that meets
 * another in its slot flushes the other's count first, so nothing is lost, only folded less.
 */
#include "auth_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Far above any line: the gate cuts every client-supplied field (see gate.c). */
#define AUDIT_LINE_MAX (64u << 10)

#define FOLD_SLOTS       1024 /* power of two */
#define FOLD_INTERVAL_MS 1000

typedef struct {
    uint64_t hash;    /* of the kind; 0: empty */
    json_t *first;    /* the line that opened the interval (owned) */
    int64_t count;    /* refusals folded since */
    int64_t since_ms; /* wall clock of the first */
} fold_t;

struct fg_audit {
    pthread_mutex_t mu;
    char *path; /* NULL: stdout */
    int fd;
    atomic_bool failing;
    pthread_mutex_t fold_mu;
    pthread_cond_t fold_cv;
    bool stopping;
    pthread_t flusher;
    fold_t *folds;
};

static void *flusher_main(void *arg);
static void flush_folds(fg_audit_t *a, bool all);

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
    pthread_mutex_init(&a->fold_mu, NULL);
    pthread_cond_init(&a->fold_cv, NULL);
    a->folds = fg_xcalloc(FOLD_SLOTS, sizeof *a->folds);
    if (pthread_create(&a->flusher, NULL, flusher_main, a) != 0)
        abort(); /* as out of memory: a thread is a resource like any allocation */
    *out = a;
    return FG_OK;
}

void fg_audit_close(fg_audit_t *a) {
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->fold_mu);
    a->stopping = true;
    pthread_cond_signal(&a->fold_cv);
    pthread_mutex_unlock(&a->fold_mu);
    pthread_join(a->flusher, NULL); /* it writes what it still holds before it returns */
    /* ... unless it had not yet taken the lock when stopping was set: what it did not write is
     * written here, so no folded line is lost or leaked. */
    flush_folds(a, true);
    free(a->folds);
    pthread_cond_destroy(&a->fold_cv);
    pthread_mutex_destroy(&a->fold_mu);
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

/* ---- folding of repeated refusals -------------------------------------- */

static uint64_t hash_kind(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* The line that says how many refusals of f's kind were folded (a new reference), and f
 * emptied. Called with fold_mu held; NULL when nothing was folded. */
static json_t *take_summary(fold_t *f, int64_t now_ms) {
    json_t *line = NULL;
    if (f->count > 0) {
        char ts[40];
        line = f->first;
        f->first = NULL;
        /* What differed between the folded calls is not repeated: ids and exact targets. */
        json_object_del(line, "requestId");
        json_object_del(line, "target");
        json_object_del(line, "truncated");
        json_object_set(line, "firstTime", json_object_get(line, "time"));
        fg_format_time_ms(now_ms, ts, sizeof ts);
        json_object_set_new(line, "time", json_string(ts));
        json_object_set_new(line, "repeated", json_integer(f->count));
    }
    json_decref(f->first);
    memset(f, 0, sizeof *f);
    return line;
}

bool fg_audit_fold(fg_audit_t *a, const char *kind) {
    uint64_t h = hash_kind(kind);
    int64_t now = fg_wall_ms();
    fold_t *f = &a->folds[h & (FOLD_SLOTS - 1)];
    bool folded = false;
    pthread_mutex_lock(&a->fold_mu);
    if (f->hash == h && now - f->since_ms < FOLD_INTERVAL_MS) {
        f->count++;
        folded = true;
    }
    pthread_mutex_unlock(&a->fold_mu);
    return folded;
}

int fg_audit_refusal(fg_audit_t *a, const json_t *line, const char *kind) {
    uint64_t h = hash_kind(kind);
    int64_t now = fg_wall_ms();
    json_t *evicted = NULL;
    fold_t *f = &a->folds[h & (FOLD_SLOTS - 1)];
    pthread_mutex_lock(&a->fold_mu);
    if (f->hash == h && now - f->since_ms < FOLD_INTERVAL_MS) {
        f->count++;
        pthread_mutex_unlock(&a->fold_mu);
        return FG_OK;
    }
    evicted = take_summary(f, now);
    f->hash = h;
    f->first = json_deep_copy(line);
    f->since_ms = now;
    pthread_mutex_unlock(&a->fold_mu);
    if (evicted) {
        fg_audit_write(a, evicted);
        json_decref(evicted);
    }
    return fg_audit_write(a, line);
}

/* Writes the counts of the intervals that ended (all of them when stopping). */
static void flush_folds(fg_audit_t *a, bool all) {
    int64_t now = fg_wall_ms();
    for (size_t i = 0; i < FOLD_SLOTS; i++) {
        fold_t *f = &a->folds[i];
        if (f->hash == 0 || (!all && now - f->since_ms < FOLD_INTERVAL_MS))
            continue;
        json_t *line = take_summary(f, now);
        if (line) {
            /* Written outside the table's lock would need a copy of the list; the write is one
             * syscall, and refusals only wait on it while a summary is being written. */
            fg_audit_write(a, line);
            json_decref(line);
        }
    }
}

static void *flusher_main(void *arg) {
    fg_audit_t *a = arg;
    pthread_mutex_lock(&a->fold_mu);
    while (!a->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += FOLD_INTERVAL_MS % 1000 * 1000000L + 250000000L;
        until.tv_sec += FOLD_INTERVAL_MS / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&a->fold_cv, &a->fold_mu, &until);
        flush_folds(a, a->stopping);
    }
    pthread_mutex_unlock(&a->fold_mu);
    return NULL;
}
