/*
 * policy.c: see policy.h.
 *
 * Idempotence. A launcher (torchrun) and its children all load the library. The
 * launcher applies the policy first and its children inherit the result, so a
 * child finds each variable already at the policy's value and changes nothing.
 * The catch is that conditions may differ between them (a launcher has no
 * WORLD_SIZE), and a child must not mistake a value that its parent's policy set
 * for one that the user chose. So the parent exports NCCLGUARD_POLICY_APPLIED,
 * "NAME=<hash of value>;..." for every variable its policy set; a child treats a
 * variable whose current value still has that hash as a policy default, which
 * its own policy may replace, and any other value as the user's. A variable
 * whose value is not shown (policy.h: it may be a secret) is left out: no hash
 * of a secret goes into every child's environment and every dump, and a child
 * takes its value as the user's (a default of its own does not replace it).
 */
#include "policy/policy.h"

#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/secret.h"
#include "policy/config_load.h"

#define MARKER "NCCLGUARD_POLICY_APPLIED"
#define MARKER_MAX 8192

static struct ng_env_change changes[NG_POLICY_CHANGES_MAX];
static size_t nchanges;
static char pool[NG_POLICY_POOL];
static size_t pool_used;
static size_t overflow; /* changes that did not fit */

static struct {
    const char *name;
    uint64_t hash;
} marker[NG_POLICY_CHANGES_MAX];
static size_t nmarker;

static const char *keep(const char *s, size_t n)
{
    if (!s) return NULL;
    if (n + 1 > sizeof pool - pool_used) return "(not recorded: too long)";
    char *d = pool + pool_used;
    memcpy(d, s, n);
    d[n] = '\0';
    pool_used += n + 1;
    return d;
}

/* A copy of s for the records, at most 256 bytes of it (logs and dumps need no more). */
static const char *keep_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    return keep(s, n > 256 ? 256 : n);
}

/* Reads the parent's NCCLGUARD_POLICY_APPLIED into marker[]. */
static void read_marker(void)
{
    nmarker = 0;
    const char *m = getenv(MARKER);
    for (const char *p = m; p && *p && nmarker < NG_POLICY_CHANGES_MAX;) {
        size_t w = strcspn(p, ";");
        const char *eq = memchr(p, '=', w);
        if (eq) {
            char *end;
            unsigned long long h = strtoull(eq + 1, &end, 16);
            if (end == p + w && eq > p) {
                marker[nmarker].name = keep(p, (size_t)(eq - p));
                marker[nmarker++].hash = (uint64_t)h;
            }
        }
        p += w;
        if (*p == ';') p++;
    }
}

/* Did a parent's policy set name to exactly this value? */
static int parent_set(const char *name, const char *value)
{
    if (!value) return 0;
    for (size_t i = 0; i < nmarker; i++)
        if (!strcmp(marker[i].name, name)) return marker[i].hash == ng_hash_str(value);
    return 0;
}

