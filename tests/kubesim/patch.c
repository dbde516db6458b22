/* patch: the three patch formats a real server takes on PATCH.
 * - JSON merge patch (RFC 7386): objects merge, null deletes, anything else replaces.
 * - JSON patch (RFC 6902): add, remove, replace, move, copy, test with JSON pointers.
 * - Strategic merge patch: a merge patch in which lists of objects carrying a merge key (name for
 *   containers, env, volumes...; containerPort for ports) merge item by item, `$patch: delete`
 *   removes an item, `$retainKeys`/`$setElementOrder` directives are accepted and dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"

/* ---- merge and strategic merge ----------------------------------------------------------- */

static const char *merge_key_of(const json_t *list) {
    static const char *const KEYS[] = {"name", "containerPort", "uid", "type", "ip", NULL};
    json_t *first = json_array_get(list, 0);
    if (!json_is_object(first))
        return NULL;
    for (size_t i = 0; KEYS[i] != NULL; i++) {
        if (json_object_get(first, KEYS[i]) != NULL)
            return KEYS[i];
    }
    return NULL;
}

/* The merge works in place on a top-level object the caller owns; below it the tree may share
 * members with a stored object (which must never change), so a member is copied (shallowly)
 * before it is changed: only the objects and lists on the patch's paths are copied, everything
 * else stays shared by reference count (copy on write). */
static json_t *merge_new(const json_t *patch, bool strategic);
static void merge_into(json_t *into, const json_t *patch, bool strategic);

/* patch merged over cur (a reference the caller gives up; may be NULL, may be shared): a copy
 * of cur with the patch merged when both are objects, else a new value. */
static json_t *merge_value(json_t *cur, const json_t *patch, bool strategic) {
    if (json_is_object(patch) && json_is_object(cur)) {
        json_t *own = json_copy(cur);
        json_decref(cur);
        merge_into(own, patch, strategic);
        return own;
    }
    json_decref(cur);
    return merge_new(patch, strategic);
}

/* A strategic list patch over the list `into` (owned; its items may be shared); false when the
 * patch replaces the list whole (no merge key, or the target is not a list). */
static bool merge_list_into(json_t *into, const json_t *patch) {
    const char *mk = merge_key_of(patch);
    if (mk == NULL || !json_is_array(into))
        return false;
    size_t i;
    json_t *p;
    json_array_foreach(patch, i, p) {
        json_t *key = json_object_get(p, mk);
        bool del = json_is_string(json_object_get(p, "$patch")) &&
                   strcmp(json_string_value(json_object_get(p, "$patch")), "delete") == 0;
        size_t j;
        json_t *t;
        bool found = false;
        json_array_foreach(into, j, t) {
            if (key != NULL && json_equal(json_object_get(t, mk), key)) {
                found = true;
                if (del)
                    json_array_remove(into, j);
                else
                    json_array_set_new(into, j, merge_value(json_incref(t), p, true));
                break;
            }
        }
        if (!found && !del)
            json_array_append_new(into, merge_new(p, true));
    }
    return true;
}

static void merge_into(json_t *into, const json_t *patch, bool strategic) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (strategic && (k[0] == '$' || strncmp(k, "$setElementOrder/", 17) == 0))
            continue;
        if (json_is_null(v)) {
            json_object_del(into, k);
            continue;
        }
        json_t *cur = json_object_get(into, k);
        if (strategic && json_is_array(v)) {
            json_t *list = json_is_array(cur) ? json_copy(cur) : NULL;
            if (!merge_list_into(list, v)) {
                json_decref(list);
                list = json_deep_copy(v);
            }
            json_object_set_new(into, k, list);
        } else {
            json_object_set_new(into, k, merge_value(json_incref(cur), v, strategic));
        }
    }
}

/* patch merged over nothing (new reference): directives and nulls dropped. */
static json_t *merge_new(const json_t *patch, bool strategic) {
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_object();
    merge_into(out, patch, strategic);
    return out;
}

int ks_merge_patch_into(json_t *target, const json_t *patch, json_t **out) {
    if (!json_is_object(patch)) {
        json_decref(target);
        return FG_EINVAL;
    }
    *out = merge_value(target, patch, false);
    return FG_OK;
}

int ks_strategic_merge_patch_into(json_t *target, const json_t *patch, json_t **out) {
    if (!json_is_object(patch)) {
        json_decref(target);
        return FG_EINVAL;
    }
    *out = merge_value(target, patch, true);
    return FG_OK;
}

int ks_merge_patch(const json_t *target, const json_t *patch, json_t **out) {
    return ks_merge_patch_into(json_incref((json_t *)target), patch, out);
}

int ks_strategic_merge_patch(const json_t *target, const json_t *patch, json_t **out) {
    return ks_strategic_merge_patch_into(json_incref((json_t *)target), patch, out);
}

/* ---- JSON patch ---------------------------------------------------------------------------- */

