/*
 * Fake NCCL: when ops complete. An op completes only once every peer has
 * arrived; a missing rank keeps its peers waiting; a mismatch hangs every
 * rank and says so; groups fuse ops per stream (a Send/Recv ring cannot
 * deadlock), may span communicators and streams, and are per thread; one
 * communicator's launches run one after another, whatever their stream, and
 * a group over several of its streams is one launch that waits for all; one
 * process can hold every rank (InitAll, threads); a captured op runs at
 * every graph launch.
 */
#include "test_fakenccl_util.h"

#include "fakecuda.h"

#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct shared {
    ncclUniqueId id, id2;
    volatile int release, enqueued, go, done;
};

static struct shared *new_shared(void)
{
    struct shared *sh = fnt_shared_job(sizeof *sh);
    sh->id2 = fnt_unique_id();
    return sh;
}

/* The event stays NOT_READY for ms milliseconds (it never completes early). */
static void stays_pending(CUevent ev, int ms)
{
    for (int t = 0; t < ms; t += 50) {
        FNT_CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY, "the op completed after %d ms", t);
        fnt_sleep_ms(50);
    }
}

/* Every rank has checked what it must while a spinning kernel holds its stream: rank 0
 * releases the spin once all n have. */
static void release_when_all_checked(struct shared *sh, int rank, int n)
{
    __atomic_fetch_add(&sh->done, 1, __ATOMIC_ACQ_REL);
    if (rank == 0 && fnt_wait_flag(&sh->done, n, 30)) fnt_set_flag(&sh->release, 1);
}

/* The op just enqueued on s hangs: ev, recorded behind it, stays pending for ms; once all n
 * ranks have counted themselves in *arrived, aborting comm ends it. */
static void hangs_until_abort(ncclComm_t comm, CUstream s, CUevent ev, int ms,
                              volatile int *arrived, int n)
{
    FNT_CU(cuEventRecord(ev, s));
    stays_pending(ev, ms);
    FNT_CHECK(fnt_arrive(arrived, n), "peer lost");
    FNT_NCCL(ncclCommAbort(comm)); /* releases the hung op */
    FNT_CU(cuEventSynchronize(ev));
}

/* Rank 1's stream is held by a spinning kernel before its AllReduce. */
static void peers_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    int v = rank + 1, out = 0;
    if (rank == 1) FNT_CU(fakecuda_test_spin(s, &sh->release));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuEventRecord(ev, s));
    FNT_CHECK(fnt_arrive(&sh->enqueued, n), "peers did not enqueue");
    stays_pending(ev, 500); /* (out is the stream's to write now: not read until done) */
    release_when_all_checked(sh, rank, n);
    FNT_CU(cuEventSynchronize(ev));
    FNT_CHECK(out == n * (n + 1) / 2, "out = %d", out);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(op_completes_only_when_all_peers_arrived)
{
    fnt_run_clean(3, peers_rank, new_shared());
}
END_TEST

/* Init waits for a late rank; an op waits for a rank that has not called it yet. */
static void late_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    int v = rank + 1, out = 0;
    if (rank == 2) FNT_CHECK(fnt_wait_flag(&sh->go, 1, 30), "never told to go");
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuEventRecord(ev, s));
    if (rank == 0) {
        stays_pending(ev, 500);
        fnt_set_flag(&sh->go, 1);
    }
    FNT_CU(cuEventSynchronize(ev));
    FNT_CHECK(out == 6, "out = %d", out);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(missing_rank_keeps_peers_waiting)
{
    struct shared *sh = new_shared();
    struct fnt_job job;
    memset(&job, 0, sizeof job);
    fnt_spawn(&job, 0, 3, late_rank, sh);
    fnt_spawn(&job, 1, 3, late_rank, sh);
    /* rank 2 has not arrived: ranks 0 and 1 stay in ncclCommInitRank */
    ck_assert(fnt_still_running(&job, 0, 800));
    ck_assert(fnt_still_running(&job, 1, 10));
    ck_assert(!fnt_shm_clean(&sh->id)); /* the segment waits for the last rank */
    fnt_spawn(&job, 2, 3, late_rank, sh);
    ck_assert_int_eq(fnt_wait(&job, FNT_TIMEOUT_S), 0);
    ck_assert(fnt_shm_clean(&sh->id));
}
END_TEST

