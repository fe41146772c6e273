/*
 * config.c: see config.h. This file owns the model (settings, env rules, locks,
 * precedence); config_load.c turns the lines of a file into calls of the
 * ncclguard_conf_* functions below, and config_json.c serialises the result.
 *
 * Precedence needs no sorting: sources are read lowest first (site file, user
 * file, job file, environment), so each value simply replaces the previous one,
 * unless the site locked the key. The site file is always read before anything
 * that a lock restricts.
 */
#include "policy/config.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/identity.h"
#include "base/log.h"
#include "policy/confvalue.h"
#include "policy/strdist.h"
#include "policy/testswitch.h"

static const struct ng_setting_info infos[NG_KEY_COUNT] = {
#define NG_SETTING(ID, key, type, def, lo, hi, choices) \
    {#ID, #key, NG_T_##type, def, lo, hi, choices, offsetof(struct ng_settings, key)},
#include "policy/settings.def"
#undef NG_SETTING
};

static struct ng_settings builtin, eff;
static int loaded; /* eff holds a loaded configuration */
static int talk;   /* problems at warn level (else debug) */
static struct ng_file_source files[NG_SRC_COUNT];
static uint32_t lock_line[NG_KEY_COUNT]; /* line of the site's lock, 0 = not locked */
static struct ng_env_rule rules[NG_ENV_RULES_MAX];
static size_t nrules;
#define NG_RULE_SLOTS 1024               /* hash slots for rule names: a power of two > 2 x rules */
static int16_t rule_slot[NG_RULE_SLOTS]; /* rule index, -1 for an empty slot */
static uint16_t globs[NG_ENV_GLOBS_MAX]; /* rules whose name is a NAME_* pattern */
static size_t nglobs;
static char pool[NG_CONF_POOL];
static size_t pool_used;

/* --- messages --------------------------------------------------------------------- */

void ncclguard_conf_say(const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ncclguard_log(talk ? NG_LOG_WARN : NG_LOG_DEBUG, "%s", msg);
}

void ncclguard_conf_vproblem(struct ng_conf_ctx *c, const char *consequence, const char *fmt,
                             va_list ap)
{
    char msg[700];
    if (++c->file->problems > NG_CONF_MSGS_MAX) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    ncclguard_conf_say("%s:%u: %s; %s", c->file->path, c->line, msg, consequence);
}

void ncclguard_conf_problem(struct ng_conf_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ncclguard_conf_vproblem(c, "line ignored", fmt, ap);
    va_end(ap);
}

/* --- setting values ----------------------------------------------------------------- */

const struct ng_setting_info *ncclguard_setting_info(int key)
{
    return key >= 0 && key < NG_KEY_COUNT ? &infos[key] : NULL;
}

int ncclguard_setting_key(const char *name)
{
    if (!strncasecmp(name, "NCCLGUARD_", 10)) name += 10;
    char first = (char)(name[0] | 0x20); /* keys are lower case and start with a letter */
    for (int k = 0; k < NG_KEY_COUNT; k++)
        if (infos[k].key[0] == first && !strcasecmp(name, infos[k].key)) return k;
    return -1;
}

static const char *expected(const struct ng_setting_info *in, char *buf, size_t len)
{
    switch (in->type) {
    case NG_T_BOOL: return "yes or no";
    case NG_T_INT: snprintf(buf, len, "an integer from %.0f to %.0f", in->lo, in->hi); return buf;
    case NG_T_DOUBLE: snprintf(buf, len, "a number from %.0f to %.0f", in->lo, in->hi); return buf;
    case NG_T_DURATION:
        snprintf(buf, len, "a duration from %.0f s to %.0f s such as 300, 90s, 10m or 1h%s", in->lo,
                 in->hi, in->lo == 0 ? ", or off" : "");
        return buf;
    case NG_T_OPT_DURATION: return "a duration such as 600, 10m or 1h, or inherit";
    case NG_T_FACTOR: return "a multiple of the op's timeout such as 1, 1.5x or off";
    case NG_T_BANDWIDTH: return "a bandwidth in bytes per second such as 1GB/s, 500MB/s or off";
    case NG_T_ENUM: snprintf(buf, len, "one of %s", in->choices); return buf;
    case NG_T_SIGNAL: return "a signal such as SIGUSR2 or 12 (not KILL, STOP or a fault), or off";
    default: return "a path shorter than 1024 bytes";
    }
}

/* Why text is not a value of key, for a message (formatted only when one is shown). */
static const char *bad_value(int key, const char *text, char *why, size_t whylen)
{
    char buf[160];
    snprintf(why, whylen, "%s: '%.64s' is not %s", infos[key].key, text,
             expected(&infos[key], buf, sizeof buf));
    return why;
}

/* Parses text as a value of key and stores it into s; -1 (s untouched) when invalid. */
static int set_value(struct ng_settings *s, int key, const char *text)
{
    const struct ng_setting_info *in = &infos[key];
    char *field = (char *)s + in->offset;
    double d = 0;
    long long ll = 0;
    int i = 0, rc;
    switch (in->type) {
    case NG_T_BOOL: rc = ncclguard_parse_bool(text, &i); break;
    case NG_T_ENUM: rc = (i = ncclguard_parse_choice(text, in->choices)) < 0 ? -1 : 0; break;
    case NG_T_SIGNAL: rc = ncclguard_parse_signal(text, &i); break;
    case NG_T_INT:
        rc = ncclguard_parse_int(text, &ll);
        if (rc == 0 && (ll < in->lo || ll > in->hi)) rc = -1;
        break;
    case NG_T_STRING: rc = strlen(text) < NG_STR_MAX ? 0 : -1; break;
    default:
        if (in->type == NG_T_OPT_DURATION && !strcasecmp(text, "inherit")) {
            d = -1;
            rc = 0;
            break;
        }
        rc = in->type == NG_T_DOUBLE      ? ncclguard_parse_decimal(text, &d)
             : in->type == NG_T_FACTOR    ? ncclguard_parse_factor(text, &d)
             : in->type == NG_T_BANDWIDTH ? ncclguard_parse_bandwidth(text, &d)
                                          : ncclguard_parse_duration(text, &d);
        if (rc == 0 && (d < in->lo || d > in->hi)) rc = -1;
        break;
    }
    if (rc != 0) return -1;
    switch (in->type) {
    case NG_T_BOOL:
    case NG_T_ENUM:
    case NG_T_SIGNAL: memcpy(field, &i, sizeof i); break;
    case NG_T_INT: memcpy(field, &ll, sizeof ll); break;
    case NG_T_STRING: memcpy(field, text, strlen(text) + 1); break;
    default: memcpy(field, &d, sizeof d); break;
    }
    return 0;
}

/* The only reader of a setting's field by its offset (set_value is the only writer). */
double ncclguard_setting_number(const struct ng_settings *s, int key)
{
    const struct ng_setting_info *in = &infos[key];
    const char *field = (const char *)s + in->offset;
    int i;
    long long ll;
    double d;
    switch (in->type) {
    case NG_T_BOOL:
    case NG_T_ENUM:
    case NG_T_SIGNAL: memcpy(&i, field, sizeof i); return i;
    case NG_T_INT: memcpy(&ll, field, sizeof ll); return (double)ll;
    case NG_T_STRING: return 0;
    default: memcpy(&d, field, sizeof d); return d;
    }
}

const char *ncclguard_setting_string(const struct ng_settings *s, int key)
{
    const struct ng_setting_info *in = &infos[key];
    return in->type == NG_T_STRING ? (const char *)s + in->offset : "";
}

const char *ncclguard_setting_text(const struct ng_settings *s, int key, char *buf, size_t len)
{
    const struct ng_setting_info *in = &infos[key];
    double v = ncclguard_setting_number(s, key);
    switch (in->type) {
    case NG_T_BOOL: return v ? "yes" : "no";
    case NG_T_ENUM: return ncclguard_choice_name(in->choices, (int)v, buf, len);
    case NG_T_SIGNAL: return ncclguard_signal_name((int)v, buf, len);
    case NG_T_STRING: return ncclguard_setting_string(s, key);
    case NG_T_INT: snprintf(buf, len, "%lld", (long long)v); return buf;
    default: break;
    }
    if (in->type == NG_T_OPT_DURATION && v < 0) return "inherit";
    if (v == 0 && in->type != NG_T_DOUBLE) return "off";
    snprintf(buf, len, "%g%s", v,
             in->type == NG_T_FACTOR      ? "x"
             : in->type == NG_T_BANDWIDTH ? "B/s"
             : in->type == NG_T_DOUBLE    ? ""
                                          : "s");
    return buf;
}

static void init_builtin(void)
{
    for (int k = 0; k < NG_KEY_COUNT; k++)
        if (set_value(&builtin, k, infos[k].def) != 0) abort(); /* settings.def: a build bug */
}

static void ensure_builtin(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_builtin);
}

