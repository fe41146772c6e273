/*
 * lanes.c: see lanes.h. A lane is a doubly linked list threaded through the
 * nodes, one per slot of the ring (node = slot + 1; 0 is none), so that a
 * record overwritten in the middle of a lane leaves it at once. The lanes of a
 * communicator hang from comm_lanes[]; lanes not in use are chained through
 * `next` from free_lanes.
 */
#include "watch/lanes.h"

#include <string.h>
#include <sys/mman.h>

#include "base/mem.h"

struct node {
    uint64_t index;
    uint32_t lane; /* 0: in none */
    uint32_t older, newer;
};

static struct node *nodes;    /* capacity + 1, node 0 unused */
static struct ng_lane *lanes; /* capacity + 1, lane 0 unused */
static size_t mapped;
static uint64_t mask;
static uint32_t nlanes;     /* lanes 1 .. nlanes have been used */
static uint32_t free_lanes; /* 0: none */
/* The communicators whose lanes are listed together: one per registry slot,
 * and one for the records without a communicator. */
#define COMMS (NG_MAX_COMMS + 1)
static uint32_t comm_lanes[COMMS];
static uint32_t ncomms; /* keys 0 .. ncomms - 1 have had lanes */

int ncclguard_lanes_init(uint64_t capacity)
{
    if (nodes) return 0;
    size_t len = (capacity + 1) * (sizeof *nodes + sizeof *lanes);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    ncclguard_mem_add(len);
    nodes = p;
    lanes = (struct ng_lane *)(nodes + capacity + 1);
    mapped = len;
    mask = capacity - 1;
    return 0;
}

/* Communicator keys: 0 for records without a communicator, else the slot + 1. */
static uint32_t comm_key(int64_t comm_slot)
{
    return comm_slot >= 0 && comm_slot < NG_MAX_COMMS ? (uint32_t)comm_slot + 1 : 0;
}

int ncclguard_lanes_comms(void)
{
    return (int)ncomms;
}

/* CU_STREAM_PER_THREAD (cuda.h) and cudaStreamPerThread: not included here,
 * the watchdog's lanes know no CUDA. */
#define PER_THREAD_STREAM 0x2

/* A lane's stream key: the handle, but for the per-thread stream, where it is
 * the thread with the handle's low bits, which no stream handle (an aligned
 * pointer, or 0x1 or 0x2) has with another thread's. */
static uint64_t stream_key(uint64_t stream, uint64_t thread_id)
{
    return stream == PER_THREAD_STREAM ? thread_id << 2 | PER_THREAD_STREAM : stream;
}

uint32_t ncclguard_lane_of(int64_t comm_slot, uint64_t stream, uint64_t thread_id, int create)
{
    uint32_t comm = comm_key(comm_slot);
    stream = stream_key(stream, thread_id);
    for (uint32_t id = comm_lanes[comm]; id; id = lanes[id].next)
        if (lanes[id].stream == stream) return id;
    if (!create) return 0;
    /* There is one: fewer lanes are in use than records are filed, and fewer
     * records than slots, the caller's being vacant. */
    uint32_t id = free_lanes;
    if (id)
        free_lanes = lanes[id].next;
    else
        id = ++nlanes;
    lanes[id] = (struct ng_lane){.stream = stream, .next = comm_lanes[comm], .comm = comm};
    comm_lanes[comm] = id;
    if (comm >= ncomms) ncomms = comm + 1;
    return id;
}

struct ng_lane *ncclguard_lane(uint32_t lane)
{
    return &lanes[lane];
}

uint32_t ncclguard_lanes_first(int comm)
{
    return comm_lanes[comm];
}

static uint32_t node_of(uint64_t index)
{
    return (uint32_t)(index & mask) + 1;
}

void ncclguard_lanes_vacate(uint64_t index)
{
    uint32_t n = node_of(index);
    if (nodes[n].lane) ncclguard_node_remove(n);
}

uint32_t ncclguard_lane_file(uint32_t lane, uint64_t index)
{
    struct ng_lane *l = &lanes[lane];
    uint32_t n = node_of(index), older = l->newest;
    /* Records come in index order, but for one still being written when the
     * reader first reached it: that one goes in its place. */
    while (older && nodes[older].index > index) older = nodes[older].older;
    uint32_t newer = older ? nodes[older].newer : l->oldest;
    nodes[n] = (struct node){index, lane, older, newer};
    l->idle = 0;
    if (older)
        nodes[older].newer = n;
    else
        l->oldest = n;
    if (newer)
        nodes[newer].older = n;
    else
        l->newest = n;
    return n;
}

uint64_t ncclguard_node_index(uint32_t node)
{
    return nodes[node].index;
}

uint32_t ncclguard_node_newer(uint32_t node)
{
    return nodes[node].newer;
}

static void free_lane(uint32_t id)
{
    uint32_t *at = &comm_lanes[lanes[id].comm];
    while (*at != id) at = &lanes[*at].next;
    *at = lanes[id].next;
    lanes[id].next = free_lanes;
    free_lanes = id;
}

void ncclguard_node_remove(uint32_t node)
{
    struct node *d = &nodes[node];
    struct ng_lane *l = &lanes[d->lane];
    if (d->older)
        nodes[d->older].newer = d->newer;
    else
        l->oldest = d->newer;
    if (d->newer)
        nodes[d->newer].older = d->older;
    else
        l->newest = d->older;
    if (l->front == node) l->front = 0;
    if (!l->oldest) free_lane(d->lane);
    d->lane = 0;
}

void ncclguard_lanes_atfork_child(void)
{
    /* unmapped rather than cleared: a large ring's tables are mostly zero pages */
    if (nodes) munmap(nodes, mapped);
    nodes = NULL;
    lanes = NULL;
    nlanes = free_lanes = ncomms = 0;
    memset(comm_lanes, 0, sizeof comm_lanes);
}
