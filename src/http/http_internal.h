/* http/http_internal.h: what the files of http/ share; not part of any public surface. */
#ifndef FLEETGATE_HTTP_INTERNAL_H
#define FLEETGATE_HTTP_INTERNAL_H

#include "fleetgate/http.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>

/* libmicrohttpd's own MHD_queue_response. fleetgate's answers go through this, never through
 * the name MHD_queue_response, which mhd_answers.c takes over for the library's own answers. */
enum MHD_Result fg_http_queue(struct MHD_Connection *conn, unsigned status,
                              struct MHD_Response *resp);

/* FG_OK when the library's own answers can be replaced in this process (mhd_answers.c found
 * libmicrohttpd's MHD_queue_response behind fleetgate's); FG_ERR with a line logged when not. */
int fg_http_mhd_answers_init(void);

/* A message of libmicrohttpd's logger. "Error processing request (HTTP response code is N
 * ('...'))" is kept for this thread, since the library queues that answer right after logging
 * it. True when the message is taken (kept, or known to say nothing wrong): not to be logged. */
bool fg_http_mhd_note(const char *msg);

/* The problem that stands for an answer libmicrohttpd was about to send by itself (status and
 * its message as noted above): FG_OK with *kind and detail (formatted into detail[len]), or
 * FG_ENOENT for an answer that is not a refusal fleetgate knows (it is sent as the library made
 * it). head_max is the bound of a request head named in the 431/414 details. *send_now: the
 * answer must be written on the socket at once rather than queued (see mhd_answers.c). */
int fg_http_mhd_problem(unsigned status, unsigned head_max, fg_problem_t *kind, char *detail,
                        size_t len, bool *send_now);

/* How fleetgate answers a refusal of the library's. */
typedef enum {
    FG_REFUSAL_LIBRARY = 0, /* not one fleetgate knows: the library's answer goes */
    FG_REFUSAL_QUEUE,       /* *out is fleetgate's answer, to queue in place of the library's */
    FG_REFUSAL_SENT,        /* fleetgate's answer is on the socket: the library must not queue */
} fg_refusal_how_t;

/* server.c: fleetgate's answer in place of the library's own refusal of a request on conn,
 * logged and counted as every answer is. With FG_REFUSAL_QUEUE the caller owns *out
 * (MHD_destroy_response). */
fg_refusal_how_t fg_http_library_refusal(struct MHD_Connection *conn, unsigned status,
                                         struct MHD_Response **out);

/* listen.c: a listening socket whose connections go to a libmicrohttpd daemon started with
 * MHD_USE_NO_LISTEN_SOCKET. Open binds and listens (FG_EIO, logged, when it cannot; *bound is
 * the port, the chosen one for port 0); serve starts the thread that accepts. Each connection
 * handed over adds one to *open, and one past max is closed at once instead; the server takes
 * one off *open when MHD notifies the connection closed. Close stops the thread and closes the
 * socket, after which connecting is refused. The caller owns the listener until close, which
 * frees it and must come before MHD_stop_daemon. */
typedef struct fg_http_listener fg_http_listener_t;
int fg_http_listener_open(const char *host, uint16_t port, fg_http_listener_t **out,
                          uint16_t *bound);
int fg_http_listener_serve(fg_http_listener_t *l, struct MHD_Daemon *mhd, atomic_uint *open,
                           unsigned max);
void fg_http_listener_close(fg_http_listener_t *l);

#endif
