/* track.c: see track.h. */
#include "track/track.h"

#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "track/deferred.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/markers.h"
#include "track/stacks.h"

ng_atomic(int) ncclguard_tracking;
enum ng_track_mode ncclguard_track_mode = NG_TRACK_FULL;
int ncclguard_timing_sample = 16;

static struct ng_track_observer observer; /* set before any thread reads it */

/* A record overwritten in the ring before it finished: the watchdog will not
 * see it finish, so its events go back to the pool now. */
static void release_dropped(const struct ng_op_record *r)
{
    if (r->flags & NG_REC_DEFERRED) return; /* the deferred entry returns it */
    if (r->marker != NG_NO_MARKER)
        ncclguard_marker_release((int)r->marker);
    else if (r->group_id)
        ncclguard_group_put(r);
}

void ncclguard_track_refresh_clock(void)
{
    ncclguard_flight_set_realtime_offset(ng_clock_ns(CLOCK_REALTIME) -
                                         ng_clock_ns(CLOCK_MONOTONIC));
}

int ncclguard_track_start(const struct ng_track_params *p)
{
    ncclguard_track_mode = p->mode;
    ncclguard_timing_sample = p->timing_sample;
    observer = p->observer;
    ncclguard_track_refresh_clock();
    if (ncclguard_flight_init(p->ring) != 0) {
        NG_WARN("cannot allocate the flight recorder (%llu records): tracking is off",
                (unsigned long long)p->ring);
        ng_atomic_store_release(&ncclguard_tracking, 0);
        return -1;
    }
    ncclguard_flight_on_drop(release_dropped);
    ncclguard_groups_init(p->ring);
    ncclguard_stacks_init(p->stack_depth);
    if (p->mode != NG_TRACK_OFF) {
        /* A marker for each record of the ring, and a few for the ops being
         * enqueued: each takes its marker before its record drops an
         * unfinished one, which returns that one's marker. */
        struct ng_flight_stats fs;
        ncclguard_flight_stats(&fs);
        ncclguard_markers_set_pool_size(fs.capacity + 64);
        ncclguard_markers_set_anchor_period(p->anchor_period_ns);
        ncclguard_markers_set_timing_sample(p->timing_sample);
        ncclguard_markers_open();
    }
    return 0;
}

void ncclguard_track_settle(void)
{
    if (observer.settle) observer.settle();
}

void ncclguard_track_async_error(struct ng_comm *c, int err)
{
    if (observer.async_error) observer.async_error(c, err);
}

ng_atomic(int) ncclguard_track_resting;

void ncclguard_track_wake(void)
{
    if (observer.wake) observer.wake();
}

void ncclguard_track_atfork_child(void)
{
    ncclguard_flight_atfork_child();
    ncclguard_groups_atfork_child();
    ncclguard_deferred_atfork_child();
}
