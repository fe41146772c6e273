/*
 * Fake NCCL: fault injection. FAKENCCL_FAIL_OP/NTH/RESULT/RANK make the
 * Nth call of an op fail without enqueuing; FAKENCCL_DELAY_MS/RANK delay a
 * rank's stream before each launch; FAKENCCL_ASYNC_ERROR_AFTER/RANK/RESULT
 * raise an asynchronous error once N ops completed. A rank the variables do
 * not name runs normally. The variables are read at a process's first NCCL
 * call, so each test sets them first (every Check test is its own process).
 */
#include "fakecuda.h"
#include "test_fakenccl_util.h"

#include <check.h>

#include "check_main.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct shared {
    ncclUniqueId id;
    volatile int flag, count;
};

static struct shared *new_shared(void)
{
    return fnt_shared_job(sizeof(struct shared));
}

/* FAIL_RANK=1, FAIL_NTH=2: rank 1's second AllReduce fails; it retries, and both match. */
static void fail_nth_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    int v = rank + 1, out = 0;
    for (int call = 1; call <= (rank == 1 ? 3 : 2); call++) {
        ncclResult_t r = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s);
        if (rank == 1 && call == 2) {
            FNT_CHECK(r == ncclRemoteError, "call 2 returned %d", r);
            FNT_CHECK(strstr(ncclGetLastError(comm), "injected failure of ncclAllReduce call 2"),
                      "last error: %s", ncclGetLastError(comm));
            continue;
        }
        FNT_CHECK(r == ncclSuccess, "call %d returned %d", call, r);
        fnt_sync(s);
        FNT_CHECK(out == 3, "call %d: out %d", call, out);
    }
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(fail_op_nth_call_on_one_rank)
{
    setenv("FAKENCCL_FAIL_OP", "AllReduce", 1);
    setenv("FAKENCCL_FAIL_NTH", "2", 1);
    setenv("FAKENCCL_FAIL_RESULT", "ncclRemoteError", 1);
    setenv("FAKENCCL_FAIL_RANK", "1", 1);
    fnt_run_clean(2, fail_nth_rank, new_shared());
}
END_TEST

/* FAIL_OP=GroupEnd with a numeric result: the first group fails and launches nothing. */
NG_TEST(fail_group_end_drops_the_group)
{
    setenv("FAKENCCL_FAIL_OP", "ncclGroupEnd", 1);
    setenv("FAKENCCL_FAIL_RESULT", "5", 1);
    CUstream s;
    int v = 4, out = -1;
    ncclComm_t comm = fnt_solo_comm(&s);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
        ck_assert_int_eq(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
        ck_assert_int_eq(ncclGroupEnd(), k == 0 ? ncclInvalidUsage : ncclSuccess);
        ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
        ck_assert_int_eq(out, k == 0 ? -1 : 4);
    }
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* DELAY_RANK=1: rank 1's stream sleeps DELAY_MS before the op (a lower bound on the time). */
static void delay_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    CUevent before = fnt_event(), after = fnt_event();
    float ms;
    int v = 1, out = 0;
    FNT_CU(cuEventRecord(before, s));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuEventRecord(after, s));
    FNT_CU(cuEventSynchronize(after));
    FNT_CU(cuEventElapsedTime(&ms, before, after));
    FNT_CHECK(ms >= 1200, "the op took %.1f ms", ms); /* the peer waits for the delayed rank */
    FNT_CHECK(out == 2, "out %d", out);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(delay_slows_one_ranks_stream)
{
    setenv("FAKENCCL_DELAY_MS", "1200", 1);
    setenv("FAKENCCL_DELAY_RANK", "1", 1);
    fnt_run_clean(2, delay_rank, new_shared());
}
END_TEST

/* With RANK set, DELAY_RANK names a process: RANK=1 sleeps (600 s: it would outlive the test),
 * RANK=0 runs normally, each on a communicator of its own. */
