/*
 * pluginlib.h: how NCCL opens a plugin library by name (NVIDIA/nccl
 * src/plugin/plugin_open.cc), for the plugins ncclguard chains behind its own:
 * the name as given (STATIC_PLUGIN, or any prefix of it in any case: the
 * global scope), then, for a bare name that is not lib*.so, <prefix>-<name>.so;
 * and whether a name loads this library.
 *
 * Threads: any (dlopen); the constructor for ncclguard_plugin_names_self.
 */
#ifndef NCCLGUARD_INTERCEPT_PLUGINLIB_H
#define NCCLGUARD_INTERCEPT_PLUGINLIB_H

#include <stdbool.h>

/* dlopen's handle of plugin `name` by NCCL's rule; prefix "libnccl-profiler" or
 * "libnccl-env". NULL when it cannot be opened. */
void *ncclguard_plugin_open(const char *prefix, const char *name);

/* Whether the value `v` of NCCL_PROFILER_PLUGIN or NCCL_ENV_PLUGIN loads the library
 * at path `self` (the same file, or the global scope, where a preloaded library is
 * found first). */
bool ncclguard_plugin_names_self(const char *v, const char *self);

/* Whether `v` names another copy of ncclguard (a file named *ncclguard*): replaced,
 * never chained. */
bool ncclguard_plugin_names_ncclguard(const char *v);

/* Whether the library at path `self` was preloaded (named in LD_PRELOAD), and so started
 * before any thread of the process: else NCCL loaded it as its plugin while its own
 * threads may run, and the environment is not to be changed (setenv beside getenv). */
bool ncclguard_plugin_preloaded(const char *self);

#endif
