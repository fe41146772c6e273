/*
 * atomic.h: memory shared between threads, with the memory order at the call site
 * (after mimalloc's atomic.h).
 *
 * A field or variable that threads share without a lock is declared ng_atomic(T)
 * and touched only through these helpers, so that a reader sees at each access
 * what it promises: _relaxed (atomic, no ordering), _acquire (later reads see
 * what the matching _release store published), _acq_rel (both). A plain access
 * to an ng_atomic field would still be atomic, but sequentially consistent and
 * invisible in review: don't.
 *
 * NG_TLS is the shim's thread-local storage: initial-exec, because the library
 * is preloaded (its TLS is static), so the hot path needs no __tls_get_addr call.
 *
 * Threads: any, including signal handlers (lock-free on every target we build for).
 */
#ifndef NCCLGUARD_ATOMIC_H
#define NCCLGUARD_ATOMIC_H

#include <stdatomic.h>

#define ng_atomic(T) _Atomic(T)

#define ng_atomic_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define ng_atomic_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define ng_atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define ng_atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)

/* Read-modify-write; each returns the value before. */
#define ng_atomic_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define ng_atomic_sub_acq_rel(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define ng_atomic_exchange_relaxed(p, v) atomic_exchange_explicit((p), (v), memory_order_relaxed)
#define ng_atomic_exchange_acquire(p, v) atomic_exchange_explicit((p), (v), memory_order_acquire)
#define ng_atomic_exchange_acq_rel(p, v) atomic_exchange_explicit((p), (v), memory_order_acq_rel)

/* Compare-and-swap: 1 when *p held *expected and now holds desired; else 0 and
 * *expected holds what *p held. The weak forms may fail spuriously (use in loops). */
#define ng_atomic_cas_acq_rel(p, expected, desired)                                           \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_acq_rel, \
                                            memory_order_acquire)
#define ng_atomic_cas_weak_release(p, expected, desired)                                    \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_release, \
                                          memory_order_relaxed)
#define ng_atomic_cas_weak_acquire(p, expected, desired)                                    \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_acquire, \
                                          memory_order_acquire)

/* Sequentially consistent: for a Dekker-style handshake (track/comm.c), where
 * each side stores its own flag and then loads the other's. */
#define ng_atomic_add_seq_cst(p, v) atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define ng_atomic_store_seq_cst(p, v) atomic_store_explicit((p), (v), memory_order_seq_cst)
#define ng_atomic_load_seq_cst(p) atomic_load_explicit((p), memory_order_seq_cst)
#define ng_atomic_exchange_seq_cst(p, v) atomic_exchange_explicit((p), (v), memory_order_seq_cst)

#define ng_atomic_fence_acquire() atomic_thread_fence(memory_order_acquire)
#define ng_atomic_fence_release() atomic_thread_fence(memory_order_release)

#define NG_TLS __thread __attribute__((tls_model("initial-exec")))

/* For a variable shared across the files of the library: without it, -fPIC code
 * reaches an extern variable through the GOT, one more load on the hot path. */
#define NG_HIDDEN __attribute__((visibility("hidden")))

#endif
