/* Fuzz target: managedFields (and the placement annotation) pruned from JSON text before it is
 * parsed (kube/prune.c). Input: byte 0 picks where to look (object, watch event, LIST page) and
 * whether the annotation is cut too, the rest is the text. Properties: never reads or writes
 * outside the text, never grows it, and when the text parses, the pruned text parses too, to the
 * same value once managedFields (and the annotation) are dropped from both (the prune cuts
 * those members and nothing else). */
#include "fleetgate/kube.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drop_managed(json_t *obj, const char *annotation) {
    json_t *md = json_object_get(obj, "metadata");
    json_object_del(md, "managedFields");
    if (annotation)
        json_object_del(json_object_get(md, "annotations"), annotation);
}

static void drop_all(json_t *doc, fg_kube_prune_t where, const char *annotation) {
    size_t i;
    json_t *item;
    if (where == FG_KUBE_PRUNE_LIST)
        json_array_foreach(json_object_get(doc, "items"), i, item) drop_managed(item, annotation);
    else
        drop_managed(where == FG_KUBE_PRUNE_EVENT ? json_object_get(doc, "object") : doc,
                     annotation);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    static const fg_kube_prune_t wheres[] = {FG_KUBE_PRUNE_OBJECT, FG_KUBE_PRUNE_EVENT,
                                             FG_KUBE_PRUNE_LIST};
    fg_kube_prune_t where = wheres[data[0] % 3];
    const char *annotation = data[0] & 0x80 ? FG_KUBE_PLACEMENT_ANNOTATION : NULL;
    size_t len = size - 1;
    char *text = malloc(len ? len : 1); /* exactly the text: ASan sees any overrun */
    memcpy(text, data + 1, len);
    size_t n = fg_kube_prune(text, len, where, annotation);
    if (n > len)
        abort();
    json_t *orig = NULL, *pruned = NULL;
    if (fg_json_load((const char *)data + 1, len, &orig, NULL, 0) == FG_OK) {
        if (fg_json_load(text, n, &pruned, NULL, 0) != FG_OK)
            abort(); /* valid text must stay valid */
        drop_all(orig, where, annotation);
        drop_all(pruned, where, annotation);
        if (!json_equal(orig, pruned))
            abort(); /* something other than managedFields and the annotation was cut */
    }
    json_decref(orig);
    json_decref(pruned);
    free(text);
    return 0;
}
