/* flight.c: see flight.h for the concurrency scheme. */
#include "track/flight.h"

#include <string.h>
#include <sys/mman.h>

#define STATE_BITS 8
#define STATE_MASK ((1u << STATE_BITS) - 1)
#define WORDS (sizeof(struct ng_op_record) / sizeof(uint64_t))
#define PAYLOAD_WORDS (offsetof(struct ng_op_record, state_word) / sizeof(uint64_t))

_Static_assert(sizeof(struct ng_op_record) % sizeof(uint64_t) == 0, "records are words");
_Static_assert(STATE_MASK == 0xff, "ng_record_state (flight.h) reads the same bits");

static struct ng_op_record *ring; /* atomic pointer */
static uint64_t capacity; /* a power of two */
static uint64_t mask;     /* capacity - 1 */
static uint64_t head;             /* atomic */
static uint64_t dropped_inflight; /* atomic */
static ng_flight_drop_fn on_drop; /* atomic */

static uint64_t pack(uint64_t index, int state)
{
    return (index << STATE_BITS) | (uint64_t)state;
}

static uint64_t *words(struct ng_op_record *r)
{
    return (uint64_t *)r;
}

int ncclguard_flight_init(uint64_t cap)
{
    if (__atomic_load_n(&ring, __ATOMIC_ACQUIRE)) return 0;
    if (cap < 16) cap = 16;
    /* A power of two, so that the hot path masks instead of dividing. */
    while (cap & (cap - 1)) cap += cap & -cap;
    /* mmap, not malloc: pages are touched only as records arrive. */
    void *p = mmap(NULL, cap * sizeof *ring, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    /* Slot i starts out as a finished record of index i - capacity. */
    for (uint64_t i = 0; i < cap; i++) {
        struct ng_op_record *r = (struct ng_op_record *)p + i;
        r->state_word = pack(i - cap, NG_OP_COMPLETED);
        r->version = 0;
    }
    capacity = cap;
    mask = cap - 1;
    struct ng_op_record *expected = NULL;
    if (!__atomic_compare_exchange_n(&ring, &expected, (struct ng_op_record *)p, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        munmap(p, cap * sizeof *ring);
    return 0;
}

/* Copies the first `nwords` words of slot r, which must hold record `index`
 * complete: 0, or -1 when it does not, or when a writer came meanwhile. */
static int copy_words(struct ng_op_record *r, uint64_t index, struct ng_op_record *out,
                      size_t nwords)
{
    uint64_t v1 = __atomic_load_n(&r->version, __ATOMIC_ACQUIRE);
    if (v1 != 2 * index + 2) return -1;
    const uint64_t *src = words(r);
    uint64_t *dst = (uint64_t *)out;
    for (size_t w = 0; w < nwords; w++) dst[w] = __atomic_load_n(&src[w], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&r->version, __ATOMIC_RELAXED) == v1 ? 0 : -1;
}

/* True when record r has CUDA events to return: a marker, or a share of its
 * group's. */
static int holds_events(const struct ng_op_record *r)
{
    return __atomic_load_n(&r->marker, __ATOMIC_RELAXED) != NG_NO_MARKER ||
           __atomic_load_n(&r->group_id, __ATOMIC_RELAXED) != 0;
}

/*
 * Drops the unfinished record in slot r (state word `old`): a compare-and-swap
 * to the new record's state word `neu` takes it from the watchdog, since
 * whichever of the two moves it on first owns its CUDA events, so they are
 * returned exactly once; then a copy goes to the drop callback. Returns 0 when
 * the watchdog finished it first. It runs before the new record is written:
 * a reader meanwhile finds neither record, as during any overwrite.
 */
static __attribute__((noinline, cold)) int take(struct ng_op_record *r, uint64_t old,
                                                uint64_t neu)
{
    if (!__atomic_compare_exchange_n(&r->state_word, &old, neu, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0;
    __atomic_fetch_add(&dropped_inflight, 1, __ATOMIC_RELAXED);
    /* its payload is intact unless its writer is still at it, a whole lap
     * behind the others: then what it held is lost */
    struct ng_op_record gone;
    ng_flight_drop_fn fn = __atomic_load_n(&on_drop, __ATOMIC_ACQUIRE);
    if (fn && copy_words(r, old >> STATE_BITS, &gone, PAYLOAD_WORDS) == 0) fn(&gone);
    return 1;
}

uint64_t ncclguard_flight_append(const struct ng_op_record *rec, int state)
{
    struct ng_op_record *base = __atomic_load_n(&ring, __ATOMIC_ACQUIRE);
    if (!base) return NG_FLIGHT_NONE;
    uint64_t i = __atomic_fetch_add(&head, 1, __ATOMIC_RELAXED);
    struct ng_op_record *r = &base[i & mask];
    /* Only this writer owns index i. A finished old record never changes
     * again, so a load and a store replace it (no locked instruction in the
     * common case); so does an unfinished one that holds no CUDA events. */
    uint64_t old = __atomic_load_n(&r->state_word, __ATOMIC_ACQUIRE), neu = pack(i, state);
    if (i < capacity || ng_op_state_final((int)(old & STATE_MASK))) {
        __atomic_store_n(&r->state_word, neu, __ATOMIC_RELAXED);
    } else if (!holds_events(r)) {
        __atomic_store_n(&r->state_word, neu, __ATOMIC_RELAXED);
        __atomic_fetch_add(&dropped_inflight, 1, __ATOMIC_RELAXED);
    } else if (!take(r, old, neu)) {
        __atomic_store_n(&r->state_word, neu, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&r->version, 2 * i + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    const uint64_t *src = (const uint64_t *)rec;
    uint64_t *dst = words(r);
    for (size_t w = 0; w < PAYLOAD_WORDS; w++) __atomic_store_n(&dst[w], src[w], __ATOMIC_RELAXED);
    __atomic_store_n(&r->version, 2 * i + 2, __ATOMIC_RELEASE);
    /* The ring is larger than the caches: fetch the next slot for writing now,
     * so that the next op does not wait for it. */
    const char *next = (const char *)&base[(i + 1) & mask];
    for (size_t off = 0; off < sizeof *r; off += 64) __builtin_prefetch(next + off, 1, 3);
    return i;
}

void ncclguard_flight_on_drop(ng_flight_drop_fn fn)
{
    __atomic_store_n(&on_drop, fn, __ATOMIC_RELEASE);
}

static struct ng_op_record *slot(uint64_t index)
{
    struct ng_op_record *base = __atomic_load_n(&ring, __ATOMIC_ACQUIRE);
    if (!base || index >= __atomic_load_n(&head, __ATOMIC_ACQUIRE)) return NULL;
    return &base[index & mask];
}

int ncclguard_flight_copy(uint64_t index, struct ng_op_record *out)
{
    struct ng_op_record *r = slot(index);
    if (!r || copy_words(r, index, out, WORDS) != 0) return -1;
    return (out->state_word >> STATE_BITS) == index ? 0 : -1;
}

int ncclguard_flight_state(uint64_t index)
{
    struct ng_op_record *r = slot(index);
    if (!r) return -1;
    uint64_t w = __atomic_load_n(&r->state_word, __ATOMIC_ACQUIRE);
    return (w >> STATE_BITS) == index ? (int)(w & STATE_MASK) : -1;
}

int ncclguard_flight_advance(uint64_t index, int from, int to)
{
    struct ng_op_record *r = slot(index);
    if (!r) return -1;
    uint64_t expected = pack(index, from);
    return __atomic_compare_exchange_n(&r->state_word, &expected, pack(index, to), 0,
                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
               ? 0
               : -1;
}

void ncclguard_flight_set(uint64_t index, size_t offset, uint64_t value)
{
    struct ng_op_record *r = slot(index);
    if (!r || offset >= offsetof(struct ng_op_record, state_word)) return;
    if (__atomic_load_n(&r->version, __ATOMIC_ACQUIRE) != 2 * index + 2) return;
    __atomic_store_n(&words(r)[offset / sizeof(uint64_t)], value, __ATOMIC_RELAXED);
}

uint64_t ncclguard_flight_head(void)
{
    return __atomic_load_n(&head, __ATOMIC_ACQUIRE);
}

void ncclguard_flight_stats(struct ng_flight_stats *out)
{
    uint64_t h = ncclguard_flight_head();
    out->recorded = h;
    out->capacity = capacity;
    out->overwritten = h > capacity ? h - capacity : 0;
    out->dropped_inflight = __atomic_load_n(&dropped_inflight, __ATOMIC_RELAXED);
}

const char *ncclguard_op_state_name(int state)
{
    static const char *const names[] = {"scheduled", "started", "completed",
                                        "failed",    "aborted", "captured"};
    return state >= 0 && state < NG_OP_NSTATES ? names[state] : "unknown";
}

void ncclguard_flight_atfork_child(void)
{
    struct ng_op_record *base = __atomic_load_n(&ring, __ATOMIC_ACQUIRE);
    if (!base) return;
    for (uint64_t i = 0; i < capacity; i++) {
        base[i].state_word = pack(i - capacity, NG_OP_COMPLETED);
        base[i].version = 0;
    }
    head = 0;
    dropped_inflight = 0;
}
