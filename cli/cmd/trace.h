/*
 * cmd/trace.h: `ncclguard trace`: the dumps' ops as a Chrome trace.
 */
#ifndef NCCLGUARD_CLI_CMD_TRACE_H
#define NCCLGUARD_CLI_CMD_TRACE_H

/* ncclguard trace DIR -o FILE [--ranks LIST] [--window S] [--incident ID]:
 * 0, 1 (no usable dump), 2 (cannot write), 64 (usage). */
int cmd_trace(int argc, char **argv);

#endif
