/*
 * loader.c: see loader.h.
 */
#include "intercept/loader.h"

#include <dlfcn.h>
#include <errno.h>

#include "base/atomic.h"
#include "track/stacks.h"

typedef int (*dlclose_fn)(void *);
static ng_atomic(dlclose_fn) real_dlclose;

__attribute__((visibility("default"))) int dlclose(void *handle)
{
    dlclose_fn f = ng_atomic_load_acquire(&real_dlclose);
    if (!f) {
        f = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
        if (!f) { /* no libc behind this library: cannot happen with glibc */
            errno = ENOSYS;
            return -1;
        }
        ng_atomic_store_release(&real_dlclose, f);
    }
    int r = f(handle);
    ncclguard_stacks_unloaded(); /* after: a site made before the unload never holds again */
    return r;
}

/* This library's own dlclose: the name dlclose is the process's. */
static __typeof(dlclose) own_dlclose __attribute__((alias("dlclose"), nothrow));

void ncclguard_loader_watch(void)
{
    if (dlsym(RTLD_DEFAULT, "dlclose") == (void *)own_dlclose) ncclguard_stacks_watch_unloads();
}