/* Each rank runs a different op at the same sequence number: every rank hangs until abort. */
static void mismatch_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    ncclComm_t comm2;
    int32_t buf[32] = {0}, out[32] = {0};
    FNT_NCCL(ncclAllReduce(buf, out, 4, ncclInt32, ncclSum, comm, s)); /* #0 matches */
    FNT_NCCL(ncclAllReduce(buf, out, rank == 0 ? 10 : 20, ncclInt32, ncclSum, comm, s));
    hangs_until_abort(comm, s, ev, 600, &sh->enqueued, n);
    /* a root mismatch on a second communicator; then a Send/Recv count mismatch */
    FNT_NCCL(ncclCommInitRank(&comm2, n, sh->id2, rank));
    FNT_NCCL(ncclBroadcast(buf, out, 4, ncclInt32, rank, comm2, s));
    hangs_until_abort(comm2, s, ev, 300, &sh->done, n);
}

NG_TEST(mismatch_hangs_every_rank_and_says_so)
{
    struct shared *sh = new_shared();
    fnt_stderr_begin();
    int failed = fnt_run(2, mismatch_rank, sh);
    char *err = fnt_stderr_end();
    ck_assert_int_eq(failed, 0);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: rank 0: AllReduce #1 mismatch"));
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: rank 1: AllReduce #1 mismatch"));
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: rank 0: Broadcast #0 mismatch"));
    ck_assert_ptr_null(strstr(err, "AllReduce #0 mismatch"));
    free(err);
}
END_TEST

static void p2p_mismatch_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    int32_t buf[16] = {0};
    if (rank == 0)
        FNT_NCCL(ncclSend(buf, 5, ncclInt32, 1, comm, s));
    else
        FNT_NCCL(ncclRecv(buf, 6, ncclInt32, 0, comm, s));
    hangs_until_abort(comm, s, ev, 500, &sh->enqueued, n);
}

NG_TEST(send_recv_mismatch_hangs_both)
{
    struct shared *sh = new_shared();
    fnt_stderr_begin();
    int failed = fnt_run(2, p2p_mismatch_rank, sh);
    char *err = fnt_stderr_end();
    ck_assert_int_eq(failed, 0);
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: rank 1: Recv #0 mismatch"));
    ck_assert_ptr_nonnull(strstr(err, "fakenccl: rank 0: Send #0 mismatch"));
    free(err);
}
END_TEST

/* A ring of Send/Recv inside one group, bigger than the p2p ring buffers, plus a self send. */
static void ring_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    size_t count = 300000;
    int32_t *send = malloc(count * 4), *recv = malloc(count * 4), self = rank * 7, got = -1;
    for (size_t i = 0; i < count; i++) send[i] = (int32_t)((size_t)rank * count + i);
    for (int round = 0; round < 2; round++) {
        memset(recv, 0, count * 4);
        FNT_NCCL(ncclGroupStart());
        FNT_NCCL(ncclSend(send, count, ncclInt32, (rank + 1) % n, comm, s));
        FNT_NCCL(ncclRecv(recv, count, ncclInt32, (rank + n - 1) % n, comm, s));
        FNT_NCCL(ncclSend(&self, 1, ncclInt32, rank, comm, s));
        FNT_NCCL(ncclRecv(&got, 1, ncclInt32, rank, comm, s));
        FNT_NCCL(ncclGroupEnd());
        fnt_sync(s);
        int from = (rank + n - 1) % n;
        for (size_t i = 0; i < count; i++)
            FNT_CHECK(recv[i] == (int32_t)((size_t)from * count + i), "round %d [%zu]", round, i);
        FNT_CHECK(got == rank * 7, "self send got %d", got);
    }
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(send_recv_ring_in_a_group)
{
    fnt_run_clean(4, ring_rank, new_shared());
}
END_TEST

/* One group over two communicators and two streams, issued in opposite orders by the ranks;
 * then two communicators on one stream, also in opposite orders. */
