/* kube/translate.c: Kubernetes objects -> fleetgate's simplified model, one table per kind.
 *
 * A row says: output field, where it comes from in the Kubernetes object (a dotted path;
 * "a|b" tries a, then b), and a converter. Generic converters cover strings, numbers with
 * defaults, booleans, filtered label maps, quantities, condition lists and arrays of objects
 * (each element through a sub-table); the few rows no path can express (the pod's app, the
 * merge of container specs with their statuses, a job's state, namespace quotas) have small
 * custom converters. cache/SCHEMA.md documents every row; keep the two in step.
 *
 * Rules every row follows: JSON null counts as absent; an absent source omits the field (or
 * writes the row's default); a source of the wrong type fails the whole translation with
 * "PATH: not a T (got U)", so a broken cluster answer is refused, never half-stored; every
 * array and map emitted is bounded (FG_KUBE_MAX_*), and strings are cut at
 * MAX_STRING bytes on a UTF-8 boundary.
 */
#include "fleetgate/kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRING      16384 /* longest string emitted (messages); names are far shorter */
#define MAX_STATUS_SCAN 4096  /* container statuses looked through for a name */
#define MAX_PATH_TEXT   256

typedef struct {
    const json_t *root;
    const fg_kube_origin_t *origin;
    char *err;
    size_t errlen;
} xlate_t;

typedef struct row row_t;

/* v: the value found at the row's path (NULL when absent); vpath: its full path, for
 * messages; src: the object the row's path is relative to. Writes into out; FG_OK or
 * FG_EINVAL with x->err set. */
typedef int (*conv_fn)(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                       const json_t *src, json_t *out);

enum {
    REQUIRED = 1u << 0, /* absent is an error */
    IF_UNSET = 1u << 1, /* skip when an earlier row already wrote the field */
};

struct row {
    const char *field;
    const char *path; /* NULL: the converter reads src (or x->root) itself */
    conv_fn conv;
    unsigned flags;
    const void *arg;
};

typedef struct {
    const row_t *rows;
    size_t n;
} table_t;

#define TABLE(r)                                                                                   \
    { r, sizeof r / sizeof r[0] }

/* Rows name what they hold: one macro per common shape, ROW for a converter of its own (path
 * and arg may be NULL), designated initialisers for anything else (flags). */
#define ROW(f, p, c, a)                                                                            \
    { .field = (f), .path = (p), .conv = (c), .arg = (a) }
#define STR(f, p) ROW(f, p, c_str, NULL)
#define REQ_STR(f, p)                                                                              \
    { .field = (f), .path = (p), .conv = c_str, .flags = REQUIRED }
#define INT(f, p)         ROW(f, p, c_int, NULL)
#define INT_OR(f, p, d)   ROW(f, p, c_int, &(d))           /* d: the default when absent */
#define BOOL_OR(f, p, d)  ROW(f, p, c_bool, &(d))          /* d: the default when absent */
#define OBJ(f, p, t)      ROW(f, p, c_object, &(t))        /* t: const table_t */
#define LIST(f, p, spec)  ROW(f, p, c_list, &(spec))       /* spec: const list_spec_t */
#define CONDS(f, p, spec) ROW(f, p, c_conditions, &(spec)) /* spec: const cond_spec_t */

/* An array of objects, each through a sub-table. */
typedef struct {
    table_t t;
    size_t max;
} list_spec_t;

/* ---- errors and small helpers ------------------------------------------ */

static int bad(xlate_t *x, const char *path, const char *what, const json_t *got) {
    if (got != NULL)
        snprintf(x->err, x->errlen, "%s: %s (got %s)", path, what, fg_json_type_name(got));
    else
        snprintf(x->err, x->errlen, "%s: %s", path, what);
    return FG_EINVAL;
}

static void join_path(char *buf, size_t buflen, const char *prefix, const char *path, size_t n) {
    if (prefix[0] != '\0')
        snprintf(buf, buflen, "%s.%.*s", prefix, (int)n, path);
    else
        snprintf(buf, buflen, "%.*s", (int)n, path);
}

/* A new JSON string of s, cut to MAX_STRING bytes without splitting a UTF-8 sequence.
 * NULL when the text is not UTF-8 (jansson refuses it; cannot happen for loaded JSON). */
