/* http/problem.c: the one table of problem kinds (RFC 9457 problem details), the document
 * builder and the one path that sends a problem (fg_reply_problem, and fg_reply_problem_ext with
 * extension members). Rows are append-only: a kind keeps its number, status and type URI
 * forever, because clients and tests match on them. */
#include "fleetgate/http.h"

#include <string.h>

/* A problem member built from a client's input is cut here (the path can be 32 KiB). */
#define FG_PROBLEM_FIELD_MAX 2048
#include <stdarg.h>
#include <stdio.h>

typedef struct {
    unsigned status;
    const char *type;
    const char *title;
} problem_row_t;

static const problem_row_t problems[FG_PROBLEM__COUNT] = {
    [FG_PROBLEM_BAD_REQUEST] = {400, "urn:fleetgate:problem:bad-request", "Bad request"},
    [FG_PROBLEM_MALFORMED_JSON] = {400, "urn:fleetgate:problem:malformed-json",
                                   "The body is not well-formed JSON"},
    [FG_PROBLEM_NOT_FOUND] = {404, "urn:fleetgate:problem:not-found", "Not found"},
    [FG_PROBLEM_METHOD_NOT_ALLOWED] = {405, "urn:fleetgate:problem:method-not-allowed",
                                       "Method not allowed"},
    [FG_PROBLEM_PAYLOAD_TOO_LARGE] = {413, "urn:fleetgate:problem:payload-too-large",
                                      "Request body too large"},
    [FG_PROBLEM_UNSUPPORTED_MEDIA_TYPE] = {415, "urn:fleetgate:problem:unsupported-media-type",
                                           "Unsupported media type"},
    [FG_PROBLEM_INVALID] = {422, "urn:fleetgate:problem:invalid", "Invalid request"},
    [FG_PROBLEM_SHUTTING_DOWN] = {503, "urn:fleetgate:problem:shutting-down",
                                  "The server is shutting down"},
    [FG_PROBLEM_NOT_READY] = {503, "urn:fleetgate:problem:not-ready", "Not ready"},
    [FG_PROBLEM_INTERNAL] = {500, "urn:fleetgate:problem:internal", "Internal error"},
    [FG_PROBLEM_ROUTE_NOT_FOUND] = {404, "urn:fleetgate:problem:route-not-found", "No such route"},
    [FG_PROBLEM_UNAUTHORIZED] = {401, "urn:fleetgate:problem:unauthorized", "Unauthorized"},
    [FG_PROBLEM_FORBIDDEN] = {403, "urn:fleetgate:problem:forbidden", "Forbidden"},
    [FG_PROBLEM_RATE_LIMITED] = {429, "urn:fleetgate:problem:rate-limited", "Too many requests"},
    [FG_PROBLEM_AUDIT_UNAVAILABLE] = {503, "urn:fleetgate:problem:audit-unavailable",
                                      "The audit log is unavailable"},
    [FG_PROBLEM_REDIS_UNAVAILABLE] = {503, "urn:fleetgate:problem:redis-unavailable",
                                      "The cache is unavailable"},
    [FG_PROBLEM_CONFLICT] = {409, "urn:fleetgate:problem:conflict", "Conflict"},
    [FG_PROBLEM_URI_TOO_LONG] = {414, "urn:fleetgate:problem:uri-too-long",
                                 "Request target too long"},
    [FG_PROBLEM_HEADERS_TOO_LARGE] = {431, "urn:fleetgate:problem:headers-too-large",
                                      "Request header fields too large"},
    [FG_PROBLEM_PRECONDITION_FAILED] = {412, "urn:fleetgate:problem:precondition-failed",
                                        "Precondition failed"},
    [FG_PROBLEM_UPSTREAM_ERROR] = {502, "urn:fleetgate:problem:upstream-error",
                                   "A member cluster failed"},
    [FG_PROBLEM_UPSTREAM_TIMEOUT] = {504, "urn:fleetgate:problem:upstream-timeout",
                                     "A member cluster timed out"},
    [FG_PROBLEM_QUOTA_EXCEEDED] = {409, "urn:fleetgate:problem:quota-exceeded", "Quota exceeded"},
    [FG_PROBLEM_PLACEMENT_FAILED] = {409, "urn:fleetgate:problem:placement-failed",
                                     "No cluster fits the placement"},
    [FG_PROBLEM_HTTP_VERSION_NOT_SUPPORTED] = {505,
                                               "urn:fleetgate:problem:http-version-not-supported",
                                               "HTTP version not supported"},
};

