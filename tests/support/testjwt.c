/* tests/support/testjwt.c: test-time keys (OpenSSL EVP) and tokens (libjwt). */
#include "testjwt.h"

#include "fleetgate/core.h"

#include <jwt.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_pair(EVP_PKEY *k, const char *pub, const char *priv) {
    FILE *f = fopen(pub, "w");
    if (f == NULL)
        return -1;
    int ok = PEM_write_PUBKEY(f, k);
    fclose(f);
    f = fopen(priv, "w");
    if (f == NULL)
        return -1;
    ok = ok && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    return ok ? 0 : -1;
}

int tj_rsa_pair(const char *pub, const char *priv) {
    EVP_PKEY *k = EVP_RSA_gen(2048);
    int rc = k ? write_pair(k, pub, priv) : -1;
    EVP_PKEY_free(k);
    return rc;
}

static void bn_b64(const EVP_PKEY *k, const char *param, char *out) {
    BIGNUM *bn = NULL;
    unsigned char buf[512];
    EVP_PKEY_get_bn_param(k, param, &bn);
    int n = BN_bn2bin(bn, buf);
    fg_b64url_encode(buf, (size_t)n, out);
    BN_free(bn);
}

static int write_jwks(tj_keys_t *k, EVP_PKEY *rsa, EVP_PKEY *ec) {
    char n[512], e[16], x[64], y[64];
    unsigned char pt[65];
    size_t ptlen = 0;
    bn_b64(rsa, OSSL_PKEY_PARAM_RSA_N, n);
    bn_b64(rsa, OSSL_PKEY_PARAM_RSA_E, e);
    EVP_PKEY_get_octet_string_param(ec, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt, &ptlen);
    if (ptlen != 65)
        return -1;
    fg_b64url_encode(pt + 1, 32, x);
    fg_b64url_encode(pt + 33, 32, y);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"keys\": [{\"kty\": \"RSA\", \"kid\": \"jwks-rsa\", \"use\": \"sig\", \"alg\": "
             "\"RS256\", \"n\": \"%s\", \"e\": \"%s\"}, {\"kty\": \"EC\", \"kid\": \"jwks-ec\", "
             "\"crv\": \"P-256\", \"x\": \"%s\", \"y\": \"%s\"}, {\"kty\": \"oct\", \"use\": "
             "\"enc\", \"k\": \"c2VjcmV0\"}]}",
             n, e, x, y);
    snprintf(k->jwks, sizeof k->jwks, "%s", tj_write(k->dir, "jwks.json", text));
    return 0;
}

int tj_keys_make(tj_keys_t *k) {
    snprintf(k->dir, sizeof k->dir, "/tmp/fg-test-keys-XXXXXX");
    if (mkdtemp(k->dir) == NULL)
        return -1;
#define P(field, name) snprintf(k->field, sizeof k->field, "%s/" name, k->dir)
    P(rsa_pub, "rsa.pub.pem");
    P(rsa_priv, "rsa.key.pem");
    P(rsa2_pub, "rsa2.pub.pem");
    P(rsa2_priv, "rsa2.key.pem");
    P(ec_pub, "ec.pub.pem");
    P(ec_priv, "ec.key.pem");
#undef P
    EVP_PKEY *rsa = EVP_RSA_gen(2048);
    EVP_PKEY *ec = EVP_EC_gen("P-256");
    int rc = rsa && ec ? 0 : -1;
    if (rc == 0)
        rc = write_pair(rsa, k->rsa_pub, k->rsa_priv);
    if (rc == 0)
        rc = write_pair(ec, k->ec_pub, k->ec_priv);
    if (rc == 0)
        rc = tj_rsa_pair(k->rsa2_pub, k->rsa2_priv);
    if (rc == 0)
        rc = write_jwks(k, rsa, ec);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    return rc;
}

void tj_keys_remove(tj_keys_t *k) {
    const char *files[] = {k->rsa_pub, k->rsa_priv, k->rsa2_pub, k->rsa2_priv,
                           k->ec_pub,  k->ec_priv,  k->jwks};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(files[i]);
    rmdir(k->dir);
}

const char *tj_write(const char *dir, const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

static unsigned char *read_all(const char *path, int *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    unsigned char *buf = malloc(65536);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = '\0';
    *len = (int)n;
    return buf;
}

char *tj_sign(const char *alg, const char *key_path, const char *kid, const char *claims_json) {
    jwt_t *jwt = NULL;
    unsigned char *key = NULL;
    int key_len = 0;
    char *out = NULL;
    jwt_alg_t a = jwt_str_alg(alg);
    if (a == JWT_ALG_INVAL || jwt_new(&jwt) != 0)
        return NULL;
    if (a != JWT_ALG_NONE && (key = read_all(key_path, &key_len)) == NULL)
        goto done;
    if (jwt_add_grants_json(jwt, claims_json) != 0)
        goto done;
    if (kid && jwt_add_header(jwt, "kid", kid) != 0)
        goto done;
    if (jwt_set_alg(jwt, a, key, key_len) != 0)
        goto done;
    out = jwt_encode_str(jwt); /* malloc'd by libjwt's default allocator */
done:
    free(key);
    jwt_free(jwt);
    return out;
}
