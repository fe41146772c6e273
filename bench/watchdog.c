/*
 * watchdog: what the watchdog's threads cost with many ops in flight, how long
 * a dump of the default ring takes, and whether the watchdog keeps polling
 * while a dump is slow. Each figure is measured for LIB and, when given, for
 * BASELINE (an older libncclguard.so), in the same run.
 *
 *   watchdog LIB [BASELINE] SLOWFS   the benchmark (SLOWFS: tests' libslowfs.so)
 *   watchdog --inflight C N S        child: C communicators, each on its own
 *                                    held stream with N ops in flight (N = 0:
 *                                    an idle job); prints
 *                                    the CPU share of the ncclguard-wd, -enf and
 *                                    -dump threads over S seconds (their sum,
 *                                    then each)
 *   watchdog --dump K                child: K dumps of a full ring (4096
 *                                    completed records) asked for by signal;
 *                                    prints the median, least and most ms from
 *                                    the request to the renamed file, the
 *                                    file's size, the CPU ms of the dump
 *                                    thread per dump, then the median ms of
 *                                    the file system's share and of its fsync
 *                                    (fs_share)
 *   watchdog --signal K              child: K dumps asked for by signal with
 *                                    periods far away (NCCLGUARD_POLL_MS=60000,
 *                                    NCCLGUARD_TRIGGER_POLL_S=3600): the dump
 *                                    thread must be woken by the handler;
 *                                    prints the median ms from the signal to
 *                                    the dump's start (its temporary file
 *                                    made) and to its file renamed, and the
 *                                    most of the first
 *   watchdog --slow                  child: one dump held in fsync for 2 s
 *                                    (libslowfs.so, SLOWFS_FIFO); prints how many
 *                                    times the enforcer woke meanwhile (nothing
 *                                    due: about 2, once a second, if it goes
 *                                    on; 0 if it waits for the dump)
 *
 * CPU time and wake-ups come from /proc/self/task/<tid>/schedstat (time on a
 * CPU in ns; timeslices run). Times on this shared machine vary; the ratios
 * and the wake-up counts are the figures to read. A dump is held to a target
 * of 10 ms (DUMP_TARGET_MS), and the file system's share of it is measured
 * in the same run: what a dump could not go below on this disk.
 */
#include <cuda.h>
#include <dirent.h>
#include <fcntl.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tests/fakes/fakecuda.h"
#include "timing.h"

#define DUMP_TARGET_MS 10.0

/* CPU ns of the observer [0], the enforcer [1] and the dump thread [2]. */
static void watchdog_cpu_ns(double ns[3])
{
    static const char *const names[] = {"ncclguard-wd", "ncclguard-enf", "ncclguard-dump"};
    double slices;
    for (int i = 0; i < 3; i++)
        if (bench_threads_stat(names[i], &ns[i], &slices) != 0) ns[i] = 0;
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (long)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int new_comm(ncclComm_t *comm)
{
    ncclUniqueId id;
    return ncclGetUniqueId(&id) || ncclCommInitRank(comm, 1, id, 0);
}

static int start(CUdeviceptr *buf)
{
    CUdevice dev;
    CUcontext ctx;
    return cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
           cuCtxSetCurrent(ctx) || cuMemAlloc(buf, 64);
}

static int inflight(int ncomms, long n, double seconds)
{
    CUdeviceptr buf;
    if (start(&buf)) return 2;
    static volatile int release;
    ncclComm_t *comm = calloc((size_t)ncomms, sizeof *comm);
    CUstream *s = calloc((size_t)ncomms, sizeof *s);
    for (int c = 0; c < ncomms; c++) {
        if (new_comm(&comm[c]) || cuStreamCreate(&s[c], CU_STREAM_NON_BLOCKING)) return 2;
        fakecuda_test_spin(s[c], &release);
        for (long i = 0; i < n; i++)
            ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm[c], s[c]);
    }
    pause_s(1.5); /* the watchdog has seen them all (the observer's first pass, which wakes
                   * the enforcer) */
    double c0[3], c1[3], t0 = bench_now_ns();
    watchdog_cpu_ns(c0);
    pause_s(seconds);
    watchdog_cpu_ns(c1);
    double t1 = bench_now_ns();
    release = 1;
    for (int c = 0; c < ncomms; c++) cuStreamSynchronize(s[c]);
    double share[3];
    for (int i = 0; i < 3; i++) share[i] = 100.0 * (c1[i] - c0[i]) / (t1 - t0);
    printf("%.4f %.4f %.4f %.4f\n", share[0] + share[1] + share[2], share[0], share[1], share[2]);
    fflush(stdout);
    _exit(0); /* no teardown of 64 communicators: it is not measured */
}

