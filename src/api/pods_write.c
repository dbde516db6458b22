/* api/pods_write.c: deleting a pod and restarting one of its containers, in the one cluster
 * the pod runs in, through the write path every write takes (writes.h: If-Match, audit before
 * anything is applied, the write's outcome, read your writes).
 *
 * Kubernetes has no API that restarts one container in place. What does it on a real cluster:
 * an update of a pod may change its containers' `image` (the one container field it may), and
 * the kubelet kills and starts again a running container whose spec changed, whatever the
 * pod's restart policy (kuberuntime's computePodActions: "Container definition changed"); the
 * new container counts one restart more, the pod keeps its name, uid, IPs and its other
 * containers. So a restart writes the same image under another spelling: the image as written
 * pinned to the digest the kubelet reports it runs (status imageID), "nginx:1.25" becomes
 * "nginx:1.25@sha256:<running digest>" (the very bytes already on the node), and the next restart
 * writes the original spelling back (remembered in the annotation fleetgate.io/restart-images).
 * Its limits are in README.md "Pods: delete and restart-container".
 */
#include "writes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESTART_IMAGES "fleetgate.io/restart-images" /* {container: image as first written} */

/* The pod the request names, in its one cluster; 404, 409 (several clusters) or 412 replied. */
typedef struct {
    rd_ctx_t c;
    json_t *objs[RD_MAX_CLUSTERS];
    const json_t *cached; /* borrowed from objs */
    const char *project, *name, *cluster;
    char path[512];
} pod_t;

static void pod_free(pod_t *p) {
    rd_objs_free(p->objs, p->c.nparts);
}

static bool pod_or_reply(fg_req_t *req, pod_t *p) {
    const char *only;
    size_t found;
    p->project = fg_req_param(req, "project");
    p->name = fg_req_param(req, "pod");
    if (!rd_cluster_param_or_reply(req, &only) ||
        !rd_get_or_reply(&p->c, req, "pod", "pods", p->project, p->name, only, p->objs, &found))
        return false;
    char what[RD_NAME_MAX + 8];
    snprintf(what, sizeof what, "pod %s", p->name);
    bool ok = false;
    if (found == 0 && rd_absence_known_or_reply(&p->c, "pods", what))
        fg_reply_problem(req, FG_PROBLEM_NOT_FOUND, "no pod %s in project %s%s%s", p->name,
                         p->project, only ? " in cluster " : "", only ? only : "");
    else if (found > 1)
        fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                         "pod %s exists in several clusters: name one with ?cluster=", p->name);
    else if (found == 1) {
        for (size_t i = 0; i < p->c.nparts; i++)
            if (p->objs[i]) {
                p->cached = p->objs[i];
                p->cluster = p->c.parts[i].conf->name;
            }
        snprintf(p->path, sizeof p->path, "/api/v1/namespaces/%s/pods/%s", p->project, p->name);
        ok = wr_if_match_or_reply(req, rd_str(p->cached, "version"));
    }
    if (!ok)
        pod_free(p);
    return ok;
}

/* ---- delete ---------------------------------------------------------------------------- */

/* Who starts a new pod in its place, as a sentence, and the owner as an ObjectRef (or null). */
static json_t *replacement(const pod_t *p, json_t **owner, char *msg, size_t len) {
    const char *jobset = rd_str(p->cached, "jobset"), *app = rd_str(p->cached, "app");
    if (jobset) {
        *owner = json_pack("{s:s,s:s}", "kind", "JobSet", "name", jobset);
        snprintf(msg, len,
                 "pod %s is being deleted in cluster %s; job set %s's Job there starts a new pod "
                 "while its completions are not reached",
                 p->name, p->cluster, jobset);
        return json_true();
    }
    if (app) {
        *owner = json_pack("{s:s,s:s}", "kind", "App", "name", app);
        snprintf(msg, len,
                 "pod %s is being deleted in cluster %s; app %s's Deployment there starts a "
                 "replacement pod",
                 p->name, p->cluster, app);
        return json_true();
    }
    *owner = json_null();
    snprintf(msg, len,
             "pod %s is being deleted in cluster %s; no app or job set owns it, so nothing "
             "replaces it",
             p->name, p->cluster);
    return json_false();
}

