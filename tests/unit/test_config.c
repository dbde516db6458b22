/* Unit tests of the configuration table: defaults, every rule, and the exact message each bad
 * configuration gives (operators read these; they are part of the interface). */
#include "fleetgate/core.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char token_path[] = "/tmp/fg-test-token-XXXXXX";

static void setup(void) {
    int fd = mkstemp(token_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "secret-token", 12), 12);
    close(fd);
}

static void teardown(void) {
    unlink(token_path);
}

/* Loads text as "t.json"; returns the rc and leaves errors in errs. */
static int load(const char *text, fg_config_t **cfg, fg_buf_t *errs) {
    fg_buf_init(errs, 1 << 16);
    *cfg = NULL;
    return fg_config_load_text("t.json", text, strlen(text), cfg, errs);
}

START_TEST(empty_object_gives_defaults) {
    fg_config_t *cfg;
    fg_buf_t errs;
    ck_assert_int_eq(load("{}", &cfg, &errs), FG_OK);
    ck_assert_str_eq(cfg->listen_host, "127.0.0.1");
    ck_assert_uint_eq(cfg->listen_port, 8080);
    ck_assert_int_eq(cfg->workers, 4);
    ck_assert_int_eq(cfg->max_body_bytes, 1 << 20);
    ck_assert_int_eq(cfg->drain_timeout_s, 10);
    ck_assert_str_eq(cfg->redis_url, "redis://127.0.0.1:6379/0");
    ck_assert_str_eq(cfg->log_level, "info");
    ck_assert(cfg->access_log);
    ck_assert_uint_eq(cfg->nclusters, 0);
    fg_config_free(cfg);
    fg_buf_free(&errs);
}
END_TEST

START_TEST(full_config_is_read) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"listen\": \"[::1]:9000\", \"workers\": 2, \"limits\": {\"max_body_bytes\": 10},"
             " \"redis\": {\"url\": \"redis://:pw@10.0.0.1:6380/3\"}, \"log\": {\"level\": "
             "\"debug\", \"access_log\": false}, \"clusters\": [{\"name\": \"east-1\", "
             "\"region\": \"us-east\", \"zone\": \"us-east-1a\", \"url\": "
             "\"https://10.1.1.1:6443\", \"token_file\": \"%s\", \"ca_file\": \"%s\"}]}",
             token_path, token_path);
    fg_config_t *cfg;
    fg_buf_t errs;
    ck_assert_msg(load(text, &cfg, &errs) == FG_OK, "%s", errs.data);
    ck_assert_str_eq(cfg->listen_host, "::1");
    ck_assert_uint_eq(cfg->listen_port, 9000);
    ck_assert_int_eq(cfg->max_body_bytes, 10);
    ck_assert(!cfg->access_log);
    ck_assert_uint_eq(cfg->nclusters, 1);
    ck_assert_str_eq(cfg->clusters[0].name, "east-1");
    ck_assert_str_eq(cfg->clusters[0].zone, "us-east-1a");
    ck_assert_str_eq(cfg->clusters[0].token_file, token_path);
    fg_config_free(cfg);
    fg_buf_free(&errs);
}
END_TEST

