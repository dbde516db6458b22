/* status: every error kubesim sends is a Kubernetes Status object built here, shaped like the
 * real ones in ../shared/fixtures/k8s/status/ (kind, apiVersion, metadata {}, status Failure,
 * message, reason, details{name, group, kind, causes}, code). Also the JSON reply helpers. */
#include <stdlib.h>

#include "ks.h"

void ks_resp_free(ks_resp_t *r) {
    free(r->body);
    r->body = NULL;
    if (r->watch != NULL)
        ks_watch_free(r->watch);
    r->watch = NULL;
    if (r->stream.next != NULL && r->stream.free != NULL)
        r->stream.free(r->stream.st);
    r->stream.next = NULL;
    if (r->upgrade.run != NULL && r->upgrade.free != NULL)
        r->upgrade.free(r->upgrade.st);
    r->upgrade.run = NULL;
}

void ks_json_reply(ks_resp_t *out, int code, json_t *j) {
    out->code = code;
    out->content_type = "application/json";
    out->body = fg_json_dumps(j, &out->len);
    json_decref(j);
}

json_t *ks_status_new(int code, const char *reason, const char *message) {
    return json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                     "metadata", "status", "Failure", "message", message, "reason", reason, "code",
                     code);
}

void ks_status_reply(ks_resp_t *out, int code, const char *reason, const char *message,
                     const char *name, const char *group, const char *kind, json_t *causes) {
    json_t *st = ks_status_new(code, reason, message);
    if (name != NULL || kind != NULL || causes != NULL) {
        json_t *details = json_object();
        if (name != NULL)
            json_object_set_new(details, "name", json_string(name));
        if (group != NULL && group[0] != '\0')
            json_object_set_new(details, "group", json_string(group));
        if (kind != NULL)
            json_object_set_new(details, "kind", json_string(kind));
        if (causes != NULL)
            json_object_set_new(details, "causes", causes);
        /* details goes before code, as a real server orders it */
        json_object_del(st, "code");
        json_object_set_new(st, "details", details);
        json_object_set_new(st, "code", json_integer(code));
    }
    ks_json_reply(out, code, st);
}
