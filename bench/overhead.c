/*
 * overhead: what the shim adds to each NCCL call, in time, driver calls and memory,
 * and what its watchdog costs.
 *
 *   overhead LIBNCCLGUARD [threads] the benchmark (driver); `threads`: only its
 *                                   thread scaling
 *   overhead --loop N [PAIRS]       child: N 8-byte AllReduce calls (each with the shim's
 *                                   driver calls, events from PAIRS pairs), prints ns/call
 *                                   (each child prints "result: " and its figures)
 *   overhead --calls N              child: the same loop, prints the driver calls and the
 *                                   records of timing events per call (fake counters)
 *   overhead --threads T N          child: T threads, each N calls on its own communicator
 *                                   and stream, bursts started together; prints CPU
 *                                   ns/call, the mean over the threads
 *   overhead --mem CTXS             child: a communicator and one op in each of CTXS CUDA
 *                                   contexts; prints the resident memory in KiB
 *   overhead --inflight N SECONDS   child: N ops held in flight, prints the
 *                                   CPU share of the shim's threads
 *
 * All on the fake NCCL in no-op mode (FAKENCCL_NOOP=1: calls enqueue no stream work) with
 * events that complete as they are recorded (FAKECUDA_INSTANT_EVENTS=1). Each figure is
 * a median of runs interleaved with those of its baseline (no shim), and printed with the
 * difference and the ratio. The ring is large enough that no timed loop overwrites a
 * record (a job whose watchdog keeps up never drops one); the overflow path has its own
 * line. The last line is
 *   added_ns_per_call=<N> (track=full, fake events)
 */
#include <cuda.h>
#include <dirent.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tests/fakes/fakecuda.h"
#include "timing.h"

/* The fake driver's own entry points: absent from the real one, which
 * tests/gpu/run.sh runs this against; the parts that need them say so. */
#pragma weak fakecuda_thread_calls
#pragma weak fakecuda_thread_timed_records
#pragma weak fakecuda_test_spin

#define REPS 7
#define LOOP_CALLS "50000"

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
 * makes around it in track=full (capture status, two records of events without
 * timing), with events from `pairs` pairs taken oldest first, as a full ring
 * hands them out. */
static void calls(long n, void *p, ncclComm_t comm, CUstream s, CUevent *ev, int pairs)
{
    CUstreamCaptureStatus capturing;
    for (long i = 0, k = 0; i < n; i++) {
        if (pairs) {
            cuStreamIsCapturing(s, &capturing);
            cuEventRecord(ev[2 * k], s);
        }
        ncclAllReduce(p, p, 2, ncclFloat, ncclSum, comm, s);
        if (pairs) cuEventRecord(ev[2 * k + 1], s);
        if (pairs && ++k == pairs) k = 0;
    }
}

/* n calls in bursts of BURST, each followed by a pause of PAUSE_NS (not
 * counted) in which the watchdog (NCCLGUARD_POLL_MS=1) catches up, as it does
 * in a job between steps: the ring never overflows. Returns the ns spent in
 * the bursts, on `clock`. With `together`, every burst starts when all the
 * threads that share it are ready, as one step's collectives do in a job
 * with a thread per GPU. */
#define BURST 256
#define PAUSE_NS 4000000L
static double paced(long n, void *p, ncclComm_t comm, CUstream s, CUevent *ev, int pairs,
                    clockid_t clock, pthread_barrier_t *together)
{
    double ns = 0;
    for (long done = 0; done < n; done += BURST) {
        long k = n - done < BURST ? n - done : BURST;
        if (together) pthread_barrier_wait(together);
        double t0 = bench_clock_ns(clock);
        calls(k, p, comm, s, ev, pairs);
        ns += bench_clock_ns(clock) - t0;
        cuStreamSynchronize(s);
        struct timespec pause = {0, PAUSE_NS};
        nanosleep(&pause, NULL);
    }
    return ns;
}

/* Times n calls after a warm-up; prints ns per call, or with `count` the fake
 * driver's calls and timed records per call. */
