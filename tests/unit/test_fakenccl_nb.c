/*
 * Fake NCCL: nonblocking communicators as NCCL 2.28 runs them. The first
 * launch waits for every rank's connection setup; FAKENCCL_NB_SEED mixes
 * ncclSuccess and ncclInProgress from ops, the same way for the same seed;
 * a nonblocking ncclGroupSimulateEnd launches its ops; two threads inside
 * one nonblocking communicator at once are reported.
 */
#include "test_fakenccl_util.h"

#include "fakecuda.h"

#include <check.h>

#include "check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_OPS 24

struct shared {
    ncclUniqueId id;
    volatile int flag;
    int seed, run;          /* FAKENCCL_NB_SEED of this run (-1: unset), and its index */
    int results[3][NB_OPS]; /* what each op returned, per run */
};

static struct shared *new_shared(void)
{
    return fnt_shared_job(sizeof(struct shared));
}

static ncclComm_t nb_init(struct shared *sh, int rank, int n)
{
    ncclComm_t comm;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    FNT_CHECK(ncclCommInitRankConfig(&comm, n, sh->id, rank, &cfg) == ncclInProgress,
              "init did not return ncclInProgress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "init did not succeed");
    return comm;
}

/* Rank 1 reaches its first op late: rank 0's first launch stays in progress until then. */
static void first_launch_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm = nb_init(sh, rank, n);
    ncclResult_t st;
    int v = rank + 1, out = 0;
    if (rank == 1) FNT_CHECK(fnt_wait_flag(&sh->flag, 1, 30), "rank 0 did not check");
    FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInProgress,
              "the first op did not return ncclInProgress");
    if (rank == 0) {
        fnt_sleep_ms(300);
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        FNT_CHECK(st == ncclInProgress, "launched before rank 1 connected (%d)", st);
        fnt_set_flag(&sh->flag, 1);
    }
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "the first launch did not complete");
    fnt_sync(s);
    FNT_CHECK(out == 3, "out = %d", out);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(first_launch_waits_for_every_rank)
{
    fnt_run_clean(2, first_launch_rank, new_shared());
}
END_TEST

/* NB_OPS ops under FAKENCCL_NB_SEED=sh->seed; stores what each returned in results[run]. */
static void seeded_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    char seed[16];
    snprintf(seed, sizeof seed, "%d", sh->seed);
    if (sh->seed >= 0) setenv("FAKENCCL_NB_SEED", seed, 1);
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm = nb_init(sh, rank, n);
    for (int i = 0; i < NB_OPS; i++) {
        int v = i, out = -1;
        ncclResult_t r = ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s);
        FNT_CHECK(r == ncclSuccess || r == ncclInProgress, "op %d returned %d", i, r);
        sh->results[sh->run][i] = r;
        FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "op %d did not complete", i);
        fnt_sync(s);
        FNT_CHECK(out == i, "op %d: out = %d", i, out);
    }
    FNT_NCCL(ncclCommDestroy(comm));
}

/* Seeds 7, 7 and 9: the same seed gives the same sequence, with both results in it (the
 * first op, which connects, is always in progress); another seed gives another one. */
NG_TEST(nb_seed_mixes_results_deterministically)
{
    struct shared *sh = new_shared();
    const int seeds[3] = {7, 7, 9};
    for (int k = 0; k < 3; k++) {
        sh->id = fnt_unique_id();
        sh->seed = seeds[k];
        sh->run = k;
        ck_assert_int_eq(fnt_run(1, seeded_rank, sh), 0);
    }
    int quick = 0;
    for (int i = 0; i < NB_OPS; i++) quick += sh->results[0][i] == ncclSuccess;
    ck_assert_int_eq(sh->results[0][0], ncclInProgress);
    ck_assert_int_gt(quick, 0);
    ck_assert_int_lt(quick, NB_OPS - 1);
    ck_assert_mem_eq(sh->results[0], sh->results[1], sizeof sh->results[0]);
    ck_assert(memcmp(sh->results[0], sh->results[2], sizeof sh->results[0]) != 0);
}
END_TEST

