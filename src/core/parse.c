/* core/parse.c: the fg_parse_* family, the one way fleetgate turns text into numbers and
 * addresses (atoi and sscanf are banned: they cannot say "this was not a number"). */
#include "fleetgate/core.h"

#include <stdlib.h>
#include <string.h>

int fg_parse_int64(const char *s, size_t len, int64_t min, int64_t max, int64_t *out) {
    if (s == NULL || len == 0 || len > 20)
        return FG_EINVAL;
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        i = 1;
        if (len == 1)
            return FG_EINVAL;
    }
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FG_EINVAL;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return FG_ETOOBIG;
        v = v * 10 + d;
    }
    int64_t r;
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return FG_ETOOBIG;
        r = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return FG_ETOOBIG;
        r = (int64_t)v;
    }
    if (r < min || r > max)
        return FG_ETOOBIG;
    *out = r;
    return FG_OK;
}

int fg_parse_hostport(const char *s, char **host_out, uint16_t *port_out) {
    const char *colon;
    const char *host;
    size_t hostlen;
    if (s == NULL || *s == '\0')
        return FG_EINVAL;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return FG_EINVAL;
        host = s + 1;
        hostlen = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
            return FG_EINVAL;
        host = s;
        hostlen = (size_t)(colon - s);
    }
    if (hostlen == 0)
        return FG_EINVAL;
    int64_t port;
    if (fg_parse_int64(colon + 1, strlen(colon + 1), 1, 65535, &port) != FG_OK)
        return FG_EINVAL;
    *host_out = fg_xstrndup(host, hostlen);
    *port_out = (uint16_t)port;
    return FG_OK;
}

bool fg_is_dns1123_chars(const char *s, size_t len, size_t max) {
    if (len == 0 || len > max)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

bool fg_is_dns1123_label(const char *s, size_t len) {
    if (len == 0 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i < len - 1))
            return false;
    }
    return true;
}

/* ---- RFC 3339 times --------------------------------------------------------- */

/* Reads n digits at s into *v; false when one is not a digit. */
static bool digits(const char *s, int n, int *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

/* Days from 1970-01-01 to y-m-d (the proleptic Gregorian calendar; H. Hinnant's formula). */
static int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int month_days(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

int fg_parse_time_ms(const char *s, size_t len, int64_t *out) {
    int y, mo, d, h, mi, sec, ms = 0;
    if (s == NULL || len < 20 || len > 40)
        return FG_EINVAL;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return FG_EINVAL;
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 ||
        sec > 60)
        return FG_EINVAL;
    size_t i = 19;
    if (s[i] == '.') {
        size_t start = ++i;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            if (i - start < 3)
                ms = ms * 10 + (s[i] - '0');
        if (i == start || i - start > 9)
            return FG_EINVAL;
        for (size_t k = i - start; k < 3; k++)
            ms *= 10;
    }
    int64_t offset_min = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-')) {
        int oh, om;
        if (!digits(s + i + 1, 2, &oh) || s[i + 3] != ':' || !digits(s + i + 4, 2, &om) ||
            oh > 23 || om > 59)
            return FG_EINVAL;
        offset_min = (s[i] == '+' ? 1 : -1) * (int64_t)(oh * 60 + om);
        i += 6;
    } else {
        return FG_EINVAL;
    }
    if (i != len)
        return FG_EINVAL;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + (sec > 59 ? 59 : sec);
    secs -= offset_min * 60;
    *out = secs * 1000 + ms;
    return FG_OK;
}
