/* auth/auth_internal.h: what the files of auth/ share; not part of any public surface. */
#ifndef FLEETGATE_AUTH_INTERNAL_H
#define FLEETGATE_AUTH_INTERNAL_H

#include "fleetgate/auth.h"

#include <openssl/evp.h>
#include <stdatomic.h>

/* The JWS algorithms fleetgate accepts: a table row each (name, digest, key type, and for
 * ECDSA the byte length of r and of s in the JOSE signature). */
typedef enum { ALG_RS256 = 0, ALG_RS384, ALG_RS512, ALG_ES256, ALG_ES384, ALG__COUNT } alg_t;

typedef struct {
    const char *name;
    const EVP_MD *(*md)(void);
    int key_type;      /* EVP_PKEY_RSA or EVP_PKEY_EC */
    const char *curve; /* EC group name, NULL for RSA */
    size_t ec_half;    /* bytes of r (and of s) */
} alg_row_t;

extern const alg_row_t fg_auth_algs[ALG__COUNT];
/* FG_OK and *out, or FG_ENOENT for a name not in the table (none, HS256 ...). */
int fg_auth_alg_lookup(const char *name, size_t len, alg_t *out);

typedef struct {
    char *kid;      /* NULL: the key for tokens without a kid */
    EVP_PKEY *pkey; /* parsed once: its type, size and curve are checked against its algs */
    char *pem;      /* the same key as PEM (SubjectPublicKeyInfo), what libjwt verifies with */
    size_t pem_len;
    unsigned algs; /* bit (1u << alg_t) per accepted algorithm */
} auth_key_t;

struct fg_keyset {
    atomic_int refs;
    auth_key_t *keys;
    size_t nkeys;
};

/* Finds the key for kid (NULL: the default key). Borrowed from ks. */
const auth_key_t *fg_keyset_find(const fg_keyset_t *ks, const char *kid);

typedef struct {
    char *name;
    fg_role_t role;
} project_role_t;

struct fg_principal {
    atomic_int refs;
    char *subject;
    char **groups;
    size_t ngroups;
    project_role_t *projects; /* sorted by name */
    size_t nprojects;
    bool admin;
    int64_t exp;
};

/* Builds a principal from verified claims (borrowed). FG_OK, or FG_EINVAL with why. */
int fg_principal_from_claims(const json_t *claims, const fg_auth_conf_t *conf, int64_t exp,
                             fg_principal_t **out, char *why, size_t whylen);

/* True when the last audit write failed (the sink is suspect). */
bool fg_audit_failing(const fg_audit_t *a);

#endif
