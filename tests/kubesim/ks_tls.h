/* ks_tls: kubesim's certificates (tls.c). Kept apart from ks.h so only tls.c sees OpenSSL. */
#ifndef KUBESIM_KS_TLS_H
#define KUBESIM_KS_TLS_H

#include "fleetgate/core.h"

typedef struct {
    char *ca_pem;
    char *cert_pem;
    char *key_pem;
} ks_tls_t;

/* Loads dir/{ca.crt,server.crt,server.key} or creates them (the directory too). FG_OK with out
 * filled (free with ks_tls_free), or FG_EIO. */
int ks_tls_setup(const char *dir, ks_tls_t *out);
void ks_tls_free(ks_tls_t *t);

#endif
