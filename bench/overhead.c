/*
 * overhead: what the shim adds to each NCCL call, and what its watchdog costs.
 *
 *   overhead LIBNCCLGUARD          the benchmark (driver)
 *   overhead --loop N [PAIRS]      child: N 8-byte AllReduce calls (each with the shim's
 *                                  driver calls, events from PAIRS pairs), prints ns/call
 *   overhead --inflight N SECONDS  child: N ops held in flight, prints the
 *                                  watchdog thread's CPU share
 *
 * The driver runs the loop child plain and under the shim with
 * NCCLGUARD_TRACK=off, end and full, interleaved, several times each, all on
 * the fake NCCL in no-op mode (FAKENCCL_NOOP=1: calls enqueue no stream work)
 * with events that complete as they are recorded (FAKECUDA_INSTANT_EVENTS=1),
 * and prints the medians and the differences. The last line is
 *   added_ns_per_call=<N> (track=full, fake events)
 */
#include <cuda.h>
#include <dirent.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tests/fakes/fakecuda.h"
#include "timing.h"

#define REPS 7

static int setup(ncclComm_t *comm, CUstream *s)
{
    CUdevice dev;
    CUcontext ctx;
    ncclUniqueId id;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(s, CU_STREAM_NON_BLOCKING))
        return -1;
    if (ncclGetUniqueId(&id) || ncclCommInitRank(comm, 1, id, 0)) return -1;
    return 0;
}

/* n AllReduce calls; with pairs > 0, each with the driver calls the shim
 * makes around it in track=full (capture status, context, two event records),
 * with events from `pairs` pairs taken oldest first, as a full ring hands
 * them out. */
static void calls(long n, void *p, ncclComm_t comm, CUstream s, CUevent *ev, int pairs)
{
    CUstreamCaptureStatus capturing;
    CUcontext ctx;
    for (long i = 0, k = 0; i < n; i++) {
        if (pairs) {
            cuStreamIsCapturing(s, &capturing);
            cuStreamGetCtx(s, &ctx);
            cuEventRecord(ev[2 * k], s);
        }
        ncclAllReduce(p, p, 2, ncclFloat, ncclSum, comm, s);
        if (pairs) cuEventRecord(ev[2 * k + 1], s);
        if (pairs && ++k == pairs) k = 0;
    }
}

/* Times n calls after a warm-up; prints ns per call. */
static int loop(long n, int pairs)
{
    ncclComm_t comm;
    CUstream s;
    CUdeviceptr buf;
    if (setup(&comm, &s) || cuMemAlloc(&buf, 8)) return 2;
    CUevent *ev = pairs > 0 ? calloc(2 * (size_t)pairs, sizeof *ev) : NULL;
    if (pairs > 0 && !ev) return 2;
    for (int i = 0; i < 2 * pairs; i++)
        if (cuEventCreate(&ev[i], 0)) return 2;
    void *p = (void *)buf;
    calls(n / 10, p, comm, s, ev, pairs);
    cuStreamSynchronize(s);
    double t0 = bench_now_ns();
    calls(n, p, comm, s, ev, pairs);
    double t1 = bench_now_ns();
    cuStreamSynchronize(s);
    printf("%.2f\n", (t1 - t0) / (double)n);
    ncclCommDestroy(comm);
    return 0;
}

/* CPU time of the thread named ncclguard-wd, in ns; -1 if there is none. */
static double watchdog_cpu_ns(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    double ns = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(name, sizeof name, f)) name[0] = '\0';
        fclose(f);
        if (strncmp(name, "ncclguard-wd", 12) != 0) continue;
        /* schedstat's first field: time on a CPU, in ns */
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        unsigned long long run_ns = 0;
        if (fscanf(f, "%llu", &run_ns) == 1) ns = (double)run_ns;
        fclose(f);
    }
    closedir(d);
    return ns;
}

