/*
 * render/html.h: the report's stacks (identical ones grouped), summary table and
 * evidence, as HTML.
 */
#ifndef NCCLGUARD_CLI_RENDER_HTML_H
#define NCCLGUARD_CLI_RENDER_HTML_H

#include <stdio.h>

#include "analyze/model.h"

void rn_stacks(const struct an *a, FILE *f);
void rn_summary(const struct an *a, FILE *f);
void rn_evidence(const struct an *a, FILE *f);

#endif
