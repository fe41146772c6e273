/* groups.c: see groups.h. A ring like the flight recorder's, with one entry
 * per (group, stream); entries are looked up from the newest backwards. */
#include "track/groups.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "track/markers.h"

struct entry {
    uint64_t group_id; /* atomic; written last */
    uint64_t stream;
    int64_t marker;
    int64_t refs; /* atomic */
};

static struct entry *table;
static uint64_t capacity, head; /* head atomic */

void ncclguard_groups_init(uint64_t cap)
{
    if (table) return;
    void *p = mmap(NULL, cap * sizeof *table, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    capacity = cap;
    __atomic_store_n(&table, (struct entry *)p, __ATOMIC_RELEASE);
}

void ncclguard_group_publish(uint64_t group_id, uint64_t stream, int marker, int refs)
{
    struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t) {
        if (marker >= 0) ncclguard_gpu_marker_release(marker);
        return;
    }
    uint64_t i = __atomic_fetch_add(&head, 1, __ATOMIC_RELAXED);
    struct entry *e = &t[i % capacity];
    __atomic_store_n(&e->group_id, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->stream, stream, __ATOMIC_RELAXED);
    __atomic_store_n(&e->marker, marker, __ATOMIC_RELAXED);
    __atomic_store_n(&e->refs, refs, __ATOMIC_RELAXED);
    __atomic_store_n(&e->group_id, group_id, __ATOMIC_RELEASE);
}

static struct entry *lookup(uint64_t group_id, uint64_t stream)
{
    struct entry *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t) return NULL;
    uint64_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE);
    for (uint64_t n = 0; n < capacity && n < h; n++) {
        struct entry *e = &t[(h - 1 - n) % capacity];
        if (__atomic_load_n(&e->group_id, __ATOMIC_ACQUIRE) == group_id &&
            __atomic_load_n(&e->stream, __ATOMIC_RELAXED) == stream)
            return e;
    }
    return NULL;
}

int ncclguard_group_find(uint64_t group_id, uint64_t stream)
{
    struct entry *e = lookup(group_id, stream);
    return e ? (int)__atomic_load_n(&e->marker, __ATOMIC_RELAXED) : -1;
}

void ncclguard_group_put(uint64_t group_id, uint64_t stream)
{
    struct entry *e = lookup(group_id, stream);
    if (e && __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0 && e->marker >= 0)
        ncclguard_gpu_marker_release((int)e->marker);
}

void ncclguard_groups_atfork_child(void)
{
    if (table) memset(table, 0, capacity * sizeof *table);
    head = 0;
}