static json_t *bounded_string(const char *s, size_t len) {
    if (len > MAX_STRING) {
        len = MAX_STRING;
        while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    return json_stringn(s, len);
}

static void set_new(json_t *out, const char *field, json_t *v) {
    if (v != NULL)
        json_object_set_new(out, field, v); /* steals v */
}

/* Finds a dotted path (one alternative) under src. *v = NULL when absent or null. FG_EINVAL
 * when an intermediate step exists but is not an object. */
static int lookup_one(xlate_t *x, const json_t *src, const char *prefix, const char *path,
                      size_t len, const json_t **v) {
    const json_t *cur = src;
    size_t i = 0;
    *v = NULL;
    while (i < len) {
        size_t j = i;
        while (j < len && path[j] != '.')
            j++;
        if (!json_is_object(cur)) {
            char where[MAX_PATH_TEXT];
            join_path(where, sizeof where, prefix, path, i > 0 ? i - 1 : 0);
            return bad(x, where, "not an object", cur);
        }
        char key[128];
        if (j - i >= sizeof key)
            return bad(x, path, "path segment too long", NULL);
        memcpy(key, path + i, j - i);
        key[j - i] = '\0';
        cur = json_object_get(cur, key);
        if (cur == NULL || json_is_null(cur))
            return FG_OK;
        i = j + 1;
    }
    *v = cur;
    return FG_OK;
}

/* Finds the first present alternative of "a|b|c"; vpath gets its full path. */
static int lookup(xlate_t *x, const json_t *src, const char *prefix, const char *path,
                  const json_t **v, char *vpath, size_t vpathlen) {
    const char *alt = path;
    *v = NULL;
    for (;;) {
        const char *bar = strchr(alt, '|');
        size_t n = bar ? (size_t)(bar - alt) : strlen(alt);
        int rc = lookup_one(x, src, prefix, alt, n, v);
        if (rc != FG_OK)
            return rc;
        if (*v != NULL || bar == NULL) {
            join_path(vpath, vpathlen, prefix, alt, n);
            return FG_OK;
        }
        alt = bar + 1;
    }
}

static int apply(xlate_t *x, const table_t *t, const json_t *src, const char *prefix, json_t *out) {
    for (size_t i = 0; i < t->n; i++) {
        const row_t *r = &t->rows[i];
        const json_t *v = NULL;
        char vpath[MAX_PATH_TEXT];
        snprintf(vpath, sizeof vpath, "%s", prefix);
        if ((r->flags & IF_UNSET) && json_object_get(out, r->field) != NULL)
            continue;
        if (r->path != NULL) {
            int rc = lookup(x, src, prefix, r->path, &v, vpath, sizeof vpath);
            if (rc != FG_OK)
                return rc;
            if (v == NULL && (r->flags & REQUIRED))
                return bad(x, vpath, "missing", NULL);
        }
        int rc = r->conv(x, r, v, vpath, src, out);
        if (rc != FG_OK)
            return rc;
    }
    return FG_OK;
}

/* Finds the string value of key in a string map (borrowed; NULL when absent or not a string). */
static const char *map_str(const json_t *map, const char *key) {
    const json_t *v = json_is_object(map) ? json_object_get(map, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- generic converters ------------------------------------------------ */

static int c_str(xlate_t *x, const row_t *r, const json_t *v, const char *vpath, const json_t *src,
                 json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_string(v))
        return bad(x, vpath, "not a string", v);
    set_new(out, r->field, bounded_string(json_string_value(v), json_string_length(v)));
    return FG_OK;
}

static const int64_t ZERO = 0, ONE = 1;
static const bool NO = false;

/* Integer; arg: const int64_t * default written when absent (NULL: omit). */
static int c_int(xlate_t *x, const row_t *r, const json_t *v, const char *vpath, const json_t *src,
                 json_t *out) {
    (void)src;
    const int64_t *dflt = r->arg;
    if (v == NULL) {
        if (dflt != NULL)
            set_new(out, r->field, json_integer(*dflt));
        return FG_OK;
    }
    if (!json_is_integer(v))
        return bad(x, vpath, "not an integer", v);
    set_new(out, r->field, json_integer(json_integer_value(v)));
    return FG_OK;
}

/* Boolean; arg: const bool * default written when absent (NULL: omit). */
static int c_bool(xlate_t *x, const row_t *r, const json_t *v, const char *vpath, const json_t *src,
                  json_t *out) {
    (void)src;
    const bool *dflt = r->arg;
    if (v == NULL) {
        if (dflt != NULL)
            set_new(out, r->field, json_boolean(*dflt));
        return FG_OK;
    }
    if (!json_is_boolean(v))
        return bad(x, vpath, "not a boolean", v);
    set_new(out, r->field, json_boolean(json_is_true(v)));
    return FG_OK;
}

/* IntOrString (maxSurge: 1 or "25%"). */
static int c_int_or_str(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                        const json_t *src, json_t *out) {
    if (v != NULL && json_is_integer(v)) {
        set_new(out, r->field, json_integer(json_integer_value(v)));
        return FG_OK;
    }
    if (v != NULL && !json_is_string(v))
        return bad(x, vpath, "not an integer or a string", v);
    return c_str(x, r, v, vpath, src, out);
}

static int c_origin_cluster(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                            const json_t *src, json_t *out) {
    (void)v, (void)vpath, (void)src;
    if (x->origin != NULL && x->origin->cluster != NULL)
        set_new(out, r->field, json_string(x->origin->cluster));
    return FG_OK;
}

static int c_origin_zone(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                         const json_t *src, json_t *out) {
    (void)v, (void)vpath, (void)src;
    if (x->origin != NULL && x->origin->zone != NULL)
        set_new(out, r->field, json_string(x->origin->zone));
    return FG_OK;
}

/* Labels a developer does not care about: controller plumbing and deprecated duplicates.
 * An entry ending in '/' drops every key with that prefix. */
static const char *const dropped_labels[] = {
    "pod-template-hash",
    "controller-revision-hash",
    "pod-template-generation",
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
    "kubernetes.io/metadata.name",
    "beta.kubernetes.io/",
    "failure-domain.beta.kubernetes.io/",
    "node-role.kubernetes.io/",
};

static bool label_dropped(const char *key) {
    for (size_t i = 0; i < sizeof dropped_labels / sizeof dropped_labels[0]; i++) {
        const char *d = dropped_labels[i];
        size_t n = strlen(d);
        if (d[n - 1] == '/' ? strncmp(key, d, n) == 0 : strcmp(key, d) == 0)
            return true;
    }
    return false;
}

/* A string map (labels) without the plumbing keys, at most FG_KUBE_MAX_LABELS entries. */
static int c_labels(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                    const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    json_t *m = json_object();
    size_t kept = 0, omitted = 0;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val)) {
            char where[MAX_PATH_TEXT];
            snprintf(where, sizeof where, "%s[\"%.64s\"]", vpath, key);
            json_decref(m);
            return bad(x, where, "not a string", val);
        }
        if (label_dropped(key))
            continue;
        if (kept == FG_KUBE_MAX_LABELS) {
            omitted++;
            continue;
        }
        json_object_set_new(m, key,
                            bounded_string(json_string_value(val), json_string_length(val)));
        kept++;
    }
    if (kept > 0)
        json_object_set_new(out, r->field, m);
    else
        json_decref(m);
    if (omitted > 0) {
        char f[64];
        snprintf(f, sizeof f, "%sOmitted", r->field);
        json_object_set_new(out, f, json_integer((json_int_t)omitted));
    }
    return FG_OK;
}

/* One key of a string map (arg: "key|other-key"), as a string. */
static int c_map_key(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                     const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    const char *alt = r->arg;
    for (;;) {
        const char *bar = strchr(alt, '|');
        size_t n = bar ? (size_t)(bar - alt) : strlen(alt);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)n, alt);
        const json_t *s = json_object_get(v, key);
        if (s != NULL && !json_is_null(s)) {
            if (!json_is_string(s)) {
                char where[MAX_PATH_TEXT];
                snprintf(where, sizeof where, "%s[\"%s\"]", vpath, key);
                return bad(x, where, "not a string", s);
            }
            set_new(out, r->field, bounded_string(json_string_value(s), json_string_length(s)));
            return FG_OK;
        }
        if (bar == NULL)
            return FG_OK;
        alt = bar + 1;
    }
}

/* One key of a string map holding a decimal integer (an annotation such as the revision).
 * A value that is not a number is left out: annotations are free text. */
static int c_map_key_int(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                         const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    const char *s = map_str(v, r->arg);
    int64_t n;
    if (s != NULL && fg_parse_int64(s, strlen(s), 0, INT64_MAX, &n) == FG_OK)
        set_new(out, r->field, json_integer(n));
    return FG_OK;
}

/* An object through a sub-table (arg: const table_t *); omitted when it comes out empty. */
static int c_object(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                    const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    json_t *o = json_object();
    int rc = apply(x, r->arg, v, vpath, o);
    if (rc == FG_OK && json_object_size(o) > 0) {
        json_object_set_new(out, r->field, o);
        return FG_OK;
    }
    json_decref(o);
    return rc;
}

/* Fields of the same source object gathered under one output key (arg: const table_t *). */
static int c_group(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                   const json_t *src, json_t *out) {
    (void)v, (void)vpath;
    json_t *o = json_object();
    int rc = apply(x, r->arg, src, "", o);
    if (rc == FG_OK)
        json_object_set_new(out, r->field, o);
    else
        json_decref(o);
    return rc;
}

/* A sub-table applied to the same object, its fields written beside the row's (arg: const
 * table_t *): rows shared by several kinds, such as the identity, live in one table. */
static int c_inline(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                    const json_t *src, json_t *out) {
    (void)v;
    return apply(x, r->arg, src, vpath, out);
}

static void set_omitted(json_t *out, const char *field, size_t omitted) {
    if (omitted == 0)
        return;
    char f[64];
    snprintf(f, sizeof f, "%sOmitted", field);
    json_object_set_new(out, f, json_integer((json_int_t)omitted));
}

/* An array of objects, each through a sub-table (arg: const list_spec_t *). */
static int c_list(xlate_t *x, const row_t *r, const json_t *v, const char *vpath, const json_t *src,
                  json_t *out) {
    (void)src;
    const list_spec_t *spec = r->arg;
    if (v == NULL)
        return FG_OK;
    if (!json_is_array(v))
        return bad(x, vpath, "not an array", v);
    json_t *a = json_array();
    size_t n = json_array_size(v);
    for (size_t i = 0; i < n && i < spec->max; i++) {
        const json_t *e = json_array_get(v, i);
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s[%zu]", vpath, i);
        if (!json_is_object(e)) {
            json_decref(a);
            return bad(x, where, "not an object", e);
        }
        json_t *o = json_object();
        int rc = apply(x, &spec->t, e, where, o);
        if (rc != FG_OK) {
            json_decref(o);
            json_decref(a);
            return rc;
        }
        json_array_append_new(a, o);
    }
    if (json_array_size(a) > 0)
        json_object_set_new(out, r->field, a);
    else
        json_decref(a);
    set_omitted(out, r->field, n > spec->max ? n - spec->max : 0);
    return FG_OK;
}

