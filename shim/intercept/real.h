/*
 * real.h: the real NCCL entry points, resolved once.
 *
 * Owns: the table of real function pointers generated from nccl_api.def, and
 * the one-time resolution: RTLD_NEXT, then the already loaded libnccl.so.2 via
 * RTLD_NOLOAD; never an address inside this library.
 *
 * Threads: any. The table is filled under pthread_once and read-only after.
 */
#ifndef NCCLGUARD_REAL_H
#define NCCLGUARD_REAL_H

#include <nccl.h>

#include "base/atomic.h"

typedef const char *ng_cstr;

struct ng_real {
#define NCCL_API(ret, fail, name, params, args, hook) ret(*name) params;
#define NCCL_API_VOID(name, params, args) void(*name) params;
#include "intercept/nccl_api.def"
#undef NCCL_API
#undef NCCL_API_VOID
};

/* The table, and whether it is complete (set once by ncclguard_real_resolve). */
extern NG_HIDDEN struct ng_real ncclguard_real_table;
extern NG_HIDDEN ng_atomic(int) ncclguard_real_resolved;

/* Resolves every entry point once (pthread_once: the first callers wait for it). */
void ncclguard_real_resolve(void);

/* The library was loaded as NCCL's profiler plugin: a resolution that finds no
 * NCCL behind the wrappers is then not worth a warning (NCCL is static, or behind
 * a private handle, and nothing calls the wrappers). Before the first resolve. */
void ncclguard_real_as_plugin(void);

/* The table, resolved on first use: one load on the hot path. */
static inline const struct ng_real *ncclguard_real(void)
{
    if (__builtin_expect(!ng_atomic_load_acquire(&ncclguard_real_resolved), 0))
        ncclguard_real_resolve();
    return &ncclguard_real_table;
}

#endif
