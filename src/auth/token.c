/* auth/token.c: verifying a compact JWS (RFC 7515) and checking its claims (RFC 7519).
 *
 * The order is fixed, and each step's failure names itself in `why`: shape (three base64url
 * parts, bounded), header (JSON, alg, typ JWT if any, no crit), alg accepted at all (never none
 * or HS*), key (by kid), alg accepted by that key, payload a JSON object, signature, then the
 * claims: exp (required), nbf, iss, aud, sub. `why` never contains the token or anything copied
 * from it but a short, cleaned alg name.
 *
 * The signature is libjwt's jwt_decode (1.10.2) with the key's PEM; around it, this file does
 * what libjwt does not (see ../../../shared/STYLE.md, "Traps"): it pins the algorithm to the
 * key's before libjwt runs (libjwt takes `none` without a key, and HS256 keyed with an RSA public
 * key as the secret), checks every claim (libjwt checks none), and bounds what it parses. libjwt
 * re-parses the PEM on every call (about 3k RS256 verifications a second per core), which is
 * why the gate remembers verified tokens (gate.c). The tests sign their tokens with libjwt too,
 * and the fuzz target signs with OpenSSL.
 */
#include "auth_internal.h"

#include <jwt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SUBJECT_MAX   256
#define MAX_GROUPS    256
#define MAX_PROJECTS  1024
#define GROUP_MAX_LEN 256

/* ---- signatures -------------------------------------------------------- */

/* libjwt's name of each algorithm of the table. */
static const jwt_alg_t jwt_algs[ALG__COUNT] = {
    [ALG_RS256] = JWT_ALG_RS256, [ALG_RS384] = JWT_ALG_RS384, [ALG_RS512] = JWT_ALG_RS512,
    [ALG_ES256] = JWT_ALG_ES256, [ALG_ES384] = JWT_ALG_ES384,
};

/* The signature, verified by libjwt with the key's PEM. By the time this runs the header checks
 * have pinned the algorithm to one the key accepts (libjwt alone would take alg none without a
 * key, and HS256 keyed with the public key), and the result's algorithm is checked again. */
static bool signature_ok(const auth_key_t *key, alg_t alg, const char *token, size_t len,
                         size_t sig_len) {
    char buf[FG_TOKEN_MAX_BYTES + 1];
    jwt_t *jwt = NULL;
    const alg_row_t *row = &fg_auth_algs[alg];
    if (row->key_type == EVP_PKEY_EC && sig_len != 2 * row->ec_half)
        return false; /* JOSE ECDSA signatures are r || s, fixed width */
    memcpy(buf, token, len);
    buf[len] = '\0';
    bool ok = jwt_decode(&jwt, buf, (const unsigned char *)key->pem, (int)key->pem_len) == 0 &&
              jwt != NULL && jwt_get_alg(jwt) == jwt_algs[alg];
    jwt_free(jwt);
    return ok;
}

/* ---- claims ------------------------------------------------------------ */

static void format_time(int64_t t, char *buf, size_t len) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "%lld", (long long)t);
}

/* A NumericDate claim: FG_OK with *out, FG_ENOENT when absent, FG_EINVAL when not a number. */
static int numeric_date(const json_t *claims, const char *name, int64_t *out) {
    const json_t *v = json_object_get(claims, name);
    if (v == NULL)
        return FG_ENOENT;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return FG_OK;
    }
    if (json_is_real(v) && json_real_value(v) > -1e15 && json_real_value(v) < 1e15) {
        *out = (int64_t)json_real_value(v);
        return FG_OK;
    }
    return FG_EINVAL;
}

static bool aud_matches(const json_t *aud, const char *want) {
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    size_t i;
    const json_t *v;
    json_array_foreach(aud, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
            return true;
    }
    return false;
}

/* exp, nbf, iss, aud: FG_OK, or FG_EINVAL with why (and *lasting false when the clock alone may
 * turn the refusal into an acceptance: nbf still ahead). */
