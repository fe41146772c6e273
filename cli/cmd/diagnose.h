/*
 * cmd/diagnose.h: `ncclguard diagnose`: what this node offers NCCL.
 */
#ifndef NCCLGUARD_CLI_CMD_DIAGNOSE_H
#define NCCLGUARD_CLI_CMD_DIAGNOSE_H

/* ncclguard diagnose [--json] [--root DIR] [--nccl PATH]: 0, 64 (usage). */
int cmd_diagnose(int argc, char **argv);

#endif
