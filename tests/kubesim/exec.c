/* exec: GET/POST .../pods/NAME/exec?command=..&stdin&stdout&stderr&tty upgraded to WebSocket with
 * the v5.channel.k8s.io / v4.channel.k8s.io subprotocols, the way the API server proxies a
 * kubelet's stream. The command runs as a child process in a scratch directory (under a pty when
 * tty is set); each WebSocket binary message is one channel byte + data: 0 stdin, 1 stdout,
 * 2 stderr, 3 the final Status (exit code as the kubelet reports it), 4 terminal resize, and in
 * v5 255 + channel to close that input. WebSocket framing is written here (RFC 6455; no Debian
 * package fits libmicrohttpd's upgraded socket); server.c does the HTTP upgrade. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ks.h"

#define MAX_ARGS  64
#define MAX_FRAME (1 << 20)
#define WS_GUID   "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* Running children, so a stopping kubesim takes them with it (ks_exec_kill_all). */
static pthread_mutex_t children_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t children[256];

static void child_track(pid_t pid, bool add) {
    pthread_mutex_lock(&children_mu);
    for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++) {
        if (add ? children[i] == 0 : children[i] == pid) {
            children[i] = add ? pid : 0;
            break;
        }
    }
    pthread_mutex_unlock(&children_mu);
}

void ks_exec_kill_all(void) {
    pthread_mutex_lock(&children_mu);
    for (size_t i = 0; i < sizeof(children) / sizeof(children[0]); i++) {
        if (children[i] > 0)
            kill(-children[i], SIGKILL); /* its process group: what it started too */
    }
    pthread_mutex_unlock(&children_mu);
}

typedef struct {
    char *argv[MAX_ARGS + 1];
    bool in, out, err, tty;
    bool v5;
    char *pod;
} exec_t;

static void exec_free(void *p) {
    exec_t *e = p;
    for (size_t i = 0; e->argv[i] != NULL; i++)
        free(e->argv[i]);
    free(e->pod);
    free(e);
}

/* ---- WebSocket frames ---------------------------------------------------------- */

/* Writes all of buf to the non-blocking socket; FG_OK or FG_EIO. */
static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, 1000);
            continue;
        }
        if (n <= 0)
            return FG_EIO;
        p += n;
        len -= (size_t)n;
    }
    return FG_OK;
}

/* Sends one unmasked frame (server to client) with opcode and, when channel >= 0, the channel
 * byte before data. */
static int ws_send(int fd, int opcode, int channel, const void *data, size_t len) {
    unsigned char hdr[16];
    size_t h = 0, total = len + (channel >= 0 ? 1 : 0);
    hdr[h++] = (unsigned char)(0x80 | opcode);
    if (total < 126) {
        hdr[h++] = (unsigned char)total;
    } else if (total < 65536) {
        hdr[h++] = 126;
        hdr[h++] = (unsigned char)(total >> 8);
        hdr[h++] = (unsigned char)total;
    } else {
        hdr[h++] = 127;
        for (int i = 7; i >= 0; i--)
            hdr[h++] = (unsigned char)((uint64_t)total >> (8 * i));
    }
    if (channel >= 0)
        hdr[h++] = (unsigned char)channel;
    /* One write per frame, as a real API server does: written as header then payload, the TLS
     * forwarding sends two records, and Nagle holds the second until the peer's delayed ACK
     * (40 ms) on every small frame. */
    if (len == 0)
        return write_all(fd, hdr, h);
    unsigned char small[4096];
    unsigned char *frame = h + len <= sizeof small ? small : fg_xmalloc(h + len);
    memcpy(frame, hdr, h);
    memcpy(frame + h, data, len);
    int rc = write_all(fd, frame, h + len);
    if (frame != small)
        free(frame);
    return rc;
}

/* Takes one complete frame off the front of buf (unmasking it in place). FG_OK with *opcode,
 * *payload (into buf) and *plen; FG_ENOENT when more bytes are needed; FG_EINVAL on a bad frame.
 * *used is how many bytes the frame took. */
