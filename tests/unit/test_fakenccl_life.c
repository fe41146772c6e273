/*
 * Fake NCCL: communicator life. Nonblocking init, ops and group ends
 * (ncclInProgress, then ncclCommGetAsyncError reaches ncclSuccess); split
 * and shrink membership and results; abort and revoke, local as in NCCL
 * (and seen by peers through FAKENCCL_ABORT_NOTIFY); finalize; destroy
 * waiting for outstanding ops; use after destroy or abort rejected loudly;
 * fork.
 */
#include "test_fakenccl_util.h"

#include "fakecuda.h"

#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
    ncclUniqueId id;
    volatile int flag, count, done;
    uint64_t t0;
};

static struct shared *new_shared(void)
{
    return fnt_shared_job(sizeof(struct shared));
}

static void arrive(struct shared *sh, int n)
{
    FNT_CHECK(fnt_arrive(&sh->count, n), "peers did not arrive");
}

static void nonblocking_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    int v = rank + 1, out = 0, count;
    cfg.blocking = 0;
    if (rank == 1) /* rank 1 arrives late: rank 0's init stays in progress meanwhile */
        FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "never released");
    FNT_CHECK(ncclCommInitRankConfig(&comm, n, sh->id, rank, &cfg) == ncclInProgress,
              "init did not return ncclInProgress");
    FNT_CHECK(comm != NULL, "no handle from a nonblocking init");
    if (rank == 0) {
        ncclResult_t st;
        fnt_sleep_ms(200);
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclInProgress, "init completed without its peer (%d)", st);
        /* using it before init completed is NCCL's "Attempt to use communicator before..." */
        FNT_CHECK(ncclCommCount(comm, &count) == ncclInvalidArgument, "count accepted");
        FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInvalidArgument,
                  "op accepted during init");
        FNT_CHECK(strstr(ncclGetLastError(comm), "Attempt to use communicator") != NULL,
                  "last error: %s", ncclGetLastError(comm));
        fnt_set_flag(&sh->flag, 1);
    }
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "init did not succeed");
    FNT_NCCL(ncclCommCount(comm, &count));
    FNT_CHECK(count == n, "count %d", count);
    FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInProgress,
              "op did not return ncclInProgress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "op launch did not complete");
    fnt_sync(s);
    FNT_CHECK(out == 3, "out = %d", out);
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclMax, comm, s));
    FNT_CHECK(ncclGroupEnd() == ncclInProgress, "group end did not return ncclInProgress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "group launch did not complete");
    fnt_sync(s);
    FNT_CHECK(out == 2, "out = %d", out);
    FNT_CHECK(ncclCommFinalize(comm) == ncclInProgress, "finalize did not return ncclInProgress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "finalize did not complete");
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(nonblocking_init_op_group_finalize)
{
    fnt_run_clean(2, nonblocking_rank, new_shared());
}
END_TEST

static void env_nonblocking_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm;
    int v = 1, out = 0;
    setenv("NCCL_COMM_BLOCKING", "0", 1);
    FNT_CHECK(ncclCommInitRank(&comm, n, sh->id, rank) == ncclInProgress, "not in progress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "init failed");
    FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, CU_STREAM_PER_THREAD) ==
                  ncclInProgress,
              "op not in progress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "op failed");
    FNT_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    FNT_CHECK(out == n, "out = %d", out);
    (void)s;
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(nccl_comm_blocking_env)
{
    fnt_run_clean(2, env_nonblocking_rank, new_shared());
}
END_TEST

/* The sum of the ranks' V over COMM: one AllReduce, waited for. */
static int allreduce_sum(int v, ncclComm_t comm, CUstream s)
{
    int out = 0;
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    fnt_sync(s);
    return out;
}

/* Split by parity with reversed keys; a second split where rank 3 gives NCCL_SPLIT_NOCOLOR. */
static void split_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    ncclComm_t child, child2;
    int count, me, dev, out = 0, gathered[8];
    FNT_NCCL(ncclCommSplit(comm, rank % 2, -rank, &child, NULL));
    FNT_CHECK(child != NULL, "no child");
    FNT_NCCL(ncclCommCount(child, &count));
    FNT_NCCL(ncclCommUserRank(child, &me));
    FNT_NCCL(ncclCommCuDevice(child, &dev));
    FNT_CHECK(count == n / 2, "count %d", count);
    /* keys -rank: the highest parent rank of a color comes first */
    FNT_CHECK(me == (n - 1 - rank) / 2, "rank %d got child rank %d", rank, me);
    FNT_CHECK(dev == rank % 8, "device %d", dev);
    FNT_NCCL(ncclAllReduce(&rank, &out, 1, ncclInt32, ncclSum, child, s));
    FNT_NCCL(ncclAllGather(&rank, gathered, 1, ncclInt32, child, s));
    fnt_sync(s);
    int want = 0;
    for (int r = rank % 2; r < n; r += 2) want += r;
    FNT_CHECK(out == want, "sum %d want %d", out, want);
    for (int k = 0; k < count; k++) /* in child rank order: parent ranks descending */
        FNT_CHECK(gathered[k] == n - 2 + rank % 2 - 2 * k, "gathered[%d] = %d", k, gathered[k]);
    FNT_NCCL(ncclCommSplit(comm, rank == 3 ? NCCL_SPLIT_NOCOLOR : 0, rank, &child2, NULL));
    if (rank == 3) {
        FNT_CHECK(child2 == NULL, "NOCOLOR gave a communicator");
    } else {
        FNT_NCCL(ncclCommCount(child2, &count));
        FNT_CHECK(count == n - 1, "count %d", count);
        out = allreduce_sum(rank, child2, s);
        FNT_CHECK(out == 0 + 1 + 2, "out %d", out);
        FNT_NCCL(ncclCommDestroy(child2));
    }
    /* the parent still works after its splits */
    out = allreduce_sum(rank, comm, s);
    FNT_CHECK(out == n * (n - 1) / 2, "parent out %d", out);
    FNT_NCCL(ncclCommDestroy(child));
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(split_membership_and_results)
{
    fnt_run_clean(4, split_rank, new_shared());
}
END_TEST

/* Shrink without rank 2, which never calls it; then shrink away a rank that "died" while the
 * others were stuck in an op with it (NCCL_SHRINK_ABORT ends that op). */
static void shrink_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    ncclComm_t small, smaller;
    int count, me, out = 0, excl[1] = {2}, excl2[1] = {1};
    if (rank == 2) {
        FNT_NCCL(ncclCommDestroy(comm));
        return;
    }
    FNT_NCCL(ncclCommShrink(comm, excl, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    FNT_NCCL(ncclCommCount(small, &count));
    FNT_NCCL(ncclCommUserRank(small, &me));
    FNT_CHECK(count == 3 && me == (rank < 2 ? rank : 2), "count %d rank %d", count, me);
    out = allreduce_sum(rank, small, s);
    FNT_CHECK(out == 0 + 1 + 3, "out %d", out);
    /* small rank 1 (parent rank 1) dies; the others are stuck in an AllReduce with it */
    if (me == 1) _exit(0);
    FNT_NCCL(ncclAllReduce(&rank, &out, 1, ncclInt32, ncclSum, small, s));
    FNT_CHECK(fnt_pending_after(ev, s, 300), "op completed without its peer");
    FNT_NCCL(ncclCommShrink(small, excl2, 1, &smaller, NULL, NCCL_SHRINK_ABORT));
    FNT_CU(cuEventSynchronize(ev)); /* the stuck op was ended */
    FNT_NCCL(ncclCommCount(smaller, &count));
    FNT_CHECK(count == 2, "count %d", count);
    out = allreduce_sum(rank, smaller, s);
    FNT_CHECK(out == 0 + 3, "out %d", out);
    FNT_NCCL(ncclCommDestroy(smaller));
    FNT_NCCL(ncclCommAbort(small));
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(shrink_membership_and_abort_mode)
{
    fnt_run_clean(4, shrink_rank, new_shared());
}
END_TEST

/* Rank 0 aborts while ranks 0 and 1 wait for rank 2 in an AllReduce. */
static void abort_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    ncclResult_t st;
    int v = 1, out = 0;
    if (rank < 2) {
        FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
        FNT_CHECK(fnt_pending_after(ev, s, 300), "completed without rank 2");
    }
    arrive(sh, n);
    if (rank == 0) {
        FNT_NCCL(ncclCommAbort(comm));
        FNT_CU(cuEventSynchronize(ev)); /* its own op ended */
        /* the handle is gone: every later call on it is refused */
        FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInvalidArgument,
                  "op on an aborted comm accepted");
        FNT_CHECK(ncclCommGetAsyncError(comm, &st) == ncclInvalidArgument, "async accepted");
        FNT_CHECK(ncclCommAbort(comm) == ncclInvalidArgument, "double abort accepted");
        fnt_set_flag(&sh->flag, 1);
        return;
    }
    FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "rank 0 did not abort");
    /* the abort was local: nobody told the peers, rank 1's op still waits */
    fnt_sleep_ms(500);
    if (rank == 1)
        FNT_CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY, "a peer's abort ended this op");
    FNT_NCCL(ncclCommGetAsyncError(comm, &st));
    FNT_CHECK(st == ncclSuccess, "a peer's abort was reported: async error %d", st);
    /* each rank gets out by aborting on its own */
    FNT_NCCL(ncclCommAbort(comm));
    if (rank == 1) FNT_CU(cuEventSynchronize(ev));
    FNT_CHECK(out == 0, "the aborted op wrote a result");
}

