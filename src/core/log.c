/* core/log.c: one JSON line per event on stderr. Lines are built whole in a local buffer and
 * written with one write(2), so lines from several threads never interleave.
 *
 * High-volume lines (the access log) go through a batch instead: appended to a bounded buffer
 * under a short lock, written by one writer thread every BATCH_MS or as soon as half the buffer
 * is used, so a request pays a memcpy, not a system call. Two buffers take turns: the writer
 * writes one while requests fill the other. A line that finds the buffer full is dropped and
 * counted (never a wait on the disk); fg_log_flush writes what is held (drain, SIGHUP, exit). */
#include "fleetgate/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int min_level = FG_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

#define LOG_LINE_MAX 16384
#define BATCH_BYTES  (1u << 20) /* each of the two buffers */
#define BATCH_MS     50

void fg_log_set_level(fg_log_level_t level) {
    min_level = (int)level;
}

int fg_log_level_parse(const char *s, fg_log_level_t *out) {
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (fg_log_level_t)i;
            return FG_OK;
        }
    }
    return FG_EINVAL;
}

bool fg_log_enabled(fg_log_level_t level) {
    return (int)level >= min_level;
}

static void write_line(const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, data, len);
        if (n <= 0)
            return; /* nowhere left to report a logging failure */
        data += n;
        len -= (size_t)n;
    }
}

void fg_log(fg_log_level_t level, const char *request_id, const char *fmt, ...) {
    char msg[LOG_LINE_MAX / 2];
    char ts[40];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t msglen = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;

    fg_format_time_ms(fg_wall_ms(), ts, sizeof ts);
    fg_buf_t b;
    fg_buf_init(&b, LOG_LINE_MAX);
    fg_buf_appendf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts, level_names[level]);
    fg_buf_append_json_escaped(&b, msg, msglen);
    fg_buf_append(&b, "\"", 1);
    if (request_id) {
        static const char key[] = ",\"requestId\":\"";
        fg_buf_append(&b, key, sizeof key - 1);
        fg_buf_append_json_escaped(&b, request_id, strlen(request_id));
        fg_buf_append(&b, "\"", 1);
    }
    fg_buf_append(&b, "}\n", 2);
    write_line(b.data, b.len);
    fg_buf_free(&b);
}

void fg_log_json(const json_t *line) {
    /* Durations and rates need no more than six significant digits in a log. */
    char *s = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (s == NULL)
        return;
    size_t len = strlen(s);
    s = fg_xrealloc(s, len + 2);
    s[len] = '\n';
    write_line(s, len + 1);
    free(s);
}

/* ---- the batch ---------------------------------------------------------- */

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;       /* guards fill and len, and the swap */
    pthread_cond_t wake;      /* the writer: half full, or a flush asked for */
    pthread_mutex_t write_mu; /* one write(2) round at a time (the writer or a flush) */
    char *bufs[2];            /* fill is bufs[cur]; the writer writes the other */
    size_t len;               /* bytes in the filling buffer */
    int cur;
    atomic_uint_fast64_t dropped;
} batch = {.once = PTHREAD_ONCE_INIT,
           .mu = PTHREAD_MUTEX_INITIALIZER,
           .wake = PTHREAD_COND_INITIALIZER,
           .write_mu = PTHREAD_MUTEX_INITIALIZER};

/* Writes what the filling buffer holds: swaps it (under mu) and writes outside the lock. */
static void batch_write_round(void) {
    pthread_mutex_lock(&batch.write_mu);
    pthread_mutex_lock(&batch.mu);
    char *full = batch.bufs[batch.cur];
    size_t len = batch.len;
    batch.cur ^= 1;
    batch.len = 0;
    pthread_mutex_unlock(&batch.mu);
    write_line(full, len);
    pthread_mutex_unlock(&batch.write_mu);
}

static void *batch_writer(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += BATCH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&batch.mu);
        while (batch.len < BATCH_BYTES / 2 &&
               pthread_cond_timedwait(&batch.wake, &batch.mu, &until) == 0)
            ;
        bool any = batch.len > 0;
        pthread_mutex_unlock(&batch.mu);
        if (any)
            batch_write_round();
    }
    return NULL;
}

static void batch_start(void) {
    batch.bufs[0] = fg_xmalloc(BATCH_BYTES);
    batch.bufs[1] = fg_xmalloc(BATCH_BYTES);
    atomic_init(&batch.dropped, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, batch_writer, NULL) == 0)
        pthread_detach(t);
    atexit(fg_log_flush); /* a normal exit writes what is held */
}

void fg_log_batched(const char *line, size_t len) {
    pthread_once(&batch.once, batch_start);
    pthread_mutex_lock(&batch.mu);
    bool fits = batch.len + len <= BATCH_BYTES;
    if (fits) {
        memcpy(batch.bufs[batch.cur] + batch.len, line, len);
        batch.len += len;
        if (batch.len >= BATCH_BYTES / 2)
            pthread_cond_signal(&batch.wake);
    }
    pthread_mutex_unlock(&batch.mu);
    if (!fits)
        atomic_fetch_add(&batch.dropped, 1);
}

void fg_log_flush(void) {
    if (batch.bufs[0] == NULL)
        return; /* nothing was ever batched */
    batch_write_round();
}

uint64_t fg_log_dropped(void) {
    return batch.bufs[0] ? atomic_load(&batch.dropped) : 0;
}
