/*
 * envplugin.h: libncclguard.so as NCCL's env plugin (ncclEnvPlugin_v1 of
 * NCCL 2.28.7+, NVIDIA/nccl src/include/plugin/env/env_v1.h, declared in
 * envplugin.c from its fields), named in NCCL_ENV_PLUGIN.
 *
 * Owns: NCCL's reads of its variables. A variable the site policy forces is
 * answered with the forced value, and one it forbids with "unset", at the
 * moment NCCL reads it, whatever the process did to its environment since the
 * constructor; any other is getenv's answer. It records which NCCL_* names
 * NCCL read and, at exit, names the NCCL_* variables the environment sets and
 * NCCL never read (one line).
 *
 * A preloaded library names itself in NCCL_ENV_PLUGIN (setting env_plugin),
 * unless the site policy decided the variable or it is none; an env plugin the
 * job named there (or env_chain names) is chained: it answers every read that
 * the site's rules leave alone.
 *
 * Not yet: envcheck and the dump reporting the names read (issue 21).
 *
 * Threads: getEnv on any thread of NCCL's (once per variable, cached by NCCL);
 * a short mutex guards the table of names read. Not async-signal-safe.
 */
#ifndef NCCLGUARD_INTERCEPT_ENVPLUGIN_H
#define NCCLGUARD_INTERCEPT_ENVPLUGIN_H

/* The exit line: NCCL_* variables set and never read by NCCL (envplugin.c's atexit). */
void ncclguard_envplugin_report(void);

/* The constructor's step, after the site policy: NCCL_ENV_PLUGIN names this library,
 * the job's own plugin kept to be chained (see above). Before any thread (setenv). */
void ncclguard_envplugin_take_env(void);

#endif
