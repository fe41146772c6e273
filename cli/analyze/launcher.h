/*
 * analyze/launcher.h: the launcher's line about how each culprit rank ended.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_LAUNCHER_H
#define NCCLGUARD_CLI_ANALYZE_LAUNCHER_H

#include "analyze/model.h"

void an_launcher_lines(struct an *a);

#endif
