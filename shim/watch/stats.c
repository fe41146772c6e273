/* stats.c: see stats.h. */
#include "watch/stats.h"

#include <string.h>

#include "base/ops.h"

#define WARMUP 32 /* a median of fewer samples of a waiting-dominated class misleads */
#define REMEDIAN_EVERY 8
#define AGE_EVERY 64
#define CLASSES 1024 /* open addressing; classes beyond it are not kept */
#define OCTAVES 41   /* durations up to 2^41 ns (36 minutes); longer ones count as that */
#define BUCKETS (4 * OCTAVES)

_Static_assert(NG_OP_NTYPES < 256, "an op type fits in the key's 8 bits");

struct class_stats {
    uint64_t key;   /* 0 = free */
    uint32_t n;     /* samples seen, saturating */
    uint32_t total; /* samples in the histogram (after ageing) */
    int64_t median; /* as of the last recomputation */
    uint8_t over;   /* one bit per recent sample: over factor x median */
    uint16_t bucket[BUCKETS];
};

static struct class_stats table[CLASSES];

/* Bucket 4 l + f holds durations in [2^l (1 + f/4), 2^l (1 + (f+1)/4)). */
static int bucket_of(int64_t ns)
{
    if (ns < 4) return ns > 0 ? (int)ns - 1 : 0; /* 1, 2, 3 ns: exact enough */
    uint64_t d = (uint64_t)ns;
    int l = 63 - __builtin_clzll(d);
    if (l >= OCTAVES) return BUCKETS - 1;
    return 4 * l + (int)((d >> (l - 2)) & 3);
}

/* The middle of bucket b. */
static int64_t bucket_mid(int b)
{
    int l = b / 4, f = b % 4;
    if (l < 2) return b + 1;
    double lo = (double)(1ULL << l) * (1 + f / 4.0), hi = (double)(1ULL << l) * (1 + (f + 1) / 4.0);
    return (int64_t)((lo + hi) / 2);
}

static int64_t median_of(const struct class_stats *c)
{
    uint32_t half = (c->total + 1) / 2, seen = 0;
    for (int b = 0; b < BUCKETS; b++) {
        seen += c->bucket[b];
        if (seen >= half) return bucket_mid(b);
    }
    return 0;
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

struct ng_sample ncclguard_stats_observe(uint64_t comm_id, int op, uint64_t bytes, int64_t dur_ns,
                                         double factor, int64_t floor_ns)
{
    uint64_t key = comm_id ^ ((uint64_t)op << 56) ^ ((uint64_t)ng_size_class(bytes) << 48);
    struct class_stats *c = find(key ? key : 1);
    struct ng_sample out = {0, 0};
    if (!c) return out;
    int64_t median = c->n >= WARMUP ? c->median : 0;
    int over = factor > 0 && median > 0 && dur_ns >= floor_ns && (double)dur_ns > factor * median;
    c->over = (uint8_t)(c->over << 1 | over);
    out.median = median;
    out.persistent = over && __builtin_popcount(c->over) >= NG_SLOW_PERSIST;
    c->bucket[bucket_of(dur_ns)]++;
    c->total++;
    if (c->n < UINT32_MAX) c->n++;
    if (c->total >= AGE_EVERY) { /* ageing: old samples count half */
        c->total = 0;
        for (int b = 0; b < BUCKETS; b++) c->total += c->bucket[b] /= 2;
    }
    if (c->n % REMEDIAN_EVERY == 0 || c->n <= 2 * WARMUP) c->median = median_of(c);
    return out;
}

void ncclguard_stats_reset(void)
{
    memset(table, 0, sizeof table);
}
