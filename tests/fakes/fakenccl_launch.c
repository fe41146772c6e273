/*
 * fakenccl launch: turns checked ops into batches (one per stream and
 * context) and enqueues each with cuLaunchHostFunc on the caller's stream,
 * so that the work is ordered with the caller's other stream work and with
 * anyone's events, and is recorded into a graph while the stream captures.
 *
 * Every launch of a comm waits for its earlier ones, as on NCCL's internal
 * stream (take_turns).
 *
 * Nonblocking communicators: the launch is handed to a thread and each comm
 * counts its jobs not yet issued (nb_jobs), so ncclCommGetAsyncError answers
 * ncclInProgress until they are. A comm's first launch waits for every
 * rank's connection setup on a thread of its own; later ones go to one
 * helper thread that issues them in call order. With FAKENCCL_NB_SEED an op
 * outside a group may instead be launched within the call and answer
 * ncclSuccess (fakenccl_nb.c). Two cases launch on the calling thread (and
 * still answer ncclInProgress): the per-thread default stream, which only
 * the calling thread can name, and a capturing stream, whose capture the
 * caller may end right after the call.
 */
#include "fakenccl_exec.h"
#include "fakenccl_profiler.h"

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
} * cap_head;

static void batch_free(struct fn_batch *b)
{
    if (!b) return;
    free(b->ops);
    free(b->comms);
    free(b->turns);
    free(b);
}

/* Adds c to the distinct-comm list `list` of length *n (capacity >= ops). */
static void add_comm(struct fn_comm **list, int *n, struct fn_comm *c)
{
    for (int i = 0; i < *n; i++)
        if (list[i] == c) return;
    list[(*n)++] = c;
}

