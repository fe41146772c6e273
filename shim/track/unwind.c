/*
 * unwind.c: see unwind.h.
 *
 * libunwind is preferred over backtrace() because its local unwinder is
 * documented signal-safe and caches what it parsed; backtrace() goes through
 * libgcc's _Unwind_Backtrace, which is safe in practice once libgcc_s is
 * loaded, and is the fallback where libunwind8 is not installed.
 */
#include "track/unwind.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stddef.h>

#include "base/atomic.h"
#include "base/log.h"

typedef int (*unw_backtrace_fn)(void **buffer, int size);

enum { NONE, LIBUNWIND, BACKTRACE };
static ng_atomic(int) method;
static unw_backtrace_fn unw_bt; /* published by the release store of method */

const char *ncclguard_unwind_open(void)
{
    if (ng_atomic_load_acquire(&method) != NONE) return ncclguard_unwind_method();
    void *lib = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    unw_bt = lib ? (unw_backtrace_fn)dlsym(lib, "unw_backtrace") : NULL;
    if (unw_bt) {
        void *warm[4];
        unw_bt(warm, 4); /* first use parses and caches outside any handler */
        ng_atomic_store_release(&method, LIBUNWIND);
    } else {
        NG_DEBUG("libunwind.so.8 not usable (%s): stacks come from glibc's backtrace()",
                 lib ? "no unw_backtrace" : dlerror());
        void *warm[4];
        backtrace(warm, 4); /* loads libgcc_s now, not in a signal handler */
        ng_atomic_store_release(&method, BACKTRACE);
    }
    return ncclguard_unwind_method();
}

const char *ncclguard_unwind_method(void)
{
    switch (ng_atomic_load_acquire(&method)) {
    case LIBUNWIND: return "libunwind";
    case BACKTRACE: return "backtrace";
    default: return "none";
    }
}

int ncclguard_unwind_here(void **pcs, int max)
{
    void *buf[128];
    int m = ng_atomic_load_acquire(&method);
    if (m == NONE || max <= 0) return 0;
    int want = max + 1 < 128 ? max + 1 : 128;
    int n = m == LIBUNWIND ? unw_bt(buf, want) : backtrace(buf, want);
    int out = 0;
    for (int i = 1; i < n && out < max; i++) pcs[out++] = buf[i]; /* skip our own frame */
    return out;
}
