/*
 * analyze_collect.h: the helpers of analyze_collect.c that analyze_fold.c uses.
 */
#ifndef NCCLGUARD_ANALYZE_COLLECT_H
#define NCCLGUARD_ANALYZE_COLLECT_H

#include "analyze.h"

/* Appends a zeroed element to vec (n elements, room for cap) and points at it. */
#define PUSH(vec, n, cap) ((vec) = an_grow((vec), &(n), &(cap), sizeof *(vec)), &(vec)[(n) - 1])

/* The communicator of dc (made at its first sight), AN_NONE when unusable. */
uint32_t an_comm_of(struct an *a, const struct ng_dcomm *dc);
/* The aggregate of seq on c (made when new), NULL beyond the span compared. */
struct an_seq *an_seq_slot(struct an *a, struct an_comm *c, uint64_t seq);
/* 1 when the job may be taken to have `world` ranks: the rows of the ranks
 * without a dump fit the input's bound (analyze.h); else said once. */
int an_claim_world(struct an *a, int64_t world);
uint32_t an_sig_of(struct an *a, const struct ng_dop *o);
void an_count_sig(struct an *a, struct an_seq *s, uint32_t sig, int32_t rank);
void an_count_arrival(struct an_seq *s, const struct ng_dop *o, int32_t rank);

#endif