unsigned fg_problem_status(fg_problem_t kind) {
    return problems[kind].status;
}

const char *fg_problem_type(fg_problem_t kind) {
    return problems[kind].type;
}

const char *fg_problem_title(fg_problem_t kind) {
    return problems[kind].title;
}

json_t *fg_problem_new(fg_problem_t kind, const char *detail, const char *request_id,
                       const char *instance) {
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string(problems[kind].type));
    json_object_set_new(p, "title", json_string(problems[kind].title));
    json_object_set_new(p, "status", json_integer(problems[kind].status));
    if (detail)
        json_object_set_new(
            p, "detail", fg_json_string_clean(detail, strlen(detail), FG_PROBLEM_FIELD_MAX, NULL));
    /* Both may carry a client's bytes (a path with %ff, a name in the detail): cleaned, so the
     * member is never lost to invalid UTF-8. */
    if (instance)
        json_object_set_new(
            p, "instance",
            fg_json_string_clean(instance, strlen(instance), FG_PROBLEM_FIELD_MAX, NULL));
    if (request_id)
        json_object_set_new(p, "requestId", json_string(request_id));
    return p;
}

/* The Kubernetes-compatible surface (/k8s/..., api/kubeapi.c) answers errors as a Kubernetes
 * Status, the only error body kubectl reads ("Error from server (Forbidden): <message>"). */
#define KUBE_PREFIX "/k8s/"

static const struct {
    unsigned status;
    const char *reason; /* metav1.StatusReason */
} kube_reasons[] = {
    {400, "BadRequest"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "NotFound"},
    {405, "MethodNotAllowed"},
    {409, "Conflict"},
    {413, "RequestEntityTooLarge"},
    {415, "UnsupportedMediaType"},
    {422, "Invalid"},
    {429, "TooManyRequests"},
    {500, "InternalError"},
    {503, "ServiceUnavailable"},
    {504, "Timeout"},
};

static int reply_kube_status(fg_req_t *req, fg_problem_t kind, const char *detail) {
    unsigned status = fg_problem_status(kind);
    const char *reason = "Unknown";
    for (size_t i = 0; i < sizeof kube_reasons / sizeof kube_reasons[0]; i++)
        if (kube_reasons[i].status == status)
            reason = kube_reasons[i].reason;
    const char *msg = detail ? detail : problems[kind].title;
    json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:o,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", "Failure", "message",
                           fg_json_string_clean(msg, strlen(msg), FG_PROBLEM_FIELD_MAX, NULL),
                           "reason", reason, "code", (int)status);
    size_t len;
    char *text = fg_json_dumps(st, &len);
    json_decref(st);
    return fg_reply_take(req, status, "application/json", text, len);
}

static int reply_problem(fg_req_t *req, fg_problem_t kind, json_t *ext, const char *detail_fmt,
                         va_list ap) {
    char detail[1024];
    if (detail_fmt)
        vsnprintf(detail, sizeof detail, detail_fmt, ap);
    const char *path = fg_req_path(req);
    if (path && strncmp(path, KUBE_PREFIX, strlen(KUBE_PREFIX)) == 0) {
        json_decref(ext);
        return reply_kube_status(req, kind, detail_fmt ? detail : NULL);
    }
    json_t *p = fg_problem_new(kind, detail_fmt ? detail : NULL, fg_req_id(req), fg_req_path(req));
    if (ext) {
        json_object_update_missing(p, ext);
        json_decref(ext);
    }
    size_t len;
    char *text = fg_json_dumps(p, &len);
    json_decref(p);
    return fg_reply_take(req, fg_problem_status(kind), "application/problem+json", text, len);
}

int fg_reply_problem(fg_req_t *req, fg_problem_t kind, const char *detail_fmt, ...) {
    va_list ap;
    va_start(ap, detail_fmt);
    int rc = reply_problem(req, kind, NULL, detail_fmt, ap);
    va_end(ap);
    return rc;
}

int fg_reply_problem_ext(fg_req_t *req, fg_problem_t kind, json_t *ext, const char *detail_fmt,
                         ...) {
    va_list ap;
    va_start(ap, detail_fmt);
    int rc = reply_problem(req, kind, ext, detail_fmt, ap);
    va_end(ap);
    return rc;
}
