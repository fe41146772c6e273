/*
 * loader.h: the process's dlclose, wrapped, so that the enqueue stacks' cache
 * of call sites learns of every unload without asking the loader at each
 * capture (track/stacks.h, shim/track/README.md: "Enqueue stacks").
 *
 * Owns: the exported dlclose. It calls the real one (libc's, found with
 * RTLD_NEXT), then tells the stacks. dlclose is the only wrapped loader call:
 * dlopen looks at its caller (the RUNPATH searched, the namespace), which a
 * wrapper would change.
 *
 * Threads: dlclose on any thread, destructors at exit included;
 * ncclguard_loader_watch in the constructor.
 */
#ifndef NCCLGUARD_INTERCEPT_LOADER_H
#define NCCLGUARD_INTERCEPT_LOADER_H

/* Tells the stacks whether this library's dlclose is the one the process's
 * calls reach (it is preloaded, and no other preloaded library defines one
 * first): only then may their cache trust the count of unloads it keeps. */
void ncclguard_loader_watch(void);

#endif
