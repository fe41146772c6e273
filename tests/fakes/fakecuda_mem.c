/*
 * fakecuda_mem.c: device and pinned host memory, copies and memsets.
 *
 * "Device" memory is host memory (256-byte aligned) tracked in a sorted table, so a bad or
 * double free, and a copy or memset that does not lie inside one allocation, fail loudly
 * with CUDA_ERROR_INVALID_VALUE. Pinned host memory (cuMemAllocHost) is tracked the same
 * way and is also valid as a device pointer (unified addressing). Frees wait for the work
 * queued in the allocation's context first, as the real driver's implicit synchronisation
 * does, so no queued copy can touch freed memory. Synchronous copies and memsets run on the
 * legacy stream (per-thread stream for _ptds) and wait for it; the Async ones are enqueued.
 *
 * Threads: any. g_mem_lock guards the table; it is never held while waiting.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define FC_MEM_ALIGN 256

struct fc_alloc {
    uintptr_t base;
    size_t size;
    struct fc_ctx *ctx;
    bool host;
};

static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_alloc *g_allocs; /* sorted by base; under g_mem_lock */
static size_t g_nallocs, g_cap;
static size_t g_used[FC_MAX_DEVICES];

void fc_mem_atfork_child(void)
{
    pthread_mutex_init(&g_mem_lock, NULL);
}

/* Index of the last allocation with base <= p, or -1. Caller holds g_mem_lock. */
static long find_le(uintptr_t p)
{
    long lo = 0, hi = (long)g_nallocs - 1, best = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (g_allocs[mid].base <= p) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return best;
}

static bool track(uintptr_t base, size_t size, struct fc_ctx *ctx, bool host)
{
    pthread_mutex_lock(&g_mem_lock);
    bool ok = true;
    if (g_nallocs == g_cap) {
        size_t n = g_cap ? 2 * g_cap : 64;
        struct fc_alloc *a = realloc(g_allocs, n * sizeof *a);
        if (a) {
            g_allocs = a;
            g_cap = n;
        } else {
            ok = false;
        }
    }
    if (ok) {
        size_t at = (size_t)(find_le(base) + 1);
        memmove(&g_allocs[at + 1], &g_allocs[at], (g_nallocs - at) * sizeof *g_allocs);
        g_allocs[at] = (struct fc_alloc){base, size, ctx, host};
        g_nallocs++;
        if (!host) g_used[ctx->device] += size;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return ok;
}

/* Removes the allocation that starts at base; false when there is none of that kind. */
static bool untrack(uintptr_t base, bool host, struct fc_alloc *out)
{
    pthread_mutex_lock(&g_mem_lock);
    long i = find_le(base);
    bool ok = i >= 0 && g_allocs[i].base == base && g_allocs[i].host == host;
    if (ok) {
        *out = g_allocs[i];
        if (!host) g_used[out->ctx->device] -= out->size;
        memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - (size_t)i - 1) * sizeof *g_allocs);
        g_nallocs--;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return ok;
}

/* [p, p+n) lies inside one tracked allocation (device or pinned host). */
static CUresult check_range(uintptr_t p, size_t n, const char *what, const char *call)
{
    pthread_mutex_lock(&g_mem_lock);
    long i = find_le(p);
    bool ok = i >= 0 && p - g_allocs[i].base <= g_allocs[i].size &&
              n <= g_allocs[i].size - (p - g_allocs[i].base);
    pthread_mutex_unlock(&g_mem_lock);
    if (ok) return CUDA_SUCCESS;
    fc_complain(call, "%s range [0x%llx, +%zu) is not inside an allocation of the fake driver",
                what, (unsigned long long)p, n);
    return CUDA_ERROR_INVALID_VALUE;
}

void fc_mem_release_ctx(struct fc_ctx *ctx)
{
    pthread_mutex_lock(&g_mem_lock);
    size_t j = 0;
    for (size_t i = 0; i < g_nallocs; i++) {
        if (g_allocs[i].ctx == ctx) {
            if (!g_allocs[i].host) g_used[ctx->device] -= g_allocs[i].size;
            free((void *)g_allocs[i].base);
        } else {
            g_allocs[j++] = g_allocs[i];
        }
    }
    g_nallocs = j;
    pthread_mutex_unlock(&g_mem_lock);
}

