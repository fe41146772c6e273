/*
 * fakenccl groups: ncclGroupStart, ncclGroupEnd, ncclGroupSimulateEnd.
 *
 * The group depth and the recorded calls are thread-local, as in NCCL: ops
 * called from another thread while one thread has a group open are
 * independent. Inside a group, op calls are checked and recorded and return
 * at once; creation calls (InitRank, Split, Shrink) are recorded too. The
 * outermost ncclGroupEnd first completes the creations, each on its own
 * thread so that a single thread can create every rank of a communicator,
 * then launches the ops: one fused host function per stream touched, so a
 * ring of Send/Recv between neighbours inside one group cannot deadlock.
 * The first error of a call inside the group is returned again by
 * ncclGroupEnd, which then launches nothing. ncclGroupSimulateEnd of a
 * group with a nonblocking comm launches its ops like ncclGroupEnd and
 * leaves simInfo alone: NCCL hands that group to its job thread, which
 * calls groupLaunch without the simInfo (group.cc).
 */
#include "fakenccl_calllog.h"
#include "fakenccl_exec.h"
#include "fakenccl_profiler.h"

#include <stdlib.h>
#include <string.h>

#define FN_SIM_MAGIC 0x74685283u

struct group_state {
    int depth;
    struct fn_op *ops;
    int nops, cap;
    struct fn_create_job **jobs;
    int njobs, jcap;
    ncclResult_t err;
};

static _Thread_local struct group_state g;

int fn_group_depth(void)
{
    return g.depth;
}

void fn_group_note_error(ncclResult_t err)
{
    if (g.depth > 0 && g.err == ncclSuccess && err != ncclSuccess && err != ncclInProgress)
        g.err = err;
}

/* The group's array arr (n elements of size bytes in use, *cap allocated) with room for one
 * more: as it is while there is room, else grown to twice *cap (first, the first time). NULL
 * when out of memory (arr is left as it was; the group notes ncclSystemError). */
static void *room_for_one(void *arr, int n, int *cap, int first, size_t size)
{
    if (n < *cap) return arr;
    int grown = *cap ? *cap * 2 : first;
    void *p = realloc(arr, (size_t)grown * size);
    if (!p) {
        fn_warn("fakenccl: out of memory recording a group call");
        fn_group_note_error(ncclSystemError);
        return NULL;
    }
    *cap = grown;
    return p;
}

ncclResult_t fn_group_add_op(const struct fn_op *op)
{
    struct fn_op *ops = room_for_one(g.ops, g.nops, &g.cap, 16, sizeof *ops);
    if (!ops) return ncclSystemError;
    g.ops = ops;
    g.ops[g.nops++] = *op;
    return ncclSuccess;
}

ncclResult_t fn_group_add_create(struct fn_create_job *job)
{
    struct fn_create_job **jobs = room_for_one(g.jobs, g.njobs, &g.jcap, 8, sizeof *jobs);
    if (!jobs) return ncclSystemError;
    g.jobs = jobs;
    g.jobs[g.njobs++] = job;
    return ncclSuccess;
}

/* NCCL-like cost model for ncclGroupSimulateEnd: 10 us per op plus 1 GB/s, in microseconds. */
static float simulate(const struct fn_op *ops, int nops)
{
    double us = 0;
    for (int i = 0; i < nops; i++)
        us += 10.0 + (double)(ops[i].count * fn_type_size(ops[i].dtype)) * 1e-3;
    return (float)us;
}

/* The outermost end of a group: creations first, then (unless simulating) the ops. */
static ncclResult_t group_end(ncclSimInfo_t *sim)
{
    if (g.depth == 0) {
        fn_warn("ncclGroupEnd: not in a group call.");
        return ncclInvalidUsage;
    }
    if (--g.depth > 0) return ncclSuccess;
    struct group_state s = g;
    memset(&g, 0, sizeof g);
    ncclResult_t res = s.err;
    bool async = false;
    if (res != ncclSuccess) {
        for (int i = 0; i < s.njobs; i++) fn_create_cancel(s.jobs[i], res);
    } else {
        if (s.njobs > 0) res = fn_create_group_end(s.jobs, s.njobs, &async);
        bool nonblocking = false;
        for (int i = 0; i < s.nops; i++) nonblocking |= !s.ops[i].comm->blocking;
        /* a nonblocking group ends on its job thread, which launches without simulating */
        if (sim && !nonblocking)
            sim->estimatedTime = simulate(s.ops, s.nops);
        else if (res == ncclSuccess && s.nops > 0)
            res = fn_launch(s.ops, s.nops, true);
    }
    free(s.ops);
    free(s.jobs);
    if (res == ncclInProgress)
        async = true;
    else if (res != ncclSuccess)
        return res;
    return async ? ncclInProgress : ncclSuccess;
}

/* nccl.h declares these with "()", which is no prototype in C. */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);

FN_EXPORT ncclResult_t pncclGroupStart(void)
{
    g.depth++;
    fn_prof_group_api_start();
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGroupStart")) fn_log_end(&l, ncclSuccess);
    return ncclSuccess;
}
FN_WEAK_ALIAS(ncclGroupStart);

FN_EXPORT ncclResult_t pncclGroupEnd(void)
{
    if (g.depth == 1) { /* FAKENCCL_FAIL_OP=GroupEnd: the outermost end fails, dropping the group */
        int rank = g.nops > 0 ? g.ops[0].comm->rank : FN_NO_RANK;
        ncclResult_t f = fn_fault_check_call("GroupEnd", rank);
        if (f != ncclSuccess && g.err == ncclSuccess) g.err = f;
    }
    ncclResult_t r = group_end(NULL);
    fn_prof_group_api_stop();
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGroupEnd")) fn_log_end(&l, r);
    return r;
}
FN_WEAK_ALIAS(ncclGroupEnd);

FN_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    ncclResult_t r = fn_ptr_check(simInfo, "GroupSimulateEnd", "simInfo");
    if (r == ncclSuccess && simInfo->magic != FN_SIM_MAGIC) {
        fn_warn("ncclSimInfo_t argument not initialized via the sim info initializer");
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess) r = group_end(simInfo);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGroupSimulateEnd")) {
        if (simInfo && r == ncclSuccess)
            fn_log_fmt(&l, " simInfo={estimatedTime=%.3f}", (double)simInfo->estimatedTime);
        else
            fn_log_ptr(&l, "simInfo", FN_LOG_BUF, simInfo);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclGroupSimulateEnd);
