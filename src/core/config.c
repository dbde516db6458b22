/* core/config.c: the configuration file, as one table of keys.
 *
 * Each row names a key, its type, default, range or validator, and the field it fills. Nested
 * objects ("limits", "redis", "log") are sub-tables writing into the same fg_config_t; arrays of
 * objects ("clusters") are sub-tables writing into freshly allocated elements. Every problem is
 * collected (not just the first) as one line "ORIGIN: KEY: why (got VALUE)", so an operator
 * fixes a file in one pass. Unknown keys are errors: a typo must not silently mean "default". */
#include "fleetgate/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (4u << 20)

/* K_STRINGS: an array of strings (char ** at offset, count at count_offset), each checked by
 * the row's validator. */
typedef enum { K_STRING, K_INT, K_BOOL, K_OBJECT, K_ARRAY, K_STRINGS } kind_t;

/* A string validator returns NULL when the value is fine, or why it is not. */
typedef const char *(*check_fn)(const char *value);

struct table;

typedef struct {
    const char *name;
    kind_t kind;
    size_t offset; /* of the target field in the struct this table fills */
    const char *def_string;
    int64_t def_int, min, max; /* also the default of a bool (0/1) */
    check_fn check;
    const struct table *sub; /* K_OBJECT: same struct; K_ARRAY: elements */
    size_t count_offset;     /* K_ARRAY: where the element count goes */
    bool required;
} key_t_;

typedef struct table {
    const key_t_ *keys;
    size_t nkeys;
    size_t elem_size; /* for tables used as array elements */
} table_t;

/* ---- validators -------------------------------------------------------- */

static const char *check_listen(const char *v) {
    char *host = NULL;
    uint16_t port;
    if (fg_parse_hostport(v, &host, &port) != FG_OK)
        return "not HOST:PORT with a port from 1 to 65535";
    free(host);
    return NULL;
}

static const char *check_http_url(const char *v) {
    if (strncmp(v, "https://", 8) != 0 && strncmp(v, "http://", 7) != 0)
        return "not an http(s) URL";
    const char *host = strstr(v, "://") + 3;
    if (*host == '\0' || *host == '/' || *host == ':')
        return "not an http(s) URL: no host";
    if (strpbrk(v, " \t\r\n?#") != NULL)
        return "not an http(s) URL: spaces, a query or a fragment are not allowed";
    return NULL;
}

static const char *check_redis_url(const char *v) {
    if (strncmp(v, "unix://", 7) == 0)
        return v[7] == '/' ? NULL : "a unix:// Redis URL needs an absolute socket path";
    if (strncmp(v, "redis://", 8) != 0)
        return "not a redis:// or unix:// URL";
    const char *p = v + 8;
    const char *at = strchr(p, '@');
    if (at)
        p = at + 1; /* credentials are allowed, never echoed */
    const char *slash = strchr(p, '/');
    char *hostport = fg_xstrndup(p, slash ? (size_t)(slash - p) : strlen(p));
    char *host = NULL;
    uint16_t port;
    int rc = fg_parse_hostport(hostport, &host, &port);
    free(hostport);
    free(host);
    if (rc != FG_OK)
        return "not redis://HOST:PORT[/DB]";
    if (slash) {
        int64_t db;
        if (fg_parse_int64(slash + 1, strlen(slash + 1), 0, 15, &db) != FG_OK)
            return "the database after '/' must be a number from 0 to 15";
    }
    return NULL;
}

static const char *check_dns1123(const char *v) {
    return fg_is_dns1123_label(v, strlen(v))
               ? NULL
               : "not a DNS-1123 label (lowercase letters, digits and '-', 1 to 63 characters, "
                 "starting and ending with a letter or digit)";
}

static const char *check_readable(const char *v) {
    return access(v, R_OK) == 0 ? NULL : "cannot read this file";
}

/* A cluster label "key=value": a label key (optional DNS prefix and '/', then at most 63 of
 * [A-Za-z0-9._-]) and a value of at most 63 of the same, as Kubernetes labels are. */
static const char *check_label_pair(const char *v) {
    const char *eq = strchr(v, '=');
    if (eq == NULL || eq == v)
        return "must be key=value";
    size_t klen = (size_t)(eq - v), vlen = strlen(eq + 1);
    const char *slash = memchr(v, '/', klen);
    const char *name = slash ? slash + 1 : v;
    size_t nlen = klen - (size_t)(name - v);
    if (slash && !fg_is_dns1123_chars(v, (size_t)(slash - v), 253))
        return "the key's prefix must be a DNS subdomain";
    if (nlen == 0 || nlen > 63 || vlen > 63)
        return "key name and value must be at most 63 characters";
    for (const char *p = name; *p; p++)
        if (p != eq && !(p[0] >= 'a' && p[0] <= 'z') && !(p[0] >= 'A' && p[0] <= 'Z') &&
            !(p[0] >= '0' && p[0] <= '9') && !strchr("._-", p[0]))
            return "key and value may hold letters, digits, '.', '_' and '-'";
    return NULL;
}

