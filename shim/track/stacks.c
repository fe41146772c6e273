/*
 * stacks.c: see stacks.h.
 *
 * The table is a list of entries, taken in order (an entry's index is its
 * id), and an index of buckets that maps a stack's hash to its id, probed
 * linearly. A bucket is claimed by a compare-and-swap of its key from 0 to the
 * hash; the winner takes the next entry, fills its frames, then publishes the
 * count of frames and the bucket's id, both with release stores. A thread that
 * meets a claimed bucket whose id is not yet published gets no stack for that
 * one op rather than wait. Two stacks with the same 64-bit hash share an
 * entry: the first one's frames stand for both.
 */
#include "track/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <sys/mman.h>

#include "base/atomic.h"
#include "base/hash.h"
#include "base/log.h"
#include "track/unwind.h"

#define NBUCKETS (2 * NG_STACKS_MAX) /* a power of two, half full at most */
#define MAX_PROBES 32
#define SHIM_FRAMES_MAX 8            /* the shim's own frames, left out */
#define ID_FULL UINT32_MAX           /* a bucket claimed when the list was full */

struct bucket {
    ng_atomic(uint64_t) key; /* the stack's hash, 0 when free */
    ng_atomic(uint32_t) id;  /* id + 1, 0 until published, ID_FULL */
};

static int depth; /* 0: off; set before the first communicator is published */
static uint64_t *frames; /* NG_STACKS_MAX x depth */
static ng_atomic(int) nframes[NG_STACKS_MAX]; /* 0 until the entry is written */
static struct bucket buckets[NBUCKETS];
static ng_atomic(int) used;
static ng_atomic(uint64_t) lost;
static uintptr_t shim_lo, shim_hi; /* the text of this library */

static int find_self(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    uintptr_t self = (uintptr_t)&find_self, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < lo) lo = start;
        if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
    }
    if (self < lo || self >= hi) return 0;
    shim_lo = lo;
    shim_hi = hi;
    return 1;
}

void ncclguard_stacks_init(int want)
{
    if (depth || want <= 0) return;
    if (want > NG_STACKS_DEPTH_MAX) want = NG_STACKS_DEPTH_MAX;
    ncclguard_unwind_open();
    void *probe[2];
    if (ncclguard_unwind_fast(probe, 2) == 0) {
        NG_INFO("libunwind.so.8 is not loaded: no enqueue stacks (glibc's backtrace() would "
                "cost 6 us or more per call); install libunwind8 to have them");
        return;
    }
    size_t bytes = (size_t)NG_STACKS_MAX * (size_t)want * sizeof *frames;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        NG_WARN("cannot allocate the stack table (%zu bytes): no enqueue stacks", bytes);
        return;
    }
    dl_iterate_phdr(find_self, NULL);
    frames = m;
    depth = want;
}

/* The entry of a new stack, or NG_NO_STACK when the list is full. */
static int64_t add(struct bucket *b, const uint64_t *pcs, int n)
{
    int id = ng_atomic_add_relaxed(&used, 1);
    if (id >= NG_STACKS_MAX) {
        ng_atomic_store_release(&b->id, ID_FULL);
        ng_atomic_add_relaxed(&lost, 1);
        return NG_NO_STACK;
    }
    uint64_t *dst = frames + (size_t)id * (size_t)depth;
    for (int i = 0; i < n; i++) dst[i] = pcs[i];
    ng_atomic_store_release(&nframes[id], n);
    ng_atomic_store_release(&b->id, (uint32_t)id + 1);
    return id;
}

int64_t ncclguard_stack_capture(void)
{
    if (!depth) return NG_NO_STACK;
    void *raw[NG_STACKS_DEPTH_MAX + SHIM_FRAMES_MAX];
    int n = ncclguard_unwind_fast(raw, depth + SHIM_FRAMES_MAX), skip = 0;
    while (skip < n && (uintptr_t)raw[skip] >= shim_lo && (uintptr_t)raw[skip] < shim_hi) skip++;
    const uint64_t *pcs = (const uint64_t *)(raw + skip);
    n -= skip;
    if (n > depth) n = depth;
    if (n <= 0) return NG_NO_STACK;
    uint64_t h = NG_HASH_SEED;
    for (int i = 0; i < n; i++) h = ng_hash_word(h, pcs[i]);
    if (!h) h = 1;
    for (int probe = 0; probe < MAX_PROBES; probe++) {
        struct bucket *b = &buckets[(h + (uint64_t)probe) & (NBUCKETS - 1)];
        uint64_t key = ng_atomic_load_acquire(&b->key);
        if (key == 0) {
            uint64_t free_key = 0;
            if (ng_atomic_cas_acq_rel(&b->key, &free_key, h)) return add(b, pcs, n);
            key = free_key; /* taken meanwhile: by this stack? */
        }
        if (key != h) continue;
        uint32_t id = ng_atomic_load_acquire(&b->id);
        if (id == ID_FULL) ng_atomic_add_relaxed(&lost, 1);
        return id == 0 || id == ID_FULL ? NG_NO_STACK : (int64_t)id - 1;
    }
    ng_atomic_add_relaxed(&lost, 1);
    return NG_NO_STACK;
}

void ncclguard_stacks_stats(struct ng_stacks_stats *out)
{
    int n = ng_atomic_load_acquire(&used);
    out->depth = depth;
    out->capacity = depth ? NG_STACKS_MAX : 0;
    out->used = n < NG_STACKS_MAX ? n : NG_STACKS_MAX;
    out->lost = ng_atomic_load_relaxed(&lost);
}

int ncclguard_stack_frames(int64_t id, const uint64_t **pcs)
{
    if (!depth || id < 0 || id >= NG_STACKS_MAX) return 0;
    *pcs = frames + (size_t)id * (size_t)depth;
    return ng_atomic_load_acquire(&nframes[id]);
}
