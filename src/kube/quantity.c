/* kube/quantity.c: Kubernetes resource quantities ("500m", "1Gi", "1.5", "2e3") as integers,
 * so the cache can sum and sort them (cpu in millicores, memory in bytes, GPUs as a count).
 * Grammar and rounding follow k8s.io/apimachinery/pkg/api/resource (quantity.go): a signed
 * decimal number, then a binary suffix (Ki..Ei), a decimal suffix (n u m "" k M G T P E) or a
 * decimal exponent (e3, E-2); values are rounded up to the unit asked for. Arithmetic is exact
 * in 128 bits on the first 30 significant digits; anything outside int64 is refused, never
 * wrapped. */
#include "fleetgate/kube.h"

#include <string.h>

typedef unsigned __int128 u128;

static const struct {
    const char *suffix;
    int exp2;  /* power of two */
    int exp10; /* power of ten */
} suffixes[] = {
    {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0}, {"Pi", 50, 0}, {"Ei", 60, 0},
    {"n", 0, -9},  {"u", 0, -6},  {"m", 0, -3},  {"", 0, 0},    {"k", 0, 3},   {"M", 0, 6},
    {"G", 0, 9},   {"T", 0, 12},  {"P", 0, 15},  {"E", 0, 18},
};

#define MAX_DIGITS   30 /* significant digits kept exactly (10^30 < 2^100) */
#define MAX_EXPONENT 40

static const u128 LIMIT = (u128)1 << 126; /* far above int64, far below overflow */

/* Parses an optionally signed decimal integer exponent in [-MAX_EXPONENT, MAX_EXPONENT]. */
static int parse_exponent(const char *s, size_t len, int *out) {
    int64_t v;
    if (len > 0 && s[0] == '+') {
        s++;
        len--;
    }
    if (fg_parse_int64(s, len, -MAX_EXPONENT, MAX_EXPONENT, &v) != FG_OK)
        return FG_EINVAL;
    *out = (int)v;
    return FG_OK;
}

int fg_kube_quantity_parse(const char *s, size_t len, bool milli, int64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (s == NULL || len == 0 || len > 64)
        return FG_EINVAL;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i++;
    }
    u128 mant = 0;
    int digits = 0, frac = 0, seen = 0;
    bool dot = false;
    for (; i < len; i++) {
        char c = s[i];
        if (c == '.' && !dot) {
            dot = true;
            continue;
        }
        if (c < '0' || c > '9')
            break;
        seen++;
        if (mant == 0 && c == '0') {
            if (dot)
                frac++; /* leading zeros after the dot still shift the value */
            continue;
        }
        if (digits >= MAX_DIGITS) {
            if (!dot)
                return FG_ETOOBIG; /* an integer part this long is out of range anyway */
            continue;              /* digits past the 30th of a fraction are dropped */
        }
        mant = mant * 10 + (u128)(c - '0');
        digits++;
        if (dot)
            frac++;
    }
    if (seen == 0)
        return FG_EINVAL;
    int exp2 = 0, exp10 = -frac;
    const char *suf = s + i;
    size_t suflen = len - i;
    bool exponent = suflen > 1 && (suf[0] == 'e' || suf[0] == 'E') &&
                    (suf[1] == '+' || suf[1] == '-' || (suf[1] >= '0' && suf[1] <= '9'));
    if (exponent) { /* "Ei" is a suffix, "E3" an exponent */
        int e;
        if (parse_exponent(suf + 1, suflen - 1, &e) != FG_OK)
            return FG_EINVAL;
        exp10 += e;
    } else {
        size_t k;
        for (k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++)
            if (strlen(suffixes[k].suffix) == suflen &&
                memcmp(suffixes[k].suffix, suf, suflen) == 0)
                break;
        if (k == sizeof suffixes / sizeof suffixes[0])
            return FG_EINVAL;
        exp2 = suffixes[k].exp2;
        exp10 += suffixes[k].exp10;
    }
    if (milli)
        exp10 += 3;
    u128 num = mant, den = 1;
    for (int k = 0; k < exp2; k++) {
        if (num > LIMIT / 2)
            return FG_ETOOBIG;
        num *= 2;
    }
    for (; exp10 > 0; exp10--) {
        if (num > LIMIT / 10)
            return FG_ETOOBIG;
        num *= 10;
    }
    for (; exp10 < 0 && den <= LIMIT / 10; exp10++)
        den *= 10;
    u128 q;
    if (exp10 < 0) /* the divisor passed 10^37: any non-zero value is below one unit */
        q = num > 0 ? 1 : 0;
    else
        q = num / den + (num % den != 0 ? 1 : 0); /* round up, as Kubernetes does */
    if (q > (u128)INT64_MAX)
        return FG_ETOOBIG;
    *out = neg ? -(int64_t)q : (int64_t)q;
    return FG_OK;
}