/* A Kubernetes quantity as a sidecar's resources take it: a decimal number and an optional
 * suffix (m, k, M, G, T, Ki, Mi, Gi, Ti). */
static const char *check_quantity(const char *v) {
    static const char *const suffixes[] = {"", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"};
    size_t digits = strspn(v, "0123456789"), n = digits;
    if (v[n] == '.')
        n += 1 + strspn(v + n + 1, "0123456789");
    for (size_t i = 0; digits > 0 && digits <= 18 && i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strcmp(v + n, suffixes[i]) == 0)
            return NULL;
    return "not a quantity such as 100m, 0.5, 64Mi or 1Gi";
}

/* A container port "PORT" or "NAME:PORT" (NAME: at most 15 of a-z, 0-9 and '-'). */
static const char *check_port(const char *v) {
    const char *colon = strchr(v, ':'), *num = colon ? colon + 1 : v;
    int64_t port;
    if (colon && (colon == v || colon - v > 15 || !fg_is_dns1123_chars(v, (size_t)(colon - v), 15)))
        return "the port's name must be at most 15 of a-z, 0-9 and '-'";
    if (fg_parse_int64(num, strlen(num), 1, 65535, &port) != FG_OK)
        return "must be PORT or NAME:PORT with a port from 1 to 65535";
    return NULL;
}

/* An environment variable "NAME=value" (NAME: a C identifier, '.' and '-' allowed after). */
static const char *check_env(const char *v) {
    const char *eq = strchr(v, '=');
    if (eq == NULL || eq == v || !(((*v | 0x20) >= 'a' && (*v | 0x20) <= 'z') || *v == '_'))
        return "must be NAME=value with NAME starting with a letter or '_'";
    for (const char *p = v; p < eq; p++)
        if (!((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') && !(*p >= '0' && *p <= '9') &&
            !strchr("_.-", *p))
            return "the name may hold letters, digits, '_', '.' and '-'";
    return NULL;
}

/* A browser origin as the Origin header sends it: http(s)://HOST[:PORT], nothing after. */
static const char *check_origin(const char *v) {
    const char *host = strncmp(v, "https://", 8) == 0  ? v + 8
                       : strncmp(v, "http://", 7) == 0 ? v + 7
                                                       : NULL;
    if (host == NULL || *host == '\0')
        return "must be an origin: http(s)://HOST[:PORT], no path";
    const char *colon = strrchr(host, ':');
    const char *bracket = strrchr(host, ']');
    size_t hlen = colon && (!bracket || colon > bracket) ? (size_t)(colon - host) : strlen(host);
    int64_t port;
    if (hlen == 0 ||
        (hlen < strlen(host) &&
         fg_parse_int64(host + hlen + 1, strlen(host + hlen + 1), 1, 65535, &port) != FG_OK))
        return "must be an origin: http(s)://HOST[:PORT], no path";
    for (size_t i = 0; i < hlen; i++)
        if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= '0' && host[i] <= '9') ||
              strchr(".-[]:", host[i])))
            return "must be an origin: http(s)://HOST[:PORT], the host in lower case, no path";
    return NULL;
}

static const char *check_log_level(const char *v) {
    fg_log_level_t l;
    return fg_log_level_parse(v, &l) == FG_OK ? NULL : "must be one of debug, info, warn, error";
}

static const char *check_nonempty(const char *v) {
    return *v ? NULL : "must not be empty";
}

static const char *check_jwt_alg(const char *v) {
    static const char *const algs[] = {"RS256", "RS384", "RS512", "ES256", "ES384"};
    for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++) {
        if (strcmp(v, algs[i]) == 0)
            return NULL;
    }
    return "not an accepted algorithm (RS256, RS384, RS512, ES256, ES384)";
}

static const char *check_claim_name(const char *v) {
    size_t n = strlen(v);
    return n > 0 && n <= 64 ? NULL : "must be a claim name of 1 to 64 characters";
}

static const char *check_audit_log(const char *v) {
    if (strcmp(v, "-") == 0)
        return NULL;
    return v[0] != '\0' ? NULL : "must be a file path, or \"-\" for stdout";
}

/* ---- the tables -------------------------------------------------------- */

