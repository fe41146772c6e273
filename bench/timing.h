/* timing.h: the clock, the median, the resident memory, the CPU time of the
 * shim's threads and the runs of child processes, shared by the benchmarks. */
#ifndef NCCLGUARD_BENCH_TIMING_H
#define NCCLGUARD_BENCH_TIMING_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double bench_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline double bench_now_ns(void)
{
    return bench_clock_ns(CLOCK_MONOTONIC);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v and returns its median. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* Resident memory of this process (VmRSS), KiB; -1 when unknown. */
static inline long bench_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* Sums schedstat over the shim's threads whose name starts with `prefix`:
 * ns on a CPU into *run, timeslices into *slices; -1 when there is none. */
static inline int bench_threads_stat(const char *prefix, double *run, double *slices)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int found = 0;
    *run = *slices = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(name, sizeof name, f)) name[0] = '\0';
        fclose(f);
        if (strncmp(name, prefix, strlen(prefix)) != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        unsigned long long r = 0, w = 0, s = 0;
        if (fscanf(f, "%llu %llu %llu", &r, &w, &s) == 3) {
            *run += (double)r;
            *slices += (double)s;
            found = 1;
        }
        fclose(f);
    }
    closedir(d);
    return found ? 0 : -1;
}

/* Runs `self` with argv in a child: `setup(ctx)` sets its environment first;
 * its stdout (and stderr, when `both`) comes into out[size], NUL-terminated
 * (what does not fit is read and dropped). 0 when it exited 0 having said
 * something, else -1. */
static inline int bench_run(const char *self, char *const *argv, void (*setup)(const void *),
                            const void *ctx, int both, char *out, size_t size)
{
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        if (both) dup2(fd[1], 2);
        close(fd[0]);
        setup(ctx);
        execv(self, argv);
        _exit(127);
    }
    close(fd[1]);
    size_t k = 0;
    ssize_t r;
    char rest[4096];
    while ((r = read(fd[0], k < size - 1 ? out + k : rest,
                     k < size - 1 ? size - 1 - k : sizeof rest)) > 0)
        if (k < size - 1) k += (size_t)r;
    out[k] = '\0';
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return k > 0 && WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -1;
}

#endif
