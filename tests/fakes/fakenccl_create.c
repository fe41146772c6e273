/*
 * fakenccl creation: CommInitRank, CommInitRankConfig, CommInitRankScalable,
 * CommInitAll, CommSplit and CommShrink.
 *
 * Every creation is a job: attach to the shared segment and wait until all
 * ranks joined (init), or first agree with the parent's ranks through a
 * control all-gather on the parent's segment (split: colors and keys;
 * shrink: the exclusion list) and then join the child's segment. A job runs
 * inline for a blocking call, on a detached thread for a nonblocking one
 * (the call returns ncclInProgress), and at ncclGroupEnd when called inside
 * a group. A missing rank keeps the others waiting, as in NCCL.
 *
 * The device of a communicator is the device of the context current at the
 * call; with none current, the primary context of device 0 is retained and
 * made current, as cudart would. Splits inherit the parent's device.
 */
#include "fakenccl_create.h"
#include "fakenccl_exec.h"
#include "fakenccl_profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN_CONFIG_MAGIC 0xcafebeefu
#define FN_CTRL_SPLIT 1u
#define FN_CTRL_SHRINK 2u

/* ---- CUDA side ---- */

/* The current context and its device; with none, device 0's primary context (made current). */
ncclResult_t fn_current_device(CUcontext *ctx, int *dev)
{
    CUdevice d;
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return fn_cuda_error(r, "cuInit");
    if ((r = cuCtxGetCurrent(ctx)) != CUDA_SUCCESS) return fn_cuda_error(r, "cuCtxGetCurrent");
    if (!*ctx) {
        if ((r = cuDeviceGet(&d, 0)) != CUDA_SUCCESS) return fn_cuda_error(r, "cuDeviceGet");
        if ((r = cuDevicePrimaryCtxRetain(ctx, d)) != CUDA_SUCCESS)
            return fn_cuda_error(r, "cuDevicePrimaryCtxRetain");
        if ((r = cuCtxSetCurrent(*ctx)) != CUDA_SUCCESS) return fn_cuda_error(r, "cuCtxSetCurrent");
    }
    if ((r = cuCtxGetDevice(&d)) != CUDA_SUCCESS) return fn_cuda_error(r, "cuCtxGetDevice");
    *dev = (int)d;
    return ncclSuccess;
}

ncclResult_t fn_device_context(int dev, CUcontext *ctx)
{
    CUdevice d;
    CUresult r = cuDeviceGet(&d, dev);
    if (r != CUDA_SUCCESS) return fn_cuda_error(r, "cuDeviceGet");
    if ((r = cuDevicePrimaryCtxRetain(ctx, d)) != CUDA_SUCCESS)
        return fn_cuda_error(r, "cuDevicePrimaryCtxRetain");
    return ncclSuccess;
}

/* ---- keys and configs ---- */

void fn_key_from_uid(const ncclUniqueId *id, uint8_t key[FN_KEY_BYTES])
{
    if (!memcmp(id->internal, FN_UID_TAG, 8)) {
        memcpy(key, id->internal + 8, FN_KEY_BYTES);
        return;
    }
    uint64_t h[2] = {fn_hash64(id->internal, sizeof id->internal, 1),
                     fn_hash64(id->internal, sizeof id->internal, 2)};
    memcpy(key, h, FN_KEY_BYTES);
}

/* A child's key: the parent's key, what made it, its ordinal on the parent, and a detail. */
static void child_key(const uint8_t parent[FN_KEY_BYTES], uint32_t what, uint64_t ordinal,
                      uint64_t detail, uint8_t out[FN_KEY_BYTES])
{
    unsigned char buf[FN_KEY_BYTES + 4 + 16];
    memcpy(buf, parent, FN_KEY_BYTES);
    memcpy(buf + FN_KEY_BYTES, &what, 4);
    memcpy(buf + FN_KEY_BYTES + 4, &ordinal, 8);
    memcpy(buf + FN_KEY_BYTES + 12, &detail, 8);
    uint64_t h[2] = {fn_hash64(buf, sizeof buf, 3), fn_hash64(buf, sizeof buf, 4)};
    memcpy(out, h, FN_KEY_BYTES);
}