/* One macro a kind of row (as Redis's createIntConfig() and friends), so a row names only what
 * its kind uses and a table reads as a list of keys. */
#define KEY_STRING(n, field, def, chk)                                                             \
    { .name = n, .kind = K_STRING, .offset = field, .def_string = def, .check = chk }
#define KEY_REQUIRED_STRING(n, field, chk)                                                         \
    { .name = n, .kind = K_STRING, .offset = field, .check = chk, .required = true }
#define KEY_INT(n, field, def, lo, hi)                                                             \
    { .name = n, .kind = K_INT, .offset = field, .def_int = def, .min = lo, .max = hi }
#define KEY_BOOL(n, field, def)                                                                    \
    { .name = n, .kind = K_BOOL, .offset = field, .def_int = def }
#define KEY_OBJECT(n, table)                                                                       \
    { .name = n, .kind = K_OBJECT, .sub = &table }
/* An array of at most hi objects, each filled through table into a new element. */
#define KEY_ARRAY(n, field, count_field, hi, table)                                                \
    {                                                                                              \
        .name = n, .kind = K_ARRAY, .offset = field, .count_offset = count_field, .max = hi,       \
        .sub = &table                                                                              \
    }
#define KEY_REQUIRED_STRINGS(n, field, count_field, lo, hi, chk)                                   \
    {                                                                                              \
        .name = n, .kind = K_STRINGS, .offset = field, .count_offset = count_field, .min = lo,     \
        .max = hi, .check = chk, .required = true                                                  \
    }
#define KEY_STRINGS(n, field, count_field, hi, chk)                                                \
    {                                                                                              \
        .name = n, .kind = K_STRINGS, .offset = field, .count_offset = count_field, .max = hi,     \
        .check = chk                                                                               \
    }
/* A table of rows; elem_size is the element's size when it fills array elements, else 0. */
#define TABLE(rows, elem_size)                                                                     \
    { rows, sizeof rows / sizeof rows[0], elem_size }

#define CFG(f) offsetof(fg_config_t, f)
#define CL(f)  offsetof(fg_cluster_conf_t, f)
#define AK(f)  offsetof(fg_auth_key_conf_t, f)

static const key_t_ cluster_keys[] = {
    KEY_REQUIRED_STRING("name", CL(name), check_dns1123),
    KEY_STRING("region", CL(region), "", NULL),
    KEY_REQUIRED_STRING("zone", CL(zone), check_nonempty),
    KEY_REQUIRED_STRING("url", CL(url), check_http_url),
    KEY_STRING("token_file", CL(token_file), NULL, check_readable),
    KEY_STRING("client_cert_file", CL(client_cert_file), NULL, check_readable),
    KEY_STRING("client_key_file", CL(client_key_file), NULL, check_readable),
    KEY_STRING("ca_file", CL(ca_file), NULL, check_readable),
    KEY_BOOL("insecure_skip_tls_verify", CL(insecure_skip_tls_verify), false),
    KEY_STRINGS("labels", CL(labels), CL(nlabels), 64, check_label_pair),
};
static const table_t cluster_table = TABLE(cluster_keys, sizeof(fg_cluster_conf_t));

static const key_t_ limits_keys[] = {
    KEY_INT("max_body_bytes", CFG(max_body_bytes), 1 << 20, 1, 64 << 20),
    KEY_INT("max_connections", CFG(max_connections), 1024, 1, 100000),
    KEY_INT("connection_timeout_s", CFG(connection_timeout_s), 30, 1, 3600),
    KEY_INT("header_timeout_s", CFG(header_timeout_s), 10, 1, 3600),
    KEY_INT("body_timeout_s", CFG(body_timeout_s), 60, 1, 3600),
    KEY_INT("max_connections_per_client", CFG(max_connections_per_client), 256, 0, 100000),
    KEY_INT("drain_timeout_s", CFG(drain_timeout_s), 10, 0, 600),
};
static const table_t limits_table = TABLE(limits_keys, 0);

static const key_t_ redis_keys[] = {
    KEY_STRING("url", CFG(redis_url), "redis://127.0.0.1:6379/0", check_redis_url),
    KEY_INT("timeout_ms", CFG(redis_call_timeout_ms), 250, 1, 60000),
};
static const table_t redis_table = TABLE(redis_keys, 0);

static const key_t_ log_keys[] = {
    KEY_STRING("level", CFG(log_level), "info", check_log_level),
    KEY_BOOL("access_log", CFG(access_log), true),
};
static const table_t log_table = TABLE(log_keys, 0);

