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
#include <stdint.h>
#include <ucontext.h>

#include "base/atomic.h"
#include "base/log.h"

/*
 * libunwind's API without its header (libunwind-dev is not a build
 * dependency): the x86-64 names behind unw_getcontext, unw_init_local, unw_step
 * and unw_get_reg, a cursor of UNW_TDEP_CURSOR_LEN (127) words, ucontext_t as
 * the context, UNW_REG_IP = 16, and unw_backtrace. unw_backtrace serves only
 * the hot path (ncclguard_unwind_fast): its fast path keeps a per-thread cache
 * in libunwind's __thread variables, and a library loaded with dlopen gets its
 * TLS allocated (malloc) on a thread's first access, which must not happen
 * inside a signal handler. unw_step with the default global cache touches no
 * TLS, so the signal handler's ncclguard_unwind_here uses it.
 */
#if defined(__x86_64__)
#define UNW_PREFIX "_ULx86_64_"
#define UNW_GETCONTEXT "_Ux86_64_getcontext"
#define UNW_REG_IP 16
#else
#define UNW_REG_IP 0 /* elsewhere resolve_libunwind fails: backtrace() is used */
#endif
typedef struct {
    uint64_t opaque[127];
} unw_cursor;
typedef int (*unw_getcontext_fn)(ucontext_t *);
typedef int (*unw_init_local_fn)(unw_cursor *, ucontext_t *);
typedef int (*unw_step_fn)(unw_cursor *);
typedef int (*unw_get_reg_fn)(unw_cursor *, int, uint64_t *);

enum { NONE, LIBUNWIND, BACKTRACE };
static ng_atomic(int) method;
/* published by the release store of method */
static unw_getcontext_fn unw_getcontext;
static unw_init_local_fn unw_init_local;
static unw_step_fn unw_step;
static unw_get_reg_fn unw_get_reg;
static int (*unw_backtrace)(void **, int);

static int unwind_libunwind(void **pcs, int max)
{
    ucontext_t uc;
    unw_cursor cursor;
    uint64_t ip;
    int n = 0;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0) return 0;
    while (n < max && unw_get_reg(&cursor, UNW_REG_IP, &ip) == 0 && ip) {
        pcs[n++] = (void *)(uintptr_t)ip;
        if (unw_step(&cursor) <= 0) break;
    }
    return n;
}

/* libunwind's functions, all or none. */
static int resolve_libunwind(void)
{
#ifdef UNW_PREFIX
    void *lib = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return -1;
    unw_getcontext = (unw_getcontext_fn)dlsym(lib, UNW_GETCONTEXT);
    unw_init_local = (unw_init_local_fn)dlsym(lib, UNW_PREFIX "init_local");
    unw_step = (unw_step_fn)dlsym(lib, UNW_PREFIX "step");
    unw_get_reg = (unw_get_reg_fn)dlsym(lib, UNW_PREFIX "get_reg");
    unw_backtrace = (int (*)(void **, int))dlsym(lib, "unw_backtrace");
    return unw_getcontext && unw_init_local && unw_step && unw_get_reg && unw_backtrace ? 0 : -1;
#else
    return -1;
#endif
}

const char *ncclguard_unwind_open(void)
{
    if (ng_atomic_load_acquire(&method) != NONE) return ncclguard_unwind_method();
    void *warm[4];
    if (resolve_libunwind() == 0) {
        unwind_libunwind(warm, 4); /* first use parses and caches outside any handler */
        ng_atomic_store_release(&method, LIBUNWIND);
    } else {
        NG_DEBUG("libunwind.so.8 not usable: stacks come from glibc's backtrace()");
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
    int n = m == LIBUNWIND ? unwind_libunwind(buf, want) : backtrace(buf, want);
    int out = 0;
    for (int i = 1; i < n && out < max; i++) pcs[out++] = buf[i]; /* skip our own frame */
    return out;
}

int ncclguard_unwind_fast(void **pcs, int max)
{
    if (ng_atomic_load_acquire(&method) != LIBUNWIND || max <= 0) return 0;
    return unw_backtrace(pcs, max);
}
