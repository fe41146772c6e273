/*
 * fakenccl memory calls: MemAlloc, MemFree, CommRegister, CommDeregister,
 * CommWindowRegister, CommWindowDeregister, and the user reduction
 * operators RedOpCreatePreMulSum and RedOpDestroy.
 *
 * Memory comes from the fake driver's cuMemAlloc (plain host memory there),
 * in the current context or, with none, device 0's primary context, like
 * cudart. Registrations and windows are local bookkeeping: the handle is a
 * record that deregistration looks up before trusting it, so a stale or
 * foreign handle fails with ncclInvalidArgument instead of crashing.
 */
#include "fakenccl_calllog.h"
#include "fakenccl_create.h"

#include <stdlib.h>
#include <string.h>

struct reg {
    struct reg *next;
    struct fn_comm *comm;
    void *buff;
    size_t size;
    bool window;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg *regs;

void fn_mem_atfork(enum fn_fork_phase phase)
{
    if (phase == FN_FORK_PREPARE)
        pthread_mutex_lock(&reg_lock);
    else
        pthread_mutex_unlock(&reg_lock);
}

static ncclResult_t mem_alloc(void **ptr, size_t size)
{
    CUcontext ctx;
    CUdeviceptr p = 0;
    int dev;
    ncclResult_t r = fn_ptr_check(ptr, "MemAlloc", "ptr");
    if (r != ncclSuccess) return r;
    *ptr = NULL;
    r = fn_fault_check_call("MemAlloc", FN_NO_RANK);
    if (r != ncclSuccess || size == 0) return r;
    if ((r = fn_current_device(&ctx, &dev)) != ncclSuccess) return r;
    CUresult cr = cuMemAlloc(&p, size);
    if (cr != CUDA_SUCCESS) return fn_cuda_error(cr, "cuMemAlloc");
    *ptr = (void *)(uintptr_t)p;
    return ncclSuccess;
}

static ncclResult_t mem_free(void *ptr)
{
    CUcontext ctx;
    int dev;
    if (!ptr) return ncclSuccess;
    ncclResult_t r = fn_current_device(&ctx, &dev);
    if (r != ncclSuccess) return r;
    CUresult cr = cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    return cr == CUDA_SUCCESS ? ncclSuccess : fn_cuda_error(cr, "cuMemFree");
}

static ncclResult_t reg_add(struct fn_comm *c, void *buff, size_t size, bool window, void **out,
                            const char *api)
{
    ncclResult_t r = fn_comm_check(c, api);
    if (r != ncclSuccess) return r;
    if (!out || !buff) {
        fn_warn("%s : %s argument is NULL", api, out ? "buff" : "handle");
        return ncclInvalidArgument;
    }
    if ((r = fn_fault_check_call(api, c->rank)) != ncclSuccess) return r;
    struct reg *g = calloc(1, sizeof *g);
    if (!g) {
        fn_warn("%s : out of memory", api);
        return ncclSystemError;
    }
    *g = (struct reg){NULL, c, buff, size, window};
    pthread_mutex_lock(&reg_lock);
    g->next = regs;
    regs = g;
    pthread_mutex_unlock(&reg_lock);
    *out = g;
    return ncclSuccess;
}

static ncclResult_t reg_remove(struct fn_comm *c, void *handle, bool window, const char *api)
{
    ncclResult_t r = fn_comm_check_handle(c, api);
    if (r != ncclSuccess) return r;
    struct reg *found = NULL;
    pthread_mutex_lock(&reg_lock);
    for (struct reg **p = &regs; *p; p = &(*p)->next) {
        if (*p == handle && (*p)->comm == c && (*p)->window == window) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    if (!found) {
        fn_warn("%s : %s is not registered with this communicator", api,
                window ? "window" : "handle");
        return ncclInvalidArgument;
    }
    free(found);
    return ncclSuccess;
}

static ncclResult_t redop_create(ncclRedOp_t *op, void *scalar, ncclDataType_t dtype,
                                 ncclScalarResidence_t residence, struct fn_comm *c)
{
    const char *api = "RedOpCreatePreMulSum";
    ncclResult_t r = fn_comm_check(c, api);
    if (r != ncclSuccess) return r;
    if (!op || !scalar) {
        fn_warn("%s : %s argument is NULL", api, op ? "scalar" : "op");
        return ncclInvalidArgument;
    }
    if ((unsigned)dtype >= ncclNumTypes) {
        fn_warn("%s : invalid type %d", api, (int)dtype);
        return ncclInvalidArgument;
    }
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
        fn_warn("%s : invalid residence %d", api, (int)residence);
        return ncclInvalidArgument;
    }
    int idx = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < FN_MAX_REDOPS && idx < 0; i++) {
        if (c->redops[i].used) continue;
        idx = i;
        struct fn_redop *o = &c->redops[i];
        memset(o, 0, sizeof *o);
        o->used = true;
        o->dtype = dtype;
        o->residence = residence;
        o->ptr = scalar;
        if (residence == ncclScalarHostImmediate) memcpy(o->value, scalar, fn_type_size(dtype));
    }
    pthread_mutex_unlock(&c->mu);
    if (idx < 0) {
        fn_warn("%s : too many reduction operators (%d) on this communicator", api, FN_MAX_REDOPS);
        return ncclInvalidUsage;
    }
    *op = (ncclRedOp_t)((int)ncclNumOps + idx);
    return ncclSuccess;
}