/* ns of the last change of the dump file in dir (0: none yet). */
static double dump_changed(const char *dir, off_t *size)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    double t = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name);
        if (k < 5 || strcmp(e->d_name + k - 5, ".json") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0) {
            t = st.st_ctim.tv_sec * 1e9 + st.st_ctim.tv_nsec + (double)st.st_ino;
            *size = st.st_size;
        }
    }
    closedir(d);
    return t;
}

/* Whether the inotify events in buf[0..n) include a .json file moved in. */
static int json_moved_in(const char *buf, ssize_t n)
{
    for (const char *q = buf; q < buf + n;) {
        const struct inotify_event *e = (const void *)q;
        size_t k = e->len ? strlen(e->name) : 0;
        if (k >= 5 && strcmp(e->name + k - 5, ".json") == 0) return 1;
        q += sizeof *e + e->len;
    }
    return 0;
}

/* Asks for a dump by signal and waits, asleep, for its file to be renamed into
 * dir: ms, -1 when none came within 20 s. Not a poll of the directory, which
 * took a third of a core from the dump thread it times on this 2-core machine. */
static double one_dump(const char *dir, off_t *size)
{
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, dir, IN_MOVED_TO) < 0) return -1;
    double t0 = bench_now_ns(), ms = -1;
    kill(getpid(), SIGUSR2);
    char buf[8192] __attribute__((aligned(8)));
    struct pollfd p = {fd, POLLIN, 0};
    while (ms < 0 && bench_now_ns() - t0 < 20e9) {
        int r = poll(&p, 1, 1000); /* EINTR: the signal it sent came to this thread */
        ssize_t n = r > 0 ? read(fd, buf, sizeof buf) : 0;
        if (n > 0 && json_moved_in(buf, n)) ms = (bench_now_ns() - t0) / 1e6;
    }
    close(fd);
    dump_changed(dir, size);
    return ms;
}

/* The file system's share of a dump of `size` bytes in dir: the same number
 * of bytes handled as dump.c handles them (64 KiB writes into a new file,
 * fsync, rename over the previous file, fsync of the directory), k times.
 * The median ms, and that of the fsync alone in *fsync_ms; -1 on an error. */
static double fs_share(const char *dir, off_t size, int k, double *fsync_ms)
{
    static char chunk[64 << 10];
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/share.tmp", dir); /* not .json: dump_changed ignores it */
    snprintf(path, sizeof path, "%s/share.bin", dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    double *all = calloc((size_t)k, sizeof *all), *sync = calloc((size_t)k, sizeof *sync);
    memset(chunk, 'x', sizeof chunk);
    for (int i = -1; i < k; i++) { /* -1: the file the others replace */
        double t0 = bench_now_ns();
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || dfd < 0) return -1;
        for (off_t left = size; left > 0; left -= (off_t)sizeof chunk)
            if (write(fd, chunk, left < (off_t)sizeof chunk ? (size_t)left : sizeof chunk) < 0)
                return -1;
        double t1 = bench_now_ns();
        if (fsync(fd) != 0) return -1;
        double t2 = bench_now_ns();
        if (close(fd) != 0 || rename(tmp, path) != 0) return -1;
        fsync(dfd);
        if (i < 0) continue;
        all[i] = (bench_now_ns() - t0) / 1e6;
        sync[i] = (t2 - t1) / 1e6;
    }
    close(dfd);
    *fsync_ms = bench_median(sync, k);
    double share = bench_median(all, k);
    free(all);
    free(sync);
    return share;
}