static const key_t_ auth_key_keys[] = {
    KEY_STRING("kid", AK(kid), NULL, check_nonempty),
    KEY_REQUIRED_STRING("pem_file", AK(pem_file), check_readable),
    KEY_REQUIRED_STRINGS("algs", AK(algs), AK(nalgs), 1, 5, check_jwt_alg),
};
static const table_t auth_key_table = TABLE(auth_key_keys, sizeof(fg_auth_key_conf_t));

static const key_t_ auth_keys[] = {
    KEY_STRING("issuer", CFG(auth.issuer), NULL, check_nonempty),
    KEY_STRING("audience", CFG(auth.audience), NULL, check_nonempty),
    KEY_INT("leeway_s", CFG(auth.leeway_s), 30, 0, 300),
    KEY_ARRAY("keys", CFG(auth.keys), CFG(auth.nkeys), 64, auth_key_table),
    KEY_STRING("jwks_file", CFG(auth.jwks_file), NULL, check_readable),
    KEY_STRING("projects_claim", CFG(auth.projects_claim), "projects", check_claim_name),
    KEY_STRING("groups_claim", CFG(auth.groups_claim), "groups", check_claim_name),
    KEY_STRING("admin_group", CFG(auth.admin_group), "fleetgate-admins", check_nonempty),
    KEY_INT("token_cache_entries", CFG(auth.token_cache_entries), 4096, 0, 1 << 20),
    KEY_STRING("audit_log", CFG(auth.audit_log), "-", check_audit_log),
    KEY_BOOL("metrics_public", CFG(auth.metrics_public), true),
};
static const table_t auth_table = TABLE(auth_keys, 0);