NG_TEST(abort_is_local)
{
    struct shared *sh = new_shared();
    fnt_stderr_begin();
    int failed = fnt_run(3, abort_rank, sh);
    char *err = fnt_stderr_end();
    ck_assert_int_eq(failed, 0);
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: ncclAllReduce on an aborted communicator"));
    free(err);
    ck_assert(fnt_shm_clean(&sh->id));
}
END_TEST

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * FAKENCCL_ABORT_NOTIFY=1: rank 1 waits in an AllReduce for rank 0, which
 * aborts; rank 1's op ends with ncclRemoteError, as a failed network
 * connection would report, and not before the documented delay (1 s).
 */
static void notify_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    setenv("FAKENCCL_ABORT_NOTIFY", "1", 1);
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev;
    ncclResult_t st;
    int v = 1, out = 0;
    if (rank == 0) {
        arrive(sh, n);
        *(volatile uint64_t *)&sh->t0 = mono_ns(); /* before the abort marks its time */
        FNT_NCCL(ncclCommAbort(comm));
        fnt_set_flag(&sh->flag, 1);
        return;
    }
    FNT_CU(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuEventRecord(ev, s));
    arrive(sh, n);
    FNT_CU(cuEventSynchronize(ev)); /* the transport failed: the op ended */
    uint64_t waited_ms = (mono_ns() - *(volatile uint64_t *)&sh->t0) / 1000000u;
    FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "rank 0 did not abort");
    FNT_CHECK(waited_ms >= 1000, "the remote error came %llu ms after the abort",
              (unsigned long long)waited_ms);
    FNT_CHECK(out == 0, "the failed op wrote a result");
    FNT_NCCL(ncclCommGetAsyncError(comm, &st));
    FNT_CHECK(st == ncclRemoteError, "async error %d", st);
    FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclRemoteError,
              "op after a remote abort accepted");
    FNT_CHECK(ncclCommDestroy(comm) == ncclRemoteError, "destroy of a failed comm accepted");
    FNT_NCCL(ncclCommAbort(comm));
}

