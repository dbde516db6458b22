/* api/exec.c: GET /v1/projects/{project}/pods/{pod}/exec, a WebSocket (RFC 6455) to a process
 * in the pod's container. The handshake is checked strictly here (Upgrade, Connection,
 * Sec-WebSocket-Version 13, a well-formed Sec-WebSocket-Key, a Kubernetes channel subprotocol
 * offered); the pod's cluster comes from the cache; the cluster's side is opened first, so its
 * refusal (no such container...) is an ordinary problem; then the 101 goes out with the
 * subprotocol the cluster chose and the stream loop relays the frames (stream.h). */
#include "fleetgate/auth.h"
#include "fleetgate/stream.h"
#include "reads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_COMMAND_ARGS 64
#define EXEC_PATH_MAX    8192

static const char *const channel_protocols[] = {"v5.channel.k8s.io", "v4.channel.k8s.io", NULL};

/* Does the comma-separated header value hold token (case-insensitive)? */
static bool has_token(const char *value, const char *token) {
    size_t tl = strlen(token);
    for (const char *s = value; s && *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        size_t n = strcspn(s, ",");
        size_t m = n;
        while (m > 0 && (s[m - 1] == ' ' || s[m - 1] == '\t'))
            m--;
        if (m == tl && strncasecmp(s, token, tl) == 0)
            return true;
        s += n;
    }
    return false;
}

/* The handshake of RFC 6455 section 4.2.1, and the subprotocols fleetgate relays (in the
 * client's order, comma-separated, into protocols). 400 naming what is wrong otherwise. */
static bool handshake_or_reply(fg_req_t *req, char *protocols, size_t len) {
    const char *upgrade = fg_req_header(req, "Upgrade");
    const char *connection = fg_req_header(req, "Connection");
    const char *version = fg_req_header(req, "Sec-WebSocket-Version");
    const char *key = fg_req_header(req, "Sec-WebSocket-Key");
    const char *offered = fg_req_header(req, "Sec-WebSocket-Protocol");
    const char *why = NULL;
    if (upgrade == NULL || !has_token(upgrade, "websocket"))
        why = "exec is a WebSocket: send Upgrade: websocket";
    else if (connection == NULL || !has_token(connection, "upgrade"))
        why = "exec is a WebSocket: send Connection: Upgrade";
    else if (version == NULL || strcmp(version, "13") != 0)
        why = "Sec-WebSocket-Version must be 13";
    else if (!fg_ws_key_valid(key))
        why = "Sec-WebSocket-Key must be the base64 of 16 bytes";
    if (why != NULL) {
        fg_req_add_header(req, "Sec-WebSocket-Version", "13");
        fg_reply_problem(req, FG_PROBLEM_BAD_REQUEST, "%s", why);
        return false;
    }
    size_t n = 0;
    protocols[0] = '\0';
    for (const char *s = offered; s && *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        size_t tl = strcspn(s, ", \t");
        for (int i = 0; channel_protocols[i]; i++)
            if (tl == strlen(channel_protocols[i]) && strncmp(s, channel_protocols[i], tl) == 0 &&
                n + tl + 3 < len)
                n += (size_t)snprintf(protocols + n, len - n, "%s%.*s", n ? ", " : "", (int)tl, s);
        s += tl;
    }
    if (n == 0) {
        fg_reply_problem(req, FG_PROBLEM_BAD_REQUEST,
                         "offer v5.channel.k8s.io or v4.channel.k8s.io in Sec-WebSocket-Protocol");
        return false;
    }
    return true;
}

/* Appends s percent-encoded (RFC 3986 unreserved characters stay). */
static void append_escaped(fg_buf_t *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            fg_buf_append(b, s, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            fg_buf_append(b, e, 3);
        }
    }
}

/* The cluster's exec path from the request's parameters (422 naming the bad one). */
static bool exec_path_or_reply(fg_req_t *req, const char *project, const char *pod, fg_buf_t *path,
                               json_t *audit) {
    const char *argv[MAX_COMMAND_ARGS], *container;
    size_t argc = fg_req_query_all(req, "command", argv, MAX_COMMAND_ARGS);
    if (argc == 0 || argc > MAX_COMMAND_ARGS) {
        rd_reply_invalid_param(req, "command", "give 1 to %d command= arguments (got %zu)",
                               MAX_COMMAND_ARGS, argc);
        return false;
    }
    bool in, out, err, tty;
    if (!rd_label_param_or_reply(req, "container", &container) ||
        !fg_api_flag_or_reply(req, "stdin", &in) || !fg_api_flag_or_reply(req, "stdout", &out) ||
        !fg_api_flag_or_reply(req, "stderr", &err) || !fg_api_flag_or_reply(req, "tty", &tty))
        return false;
    fg_buf_appendf(path, "/api/v1/namespaces/%s/pods/%s/exec?stdin=%s&stdout=%s&stderr=%s&tty=%s",
                   project, pod, in ? "true" : "false", out ? "true" : "false",
                   err ? "true" : "false", tty ? "true" : "false");
    if (container) {
        fg_buf_appendf(path, "&container=%s", container);
        json_object_set_new(audit, "container", json_string(container));
    }
    json_t *cmd = json_array();
    for (size_t i = 0; i < argc; i++) {
        fg_buf_append(path, "&command=", 9);
        append_escaped(path, argv[i]);
        json_array_append_new(cmd, json_string(argv[i]));
    }
    json_object_set_new(audit, "command", cmd);
    return true;
}

static void write_audit(void *ud, const json_t *line) {
    fg_auth_write_audit(ud, line);
}

int fg_api_exec_pod(fg_req_t *req) {
    fg_api_t *api = fg_req_app(req);
    const char *project = fg_req_param(req, "project"), *pod = fg_req_param(req, "pod");
    char protocols[128], cluster[64], chosen[64], accept[32];
    fg_buf_t path;
    fg_buf_init(&path, EXEC_PATH_MAX);
    json_t *session = json_pack("{s:s,s:s}", "kind", "exec", "pod", pod);
    fg_exec_t *x = NULL;
    if (!handshake_or_reply(req, protocols, sizeof protocols) ||
        !exec_path_or_reply(req, project, pod, &path, session) ||
        !fg_api_pod_cluster_or_reply(req, project, pod, cluster, sizeof cluster))
        goto out;
    if (api->streams == NULL) {
        fg_reply_problem(req, FG_PROBLEM_NOT_READY, "streams are not running here");
        goto out;
    }
    if (fg_exec_connect_or_reply(api->streams, req, cluster, path.data, protocols, chosen, &x) !=
        FG_OK)
        goto out;
    json_object_set_new(session, "cluster", json_string(cluster));
    json_t *line = fg_auth_session_line(req);
    json_object_set_new(line, "session", session);
    session = NULL;
    fg_ws_accept(fg_req_header(req, "Sec-WebSocket-Key"), accept);
    fg_exec_opts_t opts = {.idle_timeout_s = (int)api->cfg->streams.exec_idle_timeout_s,
                           .max_session_s = (int)api->cfg->streams.exec_max_session_s,
                           .write_audit = write_audit,
                           .ud = fg_req_gate_ctx(req)};
    fg_exec_start(api->streams, req, x, accept, chosen, line, &opts);
out:
    json_decref(session);
    fg_buf_free(&path);
    return FG_OK;
}
