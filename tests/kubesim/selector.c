/* selector: labelSelector and fieldSelector parsing and matching, as the API server reads them.
 *
 * Labels: comma-separated requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`; all must hold. Fields: `path=v`, `path==v`, `path!=v` on metadata.name,
 * metadata.namespace and the extra fields a resource row names; a missing field reads as "".
 */
#include <stdio.h>
#include <string.h>

#include "ks.h"

typedef enum { OP_EQ, OP_NEQ, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS } op_t;

#define MAX_VALUES 32

typedef struct {
    char *key;
    op_t op;
    char *values[MAX_VALUES];
    size_t nvalues;
} req_t;

struct ks_selector {
    req_t *reqs;
    size_t n;
};

void ks_selector_free(ks_selector_t *sel) {
    if (sel == NULL)
        return;
    for (size_t i = 0; i < sel->n; i++) {
        free(sel->reqs[i].key);
        for (size_t j = 0; j < sel->reqs[i].nvalues; j++)
            free(sel->reqs[i].values[j]);
    }
    free(sel->reqs);
    free(sel);
}

static void skip_spaces(const char **p) {
    while (**p == ' ')
        (*p)++;
}

static bool is_key_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-' || ch == '/';
}

static char *take_word(const char **p) {
    const char *start = *p;
    while (is_key_char(**p))
        (*p)++;
    return fg_xstrndup(start, (size_t)(*p - start));
}

static req_t *push_req(ks_selector_t *sel) {
    sel->reqs = fg_xrealloc(sel->reqs, (sel->n + 1) * sizeof(*sel->reqs));
    req_t *r = &sel->reqs[sel->n++];
    memset(r, 0, sizeof(*r));
    return r;
}

/* Parses "(a, b)" at *p into r's values. */
static int parse_set(const char **p, req_t *r) {
    skip_spaces(p);
    if (**p != '(')
        return FG_EINVAL;
    (*p)++;
    for (;;) {
        skip_spaces(p);
        if (r->nvalues == MAX_VALUES)
            return FG_EINVAL;
        r->values[r->nvalues++] = take_word(p);
        skip_spaces(p);
        if (**p == ')') {
            (*p)++;
            return FG_OK;
        }
        if (**p != ',')
            return FG_EINVAL;
        (*p)++;
    }
}

static int parse_label_req(const char **p, req_t *r) {
    skip_spaces(p);
    if (**p == '!') {
        (*p)++;
        skip_spaces(p);
        r->key = take_word(p);
        r->op = OP_NOTEXISTS;
        return r->key[0] ? FG_OK : FG_EINVAL;
    }
    r->key = take_word(p);
    if (r->key[0] == '\0')
        return FG_EINVAL;
    skip_spaces(p);
    if (**p == '\0' || **p == ',') {
        r->op = OP_EXISTS;
        return FG_OK;
    }
    if (strncmp(*p, "!=", 2) == 0) {
        r->op = OP_NEQ;
        *p += 2;
    } else if (strncmp(*p, "==", 2) == 0) {
        r->op = OP_EQ;
        *p += 2;
    } else if (**p == '=') {
        r->op = OP_EQ;
        *p += 1;
    } else if (strncmp(*p, "notin", 5) == 0) {
        r->op = OP_NOTIN;
        *p += 5;
        return parse_set(p, r);
    } else if (strncmp(*p, "in", 2) == 0) {
        r->op = OP_IN;
        *p += 2;
        return parse_set(p, r);
    } else {
        return FG_EINVAL;
    }
    skip_spaces(p);
    r->values[0] = take_word(p);
    r->nvalues = 1;
    return FG_OK;
}

int ks_label_selector_parse(const char *text, ks_selector_t **out, char *err, size_t errlen) {
    int rc = FG_OK;
    ks_selector_t *sel = fg_xcalloc(1, sizeof(*sel));
    const char *p = text ? text : "";
    skip_spaces(&p);
    while (*p != '\0') {
        if (parse_label_req(&p, push_req(sel)) != FG_OK) {
            snprintf(err, errlen,
                     "unable to parse requirement: found '%.40s', expected: "
                     "identifier, ',', '=', '==', '!=', 'in' or 'notin'",
                     p);
            rc = FG_EINVAL;
            goto out;
        }
        skip_spaces(&p);
        if (*p == ',')
            p++;
        else if (*p != '\0') {
            snprintf(err, errlen, "unable to parse requirement: found '%.40s', expected: ','", p);
            rc = FG_EINVAL;
            goto out;
        }
    }
    *out = sel;
    sel = NULL;
out:
    ks_selector_free(sel);
    return rc;
}