int fg_api_delete_pod(fg_req_t *req) {
    const char *g = fg_req_query(req, "gracePeriodSeconds");
    int64_t grace = -1;
    if (g && fg_parse_int64(g, strlen(g), 0, 3600, &grace) != FG_OK)
        return rd_reply_invalid_param(req, "gracePeriodSeconds",
                                      "must be an integer from 0 to 3600 (got %.40s)", g);
    pod_t p;
    if (!pod_or_reply(req, &p))
        return FG_OK;
    char path[600], what[128];
    if (grace >= 0)
        snprintf(path, sizeof path, "%s?gracePeriodSeconds=%lld", p.path, (long long)grace);
    else
        snprintf(path, sizeof path, "%s", p.path);
    fg_fed_write_t w = {
        .cluster = p.cluster, .method = FG_KUBE_DELETE, .path = path, .absent_ok = true};
    fg_fed_outcome_t o;
    memset(&o, 0, sizeof o);
    int rc = FG_OK;
    snprintf(what, sizeof what, "delete Pod %s/%s in %s", p.project, p.name, p.cluster);
    if (wr_audit_or_reply(req, what) && wr_fanout_or_reply(req, &w, 1, &o)) {
        /* A graceful delete leaves the pod terminating (deletionTimestamp): wait for that
         * version; an immediate one for its absence. */
        const json_t *meta = json_object_get(o.object, "metadata");
        bool terminating = json_object_get(meta, "deletionTimestamp") != NULL && o.status != 404 &&
                           json_object_get(o.object, "kind") &&
                           strcmp(json_string_value(json_object_get(o.object, "kind")), "Pod") == 0;
        wr_wait_applied(req, &w, &o, 1, "pod", "pods", p.project, p.name, !terminating);
        json_t *owner;
        char msg[512];
        json_t *replaced = replacement(&p, &owner, msg, sizeof msg);
        json_t *body = json_pack(
            "{s:s,s:s,s:o,s:o,s:o,s:s,s:o}", "pod", p.name, "cluster", p.cluster,
            "gracePeriodSeconds", grace >= 0 ? json_integer(grace) : json_null(), "owner", owner,
            "replaced", replaced, "message", msg, "outcomes", fg_fed_outcomes_json(&w, &o, 1));
        rc = wr_reply(req, 202, body, NULL, NULL);
    }
    fg_fed_outcomes_clear(&o, 1);
    pod_free(&p);
    return rc;
}

/* ---- restart one container ------------------------------------------------------------- */

static const char *const restart_members[] = {"container", NULL};

/* The cached container called name in list, or NULL. */
static const json_t *container_named(const json_t *list, const char *name) {
    size_t i;
    const json_t *c;
    json_array_foreach(list, i, c) {
        const char *n = rd_str(c, "name");
        if (n && strcmp(n, name) == 0)
            return c;
    }
    return NULL;
}

/* "docker.io/library/" or "docker.io/" before an image whose first part names no registry, so
 * the same image has a second spelling; false when it names one already. */
static bool qualified(const char *image, char *out, size_t len) {
    const char *slash = strchr(image, '/');
    size_t first = slash ? (size_t)(slash - image) : strlen(image);
    bool registry = slash && (memchr(image, '.', first) || memchr(image, ':', first) ||
                              (first == 9 && strncmp(image, "localhost", 9) == 0));
    if (registry)
        return false;
    return (size_t)snprintf(out, len, "docker.io/%s%s", slash ? "" : "library/", image) < len;
}

/* The image to write so the kubelet restarts the container: the spelling as first written when
 * an earlier restart changed it (*restored), else the image pinned to the running digest. 409
 * replied (false) when there is no second spelling. */
