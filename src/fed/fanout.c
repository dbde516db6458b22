/* fed/fanout.c: one write sent to several member clusters at once.
 *
 * The writes go out together on one curl multi (kube/'s fg_kube_request_all), each with its own
 * deadline, so the answer waits for the slowest cluster but never longer than the deadline, and
 * a slow or dead cluster costs the others nothing. Each cluster's result becomes an outcome:
 * Applied (2xx, or a 404 / 409 the write declared harmless), TimedOut (the deadline passed), or
 * Failed with the cluster's Status reason and message, quoted in the answer so the caller sees
 * which cluster refused what. The connections stay open between writes (a pool of connection
 * sets), so a write costs no TCP or TLS set-up once one went to the same clusters. Each answer
 * is translated for the cache as it comes (the outcome's item), while the other clusters are
 * still at work, so that the write-through after the last answer has only Redis left to wait for.
 */
#include "fed_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const outcome_names[] = {
    [FG_FED_APPLIED] = "Applied",
    [FG_FED_FAILED] = "Failed",
    [FG_FED_TIMED_OUT] = "TimedOut",
    [FG_FED_SKIPPED] = "Skipped",
};

const char *fg_fed_outcome_name(fg_fed_outcome_kind_t k) {
    return (size_t)k < sizeof outcome_names / sizeof outcome_names[0] ? outcome_names[k] : "";
}

/* What one call's result means for the write. */
static void judge(const fg_fed_write_t *w, const fg_kube_call_t *k, fg_fed_outcome_t *o) {
    memset(o, 0, sizeof *o);
    o->status = k->http_code;
    snprintf(o->reason, sizeof o->reason, "%s", k->err.reason);
    if (k->rc == FG_OK) {
        o->outcome = FG_FED_APPLIED;
        o->object = json_incref(k->out);
        return;
    }
    bool harmless = (k->rc == FG_ERR && k->http_code == 404 && w->absent_ok) ||
                    (k->rc == FG_ERR && k->http_code == 409 && w->exists_ok &&
                     strcmp(k->err.reason, "AlreadyExists") == 0);
    if (harmless) {
        o->outcome = FG_FED_APPLIED;
        return;
    }
    o->outcome = k->rc == FG_ETIMEOUT ? FG_FED_TIMED_OUT : FG_FED_FAILED;
    if (k->rc == FG_ERR)
        snprintf(o->detail, sizeof o->detail, "%s: %s", k->err.reason, k->err.message);
    else
        snprintf(o->detail, sizeof o->detail, "%s", k->err.message);
}

/* An idle connection set, or a new one. */
static fg_kube_conns_t *conns_take(fg_fed_t *fed) {
    fg_kube_conns_t *k = NULL;
    pthread_mutex_lock(&fed->conns_mu);
    if (fed->nconns > 0)
        k = fed->conns[--fed->nconns];
    pthread_mutex_unlock(&fed->conns_mu);
    return k ? k : fg_kube_conns_new();
}

static void conns_give(fg_fed_t *fed, fg_kube_conns_t *k) {
    pthread_mutex_lock(&fed->conns_mu);
    if (fed->nconns < FED_CONNS_IDLE_MAX) {
        fed->conns[fed->nconns++] = k;
        k = NULL;
    }
    pthread_mutex_unlock(&fed->conns_mu);
    fg_kube_conns_free(k);
}

/* The calls for the writes whose cluster is configured (calls[j] is write idx[j]); the others'
 * outcomes are Failed at once. Answers how many calls. */
static size_t prepare_calls(fg_fed_t *fed, const fg_fed_write_t *w, size_t n, fg_fed_outcome_t *out,
                            fg_kube_call_t *calls, size_t *idx) {
    size_t ncalls = 0;
    for (size_t i = 0; i < n; i++) {
        fg_kube_client_t *c = fed_client(fed, w[i].cluster);
        if (c == NULL) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].outcome = FG_FED_FAILED;
            snprintf(out[i].detail, sizeof out[i].detail, "no member cluster %s is configured",
                     w[i].cluster);
            continue;
        }
        calls[ncalls] = (fg_kube_call_t){.client = c,
                                         .method = w[i].method,
                                         .path = w[i].path,
                                         .body = w[i].body,
                                         .text = w[i].text};
        idx[ncalls++] = i;
    }
    return ncalls;
}

