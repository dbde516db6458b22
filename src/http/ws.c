/* http/ws.c: WebSocket framing (RFC 6455 section 5) and the handshake's key and accept values.
 * The codec only parses and builds headers: callers own their buffers, and every length is
 * checked before a byte is read, so a hostile peer can make it return FG_EINVAL or FG_ETOOBIG
 * but never read past data + len (tests/fuzz/fuzz_ws.c). */
#include "fleetgate/http.h"

#include <openssl/sha.h>
#include <string.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static bool known_opcode(uint8_t op) {
    return op <= FG_WS_BINARY || (op >= FG_WS_CLOSE && op <= FG_WS_PONG);
}

int fg_ws_parse(const uint8_t *data, size_t len, bool from_client, size_t max_payload,
                fg_ws_frame_t *f) {
    if (len < 2)
        return FG_EAGAIN;
    uint8_t b0 = data[0], b1 = data[1];
    bool fin = (b0 & 0x80) != 0, masked = (b1 & 0x80) != 0;
    uint8_t op = b0 & 0x0F;
    /* No extension is negotiated, so the reserved bits must be zero (section 5.2). */
    if ((b0 & 0x70) != 0 || !known_opcode(op) || masked != from_client)
        return FG_EINVAL;
    uint64_t plen = b1 & 0x7F;
    size_t hlen = 2;
    if (plen == 126) {
        if (len < 4)
            return FG_EAGAIN;
        plen = ((uint64_t)data[2] << 8) | data[3];
        hlen = 4;
        if (plen < 126)
            return FG_EINVAL; /* not the shortest form */
    } else if (plen == 127) {
        if (len < 10)
            return FG_EAGAIN;
        plen = 0;
        for (int i = 0; i < 8; i++)
            plen = (plen << 8) | data[2 + i];
        hlen = 10;
        if ((plen >> 63) != 0 || plen <= 0xFFFF)
            return FG_EINVAL;
    }
    if (op >= FG_WS_CLOSE && (!fin || plen > FG_WS_MAX_CONTROL))
        return FG_EINVAL;
    if (plen > max_payload)
        return FG_ETOOBIG;
    if (masked)
        hlen += 4;
    if (len < hlen || len - hlen < plen)
        return FG_EAGAIN;
    f->fin = fin;
    f->opcode = op;
    f->masked = masked;
    if (masked)
        memcpy(f->mask, data + hlen - 4, 4);
    else
        memset(f->mask, 0, 4);
    f->payload_len = plen;
    f->header_len = hlen;
    return FG_OK;
}

void fg_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t offset) {
    for (size_t i = 0; i < len; i++)
        data[i] ^= mask[(offset + i) & 3];
}

size_t fg_ws_header(uint8_t *out, bool fin, uint8_t opcode, uint64_t payload_len,
                    const uint8_t *mask) {
    size_t n = 0;
    out[n++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
    uint8_t m = mask ? 0x80 : 0;
    if (payload_len < 126)
        out[n++] = (uint8_t)(m | payload_len);
    else if (payload_len <= 0xFFFF) {
        out[n++] = (uint8_t)(m | 126);
        out[n++] = (uint8_t)(payload_len >> 8);
        out[n++] = (uint8_t)payload_len;
    } else {
        out[n++] = (uint8_t)(m | 127);
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)(payload_len >> (8 * i));
    }
    if (mask) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c) {
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

bool fg_ws_key_valid(const char *key) {
    /* 16 bytes are 22 significant characters and "=="; the last one carries 2 bits, so its low
     * 4 bits must be zero for the encoding to be canonical. */
    if (key == NULL || strlen(key) != 24 || key[22] != '=' || key[23] != '=')
        return false;
    for (int i = 0; i < 22; i++)
        if (b64_value(key[i]) < 0)
            return false;
    return (b64_value(key[21]) & 0x0F) == 0;
}

/* Standard base64 with padding (RFC 4648 section 4). */
static void base64(const uint8_t *in, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
    out[o] = '\0';
}

void fg_ws_key_from(const uint8_t raw[16], char *out) {
    base64(raw, 16, out);
}

void fg_ws_accept(const char *key, char *out) {
    unsigned char md[SHA_DIGEST_LENGTH];
    char text[64 + sizeof WS_GUID];
    size_t klen = strnlen(key, 64);
    memcpy(text, key, klen);
    memcpy(text + klen, WS_GUID, sizeof WS_GUID - 1);
    SHA1((const unsigned char *)text, klen + sizeof WS_GUID - 1, md);
    base64(md, SHA_DIGEST_LENGTH, out);
}

int fg_ws_bearer_protocol(const char *offered, const char **token, size_t *len) {
    static const size_t plen = sizeof FG_WS_BEARER_PREFIX - 1;
    for (const char *s = offered; s && *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        size_t n = strcspn(s, ",");
        size_t m = n;
        while (m > 0 && (s[m - 1] == ' ' || s[m - 1] == '\t'))
            m--;
        if (m > plen && strncmp(s, FG_WS_BEARER_PREFIX, plen) == 0) {
            *token = s + plen;
            *len = m - plen;
            return FG_OK;
        }
        s += n;
    }
    return FG_ENOENT;
}
