/* stats.c: see stats.h. */
#include "watch/stats.h"

#include <stdlib.h>
#include <string.h>

#define WINDOW 32
#define WARMUP 8
#define CLASSES 1024 /* open addressing; classes beyond it are not kept */

struct class_stats {
    uint64_t key; /* 0 = free */
    uint32_t n;   /* samples seen, saturating */
    uint32_t next;
    int64_t window[WINDOW];
};

static struct class_stats table[CLASSES];

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int size_class(uint64_t bytes)
{
    int c = 0;
    while (bytes > 1) {
        bytes >>= 1;
        c++;
    }
    return c;
}

static struct class_stats *find(uint64_t key)
{
    size_t i = (size_t)(key * 0x9e3779b97f4a7c15ULL >> 54) % CLASSES;
    for (size_t n = 0; n < CLASSES; n++, i = (i + 1) % CLASSES) {
        if (table[i].key == key) return &table[i];
        if (table[i].key == 0) {
            table[i].key = key;
            return &table[i];
        }
    }
    return NULL;
}

int64_t ncclguard_stats_observe(uint64_t comm_id, int op, uint64_t bytes, int64_t dur_ns)
{
    uint64_t key = comm_id ^ ((uint64_t)op << 56) ^ ((uint64_t)size_class(bytes) << 48);
    struct class_stats *c = find(key ? key : 1);
    if (!c) return 0;
    int64_t median = 0;
    if (c->n >= WARMUP) {
        int64_t sorted[WINDOW];
        uint32_t k = c->n < WINDOW ? c->n : WINDOW;
        memcpy(sorted, c->window, k * sizeof *sorted);
        qsort(sorted, k, sizeof *sorted, cmp_i64);
        median = sorted[k / 2];
    }
    c->window[c->next] = dur_ns;
    c->next = (c->next + 1) % WINDOW;
    if (c->n < UINT32_MAX) c->n++;
    return median;
}

void ncclguard_stats_reset(void)
{
    memset(table, 0, sizeof table);
}