/* rate_limits.* and cache.* keys are named as their fields are. */
#define RATE_INT(field, def, lo, hi)  KEY_INT(#field, CFG(rate.field), def, lo, hi)
#define CACHE_INT(field, def, lo, hi) KEY_INT(#field, CFG(cache.field), def, lo, hi)
/* A rate-limit class is two keys, C_per_minute and C_burst, with the same ranges in every class. */
#define RATE_CLASS(c, per_minute, burst)                                                           \
    RATE_INT(c##_per_minute, per_minute, 1, 60000000), RATE_INT(c##_burst, burst, 1, 1000000)

static const key_t_ rate_keys[] = {
    KEY_BOOL("enabled", CFG(rate.enabled), true),
    RATE_CLASS(read, 6000, 200),
    RATE_CLASS(write, 600, 50),
    RATE_CLASS(project_read, 60000, 2000),
    RATE_CLASS(project_write, 6000, 200),
    RATE_INT(streams_per_principal, 8, 1, 10000),
    RATE_INT(stream_lease_s, 60, 5, 3600),
    RATE_INT(list_item_cost_milli, 10, 0, 1000000),
    RATE_INT(redis_timeout_ms, 50, 1, 10000),
    RATE_INT(refusals_per_minute, 600, 1, 60000000),
    RATE_INT(refusal_burst, 100, 1, 1000000),
};
static const table_t rate_table = TABLE(rate_keys, 0);

static const key_t_ cache_keys[] = {
    KEY_BOOL("enabled", CFG(cache.enabled), true),
    CACHE_INT(lease_ms, 15000, 300, 600000),
    CACHE_INT(list_page_size, 500, 1, 10000),
    CACHE_INT(watch_timeout_s, 300, 1, 3600),
    CACHE_INT(resync_backoff_max_ms, 30000, 10, 600000),
    CACHE_INT(redis_timeout_ms, 1000, 1, 60000),
    CACHE_INT(mirror_mb, 64, 0, 65536),
    KEY_STRING("replica_id", CFG(cache.replica_id), NULL, check_nonempty),
};
static const table_t cache_table = TABLE(cache_keys, 0);

#define STREAMS_INT(field, def, lo, hi) KEY_INT(#field, CFG(streams.field), def, lo, hi)
static const key_t_ streams_keys[] = {
    STREAMS_INT(buffer_kib, 64, 32, 4096),
    STREAMS_INT(stall_timeout_s, 30, 1, 3600),
    STREAMS_INT(exec_idle_timeout_s, 600, 1, 86400),
    STREAMS_INT(exec_max_session_s, 14400, 10, 604800),
};
static const table_t streams_table = TABLE(streams_keys, 0);

#define RECONCILER_INT(field, def, lo, hi) KEY_INT(#field, CFG(reconciler.field), def, lo, hi)
static const key_t_ reconciler_keys[] = {
    RECONCILER_INT(rollout_max_apps, 5, 1, 1000),
    RECONCILER_INT(rollout_interval_s, 10, 1, 3600),
};
static const table_t reconciler_table = TABLE(reconciler_keys, 0);

#define SC(f) offsetof(fg_sidecar_conf_t, f)

static const key_t_ sidecar_keys[] = {
    KEY_REQUIRED_STRING("name", SC(name), check_dns1123),
    KEY_REQUIRED_STRING("image", SC(image), check_nonempty),
    KEY_STRING("cpu", SC(cpu), NULL, check_quantity),
    KEY_STRING("memory", SC(memory), NULL, check_quantity),
    KEY_STRING("cpu_limit", SC(cpu_limit), NULL, check_quantity),
    KEY_STRING("memory_limit", SC(memory_limit), NULL, check_quantity),
    KEY_STRINGS("ports", SC(ports), SC(nports), 16, check_port),
    KEY_STRINGS("env", SC(env), SC(nenv), 64, check_env),
};
static const table_t sidecar_table = TABLE(sidecar_keys, sizeof(fg_sidecar_conf_t));

static const char *check_https_url(const char *v) {
    if (strncmp(v, "https://", 8) != 0)
        return "not an https:// URL";
    return check_http_url(v);
}

static const key_t_ tls_keys[] = {
    KEY_STRING("listen", CFG(tls.listen), "127.0.0.1:8443", check_listen),
    KEY_STRING("cert_file", CFG(tls.cert_file), NULL, check_readable),
    KEY_STRING("key_file", CFG(tls.key_file), NULL, check_readable),
    KEY_STRING("ca_file", CFG(tls.ca_file), NULL, check_readable),
    KEY_STRING("advertise_url", CFG(tls.advertise_url), NULL, check_https_url),
};
static const table_t tls_table = TABLE(tls_keys, 0);

/* insights.*: what each project keeps of its timeline (README.md "Insights"). */
#define INSIGHTS_INT(field, def, lo, hi) KEY_INT(#field, CFG(insights.field), def, lo, hi)
static const key_t_ insights_keys[] = {
    INSIGHTS_INT(events_max_age_s, 604800, 60, 31536000),
    INSIGHTS_INT(events_max_per_project, 10000, 10, 1000000),
    INSIGHTS_INT(changes_max_per_project, 10000, 100, 10000000),
    INSIGHTS_INT(changes_keepalive_s, 15, 1, 300),
    INSIGHTS_INT(history_max_age_s, 2592000, 60, 31536000),
    INSIGHTS_INT(history_max_per_project, 10000, 10, 1000000),
};
static const table_t insights_table = TABLE(insights_keys, 0);

static const key_t_ cors_keys[] = {
    KEY_STRINGS("allowed_origins", CFG(cors_allowed_origins), CFG(ncors_allowed_origins), 64,
                check_origin),
    KEY_INT("max_age_s", CFG(cors_max_age_s), 600, 0, 86400),
};
static const table_t cors_table = TABLE(cors_keys, 0);

static const key_t_ top_keys[] = {
    KEY_STRING("listen", CFG(listen), "127.0.0.1:8080", check_listen),
    KEY_INT("workers", CFG(workers), 4, 1, 256),
    KEY_OBJECT("limits", limits_table),
    KEY_OBJECT("redis", redis_table),
    KEY_OBJECT("log", log_table),
    KEY_STRING("openapi_file", CFG(openapi_file), "api/openapi.yaml", check_nonempty),
    KEY_STRING("docs_file", CFG(docs_file), "build/docs/index.html", check_nonempty),
    KEY_ARRAY("clusters", CFG(clusters), CFG(nclusters), 64, cluster_table),
    KEY_OBJECT("auth", auth_table),
    KEY_OBJECT("rate_limits", rate_table),
    KEY_OBJECT("cache", cache_table),
    KEY_OBJECT("streams", streams_table),
    KEY_ARRAY("sidecars", CFG(sidecars), CFG(nsidecars), 64, sidecar_table),
    KEY_OBJECT("tls", tls_table),
    KEY_OBJECT("insights", insights_table),
    KEY_OBJECT("cors", cors_table),
    KEY_OBJECT("reconciler", reconciler_table),
};
static const table_t top_table = TABLE(top_keys, sizeof(fg_config_t));

/* ---- the walker -------------------------------------------------------- */

typedef struct {
    const char *origin;
    fg_buf_t *errs;
    int nerrs;
} ctx_t;

/* Appends "ORIGIN: PATH: why (got VALUE)"; the value is shown compact and cut at 60 bytes. */
static void problem(ctx_t *c, const char *path, const char *why, const json_t *got) {
    c->nerrs++;
    fg_buf_appendf(c->errs, "%s: %s: %s", c->origin, path, why);
    if (got) {
        char *shown = fg_json_dumps(got, NULL);
        if (strlen(shown) > 60)
            fg_buf_appendf(c->errs, " (got %.57s...)", shown);
        else
            fg_buf_appendf(c->errs, " (got %s)", shown);
        free(shown);
    }
    fg_buf_append(c->errs, "\n", 1);
}

static const char *kind_name(kind_t k) {
    static const char *const names[] = {"a string",  "an integer", "true or false",
                                        "an object", "an array",   "an array of strings"};
    return names[k];
}

static void apply_defaults(const table_t *t, char *base) {
    for (size_t i = 0; i < t->nkeys; i++) {
        const key_t_ *k = &t->keys[i];
        switch (k->kind) {
            case K_STRING:
                *(char **)(base + k->offset) = k->def_string ? fg_xstrdup(k->def_string) : NULL;
                break;
            case K_INT:
                *(int64_t *)(base + k->offset) = k->def_int;
                break;
            case K_BOOL:
                *(bool *)(base + k->offset) = k->def_int != 0;
                break;
            case K_OBJECT:
                apply_defaults(k->sub, base);
                break;
            case K_ARRAY:
            case K_STRINGS:
                break;
        }
    }
}

static void walk_object(ctx_t *c, const table_t *t, const json_t *obj, const char *prefix,
                        char *base);

/* An array of min..max strings, each passing the row's validator. */
static void set_strings(ctx_t *c, const key_t_ *k, const json_t *v, const char *path, char *base) {
    size_t n = json_array_size(v);
    if ((int64_t)n < k->min || (int64_t)n > k->max) {
        char why[96];
        snprintf(why, sizeof why, "must have from %lld to %lld entries", (long long)k->min,
                 (long long)k->max);
        problem(c, path, why, v);
        return;
    }
    char **list = fg_xcalloc(n ? n : 1, sizeof *list);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        char ipath[256];
        snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
        const json_t *e = json_array_get(v, i);
        const char *why = NULL;
        if (!json_is_string(e))
            why = "must be a string";
        else if (strlen(json_string_value(e)) != json_string_length(e))
            why = "must not contain NUL bytes";
        else if (k->check)
            why = k->check(json_string_value(e));
        if (why) {
            problem(c, ipath, why, e);
            continue;
        }
        list[kept++] = fg_xstrdup(json_string_value(e));
    }
    char ***field = (char ***)(base + k->offset);
    for (size_t i = 0; *field && i < *(size_t *)(base + k->count_offset); i++)
        free((*field)[i]);
    free(*field);
    *field = list;
    *(size_t *)(base + k->count_offset) = kept;
}

