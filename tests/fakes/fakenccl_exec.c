/*
 * fakenccl execution: the host function that the fake libcuda's stream
 * worker runs for one batch (a standalone op, or every op of a group on one
 * stream, fused like NCCL fuses a group into one kernel).
 *
 * It runs on the stream worker thread and blocks it, exactly as a NCCL
 * kernel occupies the GPU stream until its peers arrive. It must not call
 * the CUDA API (a host function may not). Sequence numbers are assigned
 * here, at execution time, so a batch captured into a CUDA graph gets fresh
 * numbers at every graph launch.
 */
#include "fakenccl_exec.h"
#include "fakenccl_profiler.h"

#include <stdlib.h>
#include <time.h>

/* Sleeps ms milliseconds in short slices, stopping early if a comm of the batch is interrupted. */
static void gpu_delay(const struct fn_batch *b, const bool *held, int ms)
{
    struct timespec slice = {0, 20 * 1000000L};
    for (int waited = 0; waited < ms; waited += 20) {
        for (int i = 0; i < b->ncomms; i++)
            if (held[i] && fn_exec_interrupted(b->comms[i]) != ncclSuccess) return;
        if (ms - waited < 20) slice.tv_nsec = (long)(ms - waited) * 1000000L;
        nanosleep(&slice, NULL);
    }
}

/* FAKENCCL_DELAY_MS applies to this launch when any of its ops is on FAKENCCL_DELAY_RANK. */
static int delay_for(const struct fn_batch *b)
{
    const struct fn_config *cfg = fn_cfg();
    if (cfg->delay_ms <= 0) return 0;
    if (cfg->delay_rank == FN_NO_RANK) return cfg->delay_ms;
    for (int i = 0; i < b->nops; i++)
        if (fn_fault_rank(b->ops[i].comm->rank) == cfg->delay_rank) return cfg->delay_ms;
    return 0;
}

/*
 * Registers the batch's ops of comm ci as running (inflight) and numbers
 * them; returns false when the comm can no longer run ops (destroyed,
 * aborted, revoked, finalized...), in which case its ops fail at once.
 */