static int loop(long n, int pairs, int count)
{
    ncclComm_t comm;
    CUstream s;
    CUdeviceptr buf;
    if (setup(&comm, &s) || cuMemAlloc(&buf, 8)) return 2;
    CUevent *ev = pairs > 0 ? calloc(2 * (size_t)pairs, sizeof *ev) : NULL;
    if (pairs > 0 && !ev) return 2;
    for (int i = 0; i < 2 * pairs; i++)
        if (cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING)) return 2;
    void *p = (void *)buf;
    paced(n / 10, p, comm, s, ev, pairs, CLOCK_MONOTONIC, NULL);
    if (count) {
        if (!fakecuda_thread_calls) {
            printf("result: none\n"); /* a real driver counts no calls */
            return 0;
        }
        unsigned long long c0 = fakecuda_thread_calls(), t0 = fakecuda_thread_timed_records();
        calls(n, p, comm, s, ev, pairs);
        unsigned long long c1 = fakecuda_thread_calls(), t1 = fakecuda_thread_timed_records();
        printf("result: %.3f %.4f\n", (double)(c1 - c0) / (double)n, (double)(t1 - t0) / (double)n);
    } else {
        double ns = paced(n, p, comm, s, ev, pairs, CLOCK_MONOTONIC, NULL);
        printf("result: %.2f\n", ns / (double)n);
    }
    cuStreamSynchronize(s);
    ncclCommDestroy(comm);
    return 0;
}

/* --threads: each thread has its own communicator and stream. A thread's
 * cost is its own CPU time: on a machine with fewer cores than threads, wall
 * time would count the waits for a core, which no job with a core per GPU
 * thread has; contention on shared lines or locks still shows, since
 * bursts start together. */
struct worker {
    pthread_t t;
    long n;
    ncclComm_t comm;
    CUstream s;
    CUcontext ctx;
    void *buf;
    pthread_barrier_t *go;
    CUevent *ev; /* with pairs: the shim's driver calls, made by the loop */
    int pairs;
    double ns;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    cuCtxSetCurrent(w->ctx);
    paced(w->n / 10, w->buf, w->comm, w->s, w->ev, w->pairs, CLOCK_THREAD_CPUTIME_ID, w->go);
    w->ns = paced(w->n, w->buf, w->comm, w->s, w->ev, w->pairs, CLOCK_THREAD_CPUTIME_ID, w->go);
    return NULL;
}

static int threads(int nt, long n, int pairs)
{
    struct worker w[64];
    pthread_barrier_t go;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr buf;
    if (nt < 1 || nt > 64 || cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
        return 2;
    pthread_barrier_init(&go, NULL, (unsigned)nt);
    for (int i = 0; i < nt; i++) {
        ncclUniqueId id;
        if (cuStreamCreate(&w[i].s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&buf, 8) ||
            ncclGetUniqueId(&id) || ncclCommInitRank(&w[i].comm, 1, id, 0))
            return 2;
        w[i].pairs = pairs;
        w[i].ev = pairs ? calloc(2 * (size_t)pairs, sizeof *w[i].ev) : NULL;
        if (pairs && !w[i].ev) return 2;
        for (int k = 0; k < 2 * pairs; k++)
            if (cuEventCreate(&w[i].ev[k], CU_EVENT_DISABLE_TIMING)) return 2;
        w[i].n = n;
        w[i].ctx = ctx;
        w[i].buf = (void *)buf;
        w[i].go = &go;
    }
    for (int i = 0; i < nt; i++)
        if (pthread_create(&w[i].t, NULL, work, &w[i])) return 2;
    double sum = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(w[i].t, NULL);
        sum += w[i].ns;
    }
    printf("result: %.2f\n", sum / nt / (double)n);
    for (int i = 0; i < nt; i++) ncclCommDestroy(w[i].comm);
    return 0;
}

static int mem(int nctx)
{
    CUdevice dev;
    CUdeviceptr buf;
    if (cuInit(0) || cuDeviceGet(&dev, 0)) return 2;
    for (int i = 0; i < nctx; i++) {
        CUcontext ctx;
        CUstream s;
        ncclComm_t comm;
        ncclUniqueId id;
        if ((i == 0 ? cuDevicePrimaryCtxRetain(&ctx, dev) : cuCtxCreate_v4(&ctx, NULL, 0, dev)) ||
            cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
            cuMemAlloc(&buf, 8) || ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0) ||
            ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm, s) ||
            cuStreamSynchronize(s))
            return 2;
    }
    printf("result: %ld\n", bench_rss_kib());
    fflush(stdout);
    _exit(0); /* the communicators stay: their memory is what was measured */
}

