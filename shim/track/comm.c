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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"

#define MAX_COMMS 1024
#define MAP_SLOTS 4096 /* power of two, > 2 * MAX_COMMS */
#define TOMBSTONE ((uintptr_t)1)

struct slot {
    uintptr_t key; /* handle, 0 (never used) or TOMBSTONE; atomic */
    int index;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ng_comm *records; /* MAX_COMMS, allocated at the first creation */
static struct slot *map;        /* MAP_SLOTS */
static int nrecords;            /* atomic */

uint64_t ncclguard_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
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
        records = calloc(MAX_COMMS, sizeof *records);
        map = calloc(MAP_SLOTS, sizeof *map);
        if (!records || !map) {
            free(records);
            free(map);
            records = NULL;
            map = NULL;
        }
    }
    struct ng_comm *c = NULL;
    if (records && nrecords < MAX_COMMS) {
        c = &records[nrecords];
        memset(c, 0, sizeof *c);
        c->id = id;
        c->slot = nrecords;
        c->rank = rank;
        c->nranks = nranks;
        c->device = -1;
        c->blocking = 1;
        c->parent_id = parent_id;
        c->created_ns = ng_clock_ns(CLOCK_REALTIME);
        c->peers = peers;
        c->npeers = peers ? nranks : 0;
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
        __atomic_store_n(&nrecords, nrecords + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    free(peers);
    if (!c) NG_WARN_ONCE("more than %d communicators: the newest ones are not tracked", MAX_COMMS);
    return c;
}

void ncclguard_comm_attach(struct ng_comm *c, ncclComm_t handle)
{
    if (!c || !handle) return;
    pthread_mutex_lock(&lock);
    __atomic_store_n(&c->handle, handle, __ATOMIC_RELEASE);
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key), reuse = MAP_SLOTS;
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        uintptr_t k = map[i].key;
        if (k == TOMBSTONE && reuse == MAP_SLOTS) reuse = i;
        if (k == key || k == 0) {
            if (k == 0 && reuse != MAP_SLOTS) i = reuse;
            break;
        }
    }
    map[i].index = (int)(c - records);
    __atomic_store_n(&map[i].key, key, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

struct ng_comm *ncclguard_comm_find(ncclComm_t handle)
{
    struct slot *m = __atomic_load_n(&map, __ATOMIC_ACQUIRE);
    if (!m || !handle) return NULL;
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key);
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&m[i].key, __ATOMIC_ACQUIRE);
        if (k == key) return &records[m[i].index];
        if (k == 0) return NULL;
    }
    return NULL;
}

void ncclguard_comm_set_state(struct ng_comm *c, enum ng_comm_state s)
{
    if (!c) return;
    __atomic_store_n(&c->state, (int)s, __ATOMIC_RELEASE);
    ncclComm_t handle = ncclguard_comm_handle(c);
    if ((s != NG_COMM_DESTROYED && s != NG_COMM_ABORTED) || !handle) return;
    pthread_mutex_lock(&lock);
    uintptr_t key = (uintptr_t)handle;
    size_t i = slot_of(key);
    for (size_t n = 0; n < MAP_SLOTS; n++, i = (i + 1) & (MAP_SLOTS - 1)) {
        if (map[i].key == 0) break;
        if (map[i].key == key && &records[map[i].index] == c) {
            __atomic_store_n(&map[i].key, TOMBSTONE, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

void ncclguard_comm_reserve_peers(struct ng_comm *c, int npeers)
{
    if (!c || c->peers || npeers <= 0) return;
    struct ng_peer *peers = calloc((size_t)npeers, sizeof *peers);
    if (!peers) return;
    c->npeers = npeers;
    __atomic_store_n(&c->peers, peers, __ATOMIC_RELEASE); /* a dump may be reading */
}

ncclComm_t ncclguard_comm_handle(const struct ng_comm *c)
{
    return __atomic_load_n(&c->handle, __ATOMIC_ACQUIRE);
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
    return __atomic_load_n(&nrecords, __ATOMIC_ACQUIRE);
}

struct ng_comm *ncclguard_comm_at(int i)
{
    return i >= 0 && i < ncclguard_comm_count() ? &records[i] : NULL;
}

const char *ncclguard_comm_state_name(int s)
{
    static const char *const names[] = {"initializing", "ready",     "finalizing", "revoked",
                                        "aborted",      "destroyed", "failed"};
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
        for (int i = 0; i < nrecords; i++) free(records[i].peers);
        memset(records, 0, MAX_COMMS * sizeof *records);
        memset(map, 0, MAP_SLOTS * sizeof *map);
    }
    nrecords = 0;
}
