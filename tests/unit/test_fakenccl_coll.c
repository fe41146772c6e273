/*
 * Fake NCCL: the results of every collective, for several datatypes and
 * reductions, with 2 to 8 ranks in separate processes, compared with values
 * computed here. Messages larger than the staging area prove the chunking.
 */
#include "test_fakenccl_util.h"

#include <check.h>

#include "check_main.h"
#include <stdlib.h>
#include <string.h>

static const ncclDataType_t all_types[] = {ncclInt8,     ncclUint8,      ncclInt32,
                                           ncclUint32,   ncclInt64,      ncclUint64,
                                           ncclFloat16,  ncclFloat32,    ncclFloat64,
                                           ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES (int)(sizeof all_types / sizeof all_types[0])

/* One rank's part of a collective test, run between joining and destroying the communicator:
 * comm and its stream s, rank of n, and the test's element count. */
typedef void (*coll_body)(ncclComm_t comm, CUstream s, int rank, int n, size_t count);

struct args {
    ncclUniqueId id;
    size_t count;
    coll_body body;
};

static bool is_fp8(ncclDataType_t t)
{
    return t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

/* Input of rank r, element i, for reduction op, chosen so every result is exact in every type. */
static long input(ncclRedOp_t op, int r, int n, size_t i)
{
    switch (op) {
    case ncclSum: return 1 + (long)((r + i) % 2);
    case ncclProd: return r == (int)(i % (size_t)n) ? 2 : 1;
    case ncclAvg: return r == 0 ? n * (long)(1 + i % 3) : 0;
    default: return 1 + (long)((r + i) % (size_t)n);
    }
}

static long expected(ncclRedOp_t op, int n, size_t i)
{
    long sum = 0;
    for (int r = 0; r < n; r++) sum += input(op, r, n, i);
    switch (op) {
    case ncclSum: return sum;
    case ncclProd: return 2;
    case ncclAvg: return 1 + (long)(i % 3);
    case ncclMax: return n;
    default: return 1;
    }
}

/* A rank of a collective test: joins the communicator, runs the test's body, destroys it. */
static void coll_rank(int rank, int n, void *arg)
{
    const struct args *a = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, a->id, &s);
    a->body(comm, s, rank, n, a->count);
    FNT_NCCL(ncclCommDestroy(comm));
}

/* Runs body on n ranks of a fresh communicator with count elements; all must pass and leave
 * nothing in /dev/shm. */
static void run_n(int n, coll_body body, size_t count)
{
    struct args a = {fnt_unique_id(), count, body};
    ck_assert_int_eq(fnt_run(n, coll_rank, &a), 0);
    ck_assert(fnt_shm_clean(&a.id));
}

static void allreduce_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    void *send = malloc(count * 8), *recv = malloc(count * 8);
    for (int k = 0; k < NTYPES; k++) {
        ncclDataType_t t = all_types[k];
        if (is_fp8(t) && n != 2 && n != 4) /* e5m2 cannot hold 9 exactly */
            continue;
        for (int op = ncclSum; op <= ncclAvg; op++) {
            for (size_t i = 0; i < count; i++)
                fnt_put(send, i, t, input((ncclRedOp_t)op, rank, n, i));
            memset(recv, 0xee, count * 8);
            FNT_NCCL(ncclAllReduce(send, recv, count, t, (ncclRedOp_t)op, comm, s));
            fnt_sync(s);
            for (size_t i = 0; i < count; i++)
                FNT_CHECK(fnt_get(recv, i, t) == (double)expected((ncclRedOp_t)op, n, i),
                          "type %d op %d n %d [%zu] = %g, want %ld", (int)t, op, n, i,
                          fnt_get(recv, i, t), expected((ncclRedOp_t)op, n, i));
        }
    }
}

START_TEST(allreduce_every_type_and_op)
{
    static const int sizes[] = {2, 3, 4, 8};
    run_n(sizes[_i], allreduce_rank, 257);
}
END_TEST

