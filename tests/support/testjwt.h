/* tests/support/testjwt.h: keys and tokens made at test time (no private key is committed).
 * Key pairs come from OpenSSL's EVP (written as PEM into a temp dir); tokens are signed with
 * libjwt, an implementation independent of fleetgate's verifier. */
#ifndef FG_TESTJWT_H
#define FG_TESTJWT_H

#include <stddef.h>

typedef struct {
    char dir[64];
    char rsa_pub[128], rsa_priv[128];   /* RSA 2048 */
    char rsa2_pub[128], rsa2_priv[128]; /* another RSA 2048 (the "wrong key") */
    char ec_pub[128], ec_priv[128];     /* EC P-256 */
    char jwks[128];                     /* JWKS holding rsa as kid "jwks-rsa", ec as "jwks-ec" */
} tj_keys_t;

/* Makes the keys in a new temp dir; 0 on success. */
int tj_keys_make(tj_keys_t *k);
void tj_keys_remove(tj_keys_t *k);
/* Writes a new RSA key pair into pub/priv (paths); 0 on success. */
int tj_rsa_pair(const char *pub, const char *priv);

/* A compact JWS of claims_json signed with alg ("RS256", "ES256", "HS256", "none") and the PEM
 * file at key_path (its bytes are the secret for HS256; unused for none); kid may be NULL.
 * Returns a malloc'd string, or NULL. */
char *tj_sign(const char *alg, const char *key_path, const char *kid, const char *claims_json);

/* Writes text into a new file in dir; returns its path (static buffer). */
const char *tj_write(const char *dir, const char *name, const char *text);

#endif