/* Splits ops into batches keyed by (stream, context), keeping call order inside each. */
static int build_batches(const struct fn_op *ops, int nops, struct fn_batch **out)
{
    int nb = 0;
    for (int i = 0; i < nops; i++) {
        const struct fn_op *op = &ops[i];
        int k = 0;
        while (k < nb && !(out[k]->stream == op->stream && out[k]->ctx == op->comm->ctx)) k++;
        if (k == nb) {
            struct fn_batch *b = calloc(1, sizeof *b);
            if (b) {
                b->ops = calloc((size_t)nops, sizeof *b->ops);
                b->comms = calloc((size_t)nops, sizeof *b->comms);
                b->turns = calloc((size_t)nops, sizeof *b->turns);
            }
            if (!b || !b->ops || !b->comms || !b->turns) {
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
    for (int k = 0; k < nb; k++) batch_free(out[k]);
    return -1;
}

/* Makes ctx current on this thread; *prev receives what was current. */
static CUresult enter_ctx(CUcontext ctx, CUcontext *prev)
{
    CUresult r = cuCtxGetCurrent(prev);
    if (r == CUDA_SUCCESS && *prev != ctx) r = cuCtxSetCurrent(ctx);
    return r;
}

static void leave_ctx(CUcontext ctx, CUcontext prev)
{
    if (prev != ctx) cuCtxSetCurrent(prev);
}

/* Whether b's stream is capturing, asked in b's context. */
static CUresult capture_state(struct fn_batch *b)
{
    CUcontext prev;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = enter_ctx(b->ctx, &prev);
    if (r != CUDA_SUCCESS) return r;
    r = cuStreamIsCapturing(b->stream, &cs);
    leave_ctx(b->ctx, prev);
    b->captured = r == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
    return r;
}

static void add_pending(struct fn_batch *b, int delta)
{
    for (int i = 0; i < b->ncomms; i++) {
        pthread_mutex_lock(&b->comms[i]->mu);
        b->comms[i]->pending += delta;
        if (delta < 0) /* the batch never ran: its turn is over */
            b->comms[i]->order_finished++;
        pthread_cond_broadcast(&b->comms[i]->cv);
        pthread_mutex_unlock(&b->comms[i]->mu);
    }
}

/*
 * Enqueues one batch (capture state known) on its stream. On success the
 * batch belongs to the stream worker (or, when captured, to the captured
 * list) and must not be touched; on failure the caller still owns it.
 */
static ncclResult_t launch_batch(struct fn_batch *b)
{
    CUcontext prev, ctx = b->ctx; /* b may be freed by the stream worker once launched */
    bool captured = b->captured;
    CUresult r = enter_ctx(ctx, &prev);
    if (r != CUDA_SUCCESS) {
        if (!captured) add_pending(b, -1);
        return fn_cuda_error(r, "cuCtxSetCurrent");
    }
    struct captured *keep = captured ? malloc(sizeof *keep) : NULL;
    r = captured && !keep ? CUDA_ERROR_OUT_OF_MEMORY : cuLaunchHostFunc(b->stream, fn_batch_run, b);
    if (r != CUDA_SUCCESS && !captured) add_pending(b, -1);
    if (r == CUDA_SUCCESS && keep) {
        keep->batch = b;
        pthread_mutex_lock(&cap_lock);
        keep->next = cap_head;
        cap_head = keep;
        pthread_mutex_unlock(&cap_lock);
    } else {
        free(keep);
    }
    leave_ctx(ctx, prev);
    return r == CUDA_SUCCESS ? ncclSuccess : fn_cuda_error(r, "cuLaunchHostFunc");
}

/* Whether batches a and b have a comm in common. */
static bool share_comm(const struct fn_batch *a, const struct fn_batch *b)
{
    for (int i = 0; i < a->ncomms; i++)
        for (int k = 0; k < b->ncomms; k++)
            if (a->comms[i] == b->comms[k]) return true;
    return false;
}

/*
 * Puts the batches of one launch (not captured) that share a comm, directly or
 * through others, into one join (fakenccl_exec.h). A batch alone gets none.
 * Returns false when memory is short (the batches then run unjoined, and the
 * fake says so).
 */
static bool make_joins(struct fn_batch **batches, int nb)
{
    if (nb < 2) return true;
    int *root = calloc((size_t)nb, sizeof *root);
    if (!root) return false;
    for (int k = 0; k < nb; k++) root[k] = k;
    for (int k = 0; k < nb; k++)
        for (int j = 0; j < k; j++) {
            if (batches[k]->captured || batches[j]->captured || !share_comm(batches[j], batches[k]))
                continue;
            int a = root[j], c = root[k];
            for (int i = 0; i < nb; i++)
                if (root[i] == c) root[i] = a;
        }
    bool ok = true;
    for (int k = 0; k < nb; k++) {
        int n = 0;
        for (int i = 0; i < nb; i++) n += root[i] == root[k];
        if (n < 2 || root[k] != k) continue;
        struct fn_join *jn = calloc(1, sizeof *jn);
        if (!jn) {
            ok = false;
            continue;
        }
        pthread_mutex_init(&jn->mu, NULL);
        pthread_cond_init(&jn->cv, NULL);
        jn->members = jn->refs = n;
        for (int i = 0, at = 0; i < nb; i++)
            if (root[i] == k) {
                batches[i]->join = jn;
                batches[i]->join_index = at++;
            }
    }
    free(root);
    return ok;
}

void fn_join_leave(struct fn_batch *b, bool launched)
{
    struct fn_join *jn = b->join;
    if (!jn) return;
    b->join = NULL;
    pthread_mutex_lock(&jn->mu);
    if (!launched) {
        jn->members--;
        jn->unordered = true;
    }
    bool last = --jn->refs == 0;
    pthread_cond_broadcast(&jn->cv);
    pthread_mutex_unlock(&jn->mu);
    if (last) {
        pthread_mutex_destroy(&jn->mu);
        pthread_cond_destroy(&jn->cv);
        free(jn);
    }
}

/* Index of c among b's comms, or -1 (also when b is captured: it takes no turn). */
static int turn_index(const struct fn_batch *b, const struct fn_comm *c)
{
    for (int ci = 0; !b->captured && ci < b->ncomms; ci++)
        if (b->comms[ci] == c) return ci;
    return -1;
}

/*
 * Each comm of one API call takes its turn, as NCCL orders a launch after
 * the comm's internal stream (enqueue.cc: the user stream waits for
 * deviceStream, which then advances to the end of the launch): the batches
 * of this call that use the comm wait until every earlier batch of it has
 * finished, whatever its stream, and run together (in NCCL they are one
 * launch). Captured batches run at graph launch and take no turn.
 */
static void take_turns(struct fn_batch **batches, int nb)
{
    for (int k = 0; k < nb; k++) {
        for (int ci = 0; !batches[k]->captured && ci < batches[k]->ncomms; ci++) {
            struct fn_comm *c = batches[k]->comms[ci];
            bool taken = false;
            for (int j = 0; j < k && !taken; j++) taken = turn_index(batches[j], c) >= 0;
            if (taken) continue;
            uint64_t n = 0;
            for (int j = k; j < nb; j++) n += turn_index(batches[j], c) >= 0;
            uint64_t turn = atomic_fetch_add(&c->order_launched, n);
            for (int j = k; j < nb; j++) {
                int cj = turn_index(batches[j], c);
                if (cj >= 0) batches[j]->turns[cj] = turn;
            }
        }
    }
}

/*
 * Launches the batches of one API call: each launched one is set to NULL, a
 * failed one stays in batches[] and the first error is returned.
 */
static ncclResult_t launch_all(struct fn_batch **batches, int nb)
{
    for (int k = 0; k < nb; k++) {
        CUresult r = capture_state(batches[k]);
        if (r != CUDA_SUCCESS) return fn_cuda_error(r, "cuStreamIsCapturing");
    }
    take_turns(batches, nb);
    if (!make_joins(batches, nb))
        fn_warn("fakenccl: out of memory joining the streams of a launch: they run apart");
    for (int k = 0; k < nb; k++)
        if (!batches[k]->captured) add_pending(batches[k], 1);
    ncclResult_t res = ncclSuccess;
    for (int k = 0; k < nb; k++) {
        struct fn_batch *b = batches[k];
        ncclResult_t r = launch_batch(b); /* b is the stream worker's once launched */
        if (r == ncclSuccess) {
            batches[k] = NULL;
            continue;
        }
        fn_join_leave(b, false);
        if (res == ncclSuccess) res = r;
    }
    return res;
}

static void job_free(struct job *j)
{
    for (int i = 0; i < j->nbatches; i++) batch_free(j->batches[i]);
    free(j->batches);
    free(j->comms);
    free(j);
}

/*
 * Runs one nonblocking job: the connection setup of its comms' first launch,
 * then the launch; a failure becomes the async error of the comms involved.
 */
static void run_job(struct job *j)
{
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < j->ncomms && r == ncclSuccess; i++) r = fn_nb_connect(j->comms[i]);
    if (r == ncclSuccess)
        r = launch_all(j->batches, j->nbatches);
    else
        for (int i = 0; i < j->ncomms; i++) fn_comm_set_async(j->comms[i], r);
    for (int i = 0; r != ncclSuccess && i < j->nbatches; i++)
        for (int k = 0; j->batches[i] && k < j->batches[i]->ncomms; k++)
            fn_comm_set_async(j->batches[i]->comms[k], r);
    for (int i = 0; i < j->ncomms; i++) {
        struct fn_comm *c = j->comms[i];
        pthread_mutex_lock(&c->mu);
        atomic_fetch_sub(&c->nb_jobs, 1);
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    job_free(j);
}

/* The helper thread: issues the launches of connected comms in call order. */
static void *helper_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&hq_lock);
        while (!hq_head) pthread_cond_wait(&hq_cv, &hq_lock);
        struct job *j = hq_head;
        hq_head = j->next;
        if (!hq_head) hq_tail = NULL;
        pthread_mutex_unlock(&hq_lock);
        run_job(j);
    }
    return NULL;
}

