/* tests/support/testkubesim.h: starting $FG_BUILD/kubesim for a test: n clusters on consecutive
 * free ports (cluster i on port + i), a bearer token, TLS material in a temp dir; stopped and
 * removed by tk_stop. Its admin API (/_kubesim/stats, /_kubesim/faults) is reached with tk_admin.
 */
#ifndef FG_TESTKUBESIM_H
#define FG_TESTKUBESIM_H

#include "fleetgate/kube.h"

#include <stdint.h>
#include <sys/types.h>

#define TK_TOKEN "kubesim-test-token"

typedef struct {
    pid_t pid;
    uint16_t port; /* cluster i listens on port + i */
    int n;
    char dir[64];        /* tls/, token */
    char token_file[96]; /* holds TK_TOKEN */
    char ca_file[96];    /* the simulator's CA */
    char urls[16][40];
    fg_kube_client_t *kc[16]; /* one client a cluster, for tk_call */
} tk_sim_t;

/* Starts kubesim with n clusters and the extra arguments (NULL-terminated, may be NULL), waiting
 * for its ready lines; retries on another port when the one picked was taken. 0 on success. */
int tk_start(tk_sim_t *k, int n, const char *const *extra);
/* Kills it (SIGKILL) and removes its dir. */
void tk_stop(tk_sim_t *k);
/* "https://127.0.0.1:PORT" of cluster i (n at most 16). */
#define tk_url(k, i) ((k)->urls[i])
/* One admin or Kubernetes request to cluster i through fleetgate's own client (kube.h);
 * returns the HTTP status (0: none); *out (may be NULL) gets the JSON answer (json_decref it). */
long tk_call(tk_sim_t *k, int i, const char *method, const char *path, const char *json,
             json_t **out);
/* requests.<verb> (create, update, patch, delete, get, list, watch) of /_kubesim/stats. */
long tk_requests(tk_sim_t *k, int i, const char *verb);
/* POST /_kubesim/faults with the JSON body (e.g. {"errorRate":1,"errorStatus":503}). 0 on 200. */
int tk_faults(tk_sim_t *k, int i, const char *json);

#endif