/* An array of strings, or of objects whose string field arg is taken (podIPs[].ip). */
static int c_str_list(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                      const json_t *src, json_t *out) {
    (void)src;
    const char *sub = r->arg;
    if (v == NULL)
        return FG_OK;
    if (!json_is_array(v))
        return bad(x, vpath, "not an array", v);
    json_t *a = json_array();
    size_t n = json_array_size(v);
    for (size_t i = 0; i < n && i < FG_KUBE_MAX_LIST_ITEMS; i++) {
        const json_t *e = json_array_get(v, i);
        if (sub != NULL && json_is_object(e))
            e = json_object_get(e, sub);
        if (!json_is_string(e)) {
            char where[MAX_PATH_TEXT];
            snprintf(where, sizeof where, "%s[%zu]%s%s", vpath, i, sub ? "." : "", sub ? sub : "");
            json_decref(a);
            return bad(x, where, "not a string", e);
        }
        json_array_append_new(a, bounded_string(json_string_value(e), json_string_length(e)));
    }
    if (json_array_size(a) > 0)
        json_object_set_new(out, r->field, a);
    else
        json_decref(a);
    set_omitted(out, r->field, n > FG_KUBE_MAX_LIST_ITEMS ? n - FG_KUBE_MAX_LIST_ITEMS : 0);
    return FG_OK;
}

/* A single string as a one-element list (the pre-dual-stack podIP). */
static int c_str_as_list(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                         const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_string(v))
        return bad(x, vpath, "not a string", v);
    json_t *a = json_array();
    json_array_append_new(a, bounded_string(json_string_value(v), json_string_length(v)));
    json_object_set_new(out, r->field, a);
    return FG_OK;
}

/* ---- quantities -------------------------------------------------------- */

/* Resources whose quantities are kept (as strings) and normalised (as numbers). */
static const struct {
    const char *resource; /* Kubernetes resource name */
    const char *unit_key; /* key in a "…Units" object, NULL: string only */
    bool milli;
} resources[] = {
    {"cpu", "cpuMilli", true},        {"memory", "memoryBytes", false},
    {"nvidia.com/gpu", "gpu", false}, {"ephemeral-storage", NULL, false},
    {"pods", "pods", false},
};

#define NRESOURCES (sizeof resources / sizeof resources[0])

/* Reads a resource map: each kept entry's string into strings (may be NULL) and its value
 * into units[]; FG_EINVAL for a value that is not a quantity. */
static int read_resources(xlate_t *x, const json_t *v, const char *vpath, json_t *strings,
                          int64_t units[NRESOURCES], bool present[NRESOURCES]) {
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    for (size_t k = 0; k < NRESOURCES; k++) {
        const json_t *q = json_object_get(v, resources[k].resource);
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s[\"%s\"]", vpath, resources[k].resource);
        if (q == NULL || json_is_null(q))
            continue;
        if (!json_is_string(q))
            return bad(x, where, "not a quantity string", q);
        int64_t n;
        if (fg_kube_quantity_parse(json_string_value(q), json_string_length(q), resources[k].milli,
                                   &n) != FG_OK) {
            snprintf(x->err, x->errlen, "%s: not a quantity (got \"%.32s\")", where,
                     json_string_value(q));
            return FG_EINVAL;
        }
        units[k] += n;
        present[k] = true;
        if (strings != NULL)
            json_object_set_new(strings, resources[k].resource,
                                json_stringn(json_string_value(q), json_string_length(q)));
    }
    return FG_OK;
}

static json_t *units_object(const int64_t units[NRESOURCES], const bool present[NRESOURCES],
                            bool all) {
    json_t *o = json_object();
    for (size_t k = 0; k < NRESOURCES; k++)
        if (resources[k].unit_key != NULL && (all || present[k]))
            json_object_set_new(o, resources[k].unit_key, json_integer(units[k]));
    return o;
}

/* A resource map's kept entries, as the strings Kubernetes gave. */
static int c_quantities(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                        const json_t *src, json_t *out) {
    (void)src;
    int64_t units[NRESOURCES] = {0};
    bool present[NRESOURCES] = {false};
    if (v == NULL)
        return FG_OK;
    json_t *s = json_object();
    int rc = read_resources(x, v, vpath, s, units, present);
    if (rc == FG_OK && json_object_size(s) > 0) {
        json_object_set_new(out, r->field, s);
        return FG_OK;
    }
    json_decref(s);
    return rc;
}

/* A resource map normalised: {cpuMilli, memoryBytes, gpu, pods}, zeros included. */
static int c_units(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                   const json_t *src, json_t *out) {
    (void)src;
    int64_t units[NRESOURCES] = {0};
    bool present[NRESOURCES] = {false};
    if (v == NULL)
        return FG_OK;
    int rc = read_resources(x, v, vpath, NULL, units, present);
    if (rc == FG_OK)
        json_object_set_new(out, r->field, units_object(units, present, true));
    return rc;
}

/* Sum over a container list of resources.<arg> ("requests" or "limits"), normalised, without
 * pods; written only when some container sets one. */
static int c_container_totals(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                              const json_t *src, json_t *out) {
    (void)src;
    int64_t units[NRESOURCES] = {0};
    bool present[NRESOURCES] = {false};
    bool any = false;
    if (v == NULL || !json_is_array(v))
        return FG_OK; /* the containers row reports the type error */
    for (size_t i = 0; i < json_array_size(v) && i < FG_KUBE_MAX_CONTAINERS; i++) {
        const json_t *res = json_object_get(json_array_get(v, i), "resources");
        const json_t *m = json_is_object(res) ? json_object_get(res, r->arg) : NULL;
        if (m == NULL || json_is_null(m))
            continue;
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s[%zu].resources.%s", vpath, i, (const char *)r->arg);
        int rc = read_resources(x, m, where, NULL, units, present);
        if (rc != FG_OK)
            return rc;
    }
    present[NRESOURCES - 1] = false; /* "pods" means nothing for a pod */
    for (size_t k = 0; k < NRESOURCES; k++)
        any = any || (present[k] && resources[k].unit_key != NULL);
    if (any)
        json_object_set_new(out, r->field, units_object(units, present, false));
    return FG_OK;
}

/* ---- conditions -------------------------------------------------------- */

/* The condition types a kind keeps. Each is kept whatever its status: a condition explains a
 * state by its reason and message as much when True (PodScheduled: where and since when) as
 * when not (Ready=False: why). */
typedef struct {
    const char *const *types;
    size_t n;
} cond_spec_t;

#define COND_SPEC(...)                                                                             \
    {                                                                                              \
        (const char *const[]){__VA_ARGS__},                                                        \
            sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)                      \
    }

static const row_t condition_rows[] = {
    REQ_STR("type", "type"),   REQ_STR("status", "status"),        STR("reason", "reason"),
    STR("message", "message"), STR("since", "lastTransitionTime"),
};
static const table_t condition_table = TABLE(condition_rows);

