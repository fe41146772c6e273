/*
 * test_analyze_causes.c: the causes of `ncclguard analyze` one by one (docs/analysis.md,
 * "Causes"): crashed, no_dump, async_error, mismatch and a skipped op, missing at the
 * lowest seq waited in, gpu_not_started; whether a job is stuck at all (the dump's
 * reason, a timeout flag, a failed op, an async error, an op in flight 60 s); the order
 * of the causes when one rank has several, what a crash explains, and the launcher's
 * line about a culprit (cli/analyze/rank.c, analyze/hang.c, analyze/cmp.c,
 * analyze/p2p.c, analyze/verdict.c, analyze/launcher.c).
 *
 * Each rule is tried at its boundary and beside it (one rank, one count, one ns, one
 * state apart), on small dumps written by hand (analyze_dumps.h) and read through the
 * real reader. A verdict is compared as its culprits, "RANK CAUSE; ...", in its order;
 * RANK is the global rank, -1 when the dumps cannot tell it. The bounds are the
 * documented ones (4 ranks without a dump, 60 s), written as numbers here: a changed
 * bound fails the test, and then the docs change with it.
 */
#include <check.h>

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze_dumps.h"
#include "check_main.h"

#define STUCK_NS 60000000000LL /* docs/analysis.md: an op in flight for 60 s */

static char g_dir[64];
static struct an g_an;
static int g_exit;

static void setup(void)
{
    ng_check_tmpdir(g_dir, sizeof g_dir, "causes");
}

static void teardown(void)
{
    (void)ng_check_rmtree(g_dir); /* a leftover temp directory is no failure */
}

static void write_dump(struct fdump *d)
{
    ad_write(g_dir, d);
}

/* Analyzes the directory (the exit status in g_exit); the culprits as text. */
static const char *verdict(void)
{
    g_exit = ad_analyze(&g_an, g_dir, NULL);
    return ad_culprits(&g_an, 0);
}

/* The culprit that is global rank g (-1: the first without one). */
static const struct an_finding *culprit(int64_t g)
{
    for (size_t i = 0; i < g_an.nculprits; i++)
        if (g_an.culprits[i].f.grank == g) return &g_an.culprits[i].f;
    ck_abort_msg("no culprit is rank %lld: '%s'", (long long)g, ad_culprits(&g_an, 0));
    return NULL;
}

static uint32_t comm_index(uint64_t id)
{
    uint32_t c = an_u64map_get(&g_an.comm_by_id, id);
    ck_assert_uint_ne(c, AN_NONE);
    return c;
}

#define NOTED(s) ck_assert_msg(ad_noted(&g_an, s), "no note says '%s'", s)
#define NOT_NOTED(s) ck_assert_msg(!ad_noted(&g_an, s), "a note says '%s'", s)

/* Rank r of an n-rank world that completed AllReduce #4 and waits in #5 (STATE). */
static void at_five(struct fdump *d, int r, int n, const char *state)
{
    *d = (struct fdump){.rank = r};
    comm(d, W, r, n, 5, 4, NULL);
    op(d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
    op(d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, state, 0});
}

