/*
 * test_analyze_chains.c: the chain rules of `ncclguard analyze` (cli/analyze/verdict.c,
 * the `held` inference of cli/analyze/hang.c, the link rule of cli/analyze/p2p.c), on
 * small dumps that each test writes into a directory of its own (analyze_dumps.h) and
 * analyzes through the real reader (an_read_dir), as the command does. Each rule is
 * tried at its boundary and beside it: one op index, one count, one state apart.
 *
 * A verdict is compared as text: per culprit "RANK CAUSE [chain R/CAUSE/CC ...]", in
 * the verdict's order, where CC is the last two hex digits of the link's communicator.
 */
#include <check.h>

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze_dumps.h"
#include "check_main.h"
#include "dump/dump.h"

static char g_dir[64];
static struct an g_an;

static void setup(void)
{
    ng_check_tmpdir(g_dir, sizeof g_dir, "chains");
}

static void teardown(void)
{
    (void)ng_check_rmtree(g_dir); /* a leftover temp directory is no failure */
}

static void write_dump(struct fdump *d)
{
    ad_write(g_dir, d);
}

/* Analyzes the directory; the verdict as "R CAUSE [chain ...]; ...". */
static const char *verdict(void)
{
    ad_analyze(&g_an, g_dir, NULL);
    return ad_culprits(&g_an, 1);
}

/* The first culprit's verdict line. */
static const char *line0(void)
{
    ck_assert_uint_ge(g_an.nculprits, 1);
    return an_intern_get(&g_an.strs, g_an.culprits[0].text);
}

/* ---- missing, and a chain to the rank's own finding at the end ---- */

/* Ranks 0-3; split bb holds 0 and 1. Rank 1's split op (index 9) is scheduled on its
 * tp stream (SPLIT_STATE), rank 0's started; both hosts wait for it and never call
 * world AllReduce #5, in which ranks 2 and 3 wait. */
