/* auth/principal.c: the caller as the token describes it, and what each permission needs.
 *
 * A principal is immutable once built and reference counted: the verified-token cache and every
 * request that uses it hold a reference. Authorization is one table from permission to the least
 * role it needs; roles are ordered (viewer < developer < operator < admin), so "may" is a
 * comparison.
 */
#include "auth_internal.h"

#include <stdlib.h>
#include <string.h>

/* The least role each permission needs in the route's project. */
static const fg_role_t perm_roles[FG_PERM__COUNT] = {
    [FG_PERM_ADMIN] = FG_ROLE_ADMIN,    [FG_PERM_PUBLIC] = FG_ROLE_NONE,
    [FG_PERM_METRICS] = FG_ROLE_NONE,   [FG_PERM_AUTHENTICATED] = FG_ROLE_NONE,
    [FG_PERM_READ] = FG_ROLE_VIEWER,    [FG_PERM_WRITE] = FG_ROLE_DEVELOPER,
    [FG_PERM_LOGS] = FG_ROLE_DEVELOPER, [FG_PERM_EXEC] = FG_ROLE_OPERATOR,
};

fg_role_t fg_perm_role(fg_perm_t perm) {
    return (unsigned)perm < FG_PERM__COUNT ? perm_roles[perm] : FG_ROLE_ADMIN;
}

void fg_principal_retain(fg_principal_t *p) {
    atomic_fetch_add(&p->refs, 1);
}

void fg_principal_release(fg_principal_t *p) {
    if (p == NULL || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < p->ngroups; i++)
        free(p->groups[i]);
    free(p->groups);
    for (size_t i = 0; i < p->nprojects; i++)
        free(p->projects[i].name);
    free(p->projects);
    free(p->subject);
    free(p);
}

const char *fg_principal_subject(const fg_principal_t *p) {
    return p->subject;
}

bool fg_principal_is_admin(const fg_principal_t *p) {
    return p->admin;
}

int64_t fg_principal_expiry(const fg_principal_t *p) {
    return p->exp;
}

size_t fg_principal_ngroups(const fg_principal_t *p) {
    return p->ngroups;
}

const char *fg_principal_group(const fg_principal_t *p, size_t i) {
    return i < p->ngroups ? p->groups[i] : NULL;
}

size_t fg_principal_nprojects(const fg_principal_t *p) {
    return p->nprojects;
}

const char *fg_principal_project(const fg_principal_t *p, size_t i, fg_role_t *role) {
    if (i >= p->nprojects)
        return NULL;
    if (role)
        *role = p->projects[i].role;
    return p->projects[i].name;
}

static int cmp_project(const void *a, const void *b) {
    return strcmp(((const project_role_t *)a)->name, ((const project_role_t *)b)->name);
}

fg_role_t fg_principal_role(const fg_principal_t *p, const char *project) {
    if (p->admin)
        return FG_ROLE_ADMIN;
    if (project == NULL || p->nprojects == 0)
        return FG_ROLE_NONE; /* projects is NULL then, and bsearch must not see NULL */
    project_role_t key = {(char *)project, FG_ROLE_NONE};
    const project_role_t *hit =
        bsearch(&key, p->projects, p->nprojects, sizeof *p->projects, cmp_project);
    return hit ? hit->role : FG_ROLE_NONE;
}

bool fg_auth_can(const fg_principal_t *p, const char *project, fg_perm_t perm) {
    if (perm == FG_PERM_PUBLIC)
        return true;
    if (p == NULL || (unsigned)perm >= FG_PERM__COUNT)
        return false;
    if (perm == FG_PERM_ADMIN)
        return p->admin;
    fg_role_t need = perm_roles[perm];
    if (need == FG_ROLE_NONE || project == NULL)
        return true; /* routes without a project filter what they show by role */
    return fg_principal_role(p, project) >= need;
}
