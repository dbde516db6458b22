/* Fuzz target: bearer tokens and the authorization of paths (auth/).
 *
 * The first byte picks what the rest is:
 *   0  a compact JWS, verified as the gate does (fg_token_verify);
 *   1  a JWT payload (claims JSON), signed here with the test's ES256 key so it passes the
 *      signature check and reaches the claim checks and the principal;
 *   2  a claims object, then after a NUL a request path: the principal from the claims is
 *      authorized for the route the path matches, as the gate would.
 * Properties: never crashes or leaks; a refusal names a reason and never echoes the token; an
 * unsigned token is never accepted; permissions are monotone in the role (exec implies write
 * implies read) and nobody but an admin reaches a project they hold no role in.
 *
 * The key pair is made at start-up (no key is committed) and its public half written to a temp
 * file for the configuration.
 */
#include "../../src/auth/auth_internal.h"

#include <openssl/ecdsa.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 2000000000LL

static EVP_PKEY *priv;
static fg_config_t *cfg;
static fg_keyset_t *ks;
static fg_router_t *router;

static int h(fg_req_t *req) {
    (void)req;
    return FG_OK;
}

static const fg_route_t routes[] = {
    {.method = "GET", .pattern = "/v1/projects/{project}/apps", .handler = h, .perm = FG_PERM_READ},
    {.method = "POST",
     .pattern = "/v1/projects/{project}/apps/{app}:scale",
     .handler = h,
     .perm = FG_PERM_WRITE},
    {.method = "GET",
     .pattern = "/v1/projects/{project}/pods/{pod}/logs",
     .handler = h,
     .perm = FG_PERM_LOGS},
    {.method = "GET",
     .pattern = "/v1/projects/{project}/pods/{pod}/exec",
     .handler = h,
     .perm = FG_PERM_EXEC},
    {.method = "POST", .pattern = "/v1/projects", .handler = h, .perm = FG_PERM_ADMIN},
    {.method = "GET", .pattern = "/v1/whoami", .handler = h, .perm = FG_PERM_AUTHENTICATED},
};

static void init(void) {
    char path[] = "/tmp/fg-fuzz-token-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    priv = EVP_EC_gen("P-256");
    if (f == NULL || priv == NULL || !PEM_write_PUBKEY(f, priv))
        abort();
    fclose(f);
    char text[1024];
    snprintf(text, sizeof text,
             "{\"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\","
             " \"keys\": [{\"kid\": \"k\", \"pem_file\": \"%s\", \"algs\": [\"ES256\"]},"
             " {\"pem_file\": \"%s\", \"algs\": [\"ES256\"]}]}}",
             path, path);
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    if (fg_config_load_text("fuzz.json", text, strlen(text), &cfg, &errs) != FG_OK ||
        fg_keyset_load(&ks, &cfg->auth, &errs) != FG_OK)
        abort();
    fg_buf_free(&errs);
    unlink(path);
    if (fg_router_new(&router, routes, sizeof routes / sizeof routes[0]) != FG_OK)
        abort();
    fg_log_set_level(FG_LOG_ERROR);
}

static void b64url(const unsigned char *in, size_t n, fg_buf_t *out) {
    char *text = fg_xmalloc(FG_B64URL_LEN(n) + 1);
    fg_buf_append(out, text, fg_b64url_encode(in, n, text));
    free(text);
}