/* Each bad configuration and the exact lines it must produce. */
static const struct {
    const char *text;
    const char *want;
} bad_cases[] = {
    {"[]", "t.json: the configuration must be a JSON object\n"},
    {"{\"listen\": \"x\",}", "t.json: line 1, column 16: string or '}' expected near '}'\n"},
    {"{\"workers\": 1, \"workers\": 2}",
     "t.json: line 1, column 24: duplicate object key near '\"workers\"'\n"},
    {"{\"listn\": \"1.2.3.4:5\"}", "t.json: listn: unknown key\n"},
    {"{\"listen\": \"127.0.0.1\"}",
     "t.json: listen: not HOST:PORT with a port from 1 to 65535 (got \"127.0.0.1\")\n"},
    {"{\"workers\": 0}", "t.json: workers: must be from 1 to 256 (got 0)\n"},
    {"{\"workers\": \"4\"}", "t.json: workers: must be an integer (got \"4\")\n"},
    {"{\"limits\": {\"max_body_bytes\": -1}}",
     "t.json: limits.max_body_bytes: must be from 1 to 67108864 (got -1)\n"},
    {"{\"limits\": 5}", "t.json: limits: must be an object (got 5)\n"},
    {"{\"limits\": {\"drain\": 5}}", "t.json: limits.drain: unknown key\n"},
    {"{\"redis\": {\"url\": \"http://x:1\"}}",
     "t.json: redis.url: not a redis:// or unix:// URL (got \"http://x:1\")\n"},
    {"{\"redis\": {\"url\": \"redis://x:1/99\"}}",
     "t.json: redis.url: the database after '/' must be a number from 0 to 15 (got "
     "\"redis://x:1/99\")\n"},
    {"{\"log\": {\"level\": \"loud\"}}",
     "t.json: log.level: must be one of debug, info, warn, error (got \"loud\")\n"},
    {"{\"log\": {\"access_log\": 1}}", "t.json: log.access_log: must be true or false (got 1)\n"},
    {"{\"clusters\": {}}", "t.json: clusters: must be an array (got {})\n"},
    {"{\"clusters\": [5]}", "t.json: clusters[0]: must be an object (got 5)\n"},
    {"{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"http://h:1\"}, "
     "{\"name\": \"b\", \"zone\": \"z\", \"url\": \"ftp://h\"}]}",
     "t.json: clusters[1].url: not an http(s) URL (got \"ftp://h\")\n"},
    {"{\"clusters\": [{\"zone\": \"z\", \"url\": \"http://h:1\"}]}",
     "t.json: clusters[0].name: is required\n"},
    {"{\"clusters\": [{\"name\": \"Bad_Name\", \"zone\": \"z\", \"url\": \"http://h:1\"}]}",
     "t.json: clusters[0].name: not a DNS-1123 label (lowercase letters, digits and '-', 1 to 63 "
     "characters, starting and ending with a letter or digit) (got \"Bad_Name\")\n"},
    {"{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"http://h:1\"}, "
     "{\"name\": \"a\", \"zone\": \"z\", \"url\": \"http://h:2\"}]}",
     "t.json: clusters[1].name: duplicate cluster name (got \"a\")\n"},
    {"{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"https://h:1\"}]}",
     "t.json: clusters[0]: needs credentials: token_file or client_cert_file and "
     "client_key_file\n"},
    {"{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"https://h:1\", "
     "\"token_file\": \"/nonexistent/token\"}]}",
     "t.json: clusters[0].token_file: cannot read this file (got \"/nonexistent/token\")\n"
     "t.json: clusters[0]: needs credentials: token_file or client_cert_file and "
     "client_key_file\n"},
    {"{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"http://h:1\", "
     "\"labels\": [\"env=prod\", \"gpu\", \"a b=c\"]}]}",
     "t.json: clusters[0].labels[1]: must be key=value (got \"gpu\")\n"
     "t.json: clusters[0].labels[2]: key and value may hold letters, digits, '.', '_' and '-' "
     "(got \"a b=c\")\n"},
    /* The sidecar catalogue: every field checked, names unique. */
    {"{\"sidecars\": [{\"name\": \"Envoy\", \"image\": \"\", \"cpu\": \"lots\", "
     "\"memory\": \"64Mi\", \"ports\": [\"admin:9901\", \"99999\", \"_x:80\"], "
     "\"env\": [\"LEVEL=info\", \"=x\"]}, {\"name\": \"log\", \"image\": \"l:1\"}, "
     "{\"name\": \"log\", \"image\": \"l:2\", \"shell\": true}]}",
     "t.json: sidecars[0].name: not a DNS-1123 label (lowercase letters, digits and '-', 1 to 63 "
     "characters, starting and ending with a letter or digit) (got \"Envoy\")\n"
     "t.json: sidecars[0].image: must not be empty (got \"\")\n"
     "t.json: sidecars[0].cpu: not a quantity such as 100m, 0.5, 64Mi or 1Gi (got \"lots\")\n"
     "t.json: sidecars[0].ports[1]: must be PORT or NAME:PORT with a port from 1 to 65535 (got "
     "\"99999\")\n"
     "t.json: sidecars[0].ports[2]: the port's name must be at most 15 of a-z, 0-9 and '-' (got "
     "\"_x:80\")\n"
     "t.json: sidecars[0].env[1]: must be NAME=value with NAME starting with a letter or '_' (got "
     "\"=x\")\n"
     "t.json: sidecars[2].shell: unknown key\n"
     "t.json: sidecars[2].name: is the name of another sidecar\n"},
    /* The TLS listener (tls.*): certificate and key together, another address, https URLs. */
    {"{\"tls\": {\"cert_file\": \"Makefile\"}}",
     "t.json: tls.key_file: tls.cert_file and tls.key_file go together\n"},
    {"{\"listen\": \"127.0.0.1:9\", \"tls\": {\"listen\": \"127.0.0.1:9\", \"cert_file\": "
     "\"Makefile\", \"key_file\": \"Makefile\"}}",
     "t.json: tls.listen: must differ from listen\n"},
    {"{\"tls\": {\"advertise_url\": \"http://h:1\", \"cert_file\": \"/nonexistent\"}}",
     "t.json: tls.advertise_url: not an https:// URL (got \"http://h:1\")\n"
     "t.json: tls.cert_file: cannot read this file (got \"/nonexistent\")\n"},
    {"{\"cors\": {\"allowed_origins\": [\"http://localhost:5173\", \"http://a/b\", \"*\"]}}",
     "t.json: cors.allowed_origins[1]: must be an origin: http(s)://HOST[:PORT], the host in lower "
     "case, no path (got \"http://a/b\")\n"
     "t.json: cors.allowed_origins[2]: must be an origin: http(s)://HOST[:PORT], no path (got "
     "\"*\")\n"},
    {"{\"insights\": {\"events_max_per_project\": 5, \"changes_keepalive_s\": 0}}",
     "t.json: insights.events_max_per_project: must be from 10 to 1000000 (got 5)\n"
     "t.json: insights.changes_keepalive_s: must be from 1 to 300 (got 0)\n"},
    {"{\"insights\": {\"history_max_age_s\": 59, \"history_max_per_project\": 2000000}}",
     "t.json: insights.history_max_age_s: must be from 60 to 31536000 (got 59)\n"
     "t.json: insights.history_max_per_project: must be from 10 to 1000000 (got 2000000)\n"},
    /* Several problems are all reported, in file order. */
    {"{\"workers\": 0, \"listen\": \"h\", \"bogus\": true}",
     "t.json: workers: must be from 1 to 256 (got 0)\n"
     "t.json: listen: not HOST:PORT with a port from 1 to 65535 (got \"h\")\n"
     "t.json: bogus: unknown key\n"},
};