/* Resolves pointer to (parent, last token). The token is unescaped into tok. */
static int resolve_parent(json_t *doc, const char *ptr, json_t **parent, char *tok, size_t toklen) {
    if (ptr[0] != '/')
        return FG_EINVAL;
    json_t *cur = doc;
    const char *p = ptr + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < toklen; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                tok[o++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[o++] = p[i];
            }
        }
        tok[o] = '\0';
        if (slash == NULL) {
            *parent = cur;
            return FG_OK;
        }
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            int64_t idx;
            if (fg_parse_int64(tok, strlen(tok), 0, INT32_MAX, &idx) != FG_OK)
                return FG_EINVAL;
            cur = json_array_get(cur, (size_t)idx);
        } else {
            return FG_EINVAL;
        }
        if (cur == NULL)
            return FG_EINVAL;
        p = slash + 1;
    }
}

static int array_index(const json_t *arr, const char *tok, bool for_add, size_t *idx) {
    int64_t v;
    if (for_add && strcmp(tok, "-") == 0) {
        *idx = json_array_size(arr);
        return FG_OK;
    }
    if (fg_parse_int64(tok, strlen(tok), 0, INT32_MAX, &v) != FG_OK)
        return FG_EINVAL;
    if ((size_t)v > json_array_size(arr) || (!for_add && (size_t)v == json_array_size(arr)))
        return FG_EINVAL;
    *idx = (size_t)v;
    return FG_OK;
}

/* get: borrowed value at ptr or NULL. */
static json_t *pointer_get(json_t *doc, const char *ptr) {
    char tok[256];
    json_t *parent;
    size_t idx;
    if (ptr[0] == '\0')
        return doc;
    if (resolve_parent(doc, ptr, &parent, tok, sizeof(tok)) != FG_OK)
        return NULL;
    if (json_is_object(parent))
        return json_object_get(parent, tok);
    if (json_is_array(parent) && array_index(parent, tok, false, &idx) == FG_OK)
        return json_array_get(parent, idx);
    return NULL;
}

/* Applies one op; value is stolen. */
static int apply_op(json_t *doc, const char *op, const char *path, json_t *value) {
    char tok[256];
    json_t *parent;
    size_t idx;
    int rc = FG_EINVAL;
    if (resolve_parent(doc, path, &parent, tok, sizeof(tok)) != FG_OK)
        goto out;
    bool add = strcmp(op, "add") == 0;
    if (json_is_object(parent)) {
        if (!add && json_object_get(parent, tok) == NULL)
            goto out;
        if (strcmp(op, "remove") == 0)
            json_object_del(parent, tok);
        else
            json_object_set(parent, tok, value);
        rc = FG_OK;
    } else if (json_is_array(parent)) {
        if (array_index(parent, tok, add, &idx) != FG_OK)
            goto out;
        if (add)
            json_array_insert(parent, idx, value);
        else if (strcmp(op, "remove") == 0)
            json_array_remove(parent, idx);
        else
            json_array_set(parent, idx, value);
        rc = FG_OK;
    }
out:
    json_decref(value);
    return rc;
}

int ks_json_patch(const json_t *target, const json_t *patch, json_t **out, char *err,
                  size_t errlen) {
    return ks_json_patch_into(json_deep_copy(target), patch, out, err, errlen);
}

int ks_json_patch_into(json_t *doc, const json_t *patch, json_t **out, char *err, size_t errlen) {
    int rc = FG_OK;
    size_t i;
    json_t *opj;
    if (!json_is_array(patch)) {
        snprintf(err, errlen,
                 "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
        rc = FG_EINVAL;
        goto out;
    }
    json_array_foreach(patch, i, opj) {
        const char *op = json_string_value(json_object_get(opj, "op"));
        const char *path = json_string_value(json_object_get(opj, "path"));
        const char *from = json_string_value(json_object_get(opj, "from"));
        json_t *value = json_object_get(opj, "value");
        int r = FG_EINVAL;
        if (op == NULL || path == NULL) {
            r = FG_EINVAL;
        } else if (strcmp(op, "add") == 0 || strcmp(op, "replace") == 0) {
            r = value ? apply_op(doc, op, path, json_deep_copy(value)) : FG_EINVAL;
        } else if (strcmp(op, "remove") == 0) {
            r = apply_op(doc, op, path, NULL);
        } else if (strcmp(op, "test") == 0) {
            json_t *cur = pointer_get(doc, path);
            r = cur != NULL && value != NULL && json_equal(cur, value) ? FG_OK : FG_EINVAL;
        } else if ((strcmp(op, "move") == 0 || strcmp(op, "copy") == 0) && from != NULL) {
            json_t *src = pointer_get(doc, from);
            json_t *copy = src ? json_deep_copy(src) : NULL;
            r = copy != NULL ? FG_OK : FG_EINVAL;
            if (r == FG_OK && strcmp(op, "move") == 0)
                r = apply_op(doc, "remove", from, NULL);
            if (r == FG_OK)
                r = apply_op(doc, "add", path, copy);
            else
                json_decref(copy);
        }
        if (r != FG_OK) {
            snprintf(err, errlen,
                     "the server rejected our request due to an error in our request: "
                     "operation %zu (%s %s) cannot be applied",
                     i, op ? op : "?", path ? path : "?");
            rc = FG_EINVAL;
            goto out;
        }
    }
    *out = doc;
    doc = NULL;
out:
    json_decref(doc);
    return rc;
}
