/*
 * config_load.h: reading the configuration sources, in order of precedence.
 *
 * Owns: the line grammar of config files ("[section]" headers, "key = value"
 * entries, comments after # or ; at the start of a line or after a blank, blank
 * lines), the reading of files and buffers into the model of config.c, and the
 * whole load: built-in, the site file, the user file, the job file
 * (NCCLGUARD_CONFIG), NCCLGUARD_* variables, then the site's locks. Problems are
 * reported as "<file>:<line>: <problem>; line ignored" through config.c.
 *
 * Threads: constructor and CLI only.
 */
#ifndef NCCLGUARD_CONFIG_LOAD_H
#define NCCLGUARD_CONFIG_LOAD_H

#include "policy/config.h"

/* The site file. It always applies when it exists: no variable of the job
 * replaces or removes it. */
#include "policy/testswitch.h" /* NG_SITE_CONFIG */

/* Where the files are; NULL means the default location, "" means none. */
struct ng_config_paths {
    const char *site;
    const char *user;
    const char *job;
};

/*
 * Reads every source into the effective settings: built-in, the site file,
 * the user file, the job file, then NCCLGUARD_* variables of envp, then the
 * site's locks. Re-runnable: each call starts from the built-in values. Problems
 * are logged one line each, at warn level when `talk` and at debug level
 * otherwise (so only one process per node speaks up).
 */
void ncclguard_config_load(const struct ng_config_paths *paths, char *const *envp, int talk);

/* Adds one source to a load begun with ncclguard_config_begin (config.h), in
 * order of precedence: a file, or a buffer (the fuzzer, tests). */
void ncclguard_config_add_file(enum ng_source src, const char *path);
void ncclguard_config_add_buffer(enum ng_source src, const char *name, const char *data,
                                 size_t len);

/*
 * Default paths: the site file NG_SITE_CONFIG; the user file (written into
 * user_buf; "" when neither XDG_CONFIG_HOME nor HOME is set); the job file
 * NCCLGUARD_CONFIG ("" when unset). For tests only, NCCLGUARD_TEST_SITE_CONFIG
 * names another site file, and is honoured only while NG_SITE_CONFIG does not
 * exist: on a machine with a site file it changes nothing, and on one without
 * it gives a job no more than NCCLGUARD_CONFIG could (there are no site locks
 * to escape).
 */
void ncclguard_config_default_paths(struct ng_config_paths *p, char *user_buf, size_t len);

#endif
