/* core/mem.c: the fg_x* allocation family. Out of memory aborts with a message, as Redis's
 * zmalloc does: a gateway that cannot allocate cannot answer anything correctly. */
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t size) {
    fprintf(stderr, "{\"level\":\"error\",\"msg\":\"out of memory allocating %zu bytes\"}\n", size);
    abort();
}

void *fg_xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

void *fg_xcalloc(size_t nmemb, size_t size) {
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p == NULL)
        oom(nmemb * size);
    return p;
}

void *fg_xrealloc(void *ptr, size_t size) {
    void *p = realloc(ptr, size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

char *fg_xstrdup(const char *s) {
    return fg_xstrndup(s, strlen(s));
}

char *fg_xstrndup(const char *s, size_t n) {
    char *p = fg_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *fg_xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort(); /* only a bad format string gets here: a programming error */
    char *p = fg_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}
