/*
 * gendumps.h: the synthetic job of bench/gendumps (see gendumps.c for the
 * command line); gen_dump.c writes one rank's dump of it.
 */
#ifndef NCCLGUARD_GENDUMPS_H
#define NCCLGUARD_GENDUMPS_H

#include <stdio.h>

enum gen_cause {
    GEN_NONE,
    GEN_MISSING,
    GEN_MISMATCH,
    GEN_GPU_NOT_STARTED,
    GEN_SLOW,
    GEN_CRASH,
    GEN_NCAUSES
};
#define GEN_CAUSE_NAMES "none", "missing", "mismatch", "gpu_not_started", "slow", "crash"

struct gen_job {
    const char *dir;
    int nranks, tp;     /* world size; size of each tensor-parallel group */
    long records;       /* per rank */
    int culprit, cause; /* culprit -1 with cause GEN_NONE */
    int no_dump;        /* the rank whose file is left out, or -1 */
};

const char *gen_host(int rank);
int gen_pid(int rank);
void gen_write_dump(FILE *f, const struct gen_job *g, int rank);

#endif
