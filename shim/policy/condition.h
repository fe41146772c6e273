/*
 * condition.h: the conditions of "[when ...]" sections of a config file.
 *
 * Grammar: one or more terms separated by blanks, all of which must hold.
 *   term    := key op value
 *   key     := host | gpu | job          (globs: '*', '?', [..]; ',' = alternatives)
 *            | ib                        (yes or no)
 *            | gpus | world_size | nodes (integers)
 *   op      := = | != | >= | <= | > |  <  (the last four for integers only)
 *   value   := a word, or "a quoted string"; for integers with = and !=, also
 *              a range A..B, A.. or ..B (inclusive)
 * Example: [when host=gpu-a*,gpu-b* gpu="*H100*" ib=yes gpus>=8 world_size=64..1024]
 *
 * A fact that cannot be known here (no WORLD_SIZE in a launcher process, no
 * NVIDIA driver) makes its term false, whatever the operator.
 *
 * Threads: constructor and CLI only (uses the fact cache of facts.h).
 */
#ifndef NCCLGUARD_CONDITION_H
#define NCCLGUARD_CONDITION_H

#include <stddef.h>

/* 1 when every term of text holds, 0 when one does not, -1 with why on a syntax error. */
int ncclguard_condition_eval(const char *text, char *why, size_t whylen);

#endif
