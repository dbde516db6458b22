/* core/metrics.c: the metrics registry and its Prometheus text rendering.
 *
 * Families are registered at start-up; a series (one set of label values) is created the first
 * time it is touched. Each family has its own mutex, held only to find the series and bump a
 * number, so two requests contend only when they touch the same family at the same instant.
 * Series are found by linear search: families here hold tens of series, not thousands. */
#include "fleetgate/core.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAMILIES 128
#define MAX_LABELS   4

/* Latency buckets in seconds: from a cached read (sub-millisecond) to a slow fan-out. */
static const double default_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                         0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define NBUCKETS (sizeof default_buckets / sizeof default_buckets[0])

typedef struct {
    char *key; /* label values joined by '\x1f', the lookup key */
    char **values;
    double value;               /* counter or gauge */
    uint64_t buckets[NBUCKETS]; /* histogram: cumulative counts are computed at render */
    uint64_t count;
    double sum;
} series_t;

struct fg_metric {
    char *name;
    char *help;
    fg_metric_type_t type;
    size_t nlabels;
    char *labels[MAX_LABELS];
    pthread_mutex_t lock;
    series_t *series;
    size_t nseries, capseries;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static fg_metric_t *families[MAX_FAMILIES];
static size_t nfamilies;

fg_metric_t *fg_metrics_register(const char *name, const char *help, fg_metric_type_t type,
                                 const char *const *label_names) {
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nfamilies; i++) {
        if (strcmp(families[i]->name, name) == 0) {
            pthread_mutex_unlock(&registry_lock);
            return families[i]; /* registering twice hands back the same family */
        }
    }
    if (nfamilies == MAX_FAMILIES)
        abort(); /* a programming error: raise MAX_FAMILIES */
    fg_metric_t *m = fg_xcalloc(1, sizeof *m);
    m->name = fg_xstrdup(name);
    m->help = fg_xstrdup(help);
    m->type = type;
    for (size_t i = 0; label_names && label_names[i]; i++) {
        if (i == MAX_LABELS)
            abort();
        m->labels[i] = fg_xstrdup(label_names[i]);
        m->nlabels++;
    }
    pthread_mutex_init(&m->lock, NULL);
    families[nfamilies++] = m;
    pthread_mutex_unlock(&registry_lock);
    return m;
}

/* Called with m->lock held. */
static series_t *series_for(fg_metric_t *m, const char *const *values) {
    char key[512];
    size_t off = 0;
    for (size_t i = 0; i < m->nlabels; i++) {
        const char *v = values[i] ? values[i] : "";
        size_t n = strlen(v), room = sizeof key - 1 - off; /* left before the final NUL */
        if (room == 0)
            break;
        if (n + 1 > room)
            n = room - 1; /* absurdly long label values are cut, not overflowed */
        memcpy(key + off, v, n);
        off += n;
        key[off++] = '\x1f';
    }
    key[off] = '\0';
    for (size_t i = 0; i < m->nseries; i++) {
        if (strcmp(m->series[i].key, key) == 0)
            return &m->series[i];
    }
    if (m->nseries == m->capseries) {
        m->capseries = m->capseries ? m->capseries * 2 : 8;
        m->series = fg_xrealloc(m->series, m->capseries * sizeof *m->series);
    }
    series_t *s = &m->series[m->nseries++];
    memset(s, 0, sizeof *s);
    s->key = fg_xstrdup(key);
    s->values = fg_xcalloc(m->nlabels ? m->nlabels : 1, sizeof *s->values);
    for (size_t i = 0; i < m->nlabels; i++)
        s->values[i] = fg_xstrdup(values[i] ? values[i] : "");
    return s;
}

void fg_metric_add(fg_metric_t *m, const char *const *label_values, double delta) {
    pthread_mutex_lock(&m->lock);
    series_for(m, label_values)->value += delta;
    pthread_mutex_unlock(&m->lock);
}

