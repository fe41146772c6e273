/*
 * groups.h: CUDA markers of NCCL groups.
 *
 * The ops of a group are launched at the outermost ncclGroupEnd, so they get
 * no marker of their own: at that point one marker per stream touched by the
 * group is recorded, and shared by the group's records on that stream. The
 * table maps (group id, stream) to that marker and counts the records that
 * still need it; the last one releases it.
 *
 * A group keeps a place for each of its first NG_GROUP_STREAMS streams. An op
 * on a stream that has none (one more stream, or the legacy stream while a
 * capture makes a marker there impossible) follows the place of another
 * stream of its group that holds an op of its communicator (NG_REC_FOLLOWS,
 * track/flight.h): NCCL runs a communicator's part of a group as one launch
 * that every stream of it waits for, so that stream's marker tells its end
 * too. It counts among that place's records.
 *
 * Threads: ncclguard_group_publish on the application thread at GroupEnd (or
 * at the deferred end of a nonblocking one); _find and _put on the watchdog,
 * and _put on a writer that drops a record.
 */
#ifndef NCCLGUARD_GROUPS_H
#define NCCLGUARD_GROUPS_H

#include <stdint.h>

#include "track/flight.h"

#define NG_GROUP_STREAMS 16

/* The marker value of a group whose ncclGroupEnd failed: its ops never ran. */
#define NG_GROUP_FAILED (-2)
/* The marker value of a group's stream that got no marker at its ncclGroupEnd
 * (no free event pair, a capture begun meanwhile): its ops ran, but no marker
 * of theirs tells when they finish (they are untracked: the observer can still
 * learn it from a later op of their stream). */
#define NG_GROUP_UNTRACKED (-3)

void ncclguard_groups_init(uint64_t capacity);
/* The marker of the group's stream in `place` (0 .. NG_GROUP_STREAMS - 1). */
void ncclguard_group_publish(uint64_t group_id, int place, uint64_t stream, int marker, int refs);
/* The marker a group's record r shares (of its stream, or of the place it
 * follows), NG_GROUP_FAILED, NG_GROUP_UNTRACKED, or -1 when not (yet)
 * published. */
int ncclguard_group_find(const struct ng_op_record *r);
/* The group's record r is finished with its shared marker. */
void ncclguard_group_put(const struct ng_op_record *r);
void ncclguard_groups_atfork_child(void);

#endif
