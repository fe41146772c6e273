/*
 * analyze/read.h: a directory of dumps (and the launcher's log) read into the model.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_READ_H
#define NCCLGUARD_CLI_ANALYZE_READ_H

#include "analyze/model.h"

/* Reads dir into a (and the launcher log); -1 when unusable. */
int an_read_dir(struct an *a, const char *dir);

#endif
