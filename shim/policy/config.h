/*
 * config.h: ncclguard's configuration: its sources, their precedence, and the
 * effective typed settings with the provenance of each value.
 *
 * Owns: the settings of settings.def (struct ng_settings), the environment
 * rules of [env.default], [env.force] and [env.forbid] (applied by policy.c),
 * and the list of sources read. Sources, lowest precedence first:
 *   built-in < site file < user file < job file < NCCLGUARD_* variables
 *            < keys the site locked, and the site's [env.force] and [env.forbid]
 * The site file is /etc/ncclguard.conf (config_load.h); the user file is
 * $XDG_CONFIG_HOME/ncclguard.conf (default ~/.config/ncclguard.conf); the job file
 * is the one NCCLGUARD_CONFIG names, which adds to the site file and never
 * replaces it. Only the site file may lock. The file format and the precedence
 * are described in docs/configuration.md.
 *
 * Storage is static and bounded (NG_ENV_RULES_MAX rules, NG_CONF_POOL bytes of
 * names and values), so loading never allocates beyond what libc's stat/open
 * need, and bad input at worst drops lines, with a message.
 *
 * Threads: loading runs in the library constructor (or the CLI) before other
 * threads exist; afterwards every accessor reads immutable data and may be
 * called from any thread, and from a signal handler.
 */
#ifndef NCCLGUARD_CONFIG_H
#define NCCLGUARD_CONFIG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ops.h"

#define NG_STR_MAX 1024       /* STRING settings (paths), NUL included */
#define NG_ENV_RULES_MAX 256  /* [env.*] entries kept */
#define NG_ENV_GLOBS_MAX 32   /* of which NAME_* patterns ([env.forbid]) */
#define NG_CONF_WHEN_MAX 64   /* [when] sections per file */
#define NG_CONF_ENV_LINES 512 /* [env.*] lines per file */
#define NG_CONF_POOL 32768    /* bytes for the names and values of env rules */
#define NG_CONF_MSGS_MAX 10   /* problems reported per file; the rest are counted */

enum ng_source {
    NG_SRC_BUILTIN = 0,
    NG_SRC_SITE,
    NG_SRC_USER,
    NG_SRC_JOB,
    NG_SRC_ENV,
    NG_SRC_COUNT
};
/* The file sources, in the order they are read. */
#define NG_SRC_FIRST_FILE NG_SRC_SITE
#define NG_SRC_LAST_FILE NG_SRC_JOB

/* Where a value comes from: "site /etc/ncclguard.conf:7", "env", "built-in". */
struct ng_origin {
    uint8_t source; /* enum ng_source */
    uint8_t locked; /* the site file locked this key (lock = ...) */
    uint32_t line;  /* line of a file source, 0 otherwise */
};

enum ng_key {
#define NG_SETTING(ID, key, type, def, lo, hi, choices) NG_KEY_##ID,
#include "policy/settings.def"
#undef NG_SETTING
    NG_KEY_COUNT
};

enum ng_type {
    NG_T_BOOL,
    NG_T_INT,
    NG_T_DOUBLE,
    NG_T_DURATION,
    NG_T_OPT_DURATION,
    NG_T_FACTOR,
    NG_T_BANDWIDTH,
    NG_T_ENUM,
    NG_T_SIGNAL,
    NG_T_STRING,
};

#define NG_FIELD_BOOL(k) int k;
#define NG_FIELD_INT(k) long long k;
#define NG_FIELD_DOUBLE(k) double k;
#define NG_FIELD_DURATION(k) double k;     /* seconds; 0 = off */
#define NG_FIELD_OPT_DURATION(k) double k; /* seconds; < 0 = inherit from `timeout` */
#define NG_FIELD_FACTOR(k) double k;       /* multiple of the op's timeout; 0 = off */
#define NG_FIELD_BANDWIDTH(k) double k;    /* bytes per second; 0 = off */
#define NG_FIELD_ENUM(k) int k;            /* index into the choices of settings.def */
#define NG_FIELD_SIGNAL(k) int k;          /* signal number; 0 = off */
#define NG_FIELD_STRING(k) char k[NG_STR_MAX];

/* The effective value of every NCCLGUARD_* setting, and where it came from. */
struct ng_settings {
#define NG_SETTING(ID, key, type, def, lo, hi, choices) NG_FIELD_##type(key)
#include "policy/settings.def"
#undef NG_SETTING
    struct ng_origin origin[NG_KEY_COUNT];
};

/* Values of the ENUM settings, in the order of their choices. track uses enum
 * ng_track_mode of base/ops.h, log_level enum ng_level of base/log.h. */