NG_TEST(abort_notify_gives_remote_error_after_delay)
{
    fnt_run_clean(2, notify_rank, new_shared());
}
END_TEST

/* Rank 0 revokes while its AllReduce waits for rank 1; rank 1 is not told. */
static void revoke_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    ncclComm_t again;
    ncclResult_t st;
    int v = 1, out = 0, count;
    if (rank == 0) {
        FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
        FNT_CHECK(fnt_pending_after(ev, s, 300), "completed without rank 1");
        FNT_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
        FNT_CU(cuEventSynchronize(ev)); /* the pending op ended (with an error) */
        FNT_CHECK(out == 0, "the revoked op wrote a result");
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclSuccess, "async %d after revoke", st);
        FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInvalidUsage,
                  "op after revoke accepted");
        FNT_CHECK(ncclCommRevoke(comm, 0) == ncclInvalidArgument, "double revoke accepted");
        FNT_CHECK(ncclCommFinalize(comm) == ncclInvalidArgument, "finalize after revoke");
        FNT_NCCL(ncclCommCount(comm, &count)); /* the handle stays valid */
        fnt_set_flag(&sh->flag, 1);
    } else {
        FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "rank 0 did not revoke");
        fnt_sleep_ms(300);
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclSuccess, "a peer's revoke was reported: async %d", st);
        FNT_NCCL(ncclCommRevoke(comm, 0));
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclSuccess, "async %d after own revoke", st);
    }
    /* a revoked communicator can still be shrunk... by nobody here; split it instead */
    FNT_NCCL(ncclCommSplit(comm, 0, rank, &again, NULL));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, again, s));
    fnt_sync(s);
    FNT_CHECK(out == n, "out %d", out);
    FNT_NCCL(ncclCommDestroy(again));
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(revoke_ends_pending_ops_and_keeps_handle)
{
    fnt_run_clean(2, revoke_rank, new_shared());
}
END_TEST

