/*
 * strdist.h: "did you mean" suggestions for misspelt names.
 *
 * Owns: the edit distance between two names (insertions, deletions,
 * substitutions and swaps of neighbours, ignoring case) and the choice of the
 * closest candidates of a list.
 *
 * Threads: any thread; pure functions, fixed stack storage, no allocation.
 */
#ifndef NCCLGUARD_STRDIST_H
#define NCCLGUARD_STRDIST_H

#include <stddef.h>

#define NG_NAME_MAX 96 /* longer names never match anything */

/* Optimal string alignment distance, case-insensitive, up to limit: gives up
 * (returning limit + 1) as soon as the distance must exceed it, and for names
 * longer than NG_NAME_MAX. */
int ncclguard_edit_distance_within(const char *a, const char *b, int limit);

/* The distance below which a candidate is worth suggesting for name. */
int ncclguard_suggest_limit(const char *name);

/*
 * Writes into out the (at most 3) candidates closest to name, joined by " or ",
 * when they are within ncclguard_suggest_limit; "" when none is. `get(i, ctx)`
 * returns the i-th candidate of n. Returns the number suggested.
 */
int ncclguard_suggest(const char *name, size_t n, const char *(*get)(size_t i, const void *ctx),
                      const void *ctx, char *out, size_t outlen);

#endif