/* The setting whose key (or id, e.g. "TIMEOUT") is close to name; -1 if none. */
static int closest_setting(const char *name, int by_id)
{
    int best = 1 << 20, at = -1, limit = ncclguard_suggest_limit(name);
    size_t len = strlen(name);
    for (int i = 0; i < NG_KEY_COUNT; i++) {
        const char *cand = by_id ? infos[i].id : infos[i].key;
        size_t clen = strlen(cand);
        if ((clen > len ? clen - len : len - clen) > (size_t)limit) continue;
        int d = ncclguard_edit_distance_within(name, cand, limit);
        if (d < best) best = d, at = i;
    }
    return best <= limit ? at : -1;
}

/* --- what config_load.c calls ---------------------------------------------------------- */

void ncclguard_conf_set(struct ng_conf_ctx *c, const char *key, const char *value)
{
    int k = ncclguard_setting_key(key);
    char why[320] = "";
    if (k < 0) {
        /* a suggestion only for problems that will be shown: bounded work for any file */
        int near = c->file->problems < NG_CONF_MSGS_MAX ? closest_setting(key, 0) : -1;
        char dym[100] = "";
        if (near >= 0) snprintf(dym, sizeof dym, "; did you mean '%s'?", infos[near].key);
        ncclguard_conf_problem(c, "unknown setting '%.64s'%s", key, dym);
        return;
    }
    if (c->src != NG_SRC_SITE && lock_line[k]) {
        ncclguard_conf_problem(c, "%s is locked by the site file (%s:%u)", infos[k].key,
                               files[NG_SRC_SITE].path, lock_line[k]);
        return;
    }
    if (set_value(&eff, k, value) != 0) {
        if (c->file->problems < NG_CONF_MSGS_MAX) bad_value(k, value, why, sizeof why);
        ncclguard_conf_problem(c, "%s", why);
        return;
    }
    eff.origin[k] = (struct ng_origin){.source = (uint8_t)c->src, .line = c->line};
}

