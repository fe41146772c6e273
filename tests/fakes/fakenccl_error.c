/*
 * fakenccl errors: NCCL's result strings, the last-error text behind
 * ncclGetLastError, loud "fakenccl:" diagnostics, and a small hash.
 *
 * NCCL keeps one process-wide last-error buffer written by its WARN macro.
 * The fake does the same under a mutex, and hands each caller a
 * thread-local copy so that a reader never sees a half-written text.
 */
#include "fakenccl_core.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_text[1024];

const char *fn_error_string(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

static const char *const result_names[ncclNumResults] = {
    "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
    "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};

bool fn_parse_result(const char *s, ncclResult_t *out)
{
    char *end;
    long v = strtol(s, &end, 0);
    if (*s && *end == '\0') {
        if (v < 0 || v >= ncclNumResults) return false;
        *out = (ncclResult_t)v;
        return true;
    }
    for (int i = 0; i < ncclNumResults; i++) {
        if (!strcasecmp(s, result_names[i]) || !strcasecmp(s, result_names[i] + 4)) {
            *out = (ncclResult_t)i;
            return true;
        }
    }
    return false;
}

void fn_warn(const char *fmt, ...)
{
    char msg[sizeof last_text];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&last_lock);
    memcpy(last_text, msg, sizeof msg);
    pthread_mutex_unlock(&last_lock);
    if (fn_debug_warn()) {
        char host[64] = "";
        char line[sizeof msg + 128];
        gethostname(host, sizeof host - 1);
        int n = snprintf(line, sizeof line, "%s:%d:%ld NCCL WARN %s\n", host, (int)getpid(),
                         (long)syscall(SYS_gettid), msg);
        if (n > 0) (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
}

ncclResult_t fn_ptr_check(const void *p, const char *api, const char *what)
{
    if (p) return ncclSuccess;
    fn_warn("%s : %s argument is NULL", api, what);
    return ncclInvalidArgument;
}

void fn_loud(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "fakenccl: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(2, line, (size_t)n);
}

const char *fn_last_error(void)
{
    static _Thread_local char copy[sizeof last_text];
    pthread_mutex_lock(&last_lock);
    memcpy(copy, last_text, sizeof copy);
    pthread_mutex_unlock(&last_lock);
    return copy;
}

ncclResult_t fn_cuda_error(int cu_result, const char *call)
{
    const char *text = NULL;
    if (cuGetErrorString((CUresult)cu_result, &text) != CUDA_SUCCESS || !text)
        text = "unknown error";
    fn_warn("Cuda failure %s '%s'", call, text);
    return ncclUnhandledCudaError;
}

void fn_error_atfork(enum fn_fork_phase phase)
{
    if (phase == FN_FORK_PREPARE)
        pthread_mutex_lock(&last_lock);
    else
        pthread_mutex_unlock(&last_lock);
}

uint64_t fn_hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    /* final avalanche (splitmix64) so that nearby inputs give unrelated names */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}
