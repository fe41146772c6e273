/*
 * interpose.h: the real NCCL entry points, resolved once.
 *
 * Owns: the table of real function pointers generated from nccl_api.def, and
 * the one-time resolution (RTLD_NEXT, then the already loaded libnccl.so.2 via
 * RTLD_NOLOAD; never an address inside this library).
 *
 * Threads: any. The table is filled under pthread_once and read-only after.
 */
#ifndef NCCLGUARD_INTERPOSE_H
#define NCCLGUARD_INTERPOSE_H

#include <nccl.h>

typedef const char *ng_cstr;

struct ng_real {
#define NCCL_API(ret, fail, name, params, args, hook) ret(*name) params;
#define NCCL_API_VOID(name, params, args) void(*name) params;
#include "intercept/nccl_api.def"
#undef NCCL_API
#undef NCCL_API_VOID
};

/* Resolves the table on first use and returns it. */
const struct ng_real *ncclguard_real(void);

/* NCCL_VERSION_CODE of the loaded NCCL (e.g. 22809), 0 until known. Set by
 * ncclguard_nccl_version_probe, which calls the real ncclGetVersion once. */
int ncclguard_nccl_version_code(void);
void ncclguard_nccl_version_probe(void);


#endif