static int ws_parse(unsigned char *buf, size_t len, int *opcode, unsigned char **payload,
                    size_t *plen, size_t *used) {
    if (len < 2)
        return FG_ENOENT;
    size_t h = 2;
    uint64_t n = buf[1] & 0x7f;
    bool masked = (buf[1] & 0x80) != 0;
    if (n == 126) {
        if (len < 4)
            return FG_ENOENT;
        n = ((uint64_t)buf[2] << 8) | buf[3];
        h = 4;
    } else if (n == 127) {
        if (len < 10)
            return FG_ENOENT;
        n = 0;
        for (int i = 0; i < 8; i++)
            n = (n << 8) | buf[2 + i];
        h = 10;
    }
    if (n > MAX_FRAME)
        return FG_EINVAL;
    size_t mask_at = h;
    if (masked)
        h += 4;
    if (len < h + n)
        return FG_ENOENT;
    if (masked) {
        for (uint64_t i = 0; i < n; i++)
            buf[h + i] ^= buf[mask_at + i % 4];
    }
    *opcode = buf[0] & 0x0f;
    *payload = buf + h;
    *plen = (size_t)n;
    *used = h + (size_t)n;
    return FG_OK;
}

/* ---- the session ----------------------------------------------------------------- */

typedef struct {
    int fd;     /* the upgraded socket */
    int in_fd;  /* child's stdin (pipe or pty master), -1 when closed */
    int out_fd; /* stdout (or the pty) */
    int err_fd; /* stderr, -1 with a tty */
    bool tty;
    pid_t pid;
} session_t;

static void send_status(int fd, const exec_t *e, int status) {
    char buf[1024], cmd[512];
    size_t off = 0;
    cmd[0] = '\0';
    for (size_t i = 0; e->argv[i] != NULL && off < sizeof(cmd) - 1; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "%s%s", i ? " " : "", e->argv[i]);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    int n;
    if (code == 0)
        n = snprintf(buf, sizeof(buf), "{\"metadata\":{},\"status\":\"Success\"}");
    else
        n = snprintf(buf, sizeof(buf),
                     "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated "
                     "with non-zero exit code: error executing command [%s], exit code %d\","
                     "\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":"
                     "\"ExitCode\",\"message\":\"%d\"}]}}",
                     cmd, code, code);
    ws_send(fd, 2, 3, buf, (size_t)n);
}

/* Handles one client message; false when the client closed the stream. */
static bool on_message(session_t *s, const exec_t *e, int opcode, unsigned char *p, size_t n) {
    if (opcode == 8) {
        ws_send(s->fd, 8, -1, p, n >= 2 ? 2 : 0);
        return false;
    }
    if (opcode == 9) {
        ws_send(s->fd, 10, -1, p, n);
        return true;
    }
    if ((opcode != 1 && opcode != 2) || n == 0)
        return true;
    int ch = p[0];
    if (ch == 0 && s->in_fd >= 0 && n > 1) {
        if (write_all(s->in_fd, p + 1, n - 1) != FG_OK) {
            close(s->in_fd);
            s->in_fd = -1;
        }
    } else if (ch == 4 && s->tty && n > 1) {
        json_t *j = NULL;
        if (fg_json_load((const char *)p + 1, n - 1, &j, NULL, 0) == FG_OK) {
            struct winsize ws = {
                .ws_col = (unsigned short)json_integer_value(json_object_get(j, "Width")),
                .ws_row = (unsigned short)json_integer_value(json_object_get(j, "Height"))};
            ioctl(s->out_fd, TIOCSWINSZ, &ws);
            json_decref(j);
        }
    } else if (ch == 255 && e->v5 && n > 1 && p[1] == 0 && s->in_fd >= 0) {
        if (s->tty)
            write_all(s->in_fd, "\x04", 1); /* EOF on a terminal */
        else
            close(s->in_fd);
        if (!s->tty)
            s->in_fd = -1;
    }
    return true;
}

