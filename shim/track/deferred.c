/* deferred.c: see deferred.h. */
#include "track/deferred.h"

#include <pthread.h>

#include "base/atomic.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/markers.h"

#define DEFERRED_MAX 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ng_deferred table[DEFERRED_MAX];
static ng_atomic(int) count; /* written under the lock; read without it for emptiness */

/*
 * Records the end marker of `d` now and makes it visible to the watchdog. When
 * the record has meanwhile finished (aborted) or left the ring, the marker is
 * returned here.
 */
static void end_deferred(const struct ng_deferred *d)
{
    ncclguard_marker_end(d->marker, (void *)(uintptr_t)d->stream);
    if (d->group_id) {
        ncclguard_group_publish(d->group_id, (int)d->index, d->stream, d->marker, d->refs);
        return;
    }
    struct ng_op_record r;
    if (ncclguard_flight_copy(d->index, &r) == 0 && !ng_op_state_final(ng_record_state(&r)))
        ncclguard_flight_end_deferred(d->index);
    else
        ncclguard_marker_release(d->marker);
}

void ncclguard_defer(const struct ng_deferred *d)
{
    pthread_mutex_lock(&lock);
    int n = ng_atomic_load_relaxed(&count), kept = n < DEFERRED_MAX;
    if (kept) {
        table[n] = *d;
        ng_atomic_store_release(&count, n + 1);
    }
    pthread_mutex_unlock(&lock);
    if (!kept) end_deferred(d);
}

void ncclguard_flush_deferred(int slot)
{
    if (!ng_atomic_load_acquire(&count)) return;
    pthread_mutex_lock(&lock);
    int n = ng_atomic_load_relaxed(&count);
    for (int i = 0; i < n;) {
        if (slot >= 0 && table[i].comm_slot != slot && table[i].comm_slot >= 0) {
            i++;
            continue;
        }
        end_deferred(&table[i]);
        table[i] = table[--n];
    }
    ng_atomic_store_release(&count, n);
    pthread_mutex_unlock(&lock);
}

void ncclguard_deferred_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    ng_atomic_store_relaxed(&count, 0);
}
