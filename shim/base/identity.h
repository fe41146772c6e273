/*
 * identity.h: who this process is in the job (global and local rank, host, job id),
 * read once from the launcher's environment, and the version of the NCCL it runs.
 *
 * The global rank comes from RANK, then OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK
 * and SLURM_PROCID; the local rank from LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK and
 * SLURM_LOCALID; the job id from SLURM_JOB_ID, then TORCHELASTIC_RUN_ID, then "local".
 *
 * Threads: ncclguard_identity_init runs in the constructor; the getters may then
 * be called from any thread, and the tag also from a signal handler.
 */
#ifndef NCCLGUARD_IDENTITY_H
#define NCCLGUARD_IDENTITY_H

#include <stddef.h>

#define NG_NAME_PART_MAX 64 /* bytes of a file-name part, without the NUL */

struct ng_identity {
    int rank;       /* global rank, -1 when no launcher variable is set */
    int local_rank; /* -1 when unknown */
    char host[64];  /* short host name */
    char job[128];  /* job id */
};

void ncclguard_identity_init(void);
const struct ng_identity *ncclguard_identity(void);

/* "[rank R host H] " once the rank is known, "[host H] " before; never NULL. */
const char *ncclguard_identity_tag(void);

/* NCCL_VERSION_CODE of the loaded NCCL (e.g. 22809), 0 until the watchdog asked
 * NCCL (ncclGetVersion) and set it. */
int ncclguard_identity_nccl_version(void);
void ncclguard_identity_set_nccl_version(int code);

/* The first of the variables `names` (NULL-terminated) that holds a decimal
 * integer in [lo, hi] (lo >= 0), else -1. */
long ncclguard_env_long(const char *const *names, long lo, long hi);

/* src (a host name or job id) as a part of a file name, into
 * dst[NG_NAME_PART_MAX + 1]: cut to NG_NAME_PART_MAX bytes of [A-Za-z0-9._-],
 * every other byte and a leading '.' made '_', so that it cannot add a
 * directory level or hide a file; "unknown" when empty. */
void ncclguard_name_part(const char *src, char *dst);

/* The built-in dump directory, "./ncclguard-<job part>", with the job id as the
 * environment has it now (the identity may not be read yet: the CLI, tests). */
void ncclguard_default_dump_dir(char *buf, size_t len);

/* The start time of process pid (field 22 of /proc/<pid>/stat, clock ticks since
 * boot), which tells a reader whether a pid was reused; 0 when unknown (gone).
 * The node marker (evidence/marker.h) and `ncclguard dump` compare it. */
unsigned long long ncclguard_process_start_time(int pid);

#endif
