/*
 * fakenccl core: what every file of the fake libnccl.so.2 shares.
 *
 * Owns: the run-time configuration read from the environment (FAKENCCL_*,
 * NCCL_COMM_BLOCKING, NCCL_DEBUG), the fault-injection decisions, the
 * last-error text, loud diagnostics, hashing helpers and the datatype and
 * reduction kernels. Everything here is thread-safe unless a comment says
 * otherwise; nothing here may be called from a signal handler.
 *
 * Naming: fn_ for functions and types shared between files of the fake,
 * static for everything else, pncclX/ncclX for the API, fakenccl_ for the
 * documented test hooks of fakenccl.h.
 */
#ifndef FAKENCCL_CORE_H
#define FAKENCCL_CORE_H

#include <nccl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FN_EXPORT __attribute__((visibility("default")))
/* Makes ncclX a weak alias of the strong pncclX defined just above, as in NCCL. */
#define FN_WEAK_ALIAS(name) \
    extern __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

#define FN_NO_RANK (-1)

/* The three moments of pthread_atfork; each module with a lock has an fn_*_atfork(phase). */
enum fn_fork_phase { FN_FORK_PREPARE, FN_FORK_PARENT, FN_FORK_CHILD };
/* Registration records (fakenccl_mem.c). */
void fn_mem_atfork(enum fn_fork_phase phase);

/* ---- configuration (fakenccl_config.c) ---- */

struct fn_config {
    bool noop;                 /* FAKENCCL_NOOP: ops enqueue nothing */
    int env_blocking;          /* NCCL_COMM_BLOCKING, or -1 when unset */
    int proc_rank;             /* RANK, or FN_NO_RANK when unset */
    int delay_ms;              /* FAKENCCL_DELAY_MS (0: off) */
    int delay_rank;            /* FAKENCCL_DELAY_RANK (FN_NO_RANK: every rank) */
    char fail_op[40];          /* FAKENCCL_FAIL_OP ("" : off), without the nccl prefix */
    long fail_nth;             /* FAKENCCL_FAIL_NTH (default 1) */
    ncclResult_t fail_result;  /* FAKENCCL_FAIL_RESULT (default ncclInternalError) */
    int fail_rank;             /* FAKENCCL_FAIL_RANK (FN_NO_RANK: every rank) */
    long async_after;          /* FAKENCCL_ASYNC_ERROR_AFTER (0: off) */
    int async_rank;            /* FAKENCCL_ASYNC_ERROR_RANK */
    ncclResult_t async_result; /* FAKENCCL_ASYNC_ERROR_RESULT (default ncclRemoteError) */
    char call_log[512];        /* FAKENCCL_CALL_LOG with %r and %p expanded ("" : off) */
    int abort_hang_ms;         /* FAKENCCL_ABORT_HANG_MS: ncclCommAbort blocks this long */
    bool abort_notify;         /* FAKENCCL_ABORT_NOTIFY: peers see an abort as a remote error */
    bool nb_seeded;            /* FAKENCCL_NB_SEED is set */
    long nb_seed;              /* FAKENCCL_NB_SEED: mixes ncclSuccess and ncclInProgress */
};

/*
 * Opens a plugin library as NCCL's plugin_open.cc does: `name` as given (STATIC_PLUGIN, or
 * any prefix of it in any case: the global scope), else <prefix>-<name>.so for a bare name
 * that is not lib*.so; no name: <prefix>.so. NULL when nothing opens (fakenccl_plugin.c).
 */
void *fn_plugin_open(const char *prefix, const char *name);

/* Every NCCL_* read of the fake goes through here, as NCCL's ncclGetEnv (param.cc): the
 * env plugin's getEnv once NCCL_ENV_PLUGIN names one, else getenv (fakenccl_plugin.c). */
const char *fn_getenv(const char *name);
/* The configuration, loaded once per process (again in a fork child). */
const struct fn_config *fn_cfg(void);
/* NCCL_DEBUG is WARN, INFO or TRACE: fn_warn also prints. */
bool fn_debug_warn(void);
/* ncclResetDebugInit: reads NCCL_DEBUG again. */
void fn_cfg_reload_debug(void);
/* Fork handling: a child forgets the configuration and reads the environment again. */
void fn_cfg_atfork(enum fn_fork_phase phase);
/* The rank that the FAKENCCL_*_RANK variables compare with: RANK when set, else comm_rank. */
int fn_fault_rank(int comm_rank);
/*
 * FAKENCCL_FAIL_OP: counts this call of `api` (name without "nccl") made on a
 * matching rank and returns the injected error for the Nth one, else ncclSuccess.
 */
ncclResult_t fn_fault_check_call(const char *api, int comm_rank);

/* ---- errors and diagnostics (fakenccl_error.c) ---- */

/* Records the last-error text (as NCCL's WARN does) and prints it when NCCL_DEBUG asks. */
void fn_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* NCCL's PtrCheck: ncclSuccess where p is set, else the warning "<api> : <what> argument is
 * NULL" and ncclInvalidArgument. */
ncclResult_t fn_ptr_check(const void *p, const char *api, const char *what);
/* Prints one "fakenccl: ..." line to stderr, always, with a single write(2). */
void fn_loud(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Copies the last-error text into a thread-local buffer and returns it. */
const char *fn_last_error(void);
/* NCCL's exact text for a result code. */
const char *fn_error_string(ncclResult_t r);
/* Parses a result given as a number or a name ("ncclRemoteError", "RemoteError"). */
bool fn_parse_result(const char *s, ncclResult_t *out);
/* Maps a failed CUDA driver call to ncclUnhandledCudaError with NCCL's wording. */
ncclResult_t fn_cuda_error(int cu_result, const char *call);
/* Takes (prepare) and releases (parent, child) the last-error lock around fork(). */
void fn_error_atfork(enum fn_fork_phase phase);

/* ---- unique ids (fakenccl_misc.c) ---- */

/* The first 8 bytes of every id made by ncclGetUniqueId; 16 random bytes follow. */
#define FN_UID_TAG "fakenccl"
ncclResult_t fn_make_unique_id(ncclUniqueId *id);

/* ---- hashing (fakenccl_error.c) ---- */

uint64_t fn_hash64(const void *data, size_t len, uint64_t seed);

/* ---- datatypes and reductions (fakenccl_reduce.c) ---- */

/* Size in bytes of one element, or 0 for an invalid datatype. */
size_t fn_type_size(ncclDataType_t t);
/* NCCL's name of a datatype ("float32") for messages. */
const char *fn_type_name(ncclDataType_t t);
/* acc[i] = acc[i] op src[i] for n elements; op is ncclSum, ncclProd, ncclMax or ncclMin
 * (ncclAvg reduces as ncclSum; the caller divides afterwards). */
void fn_reduce(void *acc, const void *src, size_t n, ncclDataType_t t, ncclRedOp_t op);
/* dst[i] = src[i] * scalar[0] (PreMulSum's local pre-multiplication). */
void fn_scale(void *dst, const void *src, size_t n, ncclDataType_t t, const void *scalar);
/* buf[i] = buf[i] / divisor (ncclAvg's final step). */
void fn_divide(void *buf, size_t n, ncclDataType_t t, int divisor);

#endif
