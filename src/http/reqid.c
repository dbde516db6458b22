/* http/reqid.c: request ids. A client's X-Request-Id is kept when it is short and made of
 * characters safe to log and echo; otherwise fleetgate makes one from a per-thread generator
 * (xoshiro256** seeded from the kernel), so the hot path makes no system call. */
#include "fleetgate/http.h"

#include <string.h>

bool fg_request_id_valid(const char *s) {
    size_t n = 0;
    if (s == NULL)
        return false;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok || n == FG_REQUEST_ID_MAX)
            return false;
    }
    return n > 0;
}

static _Thread_local uint64_t state[4];
static _Thread_local bool seeded;

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next(void) {
    uint64_t result = rotl(state[1] * 5, 7) * 9;
    uint64_t t = state[1] << 17;
    state[2] ^= state[0];
    state[3] ^= state[1];
    state[1] ^= state[2];
    state[0] ^= state[3];
    state[2] ^= t;
    state[3] = rotl(state[3], 45);
    return result;
}

void fg_request_id_generate(char *out) {
    static const char hex[] = "0123456789abcdef";
    if (!seeded) {
        if (fg_random_bytes(state, sizeof state) != FG_OK) {
            /* No kernel randomness: ids only need to be unique enough to correlate logs. */
            uint64_t t = fg_now_ns();
            state[0] = t ^ 0x9e3779b97f4a7c15u;
            state[1] = (uint64_t)(uintptr_t)&state ^ 0xbf58476d1ce4e5b9u;
            state[2] = t * 0x94d049bb133111ebu;
            state[3] = 0x2545f4914f6cdd1du;
        }
        seeded = true;
    }
    uint64_t a = next(), b = next();
    for (int i = 0; i < 16; i++) {
        out[i] = hex[(a >> (60 - 4 * i)) & 0xf];
        out[16 + i] = hex[(b >> (60 - 4 * i)) & 0xf];
    }
    out[32] = '\0';
}
