/*
 * hash.h: the shim's one hash, 64-bit FNV-1a. It makes communicator ids (the
 * same on every rank: a hash of the ncclUniqueId), the policy's record of the
 * values it set, and the slots of small hash tables; a word-wise step of the
 * same kind keys the enqueue stacks. Not for secrets.
 *
 * Threads: any, including signal handlers (pure).
 */
#ifndef NCCLGUARD_HASH_H
#define NCCLGUARD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define NG_HASH_SEED 0xcbf29ce484222325ULL

/* Continues hash h over len bytes of data (start with NG_HASH_SEED). */
static inline uint64_t ng_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Continues hash h over one 64-bit word (a multiply-xorshift step: a stack of
 * return addresses hashes word by word, 8 times fewer steps than bytewise). */
static inline uint64_t ng_hash_word(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

/* The hash of a NUL-terminated string. */
static inline uint64_t ng_hash_str(const char *s)
{
    uint64_t h = NG_HASH_SEED;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

#endif
