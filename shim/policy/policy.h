/*
 * policy.h: applying the site policy to the process environment at start-up.
 *
 * Owns: the constructor's policy step (load the config sources, then set,
 * force and remove environment variables with setenv/unsetenv, before NCCL or
 * Python read them), the list of changes with their provenance (for logs, the
 * dump and the audit), and NCCLGUARD_POLICY_APPLIED, which tells a child
 * process which variables a parent's policy set, so that parent and child
 * agree (idempotence).
 *
 * Each change is logged once per node: by processes whose local rank is 0 or
 * unknown (a launcher), or by every process with NCCLGUARD_VERBOSE=1.
 * Example: "ncclguard: NCCL_IB_TIMEOUT=22 (site default, /etc/ncclguard.conf:7;
 * was unset)".
 *
 * Threads: ncclguard_policy_apply_at_start runs in the constructor, before any
 * other thread exists (setenv is not thread-safe). The accessors read immutable
 * data afterwards and may be called from any thread, and from a signal handler.
 */
#ifndef NCCLGUARD_POLICY_H
#define NCCLGUARD_POLICY_H

#include <stddef.h>

#include "policy/config.h"

#define NG_POLICY_CHANGES_MAX 256
#define NG_POLICY_POOL 16384 /* previous values and matched names */

enum ng_env_outcome {
    NG_OUT_SET,      /* default applied: the variable was unset */
    NG_OUT_REPLACED, /* default applied over a value that a parent's policy had set */
    NG_OUT_ALREADY,  /* the variable already had the policy's value */
    NG_OUT_KEPT,     /* default not applied: the user's environment has its own value */
    NG_OUT_FORCED,   /* force applied over another value or an unset variable */
    NG_OUT_REMOVED,  /* forbid: the variable was removed */
    NG_OUT_ABSENT,   /* forbid: nothing to remove */
    NG_OUT_FAILED,   /* setenv/unsetenv failed */
    NG_OUT_DISABLED, /* NCCLGUARD_DISABLE: nothing was applied */
};

/*
 * Values as logs and dumps show them. A value is shown as it is only for the
 * variables of NCCL, CUDA, PyTorch and ncclguard (NCCL_*, CUDA_*, TORCH_*,
 * NCCLGUARD_*) whose name does not say secret (base/secret.h: NCCL_PASSWORD,
 * TORCH_NCCL_TOKEN); any other variable may hold a secret (AWS_SECRET_ACCESS_KEY,
 * HF_TOKEN), so its value is shown as its length only, "<not shown: 40 bytes>":
 * the log says which variable the policy set, never its value or a hash of it.
 */
struct ng_env_change {
    const struct ng_env_rule *rule;
    const char *name;  /* the variable (a forbid pattern matches several) */
    const char *value; /* DEFAULT/FORCE: the rule's value, as shown; FORBID: NULL */
    const char *was;   /* value before, as shown; NULL when unset */
    unsigned char outcome;
    unsigned char was_parent; /* `was` came from a parent process's policy */
};

/*
 * The constructor hook: loads the site file, user file and NCCLGUARD_* variables
 * (config.h), then applies the [env.*] rules unless NCCLGUARD_DISABLE is on.
 * Cheap without a config file: two failed stat() calls, no allocation, no file
 * left open. Re-runnable (each call starts over).
 */
void ncclguard_policy_apply_at_start(void);

/*
 * Applies the rules of the configuration loaded last. With dry_run, computes
 * the outcomes without touching the environment (the CLI, the fuzzer).
 * talk: log the changes (else they go to the debug level).
 */
void ncclguard_policy_apply(int dry_run, int talk);

/* Whether this process logs policy messages: local rank 0 or unknown, or verbose. */
int ncclguard_policy_talks(void);

/* Every rule's outcome, in order of application. */
const struct ng_env_change *ncclguard_policy_changes(size_t *n);

/* The last change of variable name, or NULL (for the audit's provenance). */
const struct ng_env_change *ncclguard_policy_change_of(const char *name);

/* "site default, /etc/ncclguard.conf:7" for a change, into buf. */
const char *ncclguard_policy_where(const struct ng_env_change *ch, char *buf, size_t len);

/* 1 when the value of variable name may be shown (see struct ng_env_change). */
int ncclguard_policy_value_shown(const char *name);

/* The word of an outcome in the dump ("set", "kept", ...). */
const char *ncclguard_policy_outcome_name(int outcome);

#endif
