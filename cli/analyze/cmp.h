/*
 * analyze/cmp.h: the detectors that compare ranks at one seq: mismatch and slow
 * (a straggler).
 */
#ifndef NCCLGUARD_CLI_ANALYZE_CMP_H
#define NCCLGUARD_CLI_ANALYZE_CMP_H

#include "analyze/model.h"

void an_detect_mismatch(struct an *a);
void an_detect_slow(struct an *a);
/* The straggler test of one communicator of nranks ranks (analyze/cmp.c): last[r]
 * and wait[r] (capped, ns) for r < n over `samples` arrivals; ntests ranks tested
 * in all. Fills out with the rank least likely by chance; 1 when it is a straggler. */
struct an_straggler {
    uint32_t rank, last, samples; /* rank AN_NONE: none with the share */
    double share, p;              /* p: multiplied by ntests, at most 1 */
};
int an_straggler_test(const uint32_t *last, const double *wait, size_t n, int64_t nranks,
                      uint32_t samples, double ntests, struct an_straggler *out);
double an_binom_tail(uint32_t m, uint32_t k, double p); /* P(X >= k), X ~ B(m, p) */

#endif
