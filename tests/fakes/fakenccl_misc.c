/*
 * fakenccl small API calls: GetVersion, GetUniqueId, GetErrorString,
 * GetLastError, ResetDebugInit; the fakenccl_ test hooks; and the fork
 * handlers of the whole library.
 */
#include "fakenccl.h"
#include "fakenccl_calllog.h"
#include "fakenccl_create.h"
#include "fakenccl_exec.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

ncclResult_t fn_make_unique_id(ncclUniqueId *id)
{
    unsigned char rnd[FN_KEY_BYTES];
    memset(id, 0, sizeof *id);
    memcpy(id->internal, FN_UID_TAG, 8);
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        /* no entropy source: time, pid and a counter still make ids unique on this host */
        static _Atomic uint64_t counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed[3] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30), (uint64_t)getpid(),
                            atomic_fetch_add(&counter, 1)};
        uint64_t h[2] = {fn_hash64(seed, sizeof seed, 11), fn_hash64(seed, sizeof seed, 12)};
        memcpy(rnd, h, sizeof rnd);
    }
    memcpy(id->internal + 8, rnd, sizeof rnd);
    return ncclSuccess;
}

FN_EXPORT ncclResult_t pncclGetVersion(int *version)
{
    ncclResult_t r = fn_ptr_check(version, "GetVersion", "version");
    if (r == ncclSuccess) *version = NCCL_VERSION_CODE;
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGetVersion")) {
        if (version)
            fn_log_fmt(&l, " version=%d", *version);
        else
            fn_log_fmt(&l, " version=null");
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclGetVersion);

FN_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    ncclResult_t r = fn_ptr_check(uniqueId, "GetUniqueId", "out");
    if (r == ncclSuccess) r = fn_fault_check_call("GetUniqueId", FN_NO_RANK);
    if (r == ncclSuccess) r = fn_make_unique_id(uniqueId);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGetUniqueId")) {
        if (r == ncclSuccess)
            fn_log_id(&l, "uniqueId", uniqueId);
        else
            fn_log_fmt(&l, " uniqueId=%s", uniqueId ? "-" : "null");
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclGetUniqueId);

FN_EXPORT const char *pncclGetErrorString(ncclResult_t result)
{
    const char *s = fn_error_string(result);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGetErrorString")) {
        fn_log_fmt(&l, " result=%d", (int)result);
        fn_log_end_text(&l, s, true);
    }
    return s;
}
FN_WEAK_ALIAS(ncclGetErrorString);

FN_EXPORT const char *pncclGetLastError(ncclComm_t comm)
{
    const char *s = fn_last_error();
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclGetLastError")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_end_text(&l, s, true);
    }
    return s;
}
FN_WEAK_ALIAS(ncclGetLastError);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void pncclResetDebugInit(void); /* nccl.h: "()", no prototype */

/* Re-reads NCCL_DEBUG, as NCCL re-reads its logging variables. */
FN_EXPORT void pncclResetDebugInit(void)
{
    fn_cfg_reload_debug();
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclResetDebugInit")) fn_log_end_text(&l, "void", false);
}
FN_WEAK_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop

/* ---- test hooks (fakenccl.h) ---- */

FN_EXPORT void fakenccl_shm_name(const ncclUniqueId *id, char *buf, size_t cap)
{
    uint8_t key[FN_KEY_BYTES];
    fn_key_from_uid(id, key);
    fn_seg_name(key, buf, cap);
}

/* ---- fork ---- */

static void fork_prepare(void)
{
    fn_cfg_atfork(FN_FORK_PREPARE);
    fn_error_atfork(FN_FORK_PREPARE);
    fn_log_atfork(FN_FORK_PREPARE);
    fn_helper_atfork(FN_FORK_PREPARE);
    fn_mem_atfork(FN_FORK_PREPARE);
}

static void fork_parent(void)
{
    fn_mem_atfork(FN_FORK_PARENT);
    fn_helper_atfork(FN_FORK_PARENT);
    fn_log_atfork(FN_FORK_PARENT);
    fn_error_atfork(FN_FORK_PARENT);
    fn_cfg_atfork(FN_FORK_PARENT);
}

/* The child starts clean: it may create communicators, never uses the parent's. */
static void fork_child(void)
{
    fn_mem_atfork(FN_FORK_CHILD);
    fn_helper_atfork(FN_FORK_CHILD);
    fn_log_atfork(FN_FORK_CHILD);
    fn_error_atfork(FN_FORK_CHILD);
    fn_cfg_atfork(FN_FORK_CHILD);
    fn_comm_atfork_child();
}

__attribute__((constructor)) static void fn_register_atfork(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}