/* Destroy (without finalize) waits for outstanding ops, like NCCL's stream sync;
 * finalize too, and destroy after finalize is local. */
static void destroy_waits_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    int v = 1, out = 0;
    if (rank == 1) FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "never released");
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    if (rank == 0) {
        struct fnt_destroyer d;
        fnt_destroy_start(&d, comm);
        fnt_sleep_ms(400);
        FNT_CHECK(!__atomic_load_n(&d.returned, __ATOMIC_ACQUIRE),
                  "destroy returned with an op outstanding");
        fnt_set_flag(&sh->flag, 1);
        FNT_NCCL(fnt_destroy_join(&d));
        FNT_CHECK(out == 2, "out %d", out);
    } else {
        FNT_NCCL(ncclCommFinalize(comm)); /* blocking: returns once the op is done */
        FNT_CHECK(out == 2, "finalize returned before the op finished");
        FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInvalidUsage,
                  "op after finalize accepted");
        FNT_NCCL(ncclCommDestroy(comm));
    }
}

NG_TEST(destroy_and_finalize_wait_for_outstanding_ops)
{
    fnt_run_clean(2, destroy_waits_rank, new_shared());
}
END_TEST

NG_TEST(use_after_destroy_is_rejected_loudly)
{
    ncclUniqueId id = fnt_unique_id();
    ncclComm_t comm;
    ncclResult_t st;
    int v = 1, out, count;
    CUstream s;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess); /* device 0 by default */
    ck_assert_int_eq(ncclCommCuDevice(comm, &count), ncclSuccess);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ck_assert_int_eq(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(out, 1);
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
    fnt_stderr_begin();
    ncclResult_t r1 = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s);
    ncclResult_t r2 = ncclCommDestroy(comm);
    ncclResult_t r3 = ncclCommGetAsyncError(comm, &st);
    ncclResult_t r4 = ncclCommCount(comm, &count);
    ncclResult_t r5 = ncclSend(&v, 1, ncclInt32, 0, comm, s);
    char *err = fnt_stderr_end();
    ck_assert_int_eq(r1, ncclInvalidArgument);
    ck_assert_int_eq(r2, ncclInvalidArgument);
    ck_assert_int_eq(r3, ncclInvalidArgument);
    ck_assert_int_eq(r4, ncclInvalidArgument);
    ck_assert_int_eq(r5, ncclInvalidArgument);
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: ncclAllReduce on a destroyed communicator"));
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: ncclCommDestroy on a destroyed communicator"));
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: ncclCommCount on a destroyed communicator"));
    free(err);
    /* a pointer that was never a communicator */
    int junk[64] = {0};
    ck_assert_int_eq(ncclCommCount((ncclComm_t)junk, &count), ncclInvalidArgument);
    ck_assert(fnt_shm_clean(&id));
}
END_TEST

/* A thread keeps calling into the fake (taking its locks) while the process forks: the child
 * is never stuck on a lock, and it can create and use a fresh communicator. The caller runs
 * at most CALLS_PER_FORK rounds past the last fork, and each fork comes once it has run half
 * of them: every fork lands among calls, and the call log stays a few megabytes (unbounded,
 * it grew by a gigabyte a run). */
