/*
 * mem.h: the memory of the shim's own tables, counted where each is allocated
 * (the flight recorder, the group table, the stack table and its call sites,
 * the watchdog's lanes and due heap, the registry and its peer counters, the
 * host arrays of the marker pools), for the metrics. Mapped tables count whole,
 * though their pages are touched only as they are used; the fixed tables in
 * the library's own data are not counted.
 *
 * Threads: any (one relaxed atomic).
 */
#ifndef NCCLGUARD_MEM_H
#define NCCLGUARD_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"

extern NG_HIDDEN ng_atomic(uint64_t) ncclguard_mem_total;

/* A table of `bytes` was allocated. */
static inline void ncclguard_mem_add(size_t bytes)
{
    ng_atomic_add_relaxed(&ncclguard_mem_total, (uint64_t)bytes);
}

/* The bytes of the shim's tables so far. */
static inline uint64_t ncclguard_mem_bytes(void)
{
    return ng_atomic_load_relaxed(&ncclguard_mem_total);
}

#endif
