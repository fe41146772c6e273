/*
 * kmarks.c: the kernel marks of the ops the profiler plugin reports (see kmarks.h).
 */
#include "track/kmarks.h"

#include <time.h>

#include "base/atomic.h"
#include "base/clock.h"

/*
 * A kernel mark is one word, changed by compare-and-swap only:
 *   bits 63..32  generation, one more at each reuse: events of an earlier op fail
 *   bit  31      taken
 *   bit  30      released: its record is finished; free once every channel stopped
 *   bits 23..16  channels of the op's kernel
 *   bits 15..8   channels started
 *   bits  7..0   channels stopped
 * The times are written by the thread whose event they are, before its swap
 * publishes the count: a reader that sees the count sees the time.
 */
#define K_TAKEN (1ull << 31)
#define K_RELEASED (1ull << 30)
#define K_CHANNELS(w) ((int)(((w) >> 16) & 0xff))
#define K_STARTED(w) ((int)(((w) >> 8) & 0xff))
#define K_STOPPED(w) ((int)((w)&0xff))
#define K_GEN(w) ((uint32_t)((w) >> 32))

struct kmark {
    ng_atomic(uint64_t) word;
    ng_atomic(int64_t) start_ns, end_ns;
};
static struct kmark kmarks[NG_KMARKS];
static ng_atomic(uint32_t) next_kmark;
static ng_atomic(int) busy;

static struct kmark *kmark_at(int mark)
{
    return ng_is_kmark(mark) ? &kmarks[mark - NG_KMARK_BASE] : NULL;
}

/* A free mark for an op of `channels` channels: its number and generation, or NG_NO_MARKER
 * when all are taken (the op is then recorded without one). */
int ncclguard_kmark_take(int channels, uint32_t *gen)
{
    if (channels < 1) channels = 1;
    if (channels > 255) channels = 255;
    for (int tries = 0; tries < NG_KMARKS; tries++) {
        uint32_t i = ng_atomic_add_relaxed(&next_kmark, 1) % NG_KMARKS;
        struct kmark *k = &kmarks[i];
        uint64_t w = ng_atomic_load_relaxed(&k->word);
        if (w & K_TAKEN) continue;
        ng_atomic_store_relaxed(&k->start_ns, 0);
        ng_atomic_store_relaxed(&k->end_ns, 0);
        uint64_t g = (uint64_t)(K_GEN(w) + 1);
        uint64_t nw = g << 32 | K_TAKEN | (uint64_t)channels << 16;
        if (!ng_atomic_cas_acq_rel(&k->word, &w, nw)) continue;
        ng_atomic_add_relaxed(&busy, 1);
        *gen = (uint32_t)g;
        return NG_KMARK_BASE + (int)i;
    }
    return NG_NO_MARKER;
}

/* The word after one more started (delta 1 << 8) or stopped (delta 1) channel of an op
 * of generation gen; a mark that is released and has every channel stopped is free. */
static void kmark_count(int mark, uint32_t gen, uint64_t delta, ng_atomic(int64_t) * t, int64_t ns)
{
    struct kmark *k = kmark_at(mark);
    if (!k) return;
    uint64_t w = ng_atomic_load_acquire(&k->word);
    if (K_GEN(w) != gen || !(w & K_TAKEN)) return; /* an event of an earlier op */
    int stop = delta == 1, done = stop ? K_STOPPED(w) : K_STARTED(w);
    if (done >= K_CHANNELS(w)) return; /* more events than channels: not counted */
    if (!ns) ns = ng_clock_ns(CLOCK_REALTIME);
    if (stop || !done) ng_atomic_store_relaxed(t, ns); /* the first start, the last stop */
    for (;;) {
        uint64_t nw = w + delta;
        if ((nw & K_RELEASED) && K_STOPPED(nw) >= K_CHANNELS(w))
            nw = (uint64_t)gen << 32; /* free */
        if (ng_atomic_cas_acq_rel(&k->word, &w, nw)) {
            if (!(nw & K_TAKEN)) ng_atomic_add_relaxed(&busy, -1);
            return;
        }
        if (K_GEN(w) != gen || !(w & K_TAKEN)) return;
        if ((stop ? K_STOPPED(w) : K_STARTED(w)) >= K_CHANNELS(w)) return;
    }
}

void ncclguard_kmark_start(int mark, uint32_t gen, int64_t ns)
{
    struct kmark *k = kmark_at(mark);
    if (k) kmark_count(mark, gen, 1ull << 8, &k->start_ns, ns);
}

void ncclguard_kmark_stop(int mark, uint32_t gen, int64_t ns)
{
    struct kmark *k = kmark_at(mark);
    if (k) kmark_count(mark, gen, 1, &k->end_ns, ns);
}

enum ng_marker_state ncclguard_kmark_poll(int mark, int64_t *start_ns, int64_t *end_ns)
{
    struct kmark *k = kmark_at(mark);
    uint64_t w = k ? ng_atomic_load_acquire(&k->word) : 0;
    if (!(w & K_TAKEN)) return NG_MARKER_ERROR;
    if (K_STOPPED(w) >= K_CHANNELS(w)) {
        *start_ns = ng_atomic_load_relaxed(&k->start_ns);
        *end_ns = ng_atomic_load_relaxed(&k->end_ns);
        return NG_MARKER_DONE;
    }
    if (!K_STARTED(w)) return NG_MARKER_PENDING;
    *start_ns = ng_atomic_load_relaxed(&k->start_ns);
    return NG_MARKER_STARTED;
}

int ncclguard_kmark_passed(int mark, int end)
{
    struct kmark *k = kmark_at(mark);
    uint64_t w = k ? ng_atomic_load_acquire(&k->word) : 0;
    if (!(w & K_TAKEN)) return -1;
    return end ? K_STOPPED(w) >= K_CHANNELS(w) : K_STARTED(w) > 0;
}

void ncclguard_kmark_release(int mark)
{
    struct kmark *k = kmark_at(mark);
    if (!k) return;
    uint64_t w = ng_atomic_load_acquire(&k->word);
    while ((w & K_TAKEN) && !(w & K_RELEASED)) {
        uint64_t nw = K_STOPPED(w) >= K_CHANNELS(w) ? (uint64_t)K_GEN(w) << 32 : w | K_RELEASED;
        if (ng_atomic_cas_acq_rel(&k->word, &w, nw)) {
            if (!(nw & K_TAKEN)) ng_atomic_add_relaxed(&busy, -1);
            return;
        }
    }
}

int ncclguard_kmarks_busy(void)
{
    return ng_atomic_load_relaxed(&busy);
}
