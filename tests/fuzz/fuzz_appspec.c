/* Fuzz target: an app body (the contract's App) as POST/PUT .../apps receive it: loaded as the
 * dispatcher loads bodies, validated whole (api/appspec.c, api/validate.c), and when valid
 * turned into a placement request and a Deployment, and merge-patched onto itself.
 * Properties: never crashes; validation is deterministic; a valid app's Deployment carries its
 * name and the replicas asked for, and the validator accepts the app merged with itself. */
#include "../../src/api/appspec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A catalogue of one sidecar, so injection runs too. */
static char *ports[] = {"admin:9901"}, *env[] = {"LEVEL=info"};
static fg_sidecar_conf_t sidecar = {.name = "envoy",
                                    .image = "envoy:1",
                                    .cpu = "50m",
                                    .memory = "64Mi",
                                    .ports = ports,
                                    .nports = 1,
                                    .env = env,
                                    .nenv = 1};
static const fg_config_t cfg = {.sidecars = &sidecar, .nsidecars = 1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *app = NULL;
    if (fg_json_load((const char *)data, size, &app, NULL, 0) != FG_OK)
        return 0;
    vd_t v, again;
    vd_init(&v);
    vd_init(&again);
    as_validate(&v, app);
    as_validate_sidecars(&v, json_object_get(app, "spec"), &cfg);
    as_validate(&again, app);
    as_validate_sidecars(&again, json_object_get(app, "spec"), &cfg);
    if (v.n != again.n || !json_equal(v.errors, again.errors))
        abort(); /* the same body, the same verdict */
    if (vd_ok(&v)) {
        const json_t *spec = json_object_get(app, "spec");
        int64_t replicas = json_integer_value(json_object_get(spec, "replicas"));
        as_request_t r;
        as_request(spec, replicas, &cfg, &r);
        json_t *ann = json_object();
        json_t *d = as_deployment(app, "p", replicas, ann, &cfg);
        const json_t *meta = json_object_get(d, "metadata");
        if (!json_equal(json_object_get(meta, "name"), json_object_get(app, "name")) ||
            json_integer_value(json_object_get(json_object_get(d, "spec"), "replicas")) != replicas)
            abort();
        json_t *merged = fg_json_merge_patch(app, app);
        vd_t m;
        vd_init(&m);
        as_validate(&m, merged);
        if (!vd_ok(&m))
            abort(); /* a valid app patched with itself is still valid */
        vd_free(&m);
        json_decref(merged);
        json_decref(d);
        json_decref(ann);
    }
    vd_free(&v);
    vd_free(&again);
    json_decref(app);
    return 0;
}
