/*
 * fakenccl creation API: CommInitRank, CommInitRankConfig,
 * CommInitRankScalable, CommInitAll, CommSplit, CommShrink. Each call
 * checks its arguments as NCCL does, builds a handle and a job
 * (fakenccl_create.c runs it) and logs itself.
 *
 * Out-parameters, as NCCL: an init call writes the new handle at once
 * (a nonblocking one then completes in the background); Split and Shrink
 * write NULL at once and the handle when the creation completes.
 */
#include "fakenccl_calllog.h"
#include "fakenccl_create.h"
#include "fakenccl_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ncclResult_t no_memory(const char *api)
{
    fn_warn("%s : out of memory", api);
    return ncclSystemError;
}

static ncclResult_t init_rank(ncclComm_t *newcomm, int nranks, int nid, const ncclUniqueId *ids,
                              int rank, const ncclConfig_t *config, const char *api)
{
    bool blocking;
    char name[sizeof((struct fn_comm *)0)->name];
    CUcontext ctx;
    int dev;
    if (!newcomm) {
        fn_warn("%s : newcomm argument is NULL", api);
        return ncclInvalidArgument;
    }
    *newcomm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        fn_warn("Invalid rank requested : %d/%d", rank, nranks);
        return ncclInvalidArgument;
    }
    if (nranks > FN_MAX_RANKS) {
        fn_warn("fakenccl: %d ranks requested; the fake supports %d at most", nranks, FN_MAX_RANKS);
        return ncclInvalidArgument;
    }
    if (nid < 1 || !ids) {
        fn_warn("%s : commId argument is NULL or nId %d is not positive", api, nid);
        return ncclInvalidArgument;
    }
    ncclResult_t r = fn_parse_config(config, NULL, &blocking, name, sizeof name);
    if (r == ncclSuccess) r = fn_fault_check_call(api, rank);
    if (r == ncclSuccess) r = fn_current_device(&ctx, &dev);
    if (r != ncclSuccess) return r;
    struct fn_comm *c = fn_comm_new();
    if (!c || !fn_comm_set_size(c, rank, nranks)) return no_memory(api);
    c->dev = dev;
    c->ctx = ctx;
    c->blocking = blocking;
    memcpy(c->name, name, sizeof name);
    struct fn_create_job *j = fn_job_new(JOB_INIT, blocking, c, newcomm);
    if (!j) return no_memory(api);
    fn_key_from_uid(&ids[0], j->key);
    *newcomm = (ncclComm_t)c;
    return fn_job_submit(j);
}