/* Whether the inotify events in buf[0..n) include a file made whose name ends
 * in `tail`, or one moved in (`moved`). */
static int event_named(const char *buf, ssize_t n, const char *tail, uint32_t mask)
{
    size_t m = strlen(tail);
    for (const char *q = buf; q < buf + n;) {
        const struct inotify_event *e = (const void *)q;
        size_t k = e->len ? strlen(e->name) : 0;
        if ((e->mask & mask) && k >= m && strcmp(e->name + k - m, tail) == 0) return 1;
        q += sizeof *e + e->len;
    }
    return 0;
}

/* K dumps by signal: the ms from the signal to each dump's start (its
 * temporary file made) and to its rename. */
static int signal_dumps(int k)
{
    CUdeviceptr buf;
    ncclComm_t comm;
    CUstream s;
    if (start(&buf) || new_comm(&comm) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return 2;
    for (int i = 0; i < 100; i++)
        ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm, s);
    cuStreamSynchronize(s);
    const char *dir = getenv("NCCLGUARD_DUMP_DIR");
    mkdir(dir, 0700);
    double *began = calloc((size_t)k, sizeof *began), *done = calloc((size_t)k, sizeof *done);
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO) < 0) return 3;
    pause_s(0.3); /* the watchdog's threads asleep */
    for (int i = 0; i < k; i++) {
        double t0 = bench_now_ns();
        began[i] = done[i] = -1;
        kill(getpid(), SIGUSR2);
        char ev[8192] __attribute__((aligned(8)));
        struct pollfd p = {fd, POLLIN, 0};
        while (done[i] < 0 && bench_now_ns() - t0 < 20e9) {
            ssize_t n = poll(&p, 1, 1000) > 0 ? read(fd, ev, sizeof ev) : 0;
            double ms = (bench_now_ns() - t0) / 1e6;
            if (n > 0 && began[i] < 0 && event_named(ev, n, ".tmp", IN_CREATE)) began[i] = ms;
            if (n > 0 && event_named(ev, n, ".json", IN_MOVED_TO)) done[i] = ms;
        }
        if (began[i] < 0 || done[i] < 0) {
            fprintf(stderr, "watchdog --signal: no dump came within 20 s\n");
            return 3;
        }
        pause_s(0.2); /* asleep again */
    }
    double first = began[0];
    printf("%.3f %.3f %.3f\n", bench_median(began, k), bench_median(done, k), first);
    return 0;
}

static int full_ring(CUdeviceptr *buf, ncclComm_t *comm, CUstream *s)
{
    if (start(buf) || new_comm(comm) || cuStreamCreate(s, CU_STREAM_NON_BLOCKING)) return -1;
    for (int i = 0; i < 5000; i++)
        ncclAllReduce((void *)*buf, (void *)*buf, 2, ncclFloat, ncclSum, *comm, *s);
    cuStreamSynchronize(*s);
    pause_s(0.5); /* every record completed */
    return 0;
}

