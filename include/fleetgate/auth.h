/* auth: who is calling, what they may do where, what they did, and how often.
 *
 * - Keys: PEM files and a JWKS file from the configuration, parsed once into an immutable key
 *   set; fg_auth_reload() swaps in a new one (SIGHUP) while requests keep using the old one
 *   until they let it go (reference counted).
 * - Tokens: `Authorization: Bearer <JWT>`, RS256/RS384/RS512/ES256/ES384 only, the algorithm
 *   must be one its key accepts (so `none` and HS256-keyed-with-the-public-key are refused),
 *   then exp, nbf (with leeway), iss, aud and sub. Signatures are verified by libjwt with the
 *   key's PEM; verified tokens are remembered by SHA-256, never past their exp.
 * - Principal: subject, groups and a role per project from configured claims; roles are
 *   viewer < developer < operator < admin, and a member of auth.admin_group is admin everywhere.
 * - The gate (fg_auth_gate, fg_auth_seal: the hooks of fg_http_options_t) authenticates,
 *   authorizes against the route's fg_perm_t and {project}, charges the rate limit, adds the
 *   RateLimit-* headers, and writes the audit line of every mutating or refused call.
 *
 * Only src/auth/ includes OpenSSL's EVP and libjwt headers.
 */
#ifndef FLEETGATE_AUTH_H
#define FLEETGATE_AUTH_H

#include "fleetgate/cache.h"
#include "fleetgate/core.h"
#include "fleetgate/http.h"

typedef struct fg_auth fg_auth_t;
typedef struct fg_keyset fg_keyset_t;
typedef struct fg_principal fg_principal_t;
typedef struct fg_audit fg_audit_t;
typedef struct fg_ratelimit fg_ratelimit_t;
typedef struct fg_stream_lease fg_stream_lease_t;

typedef enum {
    FG_ROLE_NONE = 0,
    FG_ROLE_VIEWER,
    FG_ROLE_DEVELOPER,
    FG_ROLE_OPERATOR,
    FG_ROLE_ADMIN,
} fg_role_t;

/* "viewer", ...; FG_ENOENT for a name that is no role. */
int fg_role_parse(const char *s, fg_role_t *out);
const char *fg_role_name(fg_role_t r);

/* ---- keys -------------------------------------------------------------- */

/* Parses every configured key (auth.keys[] PEM files, auth.jwks_file). FG_OK with *out set
 * (one reference, released with fg_keyset_release), or FG_EINVAL with one line per problem in
 * errs ("auth.keys[0].pem_file: not a PEM public key"). An empty set is valid: every token is
 * then refused. */
int fg_keyset_load(fg_keyset_t **out, const fg_auth_conf_t *conf, fg_buf_t *errs);
void fg_keyset_release(fg_keyset_t *ks);
size_t fg_keyset_size(const fg_keyset_t *ks);

/* ---- tokens ------------------------------------------------------------ */

#define FG_TOKEN_MAX_BYTES  8192 /* longer Authorization values are refused unparsed */
#define FG_TOKEN_MAX_HEADER 1024 /* decoded JOSE header */

/* Verifies a compact JWS and builds its principal. FG_OK with *out (a new reference: release
 * with fg_principal_release), or FG_EINVAL with why set to the failed check ("the token expired
 * at 2026-11-22T13:00:00Z", "signature does not verify"...), never echoing the token. now_s is
 * the wall clock in seconds (a parameter, so tests can move it). */
int fg_token_verify(const fg_keyset_t *ks, const fg_auth_conf_t *conf, const char *token,
                    size_t len, int64_t now_s, fg_principal_t **out, char *why, size_t whylen);
/* The same, and on a refusal *lasting says whether it holds for this key set and configuration
 * whatever the clock does later (false only for an nbf still ahead): what the gate may remember. */
int fg_token_verify_lasting(const fg_keyset_t *ks, const fg_auth_conf_t *conf, const char *token,
                            size_t len, int64_t now_s, fg_principal_t **out, char *why,
                            size_t whylen, bool *lasting);

/* ---- principal --------------------------------------------------------- */

void fg_principal_retain(fg_principal_t *p);
void fg_principal_release(fg_principal_t *p);
const char *fg_principal_subject(const fg_principal_t *p);
bool fg_principal_is_admin(const fg_principal_t *p);
int64_t fg_principal_expiry(const fg_principal_t *p);
size_t fg_principal_ngroups(const fg_principal_t *p);
const char *fg_principal_group(const fg_principal_t *p, size_t i);
/* The caller's role in project (FG_ROLE_ADMIN everywhere for an admin, FG_ROLE_NONE when
 * none). */
