/* cache/insight_feed.c: the insights feed of the informers (cache_internal.h): the commands that
 * fold a cluster's Event into its project's timeline (cache/insight_event.lua), that add a
 * watch event or write-through to its project's change stream (cache/insight_change.lua) and that
 * add an object's state changes to its project's history (cache/insight_history.lua). */
#include "cache_internal.h"

#include <stdio.h>
#include <string.h>

/* An event's time member as Unix ms; dflt when absent or not an RFC 3339 time. */
static int64_t time_of(const json_t *t, const char *key, int64_t dflt) {
    const char *s = json_string_value(json_object_get(t, key));
    int64_t ms;
    if (s == NULL || fg_parse_time_ms(s, strlen(s), &ms) != FG_OK)
        return dflt;
    return ms;
}

bool insight_event_cmd(insight_event_cmd_t *cmd, const char *sha1, const fg_insights_conf_t *conf,
                       const char *cluster, const json_t *t, const char *text, size_t len) {
    const char *project = json_string_value(json_object_get(t, "project"));
    if (project == NULL || project[0] == '\0')
        return false;
    int64_t now = fg_wall_ms();
    int64_t last = time_of(t, "lastTime", now);
    int64_t first = time_of(t, "firstTime", last);
    fg_cache_key_events(&cmd->ev, project);
    fg_cache_key_events_order(&cmd->evx, project);
    fg_cache_key_objects(&cmd->pods, "pod", cluster, project);
    snprintf(cmd->first, sizeof cmd->first, "%lld", (long long)first);
    snprintf(cmd->last, sizeof cmd->last, "%lld", (long long)last);
    snprintf(cmd->now, sizeof cmd->now, "%lld", (long long)now);
    snprintf(cmd->max_age, sizeof cmd->max_age, "%lld", (long long)conf->events_max_age_s * 1000);
    snprintf(cmd->max_n, sizeof cmd->max_n, "%lld", (long long)conf->events_max_per_project);
    const char *a[INSIGHT_EVENT_ARGC] = {"EVALSHA",  sha1,        "3",          cmd->ev.s,
                                         cmd->evx.s, cmd->pods.s, text,         cmd->first,
                                         cmd->last,  cmd->now,    cmd->max_age, cmd->max_n};
    memcpy(cmd->argv, a, sizeof a);
    for (int i = 0; i < INSIGHT_EVENT_ARGC; i++)
        cmd->lens[i] = strlen(a[i]);
    cmd->lens[6] = len;
    return true;
}

/* The scripts' mode argument for where an object comes from. */
static const char *from_mode(insight_history_from_t from) {
    static const char *const modes[] = {
        [HIST_WATCH] = "watch", [HIST_MODIFIED] = "watch", [HIST_LIST] = "list"};
    return modes[from];
}

/* The API's name (ObjectKind) of the cache kinds that have a change stream. */
static const struct {
    const char *cache, *api;
} change_kinds[] = {{"pod", "Pod"},         {"app", "App"},       {"jobset", "JobSet"},
                    {"cronjob", "CronJob"}, {"scaler", "Scaler"}, {"project", "Project"}};

bool insight_change_cmd(insight_change_cmd_t *cmd, const char *sha1, const fg_insights_conf_t *conf,
                        const char *kind, const char *cluster, const char *name, const char *scope,
                        const char *text, size_t len, const char *version,
                        insight_history_from_t from) {
    const char *api = NULL;
    for (size_t i = 0; i < sizeof change_kinds / sizeof change_kinds[0]; i++)
        if (strcmp(change_kinds[i].cache, kind) == 0)
            api = change_kinds[i].api;
    const char *project = strcmp(kind, "project") == 0 ? name : scope;
    if (api == NULL || project == NULL || version == NULL)
        return false;
    fg_cache_key_objects(&cmd->objects, kind, cluster, scope);
    fg_cache_key_changes(&cmd->stream, project);
    fg_cache_key_preimage(&cmd->pre, kind, cluster, scope);
    fg_cache_key_change_mark(&cmd->mark, kind, cluster, scope, name);
    fg_format_time_ms(fg_wall_ms(), cmd->time, sizeof cmd->time);
    snprintf(cmd->maxlen, sizeof cmd->maxlen, "%lld", (long long)conf->changes_max_per_project);
    const char *a[] = {"EVALSHA",     sha1,        "4",         cmd->objects.s,
                       cmd->stream.s, cmd->pre.s,  cmd->mark.s, name,
                       text,          api,         cluster,     version,
                       cmd->time,     cmd->maxlen, kind,        from_mode(from)};
    cmd->argc = (int)(sizeof a / sizeof a[0]);
    memcpy(cmd->argv, a, sizeof a);
    for (int i = 0; i < cmd->argc; i++)
        cmd->lens[i] = strlen(a[i]);
    cmd->lens[8] = len;
    return true;
}

void insight_change_cmd_app(insight_change_cmd_t *cmd, const char *app) {
    if (cmd->argc >= INSIGHT_CHANGE_ARGC)
        return;
    cmd->argv[cmd->argc] = app;
    cmd->lens[cmd->argc++] = strlen(app);
}

/* The API's kind of the cache kinds that have a history. */
static const struct {
    const char *cache, *api;
} history_kinds[] = {{"pod", "Pod"},
                     {"app", "App"},
                     {"jobset", "JobSet"},
                     {"cronjob", "CronJob"},
                     {"scaler", "Scaler"}};

bool insight_history_cmd(insight_history_cmd_t *cmd, const char *sha1,
                         const fg_insights_conf_t *conf, const char *kind, const char *cluster,
                         const char *name, const char *scope, const char *text, size_t len,
                         const char *version, insight_history_from_t from) {
    const char *api = NULL;
    for (size_t i = 0; i < sizeof history_kinds / sizeof history_kinds[0]; i++)
        if (strcmp(history_kinds[i].cache, kind) == 0)
            api = history_kinds[i].api;
    if (api == NULL || scope == NULL || version == NULL)
        return false;
    fg_cache_key_objects(&cmd->objects, kind, cluster, scope);
    fg_cache_key_history(&cmd->hist, scope);
    fg_cache_key_history_order(&cmd->histx, scope);
    fg_cache_key_preimage(&cmd->pre, kind, cluster, scope);
    snprintf(cmd->now, sizeof cmd->now, "%lld", (long long)fg_wall_ms());
    snprintf(cmd->max_age, sizeof cmd->max_age, "%lld", (long long)conf->history_max_age_s * 1000);
    snprintf(cmd->max_n, sizeof cmd->max_n, "%lld", (long long)conf->history_max_per_project);
    const char *a[INSIGHT_HISTORY_ARGC] = {
        "EVALSHA",   sha1,
        "4",         cmd->objects.s,
        cmd->hist.s, cmd->histx.s,
        cmd->pre.s,  name,
        text,        api,
        cluster,     version,
        cmd->now,    cmd->max_age,
        cmd->max_n,  from == HIST_LIST || from == HIST_MODIFIED ? "1" : "0"};
    memcpy(cmd->argv, a, sizeof a);
    for (int i = 0; i < INSIGHT_HISTORY_ARGC; i++)
        cmd->lens[i] = strlen(a[i]);
    cmd->lens[8] = len;
    return true;
}