/* InitAll: one process, ndev ranks on devlist (or devices 0..ndev-1); always waits. */
static ncclResult_t init_all(ncclComm_t *comms, int ndev, const int *devlist)
{
    int total = 0;
    ncclUniqueId id;
    ncclResult_t r = fn_ptr_check(comms, "CommInitAll", "comms");
    if (r != ncclSuccess) return r;
    if (ndev < 0) {
        fn_warn("Invalid device count requested : %d", ndev);
        return ncclInvalidArgument;
    }
    r = fn_fault_check_call("CommInitAll", FN_NO_RANK);
    if (r != ncclSuccess) return r;
    CUresult cr = cuInit(0);
    if (cr == CUDA_SUCCESS) cr = cuDeviceGetCount(&total);
    if (cr != CUDA_SUCCESS) return fn_cuda_error(cr, "cuDeviceGetCount");
    for (int i = 0; devlist && i < ndev; i++) {
        if (devlist[i] < 0 || devlist[i] >= total) {
            fn_warn("Invalid device %d (totalnDev=%d)", devlist[i], total);
            return ncclInvalidArgument;
        }
        for (int k = 0; k < i; k++) {
            if (devlist[k] == devlist[i]) {
                fn_warn("Duplicate device %d in the device list", devlist[i]);
                return ncclInvalidUsage;
            }
        }
    }
    if (ndev == 0) return ncclSuccess;
    struct fn_create_job **jobs = calloc((size_t)ndev, sizeof *jobs);
    if (!jobs || (r = fn_make_unique_id(&id)) != ncclSuccess) {
        free(jobs);
        return jobs ? r : no_memory("CommInitAll");
    }
    int made = 0, env = fn_cfg()->env_blocking;
    for (; made < ndev && r == ncclSuccess; made++) {
        CUcontext ctx;
        int dev = devlist ? devlist[made] : made;
        struct fn_comm *c = NULL;
        if ((r = fn_device_context(dev, &ctx)) != ncclSuccess) break;
        c = fn_comm_new();
        jobs[made] = c && fn_comm_set_size(c, made, ndev)
                         ? fn_job_new(JOB_INIT, true, c, &comms[made])
                         : NULL;
        if (!jobs[made]) {
            r = no_memory("CommInitAll");
            break;
        }
        c->dev = dev;
        c->ctx = ctx;
        c->blocking = env != 0;
        fn_key_from_uid(&id, jobs[made]->key);
        comms[made] = (ncclComm_t)c;
    }
    if (r != ncclSuccess) {
        for (int i = 0; i < made; i++) fn_create_cancel(jobs[i], r);
        for (int i = 0; i < ndev; i++) comms[i] = NULL;
        free(jobs);
        return r;
    }
    r = fn_jobs_run(jobs, ndev);
    free(jobs);
    if (r != ncclSuccess)
        for (int i = 0; i < ndev; i++) comms[i] = NULL;
    return r;
}

/* The parent of a split or shrink: a valid handle and a place for the child. */
static ncclResult_t check_parent(struct fn_comm *p, ncclComm_t *newcomm, const char *api)
{
    ncclResult_t r = fn_comm_check_handle(p, api);
    if (r != ncclSuccess) return r;
    if (!newcomm) {
        fn_warn("%s : newcomm argument is NULL", api);
        return ncclInvalidArgument;
    }
    *newcomm = NULL;
    return ncclSuccess;
}

/* A child handle on the parent's device, or NULL when out of memory. */
static struct fn_comm *new_child(const struct fn_comm *p, bool blocking, const char *name)
{
    struct fn_comm *c = fn_comm_new();
    if (c) {
        c->dev = p->dev;
        c->ctx = p->ctx;
        c->blocking = blocking;
        snprintf(c->name, sizeof c->name, "%s", name);
    }
    return c;
}

/* Numbers a child of p and reserves a control epoch for its agreement. */
static void reserve(struct fn_comm *p, struct fn_create_job *j)
{
    pthread_mutex_lock(&p->mu);
    j->ordinal = ++p->child_ordinal;
    j->epoch = ++p->ctrl_epoch;
    pthread_mutex_unlock(&p->mu);
    j->parent = p;
}

static ncclResult_t split(struct fn_comm *p, int color, int key, ncclComm_t *newcomm,
                          const ncclConfig_t *config)
{
    bool blocking;
    char name[sizeof p->name];
    ncclResult_t r = check_parent(p, newcomm, "CommSplit");
    if (r == ncclSuccess) r = fn_comm_check(p, "CommSplit");
    if (r != ncclSuccess) return r;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        fn_warn("CommSplit : invalid color %d", color);
        return ncclInvalidArgument;
    }
    if ((r = fn_parse_config(config, p, &blocking, name, sizeof name)) != ncclSuccess ||
        (r = fn_fault_check_call("CommSplit", p->rank)) != ncclSuccess)
        return r;
    struct fn_comm *c = color == NCCL_SPLIT_NOCOLOR ? NULL : new_child(p, blocking, name);
    struct fn_create_job *j = fn_job_new(JOB_SPLIT, blocking, c, newcomm);
    if ((color != NCCL_SPLIT_NOCOLOR && !c) || !j) {
        free(j);
        return no_memory("CommSplit");
    }
    j->color = color;
    j->skey = key;
    reserve(p, j);
    return fn_job_submit(j);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ends this rank's running and queued ops on p (NCCL_SHRINK_ABORT), then re-opens p. */
