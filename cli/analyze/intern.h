/*
 * analyze/intern.h: small tables of the analyzer: byte strings interned to ids (the same
 * string, the same id: thousands of ranks share a host name, a stack, a
 * signature), and a map from 64-bit keys to indexes.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_INTERN_H
#define NCCLGUARD_CLI_ANALYZE_INTERN_H

#include <stddef.h>
#include <stdint.h>

struct an_intern {
    char **items; /* items[id - 1]: the bytes, NUL-terminated, 8-byte aligned */
    uint32_t *lens;
    uint32_t n, cap;
    uint32_t *slots; /* open addressing: id, 0 empty */
    size_t nslots;
    char *block; /* the current block of storage */
    size_t block_used, block_size;
    char **blocks;
    size_t nblocks;
};

/* The id of s[0..len) (1, 2, ...); 0 only when out of memory. */
uint32_t an_intern(struct an_intern *t, const void *s, size_t len);
/* The same for a C string; NULL is id 0. */
uint32_t an_intern_str(struct an_intern *t, const char *s);
/* The bytes of id (NUL-terminated), NULL for 0. */
const char *an_intern_get(const struct an_intern *t, uint32_t id);
void an_intern_free(struct an_intern *t);

struct an_u64map {
    uint64_t *keys;
    uint32_t *vals; /* UINT32_MAX: empty */
    size_t n, cap;
};

/* The value of key, or UINT32_MAX. */
uint32_t an_u64map_get(const struct an_u64map *m, uint64_t key);
/* Sets key to val; -1 when out of memory. */
int an_u64map_put(struct an_u64map *m, uint64_t key, uint32_t val);
void an_u64map_free(struct an_u64map *m);

#endif
