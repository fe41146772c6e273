/*
 * fakecuda.h: test-only API of the fake libcuda.so.1 of the CPU harness.
 *
 * These functions exist only in the fake driver (tests/fakes), never in the real one. Test
 * programs and the fake NCCL call them directly; code that must also run against the real
 * driver should resolve them with dlsym(RTLD_DEFAULT, "fakecuda_...") and cope with NULL.
 *
 * Stream arguments follow the driver's rules: NULL and CU_STREAM_LEGACY mean the legacy
 * default stream of the current context, CU_STREAM_PER_THREAD its per-thread default stream.
 * The enqueue functions obey stream capture like any other launch: into a capturing stream
 * they are recorded into the graph and run at each cuGraphLaunch instead.
 * Semantics and the FAKECUDA_* variables are documented in docs/harness.md.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues a host "kernel" that takes duration_ns nanoseconds (at least) on stream s. */
CUresult fakecuda_test_kernel(CUstream s, uint64_t duration_ns);

/*
 * Enqueues a host "kernel" that spins, sleeping in steps of about 100 us, until
 * *release != 0. The flag is read with an atomic load; set it with an atomic store
 * (e.g. __atomic_store_n(&flag, 1, __ATOMIC_RELEASE)). Only the stream s is held up.
 */
CUresult fakecuda_test_spin(CUstream s, const volatile int *release);

/* Number of stream worker threads alive in this process now. */
int fakecuda_live_threads(void);

/* Number of "fakecuda: <call>: <problem>" misuse lines printed so far by this process. */
unsigned long fakecuda_misuse_count(void);

/*
 * Driver calls made by the calling thread so far: every entry point of the fake counts
 * (those of this header too), and, separately, the records of events created with timing
 * (without CU_EVENT_DISABLE_TIMING) outside capture. Per thread, so that counting costs no
 * shared cache line; the benchmarks read them around a loop.
 */
unsigned long long fakecuda_thread_calls(void);
unsigned long long fakecuda_thread_timed_records(void);

#ifdef __cplusplus
}
#endif

#endif
