/*
 * analyze/where.h: where a rank's threads are: each thread's frames that belong
 * to the job, whether it is idle, and which threads to show.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_WHERE_H
#define NCCLGUARD_CLI_ANALYZE_WHERE_H

#include "analyze/intern.h"
#include "analyze/model.h"
#include "dump/dump.h"

void an_thread_of(const struct an *a, const struct dr_dump *d, const struct dr_thread *t,
                  struct an_thread *out, struct an_intern *strs);
uint32_t an_pick_thread(const struct an *a, const struct an_rank *r, uint64_t tid);
/* The threads to show beside thread t of rank r, at most max, into out: when t is
 * idle or has no Python frames in a Python process, the main thread, then other
 * threads of the job that are in its frames and not idle. */
uint32_t an_also_threads(const struct an *a, const struct an_rank *r, uint32_t t, uint32_t *out,
                         uint32_t max);

#endif
