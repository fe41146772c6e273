/*
 * cmd/cmd.h: what the subcommands of the ncclguard command share. Each
 * subcommand is one function, declared in its file's header (cmd/<name>.h),
 * that takes its own argv (argv[0] is the subcommand's name) and returns the
 * process exit status; cmd/main.c dispatches.
 */
#ifndef NCCLGUARD_CLI_CMD_CMD_H
#define NCCLGUARD_CLI_CMD_CMD_H

#define CMD_EXIT_USAGE 64 /* EX_USAGE: bad command line */

#endif
