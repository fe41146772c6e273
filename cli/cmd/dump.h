/*
 * cmd/dump.h: `ncclguard dump`: asks processes for a dump now.
 */
#ifndef NCCLGUARD_CLI_CMD_DUMP_H
#define NCCLGUARD_CLI_CMD_DUMP_H

/* ncclguard dump PID...|--all | --dir D [--incident ID]: 0, 1 (refused), 2, 64. */
int cmd_dump(int argc, char **argv);

#endif
