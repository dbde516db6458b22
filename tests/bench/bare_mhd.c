/* tests/bench/bare_mhd.c: the reference of bench-callgrind (issue 18: "instructions per GET
 * <= 2x the bare server's"): a libmicrohttpd server with fleetgate's daemon flags and memory
 * pool, answering every GET with a fixed body of the given size and nothing else: no routing,
 * no token, no rate limit, no log. It answers on the access handler's second call, as fleetgate
 * does (keep-alive), with a response made once.
 *
 *   build/bench/bare_mhd PORT BODY_BYTES WORKERS POOL_BYTES   (127.0.0.1 only; runs until SIGTERM
 *   or SIGINT) */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct MHD_Response *answer;

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    static int first;
    if (*con_cls == NULL) {
        *con_cls = &first;
        return MHD_YES;
    }
    *upload_size = 0;
    return MHD_queue_response(conn, MHD_HTTP_OK, answer);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: bare_mhd PORT BODY_BYTES WORKERS POOL_BYTES\n");
        return 2;
    }
    unsigned port = (unsigned)strtoul(argv[1], NULL, 10);
    size_t size = strtoul(argv[2], NULL, 10);
    unsigned workers = (unsigned)strtoul(argv[3], NULL, 10);
    size_t pool = strtoul(argv[4], NULL, 10);
    char *body = malloc(size + 1);
    memset(body, 'x', size);
    answer = MHD_create_response_from_buffer(size, body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(answer, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG,
        (uint16_t)port, NULL, NULL, on_access, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
        MHD_OPTION_THREAD_POOL_SIZE, workers > 1 ? workers : 0u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "bare_mhd: cannot listen on %u\n", port);
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    while (!stop)
        pause();
    MHD_stop_daemon(d);
    MHD_destroy_response(answer);
    free(body);
    return 0;
}