static size_t count_failed(const fg_fed_outcome_t *out, size_t n) {
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += out[i].outcome != FG_FED_APPLIED;
    return failed;
}

/* One call's answer as it came: what the cache would hold of it. */
typedef struct {
    const fg_fed_t *fed;
    const fg_fed_write_t *w;
    struct fg_fed_item *item;
} answer_t;

static void on_answer(fg_kube_call_t *k, void *ud) {
    answer_t *a = ud;
    /* a read's answer is not written through */
    if (k->rc == FG_OK && k->out != NULL && a->w->method != FG_KUBE_GET)
        a->item = fed_item_new(a->fed, a->w, k->out);
}

size_t fg_fed_write_all(fg_fed_t *fed, const fg_fed_write_t *w, size_t n, long deadline_ms,
                        fg_fed_outcome_t *out) {
    fg_kube_call_t calls[FG_FED_MAX_CLUSTERS];
    size_t idx[FG_FED_MAX_CLUSTERS];
    answer_t answers[FG_FED_MAX_CLUSTERS];
    n = n < FG_FED_MAX_CLUSTERS ? n : FG_FED_MAX_CLUSTERS;
    size_t ncalls = prepare_calls(fed, w, n, out, calls, idx);
    for (size_t j = 0; j < ncalls; j++) {
        answers[j] = (answer_t){.fed = fed, .w = &w[idx[j]]};
        calls[j].done = on_answer;
        calls[j].done_ud = &answers[j];
    }
    fg_kube_conns_t *conns = conns_take(fed);
    fg_kube_request_all_in(conns, calls, ncalls, deadline_ms);
    conns_give(fed, conns);
    for (size_t j = 0; j < ncalls; j++) {
        fg_fed_outcome_t *o = &out[idx[j]];
        judge(&w[idx[j]], &calls[j], o);
        if (o->outcome == FG_FED_APPLIED && o->object != NULL)
            o->item = answers[j].item;
        else
            fed_item_free(answers[j].item);
    }
    fg_kube_calls_clear(calls, ncalls);
    return count_failed(out, n);
}

void fg_fed_outcomes_clear(fg_fed_outcome_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_decref(out[i].object);
        out[i].object = NULL;
        fed_item_free(out[i].item);
        out[i].item = NULL;
    }
}

json_t *fg_fed_outcomes_json(const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_pack("{s:s,s:s}", "cluster", w[i].cluster, "outcome",
                              fg_fed_outcome_name(out[i].outcome));
        if (out[i].status > 0)
            json_object_set_new(o, "status", json_integer(out[i].status));
        if (out[i].detail[0])
            json_object_set_new(o, "detail", json_string(out[i].detail));
        json_array_append_new(a, o);
    }
    return a;
}

void fg_fed_outcomes_summary(const fg_fed_write_t *w, const fg_fed_outcome_t *out, size_t n,
                             char *buf, size_t buflen, bool *timed_out) {
    size_t failed = 0, len = 0;
    *timed_out = true;
    for (size_t i = 0; i < n; i++) {
        failed += out[i].outcome != FG_FED_APPLIED;
        if (out[i].outcome == FG_FED_FAILED)
            *timed_out = false;
    }
    len = (size_t)snprintf(buf, buflen, "%zu of %zu clusters failed the write:", failed, n);
    const char *sep = " ";
    for (size_t i = 0; i < n && len < buflen; i++) {
        if (out[i].outcome == FG_FED_APPLIED)
            continue;
        if (out[i].outcome == FG_FED_TIMED_OUT)
            len += (size_t)snprintf(buf + len, buflen - len, "%s%s did not answer in time", sep,
                                    w[i].cluster);
        else if (out[i].status > 0)
            len += (size_t)snprintf(buf + len, buflen - len, "%s%s answered %ld (%s)", sep,
                                    w[i].cluster, out[i].status, out[i].detail);
        else
            len += (size_t)snprintf(buf + len, buflen - len, "%s%s: %s", sep, w[i].cluster,
                                    out[i].detail);
        sep = "; ";
    }
}
