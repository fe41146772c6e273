/*
 * test_render_fr.c: ncclguard's dumps written as Flight Recorder dumps
 * (cli/render/fr.c). Two ranks' dumps (analyze_dumps.h), read by the real
 * reader, go through both passes; rank 0's pickle is checked member by member
 * (dump/pickle.h) and read back as a dump (dump/fr.h): the same ops, seqs,
 * peers, states and counts, the group's members learnt from both dumps.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_dumps.h"
#include "check_main.h"
#include "dump/dump.h"
#include "dump/fr.h"
#include "dump/pickle.h"
#include "dump/read.h"
#include "json/parser.h"
#include "render/fr.h"
#include "render/pickle.h"

static char dir[64];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "render-fr");
}

static void teardown(void)
{
    ng_check_rmtree(dir);
}

/* rank 0: AllReduce #1, Send to 1, AllGather #2 in flight; rank 1: AllReduce #1,
 * Recv from 0, and a split it alone dumped (S1, 2 ranks) */
static void write_dumps(void)
{
    struct fdump d0 = {.rank = 0}, d1 = {.rank = 1};
    comm(&d0, W, 0, 2, 2, 1, NULL);
    op(&d0, (struct fop){0, W, 1, 0, 0, "AllReduce", SW, "completed", 16});
    op(&d0, (struct fop){1, W, 0, 1, 1, "Send", SW, "completed", 4});
    op(&d0, (struct fop){2, W, 2, 0, 0, "AllGather", SW, "started", 8})->datatype = "bfloat16";
    comm(&d1, W, 1, 2, 1, 1, NULL);
    comm(&d1, S1, 1, 2, 0, 0, NULL);
    op(&d1, (struct fop){0, W, 1, 0, 0, "AllReduce", SW, "completed", 16});
    op(&d1, (struct fop){1, W, 0, 1, 0, "Recv", SW, "completed", 4});
    ad_write(dir, &d0);
    ad_write(dir, &d1);
}

