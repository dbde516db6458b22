/* kube/status.c: Kubernetes Status bodies (and what stands in for them) as fg_kube_error_t.
 * A cluster's answer is untrusted like any input: a Status of the wrong shape, or an error
 * page that is not a Status at all, still becomes a well-formed error, never a crash. */
#include "fleetgate/kube.h"

#include <stdio.h>
#include <string.h>

void fg_kube_error_clear(fg_kube_error_t *err) {
    err->http_code = 0;
    err->reason[0] = '\0';
    err->message[0] = '\0';
    err->retry_after_s = -1;
}

/* Copies at most dstlen-1 bytes of s, replacing control characters so the text is safe in a
 * log line or a problem detail. */
static void copy_clean(char *dst, size_t dstlen, const char *s, size_t len) {
    size_t n = len < dstlen - 1 ? len : dstlen - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    dst[n] = '\0';
}

static void set_text(char *dst, size_t dstlen, const json_t *v) {
    if (json_is_string(v))
        copy_clean(dst, dstlen, json_string_value(v), json_string_length(v));
}

int fg_kube_error_from_status(const json_t *status, long http_code, fg_kube_error_t *err) {
    fg_kube_error_clear(err);
    err->http_code = http_code;
    const json_t *kind = json_is_object(status) ? json_object_get(status, "kind") : NULL;
    /* Some proxies and old servers trim kind/apiVersion: a body with a code and a status
     * string is still read as a Status. */
    bool shaped = json_is_object(status) && kind == NULL &&
                  json_is_integer(json_object_get(status, "code")) &&
                  json_is_string(json_object_get(status, "status"));
    if (!shaped && (!json_is_string(kind) || strcmp(json_string_value(kind), "Status") != 0)) {
        snprintf(err->reason, sizeof err->reason, "%s", FG_KUBE_REASON_BAD_RESPONSE);
        snprintf(err->message, sizeof err->message, "%s",
                 json_is_object(status) ? "answer is not a Status (kind is not \"Status\")"
                                        : "answer is not a JSON object");
        return FG_EINVAL;
    }
    const json_t *code = json_object_get(status, "code");
    if (json_is_integer(code) && json_integer_value(code) >= 100 && json_integer_value(code) <= 599)
        err->http_code = (long)json_integer_value(code);
    set_text(err->reason, sizeof err->reason, json_object_get(status, "reason"));
    set_text(err->message, sizeof err->message, json_object_get(status, "message"));
    const json_t *details = json_object_get(status, "details");
    const json_t *retry =
        json_is_object(details) ? json_object_get(details, "retryAfterSeconds") : NULL;
    if (json_is_integer(retry) && json_integer_value(retry) >= 0 &&
        json_integer_value(retry) <= 86400)
        err->retry_after_s = json_integer_value(retry);
    if (err->reason[0] == '\0') {
        /* "Failure" with no reason: name the status so the caller still has a word to log. */
        const json_t *st = json_object_get(status, "status");
        snprintf(err->reason, sizeof err->reason, "%s",
                 json_is_string(st) ? json_string_value(st) : "Unknown");
    }
    return FG_OK;
}

void fg_kube_error_from_body(long http_code, const char *body, size_t len, fg_kube_error_t *err) {
    json_t *j = NULL;
    char jerr[160];
    if (body != NULL && len > 0 && fg_json_load(body, len, &j, jerr, sizeof jerr) == FG_OK &&
        fg_kube_error_from_status(j, http_code, err) == FG_OK) {
        json_decref(j);
        return;
    }
    json_decref(j);
    fg_kube_error_clear(err);
    err->http_code = http_code;
    snprintf(err->reason, sizeof err->reason, "%s", FG_KUBE_REASON_BAD_RESPONSE);
    /* Quote the start of the body: an HTML error page from a proxy is the usual culprit. */
    char head[120] = "";
    if (body != NULL)
        copy_clean(head, sizeof head, body, len);
    snprintf(err->message, sizeof err->message, "HTTP %ld with a body that is not a Status: \"%s\"",
             http_code, head);
}

bool fg_kube_error_is_gone(const fg_kube_error_t *err) {
    return err != NULL && err->http_code == 410;
}