/* header.payload.signature over payload bytes, ES256 with the fuzzer's key. */
static char *sign_es256(const uint8_t *payload, size_t len, size_t *out_len) {
    static const char hdr[] = "{\"alg\":\"ES256\",\"kid\":\"k\"}";
    fg_buf_t b;
    fg_buf_init(&b, 1 << 20);
    b64url((const unsigned char *)hdr, sizeof hdr - 1, &b);
    fg_buf_append(&b, ".", 1);
    b64url(payload, len, &b);
    size_t signed_len = b.len;
    unsigned char der[128], raw[64];
    size_t der_len = sizeof der;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, priv) != 1 ||
        EVP_DigestSign(ctx, der, &der_len, (const unsigned char *)b.data, signed_len) != 1)
        abort();
    EVP_MD_CTX_free(ctx);
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (sig == NULL || BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + 32, 32) != 32)
        abort();
    ECDSA_SIG_free(sig);
    fg_buf_append(&b, ".", 1);
    b64url(raw, sizeof raw, &b);
    *out_len = b.len;
    char *out = fg_xstrndup(b.data, b.len);
    fg_buf_free(&b);
    return out;
}

static void verify(const char *tok, size_t len, bool signed_here) {
    fg_principal_t *p = NULL;
    char why[256] = "";
    int rc = fg_token_verify(ks, &cfg->auth, tok, len, NOW, &p, why, sizeof why);
    if (rc == FG_OK) {
        if (!signed_here || p == NULL || fg_principal_subject(p) == NULL)
            abort(); /* an unsigned token got through */
        fg_principal_release(p);
        return;
    }
    if (p != NULL || why[0] == '\0')
        abort();
    /* Never echo the token: no 24-byte run of it may appear in the reason. */
    for (size_t i = 0; len >= 24 && i + 24 <= len; i += 24) {
        if (memmem(why, strlen(why), tok + i, 24) != NULL)
            abort();
    }
}

static void authorize(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (nul == NULL)
        return;
    json_t *claims = NULL;
    char jerr[128], why[256];
    fg_principal_t *p = NULL;
    if (fg_json_load((const char *)data, (size_t)(nul - data), &claims, jerr, sizeof jerr) !=
            FG_OK ||
        !json_is_object(claims)) {
        json_decref(claims);
        return;
    }
    int rc = fg_principal_from_claims(claims, &cfg->auth, NOW + 60, &p, why, sizeof why);
    json_decref(claims);
    if (rc != FG_OK)
        return;
    char *path = fg_xstrndup((const char *)nul + 1, size - (size_t)(nul + 1 - data));
    static const char *const methods[] = {"GET", "POST"};
    for (size_t mi = 0; mi < 2; mi++) {
        fg_route_match_t m;
        if (fg_router_match(router, methods[mi], path, &m) == FG_OK) {
            const char *project = NULL;
            for (size_t i = 0; i < m.nparams; i++) {
                if (strcmp(m.names[i], "project") == 0)
                    project = m.values[i];
            }
            fg_perm_t perm = m.route->perm;
            bool can = fg_auth_can(p, project, perm);
            fg_role_t role = fg_principal_role(p, project);
            if (project && perm >= FG_PERM_READ && can && role < fg_perm_role(perm))
                abort(); /* allowed with less than the role it needs */
            if (project && role == FG_ROLE_NONE && !fg_principal_is_admin(p) &&
                perm != FG_PERM_PUBLIC && perm != FG_PERM_AUTHENTICATED && can)
                abort(); /* cross-project */
            if (fg_auth_can(p, project, FG_PERM_EXEC) &&
                !(fg_auth_can(p, project, FG_PERM_WRITE) && fg_auth_can(p, project, FG_PERM_READ)))
                abort(); /* not monotone */
            if (perm == FG_PERM_ADMIN && can != fg_principal_is_admin(p))
                abort();
        }
        fg_route_match_clear(&m);
    }
    free(path);
    fg_principal_release(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (cfg == NULL)
        init();
    if (size == 0 || size > 16384)
        return 0;
    switch (data[0] % 3) {
        case 0: {
            char *tok = fg_xstrndup((const char *)data + 1, size - 1);
            verify(tok, size - 1, false);
            free(tok);
            break;
        }
        case 1: {
            size_t len;
            char *tok = sign_es256(data + 1, size - 1, &len);
            verify(tok, len, true);
            free(tok);
            break;
        }
        default:
            authorize(data + 1, size - 1);
    }
    return 0;
}