/* CPU time of the shim's threads (ncclguard-*: the observer, the enforcer, the
 * dump thread, the log writer), in ns; -1 if there is none. Each alone would
 * mislead: a thread that no longer wakes with the others pays its wake-ups
 * alone. */
static double watchdog_cpu_ns(void)
{
    double run, slices;
    return bench_threads_stat("ncclguard-", &run, &slices) == 0 ? run : -1;
}

static int inflight(long n, double seconds)
{
    ncclComm_t comm;
    CUstream s;
    CUdeviceptr buf;
    if (setup(&comm, &s) || cuMemAlloc(&buf, 8)) return 2;
    static volatile int release;
    if (!fakecuda_test_spin) {
        printf("result: none\n"); /* nothing holds a real stream here */
        return 0;
    }
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
        printf("result: none\n");
        return 0;
    }
    printf("result: %.3f\n", 100.0 * (c1 - c0) / (t1 - t0));
    return 0;
}

struct child_env {
    const char *preload;
    const char *const *env; /* NAME, VALUE pairs, NULL-terminated */
    int is_inflight;
};

static void child_setup(const void *ctx)
{
    const struct child_env *c = ctx;
    /* No stream work, and events that complete as recorded, so that the fake
     * driver's queue costs nothing. The log goes to the pipe, read and dropped
     * but for the exit summary's count of records dropped. */
    setenv("FAKENCCL_NOOP", c->is_inflight ? "0" : "1", 1);
    setenv("FAKECUDA_INSTANT_EVENTS", c->is_inflight ? "0" : "1", 1);
    /* ops held in flight behind one stream's kernel: more than a launch queue
     * holds (docs/harness.md), so an unbounded one, or the host would block */
    if (c->is_inflight) setenv("FAKECUDA_QUEUE_DEPTH", "0", 1);
    setenv("NCCLGUARD_POLL_MS", "1", 1);
    if (c->preload)
        setenv("LD_PRELOAD", c->preload, 1);
    else
        unsetenv("LD_PRELOAD");
    setenv("NCCLGUARD_LOG_LEVEL", "info", 1); /* the summary, at exit */
    /* Instant events carry a coarse clock (a few ms steps): their durations
     * mean nothing, and the factor rule would call them slow. */
    setenv("NCCLGUARD_SLOW_FACTOR", "0", 1);
    setenv("NCCLGUARD_STACKS", "0", 1); /* their cost: bench/stacks.sh */
    for (int i = 0; c->env && c->env[i]; i += 2) setenv(c->env[i], c->env[i + 1], 1);
}

/* A child run: this program with `args`, under the shim when `preload`, with
 * NAME=VALUE pairs of `env` (NULL-terminated) added. Its output (stderr too:
 * the shim's exit summary says whether records were dropped) goes to out. */
static int child_out(const char *self, const char *preload, const char *const *env,
                     const char *const *args, char *out, size_t size)
{
    struct child_env c = {preload, env, strcmp(args[0], "--inflight") == 0};
    char *argv[8] = {(char *)self};
    for (int i = 0; args[i] && i < 6; i++) argv[i + 1] = (char *)args[i];
    return bench_run(self, argv, child_setup, &c, 1, out, size);
}

/* Records the last child's shim dropped unfinished, from its exit summary. */
static unsigned long long last_dropped;

/* The child's one number; -1 when it failed, -2 when it said "none". */
static double child(const char *self, const char *preload, const char *const *env,
                    const char *const *args)
{
    static char out[65536];
    if (child_out(self, preload, env, args, out, sizeof out)) return -1;
    const char *d = strstr(out, " records dropped in flight"), *q = d;
    while (q && q > out && q[-1] >= '0' && q[-1] <= '9') q--;
    last_dropped = q ? strtoull(q, NULL, 10) : 0;
    const char *v = strstr(out, "result: ");
    if (!v) return -1;
    v += 8;
    return strncmp(v, "none", 4) == 0 ? -2 : atof(v);
}

struct mode {
    const char *label;
    int shim;
    const char *env[8];
};

