/* http/router.c: compiles the route table into segment lists and matches request paths.
 *
 * A pattern is '/'-separated segments, each a literal ("pods"), a parameter ("{pod}"), or a
 * parameter with a literal verb suffix ("{app}:scale"). A plain parameter never matches a value
 * containing ':' (Kubernetes names cannot), so "web:scale" reaches the verb route, not the
 * object route. Matching walks every route (tables are tens of rows): the first route whose
 * path and method match wins; if only the path matches, the methods found make the Allow list.
 */
#include "fleetgate/http.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *literal; /* literal segment, or NULL for a parameter */
    char *param;   /* parameter name */
    char *suffix;  /* ":verb" after a parameter, or NULL */
} segment_t;

typedef struct {
    const fg_route_t *route;
    size_t nsegs;
    segment_t segs[FG_ROUTE_MAX_SEGMENTS];
} compiled_t;

struct fg_router {
    compiled_t *routes;
    size_t nroutes;
};

static void compiled_clear(compiled_t *c) {
    for (size_t i = 0; i < c->nsegs; i++) {
        free(c->segs[i].literal);
        free(c->segs[i].param);
        free(c->segs[i].suffix);
    }
    c->nsegs = 0;
}

static int compile_segment(segment_t *seg, const char *s, size_t len) {
    memset(seg, 0, sizeof *seg);
    if (len == 0)
        return FG_EINVAL;
    if (s[0] != '{') {
        if (memchr(s, '{', len) || memchr(s, '}', len))
            return FG_EINVAL;
        seg->literal = fg_xstrndup(s, len);
        return FG_OK;
    }
    const char *close = memchr(s, '}', len);
    if (close == NULL || close == s + 1)
        return FG_EINVAL;
    size_t rest = len - (size_t)(close + 1 - s);
    if (rest > 0 && close[1] != ':')
        return FG_EINVAL;
    seg->param = fg_xstrndup(s + 1, (size_t)(close - s - 1));
    if (rest > 1)
        seg->suffix = fg_xstrndup(close + 1, rest);
    else if (rest == 1)
        return FG_EINVAL; /* a bare ':' */
    return FG_OK;
}

/* Compiles one pattern; on failure everything it allocated is freed again. */
static int compile(compiled_t *c, const fg_route_t *route) {
    const char *p = route->pattern;
    c->route = route;
    c->nsegs = 0;
    if (p == NULL || p[0] != '/')
        return FG_EINVAL;
    p++;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (c->nsegs == FG_ROUTE_MAX_SEGMENTS)
            goto fail;
        segment_t *seg = &c->segs[c->nsegs];
        if (compile_segment(seg, p, len) != FG_OK) {
            free(seg->literal);
            free(seg->param);
            free(seg->suffix);
            goto fail;
        }
        c->nsegs++;
        p += len;
        if (*p == '/')
            p++;
    }
    return FG_OK;
fail:
    compiled_clear(c);
    return FG_EINVAL;
}

int fg_router_new(fg_router_t **out, const fg_route_t *routes, size_t nroutes) {
    fg_router_t *r = fg_xcalloc(1, sizeof *r);
    r->routes = fg_xcalloc(nroutes ? nroutes : 1, sizeof *r->routes);
    for (size_t i = 0; i < nroutes; i++) {
        if (compile(&r->routes[i], &routes[i]) != FG_OK) {
            fg_log(FG_LOG_ERROR, NULL, "route %s %s: bad pattern", routes[i].method,
                   routes[i].pattern ? routes[i].pattern : "(null)");
            r->nroutes = i;
            fg_router_free(r);
            return FG_EINVAL;
        }
        r->nroutes = i + 1;
    }
    *out = r;
    return FG_OK;
}

void fg_router_free(fg_router_t *r) {
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nroutes; i++)
        compiled_clear(&r->routes[i]);
    free(r->routes);
    free(r);
}

/* Splits path into at most FG_ROUTE_MAX_SEGMENTS segments (pointers into path, with lengths).
 * Empty segments ("//", a trailing '/') make the path unmatchable. */
