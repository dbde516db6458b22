/* tests/support/teststack.h: the starters the integration suites that run the whole stack share
 * (test_history, test_insights, test_writes, test_jobs, test_stream, test_reload): pauses, tokens
 * signed with the suite's RSA key, waiting for the daemon's /readyz, and its log when it exited
 * badly.
 * Failures are check assertions (these run inside a test or its fixture). */
#ifndef FG_TESTSTACK_H
#define FG_TESTSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "testhttp.h"
#include "testjwt.h"
#include "testkubesim.h"

void ts_sleep_ms(int ms);
/* A token for sub, valid an hour, issued as the suites' daemons expect (iss https://id.test, aud
 * fleetgate), with the claims `more` (JSON members, e.g. "\"groups\": [...]"), signed RS256
 * with keys' rsa_priv as kid rsa1. The caller frees it. */
char *ts_token(const tj_keys_t *keys, const char *sub, const char *more);
/* Polls GET /readyz on port every 50 ms, up to tries times; fails the test when it never
 * answers 200. */
void ts_wait_ready(uint16_t port, int tries);
/* One call to the daemon on port: tok as a bearer token (NULL: none), body as JSON (a PATCH as
 * a merge patch; NULL: none), extra one more header line (NULL: none). With check, the answer
 * must be one the contract declares (the test fails otherwise). Returns the status; free r. */
long ts_call(uint16_t port, const char *method, const char *path, const char *tok, const char *body,
             const char *extra, bool check, th_resp_t *r);
/* The members of a daemon configuration's "clusters" array for ks's first three clusters into
 * out: c0, c1, c2 in zones zone-a, zone-a, zone-b of region r1, with kubesim's token and CA;
 * with env_labels, labels env=dev (c1) and env=prod (the others). */
void ts_clusters_json(const tk_sim_t *ks, bool env_labels, char *out, size_t len);
/* The daemon's log (dir/daemon.log) into text (len bytes, NUL-ended) when status says it
 * exited badly (not 0); else "". */
void ts_log_if_failed(int status, const char *dir, char *text, size_t len);

#endif
