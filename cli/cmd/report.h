/*
 * cmd/report.h: `ncclguard report`: the analysis as one HTML page (render/page.h).
 */
#ifndef NCCLGUARD_CLI_CMD_REPORT_H
#define NCCLGUARD_CLI_CMD_REPORT_H

/* ncclguard report DIR -o FILE [--incident ID] [--launcher-log FILE]: the same
 * statuses as analyze. */
int cmd_report(int argc, char **argv);

#endif
