/*
 * gendumps: writes the dumps (the writer's schema, NG_DUMP_SCHEMA) of a synthetic job with one
 * planted culprit, for `make bench` and the analyzer's tests. The job has N ranks,
 * a world communicator, tensor-parallel groups of T ranks split from it, and
 * steps of AllReduce (world), AllGather (its group) and a Send/Recv ring (world):
 * four records per step, R records per rank.
 *
 *   gendumps -o DIR [-n RANKS] [-r RECORDS] [-t TP] [-j JOBS]
 *            [--culprit RANK --cause CAUSE] [--no-dump RANK]
 *
 * CAUSE: none (a healthy job, exit dumps), missing (the culprit never calls the
 * last step's AllReduce; its main thread is in trainloop_host_stall), mismatch
 * (its AllReduce has count - 1), gpu_not_started (its stream never reaches the
 * AllReduce), slow (it arrives 8 ms late at every step; no hang), crash (a
 * crash dump: it died before the last step). --no-dump leaves RANK's file out.
 * Exit: 0, 1 (cannot write), 64 (usage).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gendumps.h"

static void usage(const char *why)
{
    fprintf(stderr,
            "gendumps: %s\nusage: gendumps -o DIR [-n RANKS] [-r RECORDS] [-t TP] "
            "[-j JOBS] [--culprit RANK --cause CAUSE] [--no-dump RANK]\n",
            why);
    exit(64);
}

static long num(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char m[128];
        snprintf(m, sizeof m, "%s expects an integer from %ld to %ld", opt, min, max);
        usage(m);
    }
    return v;
}

static int parse_cause(const char *s)
{
    static const char *const names[] = {GEN_CAUSE_NAMES};
    for (int i = 0; i < GEN_NCAUSES; i++)
        if (!strcmp(s, names[i])) return i;
    usage("--cause: none, missing, mismatch, gpu_not_started, slow or crash");
    return 0;
}

static int write_rank(const struct gen_job *g, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ncclguard-r%d-%s-%d.json", g->dir, rank, gen_host(rank),
             gen_pid(rank));
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gendumps: %s: %s\n", path, strerror(errno));
        return -1;
    }
    static char *buf;
    if (!buf) buf = malloc(1 << 22);
    setvbuf(f, buf, _IOFBF, 1 << 22);
    gen_write_dump(f, g, rank);
    if (fclose(f) != 0) {
        fprintf(stderr, "gendumps: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct gen_job g = {.nranks = 8, .records = 4096, .tp = 8, .culprit = -1, .no_dump = -1};
    int jobs = 2;
    static const struct option opts[] = {{"culprit", required_argument, NULL, 'c'},
                                         {"cause", required_argument, NULL, 'C'},
                                         {"no-dump", required_argument, NULL, 'D'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:n:r:t:j:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': g.dir = optarg; break;
        case 'n': g.nranks = (int)num("-n", optarg, 2, 1 << 20); break;
        case 'r': g.records = num("-r", optarg, 8, 1 << 24); break;
        case 't': g.tp = (int)num("-t", optarg, 1, 1 << 20); break;
        case 'j': jobs = (int)num("-j", optarg, 1, 256); break;
        case 'c': g.culprit = (int)num("--culprit", optarg, 0, 1 << 20); break;
        case 'C': g.cause = parse_cause(optarg); break;
        case 'D': g.no_dump = (int)num("--no-dump", optarg, 0, 1 << 20); break;
        default: usage("unknown option");
        }
    }
    if (!g.dir) usage("-o DIR is required");
    if (g.nranks % g.tp) usage("-t must divide -n");
    if (g.culprit >= g.nranks || g.no_dump >= g.nranks) usage("a rank is not below -n");
    if ((g.cause != GEN_NONE) != (g.culprit >= 0)) usage("--culprit and --cause go together");
    if (mkdir(g.dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "gendumps: %s: %s\n", g.dir, strerror(errno));
        return 1;
    }
    int failed = 0;
    for (int j = 0; j < jobs; j++) {
        pid_t pid = jobs == 1 ? 0 : fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            int bad = 0;
            for (int r = j; r < g.nranks; r += jobs)
                if (r != g.no_dump && write_rank(&g, r)) bad = 1;
            if (jobs == 1) return bad;
            _exit(bad);
        }
    }
    for (int j = 0; j < jobs; j++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) failed = 1;
    }
    return failed;
}
