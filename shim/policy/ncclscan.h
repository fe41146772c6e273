/*
 * ncclscan.h: which NCCL_* variables a given libnccl.so.2 reads.
 *
 * Owns: the list of known names, built by scanning the read-only data of the
 * library's ELF file. NCCL's NCCL_PARAM macro builds each variable's name as one
 * string literal ("NCCL_" name), and the others are literals passed to
 * ncclGetEnv, so every name NCCL reads is a NUL-terminated string of
 * NCCL_[A-Z0-9_]+ in .rodata. For 2.28.9 that gives 187 names; `strings -a`
 * counts 219 because it also sees the enumerator names in .debug_str (NCCL_INIT,
 * NCCL_LOG_WARN, ...), which are not variables. Also: finding the libnccl.so.2
 * mapped into this process, and asking it for its version.
 *
 * Threads: any thread, but not on the hot path (file I/O); no allocation.
 */
#ifndef NCCLGUARD_NCCLSCAN_H
#define NCCLGUARD_NCCLSCAN_H

#include <stddef.h>
#include <stdint.h>

#define NG_KNOWN_MAX 2048
#define NG_KNOWN_POOL 65536
#define NG_SCAN_MAX_BYTES (256u << 20) /* never read more than this of one file */

struct ng_known {
    size_t n;                   /* distinct names, sorted */
    uint32_t off[NG_KNOWN_MAX]; /* offsets of the names in pool */
    char pool[NG_KNOWN_POOL];
    size_t used;
    size_t scanned;     /* bytes of the file scanned */
    int whole_segments; /* 1: no .rodata section header; read-only segments scanned */
};

/* Fills k with the NCCL_* names of the ELF file at path; 0, or -1 with why. */
int ncclguard_known_scan(const char *path, struct ng_known *k, char *why, size_t whylen);

/* Adds one name (tests; the scanner). 0, or -1 when k is full. */
int ncclguard_known_add(struct ng_known *k, const char *name, size_t len);

int ncclguard_known_has(const struct ng_known *k, const char *name);
const char *ncclguard_known_at(const struct ng_known *k, size_t i);

/* Path of the libnccl.so* mapped into this process (dl_iterate_phdr, then the
 * object that defines pncclGetVersion); 0, or -1 when none is mapped. */
int ncclguard_mapped_nccl(char *path, size_t len);

/* ncclGetVersion of the library behind handle (a dlopen handle): 22809 for
 * 2.28.9, or -1. Writes "2.28.9" (or "unknown") into text. */
int ncclguard_nccl_version(void *handle, char *text, size_t len);

#endif