/* Median of REPS runs of each mode, the runs interleaved; 0, or -1 (said). */
static int medians(const char *self, const char *lib, const struct mode *m, int n,
                   const char *const *args, double *med)
{
    double v[16][REPS];
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < n; i++) {
            v[i][r] = child(self, m[i].shim ? lib : NULL, m[i].env, args);
            if (v[i][r] < 0) {
                fprintf(stderr, "overhead: child run failed (%s)\n", m[i].label);
                return -1;
            }
        }
    for (int i = 0; i < n; i++) med[i] = bench_median(v[i], REPS);
    return 0;
}

static void driver_calls(const char *self, const char *lib)
{
    static const struct mode m[] = {
        {"no shim", 0, {NULL}},
        {"TRACK=off", 1, {"NCCLGUARD_TRACK", "off", NULL}},
        {"TRACK=end", 1, {"NCCLGUARD_TRACK", "end", NULL}},
        {"TRACK=full", 1, {"NCCLGUARD_TRACK", "full", NULL}},
        {"TRACK=full TIMING_SAMPLE=1",
         1,
         {"NCCLGUARD_TRACK", "full", "NCCLGUARD_TIMING_SAMPLE", "1", NULL}},
    };
    const char *args[] = {"--calls", "20000", NULL};
    double base = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        static char out[65536];
        double calls = -1, timed = -1;
        const char *v = NULL;
        if (!child_out(self, m[i].shim ? lib : NULL, m[i].env, args, out, sizeof out) &&
            (v = strstr(out, "result: ")) && !strncmp(v + 8, "none", 4)) {
            printf("overhead: driver calls per call: not counted (a real driver)\n");
            return;
        }
        if (!v || sscanf(v + 8, "%lf %lf", &calls, &timed) != 2) {
            fprintf(stderr, "overhead: child run failed (%s)\n", m[i].label);
            return;
        }
        if (i == 0) {
            base = calls;
            printf("overhead: driver calls per call, no shim: %.2f (the fake NCCL's own)\n", calls);
            continue;
        }
        printf("overhead: driver calls per call added, %-26s %.2f, timing-event records "
               "%.4f\n",
               m[i].label, calls - base, timed);
    }
}

static void thread_scaling(const char *self, const char *lib)
{
    static const struct mode m[] = {{"no shim", 0, {NULL}},
                                    {"TRACK=full", 1, {"NCCLGUARD_TRACK", "full", NULL}}};
    static const char *const counts[] = {"1", "2", "4", "8"};
    double base[2] = {0, 0};
    for (int k = 0; k < 4; k++) {
        const char *args[] = {"--threads", counts[k], "6000", NULL};
        double med[2];
        if (medians(self, lib, m, 2, args, med)) return;
        double added = med[1] - med[0];
        if (k == 0) {
            base[0] = med[0];
            base[1] = added;
        }
        /* A baseline below its 1-thread figure is flat: a 20 ns call timed in
         * bursts does not get cheaper with threads, its timing varies. */
        double growth = med[0] / base[0] > 1 ? med[0] / base[0] : 1;
        printf("overhead: %s threads, own communicators: no shim %.1f ns/call (%.2fx 1 thread), "
               "added %.1f ns (%.2fx 1 thread; target <= %.2fx: %s)\n",
               counts[k], med[0], med[0] / base[0], added, added / base[1], 1.3 * growth,
               added / base[1] <= 1.3 * growth ? "met" : "MISSED");
    }
}

