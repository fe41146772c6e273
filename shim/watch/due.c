/* due.c: see due.h. A binary heap in an array. */
#include "watch/due.h"

#include <stddef.h>
#include <sys/mman.h>

#include "base/mem.h"

static struct ng_due *heap;
static uint64_t room, count;

int ncclguard_due_init(uint64_t n)
{
    if (heap) return 0;
    void *p = mmap(NULL, n * sizeof *heap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
    if (p == MAP_FAILED) return -1;
    ncclguard_mem_add(n * sizeof *heap);
    heap = p;
    room = n;
    return 0;
}

static int before(const struct ng_due *a, const struct ng_due *b)
{
    return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->index < b->index);
}

static void sift_up(uint64_t i)
{
    struct ng_due e = heap[i];
    while (i > 0 && before(&e, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = e;
}

static void sift_down(uint64_t i)
{
    struct ng_due e = heap[i];
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= count) break;
        if (c + 1 < count && before(&heap[c + 1], &heap[c])) c++;
        if (!before(&heap[c], &e)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = e;
}

int ncclguard_due_push(int64_t at_ns, uint64_t index)
{
    if (count == room) return -1;
    heap[count] = (struct ng_due){at_ns, index};
    sift_up(count++);
    return 0;
}

int ncclguard_due_peek(struct ng_due *out)
{
    if (!count) return 0;
    *out = heap[0];
    return 1;
}

void ncclguard_due_pop(void)
{
    if (!count) return;
    heap[0] = heap[--count];
    if (count) sift_down(0);
}

void ncclguard_due_prune(int (*keep)(uint64_t index))
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < count; i++)
        if (keep(heap[i].index)) heap[n++] = heap[i];
    count = n;
    for (uint64_t i = count / 2; i-- > 0;) sift_down(i);
}

void ncclguard_due_clear(void)
{
    count = 0;
}
