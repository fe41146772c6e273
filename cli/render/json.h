/*
 * render/json.h: `ncclguard analyze --json` (schema ncclguard.analysis/1).
 */
#ifndef NCCLGUARD_CLI_RENDER_JSON_H
#define NCCLGUARD_CLI_RENDER_JSON_H

#include <stdio.h>

#include "analyze/model.h"

/* 0, or -1 when out of memory or the write failed. */
int rn_print_json(const struct an *a, FILE *out);

#endif
