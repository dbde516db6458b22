/* Unit tests of auth/: the token table (each kind of bad token and the exact check it fails),
 * key loading (PEM, JWKS, key/alg mismatches), principals and roles, and the audit log. Keys
 * are made at test time; tokens are signed with libjwt. */
#include "fleetgate/auth.h"
#include "testjwt.h"
#include "testmain.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOW 2000000000LL /* 2033-05-18T03:33:20Z */

static tj_keys_t keys;
static fg_config_t *cfg;
static fg_keyset_t *ks;

static void load_config(void) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"auth\": {\"issuer\": \"https://id.test\", \"audience\": \"fleetgate\", "
             "\"leeway_s\": 30, \"keys\": ["
             "{\"kid\": \"rsa1\", \"pem_file\": \"%s\", \"algs\": [\"RS256\"]},"
             "{\"kid\": \"ec1\", \"pem_file\": \"%s\", \"algs\": [\"ES256\"]},"
             "{\"pem_file\": \"%s\", \"algs\": [\"RS256\"]}], \"jwks_file\": \"%s\"}}",
             keys.rsa_pub, keys.ec_pub, keys.rsa_pub, keys.jwks);
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    ck_assert_msg(fg_config_load_text("t.json", text, strlen(text), &cfg, &errs) == FG_OK, "%s",
                  errs.data);
    ck_assert_msg(fg_keyset_load(&ks, &cfg->auth, &errs) == FG_OK, "%s", errs.data);
    fg_buf_free(&errs);
}

static void suite_setup(void) {
    fg_log_set_level(FG_LOG_ERROR);
    ck_assert_int_eq(tj_keys_make(&keys), 0);
}

static void suite_teardown(void) {
    tj_keys_remove(&keys);
}

static void setup(void) {
    load_config();
}

static void teardown(void) {
    fg_keyset_release(ks);
    fg_config_free(cfg);
}

/* ---- the token table --------------------------------------------------- */

#define BASE_CLAIMS                                                                                \
    "\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": 2000003600"
#define GOOD_CLAIMS BASE_CLAIMS ", \"projects\": {\"shop\": \"developer\"}"

typedef enum { K_RSA, K_RSA2, K_EC, K_NONE } keyfile_t;

typedef struct {
    const char *name;
    const char *alg;
    keyfile_t key;
    const char *kid;
    const char *claims; /* JSON object */
    const char *want;   /* NULL: valid; else the exact why */
} token_case_t;

