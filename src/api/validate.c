/* api/validate.c: request bodies checked against the contract, every wrong field collected. */
#include "validate.h"

#include "fleetgate/kube.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SHOWN_MAX 60 /* bytes of a wrong value quoted in a detail */

void vd_init(vd_t *v) {
    v->errors = json_array();
    v->n = 0;
}

void vd_free(vd_t *v) {
    json_decref(v->errors);
    v->errors = NULL;
}

void vd_add(vd_t *v, const char *pointer, const char *fmt, ...) {
    v->n++;
    if (json_array_size(v->errors) >= VD_MAX_ERRORS)
        return;
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_array_append_new(v->errors, json_pack("{s:s,s:s}", "pointer", pointer, "detail", detail));
}

bool vd_ok(const vd_t *v) {
    return v->n == 0;
}

int vd_reply(fg_req_t *req, vd_t *v) {
    json_t *ext = json_pack("{s:O}", "errors", v->errors);
    if (v->n == 1) {
        json_t *e = json_array_get(v->errors, 0);
        return fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext, "%s %s",
                                    json_string_value(json_object_get(e, "pointer")),
                                    json_string_value(json_object_get(e, "detail")));
    }
    return fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext, "%zu fields are invalid", v->n);
}

const char *vd_ptr(char *out, const char *base, const char *key) {
    size_t len = (size_t)snprintf(out, VD_PTR_MAX, "%s/", base);
    for (const char *p = key; *p && len + 3 < VD_PTR_MAX; p++) {
        if (*p == '~' || *p == '/') {
            out[len++] = '~';
            out[len++] = *p == '~' ? '0' : '1';
        } else {
            out[len++] = *p;
        }
    }
    out[len < VD_PTR_MAX ? len : VD_PTR_MAX - 1] = '\0';
    return out;
}

const char *vd_ptr_i(char *out, const char *base, size_t i) {
    snprintf(out, VD_PTR_MAX, "%s/%zu", base, i);
    return out;
}

/* A value as a detail shows it: compact JSON, cut. */
static void shown(const json_t *j, char *out, size_t len) {
    char *s = fg_json_dumps(j, NULL);
    if (strlen(s) > SHOWN_MAX)
        snprintf(out, len, "%.*s...", SHOWN_MAX - 3, s);
    else
        snprintf(out, len, "%s", s);
    free(s);
}

static bool in_list(const char *k, const char *const *list) {
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], k) == 0)
            return true;
    return false;
}

bool vd_object(vd_t *v, const json_t *o, const char *ptr, const char *const *allowed,
               const char *const *required) {
    char p[VD_PTR_MAX];
    if (!json_is_object(o)) {
        vd_add(v, ptr, "must be an object (got %s)", fg_json_type_name(o));
        return false;
    }
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)o, k, val) {
        if (!in_list(k, allowed))
            vd_add(v, vd_ptr(p, ptr, k), "is not a member of this object");
    }
    for (size_t i = 0; required && required[i]; i++)
        if (json_object_get(o, required[i]) == NULL)
            vd_add(v, vd_ptr(p, ptr, required[i]), "is required");
    return true; /* its members are worth checking even when some are wrong */
}

bool vd_string(vd_t *v, const json_t *s, const char *ptr, size_t min, size_t max) {
    char got[SHOWN_MAX + 8];
    if (s == NULL)
        return true;
    if (!json_is_string(s)) {
        vd_add(v, ptr, "must be a string (got %s)", fg_json_type_name(s));
        return false;
    }
    size_t n = json_string_length(s);
    if (n < min || n > max || strlen(json_string_value(s)) != n) {
        shown(s, got, sizeof got);
        vd_add(v, ptr, "must be %zu to %zu characters (got %s)", min, max, got);
        return false;
    }
    return true;
}

bool vd_dns_label(vd_t *v, const json_t *s, const char *ptr, size_t max) {
    char got[SHOWN_MAX + 8];
    if (s == NULL || !vd_string(v, s, ptr, 0, 1024))
        return s == NULL;
    const char *t = json_string_value(s);
    if (!fg_is_dns1123_label(t, strlen(t)) || strlen(t) > max) {
        shown(s, got, sizeof got);
        vd_add(v, ptr,
               "must be a DNS-1123 label: lower-case letters, digits and -, at most %zu (got %s)",
               max, got);
        return false;
    }
    return true;
}

