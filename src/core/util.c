/* core/util.c: clocks, randomness, whole-file reads and base64url: the small interfaces that
 * every module needs and that tests may want to reason about in one place. */
#include "fleetgate/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Every log line has a timestamp: the seconds part is formatted once per second per thread,
 * the milliseconds are three digits. */
void fg_format_time_ms(int64_t wall_ms, char *buf, size_t buflen) {
    static _Thread_local int64_t base_secs = -1;
    static _Thread_local char base[32];
    static _Thread_local size_t base_len;
    int64_t secs = wall_ms / 1000;
    if (secs != base_secs) {
        time_t t = (time_t)secs;
        struct tm tm;
        gmtime_r(&t, &tm);
        base_len = strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
        base_secs = secs;
    }
    unsigned ms = (unsigned)(wall_ms % 1000);
    if (buflen < base_len + 6) {
        snprintf(buf, buflen, "%s.%03uZ", base, ms);
        return;
    }
    memcpy(buf, base, base_len);
    char *p = buf + base_len;
    p[0] = '.';
    p[1] = (char)('0' + ms / 100);
    p[2] = (char)('0' + ms / 10 % 10);
    p[3] = (char)('0' + ms % 10);
    p[4] = 'Z';
    p[5] = '\0';
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

/* ---- base64url --------------------------------------------------------- */

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t fg_b64url_encode(const void *in, size_t n, char *out) {
    const unsigned char *b = in;
    size_t j = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)b[i + 1] << 8;
        if (i + 2 < n)
            v |= b[i + 2];
        out[j++] = b64url_alphabet[(v >> 18) & 63];
        out[j++] = b64url_alphabet[(v >> 12) & 63];
        if (i + 1 < n)
            out[j++] = b64url_alphabet[(v >> 6) & 63];
        if (i + 2 < n)
            out[j++] = b64url_alphabet[v & 63];
    }
    out[j] = '\0';
    return j;
}

static int b64_value(unsigned char c) {
    const char *p = c ? memchr(b64url_alphabet, c, 64) : NULL;
    return p ? (int)(p - b64url_alphabet) : -1;
}

int fg_b64url_decode(const char *in, size_t len, unsigned char **out, size_t *out_len) {
    if (len % 4 == 1)
        return FG_EINVAL;
    unsigned char *buf = fg_xmalloc(len / 4 * 3 + 3);
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0) {
            free(buf);
            return FG_EINVAL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) { /* leftover bits must be zero (canonical encoding) */
        free(buf);
        return FG_EINVAL;
    }
    *out = buf;
    *out_len = n;
    return FG_OK;
}

/* ---- hashing ----------------------------------------------------------- */

/* A 64-bit hash of bytes (8 at a time, then a final mix); two seeds give 128 bits. */
uint64_t fg_hash64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    const uint64_t m = 0x9e3779b97f4a7c15ull;
    h ^= n * m;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ (w * m)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ (w * m)) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 32);
}

size_t fg_format_i64(int64_t v, char *out) {
    char digits[FG_INT_CHARS];
    size_t at = sizeof digits, n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN too */
    do {
        digits[--at] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[n++] = '-';
    memcpy(out + n, digits + at, sizeof digits - at);
    n += sizeof digits - at;
    out[n] = '\0';
    return n;
}