static CUresult mem_alloc(void **out, size_t size, bool host, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!out || size == 0) {
        fc_complain(call, "%s", !out ? "NULL result pointer" : "size 0");
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_current(call, &ctx));
    if (!host) FC_TRY(fc_capture_check_unsafe(call));
    pthread_mutex_lock(&g_mem_lock);
    bool fits = host ||
                (size <= fc_cfg.mem_bytes && g_used[ctx->device] <= fc_cfg.mem_bytes - size);
    pthread_mutex_unlock(&g_mem_lock);
    void *p = NULL;
    size_t rounded = (size + FC_MEM_ALIGN - 1) / FC_MEM_ALIGN * FC_MEM_ALIGN;
    if (!fits || rounded < size || posix_memalign(&p, FC_MEM_ALIGN, rounded) != 0) {
        fc_complain(call, "out of memory allocating %zu bytes on device %d", size, ctx->device);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!track((uintptr_t)p, size, ctx, host)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = p;
    return CUDA_SUCCESS;
}

FC_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    void *p = NULL;
    CUresult r = mem_alloc(dptr ? &p : NULL, bytesize, false, "cuMemAlloc_v2");
    if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
    return r;
}

FC_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return mem_alloc(pp, bytesize, true, "cuMemAllocHost_v2");
}

static CUresult mem_free(uintptr_t p, bool host, const char *call)
{
    FC_TRY(fc_enter(call));
    if (p == 0) return CUDA_SUCCESS;
    if (!host) FC_TRY(fc_capture_check_unsafe(call));
    struct fc_alloc a;
    pthread_mutex_lock(&g_mem_lock);
    long i = find_le(p);
    bool known = i >= 0 && g_allocs[i].base == p && g_allocs[i].host == host;
    struct fc_ctx *ctx = known ? g_allocs[i].ctx : NULL;
    pthread_mutex_unlock(&g_mem_lock);
    if (!known) {
        fc_complain(call, "0x%llx is not a live allocation of %s (bad or double free)",
                    (unsigned long long)p, host ? "cuMemAllocHost" : "cuMemAlloc");
        return CUDA_ERROR_INVALID_VALUE;
    }
    fc_ctx_drain(ctx); /* the implicit synchronisation of a free */
    if (!untrack(p, host, &a)) {
        fc_complain(call, "0x%llx was freed concurrently", (unsigned long long)p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    free((void *)a.base);
    return CUDA_SUCCESS;
}

FC_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return mem_free((uintptr_t)dptr, false, "cuMemFree_v2");
}

FC_API CUresult cuMemFreeHost(void *p)
{
    return mem_free((uintptr_t)p, true, "cuMemFreeHost");
}

FC_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    FC_TRY(fc_enter("cuMemGetInfo_v2"));
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_current("cuMemGetInfo_v2", &ctx));
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_lock);
    *total = fc_cfg.mem_bytes;
    *free_bytes = fc_cfg.mem_bytes - g_used[ctx->device];
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_SUCCESS;
}

/* ------------------------------ copies and memsets ------------------------------ */

enum how { SYNC, SYNC_PTDS, ASYNC, ASYNC_PTSZ };

/* Runs w synchronously (legacy or per-thread stream) or enqueues it on h. */
static CUresult issue(const struct fc_work *w, CUstream h, enum how how, const char *call)
{
    struct fc_stream *s;
    bool ptds = how == SYNC_PTDS || how == ASYNC_PTSZ;
    FC_TRY(fc_stream_resolve(how == SYNC || how == SYNC_PTDS ? NULL : h, ptds, call, &s));
    if (how == SYNC || how == SYNC_PTDS) return fc_run_sync(s, w, call);
    return fc_submit(s, w, call);
}

