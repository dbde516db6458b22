/* http/mhd_answers.c: libmicrohttpd's own answers, replaced by fleetgate's problem+json.
 *
 * libmicrohttpd 0.9.75 refuses some requests before any callback of fleetgate's sees them: a
 * head past the per-connection memory pool (431, or 414 while still in the request line), a
 * request line or header line it cannot parse (400), an HTTP version it does not speak (505), a
 * bad Content-Length or chunked framing (400, 413). It has no option to change those answers:
 * each is an HTML page queued by connection.c's transmit_error_response_len(), which logs the
 * reason, builds a response and calls MHD_queue_response() through the library's PLT (checked
 * on Debian's libmicrohttpd12 0.9.75-6 build: `objdump -d` shows `call MHD_queue_response@plt`;
 * its only other caller is basic/digest auth, which fleetgate does not use).
 *
 * So fleetgate defines MHD_queue_response itself. The dynamic linker binds the library's call
 * to the executable's definition (ELF symbol interposition: the executable comes first in the
 * lookup scope), which therefore sees exactly the answers the library makes on its own, on
 * every request of a connection (also the later requests of a keep-alive connection and
 * pipelined ones, which a pre-read of the head at accept would never see), over plain TCP or
 * TLS alike. fleetgate's own answers never go through that name: they call the library's
 * function, found behind ours with dlsym(RTLD_NEXT), through fg_http_queue(). The reason of the
 * refusal comes from the library's log line, which transmit_error_response_len() writes just
 * before queueing, in the same thread (fg_http_mhd_note). fg_http_mhd_answers_init() fails the
 * server's start when the library cannot be found behind fleetgate (a static link), and the
 * tests in test_http_server ("library refusals") fail if a libmicrohttpd update stops calling
 * through the PLT.
 *
 * One wrinkle of 0.9.75: a bad Content-Length is refused while the library parses the fields,
 * and its state machine then resumes as if the head were fine, so it builds the queued answer's
 * header lines a second time (two heads, one body: the client reads garbage, with the library's
 * own page as with ours). For those rows fleetgate writes its whole answer on the socket itself
 * and refuses the queueing, which makes the library close the connection at once.
 */
#include "http_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned, struct MHD_Response *);

static queue_fn real_queue;
/* This thread just refused a queueing after writing fleetgate's answer itself: the library's
 * next message is its "failed to queue" line, which says nothing wrong. */
static _Thread_local bool sent_now;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void find_real_queue(void) {
    real_queue = (queue_fn)dlsym(RTLD_NEXT, "MHD_queue_response");
}

int fg_http_mhd_answers_init(void) {
    pthread_once(&real_once, find_real_queue);
    if (real_queue != NULL && real_queue != MHD_queue_response)
        return FG_OK;
    fg_log(FG_LOG_ERROR, NULL,
           "libmicrohttpd's MHD_queue_response is not found behind fleetgate's (is it linked "
           "statically?): its own answers could not be made problem+json");
    return FG_ERR;
}

enum MHD_Result fg_http_queue(struct MHD_Connection *conn, unsigned status,
                              struct MHD_Response *resp) {
    pthread_once(&real_once, find_real_queue);
    return real_queue(conn, status, resp);
}

/* Only libmicrohttpd reaches this name (see the top). Its answer is replaced when fleetgate
 * knows the refusal; the caller destroys its own response, as it would after queueing it. */
enum MHD_Result MHD_queue_response(struct MHD_Connection *conn, unsigned int status,
                                   struct MHD_Response *resp) {
    pthread_once(&real_once, find_real_queue);
    struct MHD_Response *ours = NULL;
    switch (status >= 400 ? fg_http_library_refusal(conn, status, &ours) : FG_REFUSAL_LIBRARY) {
        case FG_REFUSAL_QUEUE: {
            enum MHD_Result r = real_queue(conn, status, ours);
            MHD_destroy_response(ours);
            return r;
        }
        case FG_REFUSAL_SENT:
            sent_now = true;
            return MHD_NO;
        case FG_REFUSAL_LIBRARY:
        default:
            return real_queue(conn, status, resp);
    }
}

/* ---- why the library refused ------------------------------------------ */

static _Thread_local char noted[512];

bool fg_http_mhd_note(const char *msg) {
    if (sent_now && strstr(msg, "failed to queue error response") != NULL) {
        sent_now = false;
        return true;
    }
    if (strstr(msg, "HTTP response code is ") == NULL)
        return false;
    snprintf(noted, sizeof noted, "%s", msg);
    return true;
}

/* A row per refusal: the status the library answers, a phrase of its page that tells refusals
 * of one status apart (NULL: any), fleetgate's problem and detail. First match wins. */
typedef struct {
    unsigned status;
    const char *mark;
    fg_problem_t kind;
    const char *detail; /* may hold one %u: the head bound */
    bool send_now;      /* written on the socket, not queued (see the top) */
} mhd_answer_row_t;

static const mhd_answer_row_t answers[] = {
    {.status = 414,
     .kind = FG_PROBLEM_URI_TOO_LONG,
     .detail = "the request line does not fit in the %u bytes accepted for a request head"},
    {.status = 431,
     .kind = FG_PROBLEM_HEADERS_TOO_LARGE,
     .detail = "the request head is larger than the %u bytes accepted"},
    {.status = 400,
     .mark = "Host:",
     .kind = FG_PROBLEM_BAD_REQUEST,
     .detail = "an HTTP/1.1 request must have a Host header"},
    {.status = 400,
     .mark = "chunked encoding",
     .kind = FG_PROBLEM_BAD_REQUEST,
     .detail = "the body's chunked encoding is malformed"},
    {.status = 400,
     .mark = "Content-Length",
     .kind = FG_PROBLEM_BAD_REQUEST,
     .detail = "the Content-Length header is not a number",
     .send_now = true},
    {.status = 400,
     .kind = FG_PROBLEM_BAD_REQUEST,
     .detail = "the request line or a header line is not valid HTTP/1.1 syntax"},
    {.status = 413,
     .mark = "Content-Length",
     .kind = FG_PROBLEM_PAYLOAD_TOO_LARGE,
     .detail = "the Content-Length header is larger than any body fleetgate accepts",
     .send_now = true},
    {.status = 413,
     .kind = FG_PROBLEM_PAYLOAD_TOO_LARGE,
     .detail = "a chunk of the body declares a size too large to read"},
    {.status = 505,
     .mark = "too old",
     .kind = FG_PROBLEM_HTTP_VERSION_NOT_SUPPORTED,
     .detail = "HTTP versions before 1.0 are not supported; use HTTP/1.1"},
    {.status = 505,
     .kind = FG_PROBLEM_HTTP_VERSION_NOT_SUPPORTED,
     .detail = "only HTTP/1.0 and HTTP/1.1 are supported"},
    {.status = 500,
     .kind = FG_PROBLEM_INTERNAL,
     .detail = "the request could not be read (no room left for it in the connection's memory)"},
};

int fg_http_mhd_problem(unsigned status, unsigned head_max, fg_problem_t *kind, char *detail,
                        size_t len, bool *send_now) {
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        const mhd_answer_row_t *a = &answers[i];
        if (a->status != status || (a->mark && strstr(noted, a->mark) == NULL))
            continue;
        *kind = a->kind;
        *send_now = a->send_now;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(detail, len, a->detail, head_max);
#pragma GCC diagnostic pop
        noted[0] = '\0';
        return FG_OK;
    }
    return FG_ENOENT;
}
