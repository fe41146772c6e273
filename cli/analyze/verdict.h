/*
 * analyze/verdict.h: the detectors run, each finding's chain followed to its culprit.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_VERDICT_H
#define NCCLGUARD_CLI_ANALYZE_VERDICT_H

#include "analyze/model.h"

/* Runs the detectors and follows the chains; the exit status (AN_EXIT_*). */
int an_verdict(struct an *a);

#endif
