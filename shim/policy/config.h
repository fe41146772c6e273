/*
 * config.h: ncclguard's configuration: its sources, their precedence, and the
 * effective typed settings with the provenance of each value.
 *
 * Owns: the settings of settings.def (struct ng_settings), the environment
 * rules of [env.default], [env.force] and [env.forbid] (applied by policy.c),
 * and the list of sources read. Sources, lowest precedence first:
 *   built-in < site file < user file < NCCLGUARD_* variables < keys the site locked
 * The site file is /etc/ncclguard.conf, or the file NCCLGUARD_CONFIG names; the
 * user file is $XDG_CONFIG_HOME/ncclguard.conf (default ~/.config/ncclguard.conf).
 * The file format is described in docs/configuration.md.
 *
 * Storage is static and bounded (NG_ENV_RULES_MAX rules, NG_CONF_POOL bytes of
 * names and values), so loading never allocates beyond what libc's stat/open
 * need, and bad input at worst drops lines, with a message.
 *
 * Threads: loading runs in the library constructor (or the CLI) before other
 * threads exist; afterwards every accessor reads immutable data and may be
 * called from any thread. ncclguard_config_json is async-signal-safe.
 */
#ifndef NCCLGUARD_CONFIG_H
#define NCCLGUARD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define NG_STR_MAX 1024        /* STRING settings (paths), NUL included */
#define NG_ENV_RULES_MAX 256   /* [env.*] entries kept */
#define NG_ENV_GLOBS_MAX 32    /* of which NAME_* patterns ([env.forbid]) */
#define NG_CONF_WHEN_MAX 64    /* [when] sections per file */
#define NG_CONF_ENV_LINES 512  /* [env.*] lines per file */
#define NG_CONF_POOL 32768     /* bytes for the names and values of env rules */
#define NG_CONF_MSGS_MAX 10    /* problems reported per file; the rest are counted */

enum ng_source { NG_SRC_BUILTIN = 0, NG_SRC_SITE, NG_SRC_USER, NG_SRC_ENV, NG_SRC_COUNT };

/* Where a value comes from: "site /etc/ncclguard.conf:7", "env", "built-in". */
struct ng_origin {
    uint8_t source;  /* enum ng_source */
    uint8_t locked;  /* the site file locked this key (lock = ...) */
    uint32_t line;   /* line of a file source, 0 otherwise */
};

enum ng_key {
#define NG_SETTING(ID, key, type, def, lo, hi, choices) NG_KEY_##ID,
#include "policy/settings.def"
#undef NG_SETTING
    NG_KEY_COUNT
};

enum ng_type {
    NG_T_BOOL, NG_T_INT, NG_T_DOUBLE, NG_T_DURATION, NG_T_OPT_DURATION, NG_T_FACTOR,
    NG_T_BANDWIDTH, NG_T_ENUM, NG_T_SIGNAL, NG_T_STRING,
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

/* Values of the ENUM settings, in the order of their choices. */
enum { NG_TRACK_OFF = 0, NG_TRACK_END = 1, NG_TRACK_FULL = 2 };
enum { NG_AUDIT_OFF = 0, NG_AUDIT_NODE = 1, NG_AUDIT_ALL = 2 };
/* log_level uses enum ng_level of log.h (error, warn, info, debug). */

/* Static description of one setting (from settings.def). */
struct ng_setting_info {
    const char *id;      /* "TIMEOUT" */
    const char *key;     /* "timeout" */
    enum ng_type type;
    const char *def;     /* default, as text */
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
    uint8_t status;       /* enum ng_file_status */
    unsigned lines;       /* lines read */
    unsigned problems;    /* lines ignored, all reasons */
    char path[NG_STR_MAX];
    char why[160];        /* REFUSED: the reason */
};

/* --- loading (constructor, CLI, tests) ------------------------------------------------ */

/* Where the files are; NULL means the default location, "" means none. */
struct ng_config_paths {
    const char *site;
    const char *user;
};

/*
 * Reads every source into the effective settings: built-in, the site file,
 * the user file, then NCCLGUARD_* variables of envp, then the site's locks.
 * Re-runnable: each call starts from the built-in values. Problems are logged
 * one line each, at warn level when `talk` and at debug level otherwise (so
 * only one process per node speaks up).
 */
void ncclguard_config_load(const struct ng_config_paths *paths, char *const *envp, int talk);

/* The same in steps, for the fuzzer and tests: begin, add sources in order of
 * precedence, finish (environment, locks, derived values). */
void ncclguard_config_begin(int talk);
void ncclguard_config_add_file(enum ng_source src, const char *path);
void ncclguard_config_add_buffer(enum ng_source src, const char *name, const char *data,
                                 size_t len);
void ncclguard_config_finish(char *const *envp);

/* Default paths: NCCLGUARD_CONFIG or /etc/ncclguard.conf, and the user file
 * (written into user_buf; "" when neither XDG_CONFIG_HOME nor HOME is set). */
void ncclguard_config_default_paths(struct ng_config_paths *p, char *user_buf, size_t len);

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

/* The short name of a file source ("site", "user") and its status. */
const char *ncclguard_source_name(enum ng_source src);
const struct ng_file_source *ncclguard_config_file(enum ng_source src);

/* The environment rules, in the order they appear in the files. */
const struct ng_env_rule *ncclguard_config_env_rules(size_t *n);

/* --- timeouts and the escalation ladder (read by the watchdog) ------------------------ */

enum ng_timeout_kind { NG_TIMEOUT_OP, NG_TIMEOUT_FIRST_OP, NG_TIMEOUT_INIT };
enum ng_action { NG_ACTION_WARN, NG_ACTION_DUMP, NG_ACTION_ABORT, NG_ACTION_KILL };

/* Index for the per-op timeouts of an op named as NCCL spells it ("AllReduce";
 * "Bcast" counts as "Broadcast"); -1 for anything else. */
int ncclguard_timeout_op(const char *nccl_op_name);

/*
 * The timeout of an op, in seconds, 0 when off:
 *   OP:       (timeout_<op> if set, else timeout) + bytes / floor_bandwidth
 *   FIRST_OP: the larger of first_timeout and OP's base, + bytes / floor_bandwidth
 *   INIT:     init_timeout (op and bytes unused)
 * floor_bandwidth = off adds nothing. op may be -1 (no per-op value).
 */
double ncclguard_timeout_s(const struct ng_settings *s, enum ng_timeout_kind kind, int op,
                           uint64_t bytes);

/* When an action fires for an op with this timeout: its multiple (warn_at,
 * dump_at, abort_at, kill_at) times timeout_s; 0 when the action is off. */
double ncclguard_action_after_s(const struct ng_settings *s, enum ng_action a, double timeout_s);

/* --- the dump's "config" object ------------------------------------------------------- */

/*
 * Writes the effective settings (value, origin, lock), the sources and the
 * environment changes of policy.c as one JSON object into buf (NUL-terminated).
 * Returns the length written, or -1 when buf is too small (buf then holds
 * "{}"). With buf NULL, returns the length it would write (size the buffer with
 * that + 1; it does not change after the constructor). No allocation, no stdio,
 * no locale: async-signal-safe.
 */
long ncclguard_config_json(char *buf, size_t len);

/* Forgets everything loaded (tests). */
void ncclguard_config_reset(void);

#endif