static int dumps(int k)
{
    CUdeviceptr buf;
    ncclComm_t comm;
    CUstream s;
    if (full_ring(&buf, &comm, &s)) return 2;
    const char *dir = getenv("NCCLGUARD_DUMP_DIR");
    double *ms = calloc((size_t)k, sizeof *ms);
    off_t size = 0;
    mkdir(dir, 0700);     /* as a dump makes it: one_dump watches it */
    one_dump(dir, &size); /* warm: the symbols loaded */
    /* CPU time depends less than wall time on what else the machine runs */
    double cpu0 = 0, cpu1 = 0, slices;
    bench_threads_stat("ncclguard-dump", &cpu0, &slices);
    for (int i = 0; i < k; i++)
        if ((ms[i] = one_dump(dir, &size)) < 0) {
            fprintf(stderr, "watchdog --dump: no dump came within 20 s (or no inotify)\n");
            return 3;
        }
    bench_threads_stat("ncclguard-dump", &cpu1, &slices);
    double median = bench_median(ms, k), fsync_ms = -1; /* ms sorted */
    double share = fs_share(dir, size, k, &fsync_ms);
    printf("%.2f %.2f %.2f %lld %.2f %.2f %.2f\n", median, ms[0], ms[k - 1], (long long)size,
           (cpu1 - cpu0) / 1e6 / k, share, fsync_ms);
    return 0;
}

static int slow(void)
{
    CUdeviceptr buf;
    ncclComm_t comm;
    CUstream s;
    if (full_ring(&buf, &comm, &s)) return 2;
    const char *dir = getenv("NCCLGUARD_DUMP_DIR");
    const char *fifo = getenv("SLOWFS_FIFO");
    char held[4096];
    snprintf(held, sizeof held, "%s.held", fifo);
    if (mkfifo(fifo, 0600) != 0) return 3;
    double run, w0, w1, t0 = bench_now_ns();
    kill(getpid(), SIGUSR2);
    while (access(held, F_OK) != 0)
        if (usleep(1000), bench_now_ns() - t0 > 20e9) return 4; /* no dump came */
    if (bench_threads_stat("ncclguard-enf", &run, &w0)) return 3;
    pause_s(2.0);
    bench_threads_stat("ncclguard-enf", &run, &w1);
    int w = open(fifo, O_WRONLY); /* lets the dump go on */
    if (w >= 0) close(w);
    off_t size;
    while (dump_changed(dir, &size) == 0) usleep(1000);
    printf("%.0f\n", w1 - w0);
    return 0;
}

struct child_env {
    const char *lib, *slowfs;
    char **env; /* NAME=VALUE strings, NULL-terminated */
};

static void child_setup(const void *ctx)
{
    const struct child_env *c = ctx;
    char pre[8192];
    snprintf(pre, sizeof pre, "%s%s%s", c->lib, c->slowfs ? ":" : "", c->slowfs ? c->slowfs : "");
    setenv("LD_PRELOAD", pre, 1);
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    for (char **e = c->env; *e; e++) putenv(*e);
}

/* Runs this program as a child under `lib` (and `slowfs`) with the given
 * environment; its output into out. */
