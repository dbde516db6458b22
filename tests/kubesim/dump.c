/* dump: compact JSON text of a tree, byte for byte what jansson's
 * json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) writes, in one growing buffer.
 *
 * Every stored version is serialised once (store.c) and every controller call sends a body, so
 * this is kubesim's hottest encoder; jansson's goes through a callback per piece and snprintf per
 * integer. The rules kept: members in insertion order, no spaces, strings escaped as jansson does
 * (`"` `\` and the control characters: \b \f \n \r \t or \u00XX in upper-case hex; `/` and
 * non-ASCII bytes as they are), integers in decimal. Reals are left to jansson (its shortest
 * round-trip form), as they are rare in Kubernetes objects. */
#include <stdlib.h>
#include <string.h>

#include "ks.h"

typedef struct {
    char *p;
    size_t len;
    size_t cap;
} out_t;

static void reserve(out_t *o, size_t n) {
    if (o->len + n <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 4096; /* most objects fit: no regrowth */
    while (cap < o->len + n)
        cap *= 2;
    o->p = fg_xrealloc(o->p, cap);
    o->cap = cap;
}

static void put(out_t *o, const char *s, size_t n) {
    reserve(o, n);
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_c(out_t *o, char ch) {
    reserve(o, 1);
    o->p[o->len++] = ch;
}

/* The short escapes jansson writes; the other control characters get \u00XX. */
static const char SHORT_ESC[0x20] = {
    ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};

static void put_string(out_t *o, const char *s, size_t n) {
    static const char HEX[] = "0123456789ABCDEF";
    put_c(o, '"');
    size_t run = 0; /* start of the bytes copied as they are */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        put(o, s + run, i - run);
        run = i + 1;
        if (ch >= 0x20 || SHORT_ESC[ch] != 0) {
            char esc[2] = {'\\', ch >= 0x20 ? (char)ch : SHORT_ESC[ch]};
            put(o, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', HEX[ch >> 4], HEX[ch & 0xF]};
            put(o, esc, 6);
        }
    }
    put(o, s + run, n - run);
    put_c(o, '"');
}

static void put_int(out_t *o, json_int_t v) {
    char tmp[24];
    size_t k = sizeof(tmp);
    /* unsigned arithmetic so INT64_MIN negates without overflow */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        tmp[--k] = '-';
    put(o, tmp + k, sizeof(tmp) - k);
}

static void put_real(out_t *o, const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL)
        abort(); /* as fg_json_dumps: only on allocation failure */
    put(o, s, strlen(s));
    free(s);
}

static void put_value(out_t *o, const json_t *j) {
    switch (json_typeof(j)) {
        case JSON_OBJECT: {
            const char *k;
            json_t *v;
            bool first = true;
            put_c(o, '{');
            json_object_foreach((json_t *)j, k, v) {
                if (!first)
                    put_c(o, ',');
                first = false;
                put_string(o, k, json_object_iter_key_len(json_object_key_to_iter(k)));
                put_c(o, ':');
                put_value(o, v);
            }
            put_c(o, '}');
            break;
        }
        case JSON_ARRAY: {
            size_t i;
            json_t *v;
            put_c(o, '[');
            json_array_foreach(j, i, v) {
                if (i > 0)
                    put_c(o, ',');
                put_value(o, v);
            }
            put_c(o, ']');
            break;
        }
        case JSON_STRING:
            put_string(o, json_string_value(j), json_string_length(j));
            break;
        case JSON_INTEGER:
            put_int(o, json_integer_value(j));
            break;
        case JSON_REAL:
            put_real(o, j);
            break;
        case JSON_TRUE:
            put(o, "true", 4);
            break;
        case JSON_FALSE:
            put(o, "false", 5);
            break;
        case JSON_NULL:
            put(o, "null", 4);
            break;
    }
}

char *ks_json_dumps(const json_t *j, size_t *len_out) {
    out_t o = {0};
    put_value(&o, j);
    put_c(&o, '\0');
    if (len_out != NULL)
        *len_out = o.len - 1;
    return o.p;
}
