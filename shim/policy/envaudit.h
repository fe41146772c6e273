/*
 * envaudit.h: the audit of NCCL_* environment variables against the NCCL
 * library actually loaded.
 *
 * Owns: the checks, and the findings they produce. For each NCCL_* variable:
 * unknown to this NCCL (with "did you mean"), read by a network plugin rather
 * than NCCL, deprecated or removed (a curated table with the replacement), the
 * NCCL_TIMEOUT and NCCL_IB_MTU myths, values NCCL would misparse (it reads
 * integers with strtoll(s, NULL, 0): "08" is 0, "1e6" is 1), NCCL_BUFFSIZE
 * below its 4 MiB default or not a power of two, contradictions between
 * variables, and debug settings left on. The known list comes from the
 * library's own read-only data (ncclscan.h), so no table of names is kept here.
 *
 * Threads: ncclguard_envaudit_at_first_comm runs on the application thread that
 * creates the first communicator, once per process; ncclguard_envaudit is pure
 * apart from reading the policy's change list. Neither is for the hot path.
 */
#ifndef NCCLGUARD_ENVAUDIT_H
#define NCCLGUARD_ENVAUDIT_H

#include <stddef.h>

#include "policy/ncclscan.h"

#define NG_FINDINGS_MAX 128

enum ng_severity { NG_SEV_NOTE = 0, NG_SEV_WARNING = 1 };

enum ng_finding_kind {
    NG_FIND_UNKNOWN,    /* not read by this NCCL */
    NG_FIND_PLUGIN,     /* read by a network plugin, not by NCCL */
    NG_FIND_DEPRECATED, /* still read, but an old alias */
    NG_FIND_REMOVED,    /* was an NCCL variable; this NCCL ignores it */
    NG_FIND_MYTH,       /* never was an NCCL variable, but folklore says so */
    NG_FIND_MISPARSE,   /* NCCL reads another number than the one written */
    NG_FIND_VALUE,      /* a value that defeats its usual intent */
    NG_FIND_CONFLICT,   /* contradicts another variable */
    NG_FIND_DEBUG,      /* a debugging setting left on */
    NG_FIND_EMPTY,      /* set but empty: NCCL treats it as unset */
};

struct ng_finding {
    unsigned char severity; /* enum ng_severity */
    unsigned char kind;     /* enum ng_finding_kind */
    char var[96];
    char value[128];   /* truncated with "..." when longer */
    char message[512]; /* one line: "<var>=<value> <what> (<where>): <what to do>" */
};

struct ng_audit {
    char nccl_version[32]; /* "2.28.9", or "unknown" */
    size_t nvars;          /* NCCL_* variables examined */
    size_t nfindings;
    size_t dropped; /* findings beyond NG_FINDINGS_MAX */
    size_t warnings, notes;
    struct ng_finding f[NG_FINDINGS_MAX];
};

/*
 * Audits every NCCL_* variable of envp against known (the names the loaded NCCL
 * reads; an empty list skips the "unknown" checks) and fills out. version is
 * NCCL's ("2.28.9"), used in messages.
 */
void ncclguard_envaudit(const struct ng_known *known, const char *version, char *const *envp,
                        struct ng_audit *out);

/* "unknown", "plugin", ... for the JSON of envcheck. */
const char *ncclguard_finding_kind_name(int kind);

/*
 * The shim's hook at the first communicator creation: finds the mapped
 * libnccl.so.2, scans it, audits the process environment and logs one line per
 * finding. Runs on local rank 0 only unless NCCLGUARD_AUDIT=all (off: never).
 * Idempotent: later calls return at once.
 */
void ncclguard_envaudit_at_first_comm(void);

#endif
