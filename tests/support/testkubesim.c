/* tests/support/testkubesim.c: kubesim for a test (see testkubesim.h). */
#include "testkubesim.h"

#include "testhttp.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int try_start(tk_sim_t *k, const char *const *extra) {
    k->port = th_free_ports(k->n);
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return -1;
    char clusters[8], port[8], tls[96];
    snprintf(clusters, sizeof clusters, "%d", k->n);
    snprintf(port, sizeof port, "%u", (unsigned)k->port);
    snprintf(tls, sizeof tls, "%s/tls", k->dir);
    const char *argv[40] = {"kubesim", "--clusters", clusters, "--base-port", port, "--token",
                            TK_TOKEN,  "--tls-dir",  tls};
    size_t argc = 9;
    for (size_t i = 0; extra && extra[i] && argc < 39; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    k->pid = fork();
    if (k->pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDERR_FILENO);
        close(pipefd[0]);
        execv(th_bin("kubesim"), (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    char buf[4096];
    size_t len = 0;
    int lines = 0;
    while (lines < k->n && len < sizeof buf - 1) {
        ssize_t r = read(pipefd[0], buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            lines += buf[len + (size_t)i] == '\n';
        len += (size_t)r;
    }
    close(pipefd[0]);
    if (lines < k->n) {
        kill(k->pid, SIGKILL);
        waitpid(k->pid, NULL, 0);
        k->pid = 0;
        return -1;
    }
    return 0;
}

int tk_start(tk_sim_t *k, int n, const char *const *extra) {
    memset(k, 0, sizeof *k);
    if (n < 1 || n > 16)
        return -1;
    k->n = n;
    snprintf(k->dir, sizeof k->dir, "/tmp/fg-test-ks-XXXXXX");
    if (mkdtemp(k->dir) == NULL)
        return -1;
    snprintf(k->token_file, sizeof k->token_file, "%s/token", k->dir);
    snprintf(k->ca_file, sizeof k->ca_file, "%s/tls/ca.crt", k->dir);
    FILE *f = fopen(k->token_file, "w");
    if (f == NULL)
        return -1;
    fputs(TK_TOKEN "\n", f);
    fclose(f);
    int ok = -1;
    for (int attempt = 0; attempt < 5 && ok != 0; attempt++)
        ok = try_start(k, extra);
    if (ok != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        snprintf(k->urls[i], sizeof k->urls[i], "https://127.0.0.1:%u", (unsigned)k->port + i);
        fg_cluster_conf_t c = {.name = name,
                               .zone = "z",
                               .url = k->urls[i],
                               .token_file = k->token_file,
                               .ca_file = k->ca_file};
        fg_kube_error_t err;
        if (fg_kube_client_new(&k->kc[i], &c, NULL, &err) != FG_OK)
            return -1;
    }
    return 0;
}

void tk_stop(tk_sim_t *k) {
    for (int i = 0; i < k->n; i++)
        fg_kube_client_free(k->kc[i]);
    if (k->pid > 0) {
        kill(k->pid, SIGKILL);
        waitpid(k->pid, NULL, 0);
    }
    if (k->dir[0]) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "tk_stop: cannot remove %s\n", k->dir);
    }
    memset(k, 0, sizeof *k);
}

long tk_call(tk_sim_t *k, int i, const char *method, const char *path, const char *json,
             json_t **out) {
    static const struct {
        const char *name;
        fg_kube_method_t m;
    } methods[] = {{"GET", FG_KUBE_GET},
                   {"POST", FG_KUBE_POST},
                   {"PUT", FG_KUBE_PUT},
                   {"PATCH", FG_KUBE_PATCH},
                   {"DELETE", FG_KUBE_DELETE}};
    fg_kube_method_t m = FG_KUBE_GET;
    for (size_t j = 0; j < sizeof methods / sizeof methods[0]; j++)
        if (strcmp(methods[j].name, method) == 0)
            m = methods[j].m;
    json_t *body = json ? json_loads(json, 0, NULL) : NULL, *ans = NULL;
    long code = 0;
    fg_kube_error_t err;
    fg_kube_request(k->kc[i], m, path, body, &ans, &code, &err);
    json_decref(body);
    if (out)
        *out = ans;
    else
        json_decref(ans);
    return code;
}

long tk_requests(tk_sim_t *k, int i, const char *verb) {
    json_t *s = NULL;
    if (tk_call(k, i, "GET", "/_kubesim/stats", NULL, &s) != 200)
        return -1;
    long v = (long)json_integer_value(json_object_get(json_object_get(s, "requests"), verb));
    json_decref(s);
    return v;
}

int tk_faults(tk_sim_t *k, int i, const char *json) {
    return tk_call(k, i, "POST", "/_kubesim/faults", json, NULL) == 200 ? 0 : -1;
}