static struct dr_dump *read_rank(ng_jparser *p, int rank)
{
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/ncclguard-r%d-h-%d.json", dir, rank, 1000 + rank);
    struct dr_dump *d = dr_read_file(p, path, 0, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    return d;
}

/* rank 0's FR dump, after both passes; *n its counts */
static struct rn_pk export_rank0(struct rn_fr_counts *n)
{
    write_dumps();
    ng_jparser *p = ng_jparser_new(NG_JSON_JANSSON);
    ck_assert_ptr_nonnull(p);
    struct dr_dump *d0 = read_rank(p, 0), *d1 = read_rank(p, 1);
    struct rn_fr *f = rn_fr_new();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(rn_fr_learn(f, d0), 0);
    ck_assert_int_eq(rn_fr_learn(f, d1), 0);
    ck_assert(rn_fr_chosen(f, d0) && rn_fr_chosen(f, d1));
    struct rn_pk pk;
    rn_pk_init(&pk);
    ck_assert_int_eq(rn_fr_write(f, d0, &pk, n), 0);
    ck_assert_int_eq(rn_pk_done(&pk), 0);
    rn_fr_free(f);
    dr_free(d0);
    dr_free(d1);
    ng_jparser_free(p);
    return pk;
}

static int64_t num(const struct dr_pk_val *v)
{
    int64_t x;
    ck_assert_int_eq(dr_pk_int(v, &x), 0);
    return x;
}

NG_TEST(entries_hold_what_torchfrtrace_reads)
{
    struct rn_fr_counts n;
    struct rn_pk pk = export_rank0(&n);
    ck_assert_uint_eq(n.entries, 3);
    ck_assert_uint_eq(n.left_out, 0);
    char err[200];
    struct dr_pk_doc *doc = dr_pk_parse(pk.buf, pk.len, err, sizeof err);
    ck_assert_msg(doc != NULL, "%s", err);
    const struct dr_pk_val *root = dr_pk_root(doc);
    ck_assert_str_eq(dr_pk_str(dr_pk_get(root, "version")), "2.10");
    const struct dr_pk_val *cfg = dr_pk_get(dr_pk_get(root, "pg_config"), W);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_str_eq(dr_pk_str(dr_pk_get(cfg, "name")), W);
    ck_assert_str_eq(dr_pk_str(dr_pk_get(cfg, "desc")), "undefined");
    ck_assert_str_eq(dr_pk_str(dr_pk_get(cfg, "ranks")), "[0, 1]"); /* rank 1 from its dump */
    const struct dr_pk_val *st = dr_pk_get(dr_pk_get(root, "pg_status"), W);
    ck_assert_int_eq(num(dr_pk_get(st, "last_enqueued_collective")), 2);
    ck_assert_int_eq(num(dr_pk_get(st, "last_completed_collective")), 1);

    const struct dr_pk_val *e = dr_pk_get(root, "entries");
    ck_assert_uint_eq(dr_pk_len(e), 3);
    /* in the ring's order, whatever the dump's */
    static const char *const names[] = {"nccl:all_reduce", "nccl:send 0->1", "nccl:all_gather"};
    static const int seqs[] = {1, 1, 2}, p2ps[] = {0, 1, 0}, ins[] = {16, 4, 8},
                     outs[] = {16, 4, 16};
    static const char *const states[] = {"completed", "completed", "started"};
    for (size_t i = 0; i < 3; i++) {
        const struct dr_pk_val *x = dr_pk_item(e, i);
        ck_assert_int_eq(num(dr_pk_get(x, "record_id")), (int64_t)i);
        ck_assert_int_eq(num(dr_pk_get(x, "op_id")), (int64_t)i + 1);
        ck_assert_str_eq(dr_pk_str(dr_pk_get(x, "profiling_name")), names[i]);
        ck_assert_int_eq(num(dr_pk_get(x, "collective_seq_id")), seqs[i]);
        ck_assert_int_eq(num(dr_pk_get(x, "p2p_seq_id")), p2ps[i]);
        ck_assert_int_eq(num(dr_pk_get(x, "is_p2p")), i == 1);
        ck_assert_str_eq(dr_pk_str(dr_pk_get(x, "state")), states[i]);
        ck_assert_int_eq(num(dr_pk_get(x, "retired")), i < 2);
        const struct dr_pk_val *pg = dr_pk_get(x, "process_group");
        ck_assert_int_eq(pg->kind, DR_PK_TUPLE);
        ck_assert_str_eq(dr_pk_str(dr_pk_item(pg, 0)), W);
        ck_assert_int_eq(num(dr_pk_item(dr_pk_item(dr_pk_get(x, "input_sizes"), 0), 0)), ins[i]);
        ck_assert_int_eq(num(dr_pk_item(dr_pk_item(dr_pk_get(x, "output_sizes"), 0), 0)), outs[i]);
        ck_assert_str_eq(dr_pk_str(dr_pk_item(dr_pk_get(x, "input_dtypes"), 0)),
                         i == 2 ? "BFloat16" : "Float");
        ck_assert_int_eq(num(dr_pk_get(x, "time_created_ns")), ad_enqueue_ns((int)i));
        ck_assert_uint_eq(dr_pk_len(dr_pk_get(x, "frames")), 0);
    }
    dr_pk_free(doc);
    rn_pk_free(&pk);
}
END_TEST

NG_TEST(the_fr_reader_reads_back_the_same_ops)
{
    struct rn_fr_counts n;
    struct rn_pk pk = export_rank0(&n);
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/nccl_trace_rank_0", dir);
    struct dr_dump *d = dr_fr_parse((const char *)pk.buf, pk.len, path, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(d->rank, 0);
    ck_assert_str_eq(d->schema, "torch.fr/2.10");
    ck_assert_uint_eq(d->ncomms, 1);
    ck_assert_int_eq(d->comms[0].rank, 0);
    ck_assert_int_eq(d->comms[0].nranks, 2);
    ck_assert_uint_eq(d->nops, 3);
    int seen = 0;
    for (size_t i = 0; i < d->nops; i++) {
        const struct dr_op *o = &d->ops[i];
        if (o->op == NG_OP_ALLREDUCE) {
            ck_assert(o->seq == 1 && o->state == NG_OP_COMPLETED && o->count == 16);
            seen |= 1;
        } else if (o->op == NG_OP_SEND) {
            ck_assert(o->p2p_seq == 1 && o->peer == 1 && o->state == NG_OP_COMPLETED);
            seen |= 2;
        } else if (o->op == NG_OP_ALLGATHER) {
            ck_assert(o->seq == 2 && o->state == NG_OP_STARTED && o->count == 8);
            ck_assert_str_eq(o->datatype, "bfloat16");
            seen |= 4;
        }
    }
    ck_assert_int_eq(seen, 7);
    dr_free(d);
    rn_pk_free(&pk);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_fixture_suite("render_fr", "export", 30, setup, teardown, NULL));
}
