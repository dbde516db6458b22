/* core: what every other module stands on.
 *
 * - status codes (FG_OK and the FG_E* failures every function returns),
 * - the fg_x* allocation family (out of memory aborts, so call sites carry no NULL checks),
 * - fg_buf_t, a bounded growable byte buffer,
 * - the fg_parse_* family (the only way fleetgate turns text into numbers),
 * - JSON helpers (bounded, duplicate-rejecting loads of untrusted input),
 * - logging (one JSON line per event, with the request id when there is one),
 * - the metrics registry (Prometheus text exposition),
 * - configuration (one table of keys; see src/core/config.c).
 */
#ifndef FLEETGATE_CORE_H
#define FLEETGATE_CORE_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>

#define FG_VERSION "0.1.0"

/* ---- status codes ------------------------------------------------------ */

/* Every fallible function returns one of these; results go through out-parameters. */
enum {
    FG_OK = 0,
    FG_ERR = -1,      /* generic failure; the detail was logged or written to an error buffer */
    FG_EINVAL = -2,   /* input does not satisfy the documented rules */
    FG_ENOENT = -3,   /* the thing looked up is absent */
    FG_ETOOBIG = -4,  /* a bound was hit (buffer, body, depth) */
    FG_EIO = -5,      /* a system call or a peer failed */
    FG_ETIMEOUT = -6, /* a deadline passed */
    FG_EAGAIN = -7,   /* not now: nothing was taken, try again later (backpressure) */
};

/* ---- memory ------------------------------------------------------------ */

/* Allocate or abort: out of memory is not a recoverable condition for a gateway. */
void *fg_xmalloc(size_t size);
void *fg_xcalloc(size_t nmemb, size_t size);
void *fg_xrealloc(void *ptr, size_t size);
char *fg_xstrdup(const char *s);
/* Copies exactly n bytes of s and adds a NUL: unlike strndup it does not stop at a NUL in s, so
 * s must have n readable bytes (a slice of a buffer, not a C string shorter than n). */
char *fg_xstrndup(const char *s, size_t n);
/* printf into a new string; the caller frees it. */
char *fg_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- bounded buffer ---------------------------------------------------- */

