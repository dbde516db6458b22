/* resources: the table of kinds kubesim serves, one row per resource. Discovery, routing, name
 * validation and field selectors all read this table; adding a kind is adding a row. */
#include <stdio.h>
#include <string.h>

#include "ks.h"

const ks_resource_t ks_resources[] = {
    {"", "v1", "Namespace", "namespaces", "namespace", false, "ns", "label", true, false, ""},
    {"", "v1", "Node", "nodes", "node", false, "no", "subdomain", true, false, ""},
    {"", "v1", "Pod", "pods", "pod", true, "po", "subdomain", true, false,
     "status.phase,spec.nodeName"},
    {"", "v1", "Event", "events", "event", true, "ev", "subdomain", false, false,
     /* what kubectl describe and kubectl events --for send */
     "involvedObject.kind,involvedObject.namespace,involvedObject.name,involvedObject.uid,"
     "involvedObject.apiVersion,involvedObject.resourceVersion,involvedObject.fieldPath,reason,"
     "type,reportingComponent"},
    {"apps", "v1", "Deployment", "deployments", "deployment", true, "deploy", "subdomain", true,
     true, ""},
    {"apps", "v1", "ReplicaSet", "replicasets", "replicaset", true, "rs", "subdomain", true, false,
     ""},
    {"batch", "v1", "Job", "jobs", "job", true, "", "subdomain", true, false, ""},
    {"batch", "v1", "CronJob", "cronjobs", "cronjob", true, "cj", "subdomain", true, false, ""},
    {"autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
     "horizontalpodautoscaler", true, "hpa", "subdomain", true, false, ""},
};
const size_t ks_nresources = sizeof(ks_resources) / sizeof(ks_resources[0]);

void ks_resource_api_version(const ks_resource_t *r, char *buf, size_t len) {
    if (r->group[0] == '\0')
        snprintf(buf, len, "%s", r->version);
    else
        snprintf(buf, len, "%s/%s", r->group, r->version);
}

int ks_resource_find(const char *group, const char *version, const char *plural) {
    for (size_t i = 0; i < ks_nresources; i++) {
        const ks_resource_t *r = &ks_resources[i];
        if (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0 &&
            strcmp(r->plural, plural) == 0)
            return (int)i;
    }
    return -1;
}

int ks_resource_by_kind(const char *kind) {
    for (size_t i = 0; i < ks_nresources; i++) {
        if (strcmp(ks_resources[i].kind, kind) == 0)
            return (int)i;
    }
    return -1;
}

json_t *ks_path_get(const json_t *obj, const char *path) {
    json_t *cur = (json_t *)obj; /* jansson's getters take const and return the member */
    while (cur != NULL && *path != '\0') {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        /* a step is looked up by length (no copy): the controllers call this for every field
         * of every object on every pass. Steps longer than 95 bytes were cut before; none is. */
        cur = json_object_getn(cur, path, n < 95 ? n : 95);
        path += n + (dot ? 1 : 0);
    }
    return cur;
}
