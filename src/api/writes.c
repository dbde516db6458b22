/* api/writes.c: the steps every write handler takes, each sending its own problem. */
#include "writes.h"

#include "fleetgate/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDEM_PENDING_MS 60000            /* a first request's time to answer */
#define IDEM_KEEP_MS    (24 * 3600000LL) /* how long its answer is kept for retries */

/* The Idempotency-Key record of the request this thread runs (one request at a time a thread:
 * a handler runs start to end on it), so that wr_reply stores the answer it sends. */
static _Thread_local struct {
    bool active, stored;
    char id[40];
} idem;

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
    wr_wait_applied_keep(req, w, out, n, kind, resource, scope, name, gone, NULL);
}

bool wr_wait_applied_keep(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out,
                          size_t n, const char *kind, const char *resource, const char *scope,
                          const char *name, bool gone, json_t **objs) {
    fg_api_t *api = fg_req_app(req);
    bool shown[FG_FED_MAX_CLUSTERS];
    n = n < FG_FED_MAX_CLUSTERS ? n : FG_FED_MAX_CLUSTERS;
    fg_fed_write_through_keep(api->fed, w, out, n, shown, objs);
    return wr_wait_shown(req, w, out, n, kind, resource, scope, name, gone, shown);
}

void wr_release_later(fg_req_t *req, fg_fed_outcome_t *out, json_t **kept, size_t n) {
    for (size_t i = 0; i < n; i++) {
        fg_req_release_later(req, out[i].object);
        out[i].object = NULL;
        if (kept)
            fg_req_release_later(req, kept[i]);
    }
    fg_fed_outcomes_clear(out, n); /* what else they hold */
}

bool wr_wait_shown(fg_req_t *req, const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                   const char *kind, const char *resource, const char *scope, const char *name,
                   bool gone, const bool *shown) {
    fg_api_t *api = fg_req_app(req);
    fg_cache_wait_t waits[FG_FED_MAX_CLUSTERS];
    size_t nw = 0;
    n = n < FG_FED_MAX_CLUSTERS ? n : FG_FED_MAX_CLUSTERS;
    for (size_t i = 0; i < n; i++) {
        if (shown[i])
            continue; /* written through: the cache shows it already */
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
    bool all = true;
    for (size_t i = 0; i < n; i++)
        all = all && shown[i];
    if (nw == 0)
        return all;
    int rc = fg_cache_wait_applied(api->redis, waits, nw, WR_APPLIED_WAIT_MS);
    if (rc != FG_OK)
        FG_LOG(FG_LOG_WARN, fg_req_id(req),
               "write: the cache did not show the change within %d ms (%s); answering anyway",
               WR_APPLIED_WAIT_MS, rc == FG_ETIMEOUT ? "timeout" : "redis unavailable");
    return false;
}

int wr_reply_text(fg_req_t *req, unsigned status, char *text, size_t len, const char *version,
                  const char *location) {
    char etag[300] = "";
    if (version) {
        snprintf(etag, sizeof etag, "\"%s\"", version);
        fg_req_add_header(req, "ETag", etag);
    }
    if (idem.active && status >= 200 && status < 300) {
        fg_api_t *api = fg_req_app(req);
        idem.stored = fg_cache_idem_finish(api->redis, idem.id, status, text, etag, location,
                                           IDEM_KEEP_MS) == FG_OK;
    }
    if (location)
        fg_req_add_header(req, "Location", location);
    return fg_reply_take(req, status, "application/json", text, len);
}

int wr_reply(fg_req_t *req, unsigned status, json_t *body, const char *version,
             const char *location) {
    size_t len;
    char *text = fg_json_dumps(body, &len);
    fg_req_release_later(req, body);
    return wr_reply_text(req, status, text, len, version, location);
}

void wr_stamp(fg_req_t *req, json_t *annotations) {
    const char *who = fg_req_principal_name(req);
    json_object_set_new(annotations, "fleetgate.io/requested-by", json_string(who ? who : ""));
    json_object_set_new(annotations, "fleetgate.io/request-id", json_string(fg_req_id(req)));
}

/* ---- Idempotency-Key ------------------------------------------------------------------- */

static void hex128(const void *data, size_t n, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)fg_hash64(data, n, 1),
             (unsigned long long)fg_hash64(data, n, 2));
}

static bool key_ok(const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x21 || (unsigned char)k[i] > 0x7e)
            return false;
    return n >= 1 && n <= 255;
}

static int replay(fg_req_t *req, const fg_cache_idem_t *st) {
    if (st->etag && st->etag[0])
        fg_req_add_header(req, "ETag", st->etag);
    if (st->location && st->location[0])
        fg_req_add_header(req, "Location", st->location);
    char *body = fg_xstrdup(st->body ? st->body : "");
    return fg_reply_take(req, st->status, "application/json", body, strlen(body));
}

int wr_idempotent(fg_req_t *req, fg_handler_fn handler) {
    const char *key = fg_req_header(req, "Idempotency-Key");
    if (key == NULL)
        return handler(req);
    if (!key_ok(key)) {
        json_t *ext = json_pack("{s:[{s:s,s:s}]}", "errors", "header", "Idempotency-Key", "detail",
                                "must be 1 to 255 printable ASCII characters");
        return fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext,
                                    "Idempotency-Key must be 1 to 255 printable ASCII characters");
    }
    /* The record is the caller's: the same key from another caller is another record. */
    const char *who = fg_req_principal_name(req);
    char *scope = fg_xasprintf("%s\n%s", who ? who : "", key);
    char *body = fg_req_json(req) ? fg_json_dumps(fg_req_json(req), NULL) : fg_xstrdup("");
    char *what = fg_xasprintf("%s %s\n%s", fg_req_method(req), fg_req_path(req), body);
    char id[33], fp[33];
    hex128(scope, strlen(scope), id);
    hex128(what, strlen(what), fp);
    free(scope);
    free(body);
    free(what);
    fg_api_t *api = fg_req_app(req);
    fg_cache_idem_t st;
    int rc = fg_cache_idem_begin(api->redis, id, fp, IDEM_PENDING_MS, &st);
    if (rc != FG_OK) {
        fg_cache_idem_clear(&st);
        return fg_reply_problem(req, FG_PROBLEM_REDIS_UNAVAILABLE,
                                "the Idempotency-Key cannot be checked: redis is unavailable");
    }
    if (st.state == FG_IDEM_DONE) {
        rc = replay(req, &st);
    } else if (st.state == FG_IDEM_PENDING) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                              "a request with this Idempotency-Key is still in progress");
    } else if (st.state == FG_IDEM_MISMATCH) {
        json_t *ext = json_pack("{s:[{s:s,s:s}]}", "errors", "header", "Idempotency-Key", "detail",
                                "was used with another request (method, path or body)");
        rc = fg_reply_problem_ext(req, FG_PROBLEM_INVALID, ext,
                                  "Idempotency-Key was used with another request");
    } else {
        idem.active = true;
        idem.stored = false;
        snprintf(idem.id, sizeof idem.id, "%s", id);
        rc = handler(req);
        if (!idem.stored) /* it changed nothing, or failed: a retry runs again */
            fg_cache_idem_abandon(api->redis, id);
        idem.active = false;
    }
    fg_cache_idem_clear(&st);
    return rc;
}