static void memory(const char *self, const char *lib)
{
    static const struct {
        const char *label, *ctxs, *ring;
    } m[] = {{"1 context, default ring (4096)", "1", "4096"},
             {"1 context, NCCLGUARD_RING=16384", "1", "16384"},
             {"1 context, NCCLGUARD_RING=65536", "1", "65536"},
             {"2 contexts, default ring", "2", "4096"},
             {"4 contexts, default ring", "4", "4096"}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const char *args[] = {"--mem", m[i].ctxs, NULL};
        const char *env[] = {"NCCLGUARD_RING", m[i].ring, NULL};
        double plain = child(self, NULL, env, args), shim = child(self, lib, env, args);
        if (plain < 0 || shim < 0) {
            fprintf(stderr, "overhead: memory child failed (%s)\n", m[i].label);
            return;
        }
        printf("overhead: resident memory, %-32s no shim %6.0f KiB, shim adds %6.0f KiB "
               "(%.2fx)\n",
               m[i].label, plain, shim - plain, shim / plain);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--loop"))
        return loop(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 0, 0);
    if (argc == 3 && !strcmp(argv[1], "--calls")) return loop(atol(argv[2]), 0, 1);
    if (argc >= 4 && !strcmp(argv[1], "--threads"))
        return threads(atoi(argv[2]), atol(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
    if (argc == 3 && !strcmp(argv[1], "--mem")) return mem(atoi(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "--inflight")) return inflight(atol(argv[2]), atof(argv[3]));
    if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "threads"))) {
        fprintf(stderr, "usage: overhead LIBNCCLGUARD [threads]\n");
        return 64;
    }
    const char *self = "/proc/self/exe";
    char exe[4096];
    ssize_t k = readlink(self, exe, sizeof exe - 1);
    if (k <= 0) return 2;
    exe[k] = '\0';
    const char *lib = argv[1];
    if (argc == 3) {
        thread_scaling(exe, lib);
        return 0;
    }
    /* "no shim, its driver calls": no shim, but the driver calls that the shim
     * makes per op in track=full (capture query, two records), with as many
     * event pairs as its pool has (ring + 64), so that the shim's own share shows. */
    enum { PLAIN, OFF, END, FULL, DRIVER, OVERFLOW, NMODES };
    static const struct mode mode[NMODES] = {
        {"plain", 0, {NULL}},
        {"track=off", 1, {"NCCLGUARD_TRACK", "off", NULL}},
        {"track=end", 1, {"NCCLGUARD_TRACK", "end", NULL}},
        {"track=full", 1, {"NCCLGUARD_TRACK", "full", NULL}},
        {"no shim, its driver calls", 0, {NULL}},
        {"track=full, ring of 256 overflowing",
         1,
         {"NCCLGUARD_TRACK", "full", "NCCLGUARD_RING", "256", "NCCLGUARD_POLL_MS", "60000", NULL}},
    };
    double v[NMODES][REPS];
    unsigned long long dropped[NMODES] = {0};
    for (int r = 0; r < REPS; r++)
        for (int m = 0; m < NMODES; m++) {
            const char *args[] = {"--loop", LOOP_CALLS, m == DRIVER ? "4160" : "0", NULL};
            v[m][r] = child(exe, mode[m].shim ? lib : NULL, mode[m].env, args);
            dropped[m] += last_dropped;
            if (v[m][r] < 0) {
                fprintf(stderr, "overhead: child run failed (%s)\n", mode[m].label);
                return 1;
            }
        }
    double med[NMODES];
    for (int m = 0; m < NMODES; m++) med[m] = bench_median(v[m], REPS);
    printf("overhead: 8-byte ncclAllReduce on the fake NCCL (FAKENCCL_NOOP=1), median of %d "
           "interleaved runs of %s calls in bursts of %d, the watchdog polling each 1 ms\n",
           REPS, LOOP_CALLS, BURST);
    printf("overhead: plain %.1f ns/call\n", med[PLAIN]);
    for (int m = OFF; m < NMODES; m++)
        printf("overhead: %-30s %6.1f ns/call, added %6.1f ns (ratio %.2f)\n", mode[m].label,
               med[m], med[m] - med[PLAIN], med[m] / med[PLAIN]);
    printf("overhead: track=full less the driver's calls: %.1f ns\n", med[FULL] - med[DRIVER]);
    printf("overhead: records dropped in flight over all runs, steady loops (default ring): "
           "end %llu, full %llu (should be 0: the watchdog keeps up; the overflow line drops "
           "by design: %llu; TRACK=off follows no op, so every record it overwrites counts: "
           "%llu)\n",
           dropped[END], dropped[FULL], dropped[OVERFLOW], dropped[OFF]);
    driver_calls(exe, lib);
    thread_scaling(exe, lib);
    memory(exe, lib);
    const char *env[] = {"NCCLGUARD_TRACK", "full", NULL};
    const char *args[] = {"--inflight", "1000", "5", NULL};
    double cpu = child(exe, lib, env, args);
    if (cpu == -2)
        printf("overhead: watchdog cpu: not measured (a real driver, or no watchdog thread)\n");
    else
        printf("overhead: the shim's threads' cpu with 1000 ops in flight, poll 1 ms: %.3f%% of "
               "one core (make bench-watchdog: at the default poll)\n",
               cpu);
    printf("added_ns_per_call=%.0f (track=full, fake events)\n", med[FULL] - med[PLAIN]);
    return 0;
}
