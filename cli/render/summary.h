/*
 * render/summary.h: the summary table's rows (ranks grouped by what they did),
 * shared by the text and HTML printers.
 */
#ifndef NCCLGUARD_CLI_RENDER_SUMMARY_H
#define NCCLGUARD_CLI_RENDER_SUMMARY_H

#include "analyze/model.h"

void rn_summary_rows(const struct an *a,
                     void (*row)(void *ctx, const char *ranks, size_t n, const char *reason,
                                 const char *status),
                     void *ctx);

#endif