/* In place, and a message of several staging chunks (4 MiB of float with 2 ranks). */
static void allreduce_big_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    float *buf = calloc(count, sizeof *buf);
    for (size_t i = 0; i < count; i++) buf[i] = (float)((i % 1000) * (rank + 1));
    FNT_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s));
    fnt_sync(s);
    float factor = (float)(n * (n + 1) / 2);
    for (size_t i = 0; i < count; i++)
        FNT_CHECK(buf[i] == (float)(i % 1000) * factor, "[%zu] = %g", i, buf[i]);
}

NG_TEST(allreduce_in_place_many_chunks)
{
    run_n(2, allreduce_big_rank, 1u << 20);
    run_n(5, allreduce_big_rank, 300001);
}
END_TEST

static void broadcast_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    int32_t *send = malloc(count * 4), *recv = malloc(count * 4);
    for (int root = 0; root < n; root++) {
        for (size_t i = 0; i < count; i++) {
            send[i] = rank == root ? (int32_t)(i * 3 + (size_t)root) : -1;
            recv[i] = -7;
        }
        FNT_NCCL(ncclBroadcast(rank == root ? send : NULL, recv, count, ncclInt32, root, comm, s));
        FNT_NCCL(ncclBcast(send, count, ncclInt32, root, comm, s)); /* in place */
        fnt_sync(s);
        for (size_t i = 0; i < count; i++) {
            FNT_CHECK(recv[i] == (int32_t)(i * 3 + (size_t)root), "root %d [%zu]=%d", root, i,
                      recv[i]);
            FNT_CHECK(send[i] == (int32_t)(i * 3 + (size_t)root), "bcast root %d", root);
        }
    }
}

NG_TEST(broadcast_and_bcast_every_root)
{
    run_n(3, broadcast_rank, 1000);
    run_n(2, broadcast_rank, 400000); /* several chunks */
}
END_TEST

static void reduce_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    double *send = malloc(count * 8), *recv = malloc(count * 8);
    for (int root = 0; root < n; root++) {
        for (int op = ncclSum; op <= ncclAvg; op++) {
            for (size_t i = 0; i < count; i++) {
                send[i] = (double)input((ncclRedOp_t)op, rank, n, i);
                recv[i] = -1;
            }
            FNT_NCCL(ncclReduce(send, rank == root ? recv : NULL, count, ncclFloat64,
                                (ncclRedOp_t)op, root, comm, s));
            fnt_sync(s);
            for (size_t i = 0; rank == root && i < count; i++)
                FNT_CHECK(recv[i] == (double)expected((ncclRedOp_t)op, n, i),
                          "root %d op %d [%zu]=%g", root, op, i, recv[i]);
            for (size_t i = 0; rank != root && i < count; i++)
                FNT_CHECK(recv[i] == -1, "non-root %d wrote its recvbuff", rank);
        }
    }
}

NG_TEST(reduce_every_root_and_op)
{
    run_n(4, reduce_rank, 333);
}
END_TEST

static void allgather_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    uint16_t *send = malloc(count * 2), *recv = malloc(count * 2 * (size_t)n);
    for (size_t i = 0; i < count; i++) send[i] = (uint16_t)(rank * 1000 + (int)(i % 1000));
    FNT_NCCL(ncclAllGather(send, recv, count, ncclFloat16, comm, s)); /* bits only: any type */
    /* in place: my block already sits at recv2 + rank * count */
    uint16_t *recv2 = malloc(count * 2 * (size_t)n);
    memcpy(recv2 + (size_t)rank * count, send, count * 2);
    FNT_NCCL(ncclAllGather(recv2 + (size_t)rank * count, recv2, count, ncclFloat16, comm, s));
    fnt_sync(s);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < count; i++) {
            uint16_t want = (uint16_t)(r * 1000 + (int)(i % 1000));
            FNT_CHECK(recv[(size_t)r * count + i] == want, "block %d [%zu]", r, i);
            FNT_CHECK(recv2[(size_t)r * count + i] == want, "in place block %d [%zu]", r, i);
        }
    }
}

NG_TEST(allgather_in_rank_order)
{
    run_n(5, allgather_rank, 777);
    run_n(3, allgather_rank, 300000); /* several chunks */
}
END_TEST

