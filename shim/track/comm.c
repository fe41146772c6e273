/*
 * comm.c: see comm.h.
 *
 * The handle map is an open-addressing table of (handle, record index) slots.
 * Writers hold `lock`; readers probe without it. A writer fills `index` before
 * it publishes `key` with release order, and a reader loads `key` with acquire
 * order before it reads `index`, so a reader that sees its handle also sees the
 * right record. A destroyed handle's slot gets the TOMBSTONE key and may later
 * be reused, for instance when NCCL hands out the same address again.
 */
#include "track/comm.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "base/clock.h"
#include "base/log.h"

#define MAP_SLOTS 4096 /* power of two, > 2 * NG_MAX_COMMS */
#define TOMBSTONE ((uintptr_t)1)

_Static_assert(MAP_SLOTS > 2 * NG_MAX_COMMS, "the map stays sparse");

struct slot {
    ng_atomic(uintptr_t) key; /* handle, 0 (never used) or TOMBSTONE */
    int index;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ng_comm *records;      /* NG_MAX_COMMS, allocated at the first creation */
static ng_atomic(struct slot *) map; /* MAP_SLOTS */
static ng_atomic(int) nrecords;
NG_HIDDEN ng_atomic(uint64_t) ncclguard_comm_map_version;

/* The map changed (under `lock`, after the change): lookups kept by threads are
 * stale. */
static void map_changed(void)
{
    ng_atomic_store_release(&ncclguard_comm_map_version,
                            ng_atomic_load_relaxed(&ncclguard_comm_map_version) + 1);
}

static size_t slot_of(uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 52) & (MAP_SLOTS - 1);
}

struct ng_comm *ncclguard_comm_new(uint64_t id, int rank, int nranks, uint64_t parent_id,
                                   const ncclConfig_t *config)
{
    struct ng_peer *peers = nranks > 0 ? calloc((size_t)nranks, sizeof *peers) : NULL;
    pthread_mutex_lock(&lock);
    if (!records) {
        records = calloc(NG_MAX_COMMS, sizeof *records);
        struct slot *m = calloc(MAP_SLOTS, sizeof *m);
        if (!records || !m) {
            free(records);
            free(m);
            records = NULL;
        } else {
            ncclguard_mem_add(NG_MAX_COMMS * sizeof *records + MAP_SLOTS * sizeof *m);
            ng_atomic_store_release(&map, m);
        }
    }
    struct ng_comm *c = NULL;
    int n = ng_atomic_load_relaxed(&nrecords);
    if (records && n < NG_MAX_COMMS) {
        c = &records[n];
        memset(c, 0, sizeof *c);
        c->id = id;
        c->slot = n;
        ng_atomic_store_relaxed(&c->rank, rank);
        ng_atomic_store_relaxed(&c->nranks, nranks);
        ng_atomic_store_relaxed(&c->device, -1);
        c->blocking = 1;
        ng_atomic_store_relaxed(&c->seen, NG_SEEN_WRAPPERS);
        c->parent_id = parent_id;
        c->created_ns = ng_clock_ns(CLOCK_REALTIME);
        c->npeers = peers ? nranks : 0;
        ncclguard_mem_add((size_t)c->npeers * sizeof *peers);
        ng_atomic_store_relaxed(&c->peers, peers);
        pthread_mutex_init(&c->poll_lock, NULL);
        peers = NULL;
        /* The config is the caller's; read only the fields this version of nccl.h
         * defines, and only when the caller's struct is at least that large. */
        if (config && config->size >= sizeof(ncclConfig_t)) {
            if (config->blocking == 0) c->blocking = 0;
            if (config->commName) {
                strncpy(c->name, config->commName, sizeof c->name - 1);
            }
        }
        ng_atomic_store_release(&nrecords, n + 1);
    }
    pthread_mutex_unlock(&lock);
    free(peers);
    if (!c)
        NG_WARN_ONCE("more than %d communicators: the newest ones are not tracked", NG_MAX_COMMS);
    return c;
}

void ncclguard_comm_attach(struct ng_comm *c, ncclComm_t handle)
{
    if (!c || !handle) return;
    pthread_mutex_lock(&lock);
    ng_atomic_store_release(&c->handle, handle);
    struct slot *m = ng_atomic_load_relaxed(&map);
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key), reuse = MAP_SLOTS;
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        uintptr_t k = ng_atomic_load_relaxed(&m[i].key);
        if (k == TOMBSTONE && reuse == MAP_SLOTS) reuse = i;
        if (k == key || k == 0) {
            if (k == 0 && reuse != MAP_SLOTS) i = reuse;
            break;
        }
    }
    m[i].index = (int)(c - records);
    ng_atomic_store_release(&m[i].key, key);
    map_changed();
    pthread_mutex_unlock(&lock);
}

