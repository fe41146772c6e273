/*
 * lifecycle.h: the hooks of communicator creation and ending, of async-error
 * queries, and the fence around communicators that ncclguard aborted; the
 * generated wrappers (intercept/wrappers.c) call them around the real call.
 *
 * Owns: the registry record of each creation path (InitRank, InitRankConfig,
 * InitRankScalable, InitAll, Split, Shrink) with an id that is the same on every
 * rank, the adoption of nonblocking split children, the state changes at
 * Finalize/Destroy/Abort/Revoke, and what the application sees of a fenced
 * communicator.
 *
 * Threads: the application thread that made the NCCL call. Not the hot path:
 * these may take the registry's lock and write events.
 */
#ifndef NCCLGUARD_LIFECYCLE_H
#define NCCLGUARD_LIFECYCLE_H

#include <nccl.h>

struct ng_comm;

enum ng_end_kind { NG_END_FINALIZE, NG_END_DESTROY, NG_END_ABORT, NG_END_REVOKE };

struct ng_init_ticket {
    struct ng_comm *comm;
    ncclComm_t *out;
};

struct ng_end_ticket {
    struct ng_comm *comm;
    int kind;
    int fenced;
};

/* Creation: InitRank, InitRankConfig and InitRankScalable (nids unique ids). */
void ncclguard_init_pre(struct ng_init_ticket *t, ncclComm_t *out, int nranks, int rank, int nids,
                        const ncclUniqueId *ids, const ncclConfig_t *config);
void ncclguard_init_all_pre(struct ng_init_ticket *t, ncclComm_t *out, int ndev);
void ncclguard_split_pre(struct ng_init_ticket *t, ncclComm_t parent, int color, ncclComm_t *out,
                         const ncclConfig_t *config);
void ncclguard_shrink_pre(struct ng_init_ticket *t, ncclComm_t parent, const int *excluded,
                          int nexcluded, ncclComm_t *out, const ncclConfig_t *config);
void ncclguard_init_post(struct ng_init_ticket *t, ncclResult_t r);
void ncclguard_init_all_post(struct ng_init_ticket *t, int ndev, const int *devlist,
                             ncclResult_t r);

/* The record this thread is creating (between a creation's pre and post hooks),
 * else NULL; and how many creations through the wrappers are in flight in the
 * process (ncclCommInitAll's included, whose records come after). Any thread. */
struct ng_comm *ncclguard_comm_creating(void);
int ncclguard_creations_in_flight(void);

void ncclguard_end_pre(struct ng_end_ticket *t, ncclComm_t comm, int kind);
void ncclguard_end_post(struct ng_end_ticket *t, ncclResult_t r);

void ncclguard_async_error_post(ncclComm_t comm, const ncclResult_t *err, ncclResult_t r);

/* Writes the comm_created event of c once its rank and size are known: at
 * creation for a root communicator; for a split or shrink child, whose size only
 * NCCL knows, when the watchdog has asked (any thread). */
void ncclguard_comm_announce(struct ng_comm *c);

/* A handle the registry does not know: if this thread has a nonblocking
 * split/shrink child still waiting for its handle, that child is this one. */
struct ng_comm *ncclguard_comm_adopt(ncclComm_t handle);

/*
 * Communicators that ncclguard aborted ("fenced", see comm.h). NCCL freed the
 * handle, so every later call on it is answered here: collectives and queries
 * fail with ncclInvalidUsage, ncclCommGetAsyncError reports ncclRemoteError (the
 * way a framework's watchdog notices a broken communicator), ncclGetLastError
 * explains what happened, and the application's own Abort/Destroy/Finalize of
 * the handle succeed without reaching NCCL (no double free).
 */
int ncclguard_fenced(ncclComm_t comm);
ncclResult_t ncclguard_fenced_result(void);
ncclResult_t ncclguard_end_fenced(struct ng_end_ticket *t);
ncclResult_t ncclguard_async_error_fenced(ncclResult_t *err);
/* The text for ncclGetLastError(comm), or NULL to ask NCCL. */
const char *ncclguard_fenced_last_error(ncclComm_t comm);

#endif
