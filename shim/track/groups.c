/* groups.c: see groups.h. A ring like the flight recorder's, with one entry
 * per (group, stream); entries are looked up from the newest backwards. */
#include "track/groups.h"

#include <string.h>
#include <sys/mman.h>

#include "base/mem.h"
#include "base/atomic.h"
#include "track/markers.h"

struct entry {
    ng_atomic(uint64_t) group_id; /* written last */
    ng_atomic(uint64_t) stream;
    ng_atomic(int64_t) place;
    ng_atomic(int64_t) marker;
    ng_atomic(int64_t) refs;
};

static ng_atomic(struct entry *) table;
static uint64_t capacity; /* written before `table` is published */
static ng_atomic(uint64_t) head;

void ncclguard_groups_init(uint64_t cap)
{
    if (ng_atomic_load_acquire(&table)) return;
    void *p = mmap(NULL, cap * sizeof(struct entry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    ncclguard_mem_add(cap * sizeof(struct entry));
    capacity = cap;
    ng_atomic_store_release(&table, (struct entry *)p);
}

void ncclguard_group_publish(uint64_t group_id, int place, uint64_t stream, int marker, int refs)
{
    struct entry *t = ng_atomic_load_acquire(&table);
    if (!t) {
        if (marker >= 0) ncclguard_marker_release(marker);
        return;
    }
    uint64_t i = ng_atomic_add_relaxed(&head, 1);
    struct entry *e = &t[i % capacity];
    ng_atomic_store_relaxed(&e->group_id, 0);
    ng_atomic_store_relaxed(&e->stream, stream);
    ng_atomic_store_relaxed(&e->place, place);
    ng_atomic_store_relaxed(&e->marker, marker);
    ng_atomic_store_relaxed(&e->refs, refs);
    ng_atomic_store_release(&e->group_id, group_id);
}

/* The entry of r's group for its stream, or for the place it follows. */
static struct entry *lookup(const struct ng_op_record *r)
{
    struct entry *t = ng_atomic_load_acquire(&table);
    if (!t) return NULL;
    int follows = (r->flags & NG_REC_FOLLOWS) != 0, place = NG_REC_PLACE(r->flags);
    uint64_t h = ng_atomic_load_acquire(&head);
    for (uint64_t n = 0; n < capacity && n < h; n++) {
        struct entry *e = &t[(h - 1 - n) % capacity];
        if (ng_atomic_load_acquire(&e->group_id) != r->group_id) continue;
        if (follows ? ng_atomic_load_relaxed(&e->place) == place
                    : ng_atomic_load_relaxed(&e->stream) == r->stream)
            return e;
    }
    return NULL;
}

int ncclguard_group_find(const struct ng_op_record *r)
{
    struct entry *e = lookup(r);
    return e ? (int)ng_atomic_load_relaxed(&e->marker) : -1;
}

void ncclguard_group_put(const struct ng_op_record *r)
{
    struct entry *e = lookup(r);
    if (e && ng_atomic_sub_acq_rel(&e->refs, 1) == 1) {
        int64_t marker = ng_atomic_load_relaxed(&e->marker);
        if (marker >= 0) ncclguard_marker_release((int)marker);
    }
}

void ncclguard_groups_atfork_child(void)
{
    struct entry *t = ng_atomic_load_relaxed(&table);
    if (t) memset(t, 0, capacity * sizeof *t);
    ng_atomic_store_relaxed(&head, 0);
}