static void delay_by_env_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    (void)n;
    setenv("RANK", rank ? "1" : "0", 1);
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm;
    CUevent ev;
    ncclUniqueId id;
    int v = 1, out = 0;
    FNT_NCCL(ncclGetUniqueId(&id));
    FNT_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    FNT_CU(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CU(cuEventRecord(ev, s));
    if (rank == 0) {
        FNT_CU(cuEventSynchronize(ev));
        FNT_CHECK(out == 1, "out %d", out);
        FNT_NCCL(ncclCommDestroy(comm));
        fnt_set_flag(&sh->flag, 1);
        return;
    }
    FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "RANK=0 was delayed too");
    fnt_sleep_ms(300);
    FNT_CHECK(cuEventQuery(ev) == CUDA_ERROR_NOT_READY, "RANK=1 was not delayed");
    FNT_NCCL(ncclCommAbort(comm)); /* ends the delay */
    FNT_CU(cuEventSynchronize(ev));
    FNT_CHECK(out == 0, "the aborted op ran");
}

NG_TEST(delay_rank_follows_the_rank_variable)
{
    setenv("FAKENCCL_DELAY_MS", "600000", 1);
    setenv("FAKENCCL_DELAY_RANK", "1", 1);
    struct shared *sh = new_shared();
    ck_assert_int_eq(fnt_run(2, delay_by_env_rank, sh), 0);
}
END_TEST

/* ASYNC_ERROR_AFTER=2 on rank 0: after two completed ops its comm reports ncclRemoteError. */
static void async_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, sh->id, &s);
    ncclResult_t st;
    int v = 1, out = 0;
    for (int k = 0; k < 2; k++) {
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclSuccess, "async error before op %d", k);
        FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
        fnt_sync(s);
        FNT_CHECK(out == 2, "out %d", out);
    }
    FNT_NCCL(ncclCommGetAsyncError(comm, &st));
    if (rank == 0) {
        FNT_CHECK(st == ncclRemoteError, "async %d", st);
        FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclRemoteError,
                  "op after the async error accepted");
    } else {
        FNT_CHECK(st == ncclSuccess, "rank 1 got async %d", st);
    }
    FNT_CHECK(fnt_arrive(&sh->count, n), "peer lost"); /* abort only once both checked */
    FNT_NCCL(ncclCommAbort(comm));
}

NG_TEST(async_error_after_n_ops)
{
    setenv("FAKENCCL_ASYNC_ERROR_AFTER", "2", 1);
    setenv("FAKENCCL_ASYNC_ERROR_RANK", "0", 1);
    struct shared *sh = new_shared();
    ck_assert_int_eq(fnt_run(2, async_rank, sh), 0);
}
END_TEST

/*
 * ASYNC_ERROR_RESULT: the error raised; an op already enqueued behind it fails too.
 * The stream is held until both ops are enqueued: otherwise the first may complete,
 * and raise the error, before the second is enqueued (which then fails at once).
 */
NG_TEST(async_error_result_and_later_ops_fail)
{
    setenv("FAKENCCL_ASYNC_ERROR_AFTER", "1", 1);
    setenv("FAKENCCL_ASYNC_ERROR_RESULT", "ncclSystemError", 1);
    ncclResult_t st;
    CUstream s;
    int v = 6, first = -1, second = -1;
    volatile int release = 0;
    ncclComm_t comm = fnt_solo_comm(&s);
    ck_assert_int_eq(fakecuda_test_spin(s, &release), CUDA_SUCCESS);
    ck_assert_int_eq(ncclAllReduce(&v, &first, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&v, &second, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(first, 6);
    ck_assert_int_eq(second, -1);
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &st), ncclSuccess);
    ck_assert_int_eq(st, ncclSystemError);
    ck_assert_int_eq(ncclCommAbort(comm), ncclSuccess);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakenccl_faults", "faults", 240, ng_check_tests(), NULL));
}
