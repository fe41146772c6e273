/*
 * cmd/report.c: `ncclguard report DIR -o FILE`: the analysis of `ncclguard analyze`
 * as one HTML page (render/page.h).
 */
#include "cmd/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "cmd/analyze.h"
#include "cmd/cmd.h"
#include "render/page.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard report DIR -o FILE [--incident ID] [--launcher-log FILE]\n\n"
            "Writes the analysis of `ncclguard analyze DIR` as one self-contained HTML file:\n"
            "the verdict, a picture per communicator of where each rank stopped (the last seq\n"
            "it enqueued and completed; identical ranks are one bar, the culprit in red), the\n"
            "ranks' stacks (identical ones grouped), and the evidence. No network fetches.\n"
            "Options as for analyze (--incident, --launcher-log, --parser, --threads).\n"
            "Exit status: as analyze's (0 healthy, 1 culprit, 2 no culprit, 3 unusable input,\n"
            "64 usage); the file is written in the first three cases.\n");
}

int cmd_report(int argc, char **argv)
{
    struct an_opts o;
    const char *dir, *out;
    int rc = cmd_analyze_args(argc, argv, &o, &dir, NULL, &out);
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : CMD_EXIT_USAGE;
    }
    struct an a;
    an_init(&a, &o);
    int status = cmd_analyze_run(&a, dir, "report");
    if (status != AN_EXIT_UNUSABLE) {
        if (rn_write_page(&a, out))
            status = AN_EXIT_UNUSABLE;
        else
            printf("ncclguard report: %s\n", out);
    }
    an_free(&a);
    return status;
}