START_TEST(bad_config_table) {
    fg_config_t *cfg;
    fg_buf_t errs;
    int rc = load(bad_cases[_i].text, &cfg, &errs);
    ck_assert_int_eq(rc, FG_EINVAL);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(errs.data && strcmp(errs.data, bad_cases[_i].want) == 0,
                  "config %s\n got: %s\nwant: %s", bad_cases[_i].text,
                  errs.data ? errs.data : "(nothing)", bad_cases[_i].want);
    fg_buf_free(&errs);
}
END_TEST

START_TEST(sidecar_catalogue_is_read) {
    const char *text = "{\"sidecars\": [{\"name\": \"envoy\", \"image\": \"envoy:1\", "
                       "\"cpu\": \"50m\", \"memory_limit\": \"1.5Gi\", \"ports\": "
                       "[\"admin:9901\", \"15000\"], \"env\": [\"LEVEL=info=x\"]}]}";
    fg_config_t *cfg;
    fg_buf_t errs;
    ck_assert_msg(load(text, &cfg, &errs) == FG_OK, "%s", errs.data);
    const fg_sidecar_conf_t *sc = fg_config_sidecar(cfg, "envoy");
    ck_assert_ptr_nonnull(sc);
    ck_assert_str_eq(sc->image, "envoy:1");
    ck_assert_str_eq(sc->cpu, "50m");
    ck_assert_ptr_null(sc->memory);
    ck_assert_str_eq(sc->memory_limit, "1.5Gi");
    ck_assert_uint_eq(sc->nports, 2);
    ck_assert_str_eq(sc->env[0], "LEVEL=info=x");
    ck_assert_ptr_null(fg_config_sidecar(cfg, "istio"));
    fg_config_free(cfg);
}
END_TEST

START_TEST(token_over_plain_http_refused) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"http://h:1\", "
             "\"token_file\": \"%s\"}]}",
             token_path);
    fg_config_t *cfg;
    fg_buf_t errs;
    ck_assert_int_eq(load(text, &cfg, &errs), FG_EINVAL);
    ck_assert_str_eq(errs.data, "t.json: clusters[0].token_file: a bearer token is never sent over "
                                "plain http; use an https url\n");
    ck_assert_ptr_null(strstr(errs.data, "secret-token"));
    fg_buf_free(&errs);
}
END_TEST

START_TEST(cert_without_key_refused) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"clusters\": [{\"name\": \"a\", \"zone\": \"z\", \"url\": \"https://h:1\", "
             "\"client_cert_file\": \"%s\"}]}",
             token_path);
    fg_config_t *cfg;
    fg_buf_t errs;
    ck_assert_int_eq(load(text, &cfg, &errs), FG_EINVAL);
    ck_assert_str_eq(errs.data, "t.json: clusters[0].client_key_file: client_cert_file and "
                                "client_key_file go together\n");
    fg_buf_free(&errs);
}
END_TEST

START_TEST(missing_file_is_named) {
    fg_config_t *cfg = NULL;
    fg_buf_t errs;
    fg_buf_init(&errs, 1024);
    ck_assert_int_eq(fg_config_load("/nonexistent/fleetgate.json", &cfg, &errs), FG_EINVAL);
    ck_assert_str_eq(errs.data, "/nonexistent/fleetgate.json: cannot open the file\n");
    fg_buf_free(&errs);
}
END_TEST

static Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, empty_object_gives_defaults);
    tcase_add_test(tc, full_config_is_read);
    tcase_add_loop_test(tc, bad_config_table, 0, sizeof bad_cases / sizeof bad_cases[0]);
    tcase_add_test(tc, sidecar_catalogue_is_read);
    tcase_add_test(tc, token_over_plain_http_refused);
    tcase_add_test(tc, cert_without_key_refused);
    tcase_add_test(tc, missing_file_is_named);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(config_suite());
}
