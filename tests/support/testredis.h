/* tests/support/testredis.h: a throwaway redis-server for a test: a free port, a temp dir, no
 * persistence (--save '' --appendonly no); stopped and removed by tr_redis_stop. */
#ifndef FG_TESTREDIS_H
#define FG_TESTREDIS_H

#include <stdint.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    uint16_t port;
    char dir[64];
    char url[64]; /* redis://127.0.0.1:PORT/0 */
} tr_redis_t;

/* Starts it and waits until it answers PING; 0 on success. */
int tr_redis_start(tr_redis_t *r);
/* The same on a given port (a restart where the old one ran); 0: a free one. */
int tr_redis_start_on(tr_redis_t *r, uint16_t port);
/* Kills it (SIGKILL: a dead Redis is what the fallback tests want) and removes its dir. */
void tr_redis_stop(tr_redis_t *r);

#endif
