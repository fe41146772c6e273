/*
 * analyze/launcher.c: --launcher-log FILE: the launcher's own line about how a
 * rank ended, added to the culprit that is that rank (a crash, or a rank that
 * left no dump: a SIGKILL leaves none). Understood:
 *   launch (tests/apps):  "launch: rank 5 killed by signal SIGSEGV", "... exited with status 1"
 *   torchrun:             "rank : 5 (local_rank: 5)" then "exitcode : -11 (pid: 4242)"
 *   srun:                 "srun: error: a12: task 5: Segmentation fault"
 *   mpirun:               "... process rank 5 with PID 4242 on node a12 exited on signal 11 ..."
 */
#include "analyze/launcher.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"

#define MAX_LINE 1024

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    size_t k = 0;
    while (isspace((unsigned char)s[k])) k++;
    memmove(s, s + k, n - k + 1);
}

/* The number after `key` in line, or -1. */
static long after(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    if (!p) return -1;
    p += strlen(key);
    while (*p == ' ' || *p == ':') p++;
    return isdigit((unsigned char)*p) ? strtol(p, NULL, 10) : -1;
}

static int is_end(const char *line)
{
    static const char *const words[] = {"exited",   "killed",       "signal",
                                        "exitcode", "Segmentation", "Aborted",
                                        "Killed",   "exit code",    "core dumped"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(line, words[i])) return 1;
    return 0;
}

/* The rank a launcher's line speaks of, -1 for none. */
static long rank_of(const char *line, long *torch_rank)
{
    long r;
    if ((r = after(line, "process rank ")) >= 0) return r; /* mpirun */
    if ((r = after(line, ": task ")) >= 0) return r;       /* srun */
    if ((r = after(line, "launch: rank ")) >= 0) return r; /* tests/apps/launch */
    if (!strncmp(line, "rank", 4) && (r = after(line, "rank")) >= 0 && strstr(line, ":")) {
        *torch_rank = r; /* torchrun's block */
        return -1;
    }
    if (strstr(line, "exitcode") && *torch_rank >= 0) return *torch_rank;
    if ((r = after(line, "rank ")) >= 0) return r;
    return -1;
}

void an_launcher_lines(struct an *a)
{
    if (!a->opt.launcher_log) return;
    FILE *f = fopen(a->opt.launcher_log, "r");
    if (!f) {
        an_note(a, "--launcher-log %s: cannot be read", a->opt.launcher_log);
        return;
    }
    char line[MAX_LINE];
    long torch_rank = -1;
    size_t used = 0;
    while (fgets(line, sizeof line, f)) {
        trim(line);
        long r = rank_of(line, &torch_rank);
        if (r < 0 || !is_end(line)) continue;
        for (size_t i = 0; i < a->nfindings; i++) {
            struct an_finding *x = &a->findings[i];
            if (x->grank == r && !x->launcher) {
                x->launcher = an_intern_str(&a->strs, line);
                used++;
            }
        }
        if (r >= 0 && an_u64map_get(&a->rank_by_grank, (uint64_t)r) == AN_NONE)
            an_note(a, "launcher, on rank %ld (no dump): %s", r, line);
    }
    fclose(f);
    (void)used;
}