static void quiesce_parent(struct fn_comm *p)
{
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quiesce, true);
    if (p->seg.hdr) fn_seg_ring(&p->seg);
    while (p->pending > 0 || p->inflight > 0) pthread_cond_wait(&p->cv, &p->mu);
    atomic_store(&p->quiesce, false);
    pthread_mutex_unlock(&p->mu);
}

/* Sorts a copy of the exclusion list and checks it; NULL (with the error in *r) if bad. */
static int *exclusion_list(const struct fn_comm *p, const int *excl, int n, ncclResult_t *r)
{
    *r = ncclInvalidArgument;
    if (!excl) {
        fn_warn("CommShrink : excludeRanksList argument is NULL");
        return NULL;
    }
    if (n <= 0) {
        fn_warn("CommShrink : excludeRanksCount %d is not positive", n);
        return NULL;
    }
    int *s = malloc((size_t)n * sizeof *s);
    if (!s) {
        *r = no_memory("CommShrink");
        return NULL;
    }
    memcpy(s, excl, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_int);
    for (int i = 0; i < n; i++) {
        if (s[i] < 0 || s[i] >= p->nranks || (i > 0 && s[i] == s[i - 1]) || s[i] == p->rank) {
            fn_warn("CommShrink : excludeRanksList entry %d is invalid for rank %d of %d", s[i],
                    p->rank, p->nranks);
            free(s);
            return NULL;
        }
    }
    *r = ncclSuccess;
    return s;
}

static ncclResult_t shrink(struct fn_comm *p, int *excl, int nexcl, ncclComm_t *newcomm,
                           const ncclConfig_t *config, int flags)
{
    bool blocking;
    char name[sizeof p->name];
    ncclResult_t r = check_parent(p, newcomm, "CommShrink");
    if (r != ncclSuccess) return r;
    int *sorted = exclusion_list(p, excl, nexcl, &r);
    if (!sorted) return r;
    if (flags & NCCL_SHRINK_ABORT) { /* errors of the parent do not matter, progress does */
        int st = atomic_load(&p->state);
        if (st == FN_INITIALIZING || st == FN_FINALIZING || atomic_load(&p->nb_jobs) > 0) {
            fn_warn("Attempt to use communicator before the previous operation returned "
                    "ncclSuccess");
            r = ncclInvalidArgument;
        }
    } else {
        r = fn_comm_check(p, "CommShrink");
    }
    if (r == ncclSuccess) r = fn_parse_config(config, p, &blocking, name, sizeof name);
    if (r == ncclSuccess) r = fn_fault_check_call("CommShrink", p->rank);
    if (r != ncclSuccess) {
        free(sorted);
        return r;
    }
    if (flags & NCCL_SHRINK_ABORT) quiesce_parent(p);
    struct fn_comm *c = new_child(p, blocking, name);
    struct fn_create_job *j = c ? fn_job_new(JOB_SHRINK, blocking, c, newcomm) : NULL;
    if (!j) {
        free(sorted);
        return no_memory("CommShrink");
    }
    j->excl = sorted;
    j->nexcl = nexcl;
    reserve(p, j);
    return fn_job_submit(j);
}

/* ---- API ---- */

/* Logs the new-communicator out-parameter: the handle, or "pending" while a
 * nonblocking split/shrink still has to write it (reading it would race). */
static void log_newcomm(struct fn_logline *l, const char *arg, ncclComm_t *out, bool pending)
{
    if (!out)
        fn_log_fmt(l, " %s=null", arg);
    else if (pending)
        fn_log_fmt(l, " %s=pending", arg);
    else
        fn_log_ptr(l, arg, FN_LOG_COMM, *out);
}

