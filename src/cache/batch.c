/* cache/batch.c: commands collected, then sent in one round trip (fg_redis_pipeline), with
 * their replies kept until the batch is freed or reset. The arguments are copied into one text
 * buffer, so a caller builds keys on its stack and forgets them. */
#include "fleetgate/cache.h"
#include "fleetgate/kube.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_TEXT_MAX (64u << 20) /* a page of HMGET names is far below this */
#define BATCH_ARGS_MAX 64          /* arguments of fg_redis_batch_addv */
#define NO_TEXT        SIZE_MAX    /* an argument that did not fit: sent as "" */

typedef struct {
    size_t first_arg; /* index into arg_off */
    size_t argc;
    fg_redis_reply_t *reply; /* NULL until run */
} cmd_t;

struct fg_redis_batch {
    fg_buf_t text;   /* every argument, NUL-terminated, back to back */
    size_t *arg_off; /* where argument i starts in text */
    size_t nargs, args_cap;
    cmd_t *cmds;
    size_t ncmds, cmds_cap;
    size_t nsent; /* commands [0, nsent) have their replies */
    /* between fg_redis_batch_send and _recv: the argument pointers sent (they point into text) */
    const char **args;
    const char *const **argvs;
    size_t *argcs;
    size_t npending;
};

fg_redis_batch_t *fg_redis_batch_new(void) {
    fg_redis_batch_t *b = fg_xcalloc(1, sizeof *b);
    fg_buf_init(&b->text, BATCH_TEXT_MAX);
    return b;
}

void fg_redis_batch_reset(fg_redis_batch_t *b) {
    for (size_t i = 0; i < b->ncmds; i++)
        fg_redis_reply_free(b->cmds[i].reply);
    b->ncmds = b->nargs = b->nsent = 0;
    b->text.len = 0;
}

void fg_redis_batch_free(fg_redis_batch_t *b) {
    if (b == NULL)
        return;
    fg_redis_batch_reset(b);
    fg_buf_free(&b->text);
    free(b->args); /* sent and never received: a caller's bug, but no leak */
    free(b->argvs);
    free(b->argcs);
    free(b->arg_off);
    free(b->cmds);
    free(b);
}

size_t fg_redis_batch_add(fg_redis_batch_t *b, size_t argc, const char *const *argv,
                          const size_t *lens) {
    if (b->ncmds == b->cmds_cap) {
        b->cmds_cap = b->cmds_cap ? 2 * b->cmds_cap : 8;
        b->cmds = fg_xrealloc(b->cmds, b->cmds_cap * sizeof *b->cmds);
    }
    if (b->nargs + argc > b->args_cap) {
        while (b->nargs + argc > b->args_cap)
            b->args_cap = b->args_cap ? 2 * b->args_cap : 32;
        b->arg_off = fg_xrealloc(b->arg_off, b->args_cap * sizeof *b->arg_off);
    }
    b->cmds[b->ncmds] = (cmd_t){.first_arg = b->nargs, .argc = argc};
    for (size_t i = 0; i < argc; i++) {
        /* Past BATCH_TEXT_MAX an argument is sent empty (a key that does not exist); no caller
         * comes near it: names are bounded and pages hold at most 1000. */
        size_t len = lens ? lens[i] : strlen(argv[i]), at = b->text.len;
        bool kept = fg_buf_append(&b->text, argv[i], len) == FG_OK &&
                    fg_buf_append(&b->text, "", 1) == FG_OK;
        if (!kept)
            b->text.len = at;
        b->arg_off[b->nargs++] = kept ? at : NO_TEXT;
    }
    return b->ncmds++;
}

size_t fg_redis_batch_addv(fg_redis_batch_t *b, const char *arg0, ...) {
    const char *argv[BATCH_ARGS_MAX];
    size_t argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && argc < BATCH_ARGS_MAX; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    return fg_redis_batch_add(b, argc, argv, NULL);
}

size_t fg_cache_batch_add_state(fg_redis_batch_t *b, const char *cluster, const char *resource) {
    fg_cache_key_t k;
    size_t first = fg_redis_batch_addv(b, "HGETALL", fg_cache_key_cluster(&k, cluster), NULL);
    for (int i = 0; i < (resource ? 1 : FG_KIND_COUNT); i++) {
        const char *res = resource ? resource : fg_kube_kind_info((fg_kind_t)i)->resource;
        fg_redis_batch_addv(b, "HGETALL", fg_cache_key_sync(&k, cluster, res), NULL);
    }
    return first;
}

size_t fg_redis_batch_len(const fg_redis_batch_t *b) {
    return b->ncmds;
}

static void pending_free(fg_redis_batch_t *b) {
    free(b->args);
    free(b->argvs);
    free(b->argcs);
    b->args = NULL;
    b->argvs = NULL;
    b->argcs = NULL;
    b->npending = 0;
}

int fg_redis_batch_send(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen) {
    size_t n = b->ncmds - b->nsent;
    b->npending = 0;
    if (n == 0)
        return FG_OK;
    /* The text buffer may have moved while growing: pointers are made only now. */
    b->args = fg_xmalloc(b->nargs * sizeof *b->args);
    b->argvs = fg_xmalloc(n * sizeof *b->argvs);
    b->argcs = fg_xmalloc(n * sizeof *b->argcs);
    for (size_t i = 0; i < b->nargs; i++)
        b->args[i] = b->arg_off[i] == NO_TEXT ? "" : b->text.data + b->arg_off[i];
    for (size_t i = 0; i < n; i++) {
        const cmd_t *c = &b->cmds[b->nsent + i];
        b->argvs[i] = b->args + c->first_arg;
        b->argcs[i] = c->argc;
    }
    int rc = fg_redis_pipeline_send(r, n, b->argcs, b->argvs, why, whylen);
    if (rc == FG_OK)
        b->npending = n;
    else
        pending_free(b);
    return rc;
}

int fg_redis_batch_recv(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen) {
    size_t n = b->npending;
    if (n == 0)
        return FG_OK;
    fg_redis_reply_t **outs = fg_xmalloc(n * sizeof *outs);
    int rc = fg_redis_pipeline_recv(r, n, outs, why, whylen);
    if (rc == FG_OK) {
        for (size_t i = 0; i < n; i++)
            b->cmds[b->nsent + i].reply = outs[i];
        b->nsent += n;
    }
    free(outs);
    pending_free(b);
    return rc;
}

int fg_redis_batch_run(fg_redis_t *r, fg_redis_batch_t *b, char *why, size_t whylen) {
    if (fg_redis_batch_send(r, b, why, whylen) != FG_OK)
        return FG_EIO;
    return fg_redis_batch_recv(r, b, why, whylen);
}

const fg_redis_reply_t *fg_redis_batch_reply(const fg_redis_batch_t *b, size_t i) {
    return i < b->ncmds ? b->cmds[i].reply : NULL;
}

fg_redis_reply_t *fg_redis_batch_take_reply(fg_redis_batch_t *b, size_t i) {
    if (i >= b->ncmds)
        return NULL;
    fg_redis_reply_t *rep = b->cmds[i].reply;
    b->cmds[i].reply = NULL;
    return rep;
}