static int split_path(const char *path, const char **seg, size_t *len, size_t *nseg) {
    *nseg = 0;
    if (path[0] != '/')
        return FG_EINVAL;
    const char *p = path + 1;
    if (*p == '\0')
        return FG_OK; /* "/" has no segments */
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t l = slash ? (size_t)(slash - p) : strlen(p);
        if (l == 0 || *nseg == FG_ROUTE_MAX_SEGMENTS)
            return FG_EINVAL;
        seg[*nseg] = p;
        len[*nseg] = l;
        (*nseg)++;
        if (slash == NULL)
            return FG_OK;
        p = slash + 1;
    }
}

/* Does the path match this route's pattern? Fills params (owned by m) when it does. */
static bool path_matches(const compiled_t *c, const char **seg, const size_t *len, size_t nseg,
                         fg_route_match_t *m) {
    if (c->nsegs != nseg)
        return false;
    for (size_t i = 0; i < nseg; i++) {
        const segment_t *s = &c->segs[i];
        if (s->literal) {
            if (strlen(s->literal) != len[i] || memcmp(s->literal, seg[i], len[i]) != 0)
                return false;
            continue;
        }
        size_t vlen = len[i];
        if (s->suffix) {
            size_t sl = strlen(s->suffix);
            if (vlen <= sl || memcmp(seg[i] + vlen - sl, s->suffix, sl) != 0)
                return false;
            vlen -= sl;
        }
        if (memchr(seg[i], ':', vlen) != NULL)
            return false;
    }
    if (m) {
        for (size_t i = 0; i < nseg; i++) {
            const segment_t *s = &c->segs[i];
            if (s->literal || m->nparams == FG_ROUTE_MAX_PARAMS)
                continue;
            size_t vlen = len[i] - (s->suffix ? strlen(s->suffix) : 0);
            m->names[m->nparams] = s->param;
            m->values[m->nparams] = fg_xstrndup(seg[i], vlen);
            m->nparams++;
        }
    }
    return true;
}

static bool method_matches(const char *route_method, const char *method) {
    return strcmp(route_method, method) == 0 ||
           (strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0);
}

static void allow_add(char *allow, size_t size, const char *method) {
    /* Each method once; GET brings HEAD along. */
    char token[16];
    size_t n = strlen(method);
    if (n + 1 >= sizeof token)
        return;
    memcpy(token, method, n + 1);
    const char *p = allow;
    while ((p = strstr(p, token)) != NULL) {
        bool starts = p == allow || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ',';
        if (starts && ends)
            return;
        p += n;
    }
    size_t used = strlen(allow);
    if (used + n + 3 >= size)
        return;
    if (used > 0) {
        memcpy(allow + used, ", ", 2);
        used += 2;
    }
    memcpy(allow + used, method, n + 1);
}

int fg_router_match(const fg_router_t *r, const char *method, const char *path,
                    fg_route_match_t *m) {
    const char *seg[FG_ROUTE_MAX_SEGMENTS];
    size_t len[FG_ROUTE_MAX_SEGMENTS];
    size_t nseg;
    memset(m, 0, sizeof *m);
    if (split_path(path, seg, len, &nseg) != FG_OK)
        return FG_ENOENT;
    bool path_found = false;
    for (size_t i = 0; i < r->nroutes; i++) {
        const compiled_t *c = &r->routes[i];
        if (!method_matches(c->route->method, method))
            continue;
        if (path_matches(c, seg, len, nseg, m)) {
            m->route = c->route;
            return FG_OK;
        }
    }
    for (size_t i = 0; i < r->nroutes; i++) {
        const compiled_t *c = &r->routes[i];
        if (!path_matches(c, seg, len, nseg, NULL))
            continue;
        path_found = true;
        allow_add(m->allow, sizeof m->allow, c->route->method);
        if (strcmp(c->route->method, "GET") == 0)
            allow_add(m->allow, sizeof m->allow, "HEAD");
    }
    return path_found ? FG_EINVAL : FG_ENOENT;
}

bool fg_http_method_is_mutating(const char *method) {
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
           strcmp(method, "OPTIONS") != 0;
}

bool fg_route_is_write(const fg_route_t *route, const char *method) {
    return route->rate == FG_RATE_WRITE ||
           (route->rate == FG_RATE_DEFAULT && fg_http_method_is_mutating(method));
}

void fg_route_match_clear(fg_route_match_t *m) {
    for (size_t i = 0; i < m->nparams; i++)
        free(m->values[i]);
    m->nparams = 0;
    m->route = NULL;
}
