/* Fuzz target: a job set body (the contract's JobSet) as POST .../jobsets receives it, and the
 * same bytes as a cron job body (CronJob, POST .../cronjobs): loaded as the dispatcher loads
 * bodies, validated whole (api/jobspec.c, api/appspec.c, api/validate.c), and when valid divided
 * over one to three clusters and turned into their Jobs (CronJobs).
 * Properties: never crashes; validation is deterministic; the shares of completions and of
 * parallelism sum to the spec's, and each Job carries the job set's name and its share; a
 * valid cron job's schedule passes cj_schedule_ok and its CronJob carries it; the same bytes as
 * a Scaler body validate the same way twice. */
#include "../../src/api/workload.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *js = NULL;
    if (fg_json_load((const char *)data, size, &js, NULL, 0) != FG_OK)
        return 0;
    vd_t v, again;
    vd_init(&v);
    vd_init(&again);
    js_validate(&v, js);
    js_validate(&again, js);
    if (v.n != again.n || !json_equal(v.errors, again.errors))
        abort(); /* the same body, the same verdict */
    if (vd_ok(&v)) {
        const json_t *spec = json_object_get(js, "spec");
        int64_t comp = js_number(spec, JS_COMPLETIONS), par = js_number(spec, JS_PARALLELISM);
        /* weights as placement gives them: pods placed per cluster */
        int64_t w[3] = {1 + (int64_t)(size % 7), 1 + (int64_t)(size % 3), 2};
        size_t n = 1 + size % 3;
        int64_t wsum = 0, c[3], p[3], csum = 0, psum = 0;
        for (size_t i = 0; i < n; i++)
            wsum += w[i];
        js_split(comp, w, n, wsum, c);
        js_split(par, w, n, wsum, p);
        json_t *ann = json_object();
        for (size_t i = 0; i < n; i++) {
            if (c[i] < 0 || p[i] < 0)
                abort();
            csum += c[i];
            psum += p[i];
            json_t *job = js_job(js, "p", c[i], p[i], csum - c[i], ann, NULL);
            const json_t *jspec = json_object_get(job, "spec");
            if (!json_equal(json_object_get(json_object_get(job, "metadata"), "name"),
                            json_object_get(js, "name")) ||
                json_integer_value(json_object_get(jspec, "completions")) != c[i] ||
                json_integer_value(json_object_get(jspec, "parallelism")) != p[i])
                abort();
            json_decref(job);
        }
        if (csum != comp || psum != par)
            abort(); /* the work is divided, none lost or added */
        json_decref(ann);
    }
    vd_t cv;
    vd_init(&cv);
    cj_validate(&cv, js);
    if (vd_ok(&cv)) {
        const json_t *sched = json_object_get(json_object_get(js, "spec"), "schedule");
        if (!cj_schedule_ok(json_string_value(sched)))
            abort();
        json_t *ann = json_object();
        json_t *cron = cj_cronjob(js, "p", 1, 1, 0, ann, NULL);
        if (!json_equal(json_object_get(json_object_get(cron, "spec"), "schedule"), sched))
            abort();
        json_decref(cron);
        json_decref(ann);
    }
    vd_free(&cv);
    vd_t s1, s2;
    vd_init(&s1);
    vd_init(&s2);
    sc_validate(&s1, js);
    sc_validate(&s2, js);
    if (s1.n != s2.n || !json_equal(s1.errors, s2.errors))
        abort();
    vd_free(&s1);
    vd_free(&s2);
    vd_free(&v);
    vd_free(&again);
    json_decref(js);
    return 0;
}