static void set_value(ctx_t *c, const key_t_ *k, const json_t *v, const char *path, char *base) {
    bool type_ok =
        (k->kind == K_STRING && json_is_string(v)) || (k->kind == K_INT && json_is_integer(v)) ||
        (k->kind == K_BOOL && json_is_boolean(v)) || (k->kind == K_OBJECT && json_is_object(v)) ||
        ((k->kind == K_ARRAY || k->kind == K_STRINGS) && json_is_array(v));
    if (!type_ok) {
        char why[64];
        snprintf(why, sizeof why, "must be %s", kind_name(k->kind));
        problem(c, path, why, v);
        return;
    }
    if (k->kind == K_STRING) {
        const char *s = json_string_value(v);
        if (strlen(s) != json_string_length(v)) {
            problem(c, path, "must not contain NUL bytes", NULL);
            return;
        }
        const char *why = k->check ? k->check(s) : NULL;
        if (why) {
            problem(c, path, why, v);
            return;
        }
        char **field = (char **)(base + k->offset);
        free(*field);
        *field = fg_xstrdup(s);
    } else if (k->kind == K_INT) {
        json_int_t n = json_integer_value(v);
        if (n < k->min || n > k->max) {
            char why[96];
            snprintf(why, sizeof why, "must be from %lld to %lld", (long long)k->min,
                     (long long)k->max);
            problem(c, path, why, v);
            return;
        }
        *(int64_t *)(base + k->offset) = n;
    } else if (k->kind == K_BOOL) {
        *(bool *)(base + k->offset) = json_is_true(v);
    } else if (k->kind == K_STRINGS) {
        set_strings(c, k, v, path, base);
    } else if (k->kind == K_OBJECT) {
        walk_object(c, k->sub, v, path, base);
    } else {
        size_t n = json_array_size(v);
        if ((int64_t)n > k->max) {
            char why[64];
            snprintf(why, sizeof why, "at most %lld entries", (long long)k->max);
            problem(c, path, why, NULL);
            return;
        }
        char *elems = fg_xcalloc(n ? n : 1, k->sub->elem_size);
        *(char **)(base + k->offset) = elems;
        *(size_t *)(base + k->count_offset) = n;
        for (size_t i = 0; i < n; i++) {
            char ipath[256];
            snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
            char *elem = elems + i * k->sub->elem_size;
            apply_defaults(k->sub, elem);
            const json_t *e = json_array_get(v, i);
            if (!json_is_object(e)) {
                problem(c, ipath, "must be an object", e);
                continue;
            }
            walk_object(c, k->sub, e, ipath, elem);
        }
    }
}

