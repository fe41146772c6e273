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

/* ncclguard run [--config F] [--dump-dir D] -- CMD...: execs CMD with the
 * library preloaded; CMD's status, 126/127 (cannot run), 2 (no library), 64. */
int ncclguard_cli_run(int argc, char **argv);

/* ncclguard dump PID...|--all | --dir D [--incident ID]: 0, 1 (refused), 2, 64. */
int ncclguard_cli_dump(int argc, char **argv);

/* ncclguard diagnose [--json] [--root DIR] [--nccl PATH]: 0, 64 (usage). */
int ncclguard_cli_diagnose(int argc, char **argv);

/* ncclguard trace DIR -o FILE [--ranks LIST] [--window S] [--incident ID]:
 * 0, 1 (no usable dump), 2 (cannot write), 64 (usage). */
int ncclguard_cli_trace(int argc, char **argv);

/* ncclguard analyze DIR [--json] [--incident ID] [--launcher-log FILE]:
 * 0 healthy, 1 culprit named, 2 problem without culprit, 3 unusable input, 64 usage. */
int ncclguard_cli_analyze(int argc, char **argv);

/* ncclguard report DIR -o FILE [--incident ID] [--launcher-log FILE]: the same
 * statuses as analyze. */
int ncclguard_cli_report(int argc, char **argv);

#endif
