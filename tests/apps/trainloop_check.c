/*
 * Input values and the exact check of every result. Each input element is a
 * small integer that depends on the contributing rank, the step, the worker
 * thread, the op and the index, so a result taken from the wrong rank, step,
 * communicator or offset is caught. Sums of at most a few thousand stay exact
 * in float32; averages use inputs base + 2c - (n-1), whose mean is exactly
 * base (exact in integers; in floating point when n is a power of two).
 */
#include <math.h>
#include <stdint.h>

#include "trainloop.h"

size_t tl_dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt32: return 4;
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    default: tl_die(TL_EXIT_SETUP, ": internal error: datatype %d not supported", (int)dt);
    }
}

static void store(ncclDataType_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case ncclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ncclFloat32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}

static double load(ncclDataType_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case ncclInt32: return ((const int32_t *)buf)[i];
    case ncclFloat32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* What rank C contributes at index I of op K in STEP of worker TID: 1..293. */
static double value(int c, int step, int tid, int k, size_t i)
{
    size_t h = i * 7 + (size_t)k * 13 + (size_t)step * 5 + (size_t)tid * 3 + (size_t)c * 11;
    return (double)(1 + h % 293);
}

/* Input of rank C of N to an average: the mean over C is exactly the base. */
static double avg_input(int c, int n, int step, int tid, int k, size_t i)
{
    double base = value(0, step, tid, k, i) + n;
    return base + 2.0 * c - (n - 1);
}

void tl_fill_inputs(struct tl_worker *w, int step)
{
    const struct tl_proc *p = w->p;
    for (int k = 0; k < w->nops; k++) {
        const struct tl_op *op = &w->ops[k];
        struct tl_buf *b = &w->buf[k];
        if (!w->issued[k]) continue;
        for (size_t i = 0; i < b->nsend; i++) {
            double v = op->redop == ncclAvg && op->kind == TL_ALLREDUCE
                           ? avg_input(p->rank, p->nranks, step, w->tid, k, i)
                           : value(p->rank, step, w->tid, k, i);
            store(op->dtype, b->hsend, i, v);
        }
        if (k == 0 && tl_fault_now(p, &p->opt.corrupt, step)) {
            store(op->dtype, b->hsend, 0, load(op->dtype, b->hsend, 0) + 1);
            tl_note(" step %d: adding 1 to one input of AllReduce #%d (--corrupt-rank)", step, k);
        }
    }
}

/* The reduction of index I of op K over global ranks FIRST..FIRST+N-1. */
static double reduce(const struct tl_op *op, int first, int n, int step, int tid, int k, size_t i)
{
    double acc = op->redop == ncclMax ? -INFINITY : 0;
    for (int c = first; c < first + n; c++) {
        double v = value(c, step, tid, k, i);
        acc = op->redop == ncclMax ? fmax(acc, v) : acc + v;
    }
    return acc;
}

static double expected(const struct tl_worker *w, int k, int step, size_t i)
{
    const struct tl_proc *p = w->p;
    const struct tl_op *op = &w->ops[k];
    int t = w->tid, n = p->nranks;
    switch (op->kind) {
    case TL_ALLREDUCE:
        if (op->redop == ncclAvg) return value(0, step, t, k, i) + n;
        return reduce(op, 0, n, step, t, k, i);
    case TL_ALLGATHER: return value(w->half_base + (int)(i / op->count), step, t, k, i % op->count);
    case TL_REDUCESCATTER:
        return reduce(op, w->half_base, w->half_size, step, t, k,
                      (size_t)w->half_rank * op->count + i);
    case TL_BROADCAST: return value(0, step, t, k, i);
    case TL_SENDRECV: return value((p->rank + n - 1) % n, step, t, k, i);
    }
    return NAN;
}

static int is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* Compares every result of STEP with its expected value; the first difference ends the run. */
void tl_check_results(struct tl_worker *w, int step)
{
    for (int k = 0; k < w->nops; k++) {
        const struct tl_op *op = &w->ops[k];
        const struct tl_buf *b = &w->buf[k];
        if (!w->issued[k]) continue;
        /* A float average over a world size that is not a power of two rounds (1/n). */
        int approx = op->redop == ncclAvg && op->dtype != ncclInt32 && !is_pow2(w->p->nranks);
        for (size_t i = 0; i < b->nrecv; i++) {
            double got = load(op->dtype, b->hrecv, i), want = expected(w, k, step, i);
            int ok = approx ? fabs(got - want) <= 1e-5 * fabs(want) : got == want;
            if (!ok)
                tl_die(TL_EXIT_WRONG,
                       " step %d: %s result mismatch at index %zu: got %.10g "
                       "want %.10g",
                       step, op->name, i, got, want);
        }
    }
}
