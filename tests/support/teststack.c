/* tests/support/teststack.c: the whole-stack suites' shared starters (teststack.h). */
#include "teststack.h"

#include "contract.h"
#include "fleetgate/core.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ts_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

char *ts_token(const tj_keys_t *keys, const char *sub, const char *more) {
    char cl[512];
    snprintf(cl, sizeof cl,
             "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"%s\", "
             "\"exp\": %ld, %s}",
             sub, (long)time(NULL) + 3600, more);
    char *t = tj_sign("RS256", keys->rsa_priv, "rsa1", cl);
    ck_assert_ptr_nonnull(t);
    return t;
}

void ts_wait_ready(uint16_t port, int tries) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/readyz", (unsigned)port);
    for (int i = 0; i < tries; i++) {
        th_resp_t r;
        ck_assert_int_eq(th_request("GET", url, NULL, NULL, -1, 0, &r), 0);
        long s = r.status;
        th_resp_free(&r);
        if (s == 200)
            return;
        ts_sleep_ms(50);
    }
    ck_abort_msg("the daemon did not become ready");
}

void ts_log_if_failed(int status, const char *dir, char *text, size_t len) {
    char path[192];
    text[0] = '\0';
    if (status == 0 || len == 0)
        return;
    snprintf(path, sizeof path, "%s/daemon.log", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, len - 1, f)] = '\0';
        fclose(f);
    }
}

void ts_clusters_json(const tk_sim_t *ks, bool env_labels, char *out, size_t len) {
    static const char *const zones[] = {"zone-a", "zone-a", "zone-b"};
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < 3 && n < len; i++) {
        char labels[64] = "";
        if (env_labels)
            snprintf(labels, sizeof labels, ", \"labels\": [\"env=%s\"]", i == 1 ? "dev" : "prod");
        int w = snprintf(out + n, len - n,
                         "%s{\"name\": \"c%d\", \"zone\": \"%s\", \"region\": \"r1\", "
                         "\"url\": \"%s\", \"token_file\": \"%s\", \"ca_file\": \"%s\"%s}",
                         i ? ", " : "", i, zones[i], tk_url(ks, i), ks->token_file, ks->ca_file,
                         labels);
        ck_assert_int_lt(w, (int)(len - n));
        n += (size_t)w;
    }
}

long ts_call(uint16_t port, const char *method, const char *path, const char *tok, const char *body,
             const char *extra, bool check, th_resp_t *r) {
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)port, path);
    char *auth = tok ? fg_xasprintf("Authorization: Bearer %s", tok) : NULL;
    const char *hdrs[5] = {NULL};
    size_t n = 0;
    if (auth)
        hdrs[n++] = auth;
    if (body)
        hdrs[n++] = strcmp(method, "PATCH") == 0 ? "Content-Type: application/merge-patch+json"
                                                 : "Content-Type: application/json";
    if (extra)
        hdrs[n++] = extra;
    ck_assert_int_eq(th_request(method, url, hdrs, body, body ? (long)strlen(body) : -1, 0, r), 0);
    free(auth);
    if (check) {
        char err[4096];
        char *p = fg_xstrdup(path);
        p[strcspn(p, "?")] = '\0';
        int rc = contract_check_headers(method, p, r->status, r->headers, r->body, r->len, err,
                                        sizeof err);
        ck_assert_msg(rc == CONTRACT_VALID, "%s %s -> %ld: %s\n%s", method, path, r->status, err,
                      r->body);
        free(p);
    }
    return r->status;
}
