/* tests/support/testredis.c: a throwaway redis-server on a free port. */
#include "testredis.h"
#include "testhttp.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int answers_ping(uint16_t port) {
    int fd = th_connect(port);
    if (fd < 0)
        return 0;
    char buf[64];
    int ok = write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf) > 0 &&
             strncmp(buf, "+PONG", 5) == 0;
    close(fd);
    return ok;
}

int tr_redis_start(tr_redis_t *r) {
    return tr_redis_start_on(r, 0);
}

int tr_redis_start_on(tr_redis_t *r, uint16_t want_port) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/fg-test-redis-XXXXXX");
    if (mkdtemp(r->dir) == NULL)
        return -1;
    r->port = want_port ? want_port : th_free_port();
    snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%u/0", (unsigned)r->port);
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)r->port);
    r->pid = fork();
    if (r->pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir",
               r->dir, "--save", "", "--appendonly", "no", "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        if (answers_ping(r->port))
            return 0;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    tr_redis_stop(r);
    return -1;
}

void tr_redis_stop(tr_redis_t *r) {
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
    if (r->dir[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/dump.rdb", r->dir);
        unlink(path);
        rmdir(r->dir);
        r->dir[0] = '\0';
    }
}