static const token_case_t token_cases[] = {
    {"valid_rs256", "RS256", K_RSA, "rsa1", "{" GOOD_CLAIMS "}", NULL},
    {"valid_es256", "ES256", K_EC, "ec1", "{" GOOD_CLAIMS "}", NULL},
    {"valid_default_key", "RS256", K_RSA, NULL, "{" GOOD_CLAIMS "}", NULL},
    {"valid_jwks_rsa", "RS256", K_RSA, "jwks-rsa", "{" GOOD_CLAIMS "}", NULL},
    {"valid_jwks_ec", "ES256", K_EC, "jwks-ec", "{" GOOD_CLAIMS "}", NULL},
    {"valid_aud_array", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": [\"other\", \"fleetgate\"], \"sub\": \"ada\", "
     "\"exp\": 2000003600}",
     NULL},
    {"expired_within_leeway_ok", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": "
     "1999999990}",
     NULL},
    {"token_expired", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": "
     "1999996400}",
     "the token expired at 2033-05-18T02:33:20Z"},
    {"token_not_yet_valid", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": "
     "2000007200, \"nbf\": 2000003600}",
     "the token is not valid before 2033-05-18T04:33:20Z"},
    {"token_wrong_iss", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://evil.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": "
     "2000003600}",
     "the token's iss is not the configured issuer"},
    {"token_wrong_aud", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"other\", \"sub\": \"ada\", \"exp\": 2000003600}",
     "the token's aud does not name this service"},
    {"token_bad_signature", "RS256", K_RSA2, "rsa1", "{" GOOD_CLAIMS "}",
     "the token's signature does not verify"},
    {"token_alg_none_refused", "none", K_NONE, "rsa1", "{" GOOD_CLAIMS "}",
     "the token's alg none is not accepted (RS256, RS384, RS512, ES256, ES384 only)"},
    {"token_hs256_with_public_key_refused", "HS256", K_RSA, "rsa1", "{" GOOD_CLAIMS "}",
     "the token's alg HS256 is not accepted (RS256, RS384, RS512, ES256, ES384 only)"},
    {"token_alg_not_the_keys", "RS256", K_RSA, "ec1", "{" GOOD_CLAIMS "}",
     "the token's alg RS256 is not one its key accepts"},
    {"token_es256_for_rsa_key", "ES256", K_EC, "rsa1", "{" GOOD_CLAIMS "}",
     "the token's alg ES256 is not one its key accepts"},
    {"token_unknown_kid", "RS256", K_RSA, "nobody", "{" GOOD_CLAIMS "}",
     "no configured key has the token's kid"},
    {"token_missing_exp", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\"}",
     "the token has no exp claim"},
    {"token_missing_sub", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"exp\": 2000003600}",
     "the token has no sub claim"},
    {"token_missing_iss", "RS256", K_RSA, "rsa1",
     "{\"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": 2000003600}",
     "the token has no iss claim"},
    {"token_missing_aud", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"sub\": \"ada\", \"exp\": 2000003600}",
     "the token has no aud claim"},
    {"token_exp_not_a_number", "RS256", K_RSA, "rsa1",
     "{\"iss\": \"https://id.test\", \"aud\": \"fleetgate\", \"sub\": \"ada\", \"exp\": \"soon\"}",
     "the token's exp claim is not a number"},
};

static const char *key_path(keyfile_t k) {
    switch (k) {
        case K_RSA:
            return keys.rsa_priv;
        case K_RSA2:
            return keys.rsa2_priv;
        case K_EC:
            return keys.ec_priv;
        default:
            return NULL;
    }
}

/* The public key's bytes are the HMAC secret of the HS256 attack. */
static const char *sign_key(const token_case_t *c) {
    return strcmp(c->alg, "HS256") == 0 ? keys.rsa_pub : key_path(c->key);
}

START_TEST(token_table) {
    const token_case_t *c = &token_cases[_i];
    char *tok = tj_sign(c->alg, sign_key(c), c->kid, c->claims);
    ck_assert_msg(tok != NULL, "%s: cannot sign", c->name);
    fg_principal_t *p = NULL;
    char why[256] = "";
    int rc = fg_token_verify(ks, &cfg->auth, tok, strlen(tok), NOW, &p, why, sizeof why);
    if (c->want == NULL) {
        ck_assert_msg(rc == FG_OK, "%s: refused: %s", c->name, why);
        ck_assert_str_eq(fg_principal_subject(p), "ada");
        fg_principal_release(p);
    } else {
        ck_assert_msg(rc == FG_EINVAL, "%s: accepted", c->name);
        ck_assert_ptr_null(p);
        ck_assert_msg(strcmp(why, c->want) == 0, "%s:\n got: %s\nwant: %s", c->name, why, c->want);
        ck_assert_msg(strstr(why, tok) == NULL, "%s: the token is echoed", c->name);
    }
    free(tok);
}
END_TEST