FN_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                         int rank)
{
    ncclResult_t r = init_rank(comm, nranks, 1, &commId, rank, NULL, "CommInitRank");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommInitRank")) {
        log_newcomm(&l, "comm", comm, false);
        fn_log_fmt(&l, " nranks=%d", nranks);
        fn_log_id(&l, "commId", &commId);
        fn_log_fmt(&l, " rank=%d", rank);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommInitRank);

FN_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                               int rank, ncclConfig_t *config)
{
    ncclResult_t r = init_rank(comm, nranks, 1, &commId, rank, config, "CommInitRankConfig");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommInitRankConfig")) {
        log_newcomm(&l, "comm", comm, false);
        fn_log_fmt(&l, " nranks=%d", nranks);
        fn_log_id(&l, "commId", &commId);
        fn_log_fmt(&l, " rank=%d", rank);
        fn_log_config(&l, "config", config);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommInitRankConfig);

FN_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                 int nId, ncclUniqueId *commIds,
                                                 ncclConfig_t *config)
{
    ncclResult_t r = init_rank(newcomm, nranks, nId, commIds, myrank, config,
                               "CommInitRankScalable");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommInitRankScalable")) {
        log_newcomm(&l, "newcomm", newcomm, false);
        fn_log_fmt(&l, " nranks=%d myrank=%d nId=%d commIds=", nranks, myrank, nId);
        if (!commIds) fn_log_fmt(&l, "null");
        for (int i = 0; commIds && i < nId && i < 64; i++) {
            fn_log_fmt(&l, i ? "," : "[");
            fn_log_id(&l, "", &commIds[i]);
        }
        fn_log_fmt(&l, commIds ? "]" : "");
        fn_log_config(&l, "config", config);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommInitRankScalable);

FN_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    ncclResult_t r = init_all(comm, ndev, devlist);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommInitAll")) {
        if (!comm) fn_log_fmt(&l, " comm=null");
        for (int i = 0; comm && i < ndev && i < 64; i++) {
            fn_log_fmt(&l, i ? "," : " comm=[");
            fn_log_ptr(&l, "", FN_LOG_COMM, comm[i]);
        }
        fn_log_fmt(&l, comm && ndev > 0 ? "]" : "");
        fn_log_fmt(&l, " ndev=%d", ndev);
        fn_log_ints(&l, "devlist", devlist, ndev < 64 ? ndev : 64);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommInitAll);

FN_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                      ncclConfig_t *config)
{
    bool grouped = fn_group_depth() > 0;
    struct fn_comm *owner = fn_comm_enter(comm, "CommSplit");
    ncclResult_t r = split((struct fn_comm *)comm, color, key, newcomm, config);
    fn_comm_leave(owner);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommSplit")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_fmt(&l, " color=%d key=%d", color, key);
        log_newcomm(&l, "newcomm", newcomm, r == ncclInProgress || (grouped && !r));
        fn_log_config(&l, "config", config);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommSplit);

FN_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                       int excludeRanksCount, ncclComm_t *newcomm,
                                       ncclConfig_t *config, int shrinkFlags)
{
    bool grouped = fn_group_depth() > 0;
    struct fn_comm *owner = fn_comm_enter(comm, "CommShrink");
    ncclResult_t r = shrink((struct fn_comm *)comm, excludeRanksList, excludeRanksCount, newcomm,
                            config, shrinkFlags);
    fn_comm_leave(owner);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommShrink")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_ints(&l, "excludeRanksList", excludeRanksList,
                    excludeRanksCount < 64 ? excludeRanksCount : 64);
        fn_log_fmt(&l, " excludeRanksCount=%d", excludeRanksCount);
        log_newcomm(&l, "newcomm", newcomm, r == ncclInProgress || (grouped && !r));
        fn_log_config(&l, "config", config);
        fn_log_fmt(&l, " shrinkFlags=%d", shrinkFlags);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommShrink);