static int spawn(session_t *s, const exec_t *e, const char *dir) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, master = -1, slave = -1;
    if (e->tty) {
        if (openpty(&master, &slave, NULL, NULL, NULL) != 0)
            return FG_EIO;
    } else if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) {
        return FG_EIO;
    }
    pid_t pid = fork();
    if (pid < 0)
        return FG_EIO;
    if (pid == 0) {
        if (e->tty) {
            setsid();
            ioctl(slave, TIOCSCTTY, 0);
            dup2(slave, 0);
            dup2(slave, 1);
            dup2(slave, 2);
            close(slave);
            close(master);
        } else {
            setpgid(0, 0);
            if (e->in)
                dup2(in[0], 0);
            else {
                int nul = open("/dev/null", O_RDONLY);
                dup2(nul, 0);
            }
            dup2(out[1], 1);
            dup2(err[1], 2);
            int fds[6] = {in[0], in[1], out[0], out[1], err[0], err[1]};
            for (size_t i = 0; i < 6; i++)
                close(fds[i]); /* else cat would hold its own stdin's write end open */
        }
        if (chdir(dir) != 0)
            _exit(126);
        execvp(e->argv[0], e->argv);
        _exit(127);
    }
    s->pid = pid;
    child_track(pid, true);
    if (e->tty) {
        close(slave);
        s->in_fd = master;
        s->out_fd = master;
        s->err_fd = -1;
    } else {
        close(in[0]);
        close(out[1]);
        close(err[1]);
        s->in_fd = in[1];
        if (!e->in) {
            close(in[1]);
            s->in_fd = -1;
        }
        s->out_fd = out[0];
        s->err_fd = err[0];
    }
    return FG_OK;
}

static void exec_run(void *st, int fd, const char *extra, size_t extra_len) {
    exec_t *e = st;
    session_t s = {.fd = fd, .in_fd = -1, .out_fd = -1, .err_fd = -1, .tty = e->tty, .pid = -1};
    char dir[] = "/tmp/kubesim-exec-XXXXXX";
    unsigned char *in = fg_xmalloc(MAX_FRAME + 16);
    size_t inlen = 0;
    char buf[16384];
    int status = 0;
    bool client_open = true, made = false;
    if (extra_len > 0 && extra_len <= MAX_FRAME) {
        memcpy(in, extra, extra_len);
        inlen = extra_len;
    }
    made = mkdtemp(dir) != NULL;
    if (!made || spawn(&s, e, dir) != FG_OK) {
        const char *msg = "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"kubesim: "
                          "cannot start the command\",\"reason\":\"InternalError\"}";
        ws_send(fd, 2, 3, msg, strlen(msg));
        goto out;
    }
    while (s.out_fd >= 0 || s.err_fd >= 0) {
        struct pollfd pf[3] = {{.fd = client_open ? fd : -1, .events = POLLIN},
                               {.fd = s.out_fd, .events = POLLIN},
                               {.fd = s.err_fd, .events = POLLIN}};
        if (poll(pf, 3, 1000) < 0 && errno != EINTR)
            break;
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(fd, in + inlen, MAX_FRAME + 16 - inlen);
            if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
                client_open = false;
                break;
            }
            if (n > 0)
                inlen += (size_t)n;
            for (;;) {
                int op = 0;
                unsigned char *p = NULL;
                size_t plen = 0, used = 0;
                int rc = ws_parse(in, inlen, &op, &p, &plen, &used);
                if (rc == FG_EINVAL) {
                    client_open = false;
                    break;
                }
                if (rc != FG_OK)
                    break;
                if (!on_message(&s, e, op, p, plen))
                    client_open = false;
                memmove(in, in + used, inlen - used);
                inlen -= used;
                if (!client_open)
                    break;
            }
            if (!client_open)
                break;
        }
        for (int k = 1; k <= 2; k++) {
            int *sfd = k == 1 ? &s.out_fd : &s.err_fd;
            if (*sfd < 0 || !(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(*sfd, buf, sizeof(buf));
            if (n <= 0) {
                close(*sfd);
                if (s.tty)
                    s.in_fd = -1; /* the same descriptor */
                *sfd = -1;
                continue;
            }
            if ((k == 1 && (e->out || e->tty)) || (k == 2 && e->err))
                ws_send(fd, 2, k, buf, (size_t)n);
        }
    }
    if (!client_open && s.pid > 0)
        kill(s.pid, SIGKILL);
    if (s.pid > 0) {
        waitpid(s.pid, &status, 0);
        child_track(s.pid, false);
    }
    if (client_open) {
        send_status(fd, e, status);
        unsigned char bye[2] = {0x03, 0xe8}; /* 1000 normal closure */
        ws_send(fd, 8, -1, bye, 2);
    }
out:
    if (s.in_fd >= 0 && s.in_fd != s.out_fd)
        close(s.in_fd);
    if (s.out_fd >= 0)
        close(s.out_fd);
    if (s.err_fd >= 0)
        close(s.err_fd);
    if (made) {
        /* the scratch directory and whatever the command left in it */
        pid_t rm = fork();
        if (rm == 0) {
            execlp("rm", "rm", "-rf", dir, (char *)NULL);
            _exit(1);
        }
        if (rm > 0)
            waitpid(rm, NULL, 0);
    }
    free(in);
    exec_free(e);
}