static void expect_refused(const char *tok, const char *want) {
    fg_principal_t *p = NULL;
    char why[256] = "";
    ck_assert_int_eq(fg_token_verify(ks, &cfg->auth, tok, strlen(tok), NOW, &p, why, sizeof why),
                     FG_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(why, want);
}

START_TEST(token_tampered_payload_refused) {
    char *good = tj_sign("RS256", keys.rsa_priv, "rsa1", "{" GOOD_CLAIMS "}");
    char *admin = tj_sign("RS256", keys.rsa2_priv, "rsa1",
                          "{" GOOD_CLAIMS ", \"groups\": [\"fleetgate-admins\"]}");
    /* Header and signature of the good token around the payload of another. */
    char *d1 = strchr(good, '.'), *d2 = strrchr(good, '.');
    char *a1 = strchr(admin, '.'), *a2 = strrchr(admin, '.');
    char forged[8192];
    snprintf(forged, sizeof forged, "%.*s%.*s%s", (int)(d1 - good), good, (int)(a2 - a1), a1, d2);
    expect_refused(forged, "the token's signature does not verify");
    free(good);
    free(admin);
}
END_TEST

START_TEST(token_malformed_refused) {
    char *good = tj_sign("RS256", keys.rsa_priv, "rsa1", "{" GOOD_CLAIMS "}");
    char two[8192];
    snprintf(two, sizeof two, "%.*s", (int)(strrchr(good, '.') - good), good);
    expect_refused(two, "the token is not a JWS: it needs 3 dot-separated parts (got 2)");
    expect_refused("a.b.c.d", "the token is not a JWS: it needs 3 dot-separated parts (got 4)");
    expect_refused("", "the token is not a JWS: it needs 3 dot-separated parts (got 1)");
    expect_refused("eyJ!!!.e30.c2ln", "the token's header is not base64url");
    expect_refused("eyJhbGciOiJSUzI1NiJ9=.e30.c2ln", "the token's header is not base64url");
    expect_refused("bm90IGpzb24.e30.c2ln", "the token's header is not a JSON object");
    expect_refused("e30.e30.c2ln", "the token's header has no alg");
    /* {"alg":"RS256","kid":"rsa1\u0000evil"}: not the key rsa1 by its prefix */
    expect_refused("eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYTFcdTAwMDBldmlsIn0.e30.c2ln",
                   "the token's header holds a NUL byte");
    /* {"alg":"RS256","typ":"at+jwt"}: libjwt 1.10.2 verifies only typ JWT, so it is named */
    expect_refused("eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9.e30.c2ln",
                   "the token's typ is not JWT");
    /* {"alg":"RS256","crit":["x"]} */
    expect_refused("eyJhbGciOiJSUzI1NiIsImNyaXQiOlsieCJdfQ.e30.c2ln",
                   "the token's header has crit extensions, which fleetgate does not understand");
    /* A header of 3000 base64url characters. */
    char huge[4096];
    memset(huge, 'A', 3000);
    snprintf(huge + 3000, sizeof huge - 3000, ".e30.c2ln");
    expect_refused(huge, "the token's header is larger than 1024 bytes");
    /* A token over the bound is refused before it is parsed. */
    char *longer = malloc(FG_TOKEN_MAX_BYTES + 2);
    memset(longer, 'A', FG_TOKEN_MAX_BYTES + 1);
    longer[FG_TOKEN_MAX_BYTES + 1] = '\0';
    expect_refused(longer, "the token is longer than 8192 bytes");
    free(longer);
    /* The right header and payload with a signature that is not base64url. */
    char badsig[8192];
    snprintf(badsig, sizeof badsig, "%.*s.!!", (int)(strrchr(good, '.') - good), good);
    expect_refused(badsig, "the token's signature is not base64url");
    free(good);
}
END_TEST

/* ---- keys -------------------------------------------------------------- */

static void keyset_errors(const char *auth_json, const char *want) {
    char text[2048];
    snprintf(text, sizeof text, "{\"auth\": %s}", auth_json);
    fg_config_t *c = NULL;
    fg_keyset_t *k = NULL;
    fg_buf_t errs;
    fg_buf_init(&errs, 1 << 16);
    ck_assert_msg(fg_config_load_text("t.json", text, strlen(text), &c, &errs) == FG_OK, "%s",
                  errs.data);
    ck_assert_int_eq(fg_keyset_load(&k, &c->auth, &errs), FG_EINVAL);
    ck_assert_ptr_null(k);
    ck_assert_msg(errs.data && strcmp(errs.data, want) == 0, "\n got: %s\nwant: %s", errs.data,
                  want);
    fg_buf_free(&errs);
    fg_config_free(c);
}

START_TEST(key_alg_mismatch_refused_at_load) {
    char a[1024], want[1024];
    snprintf(a, sizeof a,
             "{\"issuer\": \"i\", \"audience\": \"a\", \"keys\": [{\"kid\": \"k\", \"pem_file\": "
             "\"%s\", \"algs\": [\"ES256\"]}]}",
             keys.rsa_pub);
    snprintf(want, sizeof want, "auth.keys[0].algs[0]: ES256 needs an EC key (%s)\n", keys.rsa_pub);
    keyset_errors(a, want);
    snprintf(a, sizeof a,
             "{\"issuer\": \"i\", \"audience\": \"a\", \"keys\": [{\"kid\": \"k\", \"pem_file\": "
             "\"%s\", \"algs\": [\"RS256\"]}]}",
             keys.ec_pub);
    snprintf(want, sizeof want, "auth.keys[0].algs[0]: RS256 needs an RSA key (%s)\n", keys.ec_pub);
    keyset_errors(a, want);
}
END_TEST

START_TEST(key_not_pem_refused) {
    char a[1024], want[1024];
    const char *bad = tj_write(keys.dir, "bad.pem", "not a key\n");
    char path[256];
    snprintf(path, sizeof path, "%s", bad);
    snprintf(a, sizeof a,
             "{\"issuer\": \"i\", \"audience\": \"a\", \"keys\": [{\"kid\": \"k\", \"pem_file\": "
             "\"%s\", \"algs\": [\"RS256\"]}]}",
             path);
    snprintf(want, sizeof want, "auth.keys[0].pem_file: not a PEM public key (%s)\n", path);
    keyset_errors(a, want);
    /* A private key is no public key: never configure one. */
    snprintf(a, sizeof a,
             "{\"issuer\": \"i\", \"audience\": \"a\", \"keys\": [{\"kid\": \"k\", \"pem_file\": "
             "\"%s\", \"algs\": [\"RS256\"]}]}",
             keys.rsa_priv);
    snprintf(want, sizeof want, "auth.keys[0].pem_file: not a PEM public key (%s)\n",
             keys.rsa_priv);
    keyset_errors(a, want);
    unlink(path);
}
END_TEST

START_TEST(jwks_bad_keys_named) {
    const char *p = tj_write(keys.dir, "bad-jwks.json",
                             "{\"keys\": [{\"kty\": \"RSA\", \"n\": \"AQAB\", \"e\": \"AQAB\"},"
                             " {\"kty\": \"EC\", \"kid\": \"e\", \"crv\": \"P-256\", \"x\": "
                             "\"AAAA\", \"y\": \"AAAA\"}]}");
    char path[256], a[512], want[1024];
    snprintf(path, sizeof path, "%s", p);
    snprintf(a, sizeof a, "{\"issuer\": \"i\", \"audience\": \"a\", \"jwks_file\": \"%s\"}", path);
    snprintf(want, sizeof want,
             "auth.jwks_file: keys[0]: needs a kid (%s)\n"
             "auth.jwks_file: keys[1] (kid e): not an RSA or EC P-256/P-384 public key (%s)\n",
             path, path);
    keyset_errors(a, want);
    unlink(path);
}
END_TEST

START_TEST(jwks_keys_loaded_encryption_keys_skipped) {
    /* 3 PEM keys + 2 JWKS signing keys; the "enc" key is skipped. */
    ck_assert_uint_eq(fg_keyset_size(ks), 5);
}
END_TEST

/* ---- principals and roles ---------------------------------------------- */

static fg_principal_t *principal_of(const char *claims) {
    char *tok = tj_sign("RS256", keys.rsa_priv, "rsa1", claims);
    ck_assert_msg(tok != NULL, "cannot sign %s", claims);
    fg_principal_t *p = NULL;
    char why[256];
    ck_assert_msg(fg_token_verify(ks, &cfg->auth, tok, strlen(tok), NOW, &p, why, sizeof why) ==
                      FG_OK,
                  "%s", why);
    free(tok);
    return p;
}

START_TEST(roles_come_from_the_projects_claim) {
    fg_principal_t *p = principal_of(
        "{" BASE_CLAIMS ", \"projects\": {\"shop\": \"developer\", \"blog\": \"viewer\", "
        "\"ops\": \"operator\", \"Bad_Name\": \"admin\", \"x\": \"superuser\", \"y\": 5},"
        " \"groups\": [\"eng\", 7]}");
    ck_assert_uint_eq(fg_principal_nprojects(p), 3);
    fg_role_t r;
    ck_assert_str_eq(fg_principal_project(p, 0, &r), "blog");
    ck_assert_int_eq(r, FG_ROLE_VIEWER);
    ck_assert_str_eq(fg_principal_project(p, 1, &r), "ops");
    ck_assert_str_eq(fg_principal_project(p, 2, &r), "shop");
    ck_assert_ptr_null(fg_principal_project(p, 3, &r));
    ck_assert_int_eq(fg_principal_role(p, "shop"), FG_ROLE_DEVELOPER);
    ck_assert_int_eq(fg_principal_role(p, "other"), FG_ROLE_NONE);
    ck_assert_uint_eq(fg_principal_ngroups(p), 1);
    ck_assert_str_eq(fg_principal_group(p, 0), "eng");
    ck_assert(!fg_principal_is_admin(p));
    fg_principal_release(p);
}
END_TEST

/* What each role may do in its project, and nothing in another. */
static const struct {
    fg_perm_t perm;
    bool viewer, developer, operator_, admin;
} perm_cases[] = {
    {FG_PERM_READ, true, true, true, true},          {FG_PERM_WRITE, false, true, true, true},
    {FG_PERM_LOGS, false, true, true, true},         {FG_PERM_EXEC, false, false, true, true},
    {FG_PERM_ADMIN, false, false, false, true},      {FG_PERM_PUBLIC, true, true, true, true},
    {FG_PERM_AUTHENTICATED, true, true, true, true},
};

START_TEST(permissions_follow_roles) {
    fg_principal_t *v = principal_of("{" BASE_CLAIMS ", \"projects\": {\"shop\": \"viewer\"}}");
    fg_principal_t *d = principal_of("{" BASE_CLAIMS ", \"projects\": {\"shop\": \"developer\"}}");
    fg_principal_t *o = principal_of("{" BASE_CLAIMS ", \"projects\": {\"shop\": \"operator\"}}");
    fg_principal_t *a =
        principal_of("{" BASE_CLAIMS ", \"projects\": {}, \"groups\": [\"fleetgate-admins\"]}");
    for (size_t i = 0; i < sizeof perm_cases / sizeof perm_cases[0]; i++) {
        fg_perm_t perm = perm_cases[i].perm;
        ck_assert_msg(fg_auth_can(v, "shop", perm) == perm_cases[i].viewer, "viewer %d", perm);
        ck_assert_msg(fg_auth_can(d, "shop", perm) == perm_cases[i].developer, "dev %d", perm);
        ck_assert_msg(fg_auth_can(o, "shop", perm) == perm_cases[i].operator_, "op %d", perm);
        ck_assert_msg(fg_auth_can(a, "shop", perm) == perm_cases[i].admin, "admin %d", perm);
        ck_assert_msg(fg_auth_can(a, "elsewhere", perm) == perm_cases[i].admin, "admin %d", perm);
        /* Another project: only public and authenticated-only permissions pass. */
        bool open = perm == FG_PERM_PUBLIC || perm == FG_PERM_AUTHENTICATED;
        ck_assert_msg(fg_auth_can(o, "other", perm) == open, "cross-project %d", perm);
    }
    ck_assert(!fg_auth_can(NULL, "shop", FG_PERM_READ));
    ck_assert(fg_auth_can(NULL, "shop", FG_PERM_PUBLIC));
    ck_assert(fg_principal_is_admin(a));
    ck_assert_int_eq(fg_principal_role(a, "anything"), FG_ROLE_ADMIN);
    fg_principal_release(v);
    fg_principal_release(d);
    fg_principal_release(o);
    fg_principal_release(a);
}
END_TEST

START_TEST(role_names_round_trip) {
    static const char *const names[] = {"viewer", "developer", "operator", "admin"};
    for (size_t i = 0; i < 4; i++) {
        fg_role_t r;
        ck_assert_int_eq(fg_role_parse(names[i], &r), FG_OK);
        ck_assert_str_eq(fg_role_name(r), names[i]);
    }
    fg_role_t r;
    ck_assert_int_eq(fg_role_parse("root", &r), FG_ENOENT);
    ck_assert_int_eq(fg_role_parse("none", &r), FG_ENOENT);
}
END_TEST

/* ---- audit ------------------------------------------------------------- */

START_TEST(audit_lines_are_appended_whole) {
    char path[256];
    snprintf(path, sizeof path, "%s/audit.log", keys.dir);
    fg_audit_t *a = NULL;
    ck_assert_int_eq(fg_audit_open(&a, path), FG_OK);
    for (int i = 0; i < 3; i++) {
        json_t *line = json_pack("{s:i,s:s}", "n", i, "verb", "POST");
        ck_assert_int_eq(fg_audit_write(a, line), FG_OK);
        json_decref(line);
    }
    ck_assert_int_eq(fg_audit_reopen(a), FG_OK);
    json_t *line = json_pack("{s:i}", "n", 3);
    ck_assert_int_eq(fg_audit_write(a, line), FG_OK);
    json_decref(line);
    fg_audit_close(a);
    char *text = NULL;
    size_t len;
    ck_assert_int_eq(fg_read_file(path, 1 << 16, &text, &len), FG_OK);
    ck_assert_str_eq(text, "{\"n\":0,\"verb\":\"POST\"}\n{\"n\":1,\"verb\":\"POST\"}\n"
                           "{\"n\":2,\"verb\":\"POST\"}\n{\"n\":3}\n");
    free(text);
    unlink(path);
}
END_TEST

START_TEST(audit_write_failure_is_reported) {
    fg_audit_t *a = NULL;
    ck_assert_int_eq(fg_audit_open(&a, "/dev/full"), FG_OK);
    json_t *line = json_pack("{s:s}", "verb", "DELETE");
    ck_assert_int_eq(fg_audit_write(a, line), FG_EIO);
    json_decref(line);
    fg_audit_close(a);
    ck_assert_int_eq(fg_audit_open(&a, "/nonexistent/dir/audit.log"), FG_EIO);
}
END_TEST

static Suite *auth_suite(void) {
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("tokens");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, token_table, 0, sizeof token_cases / sizeof token_cases[0]);
    tcase_add_test(tc, token_tampered_payload_refused);
    tcase_add_test(tc, token_malformed_refused);
    tcase_add_test(tc, key_alg_mismatch_refused_at_load);
    tcase_add_test(tc, key_not_pem_refused);
    tcase_add_test(tc, jwks_bad_keys_named);
    tcase_add_test(tc, jwks_keys_loaded_encryption_keys_skipped);
    tcase_add_test(tc, roles_come_from_the_projects_claim);
    tcase_add_test(tc, permissions_follow_roles);
    tcase_add_test(tc, role_names_round_trip);
    tcase_add_test(tc, audit_lines_are_appended_whole);
    tcase_add_test(tc, audit_write_failure_is_reported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_run(auth_suite());
}
