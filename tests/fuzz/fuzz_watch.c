/* Fuzz target: the watch-stream parser (kube/watch.c) on arbitrary bytes.
 * Input: byte 0 = number of cuts (0..7), then two bytes per cut (a position, taken modulo the
 * stream length), then the stream. Properties: never crashes or leaks; every event delivered
 * has an object and (but for ERROR) a resourceVersion; and the outcome (rc, events delivered)
 * is the same whether the stream arrives whole or cut at those positions. */
#include "fleetgate/kube.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(void *ud, const fg_kube_event_t *ev) {
    size_t *n = ud;
    if (ev->object == NULL || !json_is_object(ev->object))
        abort();
    if (ev->type == FG_KUBE_EV_ERROR ? ev->error == NULL : ev->resource_version == NULL)
        abort();
    (*n)++;
    return FG_OK;
}

static int run(const uint8_t *s, size_t len, const size_t *cuts, size_t ncuts, size_t *events) {
    fg_kube_watch_parser_t *p = NULL;
    if (fg_kube_watch_parser_new(&p, 4096, on_event, events) != FG_OK)
        abort();
    size_t at = 0;
    int rc = FG_OK;
    for (size_t i = 0; i < ncuts && rc == FG_OK; i++) {
        rc = fg_kube_watch_parser_feed(p, s + at, cuts[i] - at);
        at = cuts[i];
    }
    if (rc == FG_OK)
        rc = fg_kube_watch_parser_feed(p, s + at, len - at);
    if (rc == FG_OK)
        rc = fg_kube_watch_parser_finish(p);
    const fg_kube_error_t *err = fg_kube_watch_parser_error(p);
    if (rc != FG_OK && (err->reason[0] == '\0' || err->message[0] == '\0'))
        abort(); /* every failure says why */
    fg_kube_watch_parser_free(p);
    return rc;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t ncuts = data[0] & 7u;
    if (size < 1 + 2 * ncuts)
        return 0;
    const uint8_t *s = data + 1 + 2 * ncuts;
    size_t len = size - 1 - 2 * ncuts;
    size_t cuts[8];
    for (size_t i = 0; i < ncuts; i++) {
        size_t v = (size_t)data[1 + 2 * i] << 8 | data[2 + 2 * i];
        cuts[i] = len ? v % (len + 1) : 0;
    }
    qsort(cuts, ncuts, sizeof cuts[0], cmp_size);
    size_t whole_events = 0, cut_events = 0;
    int whole = run(s, len, NULL, 0, &whole_events);
    int cut = run(s, len, cuts, ncuts, &cut_events);
    if (whole != cut || whole_events != cut_events)
        abort(); /* where the reads split the stream must not matter */
    return 0;
}
