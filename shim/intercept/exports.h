/*
 * exports.h: the entry points of the loaded NCCL that the shim does not wrap.
 *
 * Owns: the walk of the loaded libnccl.so.2's dynamic symbol table (in memory,
 * through its link map: no file is opened) for defined functions named
 * nccl<Upper>..., compared with nccl_api.def. A newer NCCL than the headers the
 * shim was built with adds entry points (2.29's one-sided ncclPutSignal, ...);
 * their calls reach NCCL unseen, and a user must be told so once.
 *
 * Threads: ncclguard_exports_report under the start lock (start.c), once.
 */
#ifndef NCCLGUARD_EXPORTS_H
#define NCCLGUARD_EXPORTS_H

#include <stddef.h>

/* Writes the unwrapped names, comma-separated, into buf (NUL-terminated, cut
 * at len with "..."); returns how many there are, or -1 when the library that
 * holds the real ncclGetVersion cannot be read. */
int ncclguard_exports_unwrapped(char *buf, size_t len);

/* Logs them, when there are any: one line, or numbered lines that each fit the
 * log's line. */
void ncclguard_exports_report(void);

#endif
