/*
 * fakenccl launch: turns checked ops into batches (one per stream and
 * context) and enqueues each with cuLaunchHostFunc on the caller's stream,
 * so that the work is ordered with the caller's other stream work and with
 * anyone's events, and is recorded into a graph while the stream captures.
 *
 * Nonblocking communicators: the launch is handed to one helper thread
 * that issues jobs in call order; each comm counts its jobs not yet issued
 * (nb_jobs), and ncclCommGetAsyncError answers ncclInProgress until they
 * are. Two cases launch on the calling thread instead (and still answer
 * ncclInProgress): the per-thread default stream, which only the calling
 * thread can name, and a capturing stream, whose capture the caller may end
 * right after the call.
 */
#include "fakenccl_exec.h"

#include <stdlib.h>
#include <string.h>

struct job {
    struct job *next;
    int nbatches;
    struct fn_batch **batches;
    int ncomms;
    struct fn_comm **comms;
};

static pthread_mutex_t hq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hq_cv = PTHREAD_COND_INITIALIZER;
static struct job *hq_head, *hq_tail;
static bool hq_running;

/* Captured batches live as long as the process (graphs may launch them at any time). */
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct captured {
    struct captured *next;
    struct fn_batch *batch;
} *cap_head;

static void batch_free(struct fn_batch *b)
{
    if (!b)
        return;
    free(b->ops);
    free(b->comms);
    free(b);
}

/* Adds c to the distinct-comm list `list` of length *n (capacity >= ops). */
static void add_comm(struct fn_comm **list, int *n, struct fn_comm *c)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == c)
            return;
    list[(*n)++] = c;
}

/* Splits ops into batches keyed by (stream, context), keeping call order inside each. */
static int build_batches(const struct fn_op *ops, int nops, struct fn_batch **out)
{
    int nb = 0;
    for (int i = 0; i < nops; i++) {
        const struct fn_op *op = &ops[i];
        int k = 0;
        while (k < nb && !(out[k]->stream == op->stream && out[k]->ctx == op->comm->ctx))
            k++;
        if (k == nb) {
            struct fn_batch *b = calloc(1, sizeof *b);
            if (b) {
                b->ops = calloc((size_t)nops, sizeof *b->ops);
                b->comms = calloc((size_t)nops, sizeof *b->comms);
            }
            if (!b || !b->ops || !b->comms) {
                batch_free(b);
                goto oom;
            }
            b->stream = op->stream;
            b->ctx = op->comm->ctx;
            out[nb++] = b;
        }
        out[k]->ops[out[k]->nops++] = *op;
        add_comm(out[k]->comms, &out[k]->ncomms, op->comm);
    }
    return nb;
oom:
    for (int k = 0; k < nb; k++)
        batch_free(out[k]);
    return -1;
}

/* Makes ctx current on this thread; *prev receives what was current. */
static CUresult enter_ctx(CUcontext ctx, CUcontext *prev)
{
    CUresult r = cuCtxGetCurrent(prev);
    if (r == CUDA_SUCCESS && *prev != ctx)
        r = cuCtxSetCurrent(ctx);
    return r;
}

static void leave_ctx(CUcontext ctx, CUcontext prev)
{
    if (prev != ctx)
        cuCtxSetCurrent(prev);
}