enum { NG_AUDIT_OFF = 0, NG_AUDIT_NODE = 1, NG_AUDIT_ALL = 2 };

/* Static description of one setting (from settings.def). */
struct ng_setting_info {
    const char *id;  /* "TIMEOUT" */
    const char *key; /* "timeout" */
    enum ng_type type;
    const char *def; /* default, as text */
    double lo, hi;
    const char *choices; /* ENUM: "off|end|full" */
    size_t offset;       /* of the field in struct ng_settings */
};

enum ng_env_action { NG_ENV_DEFAULT = 0, NG_ENV_FORCE, NG_ENV_FORBID };

/* One line of [env.default], [env.force] or [env.forbid] that survived precedence. */
struct ng_env_rule {
    uint8_t action;          /* enum ng_env_action */
    struct ng_origin origin; /* always a file source */
    const char *name;        /* variable; FORBID may end in '*' */
    const char *value;       /* DEFAULT/FORCE: the value; FORBID: the reason, maybe "" */
};

/* How a file source fared. */
enum ng_file_status { NG_FILE_NONE = 0, NG_FILE_ABSENT, NG_FILE_REFUSED, NG_FILE_LOADED };

struct ng_file_source {
    uint8_t status;    /* enum ng_file_status */
    unsigned lines;    /* lines read */
    unsigned problems; /* lines ignored, all reasons */
    char path[NG_STR_MAX];
    char why[160]; /* REFUSED: the reason */
};

/* --- loading (constructor, CLI, tests) ------------------------------------------------ */

/* A load in steps (config_load.h adds the sources): begin, sources in order of
 * precedence, finish (environment, locks, derived values). */
void ncclguard_config_begin(int talk);
void ncclguard_config_finish(char *const *envp);

/* What is being read: the source, its file record and the current line. The
 * loader (config_load.c) fills it and hands it to the functions below. */
struct ng_conf_ctx {
    enum ng_source src;
    struct ng_file_source *file;
    unsigned line;
    int section;    /* enum section of config_load.c */
    unsigned whens; /* [when] headers so far */
    unsigned envs;  /* [env.*] lines so far */
};

/* Reports a problem of the current line, then "; <consequence>" (at most
 * NG_CONF_MSGS_MAX per file; the others are counted). problem says "line ignored". */
void ncclguard_conf_problem(struct ng_conf_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ncclguard_conf_vproblem(struct ng_conf_ctx *c, const char *consequence, const char *fmt,
                             va_list ap);

/* Logs one line at warn level when this process talks, else at debug. */
void ncclguard_conf_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "key = value" of [ncclguard] or [when]; "lock = a, b"; an [env.*] entry (value
 * NULL when the line had no '='). */
void ncclguard_conf_set(struct ng_conf_ctx *c, const char *key, const char *value);
void ncclguard_conf_lock(struct ng_conf_ctx *c, const char *list);
void ncclguard_conf_env(struct ng_conf_ctx *c, enum ng_env_action a, const char *name,
                        const char *value);

/* The record of a file source. */
struct ng_file_source *ncclguard_conf_file_slot(enum ng_source src);

/* --- results ------------------------------------------------------------------------ */

/* The effective settings; the built-in values before anything was loaded. */
const struct ng_settings *ncclguard_settings(void);

const struct ng_setting_info *ncclguard_setting_info(int key);

/* Key of "timeout" or "NCCLGUARD_TIMEOUT" (any case); -1 when unknown. */
int ncclguard_setting_key(const char *name);

/* The value of a setting as text, as a config file would spell it. */
const char *ncclguard_setting_text(const struct ng_settings *s, int key, char *buf, size_t len);

/* "built-in", "env NCCLGUARD_TIMEOUT", "site /etc/ncclguard.conf:7 (locked)". */
const char *ncclguard_origin_text(const struct ng_origin *o, int key, char *buf, size_t len);

/* The short name of a source ("site", "user", "job", "env") and a file source's status. */
const char *ncclguard_source_name(enum ng_source src);
const struct ng_file_source *ncclguard_config_file(enum ng_source src);

/* The environment rules, in the order they appear in the files. */
const struct ng_env_rule *ncclguard_config_env_rules(size_t *n);

/* The value of setting `key`, for code that walks the settings by key (the
 * dump's config object, the per-op timeouts): numbers as a double (an
 * OPT_DURATION that inherits is -1; BOOL, INT, ENUM and SIGNAL as their integer);
 * STRING settings give 0 here and their text from ncclguard_setting_string. */
double ncclguard_setting_number(const struct ng_settings *s, int key);
const char *ncclguard_setting_string(const struct ng_settings *s, int key);

/* Forgets everything loaded (tests). */
void ncclguard_config_reset(void);

#endif
