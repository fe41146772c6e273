/*
 * reported.h: the ops that NCCL's profiler plugin reports (intercept/profiler.c)
 * on communicators the wrappers never saw: NCCL linked statically, or called
 * through a private dlopen handle (the pynccl pattern).
 *
 * Owns: the registry records of those communicators (their id is NCCL's
 * commHash, the same on every rank), the records of their ops in the flight
 * recorder. Each op holds a kernel mark (kmarks.h) in place of CUDA markers,
 * which the plugin's KernelCh events move on and the observer polls like the
 * CUDA event pairs, so the lanes, timeouts, slow-op lines, dumps and analysis
 * treat these ops as they treat the wrappers' own.
 *
 * A communicator created through the wrappers is theirs: every op on it is
 * recorded by them, with CUDA markers, and the plugin's events for it are
 * counted, never recorded again (one op, one record).
 *
 * Threads: the communicator calls on the threads that create and end
 * communicators; ncclguard_reported_op on the thread that launches the op
 * (NCCL's Coll or P2p event), with no lock or malloc.
 */
#ifndef NCCLGUARD_TRACK_REPORTED_H
#define NCCLGUARD_TRACK_REPORTED_H

#include <nccl.h>
#include <stdint.h>

#include "track/flight.h"

struct ng_comm;

/* The communicator that NCCL's plugin init announced: the wrappers' record of it
 * (*wrapped = 1), found as the one this thread is creating, else their oldest of
 * this rank and size not announced yet; NULL with *wrapped = 1 when the
 * wrappers are creating communicators but none matches (ncclCommInitAll's
 * records come after it); else a new record, ready, with NCCL's commHash as its
 * id (*wrapped = 0), or NULL when the registry is full. */
struct ng_comm *ncclguard_reported_comm(uint64_t nccl_hash, int rank, int nranks, const char *name,
                                        int *wrapped);

/* The plugin's finalize of a communicator it created: its record is destroyed. */
void ncclguard_reported_comm_end(struct ng_comm *c);

/* One op NCCL launched on c (a Coll or P2p event): type (enum ng_op_type),
 * its count and data type, the root or peer (-1 when none), the channels its
 * kernel runs on, its stream (0 when unknown) and whether it was captured
 * into a CUDA graph. Appends its record (scheduled with a kernel mark, or
 * captured) and returns its mark through *mark and *gen (NG_NO_MARKER when it
 * has none). */
void ncclguard_reported_op(struct ng_comm *c, int type, uint64_t count, ncclDataType_t dtype,
                           int root, int channels, uint64_t stream, int captured, int *mark,
                           uint32_t *gen);

#endif