static int check_claims(const json_t *claims, const fg_auth_conf_t *conf, int64_t now,
                        int64_t *exp_out, char *why, size_t whylen, bool *lasting) {
    int64_t exp, nbf;
    char when[40];
    int rc = numeric_date(claims, "exp", &exp);
    if (rc != FG_OK) {
        snprintf(why, whylen,
                 rc == FG_ENOENT ? "the token has no exp claim"
                                 : "the token's exp claim is not a number");
        return FG_EINVAL;
    }
    if (now >= exp + conf->leeway_s) {
        format_time(exp, when, sizeof when);
        snprintf(why, whylen, "the token expired at %s", when);
        return FG_EINVAL;
    }
    rc = numeric_date(claims, "nbf", &nbf);
    if (rc == FG_EINVAL) {
        snprintf(why, whylen, "the token's nbf claim is not a number");
        return FG_EINVAL;
    }
    if (rc == FG_OK && now + conf->leeway_s < nbf) {
        format_time(nbf, when, sizeof when);
        snprintf(why, whylen, "the token is not valid before %s", when);
        *lasting = false;
        return FG_EINVAL;
    }
    if (conf->issuer) {
        const char *iss = json_string_value(json_object_get(claims, "iss"));
        if (iss == NULL) {
            snprintf(why, whylen, "the token has no iss claim");
            return FG_EINVAL;
        }
        if (strcmp(iss, conf->issuer) != 0) {
            snprintf(why, whylen, "the token's iss is not the configured issuer");
            return FG_EINVAL;
        }
    }
    if (conf->audience) {
        const json_t *aud = json_object_get(claims, "aud");
        if (aud == NULL) {
            snprintf(why, whylen, "the token has no aud claim");
            return FG_EINVAL;
        }
        if (!aud_matches(aud, conf->audience)) {
            snprintf(why, whylen, "the token's aud does not name this service");
            return FG_EINVAL;
        }
    }
    *exp_out = exp;
    return FG_OK;
}

/* ---- the principal ----------------------------------------------------- */

static int cmp_project(const void *a, const void *b) {
    return strcmp(((const project_role_t *)a)->name, ((const project_role_t *)b)->name);
}

int fg_principal_from_claims(const json_t *claims, const fg_auth_conf_t *conf, int64_t exp,
                             fg_principal_t **out, char *why, size_t whylen) {
    const json_t *sub = json_object_get(claims, "sub");
    if (!json_is_string(sub) || json_string_length(sub) == 0) {
        snprintf(why, whylen, "the token has no sub claim");
        return FG_EINVAL;
    }
    if (json_string_length(sub) > SUBJECT_MAX ||
        strlen(json_string_value(sub)) != json_string_length(sub)) {
        snprintf(why, whylen, "the token's sub is longer than %d bytes or holds NUL", SUBJECT_MAX);
        return FG_EINVAL;
    }
    fg_principal_t *p = fg_xcalloc(1, sizeof *p);
    atomic_init(&p->refs, 1);
    p->subject = fg_xstrdup(json_string_value(sub));
    p->exp = exp;

    /* Groups: strings only, bounded; anything else in the claim is ignored. */
    const json_t *groups = json_object_get(claims, conf->groups_claim);
    size_t i;
    const json_t *v;
    if (json_is_array(groups)) {
        p->groups = fg_xcalloc(json_array_size(groups) + 1, sizeof *p->groups);
        json_array_foreach(groups, i, v) {
            if (p->ngroups == MAX_GROUPS)
                break;
            if (!json_is_string(v) || json_string_length(v) > GROUP_MAX_LEN)
                continue;
            p->groups[p->ngroups++] = fg_xstrdup(json_string_value(v));
            if (strcmp(json_string_value(v), conf->admin_group) == 0)
                p->admin = true;
        }
    }

    /* Projects: {"name": "role"}; a name that is no DNS-1123 label or a role that is no role
     * grants nothing (least privilege), it does not void the token. */
    const json_t *projects = json_object_get(claims, conf->projects_claim);
    if (json_is_object(projects)) {
        size_t n = json_object_size(projects);
        p->projects = fg_xcalloc(n ? n : 1, sizeof *p->projects);
        const char *name;
        json_object_foreach((json_t *)projects, name, v) {
            fg_role_t role;
            if (p->nprojects == MAX_PROJECTS)
                break;
            if (!json_is_string(v) || !fg_is_dns1123_label(name, strlen(name)) ||
                fg_role_parse(json_string_value(v), &role) != FG_OK)
                continue;
            p->projects[p->nprojects].name = fg_xstrdup(name);
            p->projects[p->nprojects].role = role;
            p->nprojects++;
        }
        qsort(p->projects, p->nprojects, sizeof *p->projects, cmp_project);
    }
    *out = p;
    return FG_OK;
}

