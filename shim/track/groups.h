/*
 * groups.h: CUDA markers of NCCL groups.
 *
 * The ops of a group are launched at the outermost ncclGroupEnd, so they get
 * no marker of their own: at that point one marker per stream touched by the
 * group is recorded, and shared by the group's records on that stream. The
 * table maps (group id, stream) to that marker and counts the records that
 * still need it; the last one releases it.
 *
 * Threads: ncclguard_group_publish on the application thread at GroupEnd;
 * _find and _put on the watchdog.
 */
#ifndef NCCLGUARD_GROUPS_H
#define NCCLGUARD_GROUPS_H

#include <stdint.h>

/* The marker value of a group whose ncclGroupEnd failed: its ops never ran. */
#define NG_GROUP_FAILED (-2)
/* The marker value of a group's stream that got no marker at its ncclGroupEnd
 * (no free event pair, a capture begun meanwhile): its ops ran, but nothing
 * tells when they finish. */
#define NG_GROUP_UNTRACKED (-3)

void ncclguard_groups_init(uint64_t capacity);
void ncclguard_group_publish(uint64_t group_id, uint64_t stream, int marker, int refs);
/* The marker of (group, stream), NG_GROUP_FAILED, NG_GROUP_UNTRACKED, or -1 when
 * not (yet) published. */
int ncclguard_group_find(uint64_t group_id, uint64_t stream);
/* One record of (group, stream) is finished with the marker. */
void ncclguard_group_put(uint64_t group_id, uint64_t stream);
void ncclguard_groups_atfork_child(void);

#endif