/* The conditions that matter (arg: const cond_spec_t *), in the order Kubernetes lists them. */
static int c_conditions(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                        const json_t *src, json_t *out) {
    (void)src;
    const cond_spec_t *spec = r->arg;
    if (v == NULL)
        return FG_OK;
    if (!json_is_array(v))
        return bad(x, vpath, "not an array", v);
    json_t *a = json_array();
    for (size_t i = 0; i < json_array_size(v) && i < FG_KUBE_MAX_LIST_ITEMS; i++) {
        const json_t *c = json_array_get(v, i);
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s[%zu]", vpath, i);
        if (!json_is_object(c)) {
            json_decref(a);
            return bad(x, where, "not an object", c);
        }
        const char *type = map_str(c, "type");
        size_t k;
        for (k = 0; k < spec->n; k++)
            if (type != NULL && strcmp(type, spec->types[k]) == 0)
                break;
        if (k == spec->n)
            continue;
        json_t *o = json_object();
        int rc = apply(x, &condition_table, c, where, o);
        if (rc != FG_OK) {
            json_decref(o);
            json_decref(a);
            return rc;
        }
        json_array_append_new(a, o);
    }
    if (json_array_size(a) > 0)
        json_object_set_new(out, r->field, a);
    else
        json_decref(a);
    return FG_OK;
}

/* Whether the condition of type arg has status "True"; false when absent. */
static bool condition_true(const json_t *conds, const char *type) {
    if (!json_is_array(conds))
        return false;
    for (size_t i = 0; i < json_array_size(conds) && i < FG_KUBE_MAX_LIST_ITEMS; i++) {
        const json_t *c = json_array_get(conds, i);
        const char *t = map_str(c, "type");
        const char *s = map_str(c, "status");
        if (t != NULL && strcmp(t, type) == 0)
            return s != NULL && strcmp(s, "True") == 0;
    }
    return false;
}

static int c_condition_true(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                            const json_t *src, json_t *out) {
    (void)src;
    if (v != NULL && !json_is_array(v))
        return bad(x, vpath, "not an array", v);
    set_new(out, r->field, json_boolean(condition_true(v, r->arg)));
    return FG_OK;
}

/* ---- owners ------------------------------------------------------------ */

/* The controller owner reference (controller: true), or NULL. FG_EINVAL on a wrong shape. */
static int controller_owner(xlate_t *x, const json_t **owner) {
    const json_t *meta = json_object_get(x->root, "metadata");
    const json_t *refs = json_object_get(meta, "ownerReferences");
    *owner = NULL;
    if (refs == NULL || json_is_null(refs))
        return FG_OK;
    if (!json_is_array(refs))
        return bad(x, "metadata.ownerReferences", "not an array", refs);
    for (size_t i = 0; i < json_array_size(refs) && i < FG_KUBE_MAX_LIST_ITEMS; i++) {
        const json_t *o = json_array_get(refs, i);
        if (!json_is_object(o)) {
            char where[MAX_PATH_TEXT];
            snprintf(where, sizeof where, "metadata.ownerReferences[%zu]", i);
            return bad(x, where, "not an object", o);
        }
        if (json_is_true(json_object_get(o, "controller")) && map_str(o, "kind") != NULL &&
            map_str(o, "name") != NULL) {
            *owner = o;
            return FG_OK;
        }
    }
    return FG_OK;
}

/* The controller owner's name when its kind is arg (a Job's CronJob, a Pod's Job). */
static int c_owner(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                   const json_t *src, json_t *out) {
    (void)v, (void)vpath, (void)src;
    const json_t *owner;
    int rc = controller_owner(x, &owner);
    if (rc == FG_OK && owner != NULL && strcmp(map_str(owner, "kind"), r->arg) == 0)
        set_new(out, r->field, json_string(map_str(owner, "name")));
    return rc;
}

/* ---- pods -------------------------------------------------------------- */

/* A pod's app: the Deployment that owns it, read from its ReplicaSet's name ("<deployment>-
 * <pod-template-hash>"), because fleetgate's apps are Deployments; else none. An `app` label
 * is not an app (a DaemonSet's pods carry `app: kindnet`): it stays in the labels. */
static int c_pod_app(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                     const json_t *src, json_t *out) {
    (void)v, (void)vpath, (void)src;
    const json_t *owner;
    const json_t *labels = json_object_get(json_object_get(x->root, "metadata"), "labels");
    int rc = controller_owner(x, &owner);
    if (rc != FG_OK)
        return rc;
    const char *hash = map_str(labels, "pod-template-hash");
    if (owner != NULL && hash != NULL && strcmp(map_str(owner, "kind"), "ReplicaSet") == 0) {
        const char *rs = map_str(owner, "name");
        size_t n = strlen(rs), h = strlen(hash);
        if (n > h + 1 && rs[n - h - 1] == '-' && strcmp(rs + n - h, hash) == 0) {
            set_new(out, r->field, json_stringn(rs, n - h - 1));
            return FG_OK;
        }
    }
    return FG_OK;
}

/* A container state ({running|waiting|terminated: {...}}) flattened into its container. */
static int c_container_state(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                             const json_t *src, json_t *out) {
    (void)r, (void)src;
    static const char *const states[] = {"running", "waiting", "terminated"};
    static const row_t detail_rows[] = {
        STR("reason", "reason"),       STR("message", "message"),       INT("exitCode", "exitCode"),
        STR("startedAt", "startedAt"), STR("finishedAt", "finishedAt"),
    };
    static const table_t details = TABLE(detail_rows);
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        const json_t *d = json_object_get(v, states[i]);
        if (d == NULL || json_is_null(d))
            continue;
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s.%s", vpath, states[i]);
        if (!json_is_object(d))
            return bad(x, where, "not an object", d);
        json_object_set_new(out, "state", json_string(states[i]));
        return apply(x, &details, d, where, out);
    }
    return FG_OK;
}

static const row_t last_termination_rows[] = {
    STR("reason", "reason"),
    INT("exitCode", "exitCode"),
    STR("finishedAt", "finishedAt"),
};
static const table_t last_termination_table = TABLE(last_termination_rows);

static const row_t resources_rows[] = {
    ROW("requests", "requests", c_quantities, NULL),
    ROW("limits", "limits", c_quantities, NULL),
};
static const table_t resources_table = TABLE(resources_rows);

/* A string, left out when it is the API's default (arg): most ports are TCP, and a pod has
 * several, so the cached pod stays small. */
static int c_str_unless(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                        const json_t *src, json_t *out) {
    if (json_is_string(v) && strcmp(json_string_value(v), r->arg) == 0)
        return FG_OK;
    return c_str(x, r, v, vpath, src, out);
}

/* A container port, named as the API's ContainerPort (protocol only when not TCP). */
static const row_t port_rows[] = {
    STR("name", "name"),
    {.field = "containerPort", .path = "containerPort", .conv = c_int, .flags = REQUIRED},
    ROW("protocol", "protocol", c_str_unless, "TCP"),
};
static const list_spec_t ports = {TABLE(port_rows), FG_KUBE_MAX_LIST_ITEMS};

/* What a container's spec contributes. */
static const row_t container_spec_rows[] = {
    REQ_STR("name", "name"),
    STR("image", "image"),
    OBJ("resources", "resources", resources_table),
    LIST("ports", "ports", ports),
};
static const table_t container_spec_table = TABLE(container_spec_rows);