static bool next_image_or_reply(fg_req_t *req, const char *container, const char *image,
                                const char *image_id, const char *remembered, char *out, size_t len,
                                bool *restored) {
    *restored = false;
    if (remembered && strcmp(remembered, image) != 0) {
        *restored = true;
        snprintf(out, len, "%s", remembered);
        return true;
    }
    const char *digest = image_id ? strstr(image_id, "@sha256:") : NULL;
    if (strchr(image, '@') == NULL && digest &&
        (size_t)snprintf(out, len, "%s%s", image, digest) < len)
        return true;
    if (strchr(image, '@') && qualified(image, out, len))
        return true;
    fg_reply_problem(req, FG_PROBLEM_CONFLICT, "container %s cannot be restarted in place: %s",
                     container,
                     digest || strchr(image, '@')
                         ? "its image is pinned by digest under a registry's full name, so it "
                           "has no second spelling to write"
                         : "its cluster reports no image digest for it yet (not started)");
    return false;
}

/* The live pod with container's image changed to image (and the original remembered, or
 * forgotten when restored): the body of the PUT (a new reference). */
static json_t *restarted_pod(const json_t *live, const char *container, const char *image,
                             const char *original, bool restored) {
    json_t *pod = json_deep_copy(live);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, container) == 0)
            json_object_set_new(c, "image", json_string(image));
    }
    json_t *meta = json_object_get(pod, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    if (!json_is_object(ann)) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    json_t *map = NULL;
    const char *text = json_string_value(json_object_get(ann, RESTART_IMAGES));
    if (text == NULL || fg_json_load(text, strlen(text), &map, NULL, 0) != FG_OK ||
        !json_is_object(map)) {
        json_decref(map);
        map = json_object();
    }
    if (restored)
        json_object_del(map, container);
    else if (json_object_get(map, container) == NULL)
        json_object_set_new(map, container, json_string(original));
    if (json_object_size(map)) {
        char *s = fg_json_dumps(map, NULL);
        json_object_set_new(ann, RESTART_IMAGES, json_string(s));
        free(s);
    } else {
        json_object_del(ann, RESTART_IMAGES);
    }
    json_decref(map);
    json_object_del(pod, "status"); /* an update of the pod itself; the kubelet owns status */
    return pod;
}

/* What the annotation remembers of container in the live pod ("" when nothing). */
static void remembered_image(const json_t *live, const char *container, char *out, size_t len) {
    const char *text = json_string_value(json_object_get(
        json_object_get(json_object_get(live, "metadata"), "annotations"), RESTART_IMAGES));
    json_t *map = NULL;
    out[0] = '\0';
    if (text && fg_json_load(text, strlen(text), &map, NULL, 0) == FG_OK) {
        const char *s = json_string_value(json_object_get(map, container));
        snprintf(out, len, "%s", s ? s : "");
    }
    json_decref(map);
}

/* The spec's image of container in the live pod, or NULL. */
static const char *live_image(const json_t *live, const char *container) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(live, "spec"), "containers"), i, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, container) == 0)
            return json_string_value(json_object_get(c, "image"));
    }
    return NULL;
}

static bool restart_body_or_reply(fg_req_t *req, const char **container) {
    const json_t *body = fg_req_json(req);
    vd_t v;
    vd_init(&v);
    if (vd_object(&v, body, "", restart_members, restart_members))
        vd_dns_label(&v, json_object_get(body, "container"), "/container", 63);
    bool ok = vd_ok(&v);
    if (!ok)
        vd_reply(req, &v);
    vd_free(&v);
    *container = ok ? json_string_value(json_object_get(body, "container")) : NULL;
    return ok;
}

/* The pod's container must exist and the pod run (a pod that is not running has no container
 * to restart): 422 naming the containers there, or 409. */
