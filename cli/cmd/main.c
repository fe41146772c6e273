/*
 * cmd/main.c: the ncclguard command. Dispatches to one function per subcommand;
 * adding one is one line in `commands` plus its file.
 */
#include <stdio.h>
#include <string.h>

#include "cmd/analyze.h"
#include "cmd/cmd.h"
#include "cmd/diagnose.h"
#include "cmd/dump.h"
#include "cmd/envcheck.h"
#include "cmd/export.h"
#include "cmd/report.h"
#include "cmd/run.h"
#include "cmd/trace.h"
#include "dump/symres.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"analyze", cmd_analyze,
     "name the culprit rank of a hang and its cause, from every rank's dump"},
    {"envcheck", cmd_envcheck,
     "audit the NCCL_* variables against the NCCL library that would be loaded"},
    {"run", cmd_run, "run a command (torchrun, srun, mpirun...) with the library preloaded"},
    {"diagnose", cmd_diagnose,
     "what this node offers NCCL: library, driver, GPUs, topology, IB, interfaces, env"},
    {"trace", cmd_trace, "write the dumps' ops as a Chrome trace (Perfetto, chrome://tracing)"},
    {"dump", cmd_dump, "ask processes on this node, or a whole job, for a dump now"},
    {"report", cmd_report,
     "write the analysis as one self-contained HTML file, with a picture per communicator"},
    {"export", cmd_export, "write the dumps as PyTorch Flight Recorder dumps, for torchfrtrace"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: ncclguard <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`ncclguard <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CMD_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    /* the commands that show the dumps' frames name them again offline */
    if (!strcmp(argv[1], "analyze") || !strcmp(argv[1], "report") || !strcmp(argv[1], "trace"))
        dr_symres_install();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ncclguard: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CMD_EXIT_USAGE;
}
