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
 *
 * In front of it, the cache of call sites (shim/track/README.md, "Enqueue
 * stacks", says why it is exact): buckets keyed by the innermost return
 * address, each pointing at a site that lists the checks of one stack, the
 * words its unwind read, at offsets from the caller's stack pointer, and the
 * values they held. A capture whose every check holds has that stack. The
 * sites are published the same way as the table's entries.
 */
#include "track/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <sys/mman.h>

#include "base/mem.h"
#include "base/atomic.h"
#include "base/hash.h"
#include "base/log.h"
#include "track/cfi.h"
#include "track/unwind.h"

#define NBUCKETS (2 * NG_STACKS_MAX) /* a power of two, half full at most */
#define SHIM_FRAMES_MAX 8            /* the shim's own frames, left out */
#define ID_FULL UINT32_MAX           /* a bucket claimed as the list filled (a race) */

struct bucket {
    ng_atomic(uint64_t) key; /* the stack's hash, 0 when free */
    ng_atomic(uint32_t) id;  /* id + 1, 0 until published, ID_FULL */
};

int ncclguard_stack_depth; /* 0: off; set before the first communicator is published */
static uint64_t *frames;   /* NG_STACKS_MAX x the depth */
static ng_atomic(int) nframes[NG_STACKS_MAX]; /* 0 until the entry is written */
static struct bucket buckets[NBUCKETS];
static ng_atomic(int) used;
static ng_atomic(uint64_t) lost;
static uintptr_t shim_lo, shim_hi; /* the text of this library */

/* The cache of call sites. */
#define SITES_MAX 4096
#define SITE_BUCKETS (2 * SITES_MAX)
#define SITE_PROBES 16
#define FRAME_MAX ((uintptr_t)1 << 20) /* a frame larger than 1 MiB is not cached */
struct check {
    int64_t off;  /* from the caller's stack pointer (sp) */
    uint64_t val; /* the word there; for a rel check, the word minus sp */
};
struct site {
    uint64_t epoch;    /* the count of unloads when it was made (see epoch_now) */
    int64_t id;        /* the stack's id in the table */
    uintptr_t made_at; /* capture's CFA when it was made: the checks are relative */
    int nchecks;
    int nrel; /* how many of the checks are rel (an rbp, minus capture's CFA) */
    int32_t rel_at[NG_STACKS_DEPTH_MAX]; /* the index of each rel check */
    struct check checks[];               /* 2 x depth at most: one per frame, one per rbp */
};
struct site_bucket {
    ng_atomic(uint64_t) ra;   /* the innermost return address, 0 when free */
    ng_atomic(uint32_t) site; /* site + 1, 0 until published */
};
/* Where the caller's innermost return address lies, from capture's own frame
 * record, for each path through the shim (each wrapper): found by the return
 * address into capture's caller and the return address of that caller. */
#define PREFIXES 64
struct prefix {
    ng_atomic(uint64_t) caller_ra; /* 0 when free */
    ng_atomic(int64_t) off;        /* from capture's CFA; -1 until published */
    uint64_t capture_ra;           /* set before caller_ra is */
};
static struct prefix prefixes[PREFIXES];
static unsigned char *sites; /* SITES_MAX x site_size */
static size_t site_size;
static struct site_bucket site_buckets[SITE_BUCKETS];
static ng_atomic(int) sites_used;
static ng_atomic(uint64_t) unwinds; /* counted on the slow path only: no line shared by hits */

/* Unloads. Watched (every dlclose comes through intercept/loader.c), the epoch
 * is unload_gen, bumped after each dlclose, and after an unload the loader
 * counted but no dlclose of ours saw (subs_known, compared at each full
 * unwind). Not watched, it is the loader's own count, asked at each capture. */
static int unloads_watched; /* set in the constructor, before the first site */
static ng_atomic(uint64_t) unload_gen;
static ng_atomic(uint64_t) subs_known; /* the loader's count of unloads, last seen */

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
    if (ncclguard_stack_depth || want <= 0) return;
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
    ncclguard_mem_add(bytes);
    frames = m;
    size_t ssize = sizeof(struct site) + 2 * (size_t)want * sizeof(struct check);
    ssize = (ssize + 63) & ~(size_t)63;
    if (ncclguard_cfi_open() == 0) {
        void *c = mmap(NULL, SITES_MAX * ssize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (c != MAP_FAILED) {
            ncclguard_mem_add(SITES_MAX * ssize);
            sites = c;
            site_size = ssize;
        }
    }
    if (!sites)
        NG_INFO("no cache of call sites (libgcc_s.so.1 or memory missing): every op unwinds");
    ncclguard_stack_depth = want;
}

static int count_unloads(struct dl_phdr_info *info, size_t size, void *ctx)
{
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return -1;
    *(uint64_t *)ctx = info->dlpi_subs;
    return 1; /* the first object is enough: the count is the loader's */
}

/* The loader's count of unloads (dl_iterate_phdr takes and drops its lock). */
static uint64_t loader_unloads(void)
{
    uint64_t subs = 0;
    dl_iterate_phdr(count_unloads, &subs);
    return subs;
}

void ncclguard_stacks_watch_unloads(void)
{
    ng_atomic_store_relaxed(&subs_known, loader_unloads());
    unloads_watched = 1;
}

void ncclguard_stacks_unloaded(void)
{
    ng_atomic_store_relaxed(&subs_known, loader_unloads());
    ng_atomic_add_seq_cst(&unload_gen, 1);
}

/* The epoch a site made now records, and a site must have to hold now. */
static inline uint64_t epoch_now(void)
{
    return unloads_watched ? ng_atomic_load_acquire(&unload_gen) : loader_unloads();
}

static inline struct site *site_at(uint32_t i)
{
    return (struct site *)(sites + (size_t)i * site_size);
}

/* 1 when the n checks from c hold for the caller whose stack pointer is sp,
 * checked in order: each read only once the one before it held, so inside a
 * frame the checks before it proved live. Eight at a time, then the rest by a
 * jump into the last seven. */
#define HOLDS(c) (*(const uint64_t *)(sp + (uintptr_t)(c).off) == (c).val)
__attribute__((no_sanitize("address"), always_inline)) static inline int
run_holds(const struct check *c, int n, uintptr_t sp)
{
    for (; n >= 8; c += 8, n -= 8)
        if (!HOLDS(c[0]) || !HOLDS(c[1]) || !HOLDS(c[2]) || !HOLDS(c[3]) || !HOLDS(c[4]) ||
            !HOLDS(c[5]) || !HOLDS(c[6]) || !HOLDS(c[7]))
            return 0;
    const struct check *e = c + n;
    switch (n) {
    case 7:
        if (!HOLDS(e[-7])) return 0; /* fall through */
    case 6:
        if (!HOLDS(e[-6])) return 0; /* fall through */
    case 5:
        if (!HOLDS(e[-5])) return 0; /* fall through */
    case 4:
        if (!HOLDS(e[-4])) return 0; /* fall through */
    case 3:
        if (!HOLDS(e[-3])) return 0; /* fall through */
    case 2:
        if (!HOLDS(e[-2])) return 0; /* fall through */
    case 1: return HOLDS(e[-1]);
    default: return 1;
    }
}

/* 1 when the stack of the caller whose stack pointer is sp is the site's:
 * every check holds, in order. An rbp check compares the word minus sp. */
__attribute__((no_sanitize("address"))) static inline int site_holds(const struct site *st,
                                                                     uintptr_t sp)
{
    const struct check *c = st->checks;
    if (!st->nrel) return run_holds(c, st->nchecks, sp); /* no rbp-based frame */
    int done = 0;
    for (int r = 0; r < st->nrel; r++) {
        int at = st->rel_at[r];
        if (!run_holds(c + done, at - done, sp)) return 0;
        if (*(const uint64_t *)(sp + (uintptr_t)c[at].off) - sp != c[at].val) return 0;
        done = at + 1;
    }
    return run_holds(c + done, st->nchecks - done, sp);
}

/* The checks of a stack, from the frame record fp of capture itself: f[0] is
 * fp[1], f[1..s-1] the shim's frames, f[s..s+n-1] the stack's n frames. The
 * walk follows the call frame information of each return address from fp on
 * and must find f[] (else the unwinds differ and nothing is cached); *off is
 * where f[s] lies. 0 when a rule is unknown. */
__attribute__((no_sanitize("address"))) static int
plan(struct site *st, void *const *fp, const uint64_t *f, int s, int n, int64_t *off)
{
    uintptr_t base = (uintptr_t)fp + 16, sp = base, rbp_at = (uintptr_t)fp;
    int k = 0, end = s + n; /* f[end - 1]: the outermost frame kept */
    st->nrel = 0;
    st->made_at = base;
    for (int i = 1; i <= end; i++) {
        struct ng_cfi_rule r;
        if (ncclguard_cfi_rule((uintptr_t)f[i - 1], &r) != 0) return 0;
        if (i == end) {
            if (n < ncclguard_stack_depth && !r.last) return 0; /* it stopped for another reason */
            break;
        }
        if (r.last) return 0;
        /* The shim's own frames (i <= s) are fixed code, found by the
         * prefix: f[1..s] are there once f[0] and f[1] are (see prefix_find). */
        uintptr_t cfa;
        if (r.cfa_is_rbp) {
            uint64_t rbp = *(const uint64_t *)rbp_at;
            if (i > s) {
                st->rel_at[st->nrel++] = k;
                st->checks[k++] = (struct check){(int64_t)(rbp_at - base), rbp - base};
            }
            cfa = (uintptr_t)rbp + (uintptr_t)r.cfa_off;
        } else {
            cfa = sp + (uintptr_t)r.cfa_off;
        }
        if (cfa <= sp || cfa - sp > FRAME_MAX || (cfa & 7)) return 0;
        if (*(const uint64_t *)(cfa - 8) != f[i]) return 0;
        if (i == s) *off = (int64_t)(cfa - 8 - base);
        if (i > s) st->checks[k++] = (struct check){(int64_t)(cfa - 8 - base), f[i]};
        if (r.rbp_saved) {
            rbp_at = cfa + (uintptr_t)r.rbp_off;
            if (rbp_at < sp || rbp_at + 8 > cfa - 8) return 0;
        }
        sp = cfa;
    }
    st->nchecks = k;
    return 1;
}

/* A return address's bucket: its bits above the few that alignment fixes,
 * folded (no multiply: the addresses of a job's call sites are spread enough). */
static inline uint64_t slot(uint64_t key, int probe, unsigned n)
{
    return ((key ^ key >> 13 ^ key >> 27) + (uint64_t)probe) & (n - 1);
}

/* The offset of the innermost return address of the job's caller from
 * capture's CFA, for calls through capture_ra and caller_ra; -1 if unknown. */
static inline int64_t prefix_find(uint64_t capture_ra, uint64_t caller_ra)
{
    for (int probe = 0; probe < 4; probe++) {
        struct prefix *p = &prefixes[slot(caller_ra, probe, PREFIXES)];
        uint64_t key = ng_atomic_load_acquire(&p->caller_ra);
        if (key == 0) return -1;
        if (key == caller_ra && p->capture_ra == capture_ra) return ng_atomic_load_acquire(&p->off);
    }
    return -1;
}

static void prefix_add(uint64_t capture_ra, uint64_t caller_ra, int64_t off)
{
    if (prefix_find(capture_ra, caller_ra) >= 0) return;
    for (int probe = 0; probe < 4; probe++) {
        struct prefix *p = &prefixes[slot(caller_ra, probe, PREFIXES)];
        uint64_t key = ng_atomic_load_acquire(&p->caller_ra);
        if (key != 0) continue;
        ng_atomic_store_relaxed(&p->off, -1);
        p->capture_ra = capture_ra; /* a thread that loses the race below leaves it be */
        if (!ng_atomic_cas_acq_rel(&p->caller_ra, &key, caller_ra)) continue;
        ng_atomic_store_release(&p->off, off);
        return;
    }
}

/* Caches the stack id of the frames f[s..s+n-1] (see plan). */
static void remember(void *const *fp, const uint64_t *f, int s, int n, int64_t id, uint64_t epoch)
{
    uint64_t ra = f[s];
    for (int probe = 0; probe < SITE_PROBES; probe++) {
        struct site_bucket *b = &site_buckets[slot(ra, probe, SITE_BUCKETS)];
        uint64_t key = ng_atomic_load_acquire(&b->ra);
        if (key != 0) continue;
        if (!ng_atomic_cas_acq_rel(&b->ra, &key, ra)) continue;
        int i = ng_atomic_add_relaxed(&sites_used, 1);
        if (i >= SITES_MAX) return; /* the bucket stays claimed, never published */
        struct site *st = site_at((uint32_t)i);
        st->epoch = epoch;
        st->id = id;
        int64_t off = -1;
        if (plan(st, fp, f, s, n, &off) && off >= 0)
            prefix_add(f[0], f[1], off);
        else
            st->nchecks = -1; /* a site that never holds */
        ng_atomic_store_release(&b->site, (uint32_t)i + 1);
        return;
    }
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
    uint64_t *dst = frames + (size_t)id * (size_t)ncclguard_stack_depth;
    for (int i = 0; i < n; i++) dst[i] = pcs[i];
    ng_atomic_store_release(&nframes[id], n);
    ng_atomic_store_release(&b->id, (uint32_t)id + 1);
    return id;
}

/* Linear probing from the stack's hash. A new stack claims a bucket only while
 * the list has room, so at most NG_STACKS_MAX keys (and one more per thread
 * that raced for the last entry) are ever in the NBUCKETS buckets: a probe
 * always ends, at the stack or at a free bucket, however long the run of
 * taken buckets before it. A bound on the probes would lose stacks while
 * the list still had room, as the addresses happened to hash. */
int64_t ncclguard_stack_intern(const uint64_t *pcs, int n)
{
    if (n <= 0 || n > ncclguard_stack_depth) return NG_NO_STACK;
    uint64_t h = NG_HASH_SEED;
    for (int i = 0; i < n; i++) h = ng_hash_word(h, pcs[i]);
    if (!h) h = 1;
    for (uint64_t probe = 0; probe < NBUCKETS; probe++) {
        struct bucket *b = &buckets[(h + probe) & (NBUCKETS - 1)];
        uint64_t key = ng_atomic_load_acquire(&b->key);
        if (key == 0) {
            if (ng_atomic_load_relaxed(&used) >= NG_STACKS_MAX) break; /* full: not kept */
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

/* The return addresses from the frame record fp on (fp[1] first), by the call
 * frame information alone: what unwind uses once a library has been unloaded.
 * It stops at the outermost frame, or short of it at a rule cfi.c does not
 * follow (the stack is then cut there: shorter, never wrong). */
__attribute__((no_sanitize("address"))) static int walk(void *const *fp, void **raw, int max)
{
    uintptr_t sp = (uintptr_t)fp + 16, rbp_at = (uintptr_t)fp;
    int n = 0;
    raw[n++] = fp[1];
    while (n < max) {
        struct ng_cfi_rule r;
        if (ncclguard_cfi_rule((uintptr_t)raw[n - 1], &r) != 0 || r.last) break;
        uintptr_t cfa = (r.cfa_is_rbp ? *(const uintptr_t *)rbp_at : sp) + (uintptr_t)r.cfa_off;
        if (cfa <= sp || cfa - sp > FRAME_MAX || (cfa & 7)) break;
        void *ra = *(void *const *)(cfa - 8);
        if (!ra) break;
        raw[n++] = ra;
        if (r.rbp_saved) rbp_at = cfa + (uintptr_t)r.rbp_off;
        sp = cfa;
    }
    return n;
}

/* The stack's id from a full unwind, through the table. libunwind's fast
 * unw_backtrace keeps, per thread, the frame layout of every address it met,
 * and never forgets one (nor does its unw_step, flushed or not, in the version
 * measured): once a library has been unloaded (subs, the loader's count of
 * unloads, is not 0), another may be where it was, and walk() is used. */
static int64_t unwind(void *const *fp, const uint64_t **pcs_out, int *n_out, int *skip_out,
                      void **raw, uint64_t subs)
{
    int max = ncclguard_stack_depth + SHIM_FRAMES_MAX, skip = 0;
    int n = subs == 0 || !sites ? ncclguard_unwind_fast(raw, max) : walk(fp, raw, max);
    while (skip < n && (uintptr_t)raw[skip] >= shim_lo && (uintptr_t)raw[skip] < shim_hi) skip++;
    const uint64_t *pcs = (const uint64_t *)(raw + skip);
    n -= skip;
    if (n > ncclguard_stack_depth) n = ncclguard_stack_depth;
    *pcs_out = pcs;
    *n_out = n;
    *skip_out = skip;
    return ncclguard_stack_intern(pcs, n);
}

/* The site of the stack at base, capture's CFA, whose innermost return
 * address is ra: its stack id, else NG_NO_STACK, and *dead when a site of ra
 * is one the cache cannot follow. */
static inline int64_t site_find(uint64_t ra, uintptr_t base, uint64_t epoch, int *dead)
{
    for (int probe = 0; probe < SITE_PROBES; probe++) {
        struct site_bucket *b = &site_buckets[slot(ra, probe, SITE_BUCKETS)];
        uint64_t key = ng_atomic_load_acquire(&b->ra);
        if (key == 0) break;
        if (key != ra) continue;
        uint32_t i = ng_atomic_load_acquire(&b->site);
        if (i == 0) continue;
        const struct site *st = site_at(i - 1);
        if (st->epoch != epoch) continue;
        if (st->nchecks < 0) {
            *dead = 1;
            continue;
        }
        if (site_holds(st, base)) return st->id; /* base, never made_at: any stack */
    }
    return NG_NO_STACK;
}

/* A capture the cache did not answer: the full unwind, then a site for it. fp
 * is ncclguard_stack_capture_at's frame record, live below this call. */
__attribute__((noinline)) static int64_t capture_slow(void *const *fp, void *caller_ra,
                                                      uint64_t epoch, int dead)
{
    ng_atomic_add_relaxed(&unwinds, 1);
    uint64_t subs = loader_unloads();
    if (unloads_watched && subs != ng_atomic_load_relaxed(&subs_known)) {
        /* an unload no dlclose of ours saw (a library bound to libc's own) */
        ng_atomic_store_relaxed(&subs_known, subs);
        ng_atomic_add_seq_cst(&unload_gen, 1);
        epoch = epoch_now();
    }
    void *raw[NG_STACKS_DEPTH_MAX + SHIM_FRAMES_MAX];
    const uint64_t *pcs;
    int n, skip;
    int64_t id = unwind(fp, &pcs, &n, &skip, raw, subs);
    if (id < 0 || !sites || dead) return id;
    int j = 0; /* raw[j]: the return address of capture's own frame */
    while (j < skip && (uintptr_t)raw[j] != (uintptr_t)fp[1]) j++;
    /* the prefix knows two levels: capture's caller and the caller's caller */
    if (j < skip && skip - j <= 2 && j + 1 < skip + n &&
        (uintptr_t)raw[j + 1] == (uintptr_t)caller_ra)
        remember(fp, (const uint64_t *)(raw + j), skip - j, n, id, epoch);
    return id;
}

int64_t ncclguard_stack_capture_at(void *caller_ra)
{
    void *const *fp = __builtin_frame_address(0);
    uintptr_t base = (uintptr_t)fp + 16;
    int dead = 0; /* a site of this address whose frames the cache cannot follow */
    uint64_t epoch = epoch_now();
    int64_t off = sites ? prefix_find((uint64_t)(uintptr_t)fp[1], (uint64_t)(uintptr_t)caller_ra)
                        : -1;
    if (off >= 0) {
        int64_t id = site_find(*(const uint64_t *)(base + (uintptr_t)off), base, epoch, &dead);
        if (id >= 0) return id;
    }
    int64_t id = capture_slow(fp, caller_ra, epoch, dead);
    __asm__ volatile("" : "+r"(id)); /* not a tail call: fp stays live */
    return id;
}

void ncclguard_stacks_stats(struct ng_stacks_stats *out)
{
    int n = ng_atomic_load_acquire(&used);
    out->depth = ncclguard_stack_depth;
    out->capacity = ncclguard_stack_depth ? NG_STACKS_MAX : 0;
    out->used = n < NG_STACKS_MAX ? n : NG_STACKS_MAX;
    out->lost = ng_atomic_load_relaxed(&lost);
    int c = ng_atomic_load_relaxed(&sites_used);
    out->sites = c < SITES_MAX ? c : SITES_MAX;
    out->unwinds = ng_atomic_load_relaxed(&unwinds);
}

int ncclguard_stack_frames(int64_t id, const uint64_t **pcs)
{
    if (!ncclguard_stack_depth || id < 0 || id >= NG_STACKS_MAX) return 0;
    *pcs = frames + (size_t)id * (size_t)ncclguard_stack_depth;
    return ng_atomic_load_acquire(&nframes[id]);
}
