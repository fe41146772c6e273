/*
 * cli.h: the subcommands of the ncclguard command, one function each.
 * Each takes its own argv (argv[0] is the subcommand's name) and returns the
 * process exit status.
 */
#ifndef NCCLGUARD_CLI_H
#define NCCLGUARD_CLI_H

#define NG_EXIT_USAGE 64 /* EX_USAGE: bad command line */

/* ncclguard envcheck [--nccl PATH] [--json] [--strict] [--policy]:
 * 0, 1 (--strict and warnings), 2 (no NCCL found), 64 (usage). */
int ncclguard_cli_envcheck(int argc, char **argv);

/* ncclguard analyze DIR [--json] [--incident ID] [--launcher-log FILE]:
 * 0 healthy, 1 culprit named, 2 problem without culprit, 3 unusable input, 64 usage. */
int ncclguard_cli_analyze(int argc, char **argv);

/* ncclguard report DIR -o FILE [--incident ID] [--launcher-log FILE]: the same
 * statuses as analyze. */
int ncclguard_cli_report(int argc, char **argv);

#endif