/* Reads blocking and commName from a config (NULL: inherit from parent, or the default). */
ncclResult_t fn_parse_config(const ncclConfig_t *cfg, const struct fn_comm *parent, bool *blocking,
                             char *name, size_t cap)
{
    int env = fn_cfg()->env_blocking;
    *blocking = parent ? parent->blocking : env != 0;
    name[0] = '\0';
    if (!cfg) return ncclSuccess;
    if (cfg->magic != FN_CONFIG_MAGIC) {
        fn_warn("ncclConfig_t argument not initialized via the config initializer");
        return ncclInvalidArgument;
    }
    if (cfg->blocking != NCCL_CONFIG_UNDEF_INT && cfg->blocking != 0 && cfg->blocking != 1) {
        fn_warn("Invalid config blocking attribute value %d", cfg->blocking);
        return ncclInvalidArgument;
    }
    *blocking = cfg->blocking == NCCL_CONFIG_UNDEF_INT ? env != 0 : cfg->blocking != 0;
    if (cfg->size >= offsetof(ncclConfig_t, commName) + sizeof cfg->commName && cfg->commName)
        snprintf(name, cap, "%s", cfg->commName);
    return ncclSuccess;
}

/* ---- running a job ---- */

bool fn_comm_set_size(struct fn_comm *c, int rank, int nranks)
{
    c->rank = rank;
    c->nranks = nranks;
    c->exec_send_seq = calloc((size_t)nranks, sizeof *c->exec_send_seq);
    c->exec_recv_seq = calloc((size_t)nranks, sizeof *c->exec_recv_seq);
    return c->exec_send_seq && c->exec_recv_seq;
}

static bool aborted(struct fn_comm *c)
{
    return atomic_load(&c->state) == FN_ABORTED;
}

/* Attaches c to the segment of key and waits until every rank joined. c is held (inflight). */
static ncclResult_t join(struct fn_comm *c, const uint8_t key[FN_KEY_BYTES])
{
    struct fn_seg seg;
    ncclResult_t r = fn_seg_attach(&seg, key, c->nranks, c->rank, c->dev);
    if (r != ncclSuccess) return r;
    pthread_mutex_lock(&c->mu);
    bool gone = aborted(c);
    if (!gone) {
        c->seg = seg;
        memcpy(c->key, key, FN_KEY_BYTES);
    }
    pthread_mutex_unlock(&c->mu);
    if (gone) {
        fn_seg_detach(&seg);
        return ncclInvalidUsage;
    }
    for (;;) {
        uint32_t bell = fn_seg_bell(&c->seg);
        if (atomic_load(&c->seg.hdr->joined) >= (uint32_t)c->nranks) return ncclSuccess;
        if (aborted(c)) {
            fn_warn("fakenccl: communicator aborted while it was being created");
            return ncclInvalidUsage;
        }
        fn_seg_sleep(&c->seg, bell, 200);
    }
}

/* Waits until every participant's control counter (posted or done) reaches need. */
static ncclResult_t ctrl_wait(struct fn_comm *p, const bool *part, bool posted, uint64_t need)
{
    for (;;) {
        uint32_t bell = fn_seg_bell(&p->seg);
        bool ok = true;
        for (int r = 0; r < p->nranks && ok; r++) {
            struct fn_ctrl_slot *s = fn_seg_ctrl(&p->seg, r);
            if (part && !part[r]) continue;
            ok = atomic_load_explicit(posted ? &s->posted : &s->done, memory_order_acquire) >= need;
        }
        if (ok) return ncclSuccess;
        int32_t by = fn_seg_peer_failed(&p->seg, p->rank, false);
        if (aborted(p) || (by >= 0 && (!part || part[by]))) {
            fn_warn("fakenccl: the parent communicator was aborted during a split or shrink");
            return aborted(p) ? ncclInvalidUsage : ncclRemoteError;
        }
        fn_seg_sleep(&p->seg, bell, 200);
    }
}

/* Control all-gather on the parent: every participant contributes one record. */
static ncclResult_t ctrl_allgather(struct fn_comm *p, uint64_t epoch, const bool *part,
                                   const struct fn_ctrl_rec *mine, struct fn_ctrl_rec *all)
{
    ncclResult_t r;
    pthread_mutex_lock(&p->mu);
    bool usable = p->seg.hdr && !aborted(p);
    if (usable) p->inflight++;
    pthread_mutex_unlock(&p->mu);
    if (!usable) return ncclInvalidUsage;
    struct fn_ctrl_slot *me = fn_seg_ctrl(&p->seg, p->rank);
    if ((r = ctrl_wait(p, part, false, epoch - 1)) != ncclSuccess) goto out;
    me->rec = *mine;
    atomic_store_explicit(&me->posted, epoch, memory_order_release);
    fn_seg_ring(&p->seg);
    if ((r = ctrl_wait(p, part, true, epoch)) != ncclSuccess) goto out;
    for (int i = 0; i < p->nranks; i++)
        if (!part || part[i]) all[i] = fn_seg_ctrl(&p->seg, i)->rec;
    atomic_store_explicit(&me->done, epoch, memory_order_release);
    fn_seg_ring(&p->seg);
out:
    pthread_mutex_lock(&p->mu);
    p->inflight--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return r;
}