/* Rank r of an n-rank world that completed #4 and never called #5. */
static void at_four(struct fdump *d, int r, int n)
{
    *d = (struct fdump){.rank = r};
    comm(d, W, r, n, 4, 4, NULL);
    op(d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
}

/* A world of n ranks waiting in #5 (started), but rank `behind`, which never called it
 * (-1: none), and the ranks from `absent` on, which leave no dump (n: none). REASON:
 * rank `odd`'s dump's reason (NULL: a timeout like the others). */
static void world(int n, int behind, int absent, int odd, const char *reason)
{
    for (int r = 0; r < n && r < absent; r++) {
        struct fdump d;
        if (r == behind)
            at_four(&d, r, n);
        else
            at_five(&d, r, n, "started");
        if (r == odd) d.reason = reason;
        write_dump(&d);
    }
}

/* ---- crashed, and what a crash explains ---- */

NG_TEST(crashed_rank_is_named)
{
    world(3, 1, 3, 1, "crash");
    /* rank 1 is missing too (it never called #5): crashed comes first in the table */
    ck_assert_str_eq(verdict(), "1 crashed");
    ck_assert_int_eq(g_exit, AN_EXIT_CULPRIT);
    ck_assert_uint_eq(culprit(1)->comm, AN_NONE);
}
END_TEST

NG_TEST(rank_that_did_not_crash_is_missing)
{
    world(3, 1, 3, 1, "timeout"); /* beside it: the same dump written on a timeout */
    ck_assert_str_eq(verdict(), "1 missing");
    ck_assert_uint_eq(culprit(1)->seq, 5);
}
END_TEST

/* Ranks 0 and 1 started #5, rank 2 has it scheduled; rank 1 crashed (or not) there. */
static void crash_beside_gpu_not_started(const char *r1_reason)
{
    struct fdump d;
    at_five(&d, 0, 3, "started");
    write_dump(&d);
    at_five(&d, 1, 3, "started");
    d.reason = r1_reason;
    write_dump(&d);
    at_five(&d, 2, 3, "scheduled");
    write_dump(&d);
}

NG_TEST(crash_explains_the_waits)
{
    crash_beside_gpu_not_started("crash");
    ck_assert_str_eq(verdict(), "1 crashed");
}
END_TEST

NG_TEST(without_a_crash_the_wait_is_blamed)
{
    crash_beside_gpu_not_started("timeout");
    ck_assert_str_eq(verdict(), "2 gpu_not_started");
    ck_assert_uint_eq(culprit(2)->blocker.index, 5);
}
END_TEST

/* A job of one rank: #5 scheduled, timed out (or not yet) before its GPU started it. */
static void alone_scheduled(int timed_out)
{
    struct fdump d;
    at_five(&d, 0, 1, "scheduled");
    d.ops[1].x.timeout = timed_out;
    write_dump(&d);
}

NG_TEST(alone_timed_out_before_its_gpu_started)
{
    alone_scheduled(1);
    ck_assert_str_eq(verdict(), "0 gpu_not_started");
    ck_assert_uint_eq(culprit(0)->blocker.index, 5);
}
END_TEST

NG_TEST(alone_scheduled_not_timed_out_is_no_finding)
{
    alone_scheduled(0); /* beside it: in flight, not (yet) late: nothing to blame */
    ck_assert_str_eq(verdict(), "");
    ck_assert_uint_eq(g_an.nfindings, 0);
}
END_TEST

NG_TEST(crash_keeps_a_mismatch)
{
    /* 4 ranks in #5; rank 3 called it with another count; rank 1 crashed */
    for (int r = 0; r < 4; r++) {
        struct fdump d = {.rank = r, .reason = r == 1 ? "crash" : NULL};
        comm(&d, W, r, 4, 5, 4, NULL);
        op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", r == 3 ? 9 : 0});
        write_dump(&d);
    }
    ck_assert_str_eq(verdict(), "1 crashed; 3 mismatch");
}
END_TEST

NG_TEST(crash_explains_a_missing_rank)
{
    world(4, 2, 4, 1, "crash"); /* rank 2 never called #5, rank 1 crashed in it */
    ck_assert_str_eq(verdict(), "1 crashed");
}
END_TEST

/* ---- no_dump ---- */

NG_TEST(rank_without_a_dump_is_named)
{
    world(4, -1, 3, -1, NULL);
    ck_assert_str_eq(verdict(), "3 no_dump");
    const struct an_finding *f = culprit(3);
    ck_assert_int_eq(f->rank, -1);
    ck_assert_int_eq(f->comm_rank, 3);
    ck_assert_uint_eq(f->comm, comm_index(0xaa));
    ck_assert_uint_eq(f->seq, 5);
    ck_assert_uint_eq(f->nwaiting, 3);
}
END_TEST

NG_TEST(four_ranks_without_a_dump_are_named)
{
    world(6, -1, 2, -1, NULL);
    ck_assert_str_eq(verdict(), "2 no_dump; 3 no_dump; 4 no_dump; 5 no_dump");
}
END_TEST

NG_TEST(five_ranks_without_a_dump_are_not)
{
    world(7, -1, 2, -1, NULL);
    ck_assert_str_eq(verdict(), "");
    ck_assert_int_eq(g_exit, AN_EXIT_NO_CULPRIT);
    NOTED("5 of the job's 7 ranks left no dump");
}
END_TEST

/* The job's bound alone: a world of N ranks of which ranks 0-2 dumped, and split bb of
 * 4 ranks, whose comm ranks 0-2 are ranks 0-2, waiting in #1; its comm rank 3 is one of
 * the N - 3 ranks without a dump (which one, the dumps cannot tell). */
static void split_of_a_partial_job(int n)
{
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, n, 4, 4, NULL);
        comm(&d, S1, r, 4, 1, 0, NULL);
        op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
        op(&d, (struct fop){5, S1, 1, 0, 0, "AllReduce", ST, "started", 0});
        write_dump(&d);
    }
}

