/* api/present.c: what the presenters (pods.c, workloads.c, platform.c) share to turn a cached
 * simplified object into the API's item: typed field reads and copies, cut strings, quantities
 * checked before they are shown, container resources. Declared in reads.h. */
#include "reads.h"

#include <stdio.h>
#include <string.h>

void rd_copy(json_t *dst, const char *as, const json_t *src, const char *key) {
    json_t *v = json_object_get(src, key);
    if (v && !json_is_null(v))
        json_object_set(dst, as, v);
}

int64_t rd_int(const json_t *src, const char *key, int64_t dflt) {
    json_t *v = json_object_get(src, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

const char *rd_str(const json_t *src, const char *key) {
    return json_string_value(json_object_get(src, key));
}

json_t *rd_string_cut(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n <= max)
        return json_string(s);
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--; /* never cut inside a UTF-8 sequence */
    return json_stringn(s, max);
}

json_t *rd_str_or_null(const json_t *src, const char *key) {
    const char *s = rd_str(src, key);
    return s ? json_string(s) : json_null();
}

static bool digits(const char **p) {
    const char *s = *p;
    while (**p >= '0' && **p <= '9')
        (*p)++;
    return *p > s;
}

static bool quantity_ok(const char *v, bool cpu) {
    static const char *const suffixes[] = {"",  "Ki", "Mi", "Gi", "Ti", "Pi",
                                           "k", "M",  "G",  "T",  "P",  NULL};
    const char *p = v;
    if (strlen(v) > 32 || !digits(&p))
        return false;
    if (cpu) {
        if (*p == 'm')
            return p[1] == '\0';
        if (*p == '.') {
            const char *f = ++p;
            return digits(&p) && p - f <= 3 && *p == '\0';
        }
        return *p == '\0';
    }
    for (size_t i = 0; suffixes[i]; i++)
        if (strcmp(p, suffixes[i]) == 0)
            return true;
    return false;
}

void rd_copy_quantity(json_t *dst, const char *as, const json_t *src, const char *key, bool cpu) {
    const char *v = rd_str(src, key);
    if (v && quantity_ok(v, cpu))
        json_object_set_new(dst, as, json_string(v));
}

static json_t *amounts(const json_t *src) {
    json_t *o = json_object();
    rd_copy_quantity(o, "cpu", src, "cpu", true);
    rd_copy_quantity(o, "memory", src, "memory", false);
    return o;
}

json_t *rd_resources(const json_t *src) {
    json_t *o = json_object();
    if (json_is_object(json_object_get(src, "requests")))
        json_object_set_new(o, "requests", amounts(json_object_get(src, "requests")));
    if (json_is_object(json_object_get(src, "limits")))
        json_object_set_new(o, "limits", amounts(json_object_get(src, "limits")));
    return o;
}

json_t *rd_spec_containers(const json_t *list) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        const char *name = rd_str(c, "name"), *image = rd_str(c, "image");
        if (name == NULL || image == NULL || image[0] == '\0')
            continue;
        json_t *o = json_pack("{s:s,s:s}", "name", name, "image", image);
        if (json_is_object(json_object_get(c, "resources")))
            json_object_set_new(o, "resources", rd_resources(json_object_get(c, "resources")));
        json_array_append_new(out, o);
    }
    return out;
}

void rd_hide_managed_labels(json_t *o) {
    /* o's labels may be the cached object's own (rd_copy shares it): kept ones go to a new
     * object, so the source keeps its labels for whoever reads them next */
    const json_t *labels = json_object_get(o, "labels");
    json_t *kept = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)labels, k, v) {
        if (strncmp(k, "fleetgate.io/", 13) != 0 && strcmp(k, "app.kubernetes.io/name") != 0 &&
            strcmp(k, "app.kubernetes.io/managed-by") != 0)
            json_object_set(kept, k, v);
    }
    if (json_object_size(kept) > 0)
        json_object_set_new(o, "labels", kept);
    else {
        json_object_del(o, "labels");
        json_decref(kept);
    }
}
