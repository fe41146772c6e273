/*
 * nccl_calls.h: the NCCL entry points that the watch threads call on the shim's
 * own behalf: the real ones (never our wrappers), resolved by intercept/real.c
 * and handed over at start, because watch/ sits below intercept/
 * (docs/architecture.md).
 *
 * Every pointer may be NULL (an older NCCL lacks the function).
 *
 * Threads: set once by ncclguard_nccl_calls_set before the watchdog thread
 * starts; read-only after.
 */
#ifndef NCCLGUARD_NCCL_CALLS_H
#define NCCLGUARD_NCCL_CALLS_H

#include <nccl.h>

struct ng_nccl_calls {
    ncclResult_t (*get_version)(int *version);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *err);
    ncclResult_t (*comm_count)(const ncclComm_t comm, int *count);
    ncclResult_t (*comm_user_rank)(const ncclComm_t comm, int *rank);
    ncclResult_t (*comm_cu_device)(const ncclComm_t comm, int *device);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    const char *(*get_error_string)(ncclResult_t result);
};

void ncclguard_nccl_calls_set(const struct ng_nccl_calls *calls);
const struct ng_nccl_calls *ncclguard_nccl_calls(void);

#endif
