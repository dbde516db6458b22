/* core/buf.c: fg_buf_t, the bounded growable buffer every module builds text in.
 * Like curl's dynbuf: a hard maximum is part of the buffer, so no input can grow one without
 * bound, and an append that would pass it fails and leaves the buffer as it was. */
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fg_buf_init(fg_buf_t *b, size_t max) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

int fg_buf_reserve(fg_buf_t *b, size_t extra) {
    if (extra > b->max || b->len > b->max - extra)
        return FG_ETOOBIG;
    size_t need = b->len + extra + 1; /* room for the terminating NUL */
    if (need <= b->cap)
        return FG_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->data = fg_xrealloc(b->data, cap);
    b->cap = cap;
    return FG_OK;
}

int fg_buf_append(fg_buf_t *b, const void *data, size_t n) {
    if (fg_buf_reserve(b, n) != FG_OK)
        return FG_ETOOBIG;
    if (n > 0)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return FG_OK;
}

/* One vsnprintf when the text fits the room already there (the usual case for a buffer that
 * has grown), a second only when it must grow first. */
int fg_buf_vappendf(fg_buf_t *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n >= 0 && (size_t)n < room && (size_t)n <= b->max && b->len <= b->max - (size_t)n) {
        b->len += (size_t)n;
        return FG_OK;
    }
    if (room)
        b->data[b->len] = '\0'; /* what a refused or regrown append wrote goes */
    if (n < 0)
        return FG_EINVAL;
    if (fg_buf_reserve(b, (size_t)n) != FG_OK)
        return FG_ETOOBIG;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return FG_OK;
}

int fg_buf_appendf(fg_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = fg_buf_vappendf(b, fmt, ap);
    va_end(ap);
    return rc;
}

size_t fg_utf8_len(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t len;
    unsigned min;
    if (n == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0; /* a continuation byte, an overlong lead (c0, c1) or past U+10FFFF */
    }
    if (n < len)
        return 0;
    unsigned cp = p[0] & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8. */
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return len;
}

size_t fg_utf8_shown(const char *s, size_t n, char hex[5], const char **piece, size_t *len) {
    size_t seq = fg_utf8_len(s, n);
    if (seq == 0 || s[0] == '\0') {
        snprintf(hex, 5, "\\x%02x", (unsigned char)s[0]);
        *piece = hex;
        *len = 4;
        return 1;
    }
    *piece = s;
    *len = seq;
    return seq;
}

static bool plain_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
            return false;
    }
    return true;
}

int fg_buf_append_json_clean(fg_buf_t *b, const char *s, size_t n, size_t max) {
    size_t before = b->len, i = 0, shown = 0;
    int rc = FG_OK;
    /* the usual case (ids, addresses, routes, paths): shown and escaped as itself, in one copy */
    if (n <= max && plain_ascii(s, n))
        return fg_buf_append(b, s, n);
    while (i < n && rc == FG_OK) {
        /* the longest run shown as itself (UTF-8, no NUL) that fits, in one escaped append */
        size_t run = 0, seq;
        while (i + run < n && s[i + run] != '\0' &&
               (seq = fg_utf8_len(s + i + run, n - i - run)) != 0 && shown + run + seq <= max)
            run += seq;
        if (run > 0) {
            rc = fg_buf_append_json_escaped(b, s + i, run);
            shown += run;
            i += run;
            continue;
        }
        char hex[5];
        const char *piece;
        size_t len;
        seq = fg_utf8_shown(s + i, n - i, hex, &piece, &len);
        if (shown + len > max)
            break;
        rc = fg_buf_append_json_escaped(b, piece, len);
        shown += len;
        i += seq;
    }
    if (rc != FG_OK) {
        b->len = before; /* all or nothing */
        if (b->data)
            b->data[before] = '\0';
    }
    return rc;
}

int fg_buf_append_json_escaped(fg_buf_t *b, const char *s, size_t n) {
    size_t before = b->len;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t seq = fg_utf8_len(s + i, n - i);
        int rc;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            /* a run of plain ASCII goes in one copy (most of every log line) */
            size_t run = 1;
            while (i + run < n && (unsigned char)s[i + run] >= 0x20 &&
                   (unsigned char)s[i + run] < 0x80 && s[i + run] != '"' && s[i + run] != '\\')
                run++;
            rc = fg_buf_append(b, s + i, run);
            seq = run;
        } else if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            rc = fg_buf_append(b, esc, 2);
        } else if (c < 0x20) {
            rc = fg_buf_appendf(b, "\\u%04x", c);
        } else if (seq == 0) {
            /* Not UTF-8: the byte is shown as the text \xNN, so the line stays valid JSON and
             * the reader still sees what came. */
            rc = fg_buf_appendf(b, "\\\\x%02x", c);
            seq = 1;
        } else {
            rc = fg_buf_append(b, &s[i], seq);
        }
        if (rc != FG_OK) {
            b->len = before; /* all or nothing */
            if (b->data)
                b->data[before] = '\0';
            return rc;
        }
        i += seq;
    }
    return FG_OK;
}

void fg_buf_reset(fg_buf_t *b) {
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *fg_buf_steal(fg_buf_t *b, size_t *len_out) {
    char *p = b->data ? b->data : fg_xstrdup("");
    if (len_out)
        *len_out = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

void fg_buf_free(fg_buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