NG_TEST(split_member_named_with_four_absent_from_the_job)
{
    split_of_a_partial_job(7);
    ck_assert_str_eq(verdict(), "-1 no_dump");
    ck_assert_int_eq(g_an.culprits[0].f.comm_rank, 3);
    ck_assert_uint_eq(g_an.culprits[0].f.comm, comm_index(0xbb));
}
END_TEST

NG_TEST(split_member_not_named_with_five_absent_from_the_job)
{
    split_of_a_partial_job(8);
    ck_assert_str_eq(verdict(), "");
    NOTED("5 of the job's 8 ranks left no dump");
}
END_TEST

/* The communicator's bound alone: every rank of a 6-rank world dumped; split bb of 6
 * ranks was created by ranks 0 to MEMBERS - 1 only (as their own comm ranks), which wait
 * in its #1. */
static void split_created_by_few(int members)
{
    for (int r = 0; r < 6; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 6, 4, 4, NULL);
        op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
        if (r < members) {
            comm(&d, S1, r, 6, 1, 0, NULL);
            op(&d, (struct fop){5, S1, 1, 0, 0, "AllReduce", ST, "started", 0});
        }
        write_dump(&d);
    }
}

NG_TEST(four_ranks_that_never_created_the_comm_are_missing)
{
    split_created_by_few(2);
    /* they dumped: missing (never created it), not no_dump */
    ck_assert_str_eq(verdict(), "2 missing; 3 missing; 4 missing; 5 missing");
    ck_assert_uint_eq(culprit(4)->comm, comm_index(0xbb));
}
END_TEST

NG_TEST(five_ranks_that_never_created_the_comm_are_not)
{
    split_created_by_few(1);
    ck_assert_str_eq(verdict(), "");
    NOTED("5 of its 6 ranks left no dump");
}
END_TEST

NG_TEST(no_dump_not_blamed_beside_a_missing_rank)
{
    world(4, 2, 3, -1, NULL); /* rank 2 never called #5, rank 3 left no dump */
    ck_assert_str_eq(verdict(), "2 missing");
}
END_TEST

NG_TEST(no_dump_not_blamed_after_a_crash)
{
    world(4, -1, 3, 2, "crash"); /* rank 2 crashed in #5, rank 3 left no dump */
    ck_assert_str_eq(verdict(), "2 crashed");
}
END_TEST

/* World of N ranks: ranks 0-2 dumped (the others did not); split bb of 3 ranks holds
 * rank FIRST as comm rank 0 and rank FIRST + 1 as comm rank 1, waiting in its #1; its
 * comm rank 2 left no dump. */
static void split_missing_its_last(int n, int first)
{
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, n, 4, 4, NULL);
        op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
        if (r >= first && r < first + 2) {
            comm(&d, S1, r - first, 3, 1, 0, NULL);
            op(&d, (struct fop){5, S1, 1, 0, 0, "AllReduce", ST, "started", 0});
        }
        write_dump(&d);
    }
}

