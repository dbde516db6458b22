/* Unit tests of the WebSocket codec (src/http/ws.c): frames parsed and built as RFC 6455
 * section 5 says, protocol errors refused by name, and the handshake's accept value (the
 * example of section 1.3). */
#include "fleetgate/http.h"
#include "testmain.h"

#include <check.h>
#include <string.h>

START_TEST(accept_matches_the_rfc_example) {
    char out[32];
    fg_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out);
    ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
END_TEST

START_TEST(key_rules) {
    ck_assert(fg_ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=="));
    static const char *const bad[] = {"",
                                      "dGhlIHNhbXBsZSBub25jZQ=",
                                      "dGhlIHNhbXBsZSBub25jZQ===",
                                      "dGhlIHNhbXBsZSBub25jZR==",
                                      "dGhlIHNhbXBsZSBub25j*Q==",
                                      "dGhlIHNhbXBsZSBub25jZQ",
                                      NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(!fg_ws_key_valid(bad[i]), "%s accepted", bad[i]);
    ck_assert(!fg_ws_key_valid(NULL));
}
END_TEST

/* A browser's token offered as a subprotocol: found among the others, spaces trimmed. */
START_TEST(bearer_protocol_found) {
    static const struct {
        const char *offered, *want; /* want NULL: none */
    } cases[] = {
        {"v5.channel.k8s.io, base64url.bearer.authorization.k8s.io.YWJj", "YWJj"},
        {"base64url.bearer.authorization.k8s.io.eHk ,v4.channel.k8s.io", "eHk"},
        {"  base64url.bearer.authorization.k8s.io.Zg\t", "Zg"},
        {"v5.channel.k8s.io", NULL},
        {"base64url.bearer.authorization.k8s.io.", NULL},
        {"base64url.bearer.authorization.k8s.io", NULL},
        {"xbase64url.bearer.authorization.k8s.io.YWJj", NULL},
        {"", NULL},
        {NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b64 = NULL;
        size_t len = 0;
        int rc = fg_ws_bearer_protocol(cases[i].offered, &b64, &len);
        if (cases[i].want == NULL) {
            ck_assert_msg(rc == FG_ENOENT, "%s: found", cases[i].offered);
            continue;
        }
        ck_assert_msg(rc == FG_OK, "%s: not found", cases[i].offered);
        ck_assert_int_eq(len, strlen(cases[i].want));
        ck_assert(strncmp(b64, cases[i].want, len) == 0);
    }
}
END_TEST

/* The examples of RFC 6455 section 5.7. */
START_TEST(rfc_examples_parse) {
    static const uint8_t hello[] = {0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f};
    static const uint8_t masked[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                     0x7f, 0x9f, 0x4d, 0x51, 0x58};
    fg_ws_frame_t f;
    ck_assert_int_eq(fg_ws_parse(hello, sizeof hello, false, 1024, &f), FG_OK);
    ck_assert(f.fin);
    ck_assert_int_eq(f.opcode, FG_WS_TEXT);
    ck_assert_int_eq((int)f.payload_len, 5);
    ck_assert_int_eq((int)f.header_len, 2);
    ck_assert_int_eq(fg_ws_parse(masked, sizeof masked, true, 1024, &f), FG_OK);
    uint8_t payload[5];
    memcpy(payload, masked + f.header_len, 5);
    fg_ws_mask(payload, 5, f.mask, 0);
    ck_assert_int_eq(memcmp(payload, "Hello", 5), 0);
    /* every prefix asks for more */
    for (size_t n = 0; n < sizeof masked; n++)
        ck_assert_int_eq(fg_ws_parse(masked, n, true, 1024, &f), FG_EAGAIN);
}
END_TEST

START_TEST(protocol_errors_refused) {
    static const struct {
        const char *why;
        uint8_t bytes[12];
        size_t len;
        bool from_client;
        int want;
    } cases[] = {
        {"reserved bit set", {0xC1, 0x80, 1, 2, 3, 4}, 6, true, FG_EINVAL},
        {"unknown opcode 3", {0x83, 0x80, 1, 2, 3, 4}, 6, true, FG_EINVAL},
        {"client frame unmasked", {0x82, 0x00}, 2, true, FG_EINVAL},
        {"server frame masked", {0x82, 0x80, 1, 2, 3, 4}, 6, false, FG_EINVAL},
        {"fragmented ping", {0x09, 0x80, 1, 2, 3, 4}, 6, true, FG_EINVAL},
        {"control frame of 126", {0x89, 0xFE, 0x00, 0x7E}, 4, true, FG_EINVAL},
        {"16-bit length not shortest", {0x82, 0x7E, 0x00, 0x10}, 4, false, FG_EINVAL},
        {"64-bit length not shortest",
         {0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0x01, 0x00},
         10,
         false,
         FG_EINVAL},
        {"64-bit length top bit", {0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, false, FG_EINVAL},
        {"payload over the bound", {0x82, 0x7E, 0x10, 0x00}, 4, false, FG_ETOOBIG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fg_ws_frame_t f;
        ck_assert_msg(fg_ws_parse(cases[i].bytes, cases[i].len, cases[i].from_client, 1024, &f) ==
                          cases[i].want,
                      "%s", cases[i].why);
    }
}
END_TEST

START_TEST(headers_round_trip) {
    static const uint64_t lens[] = {0, 1, 125, 126, 65535, 65536, 1u << 20};
    static const uint8_t mask[4] = {9, 8, 7, 6};
    static uint8_t buf[FG_WS_MAX_HEADER + (1u << 20)];
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (int m = 0; m < 2; m++) {
            size_t h = fg_ws_header(buf, true, FG_WS_BINARY, lens[i], m ? mask : NULL);
            memset(buf + h, 'x', lens[i]);
            fg_ws_frame_t f;
            ck_assert_int_eq(fg_ws_parse(buf, h + lens[i], m == 1, 1u << 20, &f), FG_OK);
            ck_assert_int_eq((int)f.header_len, (int)h);
            ck_assert(f.payload_len == lens[i]);
            ck_assert_int_eq(f.opcode, FG_WS_BINARY);
        }
}
END_TEST

static Suite *ws_suite(void) {
    Suite *s = suite_create("ws");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, accept_matches_the_rfc_example);
    tcase_add_test(tc, key_rules);
    tcase_add_test(tc, bearer_protocol_found);
    tcase_add_test(tc, rfc_examples_parse);
    tcase_add_test(tc, protocol_errors_refused);
    tcase_add_test(tc, headers_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(ws_suite());
}