static ncclResult_t redop_destroy(ncclRedOp_t op, struct fn_comm *c)
{
    ncclResult_t r = fn_comm_check_handle(c, "RedOpDestroy");
    if (r != ncclSuccess) return r;
    if ((int)op < (int)ncclNumOps) {
        fn_warn("ncclRedOpDestroy : operator is a NCCL builtin.");
        return ncclInvalidArgument;
    }
    int idx = (int)op - (int)ncclNumOps;
    bool ok = false;
    pthread_mutex_lock(&c->mu);
    if (idx < FN_MAX_REDOPS && c->redops[idx].used) {
        c->redops[idx].used = false;
        ok = true;
    }
    pthread_mutex_unlock(&c->mu);
    if (!ok) {
        fn_warn("ncclRedOpDestroy : operator is garbage.");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* ---- API ---- */

FN_EXPORT ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    ncclResult_t r = mem_alloc(ptr, size);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclMemAlloc")) {
        if (ptr)
            fn_log_ptr(&l, "ptr", FN_LOG_BUF, *ptr);
        else
            fn_log_fmt(&l, " ptr=null");
        fn_log_fmt(&l, " size=%zu", size);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclMemAlloc);

FN_EXPORT ncclResult_t pncclMemFree(void *ptr)
{
    ncclResult_t r = mem_free(ptr);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclMemFree")) {
        fn_log_ptr(&l, "ptr", FN_LOG_BUF, ptr);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclMemFree);

FN_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                         void **handle)
{
    ncclResult_t r = reg_add((struct fn_comm *)comm, buff, size, false, handle, "CommRegister");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommRegister")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_ptr(&l, "buff", FN_LOG_BUF, buff);
        fn_log_fmt(&l, " size=%zu", size);
        if (handle && r == ncclSuccess)
            fn_log_ptr(&l, "handle", FN_LOG_REG, *handle);
        else
            fn_log_fmt(&l, " handle=%s", handle ? "-" : "null");
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommRegister);

FN_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    ncclResult_t r = reg_remove((struct fn_comm *)comm, handle, false, "CommDeregister");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommDeregister")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_ptr(&l, "handle", FN_LOG_REG, handle);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommDeregister);

FN_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                               ncclWindow_t *win, int winFlags)
{
    ncclResult_t r = ncclSuccess;
    if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC) {
        fn_warn("CommWindowRegister : invalid winFlags 0x%x", (unsigned)winFlags);
        r = ncclInvalidArgument;
    } else {
        r = reg_add((struct fn_comm *)comm, buff, size, true, (void **)win, "CommWindowRegister");
    }
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommWindowRegister")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_ptr(&l, "buff", FN_LOG_BUF, buff);
        fn_log_fmt(&l, " size=%zu", size);
        if (win && r == ncclSuccess)
            fn_log_ptr(&l, "win", FN_LOG_WIN, *win);
        else
            fn_log_fmt(&l, " win=%s", win ? "-" : "null");
        fn_log_fmt(&l, " winFlags=%d", winFlags);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommWindowRegister);

FN_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    ncclResult_t r = reg_remove((struct fn_comm *)comm, win, true, "CommWindowDeregister");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommWindowDeregister")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_ptr(&l, "win", FN_LOG_WIN, win);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommWindowDeregister);

FN_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                 ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t r = redop_create(op, scalar, datatype, residence, (struct fn_comm *)comm);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclRedOpCreatePreMulSum")) {
        if (op && r == ncclSuccess)
            fn_log_fmt(&l, " op=%d", (int)*op);
        else
            fn_log_fmt(&l, " op=%s", op ? "-" : "null");
        fn_log_ptr(&l, "scalar", FN_LOG_BUF, scalar);
        fn_log_fmt(&l, " datatype=%d residence=%d", (int)datatype, (int)residence);
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclRedOpCreatePreMulSum);

FN_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t r = redop_destroy(op, (struct fn_comm *)comm);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclRedOpDestroy")) {
        fn_log_fmt(&l, " op=%d", (int)op);
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclRedOpDestroy);
