/* groups.c: see groups.h. A ring like the flight recorder's, with one entry
 * per (group, stream); entries are looked up from the newest backwards. */
#include "track/groups.h"

#include <string.h>
#include <sys/mman.h>

#include "base/atomic.h"
#include "track/markers.h"

struct entry {
    ng_atomic(uint64_t) group_id; /* written last */
    ng_atomic(uint64_t) stream;
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
    capacity = cap;
    ng_atomic_store_release(&table, (struct entry *)p);
}

void ncclguard_group_publish(uint64_t group_id, uint64_t stream, int marker, int refs)
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
    ng_atomic_store_relaxed(&e->marker, marker);
    ng_atomic_store_relaxed(&e->refs, refs);
    ng_atomic_store_release(&e->group_id, group_id);
}

static struct entry *lookup(uint64_t group_id, uint64_t stream)
{
    struct entry *t = ng_atomic_load_acquire(&table);
    if (!t) return NULL;
    uint64_t h = ng_atomic_load_acquire(&head);
    for (uint64_t n = 0; n < capacity && n < h; n++) {
        struct entry *e = &t[(h - 1 - n) % capacity];
        if (ng_atomic_load_acquire(&e->group_id) == group_id &&
            ng_atomic_load_relaxed(&e->stream) == stream)
            return e;
    }
    return NULL;
}

int ncclguard_group_find(uint64_t group_id, uint64_t stream)
{
    struct entry *e = lookup(group_id, stream);
    return e ? (int)ng_atomic_load_relaxed(&e->marker) : -1;
}

void ncclguard_group_put(uint64_t group_id, uint64_t stream)
{
    struct entry *e = lookup(group_id, stream);
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
