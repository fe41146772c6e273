/*
 * due.h: the enforcer's agenda, a min-heap of (when, record index): each op in
 * flight that can time out, keyed by the CLOCK_MONOTONIC time its next step of
 * the ladder (warn, dump, abort, kill) falls due. A pass pops only what is due,
 * so its cost follows the ops that arrive and the steps that fall due, not the
 * ops in flight.
 *
 * Holds up to `room` entries (preallocated with mmap: no malloc); an entry for
 * a record that finished or was overwritten stays until it comes to the top
 * or until ncclguard_due_prune drops it.
 *
 * Threads: the enforcer only (under its pass_lock).
 */
#ifndef NCCLGUARD_DUE_H
#define NCCLGUARD_DUE_H

#include <stdint.h>

struct ng_due {
    int64_t at_ns;
    uint64_t index;
};

/* Makes room for `room` entries; 0, or -1 when memory is short. Idempotent. */
int ncclguard_due_init(uint64_t room);

/* Adds an entry: 0, or -1 when full. */
int ncclguard_due_push(int64_t at_ns, uint64_t index);

/* The earliest entry into *out: 1, or 0 when empty. */
int ncclguard_due_peek(struct ng_due *out);

/* Removes the earliest entry. */
void ncclguard_due_pop(void);

/* Keeps only the entries for which keep(index) is true. */
void ncclguard_due_prune(int (*keep)(uint64_t index));

/* Empties it (fork child, tests). */
void ncclguard_due_clear(void);

#endif
