/* flight.c: see flight.h for the concurrency scheme. */
#include "track/flight.h"

#include <string.h>
#include <sys/mman.h>

#include "base/mem.h"
#include "base/atomic.h"
#include "track/comm.h"

#define STATE_BITS 8
#define STATE_MASK ((1u << STATE_BITS) - 1)
#define WORD(field) (offsetof(struct ng_op_record, field) / sizeof(uint64_t))
#define PAYLOAD_WORDS WORD(state_word) /* what a writer stores */
#define SLOT_WORDS WORD(comm_id)       /* what a slot holds: the payload, state and version */

_Static_assert(sizeof(struct ng_op_record) % sizeof(uint64_t) == 0, "records are words");
_Static_assert(offsetof(struct ng_op_record, flags) % sizeof(uint64_t) == 0,
               "the 32-bit fields fill their words");
_Static_assert(STATE_MASK == 0xff, "ng_record_state (flight.h) reads the same bits");
_Static_assert(NG_OP_NSTATES <= NG_FLIGHT_END_PENDING, "a state fits below the pending bit");
_Static_assert(NG_FLIGHT_END_PENDING <= STATE_MASK, "the pending bit is a state bit");
_Static_assert(NG_FLIGHT_STATE_BITS == STATE_BITS, "flight.h's publish clears the same bit");
/* The state of a state word, without the end-pending bit. */
#define STATE_OF(w) ((int)(STATE_MASK & ~(uint64_t)NG_FLIGHT_END_PENDING & (w)))
_Static_assert(WORD(version) + 1 == SLOT_WORDS, "state and version end the slot's words");

/* A slot of the ring: one record, as words that threads share, padded to whole
 * cache lines, so that threads appending side by side never share one. */
struct slot {
    ng_atomic(uint64_t) w[(SLOT_WORDS + 7) / 8 * 8];
};

/* Beside each slot: what each watchdog thread learnt (each part written by its
 * thread only) and the end of a deferral (written by the application thread
 * that ends it), each tagged with index + 1 of the record it belongs to (0:
 * none). */
struct part {
    ng_atomic(uint64_t) tag;
    ng_atomic(uint64_t) field[NG_WATCH_NFIELDS];
};
struct side {
    struct part part[NG_WATCHERS];
    ng_atomic(uint64_t) deferred_ended; /* index + 1 */
};

static ng_atomic(struct slot *) ring;
static struct side *sides; /* capacity entries, published with `ring` */
static uint64_t capacity;  /* a power of two; written before `ring` is published */
static uint64_t mask;      /* capacity - 1 */
static ng_atomic(uint64_t) head;
static ng_atomic(uint64_t) dropped_inflight;
static ng_atomic(ng_flight_drop_fn) on_drop;
static ng_atomic(int64_t) realtime_offset;

static uint64_t pack(uint64_t index, int state)
{
    return (index << STATE_BITS) | (uint64_t)state;
}

