/* api/selector.c: label selectors as `labelSelector` takes them: equality and set requirements,
 * exists and !exists, comma-separated (the part of kube-apiserver's grammar served here). The
 * parser and the matcher; bounded: 1024 characters, 32 requirements of 32 values each. */
#include "selector.h"

#include <stdlib.h>
#include <string.h>

#define SELECTOR_REQS 32
#define SELECTOR_VALS 32

typedef enum { SEL_EQ, SEL_NEQ, SEL_IN, SEL_NOTIN, SEL_EXISTS, SEL_NOTEXISTS } sel_op_t;

typedef struct {
    sel_op_t op;
    char *key;
    char *vals[SELECTOR_VALS];
    size_t nvals;
} sel_req_t;

struct rd_selector {
    sel_req_t reqs[SELECTOR_REQS];
    size_t nreqs;
};

void rd_selector_free(rd_selector_t *s) {
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nreqs; i++) {
        free(s->reqs[i].key);
        for (size_t j = 0; j < s->reqs[i].nvals; j++)
            free(s->reqs[i].vals[j]);
    }
    free(s);
}

static bool key_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '/';
}

static const char *skip_ws(const char *p) {
    while (*p == ' ')
        p++;
    return p;
}

/* A key or value token: [A-Za-z0-9._/-]*, at most 317 bytes. */
static const char *token(const char *p, char **out) {
    const char *s = p;
    while (key_char(*p))
        p++;
    if (p - s > 317)
        return NULL;
    *out = fg_xstrndup(s, (size_t)(p - s));
    return p;
}

/* Parses one requirement at p; returns the position after it, or NULL (why set). */
static const char *parse_req(const char *p, sel_req_t *r, const char **why) {
    p = skip_ws(p);
    bool neg = *p == '!';
    if (neg)
        p = skip_ws(p + 1);
    p = token(p, &r->key);
    if (p == NULL || r->key[0] == '\0') {
        *why = "a requirement needs a label key";
        return NULL;
    }
    p = skip_ws(p);
    if (neg || *p == ',' || *p == '\0') {
        r->op = neg ? SEL_NOTEXISTS : SEL_EXISTS;
        return p;
    }
    if (p[0] == '!' && p[1] == '=') {
        r->op = SEL_NEQ;
        p += 2;
    } else if (p[0] == '=' && p[1] == '=') {
        r->op = SEL_EQ;
        p += 2;
    } else if (p[0] == '=') {
        r->op = SEL_EQ;
        p += 1;
    } else if (strncmp(p, "notin", 5) == 0 && (p[5] == ' ' || p[5] == '(')) {
        r->op = SEL_NOTIN;
        p += 5;
    } else if (strncmp(p, "in", 2) == 0 && (p[2] == ' ' || p[2] == '(')) {
        r->op = SEL_IN;
        p += 2;
    } else {
        *why = "expected =, ==, !=, in or notin after the key";
        return NULL;
    }
    p = skip_ws(p);
    if (r->op == SEL_EQ || r->op == SEL_NEQ) {
        p = token(p, &r->vals[0]);
        if (p == NULL) {
            *why = "a label value is too long";
            return NULL;
        }
        r->nvals = 1;
        return skip_ws(p);
    }
    if (*p != '(') {
        *why = "in and notin need a (value, ...) list";
        return NULL;
    }
    p = skip_ws(p + 1);
    for (;;) {
        if (r->nvals == SELECTOR_VALS) {
            *why = "too many values in a set";
            return NULL;
        }
        p = token(p, &r->vals[r->nvals]);
        if (p == NULL) {
            *why = "a label value is too long";
            return NULL;
        }
        r->nvals++;
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
            continue;
        }
        if (*p == ')')
            return skip_ws(p + 1);
        *why = "a set must end with )";
        return NULL;
    }
}

int rd_selector_parse(const char *text, rd_selector_t **out, const char **why) {
    *out = NULL;
    *why = NULL;
    rd_selector_t *s = fg_xcalloc(1, sizeof *s);
    const char *p = text;
    if (strlen(text) == 0 || strlen(text) > RD_SELECTOR_MAX)
        *why = "must be 1 to 1024 characters";
    while (*why == NULL) {
        if (s->nreqs == SELECTOR_REQS) {
            *why = "has too many requirements";
            break;
        }
        p = parse_req(p, &s->reqs[s->nreqs++], why);
        if (p == NULL || *p == '\0')
            break;
        if (*p != ',') {
            *why = "requirements must be separated by commas";
            break;
        }
        p++;
    }
    if (*why != NULL) {
        rd_selector_free(s);
        return FG_EINVAL;
    }
    *out = s;
    return FG_OK;
}

bool rd_selector_match(const rd_selector_t *s, const json_t *labels) {
    if (s == NULL)
        return true;
    for (size_t i = 0; i < s->nreqs; i++) {
        const sel_req_t *r = &s->reqs[i];
        const json_t *lv = json_is_object(labels) ? json_object_get(labels, r->key) : NULL;
        const char *have = json_string_value(lv);
        bool in = false;
        for (size_t j = 0; have && j < r->nvals; j++)
            in = in || strcmp(have, r->vals[j]) == 0;
        bool ok = false;
        switch (r->op) {
            case SEL_EXISTS:
                ok = have != NULL;
                break;
            case SEL_NOTEXISTS:
                ok = have == NULL;
                break;
            case SEL_EQ:
            case SEL_IN:
                ok = in;
                break;
            case SEL_NEQ:
            case SEL_NOTIN:
                ok = !in;
                break;
        }
        if (!ok)
            return false;
    }
    return true;
}