/* What its status contributes. */
static const row_t container_status_rows[] = {
    ROW("state", "state", c_container_state, NULL),
    STR("imageID", "imageID"), /* the digest actually running, beside the spec's image */
    BOOL_OR("ready", "ready", NO),
    INT_OR("restarts", "restartCount", ZERO),
    OBJ("lastTermination", "lastState.terminated", last_termination_table),
};
static const table_t container_status_table = TABLE(container_status_rows);

typedef struct {
    const char *spec_path;   /* under the pod */
    const char *status_path; /* under the pod */
} container_source_t;

static const container_source_t regular_containers = {"spec.containers",
                                                      "status.containerStatuses"};
static const container_source_t init_containers = {"spec.initContainers",
                                                   "status.initContainerStatuses"};

/* The index of the status of the container called name, or -1. */
static long status_of(const json_t *statuses, const char *name) {
    size_t n = json_is_array(statuses) ? json_array_size(statuses) : 0;
    for (size_t i = 0; i < n && i < MAX_STATUS_SCAN; i++) {
        const char *s = map_str(json_array_get(statuses, i), "name");
        if (s != NULL && strcmp(s, name) == 0)
            return (long)i;
    }
    return -1;
}

/* Containers: each spec entry (name, image, resources) merged with its status by name. */
static int c_pod_containers(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                            const json_t *src, json_t *out) {
    (void)v, (void)vpath;
    const container_source_t *cs = r->arg;
    const json_t *specs, *statuses;
    char spath[MAX_PATH_TEXT], stpath[MAX_PATH_TEXT];
    int rc = lookup(x, src, "", cs->spec_path, &specs, spath, sizeof spath);
    if (rc == FG_OK)
        rc = lookup(x, src, "", cs->status_path, &statuses, stpath, sizeof stpath);
    if (rc != FG_OK)
        return rc;
    if (specs == NULL)
        return FG_OK;
    if (!json_is_array(specs))
        return bad(x, spath, "not an array", specs);
    if (statuses != NULL && !json_is_array(statuses))
        return bad(x, stpath, "not an array", statuses);
    json_t *a = json_array();
    size_t n = json_array_size(specs);
    for (size_t i = 0; i < n && i < FG_KUBE_MAX_CONTAINERS; i++) {
        const json_t *spec = json_array_get(specs, i);
        char where[MAX_PATH_TEXT];
        snprintf(where, sizeof where, "%s[%zu]", spath, i);
        if (!json_is_object(spec)) {
            rc = bad(x, where, "not an object", spec);
            break;
        }
        json_t *o = json_object();
        json_array_append_new(a, o);
        rc = apply(x, &container_spec_table, spec, where, o);
        if (rc != FG_OK)
            break;
        long k = status_of(statuses, map_str(spec, "name"));
        if (k < 0) {
            json_object_set_new(o, "ready", json_false());
            json_object_set_new(o, "restarts", json_integer(0));
            continue;
        }
        snprintf(where, sizeof where, "%s[%ld]", stpath, k);
        rc = apply(x, &container_status_table, json_array_get(statuses, (size_t)k), where, o);
        if (rc != FG_OK)
            break;
    }
    if (rc != FG_OK || json_array_size(a) == 0) {
        json_decref(a);
        return rc;
    }
    json_object_set_new(out, r->field, a);
    set_omitted(out, r->field, n > FG_KUBE_MAX_CONTAINERS ? n - FG_KUBE_MAX_CONTAINERS : 0);
    return FG_OK;
}

/* Restarts of all the pod's containers, for sorting by "crash-looping". */
static int c_restarts_total(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                            const json_t *src, json_t *out) {
    (void)src;
    int64_t total = 0;
    if (v != NULL && !json_is_array(v))
        return bad(x, vpath, "not an array", v);
    for (size_t i = 0; v != NULL && i < json_array_size(v) && i < MAX_STATUS_SCAN; i++) {
        const json_t *n = json_object_get(json_array_get(v, i), "restartCount");
        if (json_is_integer(n) && json_integer_value(n) > 0 && json_integer_value(n) < INT32_MAX)
            total += json_integer_value(n);
    }
    set_new(out, r->field, json_integer(total));
    return FG_OK;
}

static const cond_spec_t pod_conditions =
    COND_SPEC("PodScheduled", "Initialized", "ContainersReady", "Ready", "DisruptionTarget");

/* Common rows, shared by every kind through sub-tables applied to the same object (c_inline):
 * identity first, so every simplified object starts the same way, and its lifetime and labels
 * last. */
#define ROW_NAME                                                                                   \
    { .field = "name", .path = "metadata.name", .conv = c_str, .flags = REQUIRED }
#define ROW_CLUSTER                                                                                \
    { .field = "cluster", .conv = c_origin_cluster }
#define ROW_UID                                                                                    \
    { .field = "uid", .path = "metadata.uid", .conv = c_str }
#define ROW_VERSION                                                                                \
    { .field = "version", .path = "metadata.resourceVersion", .conv = c_str, .flags = REQUIRED }

static const row_t namespaced_identity_rows[] = {
    ROW_NAME,    REQ_STR("project", "metadata.namespace"),
    ROW_CLUSTER, {.field = "zone", .conv = c_origin_zone},
    ROW_UID,     ROW_VERSION,
};
static const table_t namespaced_identity = TABLE(namespaced_identity_rows);

/* Cluster-scoped kinds have no project. (Nodes have their own zone: node_rows.) */
static const row_t cluster_identity_rows[] = {
    ROW_NAME, ROW_CLUSTER, {.field = "zone", .conv = c_origin_zone}, ROW_UID, ROW_VERSION,
};
static const table_t cluster_identity = TABLE(cluster_identity_rows);

static const row_t lifetime_rows[] = {
    STR("creationTime", "metadata.creationTimestamp"),
    STR("deletionTime", "metadata.deletionTimestamp"),
    ROW("labels", "metadata.labels", c_labels, NULL),
};
static const table_t lifetime = TABLE(lifetime_rows);

