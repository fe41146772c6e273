/*
 * python.c: see python.h.
 *
 * Py_GetVersion is exported by every CPython (the executable or libpython)
 * and returns a static string such as "3.11.2 (main, ...) [GCC 12.2.0]"; it
 * takes no lock and needs no GIL. Only the version number is kept.
 */
#include "evidence/python.h"

#include <dlfcn.h>
#include <string.h>

#include "base/atomic.h"

static char version[32];
static ng_atomic(int) known;

void ncclguard_python_init(void)
{
    const char *(*get)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *v = get ? get() : NULL;
    if (!v) return;
    size_t n = strcspn(v, " ");
    if (n >= sizeof version) n = sizeof version - 1;
    memcpy(version, v, n);
    version[n] = '\0';
    ng_atomic_store_release(&known, 1);
}

const char *ncclguard_python_version(void)
{
    return ng_atomic_load_acquire(&known) ? version : NULL;
}
