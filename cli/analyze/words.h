/*
 * analyze/words.h: the model in words: the verdict lines, and the names of ranks,
 * communicators and rank ranges that every printer uses.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_WORDS_H
#define NCCLGUARD_CLI_ANALYZE_WORDS_H

#include "analyze/model.h"

/* The verdict line of each culprit (its text). */
void an_verdict_lines(struct an *a);
const char *an_rank_name(const struct an *a, int32_t r, int64_t grank, char *buf, size_t n);
const char *an_comm_short(const struct an *a, uint32_t c, char *buf, size_t n);
const char *an_ranges(const int64_t *ranks, size_t n, char *buf, size_t size);

#endif
