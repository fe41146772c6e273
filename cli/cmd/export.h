/*
 * cmd/export.h: `ncclguard export`: ncclguard's dumps in another tool's format.
 */
#ifndef NCCLGUARD_CLI_CMD_EXPORT_H
#define NCCLGUARD_CLI_CMD_EXPORT_H

/* ncclguard export --torch-fr DIR -o OUT: 0, 2 (cannot write OUT), 3 (unusable
 * input), 64 (usage). */
int cmd_export(int argc, char **argv);

#endif
