/* ks_server: one HTTPS listener per simulated cluster (server.c, the only user of libmicrohttpd).
 */
#ifndef KUBESIM_KS_SERVER_H
#define KUBESIM_KS_SERVER_H

#include "ks.h"

typedef struct ks_server ks_server_t;

/* Listens on 127.0.0.1:c->port with the PEM certificate and key. FG_OK with *out, or FG_EIO. */
int ks_server_start(ks_cluster_t *c, const char *cert_pem, const char *key_pem, ks_server_t **out);
/* Stops listening and joins every connection thread (set c->stopping first to end watches). */
void ks_server_stop(ks_server_t *s);

#endif