static bool acquire(struct fn_batch *b, int ci, struct fn_exec *ex, const int *comm_of)
{
    struct fn_comm *c = b->comms[ci];
    bool ok;
    pthread_mutex_lock(&c->mu);
    int st = atomic_load(&c->state);
    ok = (st == FN_READY || st == FN_FINALIZING) && c->seg.hdr;
    if (ok) {
        c->inflight++;
        for (int i = 0; i < b->nops; i++) {
            const struct fn_op *op = &b->ops[i];
            if (comm_of[i] != ci) continue;
            if (op->kind == FN_OP_SEND) {
                ex[i].seq = ++c->exec_send_seq[op->root];
            } else if (op->kind == FN_OP_RECV) {
                ex[i].seq = ++c->exec_recv_seq[op->root];
            } else {
                ex[i].seq = c->exec_coll_seq++;
                ex[i].rounds = fn_coll_rounds(op);
                ex[i].step = c->exec_step + 1;
                c->exec_step += ex[i].rounds;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/*
 * Waits, as a kernel waits behind NCCL's internal stream, until every batch
 * launched earlier on the batch's comms has finished; a comm that can no
 * longer run ops stops waiting (its ops then fail).
 */
static void wait_turns(const struct fn_batch *b)
{
    for (int ci = 0; !b->captured && ci < b->ncomms; ci++) {
        struct fn_comm *c = b->comms[ci];
        pthread_mutex_lock(&c->mu);
        while (c->order_finished < b->turns[ci] && fn_exec_interrupted(c) == ncclSuccess) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 50 * 1000000L; /* a revoke or a peer's failure does not signal cv */
            if (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c->cv, &c->mu, &t);
        }
        pthread_mutex_unlock(&c->mu);
    }
}

/* Whether a comm of b can no longer run ops (its batch then stops waiting). */
static bool any_interrupted(const struct fn_batch *b)
{
    for (int ci = 0; ci < b->ncomms; ci++)
        if (fn_exec_interrupted(b->comms[ci]) != ncclSuccess) return true;
    return false;
}

/*
 * One step of b's join: counts b in *count and waits until every member is
 * counted (at the start: every stream of the launch reached it; at the end:
 * every batch finished), or a comm of b can no longer run ops.
 */
static void join_wait(const struct fn_batch *b, int *count)
{
    struct fn_join *jn = b->join;
    if (!jn) return;
    pthread_mutex_lock(&jn->mu);
    (*count)++;
    pthread_cond_broadcast(&jn->cv);
    while (*count < jn->members && !any_interrupted(b)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50 * 1000000L; /* an abort does not signal cv */
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&jn->cv, &jn->mu, &t);
    }
    pthread_mutex_unlock(&jn->mu);
}

/* Waits for b's turn to number its ops (fn_join), or until a comm of b can no
 * longer run ops. */
static void join_turn(const struct fn_batch *b)
{
    struct fn_join *jn = b->join;
    pthread_mutex_lock(&jn->mu);
    while (!jn->unordered && jn->numbered < b->join_index && !any_interrupted(b)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50 * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&jn->cv, &jn->mu, &t);
    }
    pthread_mutex_unlock(&jn->mu);
}

static void join_numbered(const struct fn_batch *b)
{
    struct fn_join *jn = b->join;
    pthread_mutex_lock(&jn->mu);
    jn->numbered++;
    pthread_cond_broadcast(&jn->cv);
    pthread_mutex_unlock(&jn->mu);
}

static void release(struct fn_batch *b, int ci, bool held)
{
    struct fn_comm *c = b->comms[ci];
    pthread_mutex_lock(&c->mu);
    if (held) c->inflight--;
    if (!b->captured) {
        c->pending--;
        c->order_finished++; /* the next launch of c may start */
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* FAKENCCL_ASYNC_ERROR_AFTER: counts a completed op and raises the async error at the Nth. */
static void count_completion(struct fn_comm *c)
{
    const struct fn_config *cfg = fn_cfg();
    long n = atomic_fetch_add(&c->completed_ops, 1) + 1;
    if (cfg->async_after <= 0 || n != cfg->async_after) return;
    if (cfg->async_rank != FN_NO_RANK && fn_fault_rank(c->rank) != cfg->async_rank) return;
    fn_comm_set_async(c, cfg->async_result);
    fn_warn("fakenccl: injected asynchronous error %d on rank %d after %ld operations",
            (int)cfg->async_result, c->rank, n);
}

/* Drives every op until each one is done or failed, sleeping on a doorbell when stuck. */
static void progress(struct fn_batch *b, struct fn_exec *ex, const int *comm_of, const bool *held)
{
    uint32_t *bells = calloc((size_t)b->ncomms, sizeof *bells);
    if (!bells) return;
    for (;;) {
        for (int ci = 0; ci < b->ncomms; ci++)
            if (held[ci]) bells[ci] = fn_seg_bell(&b->comms[ci]->seg);
        bool moved = false, running = false;
        int wait_ci = -1;
        for (int i = 0; i < b->nops; i++) {
            if (ex[i].status == FN_STEP_DONE || ex[i].status == FN_STEP_FAILED) continue;
            enum fn_op_kind k = b->ops[i].kind;
            ex[i].status = k == FN_OP_SEND || k == FN_OP_RECV ? fn_p2p_step(&ex[i])
                                                              : fn_coll_step(&ex[i]);
            if (ex[i].status == FN_STEP_MOVED) moved = running = true;
            if (ex[i].status == FN_STEP_BLOCKED) {
                running = true;
                if (wait_ci < 0) wait_ci = comm_of[i];
            }
        }
        if (!running) break;
        if (!moved) /* several comms: a short sleep on one doorbell, then look at all again */
            fn_seg_sleep(&b->comms[wait_ci]->seg, bells[wait_ci], b->ncomms > 1 ? 2 : 200);
    }
    free(bells);
}

void fn_batch_run(void *arg)
{
    struct fn_batch *b = arg;
    struct fn_exec *ex = calloc((size_t)b->nops, sizeof *ex);
    int *comm_of = calloc((size_t)b->nops, sizeof *comm_of);
    bool *held = calloc((size_t)b->ncomms, sizeof *held);
    if (!ex || !comm_of || !held) {
        fn_loud("out of memory running a batch of %d operations; they are dropped", b->nops);
        goto out;
    }
    for (int i = 0; i < b->nops; i++) {
        ex[i].op = &b->ops[i];
        ex[i].status = FN_STEP_MOVED;
        for (int ci = 0; ci < b->ncomms; ci++)
            if (b->comms[ci] == b->ops[i].comm) comm_of[i] = ci;
    }
    if (b->join) join_wait(b, &b->join->arrived);
    wait_turns(b);
    if (b->join) join_turn(b);
    for (int ci = 0; ci < b->ncomms; ci++) held[ci] = acquire(b, ci, ex, comm_of);
    if (b->join) join_numbered(b);
    for (int i = 0; i < b->nops; i++)
        if (!held[comm_of[i]]) ex[i].status = FN_STEP_FAILED;
    int ms = delay_for(b);
    if (ms > 0) gpu_delay(b, held, ms);
    for (int i = 0; i < b->nops && !b->captured; i++)
        if (ex[i].status != FN_STEP_FAILED) fn_prof_kernel_start(&b->ops[i]);
    progress(b, ex, comm_of, held);
    for (int i = 0; i < b->nops; i++) {
        if (!b->captured && ex[i].status == FN_STEP_DONE)
            fn_prof_kernel_stop(&b->ops[i]); /* a kernel that never ends never stops */
        free(ex[i].snapshot);
        if (ex[i].status == FN_STEP_DONE) count_completion(b->ops[i].comm);
    }
    if (b->join) join_wait(b, &b->join->finished);
out:
    for (int ci = 0; ci < b->ncomms; ci++) release(b, ci, held && held[ci]);
    free(ex);
    free(comm_of);
    free(held);
    fn_join_leave(b, ex && comm_of && held); /* dropped for want of memory: never arrived */
    if (!b->captured) {
        free(b->ops);
        free(b->comms);
        free(b->turns);
        free(b);
    }
}
