/* Fuzz target: labelSelector values through the parser and the matcher, as every list with a
 * selector takes them. Properties: never crashes; a refusal always says why; a selector that
 * parses matches or not without touching memory it does not own. */
#include "../../src/api/selector.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *labels;
    if (labels == NULL)
        labels = json_pack("{s:s,s:s,s:s}", "app", "web", "tier", "front", "example.com/team", "");
    char *text = fg_xstrndup((const char *)data, size);
    rd_selector_t *s = NULL;
    const char *why = NULL;
    int rc = rd_selector_parse(text, &s, &why);
    if (rc == FG_OK) {
        if (s == NULL || why != NULL)
            abort();
        (void)rd_selector_match(s, labels);
        (void)rd_selector_match(s, NULL);
    } else if (rc != FG_EINVAL || s != NULL || why == NULL) {
        abort();
    }
    rd_selector_free(s);
    free(text);
    return 0;
}