static void reducescatter_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    size_t rc = count, total = rc * (size_t)n;
    int64_t *send = malloc(total * 8), *recv = malloc(rc * 8);
    for (size_t i = 0; i < total; i++) send[i] = (int64_t)(i * 10 + (size_t)rank);
    FNT_NCCL(ncclReduceScatter(send, recv, rc, ncclInt64, ncclSum, comm, s));
    fnt_sync(s);
    for (size_t i = 0; i < rc; i++) {
        size_t x = (size_t)rank * rc + i;
        int64_t want = (int64_t)(x * 10 * (size_t)n) + n * (n - 1) / 2;
        FNT_CHECK(recv[i] == want, "[%zu] = %lld want %lld", i, (long long)recv[i],
                  (long long)want);
    }
    /* in place, with max: recvbuff == sendbuff + rank * recvcount */
    for (size_t i = 0; i < total; i++) send[i] = (int64_t)((i + (size_t)rank) % 7);
    FNT_NCCL(ncclReduceScatter(send, send + (size_t)rank * rc, rc, ncclInt64, ncclMax, comm, s));
    fnt_sync(s);
    for (size_t i = 0; i < rc; i++) {
        size_t x = (size_t)rank * rc + i;
        int64_t want = 0;
        for (int r = 0; r < n; r++)
            want = (int64_t)((x + (size_t)r) % 7) > want ? (int64_t)((x + (size_t)r) % 7) : want;
        FNT_CHECK(send[x] == want, "in place [%zu] = %lld", i, (long long)send[x]);
    }
}

NG_TEST(reducescatter_blocks_and_in_place)
{
    run_n(4, reducescatter_rank, 1001);
    run_n(2, reducescatter_rank, 200000); /* several chunks */
}
END_TEST

static void alltoall_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    size_t c = count, total = c * (size_t)n;
    uint32_t *send = malloc(total * 4), *recv = malloc(total * 4);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < c; i++)
            send[(size_t)j * c + i] = (uint32_t)(rank * 1000000 + j * 10000 + (int)(i % 10000));
    FNT_NCCL(ncclAlltoAll(send, recv, c, ncclUint32, comm, s));
    FNT_NCCL(ncclAlltoAll(send, send, c, ncclUint32, comm, s)); /* in place */
    fnt_sync(s);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < c; i++) {
            uint32_t want = (uint32_t)(r * 1000000 + rank * 10000 + (int)(i % 10000));
            FNT_CHECK(recv[(size_t)r * c + i] == want, "from %d [%zu]", r, i);
            FNT_CHECK(send[(size_t)r * c + i] == want, "in place from %d [%zu]", r, i);
        }
    }
}

NG_TEST(alltoall_blocks_and_in_place)
{
    run_n(3, alltoall_rank, 555);
    run_n(2, alltoall_rank, 300000); /* several chunks, in-place snapshot */
}
END_TEST

static void gather_scatter_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    size_t c = count, total = c * (size_t)n;
    int8_t *mine = malloc(c), *all = malloc(total), *got = malloc(c);
    for (int root = 0; root < n; root++) {
        for (size_t i = 0; i < c; i++) mine[i] = (int8_t)(rank * 10 + (int)(i % 10));
        memset(all, -1, total);
        FNT_NCCL(ncclGather(mine, rank == root ? all : NULL, c, ncclInt8, root, comm, s));
        fnt_sync(s);
        for (size_t x = 0; rank == root && x < total; x++)
            FNT_CHECK(all[x] == (int8_t)((int)(x / c) * 10 + (int)(x % c % 10)), "gather [%zu]", x);
        for (size_t x = 0; x < total; x++)
            all[x] = (int8_t)(root + (int)(x / c) * 3 + (int)(x % 5));
        FNT_NCCL(ncclScatter(rank == root ? all : NULL, got, c, ncclInt8, root, comm, s));
        fnt_sync(s);
        for (size_t i = 0; i < c; i++)
            FNT_CHECK(got[i] == (int8_t)(root + rank * 3 + (int)(((size_t)rank * c + i) % 5)),
                      "scatter root %d [%zu]", root, i);
    }
}

NG_TEST(gather_and_scatter_every_root)
{
    run_n(3, gather_scatter_rank, 100);
    run_n(2, gather_scatter_rank, 1500000); /* several chunks */
}
END_TEST

