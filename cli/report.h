/*
 * report.h: the parts of `ncclguard report`'s HTML page (report.c): one picture per
 * communicator (report_svg.c), the stacks and the tables (report_html.c). Each
 * writes well-formed HTML to f; every string from a dump goes through rp_text.
 */
#ifndef NCCLGUARD_REPORT_H
#define NCCLGUARD_REPORT_H

#include <stdio.h>

#include "analyze.h"

/* Rows of a picture, and groups of identical stacks, drawn at most. */
#define RP_MAX_ROWS 48
#define RP_MAX_STACK_GROUPS 32
#define RP_MAX_COMMS 24

void rp_text(FILE *f, const char *s);               /* HTML-escaped */
int rp_is_culprit(const struct an *a, int32_t ri);   /* ri (an->ranks) is a culprit */
/* 2: a finding is about it; 1: ops in flight, a rank without a dump, or seqs apart; 0 */
int rp_comm_worth(const struct an *a, uint32_t ci);
void rp_comm_svg(const struct an *a, uint32_t ci, FILE *f);
void rp_stacks(const struct an *a, FILE *f);
void rp_summary(const struct an *a, FILE *f);
void rp_evidence(const struct an *a, FILE *f);

#endif
