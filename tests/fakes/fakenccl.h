/*
 * fakenccl.h: test-only API of the fake libnccl.so.2 of the CPU harness.
 *
 * These functions exist only in the fake (tests/fakes), never in the real
 * NCCL. Code that must also run against the real library should resolve
 * them with dlsym(RTLD_DEFAULT, "fakenccl_...") and cope with NULL.
 * The fake's behaviour and its FAKENCCL_* variables are documented in
 * docs/harness.md.
 */
#ifndef FAKENCCL_H
#define FAKENCCL_H

#include <nccl.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The POSIX shared-memory name ("/fakenccl-<32 hex digits>") of the
 * communicator made from id, so that a test can check that nothing is left
 * in /dev/shm once every rank joined (or left).
 */
void fakenccl_shm_name(const ncclUniqueId *id, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