void ncclguard_conf_lock(struct ng_conf_ctx *c, const char *list)
{
    if (c->src != NG_SRC_SITE) {
        ncclguard_conf_problem(c, "'lock' is only allowed in the site file");
        return;
    }
    char name[64];
    for (const char *p = list; *p;) {
        p += strspn(p, ", \t");
        size_t w = strcspn(p, ", \t");
        if (!w) break;
        snprintf(name, sizeof name, "%.*s", (int)(w < sizeof name ? w : sizeof name - 1), p);
        int k = ncclguard_setting_key(name);
        if (k < 0)
            ncclguard_conf_problem(c, "lock: unknown setting '%s' (the others are locked)", name);
        else
            lock_line[k] = c->line;
        p += w;
    }
}

static const char *pool_copy(const char *s)
{
    size_t n = strlen(s) + 1;
    if (n > sizeof pool - pool_used) return NULL;
    char *d = pool + pool_used;
    memcpy(d, s, n);
    pool_used += n;
    return d;
}

/* Index of the rule named name, through an open-addressing hash of rule indices,
 * so that a file of thousands of [env.*] lines stays linear. -1 when absent. */
static int find_rule(const char *name, size_t *slot)
{
    size_t h = (size_t)ng_hash_str(name) & (NG_RULE_SLOTS - 1);
    for (;; h = (h + 1) & (NG_RULE_SLOTS - 1)) {
        int i = rule_slot[h];
        if (i < 0 || !strcmp(rules[i].name, name)) {
            *slot = h;
            return i;
        }
    }
}

/* A rule of a lower source that a site force or forbid overrides, or NULL. */
static const struct ng_env_rule *site_override(const char *name)
{
    size_t slot;
    int i = find_rule(name, &slot);
    if (i >= 0 && rules[i].origin.source == NG_SRC_SITE && rules[i].action != NG_ENV_DEFAULT)
        return &rules[i];
    for (size_t g = 0; g < nglobs; g++) {
        const struct ng_env_rule *r = &rules[globs[g]];
        if (r->origin.source == NG_SRC_SITE && !fnmatch(r->name, name, 0)) return r;
    }
    return NULL;
}