#define CALLS_PER_FORK 1000
static volatile int stop_calls;
static unsigned long calls_made, calls_at_fork;

static void *caller(void *p)
{
    (void)p;
    ncclUniqueId id;
    int version;
    while (!__atomic_load_n(&stop_calls, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&calls_made, __ATOMIC_RELAXED) -
                __atomic_load_n(&calls_at_fork, __ATOMIC_ACQUIRE) >=
            CALLS_PER_FORK) {
            sched_yield();
            continue;
        }
        ncclGetUniqueId(&id);
        ncclGetVersion(&version);
        ncclGetLastError(NULL);
        ncclGroupEnd(); /* an error: writes the last-error text under its lock */
        __atomic_add_fetch(&calls_made, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int fork_child(void)
{
    ncclUniqueId id;
    ncclComm_t comm;
    CUstream s;
    int v = 5, out = 0;
    alarm(60);
    if (ncclGetUniqueId(&id) || cuInit(0) || ncclCommInitRank(&comm, 1, id, 0) ||
        cuStreamCreate(&s, 0) || ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) ||
        cuStreamSynchronize(s) || out != 5 || ncclCommDestroy(comm))
        return 1;
    return 0;
}

NG_TEST(fork_child_starts_clean)
{
    char dir[64], path[96];
    ng_check_tmpdir(dir, sizeof dir, "fnt-fork");
    snprintf(path, sizeof path, "%s/log-%%p", dir);
    setenv("FAKENCCL_CALL_LOG", path, 1); /* the call log's lock is taken in the loop too */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, caller, NULL), 0);
    for (int i = 0; i < 20; i++) {
        while (__atomic_load_n(&calls_made, __ATOMIC_ACQUIRE) - calls_at_fork < CALLS_PER_FORK / 2)
            sched_yield();
        pid_t pid = fork();
        if (pid == 0) _exit(fork_child());
        __atomic_store_n(&calls_at_fork, __atomic_load_n(&calls_made, __ATOMIC_RELAXED),
                         __ATOMIC_RELEASE);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    __atomic_store_n(&stop_calls, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    ck_assert(ng_check_rmtree(dir));
}
END_TEST

/* After cuInit in the parent, a child cannot use CUDA (as with the real driver): it gets clean
 * errors, never a hang, and the parent's communicator is refused there. */
NG_TEST(fork_child_refuses_parent_comm)
{
    ncclUniqueId id = fnt_unique_id();
    ncclComm_t comm;
    int v = 1, out;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        ncclComm_t fresh;
        ncclUniqueId id2;
        int bad = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, NULL) != ncclInvalidArgument;
        bad |= ncclGetUniqueId(&id2) != ncclSuccess;
        bad |= ncclCommInitRank(&fresh, 1, id2, 0) != ncclUnhandledCudaError;
        _exit(bad);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess); /* still fine in the parent */
}
END_TEST

/* A rank killed while its peers never arrived: its segment is swept by the next creation. */
static void lonely_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    ncclComm_t comm;
    fnt_setup_rank(rank);
    ncclCommInitRank(&comm, n + 1, sh->id, rank); /* waits for a rank that never comes */
}

static void one_rank(int rank, int n, void *arg)
{
    ncclUniqueId *id = arg;
    ncclComm_t comm = fnt_join(rank, n, *id, NULL);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(killed_ranks_leave_nothing_behind)
{
    struct shared *sh = new_shared();
    struct fnt_job job;
    fnt_start(&job, 1, lonely_rank, sh);
    ck_assert(fnt_still_running(&job, 0, 500));
    ck_assert(!fnt_shm_clean(&sh->id)); /* created, waiting for rank 1 */
    fnt_kill_all(&job);
    ck_assert(!fnt_shm_clean(&sh->id)); /* nobody can unlink it any more... */
    ncclUniqueId other = fnt_unique_id();
    ck_assert_int_eq(fnt_run(1, one_rank, &other), 0);
    ck_assert(fnt_shm_clean(&sh->id)); /* ...but the next creation sweeps it */
    ck_assert(fnt_shm_clean(&other));
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakenccl_life", "life", 240, ng_check_tests(), NULL));
}