static void split_stall(const char *r1_split_state)
{
    for (int r = 0; r < 4; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 4, r < 2 ? 4 : 5, 4, NULL);
        op(&d, (struct fop){8, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
        if (r < 2) {
            comm(&d, S1, r, 2, 3, 2, NULL);
            op(&d, (struct fop){9, S1, 3, 0, 0, "Broadcast", ST,
                                r == 1 ? r1_split_state : "started", 0});
        } else {
            comm(&d, S2, r - 2, 2, 3, 3, NULL);
            op(&d, (struct fop){9, S2, 3, 0, 0, "Broadcast", ST, "completed", 0});
            op(&d, (struct fop){10, W, 5, 0, 0, "AllReduce", SW, "started", 0});
        }
        write_dump(&d);
    }
}

NG_TEST(missing_then_own_gpu_not_started)
{
    split_stall("scheduled");
    /* rank 1 is missing on the world and gpu_not_started on the split: the end of
     * the chain wins, and the chain shows the way there */
    const char *v = verdict();
    ck_assert_str_eq(v, "1 gpu_not_started [0/missing/aa 1/gpu_not_started/bb]");
    ck_assert_ptr_nonnull(strstr(line0(), "not NCCL's"));
    ck_assert_ptr_nonnull(strstr(line0(), "(chain: rank 0 missing on comm "));
}
END_TEST

NG_TEST(missing_where_the_other_comm_explains_nothing)
{
    split_stall("started"); /* beside it: the split op started on both ranks */
    ck_assert_str_eq(verdict(), "0 missing [0/missing/aa]; 1 missing [1/missing/aa]");
}
END_TEST

/* The chain of tests/e2e/analyze.sh: rank 0 waits on A for rank 1, which waits on B
 * (its op 1) for rank 2, which never called it, unless R1_IN_FLIGHT is 0 (rank 1's op
 * on B completed). NEWER: rank 1 also has a newer op in flight, on a comm of its own. */
static void chain_of_three_newer(int r1_in_flight, int newer)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1}, d2 = {.rank = 2};
    comm(&d0, W, 0, 2, 5, 4, NULL);
    op(&d0, (struct fop){0, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
    op(&d0, (struct fop){1, W, 5, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d1, W, 1, 2, 4, 4, NULL);
    comm(&d1, S1, 0, 2, 3, 2, NULL);
    op(&d1, (struct fop){0, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
    op(&d1,
       (struct fop){1, S1, 3, 0, 0, "AllReduce", ST, r1_in_flight ? "started" : "completed", 0});
    if (newer) {
        comm(&d1, S2, 0, 1, 1, 0, NULL);
        op(&d1, (struct fop){2, S2, 1, 0, 0, "AllReduce", SW, "started", 0});
    }
    comm(&d2, S1, 1, 2, 2, 2, NULL);
    op(&d2, (struct fop){0, S1, 2, 0, 0, "AllReduce", ST, "completed", 0});
    write_dump(&d0);
    write_dump(&d1);
    write_dump(&d2);
}

static void chain_of_three(int r1_in_flight)
{
    chain_of_three_newer(r1_in_flight, 0);
}

NG_TEST(missing_follows_to_another_rank)
{
    chain_of_three(1);
    ck_assert_str_eq(verdict(), "2 missing [1/missing/aa 2/missing/bb]");
}
END_TEST

NG_TEST(missing_follows_its_oldest_op)
{
    chain_of_three_newer(1, 1); /* the newer op on cc explains nothing: the older one does */
    ck_assert_str_eq(verdict(), "2 missing [1/missing/aa 2/missing/bb]");
}
END_TEST

NG_TEST(missing_without_an_op_in_flight_ends)
{
    chain_of_three(0); /* rank 1 waits in nothing: it is the end */
    ck_assert_str_eq(verdict(), "1 missing [1/missing/aa]");
}
END_TEST

/* ---- precedence between the findings at one place ---- */

/* World aa: ranks 0 and 1; rank 1 never called #5, as it waits in #3 on bb (ranks
 * 1-4), where rank 3 called a different op (COUNT3; -1: rank 3 never called it either)
 * and rank 4 never called it. */
static void two_findings_at_one_place(int count3)
{
    struct fdump d[5];
    for (int r = 0; r < 5; r++) d[r] = (struct fdump){.rank = r};
    comm(&d[0], W, 0, 2, 5, 4, NULL);
    op(&d[0], (struct fop){1, W, 5, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d[1], W, 1, 2, 4, 4, NULL);
    op(&d[1], (struct fop){1, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
    for (int r = 1; r < 5; r++) {
        int absent = r == 4 || (r == 3 && count3 < 0);
        comm(&d[r], S1, r - 1, 4, absent ? 2 : 3, 2, NULL);
        op(&d[r], (struct fop){0, S1, 2, 0, 0, "AllReduce", ST, "completed", 0});
        if (!absent)
            op(&d[r],
               (struct fop){2, S1, 3, 0, 0, "AllReduce", ST, "started", r == 3 ? count3 : 0});
    }
    for (int r = 0; r < 5; r++) write_dump(&d[r]);
}

NG_TEST(precedence_at_the_place_of_the_wait)
{
    two_findings_at_one_place(9);
    /* at bb: mismatch (rank 3) comes before missing (rank 4) in the table */
    ck_assert_str_eq(verdict(), "3 mismatch [1/missing/aa 3/mismatch/bb]; "
                                "4 missing [4/missing/bb]");
}
END_TEST

NG_TEST(tie_at_the_place_of_the_wait)
{
    two_findings_at_one_place(-1); /* ranks 3 and 4 missing: of one cause, the first found */
    ck_assert_str_eq(verdict(), "3 missing [1/missing/aa 3/missing/bb]; "
                                "4 missing [4/missing/bb]");
}
END_TEST

/* Rank 2 of 3 never called the world's AllReduce #5 (ranks 0 and 1 wait in it) nor
 * split bb's #3 (rank 0 waits in it): two missing findings on one rank, chains of one.
 * The op the world's waiters enqueued first is at index w, bb's at index b. */
static void missing_on_two_comms(int w, int b)
{
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r};
        comm(&d, W, r, 3, r == 2 ? 4 : 5, 4, NULL);
        op(&d, (struct fop){1, W, 4, 0, 0, "AllReduce", SW, "completed", 0});
        if (r < 2) op(&d, (struct fop){w, W, 5, 0, 0, "AllReduce", SW, "started", 0});
        if (r != 1) {
            comm(&d, S1, r / 2, 2, r == 2 ? 2 : 3, 2, NULL);
            op(&d, (struct fop){2, S1, 2, 0, 0, "Broadcast", ST, "completed", 0});
            if (r == 0) op(&d, (struct fop){b, S1, 3, 0, 0, "Broadcast", ST, "started", 0});
        }
        write_dump(&d);
    }
}

NG_TEST(tie_of_one_rank_goes_to_the_older_wait)
{
    /* the same cause, chains of one: the finding whose wait began first is the one
     * said, whichever is found first */
    missing_on_two_comms(10, 5);
    ck_assert_str_eq(verdict(), "2 missing [2/missing/bb]");
    missing_on_two_comms(5, 10);
    ck_assert_str_eq(verdict(), "2 missing [2/missing/aa]");
}
END_TEST

NG_TEST(one_finding_at_the_place_of_the_wait)
{
    two_findings_at_one_place(8); /* beside it: rank 3 called the same op */
    ck_assert_str_eq(verdict(), "4 missing [1/missing/aa 4/missing/bb]");
}
END_TEST

/* ---- a stream held by another stream's stuck op (inferred) ---- */

/* World aa: ranks 0 and 1; split bb: ranks 1 and 2. Rank 1's world AllReduce #5 is
 * scheduled at the head of its world stream; its split op #3, on its tp stream at
 * index TP_INDEX, started and waits for rank 2, which never called it. PER_THREAD:
 * rank 1's two streams are both CU_STREAM_PER_THREAD (0x2), each used by a thread
 * of its own: two streams, as the driver has them, not one. */
static void held_by_other_stream(int tp_index, int per_thread)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1}, d2 = {.rank = 2};
    const char *sw = per_thread ? "0000000000000002" : SW, *st = per_thread ? sw : ST;
    int tw = per_thread ? 7001 : 0, tt = per_thread ? 7002 : 0;
    comm(&d0, W, 0, 2, 5, 4, NULL);
    op(&d0, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d1, W, 1, 2, 5, 4, NULL);
    comm(&d1, S1, 0, 2, 3, 2, NULL);
    op(&d1, (struct fop){5, W, 5, 0, 0, "AllReduce", sw, "scheduled", 0})->thread = tw;
    op(&d1, (struct fop){3, S1, 2, 0, 0, "ReduceScatter", st, "completed", 0})->thread = tt;
    op(&d1, (struct fop){tp_index, S1, 3, 0, 0, "ReduceScatter", st, "started", 0})->thread = tt;
    comm(&d2, S1, 1, 2, 2, 2, NULL);
    op(&d2, (struct fop){4, S1, 2, 0, 0, "ReduceScatter", ST, "completed", 0});
    write_dump(&d0);
    write_dump(&d1);
    write_dump(&d2);
}

/* Rank 1's gpu_not_started finding says its stream most likely waits for op `index`. */
static void held_at(uint64_t index)
{
    const struct an_finding *f = NULL;
    for (size_t i = 0; i < g_an.nfindings; i++)
        if (g_an.findings[i].cause == AN_GPU_NOT_STARTED) f = &g_an.findings[i];
    ck_assert_ptr_nonnull(f);
    ck_assert(f->held.present);
    ck_assert_uint_eq(f->held.index, index);
}

NG_TEST(scheduled_behind_an_older_op_of_another_stream)
{
    held_by_other_stream(4, 0);
    ck_assert_str_eq(verdict(), "2 missing [1/gpu_not_started/aa 2/missing/bb]");
    held_at(4);
}
END_TEST

NG_TEST(scheduled_behind_a_newer_op_of_another_stream)
{
    held_by_other_stream(6, 0); /* beside it: enqueued after the AllReduce, it holds nothing */
    ck_assert_str_eq(verdict(), "2 missing [2/missing/bb]; 1 gpu_not_started "
                                "[1/gpu_not_started/aa]");
    ck_assert_ptr_nonnull(strstr(an_intern_get(&g_an.strs, g_an.culprits[1].text),
                                 "blocked by work that is not NCCL's (no NCCL op"));
}
END_TEST

NG_TEST(per_thread_streams_of_two_threads_are_two_streams)
{
    held_by_other_stream(4, 1);
    ck_assert_str_eq(verdict(), "2 missing [1/gpu_not_started/aa 2/missing/bb]");
    held_at(4);
}
END_TEST

/* The wording: a rank whose stream waits on another stream's op is the culprit when
 * that op waits for nobody named (its partner left the op started). */
NG_TEST(inferred_wait_is_said_to_be_inferred)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1};
    comm(&d0, W, 0, 2, 5, 4, NULL);
    op(&d0, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d1, W, 1, 2, 5, 4, NULL);
    comm(&d1, S1, 0, 1, 3, 2, NULL); /* a split of one rank: no finding on it */
    op(&d1, (struct fop){4, S1, 3, 0, 0, "ReduceScatter", ST, "started", 0});
    op(&d1, (struct fop){5, W, 5, 0, 0, "AllReduce", SW, "scheduled", 0});
    write_dump(&d0);
    write_dump(&d1);
    ck_assert_str_eq(verdict(), "1 gpu_not_started [1/gpu_not_started/aa]");
    const char *l = line0();
    ck_assert_msg(strstr(l, "its stream most likely waits for ReduceScatter #3 on comm "
                            "00000000000000b, stuck on another of its streams (started; "
                            "inferred"),
                  "%s", l);
    ck_assert_ptr_null(strstr(l, "not NCCL's"));
}
END_TEST

/* ---- a broken point-to-point link behind stuck streams ---- */

/*
 * The pipeline: stages {0, 1} (split bb) and {2, 3} (split cc), partners 0-2 and 1-3.
 * Each step: a hand-off group (Send, Recv with the partner) on the world stream; the
 * tp ReduceScatter ordered after it by an event; the world AllReduce #7 after that,
 * by another. Rank 0 dropped its Send (DROP): rank 2's Recv waits, its ReduceScatter
 * never starts, rank 3's ReduceScatter waits for rank 2 and its AllReduce never
 * starts; ranks 0 and 1 wait in the AllReduce. Rank 2's Send stays in flight with its
 * Recv (a group's ops end together). R2_AR: the index of rank 2's AllReduce.
 */
static void pipeline(int drop, int r2_ar)
{
    char peers[4][128];
    for (int r = 0; r < 4; r++) {
        struct fdump d = {.rank = r};
        int partner = r ^ 2, lost = drop && r == 2; /* rank 2 waits for the dropped Send */
        int mine = drop && r == 0 ? 5 : 6;          /* its sends and receives with the partner */
        snprintf(peers[r], sizeof peers[r],
                 "[{\"peer\":%d,\"last_p2p_seq\":%d,"
                 "\"last_completed_p2p_seq\":%d}]",
                 partner, mine, lost ? 4 : mine);
        comm(&d, W, r, 4, 7, 6, peers[r]);
        comm(&d, r < 2 ? S1 : S2, r & 1, 2, 3, r < 2 || !drop ? 3 : 2, NULL);
        int i = 10;
        if (!(drop && r == 0))
            op(&d,
               (struct fop){i++, W, 0, 5, partner, "Send", SW, lost ? "started" : "completed", 0});
        op(&d,
           (struct fop){i++, W, 0, mine, partner, "Recv", SW, lost ? "started" : "completed", 0});
        const char *rs = !drop || r < 2 ? "completed" : r == 2 ? "scheduled" : "started";
        op(&d, (struct fop){i++, r < 2 ? S1 : S2, 3, 0, 0, "ReduceScatter", ST, rs, 0});
        const char *ar = !drop || r < 2 ? "started" : "scheduled";
        op(&d, (struct fop){r == 2 ? r2_ar : i, W, 7, 0, 0, "AllReduce", SW, ar, 0});
        write_dump(&d);
    }
}

NG_TEST(p2p_link_broken_behind_stuck_streams)
{
    pipeline(1, 13);
    /* every chain ends at rank 0: rank 3 (world) -> rank 2 (cc, held by its world
     * stream's Recv) -> rank 0, which stopped the link */
    ck_assert_str_eq(verdict(), "0 p2p [3/gpu_not_started/aa 2/gpu_not_started/cc "
                                "0/p2p/aa]");
    ck_assert_ptr_nonnull(strstr(line0(), "stopped the point-to-point link with rank 2"));
    /* rank 2's oldest op with it is its Send, but the Send is what rank 0 dropped: the
     * counts do not say which op is missing, and the culprit names none */
    ck_assert_ptr_nonnull(strstr(line0(), "whose Send #5 waits for it"));
    ck_assert_int_eq(g_an.culprits[0].f.op, DR_OP_UNKNOWN);
}
END_TEST

NG_TEST(p2p_link_whole_is_no_culprit)
{
    pipeline(0, 13); /* beside it: no Send dropped; the AllReduce waits, nobody is late */
    ck_assert_str_eq(verdict(), "");
}
END_TEST

/* A rank that stopped the link and waits in a collective of the same communicator:
 * the end of the chain when the peer called that collective after the op that waits
 * for it (rank 1: Recv index 6, AllReduce index R1_AR), else held by the collective,
 * where rank 2 never arrived. */
static void stopped_then_collective(int r1_ar)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1}, d2 = {.rank = 2};
    comm(&d0, W, 0, 3, 4, 3, "[{\"peer\":1,\"last_p2p_seq\":0,\"last_completed_p2p_seq\":0}]");
    op(&d0, (struct fop){5, W, 4, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d1, W, 1, 3, 4, 3, "[{\"peer\":0,\"last_p2p_seq\":1,\"last_completed_p2p_seq\":0}]");
    op(&d1, (struct fop){6, W, 0, 1, 0, "Recv", ST, "started", 0});
    op(&d1, (struct fop){r1_ar, W, 4, 0, 0, "AllReduce", SW, "started", 0});
    comm(&d2, W, 2, 3, 3, 3, NULL);
    op(&d2, (struct fop){4, W, 3, 0, 0, "AllReduce", SW, "completed", 0});
    write_dump(&d0);
    write_dump(&d1);
    write_dump(&d2);
}

