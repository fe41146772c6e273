/*
 * analyze/intern.c: see analyze/intern.h.
 */
#include "analyze/intern.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static char *store(struct an_intern *t, const void *s, size_t len)
{
    if (!t->block || t->block_size - t->block_used < len + 1) {
        size_t size = len + 1 > 65536 ? len + 1 : 65536;
        char **nb = realloc(t->blocks, (t->nblocks + 1) * sizeof *nb);
        if (!nb) return NULL;
        t->blocks = nb;
        if (!(t->block = malloc(size))) return NULL;
        t->blocks[t->nblocks++] = t->block;
        t->block_used = 0;
        t->block_size = size;
    }
    char *p = t->block + t->block_used;
    memcpy(p, s, len);
    p[len] = '\0';
    t->block_used += (len + 8) & ~(size_t)7; /* items stay 8-byte aligned (structs) */
    if (t->block_used > t->block_size) t->block_used = t->block_size;
    return p;
}

static int rehash(struct an_intern *t)
{
    size_t n = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t id = 1; id <= t->n; id++) {
        size_t i = hash_bytes(t->items[id - 1], t->lens[id - 1]) & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 0;
}

uint32_t an_intern(struct an_intern *t, const void *s, size_t len)
{
    if ((t->n + 1) * 2 > t->nslots && rehash(t)) return 0;
    size_t i = hash_bytes(s, len) & (t->nslots - 1);
    for (uint32_t id; (id = t->slots[i]); i = (i + 1) & (t->nslots - 1))
        if (t->lens[id - 1] == len && !memcmp(t->items[id - 1], s, len)) return id;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 256;
        char **items = realloc(t->items, cap * sizeof *items);
        if (!items) return 0;
        t->items = items;
        uint32_t *lens = realloc(t->lens, cap * sizeof *lens);
        if (!lens) return 0;
        t->lens = lens;
        t->cap = cap;
    }
    char *p = store(t, s, len);
    if (!p) return 0;
    t->items[t->n] = p;
    t->lens[t->n] = (uint32_t)len;
    t->slots[i] = ++t->n;
    return t->n;
}

uint32_t an_intern_str(struct an_intern *t, const char *s)
{
    return s ? an_intern(t, s, strlen(s)) : 0;
}

const char *an_intern_get(const struct an_intern *t, uint32_t id)
{
    return id && id <= t->n ? t->items[id - 1] : NULL;
}

void an_intern_free(struct an_intern *t)
{
    for (size_t i = 0; i < t->nblocks; i++) free(t->blocks[i]);
    free(t->blocks);
    free(t->items);
    free(t->lens);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static size_t slot_of(const struct an_u64map *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 32)) & (m->cap - 1);
}

uint32_t an_u64map_get(const struct an_u64map *m, uint64_t key)
{
    if (!m->cap) return UINT32_MAX;
    for (size_t i = slot_of(m, key); m->vals[i] != UINT32_MAX; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == key) return m->vals[i];
    return UINT32_MAX;
}

int an_u64map_put(struct an_u64map *m, uint64_t key, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct an_u64map nm = {malloc(cap * sizeof *nm.keys), malloc(cap * sizeof *nm.vals), 0,
                               cap};
        if (!nm.keys || !nm.vals) {
            free(nm.keys);
            free(nm.vals);
            return -1;
        }
        memset(nm.vals, 0xff, cap * sizeof *nm.vals);
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i] != UINT32_MAX) an_u64map_put(&nm, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = nm;
    }
    size_t i = slot_of(m, key);
    for (; m->vals[i] != UINT32_MAX; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

void an_u64map_free(struct an_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