static int valid_env_name(const char *s, int allow_star)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_' ||
              (*s >= '0' && *s <= '9')))
            return allow_star && s[0] == '*' && s[1] == '\0';
    return 1;
}

void ncclguard_conf_env(struct ng_conf_ctx *c, enum ng_env_action a, const char *name,
                        const char *value)
{
    static const char *const label[] = {"env.default", "env.force", "env.forbid"};
    if (strlen(name) > 128 || !valid_env_name(name, a == NG_ENV_FORBID)) {
        ncclguard_conf_problem(c, "%s: '%.64s' is not a variable name%s", label[a], name,
                               a == NG_ENV_FORBID ? " or a NAME_* pattern" : "");
        return;
    }
    if (!strncmp(name, "NCCLGUARD_", 10)) {
        int k = ncclguard_setting_key(name);
        ncclguard_conf_problem(c,
                               "%s is a setting of ncclguard: write '%s = ...' in "
                               "[ncclguard] instead",
                               name, k >= 0 ? infos[k].key : "key");
        return;
    }
    if (a != NG_ENV_FORBID && !value) {
        ncclguard_conf_problem(c, "%s: %s needs a value ('%s = value')", label[a], name, name);
        return;
    }
    const struct ng_env_rule *site = c->src != NG_SRC_SITE ? site_override(name) : NULL;
    if (site) {
        ncclguard_conf_problem(c, "%s is %s by the site file (%s:%u)", name,
                               site->action == NG_ENV_FORCE ? "forced" : "forbidden",
                               files[NG_SRC_SITE].path, site->origin.line);
        return;
    }
    size_t slot;
    int i = find_rule(name, &slot);
    int glob = strchr(name, '*') != NULL;
    if (i < 0 && nrules == NG_ENV_RULES_MAX) {
        ncclguard_conf_problem(c, "too many [env.*] entries (the limit is %d)", NG_ENV_RULES_MAX);
        return;
    }
    if (i < 0 && glob && nglobs == NG_ENV_GLOBS_MAX) {
        ncclguard_conf_problem(c, "too many NAME_* patterns (the limit is %d)", NG_ENV_GLOBS_MAX);
        return;
    }
    const char *n = i >= 0 ? rules[i].name : pool_copy(name), *v = pool_copy(value ? value : "");
    if (!n || !v) {
        ncclguard_conf_problem(c, "[env.*] names and values exceed %d bytes in all", NG_CONF_POOL);
        return;
    }
    if (i < 0) {
        i = (int)nrules++;
        rule_slot[slot] = (int16_t)i;
        if (glob) globs[nglobs++] = (uint16_t)i;
    }
    rules[i] = (struct ng_env_rule){.action = (uint8_t)a,
                                    .name = n,
                                    .value = v,
                                    .origin = {.source = (uint8_t)c->src, .line = c->line}};
}

struct ng_file_source *ncclguard_conf_file_slot(enum ng_source src)
{
    return &files[src];
}

/* --- loading ------------------------------------------------------------------------ */

void ncclguard_config_reset(void)
{
    ensure_builtin();
    eff = builtin;
    loaded = 0;
    memset(files, 0, sizeof files);
    memset(lock_line, 0, sizeof lock_line);
    nrules = 0;
    nglobs = 0;
    memset(rule_slot, 0xff, sizeof rule_slot);
    pool_used = 0;
}

void ncclguard_config_begin(int talk_)
{
    ncclguard_config_reset();
    talk = talk_;
    loaded = 1;
}

/* NCCLGUARD_* variables that are not settings but are read elsewhere
 * (NCCLGUARD_DEBUG_DIRS: by the command, cli/dump/symres.c). */