NG_TEST(lone_absent_member_is_the_lone_rank_without_a_dump)
{
    split_missing_its_last(4, 1);
    ck_assert_str_eq(verdict(), "3 no_dump");
    ck_assert_int_eq(culprit(3)->comm_rank, 2);
}
END_TEST

NG_TEST(absent_member_among_two_ranks_without_a_dump)
{
    split_missing_its_last(5, 1); /* ranks 3 and 4 left no dump: which one is it? */
    ck_assert_str_eq(verdict(), "-1 no_dump");
    ck_assert_int_eq(culprit(-1)->comm_rank, 2);
}
END_TEST

NG_TEST(split_with_global_ranks_as_comm_ranks_is_not_the_world)
{
    /* ranks 0 and 1 are comm ranks 0 and 1 of bb, but bb is not the world: its comm
     * rank 2 is not rank 2 (which dumped) */
    split_missing_its_last(5, 0);
    ck_assert_str_eq(verdict(), "-1 no_dump");
}
END_TEST

/* Ranks 0 and 1 create a 3-rank world (STATE) and time out; rank 2 left no dump. */
static void world_being_created(const char *state)
{
    for (int r = 0; r < 2; r++) {
        struct fdump d = {.rank = r, .reason = "init_timeout"};
        comm(&d, W, r, 3, 0, 0, NULL)->state = state;
        write_dump(&d);
    }
}

NG_TEST(rank_without_a_dump_never_created_the_comm)
{
    world_being_created("initializing");
    ck_assert_str_eq(verdict(), "2 no_dump");
    ck_assert_uint_eq(culprit(2)->seq, 0);
}
END_TEST

NG_TEST(comm_created_waits_for_nobody)
{
    world_being_created("ready");
    ck_assert_str_eq(verdict(), "");
    ck_assert_int_eq(g_exit, AN_EXIT_NO_CULPRIT);
}
END_TEST

/* Two ranks; rank 0 waits in a Send (STATE) to rank 1, which left no dump. */
static void send_to_a_rank_without_a_dump(const char *state)
{
    struct fdump d = {.rank = 0};
    comm(&d, W, 0, 2, 0, 0, "[{\"peer\":1,\"last_p2p_seq\":1,\"last_completed_p2p_seq\":0}]");
    op(&d, (struct fop){3, W, 0, 1, 1, "Send", SW, state, 0});
    write_dump(&d);
}

NG_TEST(p2p_peer_without_a_dump_is_named)
{
    send_to_a_rank_without_a_dump("started");
    ck_assert_str_eq(verdict(), "1 no_dump");
    ck_assert_int_eq(culprit(1)->peer, 0);
    ck_assert_int_eq(culprit(1)->comm_rank, 1);
}
END_TEST

NG_TEST(p2p_scheduled_send_blames_no_peer)
{
    send_to_a_rank_without_a_dump("scheduled"); /* beside it: its own GPU never got there */
    ck_assert_str_eq(verdict(), "");
}
END_TEST

/* ---- async_error ---- */

/* N ranks waiting in #5; rank r's world reports errs[r] (0 none) through
 * ncclCommGetAsyncError. */
static void async_errors(int n, const int *errs)
{
    for (int r = 0; r < n; r++) {
        struct fdump d;
        at_five(&d, r, n, "started");
        d.comms[0].async_error = errs[r];
        write_dump(&d);
    }
}

NG_TEST(async_error_is_named)
{
    async_errors(2, (const int[]){0, 2});
    ck_assert_str_eq(verdict(), "1 async_error");
    ck_assert_uint_eq(culprit(1)->comm, comm_index(0xaa));
    ck_assert_ptr_nonnull(strstr(an_intern_get(&g_an.strs, culprit(1)->detail),
                                 "error 2 (ncclSystemError) through ncclCommGetAsyncError"));
}
END_TEST

