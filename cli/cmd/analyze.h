/*
 * cmd/analyze.h: `ncclguard analyze`, and the command line and the run of an
 * analysis, which `ncclguard report` shares.
 */
#ifndef NCCLGUARD_CLI_CMD_ANALYZE_H
#define NCCLGUARD_CLI_CMD_ANALYZE_H

#include "analyze/model.h"

/* ncclguard analyze DIR [--json] [--incident ID] [--launcher-log FILE]:
 * 0 healthy, 1 culprit named, 2 problem without culprit, 3 unusable input, 64 usage. */
int cmd_analyze(int argc, char **argv);

/* Parses analyze's options (report's too: out is -o, json NULL for report) into o.
 * 0; 1 for --help; -1 after saying what is wrong. */
int cmd_analyze_args(int argc, char **argv, struct an_opts *o, const char **dir, int *json,
                     const char **out);
/* Reads dir into a and runs the verdict; the exit status (AN_EXIT_*). cmd names the
 * command in messages. */
int cmd_analyze_run(struct an *a, const char *dir, const char *cmd);

#endif
