/*
 * dump/mem.h: the memory of one struct dr_dump (dump/dump.h): strings and arrays
 * that are freed together. Internal to the dump reader.
 */
#ifndef NCCLGUARD_CLI_DUMP_MEM_H
#define NCCLGUARD_CLI_DUMP_MEM_H

#include <stddef.h>
#include <stdint.h>

struct dr_mem {
    struct mem_block *blocks; /* strings and small arrays */
    void **vecs;              /* growable arrays (ops, comms, ...) */
    size_t nvecs, capvecs;
};

/* A copy of s[0..len) with a NUL, owned by m; NULL when out of memory. */
char *dr_mem_strdup(struct dr_mem *m, const char *s, size_t len);
/* A growable array owned by m: *vec grows to hold n + 1 elements of size el
 * (cap counts them). Returns the new element (zeroed), or NULL. */
void *dr_mem_push(struct dr_mem *m, void **vec, size_t *n, size_t *cap, size_t el);
void dr_mem_free(struct dr_mem *m);

#endif