NG_TEST(own_error_wins_over_a_remote_echo)
{
    async_errors(3, (const int[]){6, 0, 3}); /* 6: ncclRemoteError */
    ck_assert_str_eq(verdict(), "2 async_error");
}
END_TEST

NG_TEST(remote_errors_of_most_ranks_name_nobody)
{
    async_errors(4, (const int[]){6, 6, 6, 0});
    ck_assert_str_eq(verdict(), "");
    NOTED("3 of 4 ranks report an NCCL error, all ncclRemoteError");
}
END_TEST

NG_TEST(remote_errors_of_half_the_ranks_are_named)
{
    async_errors(4, (const int[]){6, 6, 0, 0});
    ck_assert_str_eq(verdict(), "0 async_error; 1 async_error");
    NOT_NOTED("all ncclRemoteError");
}
END_TEST

NG_TEST(remote_error_of_a_one_rank_job_is_named)
{
    async_errors(1, (const int[]){6});
    ck_assert_str_eq(verdict(), "0 async_error");
}
END_TEST

/* A dump on request (SIGUSR2: "signal", no op flagged timeout) of three ranks: rank 0
 * in #5, rank 1's #5 in STATE (with an async error ERR on the world), rank 2 never
 * called it. */
static void on_request(const char *state, int result, int err)
{
    struct fdump d;
    at_five(&d, 0, 3, "started");
    d.reason = "signal";
    d.untimed = 1;
    write_dump(&d);
    d = (struct fdump){.rank = 1, .reason = "signal", .untimed = 1};
    comm(&d, W, 1, 3, 5, 4, NULL)->async_error = err;
    op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
    op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, state, 0})->result = result;
    write_dump(&d);
    at_four(&d, 2, 3);
    d.reason = "signal";
    write_dump(&d);
}

NG_TEST(failed_op_is_an_async_error_and_a_hang)
{
    on_request("failed", 2, 0);
    /* the failure makes it a hang: rank 2 is blamed too */
    ck_assert_str_eq(verdict(), "1 async_error; 2 missing");
    ck_assert_uint_eq(culprit(1)->comm, AN_NONE);
    ck_assert_ptr_nonnull(strstr(an_intern_get(&g_an.strs, culprit(1)->detail), "on a failed op"));
}
END_TEST

NG_TEST(async_error_is_a_hang)
{
    on_request("started", 0, 3);
    ck_assert_str_eq(verdict(), "1 async_error; 2 missing");
}
END_TEST

NG_TEST(snapshot_without_an_error_is_no_hang)
{
    on_request("started", 0, 0); /* beside both: nothing failed, nothing timed out */
    ck_assert_str_eq(verdict(), "");
    ck_assert_int_eq(g_exit, AN_EXIT_HEALTHY);
    ck_assert_int_eq(g_an.hang, 0);
}
END_TEST

/* ---- mismatch, and a skipped op ---- */

/* N ranks in #5 (started, on a dump on request: no timeout); rank r calls it with
 * count counts[r] (0: 8). */
static void counts_at_five(int n, const int *counts)
{
    for (int r = 0; r < n; r++) {
        struct fdump d = {.rank = r, .reason = "signal", .untimed = 1};
        comm(&d, W, r, n, 5, 4, NULL);
        op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", counts[r]});
        write_dump(&d);
    }
}

NG_TEST(minority_is_named)
{
    counts_at_five(3, (const int[]){8, 8, 9});
    ck_assert_str_eq(verdict(), "2 mismatch");
    const struct an_finding *f = culprit(2);
    ck_assert_uint_eq(f->seq, 5);
    ck_assert_uint_eq(f->nwaiting, 2);
    ck_assert_uint_eq(f->comm, comm_index(0xaa));
    ck_assert_int_eq(g_exit, AN_EXIT_CULPRIT);
}
END_TEST