fg_role_t fg_principal_role(const fg_principal_t *p, const char *project);
/* The projects the caller holds a role in, by name: for i < fg_principal_nprojects. Lists use
 * this (and fg_auth_can) so they never show another project. An admin's list holds only the
 * projects named in the token; admins see every project through fg_principal_is_admin. */
size_t fg_principal_nprojects(const fg_principal_t *p);
const char *fg_principal_project(const fg_principal_t *p, size_t i, fg_role_t *role);

/* May p do perm in project (NULL for routes without one)? FG_PERM_PUBLIC is always allowed;
 * FG_PERM_AUTHENTICATED and FG_PERM_METRICS need only a principal. */
bool fg_auth_can(const fg_principal_t *p, const char *project, fg_perm_t perm);
/* The role a permission needs (FG_ROLE_NONE for public and authenticated-only ones). */
fg_role_t fg_perm_role(fg_perm_t perm);

/* ---- audit ------------------------------------------------------------- */

/* Opens path for appending ("-": stdout). FG_OK, or FG_EIO (logged). */
int fg_audit_open(fg_audit_t **out, const char *path);
void fg_audit_close(fg_audit_t *a);
/* Writes line as one JSON line with one write(2). FG_OK, or FG_EIO. Thread-safe. */
int fg_audit_write(fg_audit_t *a, const json_t *line);
/* Records a refusal: its line is written when it is the first of its kind (a string naming
 * what makes two refusals the same) in the current interval; later ones of that kind are
 * counted and one line with the count ("repeated") is written when the interval ends. FG_OK,
 * or FG_EIO when a line could not be written. Thread-safe. */
int fg_audit_refusal(fg_audit_t *a, const json_t *line, const char *kind);
/* The cheap half of fg_audit_refusal, for callers that build the line only when needed: true
 * when a refusal of this kind is counted into the open interval (nothing to write); false when
 * it opens one (then call fg_audit_refusal with its line). */
bool fg_audit_fold(fg_audit_t *a, const char *kind);
/* Reopens the file (log rotation; SIGHUP). FG_OK or FG_EIO; the old file stays on failure. */
int fg_audit_reopen(fg_audit_t *a);

/* ---- rate limits ------------------------------------------------------- */

typedef struct {
    bool allowed;
    bool local;            /* decided by the per-process fallback (Redis unreachable) */
    int64_t limit;         /* the tightest bucket's burst */
    int64_t remaining;     /* what is left of it */
    int64_t reset_s;       /* seconds until it is whole again */
    int64_t retry_after_s; /* when refused: seconds to wait */
} fg_rate_result_t;

typedef enum { FG_RL_READ = 0, FG_RL_WRITE } fg_rl_class_t;

/* A limiter over redis (borrowed, may be NULL: per-process buckets only); conf is borrowed. */
int fg_ratelimit_new(fg_ratelimit_t **out, const fg_rate_conf_t *conf, fg_redis_t *redis);
void fg_ratelimit_free(fg_ratelimit_t *rl);
/* Charges cost_milli (thousandths of a call) to the principal's bucket and, when project is not
 * NULL, the project's. Refused calls cost nothing unless force is set (then the buckets are
 * charged anyway: the remainder of a list call). Far from the limit a call may reserve a few
 * more calls ahead in Redis and later calls of the same key are admitted from that reservation
 * without a round trip (unused ones are refunded; see ratelimit.c). Always FG_OK: when Redis
 * cannot answer the per-process buckets decide (res->local). */
int fg_ratelimit_charge(fg_ratelimit_t *rl, fg_rl_class_t cls, const char *principal,
                        const char *project, int64_t cost_milli, bool force, fg_rate_result_t *res);
/* Takes one of the principal's concurrent stream slots for stream_lease_s seconds. FG_OK with
 * *out (release it with fg_ratelimit_stream_release when the stream ends; renew it while the
 * stream lives longer than the lease), or FG_ETOOBIG when every slot is held (res says when to
 * retry). */
int fg_ratelimit_stream_acquire(fg_ratelimit_t *rl, const char *principal, fg_stream_lease_t **out,
                                fg_rate_result_t *res);
int fg_ratelimit_stream_renew(fg_ratelimit_t *rl, fg_stream_lease_t *lease);
void fg_ratelimit_stream_release(fg_ratelimit_t *rl, fg_stream_lease_t *lease);
/* Refusals per client address (per process, never Redis): FG_OK when addr may still be refused
 * normally, FG_ETOOBIG (res says when to retry) when it caused too many refusals lately and its
 * calls are to be refused before their token is looked at. */
