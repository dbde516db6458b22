/* managed: the FieldsV1 trie of an object, as a real server writes it into managedFields
 * (K8S-SEMANTICS.md §8): `f:<field>` per struct field or map key, `k:{"name":...}` for list items
 * merged by key (containers, env, ports...), `.` for a nested map or keyed item that is itself
 * owned, and atomic lists as `{}`. Of metadata only labels, annotations, ownerReferences and
 * finalizers are tracked, as on a real server. */
#include <stdio.h>
#include <string.h>

#include "ks.h"

static json_t *fields_of(const json_t *v, int depth);

/* The merge key of a list item: `k:{"name":"x"}`, `k:{"containerPort":53,"protocol":"TCP"}`,
 * `k:{"uid":"..."}`; NULL when the list is atomic. Caller frees. */
static char *item_key(const json_t *item) {
    json_t *k = NULL;
    if (!json_is_object(item))
        return NULL;
    if (json_object_get(item, "containerPort") != NULL) {
        const char *proto = json_string_value(json_object_get(item, "protocol"));
        k = json_pack("{s:O, s:s}", "containerPort", json_object_get(item, "containerPort"),
                      "protocol", proto ? proto : "TCP");
    } else if (json_is_string(json_object_get(item, "uid"))) {
        k = json_pack("{s:O}", "uid", json_object_get(item, "uid"));
    } else if (json_is_string(json_object_get(item, "name"))) {
        k = json_pack("{s:O}", "name", json_object_get(item, "name"));
    } else if (json_is_string(json_object_get(item, "type"))) {
        k = json_pack("{s:O}", "type", json_object_get(item, "type"));
    } else {
        return NULL;
    }
    char *s = fg_json_dumps(k, NULL);
    char *out = fg_xasprintf("k:%s", s);
    free(s);
    json_decref(k);
    return out;
}

static json_t *list_fields(const json_t *arr, int depth) {
    json_t *out = json_object();
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item) {
        char *key = item_key(item);
        if (key == NULL) {
            json_decref(out);
            return json_object(); /* atomic list */
        }
        json_t *sub = fields_of(item, depth + 1);
        json_t *dot = json_object();
        json_object_set_new(dot, ".", json_object());
        json_object_update(dot, sub);
        json_decref(sub);
        json_object_set_new(out, key, dot);
        free(key);
    }
    if (json_object_size(out) > 0) {
        json_t *dot = json_object();
        json_object_set_new(dot, ".", json_object());
        json_object_update(dot, out);
        json_decref(out);
        return dot;
    }
    return out;
}

static json_t *fields_of(const json_t *v, int depth) {
    json_t *out = json_object();
    const char *k;
    json_t *child;
    if (!json_is_object(v))
        return out;
    if (depth > 1 && json_object_size(v) > 0)
        json_object_set_new(out, ".", json_object());
    json_object_foreach((json_t *)v, k, child) {
        char *fk = fg_xasprintf("f:%s", k);
        if (json_is_object(child))
            json_object_set_new(out, fk, fields_of(child, depth + 1));
        else if (json_is_array(child))
            json_object_set_new(out, fk, list_fields(child, depth + 1));
        else
            json_object_set_new(out, fk, json_object());
        free(fk);
    }
    return out;
}

json_t *ks_fields_v1(const json_t *obj) {
    static const char *const META[] = {"labels", "annotations", "ownerReferences", "finalizers",
                                       NULL};
    json_t *out = json_object();
    json_t *meta = json_object_get(obj, "metadata");
    json_t *fmeta = json_object();
    for (size_t i = 0; META[i] != NULL; i++) {
        json_t *v = json_object_get(meta, META[i]);
        if (v == NULL)
            continue;
        char *fk = fg_xasprintf("f:%s", META[i]);
        json_object_set_new(fmeta, fk, json_is_array(v) ? list_fields(v, 2) : fields_of(v, 2));
        free(fk);
    }
    if (json_object_size(fmeta) > 0)
        json_object_set_new(out, "f:metadata", fmeta);
    else
        json_decref(fmeta);
    const char *k;
    json_t *child;
    json_object_foreach((json_t *)obj, k, child) {
        if (strcmp(k, "metadata") == 0 || strcmp(k, "kind") == 0 || strcmp(k, "apiVersion") == 0)
            continue;
        char *fk = fg_xasprintf("f:%s", k);
        json_object_set_new(out, fk, json_is_object(child) ? fields_of(child, 1) : json_object());
        free(fk);
    }
    return out;
}
