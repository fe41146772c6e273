/*
 * fakenccl creation jobs, shared by fakenccl_create.c (how a job runs:
 * join, control all-gathers, split and shrink membership) and
 * fakenccl_create_api.c (the API calls that validate and record jobs).
 * See fakenccl_create.c for the protocol.
 */
#ifndef FAKENCCL_CREATE_H
#define FAKENCCL_CREATE_H

#include "fakenccl_comm.h"

enum job_kind { JOB_INIT, JOB_SPLIT, JOB_SHRINK };

struct fn_create_job {
    enum job_kind kind;
    bool blocking;             /* how the call behaves: wait, or ncclInProgress */
    struct fn_comm *comm;      /* the new handle; NULL for a NCCL_SPLIT_NOCOLOR split */
    ncclComm_t *out;           /* init: set to NULL on a blocking failure; split/shrink:
                                receives the handle once complete */
    struct fn_comm *parent;    /* split/shrink */
    bool parent_busy;          /* the parent's nb_jobs counts this job */
    uint8_t key[FN_KEY_BYTES]; /* init: from the unique id */
    int color, skey;           /* split */
    int *excl, nexcl;          /* shrink, sorted, owned by the job */
    uint64_t ordinal, epoch;   /* split/shrink: child number and control epoch on the parent */
    ncclResult_t result;
};

/* The current context and its device; with none, device 0's primary context (made current). */
ncclResult_t fn_current_device(CUcontext *ctx, int *dev);
/* The primary context of device dev (retained). */
ncclResult_t fn_device_context(int dev, CUcontext *ctx);
/* The segment key of a unique id: its random part when it carries the fake's tag, else a hash. */
void fn_key_from_uid(const ncclUniqueId *id, uint8_t key[FN_KEY_BYTES]);
/* Reads blocking and commName from a config (NULL: inherit from parent, or the default). */
ncclResult_t fn_parse_config(const ncclConfig_t *cfg, const struct fn_comm *parent, bool *blocking,
                             char *name, size_t cap);
/* Sets rank and size and allocates the per-peer counters; false when out of memory. */
bool fn_comm_set_size(struct fn_comm *c, int rank, int nranks);

struct fn_create_job *fn_job_new(enum job_kind kind, bool blocking, struct fn_comm *c,
                                 ncclComm_t *out);
/* Records the job in the open group, runs it inline (blocking) or starts it (ncclInProgress). */
ncclResult_t fn_job_submit(struct fn_create_job *j);
/* Runs blocking jobs concurrently, one thread each; returns the first error; frees them. */
ncclResult_t fn_jobs_run(struct fn_create_job **jobs, int n);

#endif