#define IDENTITY(t)                                                                                \
    { .field = #t, .conv = c_inline, .arg = &(t) }

static const row_t pod_rows[] = {
    IDENTITY(namespaced_identity),
    ROW("app", NULL, c_pod_app, NULL),
    ROW("jobset", NULL, c_owner, "Job"),
    STR("node", "spec.nodeName"),
    STR("phase", "status.phase"),
    STR("reason", "status.reason"),
    STR("message", "status.message"),
    ROW("ready", "status.conditions", c_condition_true, "Ready"),
    CONDS("conditions", "status.conditions", pod_conditions),
    ROW("restarts", "status.containerStatuses", c_restarts_total, NULL),
    ROW("containers", NULL, c_pod_containers, &regular_containers),
    ROW("initContainers", NULL, c_pod_containers, &init_containers),
    ROW("requestUnits", "spec.containers", c_container_totals, "requests"),
    ROW("limitUnits", "spec.containers", c_container_totals, "limits"),
    ROW("podIPs", "status.podIPs", c_str_list, "ip"),
    {.field = "podIPs", .path = "status.podIP", .conv = c_str_as_list, .flags = IF_UNSET},
    ROW("hostIPs", "status.hostIPs", c_str_list, "ip"),
    {.field = "hostIPs", .path = "status.hostIP", .conv = c_str_as_list, .flags = IF_UNSET},
    STR("qosClass", "status.qosClass"),
    STR("startTime", "status.startTime"),
    IDENTITY(lifetime),
};

/* ---- apps (Deployments), job sets (Jobs), cron jobs -------------------- */

/* A pod template's containers, as a workload shows them. */
static const row_t template_container_rows[] = {
    REQ_STR("name", "name"),
    STR("image", "image"),
    OBJ("resources", "resources", resources_table),
    LIST("ports", "ports", ports),
};
static const list_spec_t template_containers = {TABLE(template_container_rows),
                                                FG_KUBE_MAX_CONTAINERS};

static const row_t replicas_rows[] = {
    INT_OR("desired", "spec.replicas", ONE),
    INT_OR("current", "status.replicas", ZERO),
    INT_OR("ready", "status.readyReplicas", ZERO),
    INT_OR("updated", "status.updatedReplicas", ZERO),
    INT_OR("available", "status.availableReplicas", ZERO),
    INT_OR("unavailable", "status.unavailableReplicas", ZERO),
};
static const table_t replicas_table = TABLE(replicas_rows);

static const row_t strategy_rows[] = {
    STR("type", "type"),
    ROW("maxSurge", "rollingUpdate.maxSurge", c_int_or_str, NULL),
    ROW("maxUnavailable", "rollingUpdate.maxUnavailable", c_int_or_str, NULL),
};
static const table_t strategy_table = TABLE(strategy_rows);

static const cond_spec_t app_conditions = COND_SPEC("Available", "Progressing", "ReplicaFailure");

static const row_t app_rows[] = {
    IDENTITY(namespaced_identity),
    ROW("replicas", NULL, c_group, &replicas_table),
    BOOL_OR("paused", "spec.paused", NO),
    OBJ("strategy", "spec.strategy", strategy_table),
    LIST("containers", "spec.template.spec.containers", template_containers),
    ROW("revision", "metadata.annotations", c_map_key_int, "deployment.kubernetes.io/revision"),
    ROW("restartedAt", "spec.template.metadata.annotations", c_map_key,
        "kubectl.kubernetes.io/restartedAt"),
    ROW("fleetgateSpec", "metadata.annotations", c_map_key, "fleetgate.io/spec"),
    ROW("fleetgateShards", "metadata.annotations", c_map_key, "fleetgate.io/shards"),
    ROW("fleetgateWrittenAt", "metadata.annotations", c_map_key_int, "fleetgate.io/spec-at"),
    INT("generation", "metadata.generation"),
    INT("observedGeneration", "status.observedGeneration"),
    CONDS("conditions", "status.conditions", app_conditions),
    ROW("requestedBy", "metadata.annotations", c_map_key, "fleetgate.io/requested-by"),
    ROW("requestId", "metadata.annotations", c_map_key, "fleetgate.io/request-id"),
    IDENTITY(lifetime),
};

/* A job's state in one word: Complete, Failed, Suspended, Running or Pending. */
static int c_job_state(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                       const json_t *src, json_t *out) {
    (void)v, (void)vpath;
    const json_t *status = json_object_get(src, "status");
    const json_t *conds = json_object_get(status, "conditions");
    const json_t *active = json_object_get(status, "active");
    const json_t *suspend = json_object_get(json_object_get(src, "spec"), "suspend");
    const char *state = "Pending";
    (void)x;
    if (condition_true(conds, "Complete") || condition_true(conds, "SuccessCriteriaMet"))
        state = "Complete";
    else if (condition_true(conds, "Failed") || condition_true(conds, "FailureTarget"))
        state = "Failed";
    else if (json_is_true(suspend) || condition_true(conds, "Suspended"))
        state = "Suspended";
    else if (json_is_integer(active) && json_integer_value(active) > 0)
        state = "Running";
    set_new(out, r->field, json_string(state));
    return FG_OK;
}

static const cond_spec_t job_conditions =
    COND_SPEC("Complete", "Failed", "FailureTarget", "Suspended");

static const row_t jobset_rows[] = {
    IDENTITY(namespaced_identity),
    ROW("cronjob", NULL, c_owner, "CronJob"),
    ROW("state", NULL, c_job_state, NULL),
    INT("parallelism", "spec.parallelism"),
    INT("completions", "spec.completions"),
    STR("completionMode", "spec.completionMode"),
    INT("backoffLimit", "spec.backoffLimit"),
    INT("activeDeadlineSeconds", "spec.activeDeadlineSeconds"),
    BOOL_OR("suspend", "spec.suspend", NO),
    INT_OR("active", "status.active", ZERO),
    INT_OR("ready", "status.ready", ZERO),
    INT_OR("succeeded", "status.succeeded", ZERO),
    INT_OR("failed", "status.failed", ZERO),
    STR("startTime", "status.startTime"),
    STR("completionTime", "status.completionTime"),
    CONDS("conditions", "status.conditions", job_conditions),
    LIST("containers", "spec.template.spec.containers", template_containers),
    ROW("requestedBy", "metadata.annotations", c_map_key, "fleetgate.io/requested-by"),
    ROW("requestId", "metadata.annotations", c_map_key, "fleetgate.io/request-id"),
    /* a scheduled cron run's admission to the tier's quota (api/jobspec.h) */
    ROW("admission", "metadata.annotations", c_map_key, "fleetgate.io/admission"),
    ROW("quotaHeld", "metadata.annotations", c_map_key, "fleetgate.io/quota-held"),
    IDENTITY(lifetime),
};

static const row_t cronjob_rows[] = {
    IDENTITY(namespaced_identity),
    STR("schedule", "spec.schedule"),
    STR("timeZone", "spec.timeZone"),
    BOOL_OR("suspend", "spec.suspend", NO),
    STR("concurrencyPolicy", "spec.concurrencyPolicy"),
    STR("lastScheduleTime", "status.lastScheduleTime"),
    STR("lastSuccessfulTime", "status.lastSuccessfulTime"),
    ROW("active", "status.active", c_str_list, "name"),
    LIST("containers", "spec.jobTemplate.spec.template.spec.containers", template_containers),
    ROW("fleetgateSpec", "metadata.annotations", c_map_key, "fleetgate.io/spec"),
    ROW("requestedBy", "metadata.annotations", c_map_key, "fleetgate.io/requested-by"),
    ROW("requestId", "metadata.annotations", c_map_key, "fleetgate.io/request-id"),
    IDENTITY(lifetime),
};

/* ---- scalers (HorizontalPodAutoscaler autoscaling/v2) ------------------ */

static const row_t target_ref_rows[] = {
    STR("kind", "kind"),
    STR("name", "name"),
};
static const table_t target_ref_table = TABLE(target_ref_rows);

/* MetricTarget and MetricValueStatus share their value fields. */
static const row_t metric_value_rows[] = {
    STR("type", "type"),
    INT("averageUtilization", "averageUtilization"),
    STR("averageValue", "averageValue"),
    STR("value", "value"),
};
static const table_t metric_value_table = TABLE(metric_value_rows);

/* One metric: its source is the member named by type (resource, pods, object, external,
 * containerResource); alternatives try each. */
#define METRIC_NAME_PATHS                                                                          \
    "resource.name|containerResource.name|pods.metric.name|object.metric.name|external.metric."    \
    "name"

static const row_t metric_spec_rows[] = {
    REQ_STR("type", "type"),
    STR("name", METRIC_NAME_PATHS),
    STR("container", "containerResource.container"),
    OBJ("object", "object.describedObject", target_ref_table),
    OBJ("target",
        "resource.target|containerResource.target|pods.target|object.target|external.target",
        metric_value_table),
};
static const list_spec_t metric_specs = {TABLE(metric_spec_rows), FG_KUBE_MAX_LIST_ITEMS};

static const row_t metric_status_rows[] = {
    REQ_STR("type", "type"),
    STR("name", METRIC_NAME_PATHS),
    STR("container", "containerResource.container"),
    OBJ("current",
        "resource.current|containerResource.current|pods.current|object.current|external.current",
        metric_value_table),
};
static const list_spec_t metric_statuses = {TABLE(metric_status_rows), FG_KUBE_MAX_LIST_ITEMS};

static const row_t scaling_policy_rows[] = {
    STR("type", "type"),
    INT("value", "value"),
    INT("periodSeconds", "periodSeconds"),
};
static const list_spec_t scaling_policies = {TABLE(scaling_policy_rows), FG_KUBE_MAX_LIST_ITEMS};

static const row_t scaling_rules_rows[] = {
    INT("stabilizationWindowSeconds", "stabilizationWindowSeconds"),
    STR("selectPolicy", "selectPolicy"),
    LIST("policies", "policies", scaling_policies),
};
static const table_t scaling_rules_table = TABLE(scaling_rules_rows);

static const row_t behavior_rows[] = {
    OBJ("scaleUp", "scaleUp", scaling_rules_table),
    OBJ("scaleDown", "scaleDown", scaling_rules_table),
};
static const table_t behavior_table = TABLE(behavior_rows);

static const cond_spec_t scaler_conditions =
    COND_SPEC("AbleToScale", "ScalingActive", "ScalingLimited");

static const row_t scaler_rows[] = {
    IDENTITY(namespaced_identity),
    OBJ("target", "spec.scaleTargetRef", target_ref_table),
    INT_OR("minReplicas", "spec.minReplicas", ONE),
    INT("maxReplicas", "spec.maxReplicas"),
    INT_OR("currentReplicas", "status.currentReplicas", ZERO),
    INT_OR("desiredReplicas", "status.desiredReplicas", ZERO),
    STR("lastScaleTime", "status.lastScaleTime"),
    LIST("metrics", "spec.metrics", metric_specs),
    LIST("currentMetrics", "status.currentMetrics", metric_statuses),
    OBJ("behavior", "spec.behavior", behavior_table),
    CONDS("conditions", "status.conditions", scaler_conditions),
    ROW("requestedBy", "metadata.annotations", c_map_key, "fleetgate.io/requested-by"),
    ROW("requestId", "metadata.annotations", c_map_key, "fleetgate.io/request-id"),
    IDENTITY(lifetime),
};

/* ---- events (core/v1, with events.k8s.io/v1 names as fallbacks) -------- */

static const row_t involved_rows[] = {
    STR("kind", "kind"),
    STR("name", "name"),
    STR("uid", "uid"),
    STR("fieldPath", "fieldPath"),
};
static const table_t involved_table = TABLE(involved_rows);

static const row_t event_rows[] = {
    IDENTITY(namespaced_identity),
    STR("type", "type"),
    STR("reason", "reason"),
    STR("message", "message|note"),
    STR("action", "action"),
    OBJ("object", "involvedObject|regarding", involved_table),
    INT_OR("count", "count|series.count|deprecatedCount", ONE),
    STR("firstTime",
        "firstTimestamp|eventTime|deprecatedFirstTimestamp|metadata.creationTimestamp"),
    STR("lastTime", "lastTimestamp|series.lastObservedTime|eventTime|deprecatedLastTimestamp|"
                    "metadata.creationTimestamp"),
    STR("source",
        "source.component|reportingComponent|reportingController|deprecatedSource.component"),
    STR("sourceHost", "source.host|reportingInstance|deprecatedSource.host"),
};

/* ---- nodes ------------------------------------------------------------- */

/* The node's own zone label, else the cluster's zone. */
static int c_node_zone(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                       const json_t *src, json_t *out) {
    const char *z = NULL;
    if (v != NULL && !json_is_object(v))
        return bad(x, vpath, "not an object", v);
    z = map_str(v, "topology.kubernetes.io/zone");
    if (z == NULL)
        z = map_str(v, "failure-domain.beta.kubernetes.io/zone");
    if (z != NULL) {
        set_new(out, r->field, bounded_string(z, strlen(z)));
        return FG_OK;
    }
    return c_origin_zone(x, r, v, vpath, src, out);
}

/* Roles from the node-role.kubernetes.io/<role> labels. */
static int c_node_roles(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                        const json_t *src, json_t *out) {
    (void)src;
    static const char prefix[] = "node-role.kubernetes.io/";
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    json_t *a = json_array();
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (strncmp(key, prefix, sizeof prefix - 1) == 0 && key[sizeof prefix - 1] != '\0' &&
            json_array_size(a) < FG_KUBE_MAX_LIST_ITEMS)
            json_array_append_new(a, json_string(key + sizeof prefix - 1));
    }
    if (json_array_size(a) > 0)
        json_object_set_new(out, r->field, a);
    else
        json_decref(a);
    return FG_OK;
}

