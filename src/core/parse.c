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