static bool restartable_or_reply(fg_req_t *req, const pod_t *p, const char *container) {
    const json_t *list = json_object_get(p->cached, "containers");
    if (container_named(list, container) == NULL) {
        char names[512] = "";
        size_t used = 0, i;
        const json_t *c;
        json_array_foreach(list, i, c) {
            if (used < sizeof names)
                used +=
                    (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                     rd_str(c, "name") ? rd_str(c, "name") : "");
        }
        vd_t v;
        vd_init(&v);
        vd_add(&v, "/container", "pod %s has no container %s (it has: %s)", p->name, container,
               names);
        vd_reply(req, &v);
        vd_free(&v);
        return false;
    }
    const char *phase = rd_str(p->cached, "phase");
    if (phase == NULL || strcmp(phase, "Running") != 0 || rd_str(p->cached, "deletionTime")) {
        fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                         "pod %s is %s: only a running pod's container can be restarted", p->name,
                         rd_str(p->cached, "deletionTime") ? "being deleted"
                                                           : (phase ? phase : "Pending"));
        return false;
    }
    return true;
}

/* Answers the pod as the cache shows it in cluster (200, with its ETag). */
static int reply_pod(fg_req_t *req, const char *project, const char *name, const char *cluster) {
    json_t *objs[RD_MAX_CLUSTERS];
    size_t found;
    rd_ctx_t c;
    if (!rd_get_or_reply(&c, req, "pod", "pods", project, name, cluster, objs, &found))
        return FG_OK;
    json_t *pod = NULL;
    for (size_t i = 0; i < c.nparts && pod == NULL; i++)
        if (objs[i])
            pod = rd_present_pod(objs[i]);
    rd_objs_free(objs, c.nparts);
    if (pod == NULL)
        return fg_reply_problem(req, FG_PROBLEM_CONFLICT,
                                "pod %s was written but is not in the cache any more", name);
    char version[80];
    snprintf(version, sizeof version, "%s", rd_str(pod, "version") ? rd_str(pod, "version") : "0");
    return wr_reply(req, 200, pod, version, NULL);
}

int fg_api_restart_pod_container(fg_req_t *req) {
    const char *container;
    if (!restart_body_or_reply(req, &container))
        return FG_OK;
    pod_t p;
    if (!pod_or_reply(req, &p))
        return FG_OK;
    fg_fed_write_t w = {.cluster = p.cluster, .method = FG_KUBE_GET, .path = p.path};
    fg_fed_outcome_t live, o;
    json_t *put = NULL;
    memset(&live, 0, sizeof live);
    memset(&o, 0, sizeof o);
    int rc = FG_OK;
    if (!restartable_or_reply(req, &p, container) || !wr_fanout_or_reply(req, &w, 1, &live))
        goto out;
    const char *image = live_image(live.object, container);
    const json_t *cached = container_named(json_object_get(p.cached, "containers"), container);
    char remembered[512], next[1024], what[256];
    remembered_image(live.object, container, remembered, sizeof remembered);
    bool restored;
    if (image == NULL) {
        rc = fg_reply_problem(req, FG_PROBLEM_CONFLICT, "pod %s has no container %s any more",
                              p.name, container);
        goto out;
    }
    if (!next_image_or_reply(req, container, image, rd_str(cached, "imageID"),
                             remembered[0] ? remembered : NULL, next, sizeof next, &restored))
        goto out;
    snprintf(what, sizeof what, "restart container %s of Pod %s/%s in %s (image %s)", container,
             p.project, p.name, p.cluster, next);
    if (!wr_audit_or_reply(req, what))
        goto out;
    put = restarted_pod(live.object, container, next, image, restored);
    w = (fg_fed_write_t){.cluster = p.cluster, .method = FG_KUBE_PUT, .path = p.path, .body = put};
    if (!wr_fanout_or_reply(req, &w, 1, &o))
        goto out;
    wr_wait_applied(req, &w, &o, 1, "pod", "pods", p.project, p.name, false);
    rc = reply_pod(req, p.project, p.name, p.cluster);
out:
    fg_fed_outcomes_clear(&live, 1);
    fg_fed_outcomes_clear(&o, 1);
    json_decref(put);
    pod_free(&p);
    return rc;
}