/* A growable byte buffer that never grows past `max`. Always NUL-terminated after a
 * successful append, so `data` can be read as a C string when only text was appended. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
} fg_buf_t;

void fg_buf_init(fg_buf_t *b, size_t max);
/* Returns FG_OK, or FG_ETOOBIG (buffer unchanged) when len + n would exceed max. */
int fg_buf_append(fg_buf_t *b, const void *data, size_t n);
int fg_buf_appendf(fg_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int fg_buf_vappendf(fg_buf_t *b, const char *fmt, va_list ap);
/* Makes room for extra more bytes (and the NUL) at once: FG_OK, or FG_ETOOBIG past max. */
int fg_buf_reserve(fg_buf_t *b, size_t extra);
/* The length (1-4) of the valid UTF-8 character at s (n bytes available), or 0 when the byte
 * at s does not start one (stray continuation, overlong form, surrogate, truncated). */
size_t fg_utf8_len(const char *s, size_t n);
/* Appends s as the inside of a JSON string (quotes not included), escaping as RFC 8259 asks;
 * a byte that is not UTF-8 is written as the text \xNN, so the result is always valid JSON. */
int fg_buf_append_json_escaped(fg_buf_t *b, const char *s, size_t n);
/* Appends s as the inside of a JSON string the way fg_json_string_clean shows it (bytes that are
 * not UTF-8, and NUL, as the text \xNN), at most max bytes of shown text, cut at a character. */
int fg_buf_append_json_clean(fg_buf_t *b, const char *s, size_t n, size_t max);
/* One character of s as shown in logs and problems: itself when it is UTF-8 and not NUL, else the
 * text \xNN written into hex. Sets *piece and *len; returns how many bytes of s it took. */
size_t fg_utf8_shown(const char *s, size_t n, char hex[5], const char **piece, size_t *len);
void fg_buf_reset(fg_buf_t *b);
/* Hands the bytes to the caller (who frees them with free()) and leaves b empty. */
char *fg_buf_steal(fg_buf_t *b, size_t *len_out);
void fg_buf_free(fg_buf_t *b);

/* ---- parsing ----------------------------------------------------------- */

/* Parse a whole decimal integer in [min, max]. No sign for unsigned use, no spaces, no
 * trailing garbage. FG_OK and *out set, or FG_EINVAL (not a number) / FG_ETOOBIG (range). */
int fg_parse_int64(const char *s, size_t len, int64_t min, int64_t max, int64_t *out);
/* An RFC 3339 date-time ("2026-11-22T14:03:07Z", "...07.123+01:00"; T or t, Z or z) into Unix
 * ms (a fraction past ms is dropped). FG_OK and *out set, or FG_EINVAL (not such a time, or a
 * field out of range: month 13, hour 24, 31 April). Years 1970..9999. */
int fg_parse_time_ms(const char *s, size_t len, int64_t *out);
/* "host:port" or "[v6]:port" into host (a new string the caller frees) and port. */
int fg_parse_hostport(const char *s, char **host_out, uint16_t *port_out);
/* DNS-1123 label: lowercase alnum and '-', starts and ends alnum, 1..63 chars. */
bool fg_is_dns1123_label(const char *s, size_t len);
/* Whether s[0..len) is 1..max characters of a DNS-1123 subdomain's alphabet [a-z0-9.-] (where
 * - and . stand is not checked). */
bool fg_is_dns1123_chars(const char *s, size_t len, size_t max);

/* ---- JSON -------------------------------------------------------------- */

#define FG_JSON_MAX_DEPTH 64

/* Load untrusted JSON: duplicate keys refused, nesting deeper than FG_JSON_MAX_DEPTH refused.
 * On failure returns FG_EINVAL and writes "line L, column C: why" into err (may be NULL).
 * On success *out is a new reference the caller releases with json_decref. */
int fg_json_load(const char *data, size_t len, json_t **out, char *err, size_t errlen);
/* A JSON string (a new reference) of n bytes at s that never fails: bytes that are not UTF-8
 * (and NUL) become the text \xNN, and a result longer than max bytes is cut at a character
 * boundary, with *cut (may be NULL) set to true. For values from clients put into answers and
 * log lines, where json_string() would return NULL and the field would silently go missing. */
json_t *fg_json_string_clean(const char *s, size_t n, size_t max, bool *cut);
/* Serialise compactly; the caller frees the string. Never fails (aborts on OOM). */
char *fg_json_dumps(const json_t *j, size_t *len_out);
/* A JSON merge patch (RFC 7396) of target (borrowed, may be NULL): a new value; objects merge
 * recursively, null removes a member, anything else (arrays too) replaces. */
json_t *fg_json_merge_patch(const json_t *target, const json_t *patch);
/* Scanning JSON text without parsing it (to find or drop a member before the parse). Both
 * return an index at most n. fg_json_scan_value: the index just after the value that starts at
 * s[i] (a string, an object or array with what they nest, or a scalar up to the next , } or ]);
 * strings and nesting are followed, nothing is validated. fg_json_scan_ws: the first index at or
 * after i that is not JSON whitespace. */
size_t fg_json_scan_value(const char *s, size_t n, size_t i);
size_t fg_json_scan_ws(const char *s, size_t n, size_t i);
/* The JSON type of a value, as error texts name it: "object", "array", "string", "integer",
 * "number" (a non-integer), "boolean" or "null"; "nothing" for NULL. A static string. */
const char *fg_json_type_name(const json_t *j);

/* ---- logging ----------------------------------------------------------- */

typedef enum { FG_LOG_DEBUG = 0, FG_LOG_INFO, FG_LOG_WARN, FG_LOG_ERROR } fg_log_level_t;

void fg_log_set_level(fg_log_level_t level);
int fg_log_level_parse(const char *s, fg_log_level_t *out);
bool fg_log_enabled(fg_log_level_t level);
/* One JSON line on stderr: {"ts","level","msg"[,"requestId"]}. request_id may be NULL. */
void fg_log(fg_log_level_t level, const char *request_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes a prepared JSON object as one line (used by the access log); steals nothing. */
void fg_log_json(const json_t *line);
/* Hands one complete line (ending in a newline) to the batch written by a thread of its own every
 * 50 ms or sooner under load: for the access log, so a request pays a copy, not a write(2). A
 * line that finds the batch full (1 MiB waiting) is dropped and counted. Thread-safe. */
void fg_log_batched(const char *line, size_t len);
/* Writes what the batch holds now (drain, SIGTERM, SIGHUP; also at exit). */
void fg_log_flush(void);
/* Lines fg_log_batched dropped since start. */
uint64_t fg_log_dropped(void);

#define FG_LOG(level, rid, ...)                                                                    \
    do {                                                                                           \
        if (fg_log_enabled(level))                                                                 \
            fg_log(level, rid, __VA_ARGS__);                                                       \
    } while (0)

/* ---- time -------------------------------------------------------------- */

/* Monotonic clock in nanoseconds (for durations), and wall clock in milliseconds. */
uint64_t fg_now_ns(void);
int64_t fg_wall_ms(void);
/* Fills buf with an RFC 3339 UTC timestamp with milliseconds ("2026-11-22T15:04:05.123Z"). */
void fg_format_time_ms(int64_t wall_ms, char *buf, size_t buflen);

/* ---- randomness -------------------------------------------------------- */

/* Fills buf with bytes from the kernel's CSPRNG; returns FG_OK or FG_EIO. */
int fg_random_bytes(void *buf, size_t len);

/* base64url (RFC 4648 §5) without padding: JWT parts, JWK members, list cursors. */
#define FG_B64URL_LEN(n) (((n) / 3) * 4 + ((n) % 3 ? (n) % 3 + 1 : 0))
/* Writes FG_B64URL_LEN(n) characters and a NUL into out; returns the length. */
size_t fg_b64url_encode(const void *in, size_t n, char *out);
/* Strict decoding (alphabet only, canonical trailing bits) into a new buffer the caller frees.
 * FG_OK or FG_EINVAL. */
int fg_b64url_decode(const char *in, size_t len, unsigned char **out, size_t *out_len);

/* A fast 64-bit hash of bytes, not cryptographic (ETags, cache keys); two seeds give 128 bits. */
uint64_t fg_hash64(const void *data, size_t n, uint64_t seed);

/* Writes v in decimal ("%lld") and a NUL into out (FG_INT_CHARS bytes); returns the length.
 * For header values and keys on the hot path, where snprintf costs a few hundred instructions. */
#define FG_INT_CHARS 21
size_t fg_format_i64(int64_t v, char *out);

/* Embeds a file of the source tree (a Lua script of cache/) as the NUL-terminated constant
 * `sym`, with the assembler's .incbin; the Makefile makes the object depend on the file. */
#define FG_EMBED_FILE(sym, file)                                                                   \
    __asm__(".section .rodata\n"                                                                   \
            ".global " #sym "\n"                                                                   \
            ".type " #sym ", @object\n"                                                            \
            ".balign 16\n" #sym ":\n"                                                              \
            ".incbin \"" file "\"\n"                                                               \
            ".byte 0\n"                                                                            \
            ".size " #sym ", . - " #sym "\n"                                                       \
            ".previous\n");                                                                        \
    extern const char sym[]

/* ---- metrics ----------------------------------------------------------- */

/* A registry of metric families. Series are created on first use with their label values;
 * all calls are thread-safe. Label values are copied. */
typedef struct fg_metric fg_metric_t;

typedef enum { FG_METRIC_COUNTER, FG_METRIC_GAUGE, FG_METRIC_HISTOGRAM } fg_metric_type_t;

/* Registers a family (at start-up, before threads). label_names is a NULL-terminated list
 * (may be NULL for none). Histogram buckets are upper bounds in seconds, ascending. The
 * registry owns the family; the returned pointer lives until fg_metrics_reset(). */
fg_metric_t *fg_metrics_register(const char *name, const char *help, fg_metric_type_t type,
                                 const char *const *label_names);
/* label_values has as many entries as the family's label names. */
void fg_metric_add(fg_metric_t *m, const char *const *label_values, double delta);
void fg_metric_set(fg_metric_t *m, const char *const *label_values, double value);
void fg_metric_observe(fg_metric_t *m, const char *const *label_values, double seconds);
/* Renders every family in Prometheus text format 0.0.4 into b. */
int fg_metrics_render(fg_buf_t *b);
/* Frees every family (tests and shutdown). */
void fg_metrics_reset(void);

/* ---- configuration ----------------------------------------------------- */

typedef struct {
    char *name;   /* DNS-1123 label, unique */
    char *region; /* free text, e.g. "us-east-1" */
    char *zone;   /* free text, e.g. "us-east-1a" */
    char *url;    /* API server base URL, http or https */
    char *token_file;
    char *client_cert_file;
    char *client_key_file;
    char *ca_file;
    bool insecure_skip_tls_verify;
    char **labels; /* "key=value", for placement's clusterSelector (fed/) */
    size_t nlabels;
} fg_cluster_conf_t;

/* A managed sidecar of the catalogue (sidecars[]): a container an app asks for by name
 * (spec.sidecars) and fleetgate injects into each of its pods. */
typedef struct {
    char *name; /* DNS-1123 label, unique in the catalogue */
    char *image;
    char *cpu, *memory;             /* requests (quantity strings); NULL: none */
    char *cpu_limit, *memory_limit; /* limits; NULL: none */
    char **ports;                   /* "PORT" or "NAME:PORT" */
    size_t nports;
    char **env; /* "NAME=value" */
    size_t nenv;
} fg_sidecar_conf_t;

/* A JWT verification key from a PEM file (auth.keys[]). */
typedef struct {
    char *kid;      /* matched against the token's kid; NULL: the key for tokens without one */
    char *pem_file; /* a PEM public key (RSA or EC P-256/P-384) */
    char **algs;    /* the algorithms this key accepts: RS256 RS384 RS512 ES256 ES384 */
    size_t nalgs;
} fg_auth_key_conf_t;

/* auth: who may call (see README.md "Authentication and authorization"). */
typedef struct {
    char *issuer;   /* the required iss; required when keys are configured */
    char *audience; /* a value the token's aud must hold; required when keys are configured */
    int64_t leeway_s;
    fg_auth_key_conf_t *keys;
    size_t nkeys;
    char *jwks_file; /* optional JWKS (RFC 7517): keys picked by kid */
    char *projects_claim;
    char *groups_claim;
    char *admin_group;
    int64_t token_cache_entries;
    char *audit_log; /* a path, or "-" for stdout */
    bool metrics_public;
} fg_auth_conf_t;

/* reconciler: how fast it rolls apps to a changed sidecar catalogue or moves them off clusters
 * whose labels or zone no longer admit them (README.md "Reloading the config"). */
typedef struct {
    int64_t rollout_max_apps;   /* apps rewritten at most in each window */
    int64_t rollout_interval_s; /* the window */
} fg_reconciler_conf_t;

/* streams: long-lived log and exec streams (README.md "Debugging: pod logs and exec"). */
typedef struct {
    int64_t buffer_kib;          /* per log stream, between the cluster and the client */
    int64_t stall_timeout_s;     /* a client reading nothing this long while it is full: dropped */
    int64_t exec_idle_timeout_s; /* an exec with no frame either way this long is ended */
    int64_t exec_max_session_s;  /* the longest an exec lives */
} fg_streams_conf_t;

/* tls: the HTTPS listener (README.md "kubectl through fleetgate"); off when cert_file is NULL. */
typedef struct {
    char *listen; /* "HOST:PORT"; split into the two fields below when cert_file is set */
    char *listen_host;
    uint16_t listen_port;
    char *cert_file, *key_file; /* PEM: the certificate (chain) and its private key */
    char *ca_file;              /* the CA a kubeconfig names; NULL: the client's own CAs */
    char *advertise_url;        /* the listener's URL in a kubeconfig; NULL: https://listen */
} fg_tls_conf_t;
/* insights: the events timeline each project keeps in Redis (README.md "Insights"); every bound
 * holds per project. */
typedef struct {
    int64_t events_max_age_s;        /* an event not seen again for this long is dropped */
    int64_t events_max_per_project;  /* past this, the oldest events go */
    int64_t changes_max_per_project; /* entries of a project's change stream (about) */
    int64_t changes_keepalive_s;     /* a change stream's keep-alive comment period */
    int64_t history_max_age_s;       /* a history entry older than this is dropped */
    int64_t history_max_per_project; /* past this, the oldest history entries go */
} fg_insights_conf_t;

/* rate_limits: GCRA limits per principal and per project (see README.md "Rate limits"). */
typedef struct {
    bool enabled;
    int64_t read_per_minute, read_burst;
    int64_t write_per_minute, write_burst;
    int64_t project_read_per_minute, project_read_burst;
    int64_t project_write_per_minute, project_write_burst;
    int64_t streams_per_principal;
    int64_t stream_lease_s;
    int64_t list_item_cost_milli; /* what one listed item costs, in thousandths of a read */
    int64_t redis_timeout_ms;
    /* refused calls (401, 403) one client address may cause before its calls are refused with
     * 429 without a look at their token (per process) */
    int64_t refusals_per_minute, refusal_burst;
} fg_rate_conf_t;

/* cache: the informers that keep Redis in step with the clusters (README.md "The cache"). */
typedef struct {
    bool enabled;                  /* run informers (when clusters are configured) */
    int64_t lease_ms;              /* informer lease per (cluster, resource) */
    int64_t list_page_size;        /* LIST limit */
    int64_t watch_timeout_s;       /* WATCH timeoutSeconds */
    int64_t resync_backoff_max_ms; /* cap of the exponential backoff after errors */
    int64_t redis_timeout_ms;      /* the writer's connect and command timeout */
    char *replica_id;              /* lease holder id; NULL: hostname-pid-random */
    int64_t mirror_mb;             /* process-local copies of pods for GETs; 0: off */
} fg_cache_conf_t;

typedef struct {
    char *listen; /* "HOST:PORT" as configured; split into the two fields below */
    char *listen_host;
    uint16_t listen_port;
    int64_t workers;
    int64_t max_body_bytes;
    int64_t max_connections;
    int64_t connection_timeout_s;
    int64_t header_timeout_s;           /* to receive a whole request head */
    int64_t body_timeout_s;             /* to receive a whole request body */
    int64_t max_connections_per_client; /* per client address; 0: no cap */
    int64_t drain_timeout_s;
    char *redis_url;
    int64_t redis_call_timeout_ms; /* the read APIs' deadline for one Redis call */
    char *log_level;
    bool access_log;
    char *openapi_file;
    char *docs_file;
    fg_cluster_conf_t *clusters;
    size_t nclusters;
    fg_auth_conf_t auth;
    fg_rate_conf_t rate;
    fg_cache_conf_t cache;
    fg_streams_conf_t streams;
    fg_sidecar_conf_t *sidecars; /* the managed sidecar catalogue (sidecars[]) */
    size_t nsidecars;
    fg_tls_conf_t tls;
    fg_insights_conf_t insights;
    /* cors: the browser origins allowed to call the API (README.md "CORS") */
    char **cors_allowed_origins;
    size_t ncors_allowed_origins;
    int64_t cors_max_age_s;
    fg_reconciler_conf_t reconciler;
} fg_config_t;

/* The catalogue entry of a sidecar by name, or NULL. */
const fg_sidecar_conf_t *fg_config_sidecar(const fg_config_t *c, const char *name);

/* Loads and validates a configuration file. Returns FG_OK with *out set (free with
 * fg_config_free), or FG_EINVAL with one problem per line in errs, each
 * "PATH: KEY: what is wrong (got VALUE)". File values that are secrets are never echoed. */
int fg_config_load(const char *path, fg_config_t **out, fg_buf_t *errs);
/* The same, from a JSON text already in memory; `origin` names it in messages. */
int fg_config_load_text(const char *origin, const char *text, size_t len, fg_config_t **out,
                        fg_buf_t *errs);
void fg_config_free(fg_config_t *c);

/* ---- the live configuration: what SIGHUP changes (core/live.c) ---------------------------
 * A snapshot is a whole configuration: the running one with the file's sidecar catalogue and
 * its clusters' labels and zones put in. Reference counted and swapped at once, so a request
 * keeps the snapshot it took. Everything else in the file needs a restart. */
typedef struct fg_live fg_live_t;
/* The first snapshot borrows boot (which must outlive fg_live_stop); path is read on reloads.
 * FG_OK, or FG_EINVAL (errs said why). */
int fg_live_start(const char *path, const fg_config_t *boot, fg_buf_t *errs);
void fg_live_stop(void);
/* The current snapshot (a reference: fg_live_release it), NULL before fg_live_start. */
fg_live_t *fg_live_acquire(void);
void fg_live_release(fg_live_t *l);
const fg_config_t *fg_live_config(const fg_live_t *l);
/* 1 for the start's, then one more each time a reload changed something (0 for NULL). */
uint64_t fg_live_generation(const fg_live_t *l);
/* The snapshot's cluster of that name, or NULL. */
const fg_cluster_conf_t *fg_live_cluster(const fg_live_t *l, const char *name);
/* Reads the file again and validates it whole. FG_EINVAL with errs (one problem a line, naming
 * the key) when it is bad: nothing changes. FG_OK otherwise: the live parts that changed are
 * applied (named in applied, "sidecars, clusters[c2].labels"; empty: none changed) and the keys
 * that differ but need a restart are named in restart (not applied). */
int fg_live_reload(fg_buf_t *errs, fg_buf_t *applied, fg_buf_t *restart);

/* ---- small file helpers ------------------------------------------------ */

/* Reads a whole file of at most max bytes into a new NUL-terminated buffer. Returns FG_OK,
 * FG_ENOENT (cannot open), FG_ETOOBIG, or FG_EIO. The caller frees *out. */
int fg_read_file(const char *path, size_t max, char **out, size_t *len_out);

/* ---- prepared text: made once, shared by reference (core/prepared.c) --------------------
 * An answer's body made once from a cached object (with a tag: its ETag value), held by the cache
 * and by each answer still sending it; freed when the last holder lets go. Immutable once made. */
typedef struct fg_prepared {
    atomic_uint refs;
    size_t len;
    char tag[96];
    char text[]; /* len bytes and a NUL */
} fg_prepared_t;

/* A new prepared text (one reference, the caller's) holding a copy of text and tag (cut at 95
 * bytes). Out of memory aborts. */
fg_prepared_t *fg_prepared_new(const char *text, size_t len, const char *tag);
/* Another reference to p, for the caller; returns p. */
fg_prepared_t *fg_prepared_ref(fg_prepared_t *p);
/* Lets go of one reference; the last frees p. p may be NULL. */
void fg_prepared_unref(fg_prepared_t *p);

#endif