/* dev_dst/dev_src: which side must be fake device memory. */
static CUresult copy(uintptr_t dst, uintptr_t src, size_t n, bool dev_dst, bool dev_src, CUstream h,
                     enum how how, const char *call)
{
    FC_TRY(fc_enter(call));
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || !src) {
        fc_complain(call, "NULL pointer");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (dev_dst) FC_TRY(check_range(dst, n, "destination", call));
    if (dev_src) FC_TRY(check_range(src, n, "source", call));
    struct fc_work w = {.kind = FC_WORK_COPY, .u.copy = {(void *)dst, (const void *)src, n}};
    return issue(&w, h, how, call);
}

static CUresult set(uintptr_t dst, uint32_t value, size_t n, size_t width, CUstream h, enum how how,
                    const char *call)
{
    FC_TRY(fc_enter(call));
    if (n == 0) return CUDA_SUCCESS;
    if (dst % width) {
        fc_complain(call, "destination 0x%llx is not %zu-byte aligned", (unsigned long long)dst,
                    width);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (n > SIZE_MAX / width) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_range(dst, n * width, "destination", call));
    struct fc_work w = {.kind = width == 1 ? FC_WORK_SET8 : FC_WORK_SET32,
                        .u.set = {(void *)dst, value, n}};
    return issue(&w, h, how, call);
}

#define P(x) ((uintptr_t)(x))

FC_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(P(dst), P(src), n, true, false, NULL, SYNC, "cuMemcpyHtoD_v2");
}
FC_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(P(dst), P(src), n, true, false, NULL, SYNC_PTDS, "cuMemcpyHtoD_v2_ptds");
}
FC_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy(P(dst), P(src), n, false, true, NULL, SYNC, "cuMemcpyDtoH_v2");
}
FC_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    return copy(P(dst), P(src), n, false, true, NULL, SYNC_PTDS, "cuMemcpyDtoH_v2_ptds");
}
FC_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(P(dst), P(src), n, true, true, NULL, SYNC, "cuMemcpyDtoD_v2");
}
FC_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(P(dst), P(src), n, true, true, NULL, SYNC_PTDS, "cuMemcpyDtoD_v2_ptds");
}

FC_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, true, false, h, ASYNC, "cuMemcpyHtoDAsync_v2");
}
FC_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, true, false, h, ASYNC_PTSZ, "cuMemcpyHtoDAsync_v2_ptsz");
}
FC_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, false, true, h, ASYNC, "cuMemcpyDtoHAsync_v2");
}
FC_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, false, true, h, ASYNC_PTSZ, "cuMemcpyDtoHAsync_v2_ptsz");
}
FC_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, true, true, h, ASYNC, "cuMemcpyDtoDAsync_v2");
}
FC_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
    return copy(P(dst), P(src), n, true, true, h, ASYNC_PTSZ, "cuMemcpyDtoDAsync_v2_ptsz");
}

FC_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{
    return set(P(dst), uc, n, 1, NULL, SYNC, "cuMemsetD8_v2");
}
FC_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n)
{
    return set(P(dst), uc, n, 1, NULL, SYNC_PTDS, "cuMemsetD8_v2_ptds");
}
FC_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)
{
    return set(P(dst), ui, n, 4, NULL, SYNC, "cuMemsetD32_v2");
}
FC_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int ui, size_t n)
{
    return set(P(dst), ui, n, 4, NULL, SYNC_PTDS, "cuMemsetD32_v2_ptds");
}
FC_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream h)
{
    return set(P(dst), uc, n, 1, h, ASYNC, "cuMemsetD8Async");
}
FC_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream h)
{
    return set(P(dst), uc, n, 1, h, ASYNC_PTSZ, "cuMemsetD8Async_ptsz");
}
FC_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream h)
{
    return set(P(dst), ui, n, 4, h, ASYNC, "cuMemsetD32Async");
}
FC_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream h)
{
    return set(P(dst), ui, n, 4, h, ASYNC_PTSZ, "cuMemsetD32Async_ptsz");
}
