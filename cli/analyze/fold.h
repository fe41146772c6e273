/*
 * analyze/fold.h: one dump folded into the model.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_FOLD_H
#define NCCLGUARD_CLI_ANALYZE_FOLD_H

#include "analyze/model.h"
#include "dump/dump.h"

/* Folds d in; 0, or 1 when it is left out (the reason goes to a->bad). */
int an_add_dump(struct an *a, const struct dr_dump *d);

#endif
