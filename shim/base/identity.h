/*
 * identity.h: who this process is in the job (global and local rank, host, job id),
 * read once from the launcher's environment.
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

struct ng_identity {
    int rank;         /* global rank, -1 when no launcher variable is set */
    int local_rank;   /* -1 when unknown */
    char host[64];    /* short host name */
    char job[128];    /* job id */
};

void ncclguard_identity_init(void);
const struct ng_identity *ncclguard_identity(void);

/* "[rank R host H] " once the rank is known, "[host H] " before; never NULL. */
const char *ncclguard_identity_tag(void);

#endif
