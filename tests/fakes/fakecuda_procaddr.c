/*
 * fakecuda_procaddr.c: cuGetProcAddress, from the table in fakecuda_procs.def.
 *
 * Like the real driver: symbol is the base name ("cuMemAlloc"), and the result is the export
 * of the newest ABI introduced at or before cudaVersion (cuMemAlloc at 12000 gives
 * cuMemAlloc_v2). CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM prefers the _ptsz/_ptds
 * variant and falls back to the legacy one; DEFAULT (0) means legacy. An unknown name or a
 * too old version gives CUDA_SUCCESS with *pfn = NULL and the reason in *symbolStatus; a
 * version newer than the driver (13000) gives CUDA_ERROR_INVALID_VALUE. Works before cuInit.
 * Thread safe: read-only table.
 */
#include "fakecuda_internal.h"

#include <string.h>

struct fc_proc {
    const char *name;
    int version;
    bool per_thread;
    void *fn;
};

static const struct fc_proc g_procs[] = {
#define FC_PROC(name, version, per_thread, sym) {#name, version, per_thread, (void *)&sym},
#include "fakecuda_procs.def"
#undef FC_PROC
};

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status, const char *call)
{
    const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!symbol || !pfn || (flags & ~known)) {
        fc_complain(call, "invalid argument (symbol %s, flags 0x%llx)", symbol ? symbol : "NULL",
                    (unsigned long long)flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    if (version > FC_DRIVER_VERSION) {
        fc_complain(call, "cudaVersion %d is newer than the driver (%d)", version,
                    FC_DRIVER_VERSION);
        return CUDA_ERROR_INVALID_VALUE;
    }
    bool want_pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, found = false;
    const struct fc_proc *legacy = NULL, *pt = NULL;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const struct fc_proc *p = &g_procs[i];
        if (strcmp(p->name, symbol) != 0) continue;
        found = true;
        if (p->version > version) continue;
        if (p->per_thread) {
            if (want_pt && (!pt || p->version > pt->version)) pt = p;
        } else if (!legacy || p->version > legacy->version) {
            legacy = p;
        }
    }
    const struct fc_proc *pick = pt ? pt : legacy;
    if (pick) *pfn = pick->fn;
    if (status)
        *status = pick    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

FC_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus, "cuGetProcAddress_v2");
}

FC_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL, "cuGetProcAddress");
}
