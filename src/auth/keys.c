/* auth/keys.c: the verification keys, checked once.
 *
 * libjwt 1.10.2 has no notion of a key's algorithm (it would verify HS256 with an RSA public key
 * as the secret); fleetgate parses each key once into an EVP_PKEY, checks that it suits every
 * algorithm configured for it (type, RSA size, EC curve), records which algorithms it accepts,
 * and keeps it as PEM for libjwt (token.c checks the token's alg against the list before libjwt
 * runs). A key set is immutable after load and reference counted, so a reload (SIGHUP) swaps
 * the whole set while requests in flight keep theirs.
 *
 * Sources: auth.keys[] (PEM public keys, with their kid and algorithms) and auth.jwks_file (RFC
 * 7517: RSA keys from n/e, EC keys from crv/x/y; every key needs a kid; its alg comes from the
 * JWK's "alg", else from its type: RSA -> RS256, P-256 -> ES256, P-384 -> ES384; keys whose "use"
 * is not "sig" are skipped).
 */
#include "auth_internal.h"

#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#define KEY_FILE_MAX  (64u << 10)
#define JWKS_FILE_MAX (1u << 20)
#define JWKS_MAX_KEYS 64
#define RSA_MIN_BITS  2048

const alg_row_t fg_auth_algs[ALG__COUNT] = {
    [ALG_RS256] = {"RS256", EVP_sha256, EVP_PKEY_RSA, NULL, 0},
    [ALG_RS384] = {"RS384", EVP_sha384, EVP_PKEY_RSA, NULL, 0},
    [ALG_RS512] = {"RS512", EVP_sha512, EVP_PKEY_RSA, NULL, 0},
    [ALG_ES256] = {"ES256", EVP_sha256, EVP_PKEY_EC, "prime256v1", 32},
    [ALG_ES384] = {"ES384", EVP_sha384, EVP_PKEY_EC, "secp384r1", 48},
};

int fg_auth_alg_lookup(const char *name, size_t len, alg_t *out) {
    for (int i = 0; i < ALG__COUNT; i++) {
        if (strlen(fg_auth_algs[i].name) == len && memcmp(fg_auth_algs[i].name, name, len) == 0) {
            *out = (alg_t)i;
            return FG_OK;
        }
    }
    return FG_ENOENT;
}

static const char *const role_names[] = {
    [FG_ROLE_NONE] = "none",         [FG_ROLE_VIEWER] = "viewer", [FG_ROLE_DEVELOPER] = "developer",
    [FG_ROLE_OPERATOR] = "operator", [FG_ROLE_ADMIN] = "admin",
};

int fg_role_parse(const char *s, fg_role_t *out) {
    for (int r = FG_ROLE_VIEWER; r <= FG_ROLE_ADMIN; r++) {
        if (strcmp(s, role_names[r]) == 0) {
            *out = (fg_role_t)r;
            return FG_OK;
        }
    }
    return FG_ENOENT;
}

const char *fg_role_name(fg_role_t r) {
    return (unsigned)r <= FG_ROLE_ADMIN ? role_names[r] : "none";
}

/* ---- key checks -------------------------------------------------------- */

/* The EC group of an EC key ("prime256v1"), or "" for others. */
static void key_curve(EVP_PKEY *k, char *buf, size_t len) {
    size_t got = 0;
    buf[0] = '\0';
    if (EVP_PKEY_get_base_id(k) != EVP_PKEY_EC ||
        !EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, buf, len, &got))
        buf[0] = '\0';
}

/* Does key k suit algorithm a? NULL when it does, otherwise why not. */
static const char *key_fits(EVP_PKEY *k, alg_t a) {
    const alg_row_t *row = &fg_auth_algs[a];
    if (EVP_PKEY_get_base_id(k) != row->key_type)
        return row->key_type == EVP_PKEY_RSA ? "needs an RSA key" : "needs an EC key";
    if (row->key_type == EVP_PKEY_RSA)
        return EVP_PKEY_get_bits(k) >= RSA_MIN_BITS ? NULL
                                                    : "needs an RSA key of 2048 bits or more";
    char curve[32];
    key_curve(k, curve, sizeof curve);
    if (strcmp(curve, row->curve) != 0)
        return a == ALG_ES256 ? "needs an EC P-256 key" : "needs an EC P-384 key";
    return NULL;
}