/* The address of type arg in status.addresses. */
static int c_address(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                     const json_t *src, json_t *out) {
    (void)src;
    if (v == NULL)
        return FG_OK;
    if (!json_is_array(v))
        return bad(x, vpath, "not an array", v);
    for (size_t i = 0; i < json_array_size(v) && i < FG_KUBE_MAX_LIST_ITEMS; i++) {
        const json_t *a = json_array_get(v, i);
        const char *type = map_str(a, "type");
        const char *addr = map_str(a, "address");
        if (type != NULL && addr != NULL && strcmp(type, r->arg) == 0) {
            set_new(out, r->field, bounded_string(addr, strlen(addr)));
            break;
        }
    }
    return FG_OK;
}

static const row_t taint_rows[] = {
    STR("key", "key"),
    STR("value", "value"),
    STR("effect", "effect"),
};
static const list_spec_t taints = {TABLE(taint_rows), FG_KUBE_MAX_LIST_ITEMS};

static const cond_spec_t node_conditions =
    COND_SPEC("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable");

static const row_t node_rows[] = {
    ROW_NAME,
    ROW_CLUSTER,
    ROW("zone", "metadata.labels", c_node_zone, NULL),
    ROW_UID,
    ROW_VERSION,
    ROW("instanceType", "metadata.labels", c_map_key,
        "node.kubernetes.io/instance-type|beta.kubernetes.io/instance-type"),
    ROW("roles", "metadata.labels", c_node_roles, NULL),
    ROW("ready", "status.conditions", c_condition_true, "Ready"),
    BOOL_OR("unschedulable", "spec.unschedulable", NO),
    CONDS("conditions", "status.conditions", node_conditions),
    LIST("taints", "spec.taints", taints),
    ROW("capacity", "status.capacity", c_quantities, NULL),
    ROW("capacityUnits", "status.capacity", c_units, NULL),
    ROW("allocatable", "status.allocatable", c_quantities, NULL),
    ROW("allocatableUnits", "status.allocatable", c_units, NULL),
    ROW("internalIP", "status.addresses", c_address, "InternalIP"),
    STR("kubeletVersion", "status.nodeInfo.kubeletVersion"),
    IDENTITY(lifetime),
};

/* ---- projects (Namespaces) --------------------------------------------- */

/* Quotas per tier, kept as annotations fleetgate.io/quota-<tier>-<resource> on the namespace
 * (DESIGN.md: "Quotas per tier are kept as annotations on those namespaces"). */
static const struct {
    const char *annotation_tier; /* in the annotation name */
    const char *tier;            /* in the output */
} quota_tiers[] = {
    {"reserved", "reserved"},
    {"ondemand", "onDemand"},
    {"preemptible", "preemptible"},
};