bool vd_int(vd_t *v, const json_t *n, const char *ptr, int64_t lo, int64_t hi) {
    if (n == NULL)
        return true;
    if (!json_is_integer(n)) {
        vd_add(v, ptr, "must be an integer (got %s)", fg_json_type_name(n));
        return false;
    }
    json_int_t x = json_integer_value(n);
    if (x < lo || x > hi) {
        vd_add(v, ptr, "must be from %lld to %lld (got %lld)", (long long)lo, (long long)hi,
               (long long)x);
        return false;
    }
    return true;
}

bool vd_bool(vd_t *v, const json_t *b, const char *ptr) {
    if (b == NULL || json_is_boolean(b))
        return true;
    vd_add(v, ptr, "must be true or false (got %s)", fg_json_type_name(b));
    return false;
}

bool vd_enum(vd_t *v, const json_t *s, const char *ptr, const char *const *values) {
    char got[SHOWN_MAX + 8], list[256] = "";
    if (s == NULL)
        return true;
    if (json_is_string(s) && in_list(json_string_value(s), values))
        return true;
    size_t len = 0;
    for (size_t i = 0; values[i] && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", values[i]);
    shown(s, got, sizeof got);
    vd_add(v, ptr, "must be one of %s (got %s)", list, got);
    return false;
}

/* [A-Za-z0-9] at both ends, [-A-Za-z0-9_.] between, at most 63: a label name or value. */
static bool label_word(const char *s, size_t n, bool empty_ok) {
    if (n == 0)
        return empty_ok;
    if (n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

bool vd_labels(vd_t *v, const json_t *o, const char *ptr) {
    char p[VD_PTR_MAX], got[SHOWN_MAX + 8];
    size_t before = v->n;
    if (o == NULL)
        return true;
    if (!json_is_object(o)) {
        vd_add(v, ptr, "must be an object (got %s)", fg_json_type_name(o));
        return false;
    }
    if (json_object_size(o) > 64)
        vd_add(v, ptr, "must have at most 64 labels (got %zu)", json_object_size(o));
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)o, k, val) {
        vd_ptr(p, ptr, k);
        const char *slash = strchr(k, '/');
        const char *name = slash ? slash + 1 : k;
        bool prefix_ok =
            slash == NULL || (slash > k && fg_is_dns1123_chars(k, (size_t)(slash - k), 253));
        if (!prefix_ok || !label_word(name, strlen(name), false))
            vd_add(v, p,
                   "is not a label key: an optional DNS prefix and /, then 1 to 63 of "
                   "[A-Za-z0-9._-] starting and ending alphanumeric");
        else if (slash && strncmp(k, "fleetgate.io/", 13) == 0)
            vd_add(v, p, "the prefix fleetgate.io/ is reserved");
        if (!json_is_string(val) ||
            !label_word(json_string_value(val), json_string_length(val), true)) {
            shown(val, got, sizeof got);
            vd_add(v, p, "must be a label value: at most 63 of [A-Za-z0-9._-] (got %s)", got);
        }
    }
    return v->n == before;
}

bool vd_quantity(vd_t *v, const json_t *s, const char *ptr, bool cpu, int64_t *out) {
    char got[SHOWN_MAX + 8];
    if (s == NULL)
        return true;
    const char *t = json_string_value(s);
    size_t n = t ? strlen(t) : 0;
    bool ok = t != NULL && n > 0 && n <= 32;
    /* The contract's patterns: cpu ^([0-9]+(\.[0-9]{1,3})?|[0-9]+m)$, memory
     * ^[0-9]+(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$ ; the value then comes from kube/'s parser. */
    size_t i = 0;
    while (ok && i < n && t[i] >= '0' && t[i] <= '9')
        i++;
    ok = ok && i > 0;
    if (ok && cpu) {
        if (i < n && t[i] == 'm')
            ok = i + 1 == n;
        else if (i < n && t[i] == '.') {
            size_t d = n - i - 1;
            ok = d >= 1 && d <= 3;
            for (size_t j = i + 1; ok && j < n; j++)
                ok = t[j] >= '0' && t[j] <= '9';
        } else
            ok = i == n;
    } else if (ok) {
        static const char *const units[] = {"",  "Ki", "Mi", "Gi", "Ti", "Pi",
                                            "k", "M",  "G",  "T",  "P",  NULL};
        ok = in_list(t + i, units);
    }
    int64_t val = 0;
    if (ok)
        ok = fg_kube_quantity_parse(t, n, cpu, &val) == FG_OK;
    if (!ok) {
        shown(s, got, sizeof got);
        vd_add(v, ptr, "must be a %s quantity such as %s (got %s)", cpu ? "CPU" : "memory",
               cpu ? "500m or 2" : "512Mi", got);
        return false;
    }
    if (out)
        *out = val;
    return true;
}