/* ---- verification ------------------------------------------------------ */

/* The alg, cleaned for a message: letters and digits only, at most 16, else "(unreadable)". */
static void shown_alg(const char *alg, char *buf, size_t len) {
    size_t n = strlen(alg);
    bool clean = n > 0 && n <= 16;
    for (size_t i = 0; clean && i < n; i++) {
        char c = alg[i];
        clean = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    }
    snprintf(buf, len, "%s", clean ? alg : "(unreadable)");
}

/* True when a string anywhere in j holds a NUL byte (loaded with JSON_ALLOW_NUL, jansson keeps
 * it, but every C consumer would see the string cut there: a kid "rsa1\u0000x" would pick the
 * key rsa1, a sub "ada\u0000x" would be ada). Depth is bounded by the load. */
static bool holds_nul(const json_t *j) {
    const char *k;
    const json_t *v;
    size_t i;
    if (json_is_string(j))
        return strlen(json_string_value(j)) != json_string_length(j);
    if (json_is_object(j)) {
        json_object_foreach((json_t *)j, k, v) {
            if (holds_nul(v))
                return true;
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) {
            if (holds_nul(v))
                return true;
        }
    }
    return false;
}

/* Parses the JOSE header into alg and kid (both borrowed from *hdr_out). */
static int parse_header(const char *part, size_t len, json_t **hdr_out, char *why, size_t whylen) {
    unsigned char *raw = NULL;
    size_t raw_len;
    char jerr[128];
    json_t *hdr = NULL;
    int rc = FG_EINVAL;
    if (len > (FG_TOKEN_MAX_HEADER / 3 + 1) * 4) {
        snprintf(why, whylen, "the token's header is larger than %d bytes", FG_TOKEN_MAX_HEADER);
        goto out;
    }
    if (fg_b64url_decode(part, len, &raw, &raw_len) != FG_OK) {
        snprintf(why, whylen, "the token's header is not base64url");
        goto out;
    }
    if (fg_json_load((const char *)raw, raw_len, &hdr, jerr, sizeof jerr) != FG_OK ||
        !json_is_object(hdr)) {
        snprintf(why, whylen, "the token's header is not a JSON object");
        goto out;
    }
    if (holds_nul(hdr)) {
        snprintf(why, whylen, "the token's header holds a NUL byte");
        goto out;
    }
    if (!json_is_string(json_object_get(hdr, "alg"))) {
        snprintf(why, whylen, "the token's header has no alg");
        goto out;
    }
    const json_t *kid = json_object_get(hdr, "kid");
    if (kid &&
        (!json_is_string(kid) || json_string_length(kid) == 0 || json_string_length(kid) > 256)) {
        snprintf(why, whylen, "the token's kid is not a string of 1 to 256 bytes");
        goto out;
    }
    const json_t *typ = json_object_get(hdr, "typ");
    if (typ && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0)) {
        /* libjwt 1.10.2 refuses any other typ (such as RFC 9068's "at+jwt"). */
        snprintf(why, whylen, "the token's typ is not JWT");
        goto out;
    }
    if (json_object_get(hdr, "crit")) {
        snprintf(why, whylen,
                 "the token's header has crit extensions, which fleetgate does not "
                 "understand");
        goto out;
    }
    *hdr_out = hdr;
    hdr = NULL;
    rc = FG_OK;
