/*
 * describe.h: how the watch threads name ops and communicators in their log
 * lines ("AllReduce #1042 on comm 5f3a…(8 ranks)").
 *
 * Threads: any (pure, apart from reading the registry and, for
 * ncclguard_describe_where, symbolizing).
 */
#ifndef NCCLGUARD_DESCRIBE_H
#define NCCLGUARD_DESCRIBE_H

#include <stddef.h>
#include <stdint.h>

#include "track/flight.h"

/* The first 4 hex digits of a communicator id, into buf. */
const char *ncclguard_short_id(uint64_t id, char buf[8]);

/* "AllReduce #1042", "Send #5 to peer 3", "Recv #5 from peer 1". */
const char *ncclguard_describe_op(const struct ng_op_record *r, char *buf, size_t len);

/* Where the op was enqueued, from its enqueue stack: " at trainloop_step ←
 * run ← main (stack 3)", its innermost frames (a function, else
 * module+offset; the stack starts at the caller of NCCL: track/stacks.h); " (stack 3)" while a dump holds the
 * symbolizer; "" without a stack. Not for signal handlers. */
const char *ncclguard_describe_where(const struct ng_op_record *r, char *buf, size_t len);

#endif