NG_TEST(even_split_names_nobody_and_is_a_hang)
{
    counts_at_five(4, (const int[]){8, 8, 9, 9});
    ck_assert_str_eq(verdict(), "");
    NOTED("with no majority to tell which side is wrong");
    ck_assert_int_eq(g_exit, AN_EXIT_NO_CULPRIT); /* the dumps were on request */
}
END_TEST

NG_TEST(larger_side_after_a_tie_wins)
{
    /* one rank each as 7 and 9 (a tie so far), two as 8 */
    counts_at_five(4, (const int[]){7, 9, 8, 8});
    ck_assert_str_eq(verdict(), "0 mismatch; 1 mismatch");
}
END_TEST

NG_TEST(three_of_the_minority_two_are_named)
{
    counts_at_five(7, (const int[]){8, 8, 8, 8, 9, 9, 9});
    ck_assert_str_eq(verdict(), "4 mismatch; 5 mismatch");
    NOTED("3 ranks called AllReduce count 9 float32 sum; two are named");
}
END_TEST

NG_TEST(two_of_the_minority_are_named_without_a_note)
{
    counts_at_five(5, (const int[]){8, 8, 8, 9, 9});
    ck_assert_str_eq(verdict(), "3 mismatch; 4 mismatch");
    NOT_NOTED("two are named");
}
END_TEST

NG_TEST(only_the_first_seq_that_differs)
{
    /* rank 2 differs at #4, rank 1 at #5: #5 follows from #4 */
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 3, 5, 4, NULL);
        op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "completed", r == 2 ? 9 : 0});
        op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", r == 1 ? 9 : 0});
        write_dump(&d);
    }
    ck_assert_str_eq(verdict(), "2 mismatch");
    ck_assert_uint_eq(culprit(2)->seq, 4);
}
END_TEST

/* What a signature is: three ranks in #5, rank 2's differs in one field (by _i:
 * nothing, count, op, datatype, reduction, root). */
START_TEST(signature_fields)
{
    static const char *const what[] = {"nothing", "count", "op", "datatype", "redop", "root"};
    for (int r = 0; r < 3; r++) {
        int odd = r == 2 ? _i : 0;
        struct fdump d = {.rank = r, .reason = "signal", .untimed = 1};
        comm(&d, W, r, 3, 5, 4, NULL);
        struct fopx *x = op(&d, (struct fop){5, W, 5, 0, 0, odd == 2 ? "Reduce" : "AllReduce", SW,
                                             "started", odd == 1 ? 9 : 0});
        x->root = odd == 5 ? "1" : "0";
        x->datatype = odd == 3 ? "float16" : NULL;
        x->redop = odd == 4 ? "max" : NULL;
        write_dump(&d);
    }
    ck_assert_msg(!strcmp(verdict(), _i ? "2 mismatch" : ""), "%s differs: '%s'", what[_i],
                  ad_culprits(&g_an, 0));
}
END_TEST

/* Ranks 0 and 1 called AllReduce #5 and wait in Broadcast #6; rank 2's #5 is OP2. */
static void skipped_one(const char *op2)
{
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 3, r < 2 ? 6 : 5, 4, NULL);
        if (r < 2) {
            op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "completed", 0});
            op(&d, (struct fop){6, W, 6, 0, 0, "Broadcast", SW, "started", 0})->root = "0";
        } else {
            op(&d, (struct fop){5, W, 5, 0, 0, op2, SW, "started", 0})->root = "0";
        }
        write_dump(&d);
    }
}

NG_TEST(op_of_the_next_seq_is_a_skipped_op)
{
    skipped_one("Broadcast");
    ck_assert_str_eq(verdict(), "2 missing");
    ck_assert_uint_eq(culprit(2)->seq, 5);
    ck_assert_ptr_nonnull(
        strstr(an_intern_get(&g_an.strs, culprit(2)->detail), "skipped AllReduce #5"));
}
END_TEST

NG_TEST(op_of_no_later_seq_is_a_mismatch)
{
    skipped_one("Reduce");
    ck_assert_str_eq(verdict(), "2 mismatch");
}
END_TEST

