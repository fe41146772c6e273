/*
 * real.c: see real.h. In the style of compiler-rt's GetFuncAddr: try RTLD_NEXT,
 * then the libnccl.so.2 already loaded, and refuse an address that is our own
 * wrapper. Done once under pthread_once, never lazily per call.
 */
#include "intercept/real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/log.h"

struct ng_real ncclguard_real_table;
ng_atomic(int) ncclguard_real_resolved;
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

/* Finds `name` in the real NCCL. RTLD_NEXT finds a libnccl.so.2 in the global
 * scope; a libnccl.so.2 loaded RTLD_LOCAL (a dlopen'd framework library's
 * dependency) is reached through its own handle. `self` is our own wrapper: an
 * answer equal to it would make the wrapper call itself. */
static void *find_real(const char *name, void *self, void *nccl)
{
    char pname[64] = "p";
    void *f = dlsym(RTLD_NEXT, name);
    if (f && f != self) return f;
    for (int i = 0; name[i] && i < 62; i++) pname[i + 1] = name[i];
    f = dlsym(RTLD_NEXT, pname);
    if (f && f != self) return f;
    if (nccl) {
        f = dlsym(nccl, pname);
        if (!f || f == self) f = dlsym(nccl, name);
        if (f && f != self) return f;
    }
    return NULL;
}

/* nccl##name is the wrapper of intercept/wrappers.c (declared by nccl.h), whose
 * address find_real refuses. ncclResetDebugInit is deprecated in nccl.h; taking
 * its address is not a use. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Set when NCCL's profiler plugin loaded the library: NCCL may be static or behind a
 * private handle, so that nothing is behind the wrappers and nothing calls them. */
static ng_atomic(int) as_plugin;

static void resolve_all(void)
{
    int count = 0, missing = 0;
    void *nccl = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
#define NCCL_API(ret, fail, name, params, args, hook)                                             \
    *(void **)&ncclguard_real_table.name = find_real("nccl" #name, (void *)(uintptr_t)nccl##name, \
                                                     nccl);                                       \
    count++;                                                                                      \
    missing += !ncclguard_real_table.name;
#define NCCL_API_VOID(name, params, args) NCCL_API(void, , name, params, args, )
#include "intercept/nccl_api.def"
#undef NCCL_API
#undef NCCL_API_VOID
    if (nccl) dlclose(nccl);
    if (missing == count && !ng_atomic_load_relaxed(&as_plugin))
        NG_WARN("no NCCL library found behind the shim: every NCCL call will fail with "
                "ncclInvalidUsage; check that libnccl.so.2 is loaded");
    ng_atomic_store_release(&ncclguard_real_resolved, 1);
}
#pragma GCC diagnostic pop

void ncclguard_real_as_plugin(void)
{
    ng_atomic_store_relaxed(&as_plugin, 1);
}

void ncclguard_real_resolve(void)
{
    pthread_once(&resolve_once, resolve_all);
}