static int other_variable(const char *name, size_t n)
{
    static const char *const others[] = {"NCCLGUARD_CONFIG", "NCCLGUARD_POLICY_APPLIED",
                                         "NCCLGUARD_DEBUG_DIRS"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (strlen(others[i]) == n && !strncmp(name, others[i], n)) return 1;
    return n > 15 && !strncmp(name, "NCCLGUARD_TEST_", 15);
}

/* The environment layer: NCCLGUARD_<ID>=value for every setting, unless locked. */
static void apply_env(char *const *envp)
{
    char name[128], why[320], buf[160];
    int test_said = 0; /* one line for the test switches a site file turns off */
    /* a level the site locked also governs the lines below, which may refuse the
     * job's NCCLGUARD_LOG_LEVEL: a lower level set from it must not hide them */
    if (lock_line[NG_KEY_LOG_LEVEL]) ncclguard_log_set_level(eff.log_level);
    for (; envp && *envp; envp++) {
        const char *e = *envp, *eq = strchr(e, '=');
        if (strncmp(e, "NCCLGUARD_", 10) || !eq || !eq[1]) continue;
        size_t n = (size_t)(eq - e);
        if (n > 15 && !strncmp(e, "NCCLGUARD_TEST_", 15) && !test_said &&
            !ncclguard_test_switches_on()) {
            test_said = 1;
            ncclguard_conf_say("%.*s ignored (environment): test switches (NCCLGUARD_TEST_*) "
                               "apply only on a machine without a site file (%s)",
                               (int)n, e, NG_SITE_CONFIG);
        }
        if (other_variable(e, n)) continue;
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), e);
        int k = -1;
        for (int i = 0; i < NG_KEY_COUNT && k < 0; i++)
            if (!strcmp(name + 10, infos[i].id)) k = i;
        if (k < 0) {
            int near = closest_setting(name + 10, 1);
            if (near >= 0)
                ncclguard_conf_say("%s is not a setting of ncclguard (environment): did you mean "
                                   "NCCLGUARD_%s?",
                                   name, infos[near].id);
            else
                ncclguard_conf_say("%s is not a setting of ncclguard (environment): see "
                                   "docs/configuration.md for the list",
                                   name);
            continue;
        }
        if (lock_line[k]) {
            char cur[160];
            ncclguard_conf_say("%s=%s ignored (environment): the site locked %s at %s "
                               "(%s:%u); ask the cluster admins to change it",
                               name, eq + 1, infos[k].key,
                               ncclguard_setting_text(&eff, k, cur, sizeof cur),
                               files[NG_SRC_SITE].path, lock_line[k]);
            continue;
        }
        if (set_value(&eff, k, eq + 1) != 0) {
            ncclguard_conf_say("%s=%s ignored (environment): %s; using %s (%s)", name, eq + 1,
                               bad_value(k, eq + 1, why, sizeof why),
                               ncclguard_setting_text(&eff, k, buf, sizeof buf),
                               ncclguard_origin_text(&eff.origin[k], k, buf + 80, 80));
            continue;
        }
        eff.origin[k] = (struct ng_origin){.source = NG_SRC_ENV};
    }
}

void ncclguard_config_finish(char *const *envp)
{
    apply_env(envp);
    for (int k = 0; k < NG_KEY_COUNT; k++)
        if (lock_line[k]) eff.origin[k].locked = 1;
    if (!eff.dump_dir[0]) ncclguard_default_dump_dir(eff.dump_dir, sizeof eff.dump_dir);
}

/* --- results ------------------------------------------------------------------------ */

const struct ng_settings *ncclguard_settings(void)
{
    ensure_builtin();
    return loaded ? &eff : &builtin;
}

const char *ncclguard_source_name(enum ng_source src)
{
    static const char *const names[] = {"built-in", "site", "user", "job", "env"};
    return src < NG_SRC_COUNT ? names[src] : "?";
}

const struct ng_file_source *ncclguard_config_file(enum ng_source src)
{
    return src < NG_SRC_COUNT ? &files[src] : NULL;
}

const char *ncclguard_origin_text(const struct ng_origin *o, int key, char *buf, size_t len)
{
    switch (o->source) {
    case NG_SRC_SITE:
    case NG_SRC_USER:
    case NG_SRC_JOB:
        snprintf(buf, len, "%s %s:%u%s", ncclguard_source_name(o->source), files[o->source].path,
                 o->line, o->locked ? " (locked)" : "");
        break;
    case NG_SRC_ENV:
        snprintf(buf, len, "env NCCLGUARD_%s",
                 key >= 0 && key < NG_KEY_COUNT ? infos[key].id : "?");
        break;
    default: snprintf(buf, len, "built-in%s", o->locked ? " (locked)" : ""); break;
    }
    return buf;
}

const struct ng_env_rule *ncclguard_config_env_rules(size_t *n)
{
    *n = nrules;
    return rules;
}
