/*
 * render/svg.h: the picture of one communicator in the report: where its ranks
 * stopped.
 */
#ifndef NCCLGUARD_CLI_RENDER_SVG_H
#define NCCLGUARD_CLI_RENDER_SVG_H

#include <stdio.h>

#include "analyze/model.h"

/* 2: a finding is about it; 1: ops in flight, a rank without a dump, or seqs apart; 0 */
int rn_comm_worth(const struct an *a, uint32_t ci);
void rn_comm_svg(const struct an *a, uint32_t ci, FILE *f);

#endif