/* Without a seed every op answers ncclInProgress, one of the outcomes NCCL can give. */
NG_TEST(without_seed_ops_are_in_progress)
{
    struct shared *sh = new_shared();
    sh->seed = -1;
    ck_assert_int_eq(fnt_run(1, seeded_rank, sh), 0);
    for (int i = 0; i < NB_OPS; i++) ck_assert_int_eq(sh->results[0][i], ncclInProgress);
}
END_TEST

/* A nonblocking ncclGroupSimulateEnd launches the group's ops and leaves simInfo alone. */
static void simulate_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm = nb_init(sh, rank, n);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    float untouched = sim.estimatedTime;
    int v = rank + 1, out = 0;
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    FNT_CHECK(ncclGroupSimulateEnd(&sim) == ncclInProgress, "simulate did not launch");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "the group launch did not complete");
    fnt_sync(s);
    FNT_CHECK(out == n * (n + 1) / 2, "the op did not run: out = %d", out);
    FNT_CHECK(memcmp(&sim.estimatedTime, &untouched, sizeof untouched) == 0,
              "estimatedTime was written (%g)", (double)sim.estimatedTime);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(nonblocking_simulate_end_launches)
{
    fnt_run_clean(2, simulate_rank, new_shared());
}
END_TEST

/* Whether this process's stderr (a file: fnt_stderr_begin) contains `what` yet. */
static bool stderr_has(const char *what)
{
    char *text = fnt_read_file("/proc/self/fd/2");
    bool found = text && strstr(text, what);
    free(text);
    return found;
}

/*
 * One thread at a time per communicator: a thread's ncclCommDestroy waits for
 * an op held behind a spinning kernel while this thread polls
 * ncclCommGetAsyncError on the same nonblocking comm; the overlap is
 * reported once. Calls made one after another are not.
 */
static void overlap_rank(int rank, int n, void *arg)
{
    struct shared *sh = arg;
    /* whichever of the two calls came second is the one reported */
    const char *line = "on a nonblocking communicator (rank 0 of 1) while another thread is "
                       "inside nccl";
    CUstream s = fnt_setup_rank(rank);
    ncclComm_t comm = nb_init(sh, rank, n);
    int v = 1, out = 0;
    ncclResult_t st;
    FNT_CU(fakecuda_test_spin(s, &sh->flag));
    FNT_CHECK(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s) == ncclInProgress,
              "the first op did not return ncclInProgress");
    FNT_CHECK(fnt_poll_async(comm) == ncclSuccess, "the launch did not complete");
    FNT_CHECK(!stderr_has("another thread is inside"), "calls in turn reported as overlapping");
    struct fnt_destroyer d;
    fnt_destroy_start(&d, comm);
    for (int i = 0; i < 30000 && !stderr_has(line); i++) { /* until the destroyer is inside */
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        fnt_sleep_ms(1);
    }
    FNT_CHECK(stderr_has(line), "the overlapping call was not reported");
    fnt_set_flag(&sh->flag, 1);
    FNT_CHECK(fnt_destroy_join(&d) == ncclSuccess, "destroy returned %d", d.r);
    FNT_CHECK(out == 1, "out = %d", out);
}

NG_TEST(overlapping_calls_on_one_comm_are_reported)
{
    struct shared *sh = new_shared();
    fnt_stderr_begin();
    int failed = fnt_run(1, overlap_rank, sh);
    char *err = fnt_stderr_end();
    ck_assert_int_eq(failed, 0);
    const char *first = strstr(err, "while another thread is inside");
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_null(strstr(first + 1, "while another thread is inside")); /* once */
    free(err);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakenccl_nb", "nb", 240, ng_check_tests(), NULL));
}
