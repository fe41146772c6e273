/*
 * cmd/analyze.c: `ncclguard analyze DIR`: reads every rank's dump of a hang and says
 * which rank is the culprit, why, and where its threads are (docs/analysis.md).
 */
#include "cmd/analyze.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze/read.h"
#include "analyze/verdict.h"
#include "cmd/cmd.h"
#include "json/json.h"
#include "render/json.h"
#include "render/text.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard analyze DIR [--json] [--incident ID] [--launcher-log FILE]\n\n"
            "Reads the dumps of every rank in DIR (ncclguard-r*.json, schema ncclguard.dump/1.x\n"
            "or /2) and names the culprit of a hang and its cause: missing (never called the\n"
            "op the others wait in), mismatch, gpu_not_started, p2p, crashed, no_dump,\n"
            "async_error, or slow (a straggler); then the evidence per communicator and a\n"
            "summary of the ranks. See docs/analysis.md.\n\n"
            "  --json               one JSON document (schema ncclguard.analysis/1)\n"
            "  --incident ID        only the dumps of that incident (their \"incident\" member)\n"
            "  --launcher-log FILE  the launcher's output (launch, torchrun, srun, mpirun): its\n"
            "                       line about how a culprit rank ended is added\n"
            "  --parser NAME        simdjson (default) or jansson, the JSON library that reads\n"
            "  --threads N          parsing threads (default: one per CPU, at most 8)\n\n"
            "Files that cannot be used get one line each on stderr; the rest is analyzed.\n"
            "Exit status: 0 healthy, 1 culprit named, 2 a problem but no culprit, 3 unusable\n"
            "input (no dump could be read), 64 usage.\n");
}

/* Parses the command line into o and *dir (and --json into *json, -o into *out,
 * for the commands that take them); 0, 1 (--help), or -1 (usage error). */
int cmd_analyze_args(int argc, char **argv, struct an_opts *o, const char **dir, int *json,
                     const char **out)
{
    enum { O_JSON = 256, O_INCIDENT, O_LAUNCHER, O_PARSER, O_THREADS, O_HELP };
    static const struct option opts[] = {{"json", no_argument, NULL, O_JSON},
                                         {"incident", required_argument, NULL, O_INCIDENT},
                                         {"launcher-log", required_argument, NULL, O_LAUNCHER},
                                         {"parser", required_argument, NULL, O_PARSER},
                                         {"threads", required_argument, NULL, O_THREADS},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->progress = 1;
    if (json) *json = 0;
    if (out) *out = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (!out) goto bad;
            *out = optarg;
            break;
        case O_JSON:
            if (!json) goto bad;
            *json = 1;
            break;
        case O_INCIDENT: o->incident = optarg; break;
        case O_LAUNCHER: o->launcher_log = optarg; break;
        case O_PARSER:
            if (!strcmp(optarg, "jansson"))
                o->backend = NG_JSON_JANSSON;
            else if (!strcmp(optarg, "simdjson"))
                o->backend = NG_JSON_SIMDJSON;
            else
                goto bad;
            break;
        case O_THREADS:
            o->threads = atoi(optarg);
            if (o->threads < 1 || o->threads > 64) goto bad;
            break;
        case 'h':
        case O_HELP: return 1;
        default: goto bad;
        }
    }
    if (optind != argc - 1 || (out && !*out)) goto bad;
    *dir = argv[optind];
    return 0;
bad:
    fprintf(stderr, "ncclguard %s: %s\n", argv[0],
            optind <= argc && optind > 0 && argv[optind - 1] && argv[optind - 1][0] == '-'
                ? "bad option or value"
            : out && optind == argc - 1 ? "needs -o FILE"
                                        : "expects one dump directory");
    return -1;
}

/* Reads dir and decides; prints the lines of unused files. The exit status. */
int cmd_analyze_run(struct an *a, const char *dir, const char *cmd)
{
    if (an_read_dir(a, dir)) return AN_EXIT_UNUSABLE;
    for (size_t i = 0; i < a->nbad; i++) fprintf(stderr, "ncclguard %s: %s\n", cmd, a->bad[i]);
    if (!a->nranks) {
        fprintf(stderr, "ncclguard %s: %s: no usable dump (%zu file(s) named *.json)\n", cmd, dir,
                a->files);
        return AN_EXIT_UNUSABLE;
    }
    return an_verdict(a);
}

int cmd_analyze(int argc, char **argv)
{
    struct an_opts o;
    const char *dir;
    int json;
    int rc = cmd_analyze_args(argc, argv, &o, &dir, &json, NULL);
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : CMD_EXIT_USAGE;
    }
    struct an a;
    an_init(&a, &o);
    int status = cmd_analyze_run(&a, dir, "analyze");
    if (status != AN_EXIT_UNUSABLE) {
        if (json)
            rn_print_json(&a, stdout);
        else
            rn_print_text(&a, stdout);
    }
    an_free(&a);
    fflush(stdout);
    return status;
}
