/* core/log.c: one JSON line per event on stderr. Lines are built whole in a local buffer and
 * written with one write(2), so lines from several threads never interleave. */
#include "fleetgate/core.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic int min_level = FG_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

#define LOG_LINE_MAX 16384

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