/* PreMulSum: each rank's scalar multiplies its own input, then the sum. */
static void premulsum_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    float *send = malloc(count * 4), *recv = malloc(count * 4);
    float scalar = (float)(rank + 1);
    float *dev_scalar = malloc(sizeof *dev_scalar);
    ncclRedOp_t imm, dev;
    FNT_NCCL(ncclRedOpCreatePreMulSum(&imm, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    FNT_NCCL(ncclRedOpCreatePreMulSum(&dev, dev_scalar, ncclFloat32, ncclScalarDevice, comm));
    scalar = 100;                          /* immediate: the value at creation counts */
    *dev_scalar = (float)(2 * (rank + 1)); /* device: the value at execution counts */
    for (size_t i = 0; i < count; i++) send[i] = (float)(i % 13);
    FNT_NCCL(ncclAllReduce(send, recv, count, ncclFloat32, imm, comm, s));
    fnt_sync(s);
    float tri = (float)(n * (n + 1) / 2);
    for (size_t i = 0; i < count; i++)
        FNT_CHECK(recv[i] == (float)(i % 13) * tri, "imm [%zu] = %g", i, recv[i]);
    FNT_NCCL(ncclReduceScatter(send, recv, count / (size_t)n, ncclFloat32, dev, comm, s));
    fnt_sync(s);
    for (size_t i = 0; i < count / (size_t)n; i++)
        FNT_CHECK(recv[i] == (float)(((size_t)rank * (count / (size_t)n) + i) % 13) * 2 * tri,
                  "dev [%zu] = %g", i, recv[i]);
    /* a PreMulSum made for float32 is unknown to float64 collectives */
    FNT_CHECK(ncclAllReduce(send, recv, 1, ncclFloat64, imm, comm, s) == ncclInvalidArgument,
              "type mismatch accepted");
    FNT_NCCL(ncclRedOpDestroy(imm, comm));
    FNT_NCCL(ncclRedOpDestroy(dev, comm));
    FNT_CHECK(ncclAllReduce(send, recv, count, ncclFloat32, imm, comm, s) == ncclInvalidArgument,
              "destroyed operator accepted");
}

NG_TEST(premulsum_immediate_and_device_scalars)
{
    run_n(3, premulsum_rank, 300);
}
END_TEST

/* Zero-count ops still take part in matching and complete. */
static void zero_count_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    (void)count; /* 0: the ops are of 0 elements or 1 */
    int v = rank + 1, out = 0;
    FNT_NCCL(ncclAllReduce(NULL, NULL, 0, ncclInt32, ncclSum, comm, s));
    FNT_NCCL(ncclAllGather(NULL, NULL, 0, ncclInt32, comm, s));
    FNT_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    fnt_sync(s);
    FNT_CHECK(out == n * (n + 1) / 2, "out = %d", out);
}

NG_TEST(zero_count_ops_complete)
{
    run_n(2, zero_count_rank, 0);
}
END_TEST

/* Device memory from ncclMemAlloc (the fake driver's cuMemAlloc) works like any buffer. */
static void memalloc_rank(ncclComm_t comm, CUstream s, int rank, int n, size_t count)
{
    (void)n, (void)count; /* 64 ints, whatever the ranks */
    int32_t *buf;
    void *reg;
    FNT_NCCL(ncclMemAlloc((void **)&buf, 64 * sizeof *buf));
    FNT_NCCL(ncclCommRegister(comm, buf, 64 * sizeof *buf, &reg));
    for (int i = 0; i < 64; i++) buf[i] = rank + i;
    FNT_NCCL(ncclAllReduce(buf, buf, 64, ncclInt32, ncclMin, comm, s));
    fnt_sync(s);
    for (int i = 0; i < 64; i++) FNT_CHECK(buf[i] == i, "[%d] = %d", i, buf[i]);
    FNT_NCCL(ncclCommDeregister(comm, reg));
    FNT_CHECK(ncclCommDeregister(comm, reg) == ncclInvalidArgument, "double deregister");
    FNT_NCCL(ncclMemFree(buf));
}

NG_TEST(memalloc_register_buffers)
{
    run_n(2, memalloc_rank, 0);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = ng_check_suite("fakenccl_coll", "coll", 240, ng_check_tests(), &tc);
    tcase_add_loop_test(tc, allreduce_every_type_and_op, 0, 4);
    return ng_check_run(s);
}
