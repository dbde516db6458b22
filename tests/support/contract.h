/* tests/support/contract.h: checks an HTTP answer against the API contract (api/openapi.yaml), so
 * that a test of an implemented route fails when the code and the contract disagree. It runs
 * tests/contract/validate.mjs under node (fork/exec, no shell; the body goes on stdin). The repo
 * root is $FG_ROOT, or the current directory. */
#ifndef FG_CONTRACT_H
#define FG_CONTRACT_H

#include <stddef.h>

/* The checker's outcomes: the answer is as the contract says; it is not (err says why); unknown
 * route or method, or a bad argument (err says which); the checker could not run (node missing,
 * timeout; err says why). */
#define CONTRACT_VALID   0
#define CONTRACT_INVALID 1
#define CONTRACT_USAGE   2
#define CONTRACT_NOT_RUN (-1)

/* Checks one answer: the operation is found by matching path (query string ignored) against the
 * contract's path templates, the response by status. content_type may be NULL when the response
 * has one media type. Returns one of the outcomes above; err (always NUL-terminated when errlen >
 * 0) receives the checker's explanation, truncated to errlen. */
int contract_check(const char *method, const char *path, long status, const char *content_type,
                   const char *body, size_t len, char *err, size_t errlen);

/* The same, with the answer's raw header block ("Name: value" lines, a status line is skipped):
 * the headers the contract requires must be there and every declared one must match its schema;
 * Content-Type is taken from the block. */
int contract_check_headers(const char *method, const char *path, long status,
                           const char *raw_headers, const char *body, size_t len, char *err,
                           size_t errlen);

#endif