NG_TEST(p2p_stopper_went_past_the_link)
{
    stopped_then_collective(7);
    ck_assert_str_eq(verdict(), "2 missing [2/missing/aa]; 0 p2p [0/p2p/aa]");
}
END_TEST

NG_TEST(p2p_stopper_held_by_a_collective)
{
    stopped_then_collective(5); /* beside it: the peer called the AllReduce first */
    ck_assert_str_eq(verdict(), "2 missing [0/p2p/aa 2/missing/aa]");
}
END_TEST

/* Two ranks, one link: rank 1's Recv started; rank 0 called SENDS sends, the last
 * scheduled (its stream held by work that is not NCCL's). */
static void one_link(int sends)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1};
    char p0[128];
    snprintf(p0, sizeof p0, "[{\"peer\":1,\"last_p2p_seq\":%d,\"last_completed_p2p_seq\":0}]",
             sends);
    comm(&d0, W, 0, 2, 2, 2, p0);
    if (sends) op(&d0, (struct fop){3, W, 0, 1, 1, "Send", SW, "scheduled", 0});
    comm(&d1, W, 1, 2, 2, 2, "[{\"peer\":0,\"last_p2p_seq\":1,\"last_completed_p2p_seq\":0}]");
    op(&d1, (struct fop){3, W, 0, 1, 0, "Recv", SW, "started", 0});
    write_dump(&d0);
    write_dump(&d1);
}

NG_TEST(p2p_equal_counts_gpu_not_started)
{
    one_link(1);
    ck_assert_str_eq(verdict(), "0 gpu_not_started [0/gpu_not_started/aa]");
}
END_TEST

NG_TEST(p2p_one_fewer_is_the_link)
{
    one_link(0);
    ck_assert_str_eq(verdict(), "0 p2p [0/p2p/aa]");
}
END_TEST

int main(void)
{
    /* a few ms each; a loaded machine can take seconds */
    return ng_check_run(
        ng_check_fixture_suite("analyze_chains", "chains", 120, setup, teardown, NULL));
}
