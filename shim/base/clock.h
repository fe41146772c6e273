/* clock.h: the shim's one way to read a clock, in ns. Async-signal-safe (vDSO). */
#ifndef NCCLGUARD_CLOCK_H
#define NCCLGUARD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t ng_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
