/* core/util.c: clocks, randomness and whole-file reads: the small system interfaces that
 * every module needs and that tests may want to reason about in one place. */
#include "fleetgate/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t fg_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t fg_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fg_format_time_ms(int64_t wall_ms, char *buf, size_t buflen) {
    time_t secs = (time_t)(wall_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, buflen, "%s.%03dZ", base, (int)(wall_ms % 1000));
}

int fg_random_bytes(void *buf, size_t len) {
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return FG_EIO;
        }
        p += n;
        len -= (size_t)n;
    }
    return FG_OK;
}

int fg_read_file(const char *path, size_t max, char **out, size_t *len_out) {
    int rc = FG_OK;
    char *data = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return FG_ENOENT;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = FG_EIO;
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        rc = FG_ETOOBIG;
        goto out;
    }
    size_t size = (size_t)st.st_size;
    data = fg_xmalloc(size + 1);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, data + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = FG_EIO;
            goto out;
        }
        got += (size_t)n;
    }
    data[got] = '\0';
    *out = data;
    data = NULL;
    if (len_out)
        *len_out = got;
out:
    free(data);
    close(fd);
    return rc;
}
