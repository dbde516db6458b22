/* api/writes.h: what the write handlers (projects.c, apps.c) share: the order every write
 * follows (validate, authorize: the gate did; check preconditions; audit the intent, fail
 * closed; fan out to the member clusters; wait until the cache shows the result; answer with
 * each cluster's outcome), and the problems each step sends. Not part of any public surface.
 *
 * Helpers named *_or_reply send the problem themselves and return false. */
#ifndef FLEETGATE_API_WRITES_H
#define FLEETGATE_API_WRITES_H

#include "reads.h"
#include "validate.h"

#include "fleetgate/fed.h"

#define WR_CLUSTER_DEADLINE_MS 5000 /* one member cluster's time to answer a write */
#define WR_APPLIED_WAIT_MS     3000 /* the longest a write waits for the cache to show it */

/* If-Match against the object's current version: true when absent, "*" or equal; else 412. */
bool wr_if_match_or_reply(fg_req_t *req, const char *version);
/* The audit line before anything is applied; 503 audit-unavailable when it cannot be written. */
bool wr_audit_or_reply(fg_req_t *req, const char *what);
/* Runs the writes; when one did not apply, answers 502 (504 when every failure is a timeout)
 * with `clusters` listing every outcome and returns false. *out holds the outcomes either way
 * (clear them with fg_fed_outcomes_clear). */
bool wr_fanout_or_reply(fg_req_t *req, const fg_fed_write_t *w, size_t n, fg_fed_outcome_t *out);
/* The 502 (504 when every failure is a timeout) of writes that did not all apply: the detail
 * names each failing cluster (then suffix, may be NULL), `clusters` lists every outcome. */
int wr_reply_failure(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                     const char *suffix);
/* Read your writes: writes each cluster's answer through to the cache (fg_fed_write_through),
 * and waits only for those it could not, until the cache of that cluster shows its outcome
 * (resource "namespaces", "deployments"...; gone: for deletes). A wait that does not end in
 * time is logged and the answer goes anyway (the write happened). */
void wr_wait_applied(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                     const char *kind, const char *resource, const char *scope, const char *name,
                     bool gone);
/* The same; true when every write's result was written through, with objs[i] the translated
 * object the cache now shows for write i (new references, NULL for one without; the caller
 * frees them either way), so the answer can be built without reading the cache back. */
bool wr_wait_applied_keep(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                          size_t n, const char *kind, const char *resource, const char *scope,
                          const char *name, bool gone, json_t **objs);
/* Hands the answers of n writes (out[i].object, NULL after) and kept[i] (NULL: none; either may
 * be NULL) to the request, which frees them once the reply went out (fg_req_release_later), and
 * clears the rest of the outcomes (fg_fed_outcomes_clear). */
void wr_release_later(fg_req_t *req, fg_fed_outcome_t *out, json_t **kept, size_t n);
/* The waiting half of wr_wait_applied_keep, after the writes were written through already
 * (fg_fed_write_through_begin / _end; shown[i] as they said). */
bool wr_wait_shown(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                   const char *kind, const char *resource, const char *scope, const char *name,
                   bool gone, const bool *shown);
/* Sends body (stolen) with status, an ETag of version and, for 201, a Location of path. */
int wr_reply(fg_req_t *req, unsigned status, json_t *body, const char *version,
             const char *location);
/* The same with the body's JSON text (len bytes, taken: freed with free) made already. */
int wr_reply_text(fg_req_t *req, unsigned status, char *text, size_t len, const char *version,
                  const char *location);
/* Runs handler under the request's Idempotency-Key (IETF httpapi draft), if it has one: the
 * first request with a key runs and its 2xx answer (sent through wr_reply) is kept in Redis for
 * 24 hours; a retry with the same key and request answers that again on any replica without
 * running; the same key with another method, path or body is 422, one still in progress 409.
 * An answer that is not 2xx is not kept (nothing was changed, or a retry converges). */
int wr_idempotent(fg_req_t *req, fg_handler_fn handler);
/* The annotations every object fleetgate writes carries: who asked and the request id. */
void wr_stamp(fg_req_t *req, json_t *annotations);

#endif