/* Adds pkey (the set takes it over) with its PEM form. FG_OK, or FG_EINVAL when OpenSSL cannot
 * write the key as PEM (then pkey is still the caller's). */
static int keyset_add(fg_keyset_t *ks, const char *kid, EVP_PKEY *pkey, unsigned algs) {
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long len = 0;
    if (bio == NULL || PEM_write_bio_PUBKEY(bio, pkey) != 1 ||
        (len = BIO_get_mem_data(bio, &data)) <= 0) {
        BIO_free(bio);
        return FG_EINVAL;
    }
    ks->keys = fg_xrealloc(ks->keys, (ks->nkeys + 1) * sizeof *ks->keys);
    auth_key_t *k = &ks->keys[ks->nkeys++];
    k->kid = kid ? fg_xstrdup(kid) : NULL;
    k->pkey = pkey;
    k->pem = fg_xstrndup(data, (size_t)len);
    k->pem_len = (size_t)len;
    k->algs = algs;
    BIO_free(bio);
    return FG_OK;
}

/* ---- PEM --------------------------------------------------------------- */

static int load_pem(fg_keyset_t *ks, const fg_auth_key_conf_t *kc, size_t idx, fg_buf_t *errs) {
    char *text = NULL;
    size_t len;
    EVP_PKEY *pkey = NULL;
    BIO *bio = NULL;
    unsigned algs = 0;
    int rc = FG_OK;
    if (fg_read_file(kc->pem_file, KEY_FILE_MAX, &text, &len) != FG_OK) {
        fg_buf_appendf(errs, "auth.keys[%zu].pem_file: cannot read %s\n", idx, kc->pem_file);
        rc = FG_EINVAL;
        goto out;
    }
    bio = BIO_new_mem_buf(text, (int)len);
    pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    if (pkey == NULL) {
        fg_buf_appendf(errs, "auth.keys[%zu].pem_file: not a PEM public key (%s)\n", idx,
                       kc->pem_file);
        rc = FG_EINVAL;
        goto out;
    }
    for (size_t i = 0; i < kc->nalgs; i++) {
        alg_t a;
        if (fg_auth_alg_lookup(kc->algs[i], strlen(kc->algs[i]), &a) != FG_OK)
            continue; /* the configuration table already refused it */
        const char *why = key_fits(pkey, a);
        if (why) {
            fg_buf_appendf(errs, "auth.keys[%zu].algs[%zu]: %s %s (%s)\n", idx, i, kc->algs[i], why,
                           kc->pem_file);
            rc = FG_EINVAL;
            goto out;
        }
        algs |= 1u << a;
    }
    if (keyset_add(ks, kc->kid, pkey, algs) != FG_OK) {
        fg_buf_appendf(errs, "auth.keys[%zu].pem_file: cannot re-encode the key (%s)\n", idx,
                       kc->pem_file);
        rc = FG_EINVAL;
        goto out;
    }
    pkey = NULL;
out:
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    free(text);
    return rc;
}

/* ---- JWKS -------------------------------------------------------------- */

/* A base64url member of a JWK into a new buffer; NULL when absent or malformed. */
static unsigned char *jwk_bytes(const json_t *jwk, const char *name, size_t *len) {
    const char *s = json_string_value(json_object_get(jwk, name));
    unsigned char *out = NULL;
    if (s == NULL || fg_b64url_decode(s, strlen(s), &out, len) != FG_OK || *len == 0) {
        free(out);
        return NULL;
    }
    return out;
}

static EVP_PKEY *pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld) {
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    if (pkey == NULL)
        return NULL;
    /* An EC point off its curve (or an RSA key that is no key) must not load. */
    EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = check && EVP_PKEY_public_check(check) == 1;
    EVP_PKEY_CTX_free(check);
    if (!ok) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    return pkey;
}