static int child(const char *self, const char *lib, const char *slowfs, char **env, char **argv,
                 char *out, size_t len)
{
    struct child_env c = {lib, slowfs, env};
    return bench_run(self, argv, child_setup, &c, 0, out, len);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--inflight"))
        return inflight(atoi(argv[2]), atol(argv[3]), atof(argv[4]));
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dumps(atoi(argv[2]));
    if (argc == 2 && !strcmp(argv[1], "--slow")) return slow();
    if (argc == 3 && !strcmp(argv[1], "--signal")) return signal_dumps(atoi(argv[2]));
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: watchdog LIB [BASELINE] SLOWFS\n");
        return 64;
    }
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) return 2;
    self[k] = '\0';
    const char *libs[2] = {argv[1], argc == 4 ? argv[2] : NULL};
    const char *label[2] = {"this build", "baseline"};
    const char *slowfs = argv[argc - 1];
    char tmpl[] = "/tmp/ncclguard-bench-wd.XXXXXX";
    if (!mkdtemp(tmpl)) return 2;
    char dumpenv[4300];
    char out[256];
    static const struct {
        const char *comms, *ops, *ring;
    } shape[] = {{"64", "156", "16384"},
                 {"1", "1000", NULL},
                 {"64", "1000", "131072"},
                 {"8", "0", NULL}};
    enum { NSHAPES = sizeof shape / sizeof shape[0], ONE_BY_1000 = 1, IDLE = 3 };
    /* issue 23's targets, % of one core */
    const double target[NSHAPES] = {[ONE_BY_1000] = 0.1, [IDLE] = 0.02};
    double cpu[NSHAPES][2], obs[NSHAPES][2], enf[NSHAPES][2], dmp[NSHAPES][2], wakes[2];
    double sig_start[2], sig_done[2], sig_first[2];
    double dump_ms[2], dump_min[2], dump_max[2], dump_cpu[2], fs_ms[2], fsync_ms[2];
    long long dump_size[2];
    for (int l = 0; l < 2 && libs[l]; l++) {
        for (int i = 0; i < NSHAPES; i++) {
            char ring[64];
            snprintf(ring, sizeof ring, "NCCLGUARD_RING=%s",
                     shape[i].ring ? shape[i].ring : "4096");
            /* an unbounded launch queue: N ops held behind one kernel are more
             * than a real one holds (docs/harness.md), and the host would block */
            char *env[] = {"FAKENCCL_NOOP=0", ring, "NCCLGUARD_TIMEOUT=0", "FAKECUDA_QUEUE_DEPTH=0",
                           NULL};
            char *args[] = {self, "--inflight", (char *)shape[i].comms, (char *)shape[i].ops,
                            "5",  NULL};
            cpu[i][l] = obs[i][l] = enf[i][l] = dmp[i][l] = -1;
            if (!child(self, libs[l], NULL, env, args, out, sizeof out))
                sscanf(out, "%lf %lf %lf %lf", &cpu[i][l], &obs[i][l], &enf[i][l], &dmp[i][l]);
        }
        char holdenv[4300];
        snprintf(holdenv, sizeof holdenv, "SLOWFS_FIFO=%s/fifo-%d", tmpl, l);
        snprintf(dumpenv, sizeof dumpenv, "NCCLGUARD_DUMP_DIR=%s/dumps-slow-%d", tmpl, l);
        char *senv[] = {"FAKENCCL_NOOP=1",
                        "FAKECUDA_INSTANT_EVENTS=1",
                        "NCCLGUARD_POLL_MS=10",
                        holdenv,
                        dumpenv,
                        NULL};
        char *sargs[] = {self, "--slow", NULL};
        wakes[l] = -1;
        if (!child(self, libs[l], slowfs, senv, sargs, out, sizeof out))
            sscanf(out, "%lf", &wakes[l]);
        snprintf(dumpenv, sizeof dumpenv, "NCCLGUARD_DUMP_DIR=%s/dumps-signal-%d", tmpl, l);
        char *genv[] = {"FAKENCCL_NOOP=1",
                        "FAKECUDA_INSTANT_EVENTS=1",
                        "NCCLGUARD_POLL_MS=60000",
                        "NCCLGUARD_TRIGGER_POLL_S=3600",
                        dumpenv,
                        NULL};
        char *gargs[] = {self, "--signal", "10", NULL};
        sig_start[l] = sig_done[l] = sig_first[l] = -1;
        if (!child(self, libs[l], NULL, genv, gargs, out, sizeof out))
            sscanf(out, "%lf %lf %lf", &sig_start[l], &sig_done[l], &sig_first[l]);
    }
    /* The dumps of both builds one right after the other: the load of this
     * shared machine drifts within the minute the loop above takes. */
    for (int l = 0; l < 2 && libs[l]; l++) {
        /* a directory of its own: the file name has the pid in it */
        snprintf(dumpenv, sizeof dumpenv, "NCCLGUARD_DUMP_DIR=%s/dumps-%d", tmpl, l);
        char *env[] = {"FAKENCCL_NOOP=1", "FAKECUDA_INSTANT_EVENTS=1", "NCCLGUARD_POLL_MS=1",
                       dumpenv, NULL};
        char *args[] = {self, "--dump", "10", NULL};
        dump_ms[l] = dump_min[l] = dump_max[l] = dump_cpu[l] = fs_ms[l] = fsync_ms[l] = -1;
        dump_size[l] = 0;
        if (!child(self, libs[l], NULL, env, args, out, sizeof out))
            sscanf(out, "%lf %lf %lf %lld %lf %lf %lf", &dump_ms[l], &dump_min[l], &dump_max[l],
                   &dump_size[l], &dump_cpu[l], &fs_ms[l], &fsync_ms[l]);
    }
    for (int l = 0; l < 2 && libs[l]; l++) {
        for (int i = 0; i < NSHAPES; i++) {
            char goal[64] = "";
            if (target[i] > 0)
                snprintf(goal, sizeof goal, "; target <= %.2f%%: %s", target[i],
                         cpu[i][l] >= 0 && cpu[i][l] <= target[i] ? "met" : "MISSED");
            printf("watchdog (%s): cpu with %s comms x %s ops in flight%s, poll 100 ms: %.3f%% of "
                   "one core (observer %.3f%%, enforcer %.3f%%, dump thread %.3f%%)%s\n",
                   label[l], shape[i].comms, shape[i].ops, i == IDLE ? " (idle)" : "", cpu[i][l],
                   obs[i][l], enf[i][l], dmp[i][l], goal);
        }
        printf("watchdog (%s): dump of a full 4096-record ring (%lld bytes), request to file: "
               "median %.2f ms (least %.2f, most %.2f), %.2f of the %.0f ms target; the dump "
               "thread's CPU: %.2f ms per dump\n",
               label[l], dump_size[l], dump_ms[l], dump_min[l], dump_max[l],
               dump_ms[l] / DUMP_TARGET_MS, DUMP_TARGET_MS, dump_cpu[l]);
        printf("watchdog (%s): the file system's share, the same bytes written, fsync'ed and "
               "renamed alone: median %.2f ms, of which fsync %.2f ms; the dump without its "
               "fsync: about %.2f ms, %.2f of the target\n",
               label[l], fs_ms[l], fsync_ms[l], dump_ms[l] - fsync_ms[l],
               (dump_ms[l] - fsync_ms[l]) / DUMP_TARGET_MS);
        printf("watchdog (%s): during 2 s of a dump held in fsync the enforcer woke %.0f times "
               "(poll 10 ms; 0: it waits for the dump)\n",
               label[l], wakes[l]);
        printf("watchdog (%s): dump by signal with the periods far away (poll 60 s, trigger "
               "3600 s): starts %.2f ms after the signal (median of 10; the first %.2f), %s the "
               "%.0f ms target; its file renamed after %.2f ms\n",
               label[l], sig_start[l], sig_first[l],
               sig_start[l] >= 0 && sig_start[l] <= DUMP_TARGET_MS ? "within" : "PAST",
               DUMP_TARGET_MS, sig_done[l]);
    }
    if (libs[1])
        printf("watchdog: dump ratio this build / baseline: time %.2f, CPU %.2f\n",
               dump_ms[1] > 0 ? dump_ms[0] / dump_ms[1] : 0,
               dump_cpu[1] > 0 ? dump_cpu[0] / dump_cpu[1] : 0);
    if (libs[1]) {
        for (int i = 0; i < NSHAPES; i++)
            printf("watchdog: cpu ratio this build / baseline, %s comms x %s ops%s: %.2f "
                   "(%.3f%% against %.3f%%)\n",
                   shape[i].comms, shape[i].ops, i == IDLE ? " (idle)" : "",
                   cpu[i][1] > 0 ? cpu[i][0] / cpu[i][1] : 0, cpu[i][0], cpu[i][1]);
        printf("watchdog: dump by signal, start ratio this build / baseline: %.2f\n",
               sig_start[1] > 0 ? sig_start[0] / sig_start[1] : 0);
    }
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    return system(cmd) ? 1 : 0;
}
