/*
 * fakecuda_init.c: cuInit, the configuration read from FAKECUDA_* variables, fork handling,
 * the entry check every API call makes, and the loud misuse lines.
 *
 * Fork: like the real driver, a child forked from a process that had called cuInit cannot
 * use CUDA. Every call that needs the driver (cuInit included) returns
 * CUDA_ERROR_NOT_INITIALIZED there (the runtime calls that code "initialization error").
 * A child of a process that never called cuInit starts clean and may call cuInit. Either
 * way the child never blocks on a lock held by a parent thread: the atfork child handler
 * re-creates every global lock, and the parent's worker threads are not counted.
 */
#include "fakecuda_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { FC_UNINIT, FC_READY, FC_FORKED };

struct fc_config fc_cfg = {8, 80ull << 30, 0, -1, false, FC_QUEUE_DEPTH_DEFAULT, 0};

static _Atomic int g_state = FC_UNINIT;
static _Atomic int g_init_result = -1; /* CUresult of the first cuInit, -1 before */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned long g_misuse;
static _Atomic uint64_t g_next_tid = 1;
static _Atomic unsigned long long g_next_obj_id = 1;
static _Thread_local uint64_t tls_tid;
static _Thread_local bool tls_worker;
static _Thread_local unsigned long long tls_calls, tls_timed_records; /* fakecuda.h */

FC_API unsigned long fakecuda_misuse_count(void)
{
    return atomic_load(&g_misuse);
}

/*
 * Prints "fakecuda: <call>: <problem>" to stderr in one write(2), so lines of several
 * threads never interleave, and counts it. Any thread, not signal handlers.
 */
void fc_complain(const char *call, const char *fmt, ...)
{
    char line[512];
    int n = snprintf(line, sizeof line, "fakecuda: %s: ", call);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < (int)sizeof line) n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    atomic_fetch_add(&g_misuse, 1);
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

uint64_t fc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A small process-unique id for the calling thread (never 0). */
uint64_t fc_thread_id(void)
{
    if (tls_tid == 0) tls_tid = atomic_fetch_add(&g_next_tid, 1);
    return tls_tid;
}

unsigned long long fc_next_id(void)
{
    return atomic_fetch_add(&g_next_obj_id, 1);
}

void fc_mark_worker_thread(void)
{
    tls_worker = true;
}

FC_API unsigned long long fakecuda_thread_calls(void)
{
    return tls_calls;
}
FC_API unsigned long long fakecuda_thread_timed_records(void)
{
    return tls_timed_records;
}
void fc_count_timed_record(void)
{
    tls_timed_records++;
}

CUresult fc_enter(const char *call)
{
    tls_calls++;
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (__builtin_expect(st != FC_READY, 0)) {
        if (st == FC_FORKED)
            fc_complain(call, "CUDA cannot be used in a child forked after cuInit");
        else
            fc_complain(call, "cuInit has not been called (or failed)");
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (__builtin_expect(tls_worker, 0)) {
        fc_complain(call, "called from a host function running on a stream; host functions "
                          "must not make CUDA calls");
        return CUDA_ERROR_NOT_PERMITTED;
    }
    return CUDA_SUCCESS;
}

/* Reads a non-negative integer variable; returns false (loud) when it is set but bad. */
static bool env_number(const char *name, long long max, long long *out)
{
    const char *v = getenv(name);
    if (!v || !*v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < 0 || x > max) {
        fc_complain("cuInit", "%s='%s' is not an integer in [0, %lld]; ignored", name, v, max);
        return false;
    }
    *out = x;
    return true;
}

static void read_config(void)
{
    long long v = fc_cfg.devices;
    if (env_number("FAKECUDA_DEVICES", FC_MAX_DEVICES, &v)) fc_cfg.devices = (int)v;
    v = (long long)(fc_cfg.mem_bytes >> 20);
    if (env_number("FAKECUDA_MEM_MB", 1ll << 30, &v)) fc_cfg.mem_bytes = (size_t)v << 20;
    v = 0;
    if (env_number("FAKECUDA_OP_DELAY_US", 3600ll * 1000000, &v))
        fc_cfg.op_delay_ns = (uint64_t)v * 1000;
    v = -1;
    if (env_number("FAKECUDA_STALL_AFTER_OPS", LLONG_MAX / 2, &v)) fc_cfg.stall_after_ops = v;
    v = 0;
    if (env_number("FAKECUDA_INSTANT_EVENTS", 1, &v)) fc_cfg.instant_events = v == 1;
    v = fc_cfg.queue_depth;
    if (env_number("FAKECUDA_QUEUE_DEPTH", 1ll << 20, &v)) fc_cfg.queue_depth = v;
    v = 0;
    if (env_number("FAKECUDA_MAX_CONNECTIONS", 32, &v)) fc_cfg.max_connections = v;
}

FC_API CUresult cuInit(unsigned int Flags)
{
    if (atomic_load(&g_state) == FC_FORKED) {
        fc_complain("cuInit", "CUDA cannot be used in a child forked after cuInit");
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (Flags != 0) {
        fc_complain("cuInit", "Flags must be 0 (got %u)", Flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int r = atomic_load_explicit(&g_init_result, memory_order_acquire);
    if (r >= 0) return (CUresult)r;
    pthread_mutex_lock(&g_init_lock);
    r = atomic_load(&g_init_result);
    if (r < 0) {
        read_config();
        r = fc_cfg.devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
        if (r == CUDA_SUCCESS) atomic_store_explicit(&g_state, FC_READY, memory_order_release);
        atomic_store_explicit(&g_init_result, r, memory_order_release);
    }
    pthread_mutex_unlock(&g_init_lock);
    return (CUresult)r;
}

FC_API CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FC_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

/*
 * Child side of fork(): only the forking thread exists. Re-create the global locks (another
 * parent thread may have held one) and, if the parent had initialised the driver, refuse
 * every later call as the real driver does.
 */
static void atfork_child(void)
{
    pthread_mutex_init(&g_init_lock, NULL);
    if (atomic_load(&g_state) != FC_UNINIT) atomic_store(&g_state, FC_FORKED);
    tls_worker = false; /* a host function that forks: the child is not a worker */
    fc_queue_atfork_child();
    fc_capture_atfork_child();
    fc_mem_atfork_child();
    fc_ctx_atfork_child();
}

__attribute__((constructor)) static void fc_register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}