static EVP_PKEY *jwk_rsa(const json_t *jwk) {
    size_t nlen = 0, elen = 0;
    unsigned char *n = jwk_bytes(jwk, "n", &nlen), *e = jwk_bytes(jwk, "e", &elen);
    BIGNUM *bn = NULL, *be = NULL;
    OSSL_PARAM_BLD *bld = NULL;
    EVP_PKEY *pkey = NULL;
    if (n == NULL || e == NULL)
        goto out;
    bn = BN_bin2bn(n, (int)nlen, NULL);
    be = BN_bin2bn(e, (int)elen, NULL);
    bld = OSSL_PARAM_BLD_new();
    if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        pkey = pkey_fromdata("RSA", bld);
out:
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    free(n);
    free(e);
    return pkey;
}

static EVP_PKEY *jwk_ec(const json_t *jwk, const char **curve_out) {
    static const struct {
        const char *crv, *group;
        size_t len;
    } curves[] = {{"P-256", "prime256v1", 32}, {"P-384", "secp384r1", 48}};
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    size_t xlen = 0, ylen = 0;
    unsigned char *x = jwk_bytes(jwk, "x", &xlen), *y = jwk_bytes(jwk, "y", &ylen);
    unsigned char point[1 + 2 * 48];
    OSSL_PARAM_BLD *bld = NULL;
    EVP_PKEY *pkey = NULL;
    size_t c = 0;
    while (crv && c < sizeof curves / sizeof curves[0] && strcmp(crv, curves[c].crv) != 0)
        c++;
    if (crv == NULL || c == sizeof curves / sizeof curves[0] || x == NULL || y == NULL ||
        xlen != curves[c].len || ylen != curves[c].len)
        goto out;
    point[0] = 0x04; /* uncompressed */
    memcpy(point + 1, x, xlen);
    memcpy(point + 1 + xlen, y, ylen);
    bld = OSSL_PARAM_BLD_new();
    if (bld &&
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, curves[c].group, 0) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + xlen + ylen))
        pkey = pkey_fromdata("EC", bld);
    *curve_out = curves[c].crv;
out:
    OSSL_PARAM_BLD_free(bld);
    free(x);
    free(y);
    return pkey;
}

/* One JWK; appends a line to errs and returns FG_EINVAL when it cannot be used. */
static int load_jwk(fg_keyset_t *ks, const json_t *jwk, const char *file, size_t i,
                    fg_buf_t *errs) {
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    const char *kid = json_string_value(json_object_get(jwk, "kid"));
    const char *use = json_string_value(json_object_get(jwk, "use"));
    const char *alg_name = json_string_value(json_object_get(jwk, "alg"));
    const char *curve = NULL;
    EVP_PKEY *pkey = NULL;
    alg_t a;
    if (use && strcmp(use, "sig") != 0)
        return FG_OK; /* an encryption key has no business here: skipped */
    if (kid == NULL || *kid == '\0') {
        fg_buf_appendf(errs, "auth.jwks_file: keys[%zu]: needs a kid (%s)\n", i, file);
        return FG_EINVAL;
    }
    if (kty && strcmp(kty, "RSA") == 0)
        pkey = jwk_rsa(jwk);
    else if (kty && strcmp(kty, "EC") == 0)
        pkey = jwk_ec(jwk, &curve);
    if (pkey == NULL) {
        fg_buf_appendf(errs,
                       "auth.jwks_file: keys[%zu] (kid %.64s): not an RSA or EC P-256/P-384 "
                       "public key (%s)\n",
                       i, kid, file);
        return FG_EINVAL;
    }
    if (alg_name == NULL)
        alg_name = curve == NULL ? "RS256" : strcmp(curve, "P-256") == 0 ? "ES256" : "ES384";
    const char *why = fg_auth_alg_lookup(alg_name, strlen(alg_name), &a) == FG_OK
                          ? key_fits(pkey, a)
                          : "is not an accepted algorithm";
    if (why) {
        fg_buf_appendf(errs, "auth.jwks_file: keys[%zu] (kid %.64s): alg %.16s %s (%s)\n", i, kid,
                       alg_name, why, file);
        EVP_PKEY_free(pkey);
        return FG_EINVAL;
    }
    if (fg_keyset_find(ks, kid) != NULL) {
        fg_buf_appendf(errs, "auth.jwks_file: keys[%zu]: duplicate kid %.64s (%s)\n", i, kid, file);
        EVP_PKEY_free(pkey);
        return FG_EINVAL;
    }
    if (keyset_add(ks, kid, pkey, 1u << a) != FG_OK) {
        fg_buf_appendf(errs, "auth.jwks_file: keys[%zu] (kid %.64s): cannot encode as PEM (%s)\n",
                       i, kid, file);
        EVP_PKEY_free(pkey);
        return FG_EINVAL;
    }
    return FG_OK;
}