static void walk_object(ctx_t *c, const table_t *t, const json_t *obj, const char *prefix,
                        char *base) {
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)obj, name, v) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        const key_t_ *k = NULL;
        for (size_t i = 0; i < t->nkeys && k == NULL; i++) {
            if (strcmp(t->keys[i].name, name) == 0)
                k = &t->keys[i];
        }
        if (k == NULL) {
            problem(c, path, "unknown key", NULL);
            continue;
        }
        set_value(c, k, v, path, base);
    }
    for (size_t i = 0; i < t->nkeys; i++) {
        if (t->keys[i].required && json_object_get(obj, t->keys[i].name) == NULL) {
            char path[256];
            snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", t->keys[i].name);
            problem(c, path, "is required", NULL);
        }
    }
}

/* Rules that span keys. */
static void check_sidecars(ctx_t *c, const fg_config_t *cfg) {
    for (size_t i = 0; i < cfg->nsidecars; i++)
        for (size_t j = 0; j < i; j++)
            if (cfg->sidecars[i].name && cfg->sidecars[j].name &&
                strcmp(cfg->sidecars[i].name, cfg->sidecars[j].name) == 0) {
                char path[64];
                snprintf(path, sizeof path, "sidecars[%zu].name", i);
                problem(c, path, "is the name of another sidecar", NULL);
            }
}

const fg_sidecar_conf_t *fg_config_sidecar(const fg_config_t *c, const char *name) {
    for (size_t i = 0; name && i < c->nsidecars; i++)
        if (strcmp(c->sidecars[i].name, name) == 0)
            return &c->sidecars[i];
    return NULL;
}

static void check_clusters(ctx_t *c, const fg_config_t *cfg) {
    for (size_t i = 0; i < cfg->nclusters; i++) {
        const fg_cluster_conf_t *cl = &cfg->clusters[i];
        char path[64];
        for (size_t j = 0; j < i; j++) {
            if (cl->name && cfg->clusters[j].name && strcmp(cl->name, cfg->clusters[j].name) == 0) {
                json_t *shown = json_string(cl->name);
                snprintf(path, sizeof path, "clusters[%zu].name", i);
                problem(c, path, "duplicate cluster name", shown);
                json_decref(shown);
            }
        }
        if ((cl->client_cert_file == NULL) != (cl->client_key_file == NULL)) {
            snprintf(path, sizeof path, "clusters[%zu].%s", i,
                     cl->client_cert_file ? "client_key_file" : "client_cert_file");
            problem(c, path, "client_cert_file and client_key_file go together", NULL);
        }
        bool plain = cl->url && strncmp(cl->url, "http://", 7) == 0;
        if (plain && cl->token_file) {
            snprintf(path, sizeof path, "clusters[%zu].token_file", i);
            problem(c, path, "a bearer token is never sent over plain http; use an https url",
                    NULL);
        }
        if (!plain && cl->url && cl->token_file == NULL && cl->client_cert_file == NULL) {
            snprintf(path, sizeof path, "clusters[%zu]", i);
            problem(c, path,
                    "needs credentials: token_file or client_cert_file and client_key_file", NULL);
        }
    }
}

static void check_auth(ctx_t *c, const fg_config_t *cfg) {
    const fg_auth_conf_t *a = &cfg->auth;
    bool has_keys = a->nkeys > 0 || a->jwks_file != NULL;
    if (has_keys && a->issuer == NULL)
        problem(c, "auth.issuer", "is required when keys are configured (tokens' iss is checked)",
                NULL);
    if (has_keys && a->audience == NULL)
        problem(c, "auth.audience", "is required when keys are configured (tokens' aud is checked)",
                NULL);
    size_t nodefault = 0;
    for (size_t i = 0; i < a->nkeys; i++) {
        char path[64];
        if (a->keys[i].kid == NULL && ++nodefault > 1) {
            snprintf(path, sizeof path, "auth.keys[%zu].kid", i);
            problem(c, path, "only one key may go without a kid", NULL);
        }
        for (size_t j = 0; j < i && a->keys[i].kid; j++) {
            if (a->keys[j].kid && strcmp(a->keys[i].kid, a->keys[j].kid) == 0) {
                json_t *shown = json_string(a->keys[i].kid);
                snprintf(path, sizeof path, "auth.keys[%zu].kid", i);
                problem(c, path, "duplicate kid", shown);
                json_decref(shown);
            }
        }
    }
}

