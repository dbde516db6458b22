/* api/selector.h: label selectors (`labelSelector`): parse once per request, match per item.
 * Implemented in src/api/selector.c; tests/unit/test_selector.c and tests/fuzz/fuzz_selector.c
 * hold it to kube-apiserver's grammar. */
#ifndef FLEETGATE_API_SELECTOR_H
#define FLEETGATE_API_SELECTOR_H

#include "fleetgate/core.h"

#include <jansson.h>

#define RD_SELECTOR_MAX 1024 /* characters of a selector */

/* A parsed label selector (opaque; NULL matches everything). */
typedef struct rd_selector rd_selector_t;

/* Parses text into *out (free with rd_selector_free). FG_OK, or FG_EINVAL with *why saying
 * what is wrong (a constant string, e.g. "expected =, ==, !=, in or notin after the key"). */
int rd_selector_parse(const char *text, rd_selector_t **out, const char **why);
void rd_selector_free(rd_selector_t *s);
/* Whether labels (a JSON object, or NULL for none) satisfy the selector (NULL: always). */
bool rd_selector_match(const rd_selector_t *s, const json_t *labels);

#endif