int fg_ratelimit_refusal_check(fg_ratelimit_t *rl, const char *addr, fg_rate_result_t *res);
/* Counts one refusal (401, 403) caused by addr. */
void fg_ratelimit_refusal_charge(fg_ratelimit_t *rl, const char *addr);
/* Decisions taken by the per-process fallback since start. */
uint64_t fg_ratelimit_fallbacks(const fg_ratelimit_t *rl);
/* Script calls made by fg_ratelimit_charge since start: inline (the calling request waits for
 * it) and by the refill thread (off the request path). */
typedef struct {
    uint64_t inline_calls, refill_calls;
} fg_ratelimit_stats_t;
void fg_ratelimit_stats(const fg_ratelimit_t *rl, fg_ratelimit_stats_t *out);
/* Returns once no refill is queued or in flight (for tests and benches). */
void fg_ratelimit_refills_wait(fg_ratelimit_t *rl);

/* ---- the gate ---------------------------------------------------------- */

/* Builds the auth state: keys (FG_EINVAL with errs on a bad key), the audit sink (FG_EIO), and
 * a limiter over redis (borrowed, may be NULL). conf is borrowed and must outlive the result. */
int fg_auth_new(fg_auth_t **out, const fg_config_t *conf, fg_redis_t *redis, fg_buf_t *errs);
void fg_auth_free(fg_auth_t *a);
/* Re-reads the keys and reopens the audit file. On failure the old keys stay (errs says why).
 * Requests in flight finish with the key set they started with. */
int fg_auth_reload(fg_auth_t *a, fg_buf_t *errs);

/* The hooks for fg_http_options_t (gate_ctx is the fg_auth_t). */
int fg_auth_gate(fg_req_t *req);
int fg_auth_seal(fg_req_t *req, unsigned status);

/* The caller of a request that passed the gate (borrowed; NULL for public routes). */
const fg_principal_t *fg_auth_principal(const fg_req_t *req);
/* May the caller of req do perm in project? This is the test every handler that shows things of
 * several projects applies to each one (lists, cursors, events, history, change streams), so that
 * nothing of a project the caller holds no role in leaks: pass FG_PERM_READ to ask "may this
 * caller read project P". An admin may everything; false when the request has no principal
 * (a public route) unless perm is FG_PERM_PUBLIC. */
bool fg_auth_req_can(const fg_req_t *req, const char *project, fg_perm_t perm);
/* For write handlers, after validation and before anything is applied: writes an audit line
 * with outcome "intent" (and what, e.g. "create 3 Deployments in east-a, east-b, west-a").
 * FG_OK, or FG_EIO when it cannot be written: the handler then refuses the change with 503
 * audit-unavailable (fail closed). The seal still writes the outcome line when the reply goes. */
int fg_auth_audit_intent(fg_req_t *req, const char *what);
/* For list handlers, before they reply: charges nitems * list_item_cost_milli beyond the one
 * read the gate charged, and updates the RateLimit-* headers. The answer is not refused (it is
 * already computed); the next calls wait instead. */
void fg_auth_charge_items(fg_req_t *req, size_t nitems);

/* Writes the audit line of a stream session (pod logs, exec) when it ends: the call's fields
 * (principal, project, route, target; status is the answer's) and the members of session
 * (borrowed: cluster, bytes, start, end...). FG_OK, or FG_EIO (counted; the session is over, so
 * nothing is refused). From the stream's end callback, while req is valid. */
int fg_auth_audit_session(const fg_req_t *req, unsigned status, const json_t *session);
/* The audit line of a session that starts (a new reference): the call's fields with verb
 * "session"; the session adds its own and writes it with fg_auth_write_audit when it ends. */
json_t *fg_auth_session_line(const fg_req_t *req);
/* Writes line to a's audit log (thread-safe; a outlives every session). FG_OK or FG_EIO. */
int fg_auth_write_audit(fg_auth_t *a, const json_t *line);
/* Renews the stream slot the gate took for req (a `stream` route), so a stream that lives
 * longer than rate_limits.stream_lease_s keeps counting. FG_OK (also when req holds none), or
 * what fg_ratelimit_stream_renew returns. Call it while req is valid, from any one thread. */
int fg_auth_renew_stream(const fg_req_t *req);
/* How often a stream should renew: a third of the lease, in seconds (at least 1). */
int fg_auth_stream_renew_s(const fg_req_t *req);

#endif