/* A first launch waits for its peers on a thread of its own, like NCCL's group job. */
static void *connect_main(void *arg)
{
    run_job(arg);
    return NULL;
}

static bool start_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&t, &attr, fn, arg) == 0;
    pthread_attr_destroy(&attr);
    return ok;
}

/*
 * Hands a job to a thread: its own while a comm still needs its connection
 * setup, else the helper (started if needed). False if it cannot run.
 */
static bool queue_job(struct job *j)
{
    bool connected = true;
    for (int i = 0; i < j->ncomms; i++) {
        atomic_fetch_add(&j->comms[i]->nb_jobs, 1);
        connected = connected && fn_nb_connected(j->comms[i]);
    }
    if (!connected) {
        if (start_thread(connect_main, j)) return true;
        for (int i = 0; i < j->ncomms; i++) atomic_fetch_sub(&j->comms[i]->nb_jobs, 1);
        return false;
    }
    pthread_mutex_lock(&hq_lock);
    if (!hq_running) hq_running = start_thread(helper_main, NULL);
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
        for (int i = 0; i < j->ncomms; i++) atomic_fetch_sub(&j->comms[i]->nb_jobs, 1);
    return hq_running;
}

ncclResult_t fn_launch(const struct fn_op *ops, int nops, bool group)
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
    for (int k = 0; k < nb; k++) fn_prof_launch(batches[k]->ops, batches[k]->nops);
    for (int i = 0; i < nops; i++) {
        async |= !ops[i].comm->blocking;
        here |= ops[i].stream == CU_STREAM_PER_THREAD;
        add_comm(comms, &nc, ops[i].comm);
    }
    for (int k = 0; async && !here && k < nb; k++)
        here = capture_state(batches[k]) == CUDA_SUCCESS && batches[k]->captured;
    for (int i = 0; async && here && i < nc; i++)
        if (!comms[i]->blocking)
            fn_nb_arrive(comms[i]);        /* issued without the wait: still counts as arrived */
    bool quick = async && !here && !group; /* may finish within the call (FAKENCCL_NB_SEED) */
    for (int i = 0; quick && i < nc; i++) quick = fn_nb_connected(comms[i]);
    if (quick && fn_nb_done_in_call(comms[0]->rank))
        async = false; /* launched here: the call answers ncclSuccess */
    if (async && !here) {
        struct job *j = calloc(1, sizeof *j);
        if (j) {
            *j = (struct job){NULL, nb, batches, nc, comms};
            if (queue_job(j)) return ncclInProgress;
            free(j);
        }
    }
    ncclResult_t res = launch_all(batches, nb);
    for (int k = 0; k < nb; k++) batch_free(batches[k]);
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