/* ---- the request ----------------------------------------------------------------- */

static bool offered(const char *list, const char *proto) {
    size_t n = strlen(proto);
    for (const char *p = list; p != NULL && *p != '\0';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (strncmp(p, proto, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
            return true;
        p = strchr(p, ',');
    }
    return false;
}

static void ws_accept(const char *key, char *out, size_t len) {
    char in[128];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int n = snprintf(in, sizeof(in), "%s%s", key, WS_GUID);
    EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL);
    if (len >= 29)
        EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

void ks_pod_exec(ks_cluster_t *c, const ks_req_t *req, const ks_target_t *t, ks_resp_t *out) {
    char *key = ks_key(t->ns, t->name);
    ks_obj_t *o = NULL;
    json_t *p = NULL;
    exec_t *e = fg_xcalloc(1, sizeof(*e));
    char msg[256];
    size_t argc = 0;
    if (ks_store_get(c->store, t->res, key, &o) != FG_OK) {
        ks_not_found_reply(out, &ks_resources[t->res], t->name);
        goto out;
    }
    p = ks_obj_parse(o);
    const char *phase = json_string_value(json_object_get(json_object_get(p, "status"), "phase"));
    if (phase == NULL || strcmp(phase, "Running") != 0) {
        snprintf(msg, sizeof(msg), "unable to upgrade connection: container not found (\"%s\")",
                 t->name);
        ks_status_reply(out, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
        goto out;
    }
    for (size_t i = 0; i < req->nquery && argc < MAX_ARGS; i++) {
        if (strcmp(req->keys[i], "command") == 0 && req->values[i] != NULL)
            e->argv[argc++] = fg_xstrdup(req->values[i]);
    }
    if (argc == 0) {
        ks_status_reply(out, 400, "BadRequest", "you must specify at least 1 command", NULL, NULL,
                        NULL, NULL);
        goto out;
    }
    const char *proto = NULL;
    if (req->ws_protocol != NULL && offered(req->ws_protocol, "v5.channel.k8s.io"))
        proto = "v5.channel.k8s.io";
    else if (req->ws_protocol != NULL && offered(req->ws_protocol, "v4.channel.k8s.io"))
        proto = "v4.channel.k8s.io";
    if (req->ws_key == NULL || proto == NULL || strlen(req->ws_key) > 64) {
        ks_status_reply(out, 400, "BadRequest",
                        "kubesim: exec needs a WebSocket upgrade with the v5.channel.k8s.io or "
                        "v4.channel.k8s.io subprotocol",
                        NULL, NULL, NULL, NULL);
        goto out;
    }
    e->in = ks_req_flag(req, "stdin");
    e->out = ks_req_flag(req, "stdout");
    e->err = ks_req_flag(req, "stderr");
    e->tty = ks_req_flag(req, "tty");
    e->v5 = strcmp(proto, "v5.channel.k8s.io") == 0;
    e->pod = fg_xstrdup(t->name);
    out->code = 101;
    out->upgrade.st = e;
    out->upgrade.protocol = proto;
    ws_accept(req->ws_key, out->upgrade.accept, sizeof(out->upgrade.accept));
    out->upgrade.run = exec_run;
    out->upgrade.free = exec_free;
    e = NULL;
out:
    if (e != NULL)
        exec_free(e);
    json_decref(p);
    ks_obj_unref(o);
    free(key);
}
