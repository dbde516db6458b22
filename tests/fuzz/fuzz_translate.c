/* Fuzz target: the translation of Kubernetes objects into the simplified model (kube/
 * translate.c). Input: a JSON document, translated as every kind. Properties: never crashes
 * or leaks; a failure always says why; a success is an object that serialises and parses
 * back, with no managedFields anywhere. */
#include "fleetgate/kube.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *in = NULL;
    char err[256];
    if (fg_json_load((const char *)data, size, &in, err, sizeof err) != FG_OK)
        return 0;
    const fg_kube_origin_t origin = {"fuzz", "zone-a"};
    for (int k = 0; k < FG_KIND_COUNT; k++) {
        json_t *out = NULL;
        err[0] = '\0';
        if (fg_kube_translate((fg_kind_t)k, in, &origin, &out, err, sizeof err) != FG_OK) {
            if (err[0] == '\0')
                abort();
            continue;
        }
        if (!json_is_object(out) || json_object_get(out, "managedFields") != NULL)
            abort();
        size_t len;
        char *text = fg_json_dumps(out, &len);
        json_t *again = NULL;
        if (fg_json_load(text, len, &again, err, sizeof err) != FG_OK)
            abort();
        json_decref(again);
        free(text);
        json_decref(out);
    }
    json_decref(in);
    return 0;
}