int ncclguard_flight_init(uint64_t cap)
{
    if (ng_atomic_load_acquire(&ring)) return 0;
    if (cap < 16) cap = 16;
    /* A power of two, so that the hot path masks instead of dividing. */
    while (cap & (cap - 1)) cap += cap & -cap;
    /* mmap, not malloc: pages are touched only as records arrive (and zero
     * pages are a cleared side table). */
    void *p = mmap(NULL, cap * (sizeof(struct slot) + sizeof(struct side)), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    ncclguard_mem_add(cap * (sizeof(struct slot) + sizeof(struct side)));
    /* Slot i starts out as a finished record of index i - capacity. */
    struct slot *slots = p;
    for (uint64_t i = 0; i < cap; i++) {
        ng_atomic_store_relaxed(&slots[i].w[WORD(state_word)], pack(i - cap, NG_OP_COMPLETED));
        ng_atomic_store_relaxed(&slots[i].w[WORD(version)], 0);
    }
    capacity = cap;
    mask = cap - 1;
    sides = (struct side *)(slots + cap);
    struct slot *expected = NULL;
    if (!ng_atomic_cas_acq_rel(&ring, &expected, slots))
        munmap(p, cap * (sizeof(struct slot) + sizeof(struct side)));
    return 0;
}

/* The fields a copy derives from the writer's (flight.h). */
static void derive(struct ng_op_record *r)
{
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    r->comm_id = c ? c->id : 0;
    r->comm_rank = c ? ng_comm_rank(c) : -1;
    r->comm_nranks = c ? ng_comm_nranks(c) : -1;
    r->bytes = r->count * ng_dtype_size(r->dtype);
    r->enqueue_ns = r->enqueue_mono_ns + ng_atomic_load_relaxed(&realtime_offset);
}

/* Copies the first `nwords` words of slot s, which must hold record `index`
 * complete, derives the rest, and clears what the watchdog learnt: 0, or -1
 * when it does not, or when a writer came meanwhile. */
static inline __attribute__((always_inline)) int copy_words(struct slot *s, uint64_t index,
                                                            struct ng_op_record *out, size_t nwords)
{
    uint64_t v1 = ng_atomic_load_acquire(&s->w[WORD(version)]);
    if (v1 != 2 * index + 2) return -1;
    uint64_t *dst = (uint64_t *)out;
    /* Unrolled, nwords being a constant: every record the watchdog takes comes
     * through here (2 instructions a word instead of 6). */
#pragma GCC unroll 16
    for (size_t w = 0; w < nwords; w++) dst[w] = ng_atomic_load_relaxed(&s->w[w]);
    ng_atomic_fence_acquire();
    out->gpu_start_ns = out->gpu_end_ns = out->seen_start_ns = out->seen_end_ns = 0;
    if (ng_atomic_load_relaxed(&s->w[WORD(version)]) != v1) return -1;
    if (nwords > WORD(state_word) && (out->state_word & NG_FLIGHT_END_PENDING)) {
        out->state_word &= ~(uint64_t)NG_FLIGHT_END_PENDING;
        out->flags |= NG_REC_DEFERRED; /* its end marker is not to be asked yet */
    }
    derive(out);
    return 0;
}

/* The fields of part p for record `index` into f; 0 when the part is another
 * record's (the tag is read again after the fields: had its thread moved on to a
 * newer record meanwhile, they may be that one's). */
static int read_part(struct part *p, uint64_t index, uint64_t f[NG_WATCH_NFIELDS])
{
    if (ng_atomic_load_acquire(&p->tag) != index + 1) return 0;
    for (int k = 0; k < NG_WATCH_NFIELDS; k++) f[k] = ng_atomic_load_relaxed(&p->field[k]);
    ng_atomic_fence_acquire();
    return ng_atomic_load_relaxed(&p->tag) == index + 1;
}

/* Merges into out (record `index`, copied from its slot) what lies beside it. */
static void merge_side(uint64_t index, struct ng_op_record *out)
{
    struct side *d = &sides[index & mask];
    if (ng_atomic_load_relaxed(&d->deferred_ended) == index + 1)
        out->flags &= ~(uint64_t)NG_REC_DEFERRED;
    uint64_t f[NG_WATCH_NFIELDS];
    if (read_part(&d->part[NG_WATCHER_OBSERVER], index, f)) {
        out->gpu_start_ns = (int64_t)f[NG_WATCH_GPU_START];
        out->gpu_end_ns = (int64_t)f[NG_WATCH_GPU_END];
        out->seen_start_ns = (int64_t)f[NG_WATCH_SEEN_START];
        out->seen_end_ns = (int64_t)f[NG_WATCH_SEEN_END];
        out->flags |= f[NG_WATCH_FLAGS] & NG_REC_WATCH_FLAGS;
    }
    if (read_part(&d->part[NG_WATCHER_ENFORCER], index, f))
        out->flags |= f[NG_WATCH_FLAGS] & NG_REC_WATCH_FLAGS;
}

/* True when the record in slot s has CUDA events to return: a marker, or a
 * share of its group's. */
static int holds_events(struct slot *s)
{
    /* marker is 32 bits: its half of the word it shares */
    uint64_t w = ng_atomic_load_relaxed(&s->w[WORD(marker)]);
    int32_t marker;
    memcpy(&marker, (const char *)&w + offsetof(struct ng_op_record, marker) % sizeof w,
           sizeof marker);
    return marker != NG_NO_MARKER || ng_atomic_load_relaxed(&s->w[WORD(group_id)]) != 0;
}

/*
 * Drops the unfinished record in slot s (state word `old`): a compare-and-swap
 * to the new record's state word `neu` takes it from the watchdog, since
 * whichever of the two moves it on first owns its CUDA events, so they are
 * returned exactly once; then a copy goes to the drop callback. Returns 0 when
 * the watchdog finished it first. It runs before the new record is written:
 * a reader meanwhile finds neither record, as during any overwrite.
 */
static __attribute__((noinline, cold)) int take(struct slot *s, uint64_t old, uint64_t neu)
{
    if (!ng_atomic_cas_acq_rel(&s->w[WORD(state_word)], &old, neu)) return 0;
    ng_atomic_add_relaxed(&dropped_inflight, 1);
    /* its payload is intact unless its writer is still at it, a whole lap
     * behind the others: then what it held is lost */
    struct ng_op_record gone;
    ng_flight_drop_fn fn = ng_atomic_load_acquire(&on_drop);
    if (fn && copy_words(s, old >> STATE_BITS, &gone, PAYLOAD_WORDS) == 0) {
        merge_side(old >> STATE_BITS, &gone);
        /* its writer has yet to publish its end marker: the marker is the writer's */
        if (old & NG_FLIGHT_END_PENDING) gone.flags |= NG_REC_DEFERRED;
        fn(&gone);
    }
    return 1;
}

/* Writes *rec as record i into slot s, whose state word the caller set. */
static inline __attribute__((always_inline)) void write_slot(struct slot *s, uint64_t i,
                                                             const struct ng_op_record *rec)
{
    ng_atomic_store_relaxed(&s->w[WORD(version)], 2 * i + 1);
    ng_atomic_fence_release();
    const uint64_t *src = (const uint64_t *)rec;
    /* Unrolled: relaxed atomic stores are plain moves, but the compiler does not
     * unroll a loop of them by itself (2 instructions a word instead of 4). */
#pragma GCC unroll 64
    for (size_t w = 0; w < PAYLOAD_WORDS; w++) ng_atomic_store_relaxed(&s->w[w], src[w]);
    ng_atomic_store_release(&s->w[WORD(version)], 2 * i + 2);
}

/* ncclguard_flight_append when slot s holds an unfinished record (state word
 * `old`): it is dropped. Apart, so that the common case saves no registers. */
static __attribute__((noinline, cold)) void append_over(struct slot *s, uint64_t i, uint64_t old,
                                                        const struct ng_op_record *rec, int state)
{
    uint64_t neu = pack(i, state);
    if (!holds_events(s)) {
        ng_atomic_store_relaxed(&s->w[WORD(state_word)], neu);
        ng_atomic_add_relaxed(&dropped_inflight, 1);
    } else if (!take(s, old, neu)) {
        ng_atomic_store_relaxed(&s->w[WORD(state_word)], neu);
    }
    write_slot(s, i, rec);
}

/* Writes *rec as record i, in `state`, into slot s of the ring at base. */
static inline __attribute__((always_inline)) void
append_at(struct slot *base, struct slot *s, uint64_t i, int state, const struct ng_op_record *rec)
{
    /* Only this writer owns index i. A finished old record never changes
     * again, so a load and a store replace it (no locked instruction in the
     * common case); so does an unfinished one that holds no CUDA events. */
    ng_atomic(uint64_t) *sw = &s->w[WORD(state_word)];
    uint64_t old = ng_atomic_load_acquire(sw);
    if (__builtin_expect(i >= capacity && !ng_op_state_final(STATE_OF(old)), 0)) {
        append_over(s, i, old, rec, state);
        return;
    }
    ng_atomic_store_relaxed(sw, pack(i, state));
    write_slot(s, i, rec);
    /* The ring is larger than the caches: fetch the next slot for writing now,
     * so that the next op does not wait for it. */
    const char *next = (const char *)&base[(i + 1) & mask];
#pragma GCC unroll 16
    for (size_t off = 0; off < sizeof *s; off += 64) __builtin_prefetch(next + off, 1, 3);
}

uint64_t ncclguard_flight_append(const struct ng_op_record *rec, int state)
{
    struct slot *base = ng_atomic_load_acquire(&ring);
    if (!base) return NG_FLIGHT_NONE;
    uint64_t i = ng_atomic_add_relaxed(&head, 1);
    append_at(base, &base[i & mask], i, state, rec);
    return i;
}

uint64_t ncclguard_flight_append_pending(const struct ng_op_record *rec,
                                         struct ng_flight_pending *p)
{
    struct slot *base = ng_atomic_load_acquire(&ring);
    if (__builtin_expect(!base, 0)) { /* a word the swap never matches */
        static ng_atomic(uint64_t) none = NG_FLIGHT_NONE;
        p->word = &none;
        p->value = 0;
        return NG_FLIGHT_NONE;
    }
    uint64_t i = ng_atomic_add_relaxed(&head, 1);
    struct slot *s = &base[i & mask];
    p->word = &s->w[WORD(state_word)];
    p->value = pack(i, NG_OP_SCHEDULED | NG_FLIGHT_END_PENDING);
    append_at(base, s, i, NG_OP_SCHEDULED | NG_FLIGHT_END_PENDING, rec);
    return i;
}

void ncclguard_flight_set_realtime_offset(int64_t ns)
{
    ng_atomic_store_relaxed(&realtime_offset, ns);
}

void ncclguard_flight_on_drop(ng_flight_drop_fn fn)
{
    ng_atomic_store_release(&on_drop, fn);
}

static struct slot *slot(uint64_t index)
{
    struct slot *base = ng_atomic_load_acquire(&ring);
    if (!base || index >= ng_atomic_load_acquire(&head)) return NULL;
    return &base[index & mask];
}

/* ncclguard_flight_copy of record `index` from its slot s. */
static inline __attribute__((always_inline)) int copy_from(struct slot *s, uint64_t index,
                                                           struct ng_op_record *out)
{
    if (copy_words(s, index, out, SLOT_WORDS) != 0) return -1;
    if ((out->state_word >> STATE_BITS) != index) return -1;
    merge_side(index, out);
    /* Overwritten meanwhile, what lay beside it may be its successor's already
     * (merge_side then leaves it out): no copy, rather than one without them. */
    ng_atomic_fence_acquire();
    return ng_atomic_load_relaxed(&s->w[WORD(version)]) == 2 * index + 2 ? 0 : -1;
}

int ncclguard_flight_copy(uint64_t index, struct ng_op_record *out)
{
    struct slot *s = slot(index);
    return s ? copy_from(s, index, out) : -1;
}

int ncclguard_flight_state(uint64_t index)
{
    struct slot *s = slot(index);
    if (!s) return -1;
    uint64_t w = ng_atomic_load_acquire(&s->w[WORD(state_word)]);
    return (w >> STATE_BITS) == index ? STATE_OF(w) : -1;
}

int ncclguard_flight_advance(uint64_t index, int from, int to)
{
    struct slot *s = slot(index);
    if (!s) return -1;
    uint64_t expected = pack(index, from);
    return ng_atomic_cas_acq_rel(&s->w[WORD(state_word)], &expected, pack(index, to)) ? 0 : -1;
}

void ncclguard_flight_watch_fields(uint64_t index, enum ng_watcher who, unsigned which,
                                   const uint64_t value[NG_WATCH_NFIELDS])
{
    if (!slot(index) || who >= NG_WATCHERS) return;
    struct part *p = &sides[index & mask].part[who];
    int fresh = ng_atomic_load_relaxed(&p->tag) != index + 1;
    if (fresh) { /* the part was a former record's: its fields start from 0 */
        ng_atomic_store_relaxed(&p->tag, 0);
        ng_atomic_fence_release();
    }
#pragma GCC unroll 8
    for (int f = 0; f < NG_WATCH_NFIELDS; f++) {
        uint64_t v = f == NG_WATCH_FLAGS ? value[f] & NG_REC_WATCH_FLAGS : value[f];
        if (which & (1u << f))
            ng_atomic_store_release(&p->field[f], v);
        else if (fresh)
            ng_atomic_store_relaxed(&p->field[f], 0);
    }
    if (fresh) ng_atomic_store_release(&p->tag, index + 1);
}

void ncclguard_flight_watch(uint64_t index, enum ng_watcher who, enum ng_watch_field field,
                            uint64_t value)
{
    uint64_t v[NG_WATCH_NFIELDS] = {0};
    if (field >= NG_WATCH_NFIELDS) return;
    v[field] = value;
    ncclguard_flight_watch_fields(index, who, 1u << field, v);
}

void ncclguard_flight_end_deferred(uint64_t index)
{
    if (slot(index)) ng_atomic_store_release(&sides[index & mask].deferred_ended, index + 1);
}

void ncclguard_flight_walk(ng_flight_fn fn, void *ctx)
{
    uint64_t end = ncclguard_flight_head();
    for (uint64_t i = end > capacity ? end - capacity : 0; i < end; i++) {
        struct ng_op_record r;
        if (ncclguard_flight_copy(i, &r) == 0 && !ng_op_state_final(ng_record_state(&r)))
            fn(i, &r, ctx);
    }
}

/* Record i to fn: 1 when taken, or gone (overwritten before it was taken); 0
 * while it is still being written. */
static int read_one(struct slot *base, uint64_t i, ng_flight_fn fn, void *ctx)
{
    struct ng_op_record r;
    if (copy_from(&base[i & mask], i, &r) == 0) { /* i is below the head: its slot is there */
        fn(i, &r, ctx);
        return 1;
    }
    return ncclguard_flight_state(i) < 0 && ncclguard_flight_head() - i > capacity;
}

void ncclguard_flight_read(struct ng_flight_reader *rd, ng_flight_fn fn, void *ctx)
{
    uint64_t end = ncclguard_flight_head();
    struct slot *base = ng_atomic_load_acquire(&ring);
    if (!base) return;
    int n = 0;
    for (int k = 0; k < rd->nlate; k++)
        if (!read_one(base, rd->late[k], fn, ctx)) rd->late[n++] = rd->late[k];
    rd->nlate = n;
    if (end - rd->next > capacity) rd->next = end - capacity;
    for (; rd->next < end; rd->next++)
        if (!read_one(base, rd->next, fn, ctx)) {
            if (rd->nlate == NG_FLIGHT_LATE) break;
            rd->late[rd->nlate++] = rd->next;
        }
}

uint64_t ncclguard_flight_head(void)
{
    return ng_atomic_load_acquire(&head);
}

void ncclguard_flight_stats(struct ng_flight_stats *out)
{
    uint64_t h = ncclguard_flight_head();
    out->recorded = h;
    out->capacity = capacity;
    out->bytes = capacity * (sizeof(struct slot) + sizeof(struct side));
    out->overwritten = h > capacity ? h - capacity : 0;
    out->dropped_inflight = ng_atomic_load_relaxed(&dropped_inflight);
}

void ncclguard_flight_atfork_child(void)
{
    struct slot *base = ng_atomic_load_acquire(&ring);
    if (!base) return;
    for (uint64_t i = 0; i < capacity; i++) {
        ng_atomic_store_relaxed(&base[i].w[WORD(state_word)], pack(i - capacity, NG_OP_COMPLETED));
        ng_atomic_store_relaxed(&base[i].w[WORD(version)], 0);
    }
    memset(sides, 0, capacity * sizeof *sides);
    ng_atomic_store_relaxed(&head, 0);
    ng_atomic_store_relaxed(&dropped_inflight, 0);
}