static int load_jwks(fg_keyset_t *ks, const char *file, fg_buf_t *errs) {
    char *text = NULL, jerr[256];
    size_t len;
    json_t *root = NULL;
    int rc = FG_OK;
    if (fg_read_file(file, JWKS_FILE_MAX, &text, &len) != FG_OK) {
        fg_buf_appendf(errs, "auth.jwks_file: cannot read %s\n", file);
        rc = FG_EINVAL;
        goto out;
    }
    if (fg_json_load(text, len, &root, jerr, sizeof jerr) != FG_OK) {
        fg_buf_appendf(errs, "auth.jwks_file: %s: %s\n", file, jerr);
        rc = FG_EINVAL;
        goto out;
    }
    json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys) || json_array_size(keys) > JWKS_MAX_KEYS) {
        fg_buf_appendf(errs, "auth.jwks_file: %s: needs a \"keys\" array of at most %d keys\n",
                       file, JWKS_MAX_KEYS);
        rc = FG_EINVAL;
        goto out;
    }
    for (size_t i = 0; i < json_array_size(keys); i++) {
        if (load_jwk(ks, json_array_get(keys, i), file, i, errs) != FG_OK)
            rc = FG_EINVAL;
    }
out:
    json_decref(root);
    free(text);
    return rc;
}

/* ---- the set ----------------------------------------------------------- */

int fg_keyset_load(fg_keyset_t **out, const fg_auth_conf_t *conf, fg_buf_t *errs) {
    fg_keyset_t *ks = fg_xcalloc(1, sizeof *ks);
    int rc = FG_OK;
    atomic_init(&ks->refs, 1);
    for (size_t i = 0; i < conf->nkeys; i++) {
        if (load_pem(ks, &conf->keys[i], i, errs) != FG_OK)
            rc = FG_EINVAL;
    }
    if (conf->jwks_file && load_jwks(ks, conf->jwks_file, errs) != FG_OK)
        rc = FG_EINVAL;
    if (rc != FG_OK) {
        fg_keyset_release(ks);
        return rc;
    }
    *out = ks;
    return FG_OK;
}

void fg_keyset_release(fg_keyset_t *ks) {
    if (ks == NULL || atomic_fetch_sub(&ks->refs, 1) != 1)
        return;
    for (size_t i = 0; i < ks->nkeys; i++) {
        free(ks->keys[i].kid);
        free(ks->keys[i].pem);
        EVP_PKEY_free(ks->keys[i].pkey);
    }
    free(ks->keys);
    free(ks);
}

size_t fg_keyset_size(const fg_keyset_t *ks) {
    return ks->nkeys;
}

const auth_key_t *fg_keyset_find(const fg_keyset_t *ks, const char *kid) {
    for (size_t i = 0; i < ks->nkeys; i++) {
        const char *k = ks->keys[i].kid;
        if ((kid == NULL && k == NULL) || (kid && k && strcmp(kid, k) == 0))
            return &ks->keys[i];
    }
    return NULL;
}
