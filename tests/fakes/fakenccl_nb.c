/*
 * fakenccl nonblocking launches: the connection setup that a nonblocking
 * communicator's first launch waits for, and the seeded choice of what a
 * nonblocking op returns.
 *
 * In NCCL (2.28, runtime connection) the first launch on a communicator
 * connects its transports, which needs every peer: the group job thread of a
 * nonblocking call waits there, and the call answers ncclInProgress
 * meanwhile. An op outside a group returns the communicator's async state
 * right after handing its group job to that thread (ncclEnqueueCheck in
 * enqueue.cc), so it answers ncclSuccess when the job was quick enough and
 * ncclInProgress otherwise. FAKENCCL_NB_SEED picks between the two
 * deterministically, per seed, rank and call.
 */
#include "fakenccl_exec.h"

#include <stdatomic.h>

bool fn_nb_connected(struct fn_comm *c)
{
    return c->blocking || atomic_load_explicit(&c->connected, memory_order_acquire);
}

void fn_nb_arrive(struct fn_comm *c)
{
    struct fn_rank_info *me = fn_seg_rank(&c->seg, c->rank);
    if (!atomic_load_explicit(&me->connected, memory_order_acquire)) {
        atomic_store_explicit(&me->connected, 1, memory_order_release);
        fn_seg_ring(&c->seg);
    }
}

/* Every rank of c has reached its first launch. */
static bool all_arrived(struct fn_comm *c)
{
    for (int r = 0; r < c->nranks; r++)
        if (!atomic_load_explicit(&fn_seg_rank(&c->seg, r)->connected, memory_order_acquire))
            return false;
    return true;
}

ncclResult_t fn_nb_connect(struct fn_comm *c)
{
    if (fn_nb_connected(c)) return ncclSuccess;
    pthread_mutex_lock(&c->mu); /* hold the mapping: an abort waits for inflight users */
    ncclResult_t why = fn_exec_interrupted(c);
    if (why == ncclSuccess) c->inflight++;
    pthread_mutex_unlock(&c->mu);
    if (why != ncclSuccess) return why;
    fn_nb_arrive(c);
    for (;;) {
        uint32_t bell = fn_seg_bell(&c->seg);
        if (all_arrived(c)) {
            atomic_store_explicit(&c->connected, true, memory_order_release);
            break;
        }
        if ((why = fn_exec_interrupted(c)) != ncclSuccess) break;
        fn_seg_sleep(&c->seg, bell, 200);
    }
    pthread_mutex_lock(&c->mu);
    c->inflight--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return why;
}

bool fn_nb_done_in_call(int rank)
{
    static _Atomic uint64_t calls; /* nonblocking op calls of this process */
    const struct fn_config *cfg = fn_cfg();
    if (!cfg->nb_seeded) return false;
    uint64_t key[3] = {(uint64_t)cfg->nb_seed, (uint64_t)fn_fault_rank(rank),
                       atomic_fetch_add(&calls, 1)};
    return fn_hash64(key, sizeof key, 0x6e6273656564ull) & 1;
}
