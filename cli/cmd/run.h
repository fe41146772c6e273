/*
 * cmd/run.h: `ncclguard run`.
 */
#ifndef NCCLGUARD_CLI_CMD_RUN_H
#define NCCLGUARD_CLI_CMD_RUN_H

/* ncclguard run [--config F] [--dump-dir D] -- CMD...: execs CMD with the
 * library preloaded; CMD's status, 126/127 (cannot run), 2 (no library), 64. */
int cmd_run(int argc, char **argv);

#endif