static void two_comms_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s1 = fnt_setup_rank(rank), s2;
    ncclComm_t a, b;
    int va = rank + 1, vb = 10 * (rank + 1), oa = 0, ob = 0;
    FNT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclCommInitRank(&a, n, sh->id, rank));
    FNT_NCCL(ncclCommInitRank(&b, n, sh->id2, rank));
    FNT_NCCL(ncclGroupEnd());
    for (int same_stream = 0; same_stream < 2; same_stream++) {
        CUstream sb = same_stream ? s1 : s2;
        oa = ob = 0;
        FNT_NCCL(ncclGroupStart());
        if (rank == 0) {
            FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, a, s1));
            FNT_NCCL(ncclAllReduce(&vb, &ob, 1, ncclInt32, ncclSum, b, sb));
        } else {
            FNT_NCCL(ncclAllReduce(&vb, &ob, 1, ncclInt32, ncclSum, b, sb));
            FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, a, s1));
        }
        FNT_NCCL(ncclGroupEnd());
        fnt_sync(s1);
        fnt_sync(s2);
        FNT_CHECK(oa == 3 && ob == 30, "same_stream %d: oa %d ob %d", same_stream, oa, ob);
    }
    FNT_NCCL(ncclCommDestroy(a));
    FNT_NCCL(ncclCommDestroy(b));
}

NG_TEST(group_spans_two_comms_and_two_streams)
{
    struct shared *sh = new_shared();
    ck_assert_int_eq(fnt_run(2, two_comms_rank, sh), 0);
    ck_assert(fnt_shm_clean(&sh->id));
    ck_assert(fnt_shm_clean(&sh->id2));
}
END_TEST

/*
 * One communicator, two streams: NCCL serializes a communicator's launches
 * through its internal stream (enqueue.cc), so the AllReduce on s2 waits for
 * the one launched before it on s1, held here behind a spinning kernel; s2
 * itself is free. A group whose Send and Recv use the two streams is one
 * launch and does not deadlock.
 */
static void two_streams_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s1, s2;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s1);
    CUevent before = fnt_event(), after = fnt_event();
    int va = rank + 1, vb = 10 * (rank + 1), oa = 0, ob = 0;
    double sendv = rank, recvv = -1;
    FNT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    FNT_CU(fakecuda_test_spin(s1, &sh->release));
    FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, comm, s1));
    FNT_CU(cuEventRecord(before, s2));
    FNT_NCCL(ncclAllReduce(&vb, &ob, 1, ncclInt32, ncclSum, comm, s2));
    FNT_CU(cuEventRecord(after, s2));
    FNT_CU(cuEventSynchronize(before)); /* s2 runs: only the op waits */
    stays_pending(after, 300);
    release_when_all_checked(sh, rank, n);
    fnt_sync(s2);
    FNT_CHECK(oa == 3 && ob == 30, "oa %d ob %d", oa, ob);
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclSend(&sendv, 1, ncclFloat64, 1 - rank, comm, s1));
    FNT_NCCL(ncclRecv(&recvv, 1, ncclFloat64, 1 - rank, comm, s2));
    FNT_NCCL(ncclGroupEnd());
    fnt_sync(s1);
    fnt_sync(s2);
    FNT_CHECK(recvv == 1 - rank, "received %g", recvv);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(one_comm_serializes_its_streams)
{
    fnt_run_clean(2, two_streams_rank, new_shared());
}
END_TEST

/* A group over two streams of one communicator is one launch on both (NCCL:
 * "as if the group operation was posted on every stream"): its op on s1 does
 * not run while s2 has not reached the group, and s1 goes on once both ran. */
static void joined_streams_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s1, s2;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s1);
    CUevent after = fnt_event();
    int va = rank + 1, vb = 10 * (rank + 1), oa = 0, ob = 0;
    FNT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    FNT_CU(fakecuda_test_spin(s2, &sh->release));
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, comm, s1));
    FNT_NCCL(ncclAllReduce(&vb, &ob, 1, ncclInt32, ncclSum, comm, s2));
    FNT_NCCL(ncclGroupEnd());
    FNT_CU(cuEventRecord(after, s1));
    stays_pending(after, 300);
    FNT_CHECK(oa == 0, "the op on s1 ran before s2 reached the group");
    release_when_all_checked(sh, rank, n);
    fnt_sync(s1);
    FNT_CHECK(oa == 3 && ob == 30, "oa %d ob %d", oa, ob);
    fnt_sync(s2);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(group_on_two_streams_is_one_launch)
{
    fnt_run_clean(2, joined_streams_rank, new_shared());
}
END_TEST

/* ... and each of its streams goes on only once the whole launch finished:
 * rank 0's group holds an AllReduce on s1 and a Recv on s2 whose Send rank 1
 * makes later; s1 waits for the Recv although its AllReduce is done. */