struct ng_comm *ncclguard_comm_find(ncclComm_t handle)
{
    struct slot *m = ng_atomic_load_acquire(&map);
    if (!m || !handle) return NULL;
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key);
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        uintptr_t k = ng_atomic_load_acquire(&m[i].key);
        if (k == key) return &records[m[i].index];
        if (k == 0) return NULL;
    }
    return NULL;
}

struct ng_comm *ncclguard_comm_enter(struct ng_comm *c)
{
    if (!c || c->blocking) return NULL;
    ng_atomic_add_seq_cst(&c->app_inside, 1);
    while (ng_atomic_load_seq_cst(&c->observer_inside)) sched_yield();
    return c;
}

int ncclguard_comm_observe_begin(struct ng_comm *c)
{
    if (c->blocking) return 1;
    ng_atomic_store_seq_cst(&c->observer_inside, 1);
    if (!ng_atomic_load_seq_cst(&c->app_inside)) return 1;
    ng_atomic_store_seq_cst(&c->observer_inside, 0);
    return 0;
}

void ncclguard_comm_observe_end(struct ng_comm *c)
{
    if (!c->blocking) ng_atomic_store_seq_cst(&c->observer_inside, 0);
}

void ncclguard_comm_set_state(struct ng_comm *c, enum ng_comm_state s)
{
    if (!c) return;
    ng_atomic_store_release(&c->state, (int)s);
    ncclComm_t handle = ncclguard_comm_handle(c);
    if ((s != NG_COMM_DESTROYED && s != NG_COMM_ABORTED) || !handle) return;
    pthread_mutex_lock(&lock);
    struct slot *m = ng_atomic_load_relaxed(&map);
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key);
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        uintptr_t k = ng_atomic_load_relaxed(&m[i].key);
        if (k == 0) break;
        if (k == key && &records[m[i].index] == c) {
            ng_atomic_store_release(&m[i].key, TOMBSTONE);
            map_changed();
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

void ncclguard_comm_reserve_peers(struct ng_comm *c, int npeers)
{
    if (!c || ng_atomic_load_relaxed(&c->peers) || npeers <= 0) return;
    struct ng_peer *peers = calloc((size_t)npeers, sizeof *peers);
    if (!peers) return;
    ncclguard_mem_add((size_t)npeers * sizeof *peers);
    c->npeers = npeers;
    ng_atomic_store_release(&c->peers, peers); /* a dump may be reading */
}

void ncclguard_comm_count_completed(struct ng_comm *c, uint64_t seq, int peer, uint64_t p2p_seq)
{
    ng_atomic(uint64_t) *done = NULL;
    if (!c) return;
    struct ng_peer *peers = ng_atomic_load_acquire(&c->peers);
    if (seq) {
        done = &c->completed_seq;
    } else if (peers && peer >= 0 && peer < c->npeers) {
        done = &peers[peer].done;
        seq = p2p_seq;
    }
    /* Only the watchdog writes them; the state it publishes next orders this. */
    if (done && seq > ng_atomic_load_relaxed(done)) ng_atomic_store_relaxed(done, seq);
}

ncclComm_t ncclguard_comm_handle(struct ng_comm *c)
{
    return ng_atomic_load_acquire(&c->handle);
}

int ncclguard_comm_index(const struct ng_comm *c)
{
    return c ? (int)(c - records) : -1;
}

void ncclguard_comm_set_ending(struct ng_comm *c, int ending)
{
    if (!c) return;
    pthread_mutex_lock(&c->poll_lock);
    c->ending = ending;
    pthread_mutex_unlock(&c->poll_lock);
}

int ncclguard_comm_count(void)
{
    return ng_atomic_load_acquire(&nrecords);
}

struct ng_comm *ncclguard_comm_at(int i)
{
    return i >= 0 && i < ncclguard_comm_count() ? &records[i] : NULL;
}

const char *ncclguard_comm_state_name(int s)
{
    static const char *const names[] = {"initializing", "ready",     "finalizing", "revoked",
                                        "aborted",      "destroyed", "failed"};
    _Static_assert(sizeof names / sizeof names[0] == NG_COMM_FAILED + 1, "one name per state");
    return s >= 0 && s <= NG_COMM_FAILED ? names[s] : "unknown";
}

void ncclguard_comm_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void ncclguard_comm_atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

/* The child keeps the memory (it is a copy) but forgets every record: the
 * parent's communicators are not usable in the child, as in NCCL. */
void ncclguard_comm_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    if (records) {
        for (int i = 0; i < ng_atomic_load_relaxed(&nrecords); i++)
            free(ng_atomic_load_relaxed(&records[i].peers));
        memset(records, 0, NG_MAX_COMMS * sizeof *records);
        memset(ng_atomic_load_relaxed(&map), 0, MAP_SLOTS * sizeof(struct slot));
    }
    ng_atomic_store_relaxed(&nrecords, 0);
    map_changed();
}