int ncclguard_policy_value_shown(const char *name)
{
    static const char *const prefixes[] = {"NCCL_", "NCCLGUARD_", "CUDA_", "TORCH_"};
    if (ng_secret_name(name, strlen(name))) return 0;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

/* A copy of value for the records, as logs and dumps may show it (policy.h): itself,
 * or its length only (a hash of it would let anyone who reads the log test guesses). */
static const char *keep_shown(const char *name, const char *value)
{
    if (!value || ncclguard_policy_value_shown(name)) return keep_str(value);
    char text[64];
    snprintf(text, sizeof text, "<not shown: %zu bytes>", strlen(value));
    return keep_str(text);
}

static struct ng_env_change *record(const struct ng_env_rule *r, const char *name, const char *was,
                                    int outcome)
{
    if (nchanges == NG_POLICY_CHANGES_MAX) {
        overflow++;
        return NULL;
    }
    struct ng_env_change *c = &changes[nchanges++];
    /* a value that may be shown is the rule's own, which config.c keeps: no copy */
    const char *value = r->action == NG_ENV_FORBID           ? NULL
                        : ncclguard_policy_value_shown(name) ? r->value
                                                             : keep_shown(name, r->value);
    *c = (struct ng_env_change){.rule = r,
                                .name = name,
                                .value = value,
                                .was = keep_shown(name, was),
                                .outcome = (unsigned char)outcome};
    return c;
}

/* The name of environ entry e (before '=') into buf; 0 when it does not fit. */
static int entry_name(const char *e, char *buf, size_t len)
{
    const char *eq = strchr(e, '=');
    size_t n = eq ? (size_t)(eq - e) : 0;
    if (!n || n >= len) return 0;
    memcpy(buf, e, n);
    buf[n] = '\0';
    return 1;
}

/*
 * Removes what a forbid rule names. A pattern is matched against every variable;
 * unsetenv reshuffles environ, so after each removal the scan starts over (the
 * environment is small, and each pass removes one match).
 */
static void forbid(const struct ng_env_rule *r, int dry_run)
{
    if (!strchr(r->name, '*')) {
        const char *cur = getenv(r->name);
        struct ng_env_change *c = record(r, r->name, cur, cur ? NG_OUT_REMOVED : NG_OUT_ABSENT);
        if (c && cur && !dry_run && unsetenv(r->name) != 0) c->outcome = NG_OUT_FAILED;
        return;
    }
    char name[256];
    int found = 0;
    for (size_t i = 0; environ && environ[i];) {
        const char *e = environ[i];
        if (!entry_name(e, name, sizeof name) || fnmatch(r->name, name, 0) != 0) {
            i++;
            continue;
        }
        found = 1;
        struct ng_env_change *c = record(r, keep_str(name), strchr(e, '=') + 1, NG_OUT_REMOVED);
        if (dry_run || unsetenv(name) != 0) {
            if (!dry_run && c) c->outcome = NG_OUT_FAILED;
            i++; /* nothing was removed: move on, never loop on it */
            continue;
        }
        i = 0; /* start over: environ has changed */
    }
    if (!found) record(r, r->name, NULL, NG_OUT_ABSENT);
}

static void set_var(const struct ng_env_rule *r, int dry_run)
{
    const char *cur = getenv(r->name);
    int from_parent = parent_set(r->name, cur);
    int out;
    if (cur && !strcmp(cur, r->value))
        out = NG_OUT_ALREADY;
    else if (r->action == NG_ENV_DEFAULT && cur && !from_parent)
        out = NG_OUT_KEPT;
    else if (r->action == NG_ENV_FORCE)
        out = NG_OUT_FORCED;
    else
        out = cur ? NG_OUT_REPLACED : NG_OUT_SET;
    struct ng_env_change *c = record(r, r->name, cur, out); /* NULL when the list is full */
    if (c) c->was_parent = (unsigned char)from_parent;
    if (!dry_run && (out == NG_OUT_SET || out == NG_OUT_REPLACED || out == NG_OUT_FORCED) &&
        setenv(r->name, r->value, 1) != 0 && c)
        c->outcome = NG_OUT_FAILED;
}

/* Exports the variables this policy (or a parent's, still in force) has set. */
static void write_marker(void)
{
    char buf[MARKER_MAX];
    size_t len = 0;
    for (size_t i = 0; i < nchanges; i++) {
        const struct ng_env_change *c = &changes[i];
        int ours = c->outcome == NG_OUT_SET || c->outcome == NG_OUT_REPLACED ||
                   c->outcome == NG_OUT_FORCED || (c->outcome == NG_OUT_ALREADY && c->was_parent);
        /* a value that is not shown is not hashed for children either: a child
         * takes it as the user's (policy.h) */
        if (!ours || !ncclguard_policy_value_shown(c->name)) continue;
        int n = snprintf(buf + len, sizeof buf - len, "%s%s=%016llx", len ? ";" : "", c->name,
                         (unsigned long long)ng_hash_str(c->rule->value));
        if (n < 0 || (size_t)n >= sizeof buf - len) break;
        len += (size_t)n;
    }
    /* a parent's entries that no rule here touched, if their value is unchanged */
    for (size_t m = 0; m < nmarker; m++) {
        if (ncclguard_policy_change_of(marker[m].name) ||
            !ncclguard_policy_value_shown(marker[m].name))
            continue;
        const char *cur = getenv(marker[m].name);
        if (!cur || ng_hash_str(cur) != marker[m].hash) continue;
        int n = snprintf(buf + len, sizeof buf - len, "%s%s=%016llx", len ? ";" : "",
                         marker[m].name, (unsigned long long)marker[m].hash);
        if (n < 0 || (size_t)n >= sizeof buf - len) break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    const char *old = getenv(MARKER);
    if (len && (!old || strcmp(old, buf))) setenv(MARKER, buf, 1);
    if (!len && old) unsetenv(MARKER);
}

const char *ncclguard_policy_where(const struct ng_env_change *ch, char *buf, size_t len)
{
    static const char *const action[] = {"default", "force", "forbid"};
    const struct ng_env_rule *r = ch->rule;
    const struct ng_file_source *f = ncclguard_config_file(r->origin.source);
    snprintf(buf, len, "%s %s, %s:%u", ncclguard_source_name(r->origin.source), action[r->action],
             f ? f->path : "?", r->origin.line);
    return buf;
}

static void log_change(const struct ng_env_change *c, int talk)
{
    char where[NG_STR_MAX + 64];
    ncclguard_policy_where(c, where, sizeof where);
    enum ng_level info = talk ? NG_LOG_INFO : NG_LOG_DEBUG;
    enum ng_level warn = talk ? NG_LOG_WARN : NG_LOG_DEBUG;
    const struct ng_env_rule *r = c->rule;
    int site = r->origin.source == NG_SRC_SITE;
    switch (c->outcome) {
    case NG_OUT_SET: ncclguard_log(info, "%s=%s (%s; was unset)", c->name, c->value, where); break;
    case NG_OUT_REPLACED:
        ncclguard_log(info, "%s=%s (%s; was '%s', from the parent process's policy)", c->name,
                      c->value, where, c->was);
        break;
    case NG_OUT_FORCED:
        if (!c->was)
            ncclguard_log(info, "%s=%s (%s; was unset)", c->name, c->value, where);
        else if (c->was_parent || !site)
            ncclguard_log(info, "%s=%s (%s; was '%s')", c->name, c->value, where, c->was);
        else
            ncclguard_log(warn,
                          "%s=%s (%s; was '%s'): the site policy overrides your value; "
                          "ask the cluster admins if you need another",
                          c->name, c->value, where, c->was);
        break;
    case NG_OUT_REMOVED:
        ncclguard_log(warn, "%s removed (%s; was '%s'): %s", c->name, where, c->was,
                      r->value[0] ? r->value
                      : site      ? "the site policy forbids it"
                                  : "your own file forbids it");
        break;
    case NG_OUT_KEPT:
        ncclguard_log(NG_LOG_DEBUG,
                      "%s=%s kept (environment): the %s value %s applies only "
                      "to unset variables",
                      c->name, c->was, where, c->value);
        break;
    case NG_OUT_FAILED:
        ncclguard_log(warn,
                      "cannot change %s (%s): out of memory; the job starts without "
                      "this change",
                      c->name, where);
        break;
    default: break;
    }
}

void ncclguard_policy_apply(int dry_run, int talk)
{
    nchanges = 0;
    pool_used = 0;
    overflow = 0;
    read_marker();
    size_t n;
    const struct ng_env_rule *rules = ncclguard_config_env_rules(&n);
    if (ncclguard_settings()->disable) {
        for (size_t i = 0; i < n; i++) record(&rules[i], rules[i].name, NULL, NG_OUT_DISABLED);
        if (n)
            ncclguard_log(talk ? NG_LOG_INFO : NG_LOG_DEBUG,
                          "NCCLGUARD_DISABLE is on (%s): the "
                          "%zu environment rules of the policy are not applied",
                          ncclguard_origin_text(&ncclguard_settings()->origin[NG_KEY_DISABLE],
                                                NG_KEY_DISABLE, (char[300]){0}, 300),
                          n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (rules[i].action == NG_ENV_FORBID) forbid(&rules[i], dry_run);
    for (size_t i = 0; i < n; i++)
        if (rules[i].action != NG_ENV_FORBID) set_var(&rules[i], dry_run);
    if (!dry_run) write_marker();
    for (size_t i = 0; i < nchanges; i++) log_change(&changes[i], talk);
    if (overflow)
        ncclguard_log(talk ? NG_LOG_WARN : NG_LOG_DEBUG,
                      "%zu environment changes beyond the "
                      "first %d are applied but not recorded",
                      overflow, NG_POLICY_CHANGES_MAX);
}

static int env_verbose(void)
{
    const char *v = getenv("NCCLGUARD_VERBOSE");
    return v && *v && strcmp(v, "0") && strcasecmp(v, "no") && strcasecmp(v, "false") &&
           strcasecmp(v, "off");
}

int ncclguard_policy_talks(void)
{
    return ncclguard_identity()->local_rank <= 0 || ncclguard_settings()->verbose;
}

void ncclguard_policy_apply_at_start(void)
{
    int talk = ncclguard_identity()->local_rank <= 0 || env_verbose();
    ncclguard_config_load(NULL, environ, talk);
    ncclguard_policy_apply(0, ncclguard_policy_talks());
}

const struct ng_env_change *ncclguard_policy_changes(size_t *n)
{
    *n = nchanges;
    return changes;
}

const struct ng_env_change *ncclguard_policy_change_of(const char *name)
{
    for (size_t i = nchanges; i-- > 0;)
        if (!strcmp(changes[i].name, name)) return &changes[i];
    return NULL;
}

const char *ncclguard_policy_outcome_name(int outcome)
{
    static const char *const names[] = {"set",     "replaced", "already", "kept",    "forced",
                                        "removed", "absent",   "failed",  "disabled"};
    return outcome >= 0 && outcome <= NG_OUT_DISABLED ? names[outcome] : "?";
}