static int inflight(long n, double seconds)
{
    ncclComm_t comm;
    CUstream s;
    CUdeviceptr buf;
    if (setup(&comm, &s) || cuMemAlloc(&buf, 8)) return 2;
    static volatile int release;
    fakecuda_test_spin(s, &release);
    for (long i = 0; i < n; i++)
        ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm, s);
    double c0 = watchdog_cpu_ns(), t0 = bench_now_ns();
    struct timespec ts = {(time_t)seconds, (long)((seconds - (long)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    double c1 = watchdog_cpu_ns(), t1 = bench_now_ns();
    release = 1;
    cuStreamSynchronize(s);
    ncclCommDestroy(comm);
    if (c0 < 0) {
        printf("none\n");
        return 0;
    }
    printf("%.3f\n", 100.0 * (c1 - c0) / (t1 - t0));
    return 0;
}

/* Runs this program as a child with extra environment; returns its number. */
static double child(const char *self, const char *preload, const char *track, const char *ring,
                    const char *arg1, const char *arg2, const char *arg3)
{
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        /* The loop: no stream work, and events that complete as recorded, so
         * that the fake driver's queue costs nothing. Warnings stay on: one
         * about the event pool running dry would mean ops went unmarked. */
        int is_loop = strcmp(arg1, "--loop") == 0;
        setenv("FAKENCCL_NOOP", is_loop ? "1" : "0", 1);
        setenv("FAKECUDA_INSTANT_EVENTS", is_loop ? "1" : "0", 1);
        if (preload) setenv("LD_PRELOAD", preload, 1);
        else unsetenv("LD_PRELOAD");
        if (track) setenv("NCCLGUARD_TRACK", track, 1);
        if (ring) setenv("NCCLGUARD_RING", ring, 1);
        setenv("NCCLGUARD_LOG_LEVEL", "warn", 1);
        execl(self, self, arg1, arg2, arg3, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char out[64] = "";
    ssize_t k = read(fd[0], out, sizeof out - 1);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (k <= 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return -1;
    out[k] = '\0';
    return strncmp(out, "none", 4) == 0 ? -2 : atof(out);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--loop")) return loop(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 0);
    if (argc == 4 && !strcmp(argv[1], "--inflight")) return inflight(atol(argv[2]), atof(argv[3]));
    if (argc != 2) {
        fprintf(stderr, "usage: overhead LIBNCCLGUARD\n");
        return 64;
    }
    const char *self = "/proc/self/exe";
    char exe[4096];
    ssize_t k = readlink(self, exe, sizeof exe - 1);
    if (k <= 0) return 2;
    exe[k] = '\0';
    /* At this rate the watchdog (one poll per 100 ms) finishes no record
     * before the ring comes round: every record is dropped in flight, and the
     * default ring cycles 4096 records and their events through the caches.
     * The ring=256 mode keeps them in cache. The "driver calls" modes make
     * the fake driver's share visible: no shim, but the same driver calls per
     * op, with as many event pairs as the shim's pool has (ring + 64). */
    enum { PLAIN, OFF, END, FULL, FULL_SMALL, DRIVER, DRIVER_SMALL, NMODES };
    static const struct {
        const char *label, *track, *ring, *pairs;
    } mode[NMODES] = {
        {"plain", NULL, NULL, "0"},
        {"track=off", "off", NULL, "0"},
        {"track=end", "end", NULL, "0"},
        {"track=full", "full", NULL, "0"},
        {"track=full ring=256", "full", "256", "0"},
        {"no shim, its driver calls", NULL, NULL, "4160"},
        {"the same, 320 event pairs", NULL, NULL, "320"},
    };
    double v[NMODES][REPS];
    for (int r = 0; r < REPS; r++)
        for (int m = 0; m < NMODES; m++) {
            v[m][r] = child(exe, mode[m].track ? argv[1] : NULL, mode[m].track, mode[m].ring,
                            "--loop", "200000", mode[m].pairs);
            if (v[m][r] < 0) {
                fprintf(stderr, "overhead: child run failed (%s)\n", mode[m].label);
                return 1;
            }
        }
    double med[NMODES];
    for (int m = 0; m < NMODES; m++) med[m] = bench_median(v[m], REPS);
    printf("overhead: 8-byte ncclAllReduce on the fake NCCL (FAKENCCL_NOOP=1), median of %d runs "
           "of 200000 calls\n", REPS);
    printf("overhead: plain %.1f ns/call\n", med[PLAIN]);
    for (int m = OFF; m < NMODES; m++)
        printf("overhead: %-25s %6.1f ns/call, added %6.1f ns (ratio %.2f)\n", mode[m].label,
               med[m], med[m] - med[PLAIN], med[m] / med[PLAIN]);
    printf("overhead: track=full less the fake driver's calls: %.1f ns (ring=256: %.1f ns)\n",
           med[FULL] - med[DRIVER], med[FULL_SMALL] - med[DRIVER_SMALL]);
    double cpu = child(exe, argv[1], "full", NULL, "--inflight", "1000", "5");
    if (cpu == -2) printf("overhead: watchdog cpu: no watchdog thread found\n");
    else printf("overhead: watchdog cpu with 1000 ops in flight: %.3f%% of one core\n", cpu);
    printf("added_ns_per_call=%.0f (track=full, fake events)\n", med[FULL] - med[PLAIN]);
    return 0;
}