/* The records of every participant must describe the same split or shrink. */
static bool ctrl_agree(const struct fn_create_job *j, const struct fn_ctrl_rec *all,
                       const bool *part, const char *api)
{
    for (int i = 0; i < j->parent->nranks; i++) {
        if (part && !part[i]) continue;
        if (all[i].kind == all[j->parent->rank].kind && all[i].ordinal == j->ordinal &&
            all[i].tag == all[j->parent->rank].tag)
            continue;
        fn_loud("rank %d: %s #%llu mismatch: parent rank %d is in another split or shrink "
                "(or passed another exclusion list)",
                j->parent->rank, api, (unsigned long long)j->ordinal, i);
        fn_warn("fakenccl: %s mismatch between ranks %d and %d", api, j->parent->rank, i);
        return false;
    }
    return true;
}

/* The last step of a split or a shrink: c becomes rank me of n and joins the child
 * communicator that kind (FN_CTRL_SPLIT or FN_CTRL_SHRINK), ordinal and detail name. */
static ncclResult_t join_child(const struct fn_comm *p, struct fn_comm *c, int me, int n,
                               uint32_t kind, uint64_t ordinal, uint64_t detail)
{
    if (!fn_comm_set_size(c, me, n)) return ncclSystemError;
    uint8_t key[FN_KEY_BYTES];
    child_key(p->key, kind, ordinal, detail, key);
    return join(c, key);
}

