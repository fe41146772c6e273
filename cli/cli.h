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

#endif
