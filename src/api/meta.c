/* api/meta.c: the platform's own endpoints: liveness, readiness, metrics, the contract and its
 * rendered reference. None of them needs a caller's identity. */
#include "api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_MAX_BYTES (8u << 20)

static bool server_accepting(const fg_api_t *api, const fg_req_t *req, char *why, size_t whylen) {
    (void)api;
    if (!fg_req_draining(req))
        return true;
    snprintf(why, whylen, "shutting down");
    return false;
}

const ready_check_t fg_api_ready_checks[] = {
    {"server", server_accepting},
};
const size_t fg_api_nready_checks = sizeof fg_api_ready_checks / sizeof fg_api_ready_checks[0];

int fg_api_healthz(fg_req_t *req) {
    return fg_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

int fg_api_readyz(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    json_t *checks = json_object();
    char failed[512] = "";
    for (size_t i = 0; i < fg_api_nready_checks; i++) {
        char why[256] = "";
        const ready_check_t *c = &fg_api_ready_checks[i];
        if (c->check(api, req, why, sizeof why)) {
            json_object_set_new(checks, c->name, json_string("ok"));
            continue;
        }
        json_object_set_new(checks, c->name, json_string(why));
        size_t used = strlen(failed);
        snprintf(failed + used, sizeof failed - used, "%s%s: %s", used ? "; " : "", c->name, why);
    }
    if (failed[0] == '\0')
        return fg_reply_json(req, 200, json_pack("{s:s,s:o}", "status", "ready", "checks", checks));
    char detail[600];
    snprintf(detail, sizeof detail, "not ready: %s", failed);
    json_t *p = fg_problem_new(FG_PROBLEM_NOT_READY, detail, fg_req_id(req), fg_req_path(req));
    json_object_set_new(p, "checks", checks);
    size_t len;
    char *text = fg_json_dumps(p, &len);
    json_decref(p);
    return fg_reply_take(req, 503, "application/problem+json", text, len);
}

int fg_api_metrics(fg_req_t *req) {
    fg_buf_t b;
    fg_buf_init(&b, METRICS_MAX_BYTES);
    if (fg_metrics_render(&b) != FG_OK) {
        fg_buf_free(&b);
        return fg_reply_problem(req, FG_PROBLEM_INTERNAL, "the metrics exposition is too large");
    }
    size_t len;
    char *text = fg_buf_steal(&b, &len);
    return fg_reply_take(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

int fg_api_openapi(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    return fg_reply_static(req, 200, "application/yaml", api->openapi, api->openapi_len);
}

int fg_api_docs(fg_req_t *req) {
    const fg_api_t *api = fg_req_app(req);
    if (api->docs == NULL)
        return fg_reply_problem(req, FG_PROBLEM_NOT_FOUND,
                                "the API reference was not built (run `make docs`)");
    return fg_reply_static(req, 200, "text/html; charset=utf-8", api->docs, api->docs_len);
}