/* ---- missing: the seq waited in ---- */

NG_TEST(missing_counts_from_the_lowest_seq_waited_in)
{
    /* rank 0 waits in #5, rank 1 in #4; rank 2 completed #2: it never called #3, and the
     * others wait at #4 */
    struct fdump d = {.rank = 0};
    comm(&d, W, 0, 3, 5, 4, NULL);
    op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", 0});
    write_dump(&d);
    d = (struct fdump){.rank = 1};
    comm(&d, W, 1, 3, 4, 3, NULL);
    op(&d, (struct fop){4, W, 4, 0, 0, "AllReduce", SW, "started", 0});
    write_dump(&d);
    d = (struct fdump){.rank = 2};
    comm(&d, W, 2, 3, 2, 2, NULL);
    op(&d, (struct fop){2, W, 2, 0, 0, "AllReduce", SW, "completed", 0});
    write_dump(&d);
    ck_assert_str_eq(verdict(), "2 missing");
    ck_assert_uint_eq(culprit(2)->seq, 3);
    ck_assert_uint_eq(culprit(2)->nwaiting, 2);
}
END_TEST

/* ---- gpu_not_started needs a rank that started ---- */

NG_TEST(nobody_started_is_no_gpu_culprit)
{
    struct fdump d;
    for (int r = 0; r < 2; r++) {
        at_five(&d, r, 2, "scheduled");
        write_dump(&d);
    }
    ck_assert_str_eq(verdict(), "");
    ck_assert_int_eq(g_exit, AN_EXIT_NO_CULPRIT);
}
END_TEST

NG_TEST(one_started_blames_the_scheduled)
{
    struct fdump d;
    at_five(&d, 0, 2, "started");
    write_dump(&d);
    at_five(&d, 1, 2, "scheduled");
    write_dump(&d);
    ck_assert_str_eq(verdict(), "1 gpu_not_started");
}
END_TEST

/* ---- stuck: whether anybody is blamed at all ---- */

/* Two ranks on request: rank 0 in #5 (enqueued AGE ns before its dump, FLAGGED with a
 * timeout or not), rank 1 never called it; rank 0's dump's reason REASON. */
static void aged(long long age, int flagged, const char *reason)
{
    struct fdump d;
    at_five(&d, 0, 2, "started");
    d.reason = reason;
    d.untimed = !flagged;
    d.time_ns = ad_enqueue_ns(5) + age;
    write_dump(&d);
    at_four(&d, 1, 2);
    d.reason = "signal";
    write_dump(&d);
}

NG_TEST(op_in_flight_60_s_is_a_hang)
{
    aged(STUCK_NS, 0, "signal");
    ck_assert_str_eq(verdict(), "1 missing");
    ck_assert_int_eq(g_an.hang, 1);
}
END_TEST

NG_TEST(op_in_flight_a_ns_less_is_a_snapshot)
{
    aged(STUCK_NS - 1, 0, "signal");
    ck_assert_str_eq(verdict(), "");
    ck_assert_int_eq(g_exit, AN_EXIT_HEALTHY);
}
END_TEST

NG_TEST(op_flagged_timeout_is_a_hang)
{
    aged(1000, 1, "signal");
    ck_assert_str_eq(verdict(), "1 missing");
}
END_TEST

/* The reasons that make a hang by themselves, and some that do not (by _i). */
static const struct {
    const char *reason;
    int hang;
} reasons[] = {{"timeout", 1}, {"init_timeout", 1}, {"crash", 1},  {"sigterm", 1},
               {"signal", 0},  {"exit", 0},         {"trigger", 0}};

START_TEST(reason_of_a_dump)
{
    aged(1000, 0, reasons[_i].reason);
    verdict();
    ck_assert_msg(g_an.hang == reasons[_i].hang, "reason %s: hang %d", reasons[_i].reason,
                  g_an.hang);
}
END_TEST

/* ---- the verdict's order ---- */