static void joined_end_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s1, s2;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s1);
    CUevent after = fnt_event();
    int va = rank + 1, oa = 0, v = 7, got = 0;
    FNT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    if (rank == 0) {
        FNT_NCCL(ncclGroupStart());
        FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, comm, s1));
        FNT_NCCL(ncclRecv(&got, 1, ncclInt32, 1, comm, s2));
        FNT_NCCL(ncclGroupEnd());
        FNT_CU(cuEventRecord(after, s1));
        for (int t = 0; t < 30000 && !__atomic_load_n(&oa, __ATOMIC_ACQUIRE); t += 10)
            fnt_sleep_ms(10);
        FNT_CHECK(oa == 3, "the AllReduce never ran: oa %d", oa);
        stays_pending(after, 300);
        fnt_set_flag(&sh->go, 1);
        fnt_sync(s1);
        FNT_CHECK(got == 7, "received %d", got);
        fnt_sync(s2);
    } else {
        FNT_NCCL(ncclAllReduce(&va, &oa, 1, ncclInt32, ncclSum, comm, s1));
        fnt_sync(s1);
        FNT_CHECK(fnt_wait_flag(&sh->go, 1, 30), "rank 0 never saw its AllReduce done");
        FNT_NCCL(ncclSend(&v, 1, ncclInt32, 0, comm, s2));
        fnt_sync(s2);
    }
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(group_streams_wait_for_the_whole_launch)
{
    fnt_run_clean(2, joined_end_rank, new_shared());
}
END_TEST

/* Inside a group nothing is launched: the op runs at the outermost ncclGroupEnd only. */
static void nested_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent ev = fnt_event();
    int v = rank + 1, out = 0;
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_NCCL(ncclGroupEnd());
    FNT_CU(cuEventRecord(ev, s)); /* before the outer end: nothing of ours precedes it */
    FNT_CU(cuEventSynchronize(ev));
    FNT_CHECK(out == 0, "the op ran before the outermost ncclGroupEnd");
    FNT_NCCL(ncclGroupEnd());
    fnt_sync(s);
    FNT_CHECK(out == 3, "out = %d", out);
    FNT_CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd outside a group accepted");
    FNT_CHECK(strstr(ncclGetLastError(NULL), "not in a group call") != NULL, "last error: %s",
              ncclGetLastError(NULL));
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(group_launches_at_outermost_end)
{
    fnt_run_clean(2, nested_rank, new_shared());
}
END_TEST

/* Group state is per thread: another thread's op runs while this thread's group is open. */
struct thread_arg {
    ncclComm_t comm;
    CUstream s;
    int v, out;
};

static void *other_thread(void *p)
{
    struct thread_arg *t = p;
    FNT_CU(cuCtxSetCurrent(NULL));
    CUcontext ctx;
    CUdevice dev;
    FNT_CU(cuDeviceGet(&dev, fnt_rank % 8));
    FNT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    FNT_CU(cuCtxSetCurrent(ctx));
    FNT_NCCL(ncclAllReduce(&t->v, &t->out, 1, ncclInt32, ncclSum, t->comm, t->s));
    FNT_CU(cuStreamSynchronize(t->s));
    return NULL;
}

static void per_thread_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s = fnt_setup_rank(rank), s2;
    ncclComm_t a, b;
    int v = rank + 1, out = 0;
    pthread_t t;
    FNT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    FNT_NCCL(ncclCommInitRank(&a, n, sh->id, rank));
    FNT_NCCL(ncclCommInitRank(&b, n, sh->id2, rank));
    struct thread_arg ta = {b, s2, 100 * (rank + 1), 0};
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, a, s));
    FNT_CHECK(pthread_create(&t, NULL, other_thread, &ta) == 0, "pthread_create");
    pthread_join(t, NULL); /* the other thread's op completed while our group is open */
    FNT_CHECK(ta.out == 300, "other thread got %d", ta.out);
    FNT_CHECK(out == 0, "the grouped op ran early");
    FNT_NCCL(ncclGroupEnd());
    fnt_sync(s);
    FNT_CHECK(out == 3, "out = %d", out);
    FNT_NCCL(ncclCommDestroy(a));
    FNT_NCCL(ncclCommDestroy(b));
}

NG_TEST(group_state_is_per_thread)
{
    struct shared *sh = new_shared();
    ck_assert_int_eq(fnt_run(2, per_thread_rank, sh), 0);
}
END_TEST

/* ncclCommInitAll: every rank in this process, one device and stream each, driven by one
 * thread through a group (as NCCL requires when one thread drives several ranks). */
