/*
 * analyze/hang.h: the detector of collectives that some ranks wait in (missing,
 * gpu_not_started, no_dump).
 */
#ifndef NCCLGUARD_CLI_ANALYZE_HANG_H
#define NCCLGUARD_CLI_ANALYZE_HANG_H

#include "analyze/model.h"

void an_detect_collectives(struct an *a);
/* Sets f->held for rank ri from f->blocker (gpu_not_started). */
void an_stream_holder(const struct an *a, int32_t ri, struct an_finding *f);

#endif