void fg_metric_set(fg_metric_t *m, const char *const *label_values, double value) {
    pthread_mutex_lock(&m->lock);
    series_for(m, label_values)->value = value;
    pthread_mutex_unlock(&m->lock);
}

void fg_metric_observe(fg_metric_t *m, const char *const *label_values, double seconds) {
    pthread_mutex_lock(&m->lock);
    series_t *s = series_for(m, label_values);
    for (size_t i = 0; i < NBUCKETS; i++) {
        if (seconds <= default_buckets[i]) {
            s->buckets[i]++;
            break;
        }
    }
    s->count++;
    s->sum += seconds;
    pthread_mutex_unlock(&m->lock);
}

/* Rendering appends to a bounded buffer; the first failed append sticks, so the caller learns
 * that the exposition was cut instead of serving a partial one to a scraper. */
typedef struct {
    fg_buf_t *b;
    int rc;
} out_t;

static void outf(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(out_t *o, const char *fmt, ...) {
    if (o->rc != FG_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    o->rc = fg_buf_vappendf(o->b, fmt, ap);
    va_end(ap);
}

/* Label values are escaped as the exposition format asks: backslash, quote, newline. */
static void out_label_value(out_t *o, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            outf(o, "\\%c", *v);
        else if (*v == '\n')
            outf(o, "\\n");
        else
            outf(o, "%c", *v);
    }
}

static void out_labels(out_t *o, const fg_metric_t *m, const series_t *s, const char *le) {
    if (m->nlabels == 0 && le == NULL)
        return;
    outf(o, "{");
    for (size_t i = 0; i < m->nlabels; i++) {
        outf(o, "%s%s=\"", i ? "," : "", m->labels[i]);
        out_label_value(o, s->values[i]);
        outf(o, "\"");
    }
    if (le)
        outf(o, "%sle=\"%s\"", m->nlabels ? "," : "", le);
    outf(o, "}");
}

static void render_family(out_t *o, fg_metric_t *m) {
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    outf(o, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, type_names[m->type]);
    for (size_t i = 0; i < m->nseries; i++) {
        series_t *s = &m->series[i];
        if (m->type != FG_METRIC_HISTOGRAM) {
            outf(o, "%s", m->name);
            out_labels(o, m, s, NULL);
            outf(o, " %.17g\n", s->value);
            continue;
        }
        uint64_t cumulative = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            char le[32];
            cumulative += s->buckets[k];
            snprintf(le, sizeof le, "%g", default_buckets[k]);
            outf(o, "%s_bucket", m->name);
            out_labels(o, m, s, le);
            outf(o, " %llu\n", (unsigned long long)cumulative);
        }
        outf(o, "%s_bucket", m->name);
        out_labels(o, m, s, "+Inf");
        outf(o, " %llu\n%s_sum", (unsigned long long)s->count, m->name);
        out_labels(o, m, s, NULL);
        outf(o, " %.9g\n%s_count", s->sum, m->name);
        out_labels(o, m, s, NULL);
        outf(o, " %llu\n", (unsigned long long)s->count);
    }
}

int fg_metrics_render(fg_buf_t *b) {
    out_t o = {b, FG_OK};
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nfamilies; i++) {
        pthread_mutex_lock(&families[i]->lock);
        render_family(&o, families[i]);
        pthread_mutex_unlock(&families[i]->lock);
    }
    pthread_mutex_unlock(&registry_lock);
    return o.rc;
}

void fg_metrics_reset(void) {
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < nfamilies; i++) {
        fg_metric_t *m = families[i];
        for (size_t k = 0; k < m->nseries; k++) {
            for (size_t l = 0; l < m->nlabels; l++)
                free(m->series[k].values[l]);
            free(m->series[k].values);
            free(m->series[k].key);
        }
        for (size_t l = 0; l < m->nlabels; l++)
            free(m->labels[l]);
        free(m->series);
        free(m->name);
        free(m->help);
        pthread_mutex_destroy(&m->lock);
        free(m);
    }
    nfamilies = 0;
    pthread_mutex_unlock(&registry_lock);
}
