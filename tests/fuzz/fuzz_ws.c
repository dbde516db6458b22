/* Fuzz target: WebSocket frames (src/http/ws.c) as a client and a cluster may send them.
 * Properties: never reads past the input; a parsed frame lies within it, obeys the rules
 * (control frames short and final), and its header built again parses to the same frame. The
 * same bytes as a Sec-WebSocket-Protocol value: a browser's bearer entry lies within it. */
#include "fleetgate/http.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    /* the input as a Sec-WebSocket-Protocol value: a bearer entry found lies within it */
    char *text = fg_xstrndup((const char *)data, size);
    const char *b64;
    size_t blen;
    if (fg_ws_bearer_protocol(text, &b64, &blen) == FG_OK &&
        (b64 < text || b64 + blen > text + strlen(text) || blen == 0))
        abort();
    free(text);
    bool from_client = (data[0] & 1) != 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1, at = 0;
    while (at < len) {
        fg_ws_frame_t f;
        int rc = fg_ws_parse(in + at, len - at, from_client, 1u << 16, &f);
        if (rc != FG_OK)
            break;
        if (f.header_len + f.payload_len > len - at || f.masked != from_client)
            abort();
        if (f.opcode >= FG_WS_CLOSE && (!f.fin || f.payload_len > FG_WS_MAX_CONTROL))
            abort();
        uint8_t hdr[FG_WS_MAX_HEADER];
        size_t h = fg_ws_header(hdr, f.fin, f.opcode, f.payload_len, f.masked ? f.mask : NULL);
        if (h != f.header_len || memcmp(hdr, in + at, h) != 0)
            abort();
        at += f.header_len + (size_t)f.payload_len;
    }
    return 0;
}