NG_TEST(init_all_in_one_process)
{
    enum { N = 4 };
    ncclComm_t comms[N];
    CUstream s[N];
    CUcontext ctx[N];
    int in[N], out[N];
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
    for (int i = 0; i < N; i++) {
        CUdevice dev;
        int count, device, rank;
        ck_assert_int_eq(cuDeviceGet(&dev, i), CUDA_SUCCESS);
        ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx[i], dev), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxSetCurrent(ctx[i]), CUDA_SUCCESS);
        ck_assert_int_eq(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        ck_assert_int_eq(ncclCommCount(comms[i], &count), ncclSuccess);
        ck_assert_int_eq(ncclCommCuDevice(comms[i], &device), ncclSuccess);
        ck_assert_int_eq(ncclCommUserRank(comms[i], &rank), ncclSuccess);
        ck_assert_int_eq(count, N);
        ck_assert_int_eq(device, i);
        ck_assert_int_eq(rank, i);
        in[i] = i + 1;
        out[i] = 0;
    }
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(ncclAllReduce(&in[i], &out[i], 1, ncclInt32, ncclMax, comms[i], s[i]),
                         ncclSuccess);
    ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(cuStreamSynchronize(s[i]), CUDA_SUCCESS);
        ck_assert_int_eq(out[i], N);
    }
    /* a devlist picks the devices; a duplicate is refused */
    int devlist[2] = {5, 3}, dup[2] = {1, 1}, dev;
    ncclComm_t two[2];
    ck_assert_int_eq(ncclCommInitAll(two, 2, devlist), ncclSuccess);
    ck_assert_int_eq(ncclCommCuDevice(two[0], &dev), ncclSuccess);
    ck_assert_int_eq(dev, 5);
    ck_assert_int_eq(ncclCommInitAll(two + 0, 2, dup), ncclInvalidUsage);
    for (int i = 0; i < N; i++) ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
}
END_TEST

/* Ranks as threads of one process, each with its own communicator handle and stream. */
struct rank_thread {
    ncclUniqueId id;
    int rank, n, out;
    ncclResult_t r;
};

static void *thread_rank(void *p)
{
    struct rank_thread *t = p;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    ncclComm_t comm;
    int v = t->rank + 1;
    cuDeviceGet(&dev, t->rank);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    t->r = ncclCommInitRank(&comm, t->n, t->id, t->rank);
    for (int i = 0; t->r == ncclSuccess && i < 20; i++)
        t->r = ncclAllReduce(&v, &t->out, 1, ncclInt32, ncclSum, comm, s);
    if (t->r == ncclSuccess && cuStreamSynchronize(s) != CUDA_SUCCESS)
        t->r = ncclUnhandledCudaError;
    if (t->r == ncclSuccess) t->r = ncclCommDestroy(comm);
    return NULL;
}

NG_TEST(ranks_as_threads)
{
    enum { N = 4 };
    struct rank_thread t[N];
    pthread_t th[N];
    ncclUniqueId id = fnt_unique_id();
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    for (int i = 0; i < N; i++) {
        t[i] = (struct rank_thread){id, i, N, 0, ncclInternalError};
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_rank, &t[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(t[i].r, ncclSuccess);
        ck_assert_int_eq(t[i].out, 10);
    }
    ck_assert(fnt_shm_clean(&id));
}
END_TEST

/* An AllReduce captured into a graph runs at each of 3 launches, with fresh inputs. */
static void graph_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUgraph graph;
    CUgraphExec exec;
    int v = 0, out = -1;
    FNT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuStreamEndCapture(s, &graph));
    fnt_sync(s);
    FNT_CHECK(out == -1, "the captured op ran during capture");
    FNT_CU(cuGraphInstantiate(&exec, graph, 0));
    for (int k = 1; k <= 3; k++) {
        v = k * (rank + 1);
        FNT_CU(cuGraphLaunch(exec, s));
        fnt_sync(s);
        FNT_CHECK(out == k * n * (n + 1) / 2, "launch %d: out = %d", k, out);
    }
    /* an ordinary op after the replays still matches: seqs were assigned per execution */
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclMax, comm, s));
    fnt_sync(s);
    FNT_CHECK(out == 3 * n, "after the graph: out = %d", out);
    FNT_CU(cuGraphExecDestroy(exec));
    FNT_CU(cuGraphDestroy(graph));
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(captured_allreduce_runs_at_each_graph_launch)
{
    fnt_run_clean(3, graph_rank, new_shared());
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakenccl_sync", "sync", 240, ng_check_tests(), NULL));
}
