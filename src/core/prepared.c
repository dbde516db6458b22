/* core/prepared.c: fg_prepared_t, text made once and shared by reference: an answer's body
 * kept beside the cached object it was made from, and held by every answer still sending it,
 * so a cache that drops or replaces it never frees bytes a connection is writing. */
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fg_prepared_t *fg_prepared_new(const char *text, size_t len, const char *tag) {
    fg_prepared_t *p = fg_xmalloc(sizeof *p + len + 1);
    atomic_init(&p->refs, 1);
    p->len = len;
    snprintf(p->tag, sizeof p->tag, "%s", tag ? tag : "");
    memcpy(p->text, text, len);
    p->text[len] = '\0';
    return p;
}

fg_prepared_t *fg_prepared_ref(fg_prepared_t *p) {
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void fg_prepared_unref(fg_prepared_t *p) {
    if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1)
        free(p);
}
