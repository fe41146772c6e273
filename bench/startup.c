/*
 * startup: what the shim costs a process that never uses NCCL.
 *
 * 1. The constructor's own work (ncclguard_process_init, linked in from the
 *    shim's objects), timed in a loop: median ns per call.
 * 2. The whole start-up of a tiny program, exec'd in turn plain, with an empty
 *    library preloaded (what the dynamic loader charges any preload) and with
 *    libncclguard.so preloaded: median µs each, in the same run.
 *
 * Usage: startup LIBNCCLGUARD LIBEMPTY NOOP_PROGRAM
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "intercept/start.h"
#include "timing.h"

extern char **environ;

static double spawn_ns(const char *prog, char **env)
{
    char *argv[] = {(char *)prog, NULL};
    pid_t pid;
    double t0 = bench_now_ns();
    if (posix_spawn(&pid, prog, NULL, NULL, argv, env) != 0) return -1;
    int status;
    waitpid(pid, &status, 0);
    return bench_now_ns() - t0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: startup LIBNCCLGUARD LIBEMPTY NOOP_PROGRAM\n");
        return 64;
    }
    enum { CTOR_REPS = 2001, SPAWN_REPS = 301 };
    static double t[CTOR_REPS];
    for (int i = 0; i < CTOR_REPS; i++) {
        double t0 = bench_now_ns();
        ncclguard_process_init();
        t[i] = bench_now_ns() - t0;
    }
    double ctor = bench_median(t, CTOR_REPS);

    char preload_shim[4096], preload_empty[4096];
    snprintf(preload_shim, sizeof preload_shim, "LD_PRELOAD=%s", argv[1]);
    snprintf(preload_empty, sizeof preload_empty, "LD_PRELOAD=%s", argv[2]);
    int n = 0;
    while (environ[n]) n++;
    char **env[3];
    for (int k = 0; k < 3; k++) env[k] = calloc((size_t)n + 2, sizeof **env);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!strncmp(environ[i], "LD_PRELOAD=", 11)) continue;
        env[0][m] = env[1][m] = env[2][m] = environ[i];
        m++;
    }
    env[1][m] = preload_empty;
    env[2][m] = preload_shim;
    static double v[3][SPAWN_REPS];
    for (int i = 0; i < SPAWN_REPS; i++)
        for (int k = 0; k < 3; k++) v[k][i] = spawn_ns(argv[3], env[k]);
    double plain = bench_median(v[0], SPAWN_REPS), empty = bench_median(v[1], SPAWN_REPS);
    double shim = bench_median(v[2], SPAWN_REPS);
    printf("startup: constructor work %.1f us (median of %d calls)\n", ctor / 1e3, CTOR_REPS);
    printf("startup: process start (median of %d): plain %.0f us, empty preload %.0f us, "
           "libncclguard.so %.0f us\n",
           SPAWN_REPS, plain / 1e3, empty / 1e3, shim / 1e3);
    printf("startup: libncclguard.so adds %.0f us to a process start, %.0f us more than an "
           "empty preload (ratio %.3f)\n",
           (shim - plain) / 1e3, (shim - empty) / 1e3, shim / empty);
    for (int k = 0; k < 3; k++) free(env[k]);
    return 0;
}
