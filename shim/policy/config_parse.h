/*
 * config_parse.h: the line grammar of config files, between confread.c (which
 * splits a file into bounded lines) and config.c (which owns the model).
 *
 * A file is a list of lines: "[section]" headers, "key = value" entries,
 * comments (# or ; at the start of a line or after a blank) and blank lines.
 * config_parse.c recognises them and calls the ncclguard_conf_* functions of
 * config.c, which apply precedence and report problems through
 * ncclguard_conf_problem ("<file>:<line>: <problem>; line ignored").
 *
 * Threads: constructor and CLI only.
 */
#ifndef NCCLGUARD_CONFIG_PARSE_H
#define NCCLGUARD_CONFIG_PARSE_H

#include "policy/config.h"

/* What is being parsed: the source, its file record and the current line. */
struct ng_conf_ctx {
    enum ng_source src;
    struct ng_file_source *file;
    unsigned line;
    int section;    /* enum section of config_parse.c */
    unsigned whens; /* [when] headers so far */
    unsigned envs;  /* [env.*] lines so far */
};

/* Reports a problem of the current line (at most NG_CONF_MSGS_MAX per file). */
void ncclguard_conf_problem(struct ng_conf_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* config.c: logs one line at warn level when this process talks, else at debug. */
void ncclguard_conf_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* config.c: "key = value" of [ncclguard] or [when]; "lock = a, b"; an [env.*] entry
 * (value NULL when the line had no '='). */
void ncclguard_conf_set(struct ng_conf_ctx *c, const char *key, const char *value);
void ncclguard_conf_lock(struct ng_conf_ctx *c, const char *list);
void ncclguard_conf_env(struct ng_conf_ctx *c, enum ng_env_action a, const char *name,
                        const char *value);

/* config.c: the record of a file source. */
struct ng_file_source *ncclguard_conf_file_slot(enum ng_source src);

#endif
