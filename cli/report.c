/* placeholder until report lands */
#include <stdio.h>
#include "cli.h"
int ncclguard_cli_report(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "not yet\n"); return NG_EXIT_USAGE; }
