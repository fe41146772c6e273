/*
 * analyze/rank.h: the detectors of one rank's own state (crashed, async_error),
 * and the findings list.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_RANK_H
#define NCCLGUARD_CLI_ANALYZE_RANK_H

#include "analyze/model.h"

void an_detect_crashed(struct an *a);
void an_detect_async_error(struct an *a);
void an_add_finding(struct an *a, const struct an_finding *f);
/* 1 when something is stuck: a timeout, a crash, an op in flight AN_STUCK_NS. */
int an_stuck(const struct an *a);

#endif