static bool field_supported(int res, const char *key) {
    if (strcmp(key, "metadata.name") == 0 || strcmp(key, "metadata.namespace") == 0)
        return true;
    const char *list = ks_resources[res].fields;
    size_t klen = strlen(key);
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == klen && strncmp(p, key, n) == 0)
            return true;
        p += n + (end ? 1 : 0);
    }
    return false;
}

int ks_field_selector_parse(int res, const char *text, ks_selector_t **out, char *err,
                            size_t errlen) {
    int rc = FG_OK;
    ks_selector_t *sel = fg_xcalloc(1, sizeof(*sel));
    const char *p = text ? text : "";
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *term = fg_xstrndup(p, n);
        char *op = strstr(term, "!=");
        req_t *r = push_req(sel);
        size_t oplen = 2;
        r->op = OP_NEQ;
        if (op == NULL) {
            r->op = OP_EQ;
            op = strstr(term, "==");
            if (op == NULL) {
                op = strchr(term, '=');
                oplen = 1;
            }
        }
        if (op == NULL) {
            snprintf(err, errlen, "invalid selector: '%.60s'; can't understand '%.60s'", text,
                     term);
            free(term);
            rc = FG_EINVAL;
            goto out;
        }
        r->key = fg_xstrndup(term, (size_t)(op - term));
        r->values[0] = fg_xstrdup(op + oplen);
        r->nvalues = 1;
        free(term);
        if (!field_supported(res, r->key)) {
            snprintf(err, errlen, "field label not supported: %.60s", r->key);
            rc = FG_EINVAL;
            goto out;
        }
        p += n + (end ? 1 : 0);
    }
    *out = sel;
    sel = NULL;
out:
    ks_selector_free(sel);
    return rc;
}

static bool in_values(const req_t *r, const char *v) {
    for (size_t i = 0; i < r->nvalues; i++) {
        if (strcmp(r->values[i], v) == 0)
            return true;
    }
    return false;
}

bool ks_label_selector_matches(const ks_selector_t *sel, const json_t *obj) {
    if (sel == NULL)
        return true;
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    for (size_t i = 0; i < sel->n; i++) {
        const req_t *r = &sel->reqs[i];
        const char *v = json_string_value(json_object_get(labels, r->key));
        bool ok = false;
        switch (r->op) {
            case OP_EXISTS:
                ok = v != NULL;
                break;
            case OP_NOTEXISTS:
                ok = v == NULL;
                break;
            case OP_EQ:
            case OP_IN:
                ok = v != NULL && in_values(r, v);
                break;
            case OP_NEQ:
            case OP_NOTIN:
                ok = v == NULL || !in_values(r, v);
                break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* The string at a dotted path ("spec.nodeName"), or "" when absent. */
static const char *field_value(const json_t *obj, const char *path) {
    char part[128];
    const json_t *cur = obj;
    const char *p = path;
    while (cur != NULL && *p != '\0') {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part))
            return "";
        memcpy(part, p, n);
        part[n] = '\0';
        cur = json_object_get(cur, part);
        p += n + (dot ? 1 : 0);
    }
    const char *v = json_string_value(cur);
    return v ? v : "";
}

bool ks_field_selector_matches(const ks_selector_t *sel, const json_t *obj) {
    if (sel == NULL)
        return true;
    for (size_t i = 0; i < sel->n; i++) {
        const req_t *r = &sel->reqs[i];
        bool eq = strcmp(field_value(obj, r->key), r->values[0]) == 0;
        if (eq != (r->op == OP_EQ))
            return false;
    }
    return true;
}

bool ks_selector_empty(const ks_selector_t *sel) {
    return sel == NULL || sel->n == 0;
}
