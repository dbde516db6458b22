/* tls: the simulator's certificates. At start kubesim either loads ca.crt, server.crt and
 * server.key from the TLS directory, or creates them there: an EC P-256 CA and a server
 * certificate for 127.0.0.1 and localhost signed by it, so clients verify kubesim with
 * --certificate-authority DIR/ca.crt the way they verify a real API server. OpenSSL libcrypto
 * is only used here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ks_tls.h"

#define PEM_MAX (64 * 1024)

static int write_file(const char *dir, const char *name, const char *data, mode_t mode) {
    char *path = fg_xasprintf("%s/%s", dir, name);
    int rc = FG_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    size_t len = strlen(data);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        rc = FG_EIO;
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

static char *bio_text(BIO *b) {
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    return fg_xstrndup(data, (size_t)n);
}

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext != NULL) {
        X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
    }
}

/* A certificate for key, named cn, signed by (issuer, issuer_key) or self-signed. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, bool ca) {
    X509 *cert = X509_new();
    unsigned char serial[8];
    fg_random_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
    BN_free(bn);
    X509_set_version(cert, 2);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3650L * 24 * 3600);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
    X509 *iss = issuer ? issuer : cert;
    if (ca) {
        add_ext(cert, iss, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(cert, iss, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
        add_ext(cert, iss, NID_subject_key_identifier, "hash");
    } else {
        add_ext(cert, iss, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(cert, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment");
        add_ext(cert, iss, NID_ext_key_usage, "serverAuth");
        add_ext(cert, iss, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
        add_ext(cert, iss, NID_authority_key_identifier, "keyid:always");
    }
    X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256());
    return cert;
}

static int generate(const char *dir, ks_tls_t *out) {
    int rc = FG_EIO;
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *srv_key = EVP_EC_gen("P-256");
    X509 *ca = NULL, *srv = NULL;
    BIO *b_ca = BIO_new(BIO_s_mem()), *b_srv = BIO_new(BIO_s_mem()), *b_key = BIO_new(BIO_s_mem());
    if (ca_key == NULL || srv_key == NULL)
        goto out;
    ca = make_cert(ca_key, "kubesim-ca", NULL, NULL, true);
    srv = make_cert(srv_key, "kubesim", ca, ca_key, false);
    if (!PEM_write_bio_X509(b_ca, ca) || !PEM_write_bio_X509(b_srv, srv) ||
        !PEM_write_bio_PrivateKey(b_key, srv_key, NULL, NULL, 0, NULL, NULL))
        goto out;
    out->ca_pem = bio_text(b_ca);
    out->cert_pem = bio_text(b_srv);
    out->key_pem = bio_text(b_key);
    if (write_file(dir, "ca.crt", out->ca_pem, 0644) != FG_OK ||
        write_file(dir, "server.crt", out->cert_pem, 0644) != FG_OK ||
        write_file(dir, "server.key", out->key_pem, 0600) != FG_OK)
        goto out;
    rc = FG_OK;
out:
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    X509_free(ca);
    X509_free(srv);
    BIO_free(b_ca);
    BIO_free(b_srv);
    BIO_free(b_key);
    return rc;
}

static int load(const char *dir, const char *name, char **out) {
    char *path = fg_xasprintf("%s/%s", dir, name);
    size_t len;
    int rc = fg_read_file(path, PEM_MAX, out, &len);
    free(path);
    return rc;
}

int ks_tls_setup(const char *dir, ks_tls_t *out) {
    memset(out, 0, sizeof(*out));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return FG_EIO;
    if (load(dir, "ca.crt", &out->ca_pem) == FG_OK &&
        load(dir, "server.crt", &out->cert_pem) == FG_OK &&
        load(dir, "server.key", &out->key_pem) == FG_OK)
        return FG_OK;
    ks_tls_free(out);
    int rc = generate(dir, out);
    if (rc != FG_OK)
        ks_tls_free(out);
    return rc;
}

void ks_tls_free(ks_tls_t *t) {
    free(t->ca_pem);
    free(t->cert_pem);
    free(t->key_pem);
    memset(t, 0, sizeof(*t));
}