static bool batch_capturing(const struct fn_batch *b)
{
    CUcontext prev;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (enter_ctx(b->ctx, &prev) != CUDA_SUCCESS)
        return false;
    if (cuStreamIsCapturing(b->stream, &cs) != CUDA_SUCCESS)
        cs = CU_STREAM_CAPTURE_STATUS_NONE;
    leave_ctx(b->ctx, prev);
    return cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void add_pending(struct fn_batch *b, int delta)
{
    for (int i = 0; i < b->ncomms; i++) {
        pthread_mutex_lock(&b->comms[i]->mu);
        b->comms[i]->pending += delta;
        pthread_cond_broadcast(&b->comms[i]->cv);
        pthread_mutex_unlock(&b->comms[i]->mu);
    }
}

/*
 * Enqueues one batch on its stream. On success the batch belongs to the
 * stream worker (or, when captured, to the captured list) and must not be
 * touched; on failure the caller still owns it.
 */
static ncclResult_t launch_batch(struct fn_batch *b)
{
    CUcontext prev, ctx = b->ctx; /* b may be freed by the stream worker once launched */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    const char *call = "cuCtxSetCurrent";
    CUresult r = enter_ctx(ctx, &prev);
    if (r != CUDA_SUCCESS)
        return fn_cuda_error(r, call);
    call = "cuStreamIsCapturing";
    r = cuStreamIsCapturing(b->stream, &cs);
    if (r == CUDA_SUCCESS) {
        bool captured = cs != CU_STREAM_CAPTURE_STATUS_NONE;
        struct captured *keep = captured ? malloc(sizeof *keep) : NULL;
        b->captured = captured;
        if (!captured)
            add_pending(b, 1);
        call = "cuLaunchHostFunc";
        r = captured && !keep ? CUDA_ERROR_OUT_OF_MEMORY : cuLaunchHostFunc(b->stream,
                                                                            fn_batch_run, b);
        if (r != CUDA_SUCCESS && !captured)
            add_pending(b, -1);
        if (r == CUDA_SUCCESS && keep) {
            keep->batch = b;
            pthread_mutex_lock(&cap_lock);
            keep->next = cap_head;
            cap_head = keep;
            pthread_mutex_unlock(&cap_lock);
        } else {
            free(keep);
        }
    }
    leave_ctx(ctx, prev);
    return r == CUDA_SUCCESS ? ncclSuccess : fn_cuda_error(r, call);
}

static void job_free(struct job *j)
{
    for (int i = 0; i < j->nbatches; i++)
        batch_free(j->batches[i]);
    free(j->batches);
    free(j->comms);
    free(j);
}

/* The helper thread: issues nonblocking launches in call order. */
static void *helper_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&hq_lock);
        while (!hq_head)
            pthread_cond_wait(&hq_cv, &hq_lock);
        struct job *j = hq_head;
        hq_head = j->next;
        if (!hq_head)
            hq_tail = NULL;
        pthread_mutex_unlock(&hq_lock);
        for (int i = 0; i < j->nbatches; i++) {
            ncclResult_t r = launch_batch(j->batches[i]);
            if (r == ncclSuccess) {
                j->batches[i] = NULL;
                continue;
            }
            for (int k = 0; k < j->batches[i]->ncomms; k++)
                fn_comm_set_async(j->batches[i]->comms[k], r);
        }
        for (int i = 0; i < j->ncomms; i++) {
            struct fn_comm *c = j->comms[i];
            pthread_mutex_lock(&c->mu);
            atomic_fetch_sub(&c->nb_jobs, 1);
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
        job_free(j);
    }
    return NULL;
}

/* Queues a job for the helper thread, starting it if needed; false if it cannot run. */
static bool queue_job(struct job *j)
{
    for (int i = 0; i < j->ncomms; i++)
        atomic_fetch_add(&j->comms[i]->nb_jobs, 1);
    pthread_mutex_lock(&hq_lock);
    if (!hq_running) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        hq_running = pthread_create(&t, &attr, helper_main, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    if (hq_running) {
        if (hq_tail)
            hq_tail->next = j;
        else
            hq_head = j;
        hq_tail = j;
        pthread_cond_signal(&hq_cv);
    }
    pthread_mutex_unlock(&hq_lock);
    if (!hq_running)
        for (int i = 0; i < j->ncomms; i++)
            atomic_fetch_sub(&j->comms[i]->nb_jobs, 1);
    return hq_running;
}

ncclResult_t fn_launch(const struct fn_op *ops, int nops)
{
    struct fn_batch **batches = calloc((size_t)nops, sizeof *batches);
    struct fn_comm **comms = calloc((size_t)nops, sizeof *comms);
    int nb = batches && comms ? build_batches(ops, nops, batches) : -1, nc = 0;
    bool async = false, here = false;
    if (nb < 0) {
        free(batches);
        free(comms);
        fn_warn("fakenccl: out of memory launching %d operations", nops);
        return ncclSystemError;
    }
    for (int i = 0; i < nops; i++) {
        async |= !ops[i].comm->blocking;
        here |= ops[i].stream == CU_STREAM_PER_THREAD;
        add_comm(comms, &nc, ops[i].comm);
    }
    for (int k = 0; async && !here && k < nb; k++)
        here = batch_capturing(batches[k]);
    if (async && !here) {
        struct job *j = calloc(1, sizeof *j);
        if (j) {
            *j = (struct job){NULL, nb, batches, nc, comms};
            if (queue_job(j))
                return ncclInProgress;
            free(j);
        }
    }
    ncclResult_t res = ncclSuccess;
    for (int k = 0; k < nb; k++) {
        ncclResult_t r = launch_batch(batches[k]);
        if (r != ncclSuccess) {
            batch_free(batches[k]);
            if (res == ncclSuccess)
                res = r;
        }
    }
    free(batches);
    free(comms);
    return res == ncclSuccess && async ? ncclInProgress : res;
}

void fn_helper_atfork(enum fn_fork_phase phase)
{
    if (phase == FN_FORK_PREPARE) {
        pthread_mutex_lock(&cap_lock);
        pthread_mutex_lock(&hq_lock);
        return;
    }
    if (phase == FN_FORK_CHILD) {
        /* the helper thread does not exist in the child; the queued jobs were the parent's */
        while (hq_head) {
            struct job *j = hq_head;
            hq_head = j->next;
            job_free(j);
        }
        hq_tail = NULL;
        hq_running = false;
        pthread_cond_init(&hq_cv, NULL);
    }
    pthread_mutex_unlock(&hq_lock);
    pthread_mutex_unlock(&cap_lock);
}
