/* api/validate.h: validation of request bodies against the contract's schemas, collecting every
 * wrong field (a JSON Pointer into the body, RFC 6901, and what is wrong with the value shown,
 * truncated) so one 422 lists them all. Not part of any public surface.
 *
 * Each vd_* check adds an error when the value breaks its rule and returns whether it held; a
 * NULL value (the member is absent) passes unless the check says it is required. */
#ifndef FLEETGATE_API_VALIDATE_H
#define FLEETGATE_API_VALIDATE_H

#include "fleetgate/http.h"

#define VD_MAX_ERRORS 100 /* the contract's maxItems of `errors` */
#define VD_PTR_MAX    512

typedef struct {
    json_t *errors; /* [{pointer, detail}] */
    size_t n;
} vd_t;

void vd_init(vd_t *v);
void vd_free(vd_t *v);
/* Adds one error at pointer; the detail is printf-formatted. */
void vd_add(vd_t *v, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool vd_ok(const vd_t *v);
/* Sends 422 invalid with every error (its detail: the one error, or "N fields are invalid"). */
int vd_reply(fg_req_t *req, vd_t *v);
/* base + "/" + key escaped as RFC 6901 asks (~ as ~0, / as ~1), into out (VD_PTR_MAX). */
const char *vd_ptr(char *out, const char *base, const char *key);
/* base + "/" + index. */
const char *vd_ptr_i(char *out, const char *base, size_t i);

/* An object whose members are all in allowed (NULL-terminated) and whose required ones
 * (NULL-terminated, may be NULL) are present. Returns whether o is an object at all (so the
 * caller goes on to check its members, even when some are unknown or missing). */
bool vd_object(vd_t *v, const json_t *o, const char *ptr, const char *const *allowed,
               const char *const *required);
bool vd_dns_label(vd_t *v, const json_t *s, const char *ptr, size_t max);
bool vd_string(vd_t *v, const json_t *s, const char *ptr, size_t min, size_t max);
bool vd_int(vd_t *v, const json_t *n, const char *ptr, int64_t lo, int64_t hi);
bool vd_bool(vd_t *v, const json_t *b, const char *ptr);
/* One of values (NULL-terminated). */
bool vd_enum(vd_t *v, const json_t *s, const char *ptr, const char *const *values);
/* Kubernetes labels as the contract's Labels (keys, values, at most 64, no fleetgate.io/). */
bool vd_labels(vd_t *v, const json_t *o, const char *ptr);
/* A CpuQuantity (cpu) or MemoryQuantity string; *out (may be NULL) gets its value in
 * millicores or bytes. */
bool vd_quantity(vd_t *v, const json_t *s, const char *ptr, bool cpu, int64_t *out);

#endif
