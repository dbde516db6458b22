/* api/whoami.c: GET /v1/whoami, the caller as fleetgate sees them: subject, groups, whether they
 * are a platform admin, and their role per project. A client (and the demo) checks a token with
 * it; it reads nothing but the verified token. */
#include "api_internal.h"
#include "fleetgate/auth.h"

int fg_api_whoami(fg_req_t *req) {
    const fg_principal_t *p = fg_auth_principal(req);
    if (p == NULL)
        return fg_reply_problem(req, FG_PROBLEM_INTERNAL, "no principal behind the gate");
    json_t *groups = json_array();
    for (size_t i = 0; i < fg_principal_ngroups(p); i++)
        json_array_append_new(groups, json_string(fg_principal_group(p, i)));
    json_t *projects = json_object();
    for (size_t i = 0; i < fg_principal_nprojects(p); i++) {
        fg_role_t role;
        const char *name = fg_principal_project(p, i, &role);
        json_object_set_new(projects, name, json_string(fg_role_name(role)));
    }
    return fg_reply_json(req, 200,
                         json_pack("{s:s,s:o,s:b,s:o}", "subject", fg_principal_subject(p),
                                   "groups", groups, "admin", fg_principal_is_admin(p), "projects",
                                   projects));
}