static const struct {
    const char *resource; /* in the annotation name and the output */
    const char *unit_key;
    bool milli;
} quota_resources[] = {
    {"cpu", "cpuMilli", true},
    {"memory", "memoryBytes", false},
    {"gpu", "gpu", false},
    {"pods", "pods", false},
};

/* quota: {tier: {cpu: "100", ...}}, quotaUnits: {tier: {cpuMilli: 100000, ...}}, and
 * quotaInvalid: [annotation names whose value is not a quantity] (annotations are written by
 * people; one bad value must not make the whole project disappear from the cache). */
static int c_ns_quota(xlate_t *x, const row_t *r, const json_t *v, const char *vpath,
                      const json_t *src, json_t *out) {
    (void)src, (void)r;
    if (v == NULL)
        return FG_OK;
    if (!json_is_object(v))
        return bad(x, vpath, "not an object", v);
    json_t *quota = json_object(), *units = json_object(), *invalid = json_array();
    for (size_t t = 0; t < sizeof quota_tiers / sizeof quota_tiers[0]; t++) {
        json_t *q = json_object(), *u = json_object();
        for (size_t k = 0; k < sizeof quota_resources / sizeof quota_resources[0]; k++) {
            char key[96];
            snprintf(key, sizeof key, "fleetgate.io/quota-%s-%s", quota_tiers[t].annotation_tier,
                     quota_resources[k].resource);
            const char *s = map_str(v, key);
            int64_t n;
            if (s == NULL)
                continue;
            if (fg_kube_quantity_parse(s, strlen(s), quota_resources[k].milli, &n) != FG_OK ||
                n < 0) {
                json_array_append_new(invalid, json_string(key));
                continue;
            }
            json_object_set_new(q, quota_resources[k].resource, bounded_string(s, strlen(s)));
            json_object_set_new(u, quota_resources[k].unit_key, json_integer(n));
        }
        if (json_object_size(q) > 0) {
            json_object_set_new(quota, quota_tiers[t].tier, q);
            json_object_set_new(units, quota_tiers[t].tier, u);
        } else {
            json_decref(q);
            json_decref(u);
        }
    }
    if (json_object_size(quota) > 0) {
        json_object_set_new(out, "quota", quota);
        json_object_set_new(out, "quotaUnits", units);
    } else {
        json_decref(quota);
        json_decref(units);
    }
    if (json_array_size(invalid) > 0)
        json_object_set_new(out, "quotaInvalid", invalid);
    else
        json_decref(invalid);
    return FG_OK;
}

static const row_t project_rows[] = {
    IDENTITY(cluster_identity),
    STR("phase", "status.phase"),
    ROW("description", "metadata.annotations", c_map_key, "fleetgate.io/description"),
    ROW("quota", "metadata.annotations", c_ns_quota, NULL),
    IDENTITY(lifetime),
};

/* ---- the kinds --------------------------------------------------------- */

/* One row per kind: fleetgate's name, the Kubernetes kind, where it is listed, whether it is
 * namespaced, the apiVersion prefixes accepted (group "" = core "v1"; alt: another or NULL) and
 * its table. */
enum { CLUSTER_SCOPED = false, NAMESPACED = true };
#define KIND(k, fg_name, k8s, prefix, res, scope, group, alt, rows)                                \
    [k] = {.info = {.kind = (k),                                                                   \
                    .name = (fg_name),                                                             \
                    .k8s_kind = (k8s),                                                             \
                    .api_prefix = (prefix),                                                        \
                    .resource = (res),                                                             \
                    .namespaced = (scope)},                                                        \
           .api_group = (group),                                                                   \
           .api_group_alt = (alt),                                                                 \
           .table = TABLE(rows)}

static const struct {
    fg_kube_kind_info_t info;
    const char *api_group; /* accepted apiVersion prefix ("" = core "v1") */
    const char *api_group_alt;
    table_t table;
} kinds[FG_KIND_COUNT] = {
    KIND(FG_KIND_POD, "pod", "Pod", "/api/v1", "pods", NAMESPACED, "v1", NULL, pod_rows),
    KIND(FG_KIND_APP, "app", "Deployment", "/apis/apps/v1", "deployments", NAMESPACED, "apps/",
         NULL, app_rows),
    KIND(FG_KIND_JOBSET, "jobset", "Job", "/apis/batch/v1", "jobs", NAMESPACED, "batch/", NULL,
         jobset_rows),
    KIND(FG_KIND_CRONJOB, "cronjob", "CronJob", "/apis/batch/v1", "cronjobs", NAMESPACED, "batch/",
         NULL, cronjob_rows),
    KIND(FG_KIND_SCALER, "scaler", "HorizontalPodAutoscaler", "/apis/autoscaling/v2",
         "horizontalpodautoscalers", NAMESPACED, "autoscaling/v2", NULL, scaler_rows),
    KIND(FG_KIND_EVENT, "event", "Event", "/api/v1", "events", NAMESPACED, "v1", "events.k8s.io/",
         event_rows),
    KIND(FG_KIND_NODE, "node", "Node", "/api/v1", "nodes", CLUSTER_SCOPED, "v1", NULL, node_rows),
    KIND(FG_KIND_PROJECT, "project", "Namespace", "/api/v1", "namespaces", CLUSTER_SCOPED, "v1",
         NULL, project_rows),
};

const fg_kube_kind_info_t *fg_kube_kind_info(fg_kind_t kind) {
    if ((unsigned)kind >= FG_KIND_COUNT)
        return NULL;
    return &kinds[kind].info;
}

/* "v1" matches exactly; "apps/" matches any version of the group. */
static bool version_matches(const char *api_version, const char *group) {
    if (group == NULL)
        return false;
    size_t n = strlen(group);
    if (group[n - 1] == '/')
        return strncmp(api_version, group, n) == 0;
    return strcmp(api_version, group) == 0;
}

int fg_kube_kind_of(const char *k8s_kind, const char *api_version, fg_kind_t *out) {
    if (k8s_kind == NULL || api_version == NULL)
        return FG_ENOENT;
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        if (strcmp(kinds[k].info.k8s_kind, k8s_kind) != 0)
            continue;
        if (version_matches(api_version, kinds[k].api_group) ||
            version_matches(api_version, kinds[k].api_group_alt)) {
            *out = (fg_kind_t)k;
            return FG_OK;
        }
    }
    return FG_ENOENT;
}

int fg_kube_translate(fg_kind_t kind, const json_t *obj, const fg_kube_origin_t *origin,
                      json_t **out, char *err, size_t errlen) {
    char scratch[8];
    xlate_t x = {obj, origin, err ? err : scratch, err ? errlen : sizeof scratch};
    json_t *o = NULL;
    int rc = FG_OK;
    x.err[0] = '\0';
    if ((unsigned)kind >= FG_KIND_COUNT) {
        snprintf(x.err, x.errlen, "unknown kind %d", (int)kind);
        rc = FG_EINVAL;
        goto out;
    }
    if (!json_is_object(obj)) {
        rc = bad(&x, "(object)", "not an object", obj);
        goto out;
    }
    const json_t *meta = json_object_get(obj, "metadata");
    if (meta == NULL || json_is_null(meta)) {
        rc = bad(&x, "metadata", "missing", NULL);
        goto out;
    }
    if (!json_is_object(meta)) {
        rc = bad(&x, "metadata", "not an object", meta);
        goto out;
    }
    o = json_object();
    rc = apply(&x, &kinds[kind].table, obj, "", o);
    if (rc != FG_OK)
        goto out;
    *out = o;
    o = NULL;
out:
    json_decref(o);
    return rc;
}
