/* api/writes.c: the steps every write handler takes, each sending its own problem. */
#include "writes.h"

#include "fleetgate/auth.h"

#include <stdio.h>
#include <string.h>

bool wr_if_match_or_reply(fg_req_t *req, const char *version) {
    const char *h = fg_req_header(req, "If-Match");
    if (h == NULL || strcmp(h, "*") == 0)
        return true;
    char want[300];
    snprintf(want, sizeof want, "\"%s\"", version);
    if (strcmp(h, want) == 0)
        return true;
    fg_reply_problem(req, FG_PROBLEM_PRECONDITION_FAILED,
                     "If-Match %.100s does not match the current version %s", h, want);
    return false;
}

bool wr_audit_or_reply(fg_req_t *req, const char *what) {
    if (fg_auth_audit_intent(req, what) == FG_OK)
        return true;
    fg_reply_problem(req, FG_PROBLEM_AUDIT_UNAVAILABLE,
                     "the audit log cannot be written; the change was refused");
    return false;
}

int wr_reply_failure(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                     const char *suffix) {
    char detail[1024];
    bool timed_out;
    fg_fed_outcomes_summary(w, out, n, detail, sizeof detail, &timed_out);
    FG_LOG(FG_LOG_ERROR, fg_req_id(req), "write: %s%s", detail, suffix ? suffix : "");
    json_t *ext = json_pack("{s:o}", "clusters", fg_fed_outcomes_json(w, out, n));
    return fg_reply_problem_ext(req,
                                timed_out ? FG_PROBLEM_UPSTREAM_TIMEOUT : FG_PROBLEM_UPSTREAM_ERROR,
                                ext, "%s%s", detail, suffix ? suffix : "");
}

bool wr_fanout_or_reply(fg_req_t *req, const fg_fed_write_t *w, size_t n, fg_fed_outcome_t *out) {
    fg_api_t *api = fg_req_app(req);
    if (fg_fed_write_all(api->fed, w, n, WR_CLUSTER_DEADLINE_MS, out) == 0)
        return true;
    wr_reply_failure(req, w, out, n, NULL);
    return false;
}

void wr_wait_applied(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                     const char *kind, const char *resource, const char *scope, const char *name,
                     bool gone) {
    fg_api_t *api = fg_req_app(req);
    fg_cache_wait_t waits[FG_FED_MAX_CLUSTERS];
    size_t nw = 0;
    for (size_t i = 0; i < n && nw < FG_FED_MAX_CLUSTERS; i++) {
        const char *rv = json_string_value(
            json_object_get(json_object_get(out[i].object, "metadata"), "resourceVersion"));
        if (!gone && rv == NULL)
            continue; /* nothing to wait for (a create that found the object there) */
        waits[nw++] = (fg_cache_wait_t){.cluster = w[i].cluster,
                                        .resource = resource,
                                        .rv = rv,
                                        .gone = gone,
                                        .kind = kind,
                                        .scope = scope,
                                        .name = name};
    }
    int rc = fg_cache_wait_applied(api->redis, waits, nw, WR_APPLIED_WAIT_MS);
    if (rc != FG_OK)
        FG_LOG(FG_LOG_WARN, fg_req_id(req),
               "write: the cache did not show the change within %d ms (%s); answering anyway",
               WR_APPLIED_WAIT_MS, rc == FG_ETIMEOUT ? "timeout" : "redis unavailable");
}

int wr_reply(fg_req_t *req, unsigned status, json_t *body, const char *version,
             const char *location) {
    if (version) {
        char etag[300];
        snprintf(etag, sizeof etag, "\"%s\"", version);
        fg_req_add_header(req, "ETag", etag);
    }
    if (location)
        fg_req_add_header(req, "Location", location);
    return fg_reply_json(req, status, body);
}

void wr_stamp(fg_req_t *req, json_t *annotations) {
    const char *who = fg_req_principal_name(req);
    json_object_set_new(annotations, "fleetgate.io/requested-by", json_string(who ? who : ""));
    json_object_set_new(annotations, "fleetgate.io/request-id", json_string(fg_req_id(req)));
}
