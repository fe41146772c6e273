/*
 * render/text.h: `ncclguard analyze`'s text: the verdict, the evidence, the summary.
 */
#ifndef NCCLGUARD_CLI_RENDER_TEXT_H
#define NCCLGUARD_CLI_RENDER_TEXT_H

#include <stdio.h>

#include "analyze/model.h"

void rn_print_verdict(const struct an *a, FILE *out);
void rn_print_text(const struct an *a, FILE *out);

#endif