/* The TLS listener needs its certificate and key together, on another address than listen. */
static void check_tls(ctx_t *c, fg_config_t *cfg) {
    fg_tls_conf_t *t = &cfg->tls;
    if ((t->cert_file == NULL) != (t->key_file == NULL)) {
        problem(c, t->cert_file ? "tls.key_file" : "tls.cert_file",
                "tls.cert_file and tls.key_file go together", NULL);
        return;
    }
    if (t->cert_file == NULL || c->nerrs > 0)
        return;
    if (fg_parse_hostport(t->listen, &t->listen_host, &t->listen_port) != FG_OK)
        problem(c, "tls.listen", "not HOST:PORT", NULL);
    else if (strcmp(t->listen, cfg->listen) == 0)
        problem(c, "tls.listen", "must differ from listen", NULL);
}

int fg_config_load_text(const char *origin, const char *text, size_t len, fg_config_t **out,
                        fg_buf_t *errs) {
    ctx_t c = {origin, errs, 0};
    char jerr[256];
    json_t *root = NULL;
    fg_config_t *cfg = fg_xcalloc(1, sizeof *cfg);
    apply_defaults(&top_table, (char *)cfg);

    if (fg_json_load(text, len, &root, jerr, sizeof jerr) != FG_OK) {
        fg_buf_appendf(errs, "%s: %s\n", origin, jerr);
        c.nerrs++;
        goto out;
    }
    if (!json_is_object(root)) {
        fg_buf_appendf(errs, "%s: the configuration must be a JSON object\n", origin);
        c.nerrs++;
        goto out;
    }
    walk_object(&c, &top_table, root, "", (char *)cfg);
    check_clusters(&c, cfg);
    check_sidecars(&c, cfg);
    check_auth(&c, cfg);
    if (c.nerrs == 0 &&
        fg_parse_hostport(cfg->listen, &cfg->listen_host, &cfg->listen_port) != FG_OK)
        problem(&c, "listen", "not HOST:PORT", NULL);
    check_tls(&c, cfg);
out:
    json_decref(root);
    if (c.nerrs > 0) {
        fg_config_free(cfg);
        return FG_EINVAL;
    }
    *out = cfg;
    return FG_OK;
}

int fg_config_load(const char *path, fg_config_t **out, fg_buf_t *errs) {
    char *text = NULL;
    size_t len;
    int rc = fg_read_file(path, CONFIG_MAX_BYTES, &text, &len);
    if (rc == FG_ENOENT) {
        fg_buf_appendf(errs, "%s: cannot open the file\n", path);
        return FG_EINVAL;
    }
    if (rc == FG_ETOOBIG) {
        fg_buf_appendf(errs, "%s: larger than %u bytes\n", path, CONFIG_MAX_BYTES);
        return FG_EINVAL;
    }
    if (rc != FG_OK) {
        fg_buf_appendf(errs, "%s: cannot read the file\n", path);
        return FG_EINVAL;
    }
    rc = fg_config_load_text(path, text, len, out, errs);
    free(text);
    return rc;
}

static void free_strings(const table_t *t, char *base) {
    for (size_t i = 0; i < t->nkeys; i++) {
        const key_t_ *k = &t->keys[i];
        if (k->kind == K_STRING) {
            free(*(char **)(base + k->offset));
        } else if (k->kind == K_OBJECT) {
            free_strings(k->sub, base);
        } else if (k->kind == K_STRINGS) {
            char **list = *(char ***)(base + k->offset);
            size_t n = *(size_t *)(base + k->count_offset);
            for (size_t e = 0; e < n; e++)
                free(list[e]);
            free(list);
        } else if (k->kind == K_ARRAY) {
            char *elems = *(char **)(base + k->offset);
            size_t n = *(size_t *)(base + k->count_offset);
            for (size_t e = 0; e < n; e++)
                free_strings(k->sub, elems + e * k->sub->elem_size);
            free(elems);
        }
    }
}

void fg_config_free(fg_config_t *c) {
    if (c == NULL)
        return;
    free_strings(&top_table, (char *)c);
    free(c->listen_host);
    free(c->tls.listen_host);
    free(c);
}