static ncclResult_t run_split(struct fn_create_job *j)
{
    struct fn_comm *p = j->parent, *c = j->comm;
    struct fn_ctrl_rec mine = {FN_CTRL_SPLIT, j->color, j->skey, 0, j->ordinal, 0};
    struct fn_ctrl_rec *all = calloc((size_t)p->nranks, sizeof *all);
    int *members = calloc((size_t)p->nranks, sizeof *members);
    ncclResult_t r = ncclSystemError;
    if (!all || !members) goto out;
    if ((r = ctrl_allgather(p, j->epoch, NULL, &mine, all)) != ncclSuccess) goto out;
    r = ncclInvalidUsage;
    if (!ctrl_agree(j, all, NULL, "CommSplit")) goto out;
    r = ncclSuccess;
    if (!c) goto out; /* NCCL_SPLIT_NOCOLOR: took part, gets no communicator */
    int n = 0, me = 0;
    for (int i = 0; i < p->nranks; i++) { /* members of my color, by key then parent rank */
        if (all[i].a != j->color) continue;
        int at = n;
        while (at > 0 && all[members[at - 1]].b > all[i].b) at--;
        memmove(members + at + 1, members + at, (size_t)(n - at) * sizeof *members);
        members[at] = i;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (members[i] == p->rank) me = i;
    r = join_child(p, c, me, n, FN_CTRL_SPLIT, j->ordinal, (uint32_t)j->color);
out:
    free(all);
    free(members);
    return r;
}

static ncclResult_t run_shrink(struct fn_create_job *j)
{
    struct fn_comm *p = j->parent, *c = j->comm;
    uint64_t tag = fn_hash64(j->excl, (size_t)j->nexcl * sizeof *j->excl, 5);
    struct fn_ctrl_rec mine = {FN_CTRL_SHRINK, 0, 0, 0, j->ordinal, tag};
    struct fn_ctrl_rec *all = calloc((size_t)p->nranks, sizeof *all);
    bool *part = calloc((size_t)p->nranks, sizeof *part);
    ncclResult_t r = ncclSystemError;
    if (!all || !part) goto out;
    for (int i = 0; i < p->nranks; i++) part[i] = true;
    for (int k = 0; k < j->nexcl; k++) part[j->excl[k]] = false;
    if ((r = ctrl_allgather(p, j->epoch, part, &mine, all)) != ncclSuccess) goto out;
    r = ncclInvalidUsage;
    if (!ctrl_agree(j, all, part, "CommShrink")) goto out;
    int n = 0, me = 0;
    for (int i = 0; i < p->nranks; i++) {
        if (i == p->rank) me = n;
        n += part[i];
    }
    r = join_child(p, c, me, n, FN_CTRL_SHRINK, j->ordinal, tag);
out:
    free(all);
    free(part);
    return r;
}

/* Runs a job to its end and settles the new handle's state; the job stays allocated. */
static ncclResult_t job_run(struct fn_create_job *j)
{
    struct fn_comm *c = j->comm;
    ncclResult_t r;
    if (c) {
        pthread_mutex_lock(&c->mu);
        c->inflight++;
        pthread_mutex_unlock(&c->mu);
    }
    r = j->kind == JOB_INIT ? join(c, j->key) : j->kind == JOB_SPLIT ? run_split(j) : run_shrink(j);
    /* ncclProfilerPluginInit, inside the creation, before the communicator is ready
     * (init.cc: initTransportsRank, before the proxy thread and initState) */
    if (c && r == ncclSuccess) fn_prof_comm_init(c);
    if (c) {
        pthread_mutex_lock(&c->mu);
        int expected = FN_INITIALIZING;
        if (r == ncclSuccess)
            atomic_compare_exchange_strong(&c->state, &expected, FN_READY);
        else if (atomic_compare_exchange_strong(&c->state, &expected, FN_FAILED))
            atomic_store(&c->async_err, r);
        c->inflight--;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    if (j->out && j->kind != JOB_INIT && r == ncclSuccess) *j->out = (ncclComm_t)c;
    if (j->out && r != ncclSuccess && j->blocking) *j->out = NULL;
    if (j->parent_busy) {
        pthread_mutex_lock(&j->parent->mu);
        atomic_fetch_sub(&j->parent->nb_jobs, 1);
        pthread_cond_broadcast(&j->parent->cv);
        pthread_mutex_unlock(&j->parent->mu);
    }
    j->result = r;
    return r;
}

static void job_free(struct fn_create_job *j)
{
    free(j->excl);
    free(j);
}

static void *job_thread(void *arg)
{
    job_run(arg);
    return NULL;
}

static void *job_thread_detached(void *arg)
{
    job_run(arg);
    job_free(arg);
    return NULL;
}

/* Starts a nonblocking job on a detached thread (inline if no thread can be made). */
static void job_start_async(struct fn_create_job *j)
{
    pthread_t t;
    pthread_attr_t attr;
    if (j->parent) {
        j->parent_busy = true;
        atomic_fetch_add(&j->parent->nb_jobs, 1);
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, job_thread_detached, j) != 0) job_thread_detached(j);
    pthread_attr_destroy(&attr);
}

/* Runs blocking jobs concurrently (a thread each) and returns the first error. Frees them. */
ncclResult_t fn_jobs_run(struct fn_create_job **jobs, int n)
{
    pthread_t *t = calloc((size_t)n, sizeof *t);
    bool *started = calloc((size_t)n, sizeof *started);
    ncclResult_t res = ncclSuccess;
    for (int i = 0; i < n; i++) {
        if (n > 1 && t && started)
            started[i] = pthread_create(&t[i], NULL, job_thread, jobs[i]) == 0;
        if (!started || !started[i]) job_run(jobs[i]);
    }
    for (int i = 0; i < n; i++) {
        if (started && started[i]) pthread_join(t[i], NULL);
        if (res == ncclSuccess) res = jobs[i]->result;
        job_free(jobs[i]);
    }
    free(t);
    free(started);
    return res;
}

ncclResult_t fn_create_group_end(struct fn_create_job **jobs, int njobs, bool *async)
{
    *async = false;
    for (int i = 0; i < njobs; i++) *async |= !jobs[i]->blocking;
    if (!*async) return fn_jobs_run(jobs, njobs);
    for (int i = 0; i < njobs; i++) job_start_async(jobs[i]);
    return ncclSuccess;
}

void fn_create_cancel(struct fn_create_job *j, ncclResult_t why)
{
    if (j->comm) {
        atomic_store(&j->comm->async_err, why);
        atomic_store(&j->comm->state, FN_FAILED);
    }
    if (j->out && j->blocking) *j->out = NULL;
    job_free(j);
}

/* Runs a new job the way the call asks: recorded in a group, inline, or in the background. */
ncclResult_t fn_job_submit(struct fn_create_job *j)
{
    if (fn_group_depth() > 0) {
        ncclResult_t r = fn_group_add_create(j);
        if (r != ncclSuccess) fn_create_cancel(j, r);
        return r;
    }
    if (!j->blocking) {
        job_start_async(j);
        return ncclInProgress;
    }
    ncclResult_t r = job_run(j);
    job_free(j);
    return r;
}

struct fn_create_job *fn_job_new(enum job_kind kind, bool blocking, struct fn_comm *c,
                                 ncclComm_t *out)
{
    struct fn_create_job *j = calloc(1, sizeof *j);
    if (j) {
        j->kind = kind;
        j->blocking = blocking;
        j->comm = c;
        j->out = out;
    }
    return j;
}