NG_TEST(culprits_in_the_order_of_causes)
{
    /* 4 ranks in #5: rank 1 called another count, rank 3 reports an async error */
    for (int r = 0; r < 4; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 4, 5, 4, NULL)->async_error = r == 3 ? 3 : 0;
        op(&d, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", r == 1 ? 9 : 0});
        write_dump(&d);
    }
    ck_assert_str_eq(verdict(), "3 async_error; 1 mismatch");
}
END_TEST

/* ---- the launcher's line about a culprit (--launcher-log) ---- */

/* Rank 1 of 3 crashed before #5 (or, with ABSENT, rank 3 of 4 left no dump); the
 * launcher's output is LOG. The culprit's launcher line, or NULL. */
static const char *launcher_line(const char *log, int absent)
{
    if (absent)
        world(4, -1, 3, -1, NULL);
    else
        world(3, 1, 3, 1, "crash");
    struct an_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    o.launcher_log = ng_check_write(g_dir, "launcher.log", log);
    g_exit = ad_analyze(&g_an, g_dir, &o);
    ck_assert_str_eq(ad_culprits(&g_an, 0), absent ? "3 no_dump" : "1 crashed");
    uint32_t l = g_an.culprits[0].f.launcher;
    return l ? an_intern_get(&g_an.strs, l) : NULL;
}

static const struct {
    const char *log, *line;
} launchers[] = {
    {"launch: rank 0 exited with status 0\nlaunch: rank 1 killed by signal SIGSEGV\n",
     "launch: rank 1 killed by signal SIGSEGV"},
    {"srun: error: a12: task 1: Segmentation fault\n",
     "srun: error: a12: task 1: Segmentation fault"},
    {"mpirun noticed that process rank 1 with PID 4242 on node a12 exited on signal 11\n",
     "mpirun noticed that process rank 1 with PID 4242 on node a12 exited on signal 11"},
    {"[0]:\n  time      : 2026-01-01\n  rank      : 1 (local_rank: 1)\n"
     "  exitcode  : -11 (pid: 4242)\n",
     "exitcode  : -11 (pid: 4242)"},
};

START_TEST(launcher_line_of_the_culprit)
{
    const char *l = launcher_line(launchers[_i].log, 0);
    ck_assert_msg(l && !strcmp(l, launchers[_i].line), "log %d: '%s'", _i, l ? l : "(none)");
}
END_TEST

NG_TEST(launcher_lines_that_say_no_end_of_the_culprit)
{
    /* a line about rank 1 that says no end, and an end of rank 2 */
    ck_assert_ptr_null(launcher_line("launch: rank 1 started\n"
                                     "launch: rank 2 exited with status 1\n",
                                     0));
}
END_TEST

NG_TEST(launcher_first_line_of_the_culprit)
{
    const char *l = launcher_line("launch: rank 1 exited with status 1\n"
                                  "launch: rank 1 killed by signal SIGKILL\n",
                                  0);
    ck_assert_str_eq(l ? l : "(none)", "launch: rank 1 exited with status 1");
}
END_TEST

NG_TEST(launcher_line_of_a_rank_without_a_dump)
{
    const char *l = launcher_line("launch: rank 3 killed by signal SIGKILL\n", 1);
    ck_assert_str_eq(l ? l : "(none)", "launch: rank 3 killed by signal SIGKILL");
    NOTED("launcher, on rank 3 (no dump): launch: rank 3 killed by signal SIGKILL");
}
END_TEST

int main(void)
{
    TCase *t;
    /* a few ms each; a loaded machine can take seconds */
    Suite *s = ng_check_fixture_suite("analyze_causes", "causes", 120, setup, teardown, &t);
    tcase_add_loop_test(t, signature_fields, 0, 6);
    tcase_add_loop_test(t, reason_of_a_dump, 0, (int)(sizeof reasons / sizeof reasons[0]));
    tcase_add_loop_test(t, launcher_line_of_the_culprit, 0,
                        (int)(sizeof launchers / sizeof launchers[0]));
    return ng_check_run(s);
}
