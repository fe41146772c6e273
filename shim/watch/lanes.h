/*
 * lanes.h: the observer's ops in flight, in lanes: one lane per (communicator,
 * stream), holding the indices of its records oldest first.
 *
 * A stream runs its work in order, so the GPU finishes a lane's ops oldest
 * first: the observer asks the oldest unfinished one of each lane, and the
 * next only once it is done. NCCL also runs one communicator's kernels one
 * after another, which the observer checks on the lanes of that communicator,
 * listed together. A pass thus costs the lanes and the ops that move on, not
 * the ops in flight.
 *
 * Bounds: one node per slot of the flight recorder, and as many lanes. A
 * record is in at most one lane, only while it holds its slot, and a lane
 * exists only while it holds a record, so neither table can be full: an op
 * never goes unfollowed for want of room, however many streams there are.
 * Before a record is filed, the one that held its slot leaves its lane
 * (ncclguard_lanes_vacate: it was overwritten in flight, and its writer took
 * it over). The tables are mmap'ed once: zero pages until used.
 *
 * Threads: the observer's pass only (under its lock).
 */
#ifndef NCCLGUARD_LANES_H
#define NCCLGUARD_LANES_H

#include <stdint.h>

#include "track/comm.h"

struct ng_lane {
    uint64_t stream;         /* its key: the handle, or the thread's for the per-thread stream */
    uint32_t oldest, newest; /* its nodes; never empty */
    uint32_t next;           /* the next lane of its communicator (0: the last) */
    uint32_t comm;           /* its communicator's registry slot + 1; 0: none */
    /* The observer's: the lane's oldest op that the GPU has not finished (its
     * node, 0: none; its record), its state, the marker it is asked by, what
     * that said at the last query (enum ng_marker_state), and the GPU start
     * time. Kept from pass to pass; cleared when that node leaves the lane. */
    uint32_t front;
    uint64_t front_index;
    int front_state, front_marker, front_gpu;
    int64_t front_start_ns;
    /* The observer's: without a front, the lane holds untracked ops only, which
     * nothing changes until a record is filed behind them (which clears it). */
    int idle;
};

/* Sizes the tables for a ring of `capacity` records (a power of two); 0, or
 * -1 when memory is short. Once. */
int ncclguard_lanes_init(uint64_t capacity);

/* The lane of (comm_slot, stream) for an op of thread `thread_id` (gettid);
 * 0 when there is none and `create` is 0. The per-thread default stream
 * (CU_STREAM_PER_THREAD, cudaStreamPerThread: the handle 0x2) is a stream of
 * each thread of its own, so its ops get a lane per thread; every other handle
 * names the same stream on any thread. */
uint32_t ncclguard_lane_of(int64_t comm_slot, uint64_t stream, uint64_t thread_id, int create);

struct ng_lane *ncclguard_lane(uint32_t lane);

/* The communicators' lanes: those of `comm`, from 0 to ncclguard_lanes_comms()
 * - 1 (the others have had none), start at ncclguard_lanes_first (0: none). */
int ncclguard_lanes_comms(void);
uint32_t ncclguard_lanes_first(int comm);

/* Takes out of its lane the record that last held the slot of `index`. */
void ncclguard_lanes_vacate(uint64_t index);

/* Files record `index` in `lane`, in index order; its slot must be vacant.
 * Returns its node. */
uint32_t ncclguard_lane_file(uint32_t lane, uint64_t index);

/* A node's record index, and the next newer node of its lane (0: none). */
uint64_t ncclguard_node_index(uint32_t node);
uint32_t ncclguard_node_newer(uint32_t node);

/* The record of `node` leaves its lane (finished, or overwritten); the lane
 * goes when it was its last. */
void ncclguard_node_remove(uint32_t node);

/* fork(): the child follows nothing of the parent's. */
void ncclguard_lanes_atfork_child(void);

#endif
