/*
 * fakenccl: one thread at a time per communicator.
 *
 * NCCL's thread-safety rule is that one thread operates a communicator at a
 * time. On a nonblocking communicator breaking it is a real race:
 * ncclCommGetAsyncError completes the pending group job and clears
 * comm->groupJob without atomics (init.cc, group.cc), while another call may
 * be enqueuing on the same communicator. The fake counts the API calls
 * inside each nonblocking communicator and reports the first overlap with
 * its usual misuse line. ncclCommAbort is not counted: interrupting a call
 * that hangs is what it is for.
 */
#include "fakenccl_comm.h"

struct fn_comm *fn_comm_enter(ncclComm_t comm, const char *api)
{
    struct fn_comm *c = (struct fn_comm *)comm;
    if (!c || !fn_comm_known(c)) return NULL;
    int inside = atomic_fetch_add_explicit(&c->callers, 1, memory_order_acq_rel);
    const char *other = atomic_exchange_explicit(&c->caller_api, api, memory_order_acq_rel);
    if (inside > 0 && !c->blocking &&
        !atomic_exchange_explicit(&c->overlap_reported, true, memory_order_relaxed))
        fn_loud("nccl%s on a nonblocking communicator (rank %d of %d) while another thread "
                "is inside nccl%s on it: NCCL lets one thread at a time use a communicator",
                api, c->rank, c->nranks, other ? other : "?");
    return c;
}

void fn_comm_leave(struct fn_comm *c)
{
    if (c) atomic_fetch_sub_explicit(&c->callers, 1, memory_order_acq_rel);
}