out:
    json_decref(hdr);
    free(raw);
    return rc;
}

int fg_token_verify(const fg_keyset_t *ks, const fg_auth_conf_t *conf, const char *token,
                    size_t len, int64_t now_s, fg_principal_t **out, char *why, size_t whylen) {
    bool lasting;
    return fg_token_verify_lasting(ks, conf, token, len, now_s, out, why, whylen, &lasting);
}

int fg_token_verify_lasting(const fg_keyset_t *ks, const fg_auth_conf_t *conf, const char *token,
                            size_t len, int64_t now_s, fg_principal_t **out, char *why,
                            size_t whylen, bool *lasting) {
    *lasting = true;
    json_t *hdr = NULL, *claims = NULL;
    unsigned char *sig = NULL, *payload = NULL;
    size_t sig_len, payload_len;
    int64_t exp = 0;
    char jerr[128], alg_shown[24];
    int rc = FG_EINVAL;
    alg_t alg;

    if (len > FG_TOKEN_MAX_BYTES) {
        snprintf(why, whylen, "the token is longer than %d bytes", FG_TOKEN_MAX_BYTES);
        goto out;
    }
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    const char *end = token + len;
    if (dot1 == NULL || dot2 == NULL || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1))) {
        size_t parts = 1;
        for (size_t i = 0; i < len; i++)
            parts += token[i] == '.';
        snprintf(why, whylen, "the token is not a JWS: it needs 3 dot-separated parts (got %zu)",
                 parts);
        goto out;
    }
    if (parse_header(token, (size_t)(dot1 - token), &hdr, why, whylen) != FG_OK)
        goto out;
    const char *alg_name = json_string_value(json_object_get(hdr, "alg"));
    shown_alg(alg_name, alg_shown, sizeof alg_shown);
    if (fg_auth_alg_lookup(alg_name, strlen(alg_name), &alg) != FG_OK) {
        snprintf(why, whylen,
                 "the token's alg %s is not accepted (RS256, RS384, RS512, ES256, "
                 "ES384 only)",
                 alg_shown);
        goto out;
    }
    const char *kid = json_string_value(json_object_get(hdr, "kid"));
    const auth_key_t *key = fg_keyset_find(ks, kid);
    if (key == NULL) {
        snprintf(why, whylen,
                 kid ? "no configured key has the token's kid"
                     : "the token names no kid and no key is configured without one");
        goto out;
    }
    if ((key->algs & (1u << alg)) == 0) {
        snprintf(why, whylen, "the token's alg %s is not one its key accepts", alg_shown);
        goto out;
    }
    if (fg_b64url_decode(dot2 + 1, (size_t)(end - dot2 - 1), &sig, &sig_len) != FG_OK) {
        snprintf(why, whylen, "the token's signature is not base64url");
        goto out;
    }
    /* libjwt parses the payload as part of its check, so a payload that is no JSON object is
     * named before the signature is. */
    if (fg_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &payload, &payload_len) != FG_OK ||
        fg_json_load((const char *)payload, payload_len, &claims, jerr, sizeof jerr) != FG_OK ||
        !json_is_object(claims)) {
        snprintf(why, whylen, "the token's payload is not a JSON object");
        goto out;
    }
    if (holds_nul(claims)) {
        snprintf(why, whylen, "the token's claims hold a NUL byte");
        goto out;
    }
    if (!signature_ok(key, alg, token, len, sig_len)) {
        snprintf(why, whylen, "the token's signature does not verify");
        goto out;
    }
    if (check_claims(claims, conf, now_s, &exp, why, whylen, lasting) != FG_OK)
        goto out;
    rc = fg_principal_from_claims(claims, conf, exp, out, why, whylen);
out:
    json_decref(hdr);
    json_decref(claims);
    free(sig);
    free(payload);
    return rc;
}
