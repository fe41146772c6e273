/*
 * idle_wakes MODE: what the watchdog's threads do while nothing is due. Run
 * under the shim.
 *
 *   wakes        one op in flight on a held stream (NCCLGUARD_POLL_MS=10, the
 *                timeouts far away): waits until the observer has run 200 more
 *                timeslices (bounded), and prints "idle_wakes: observer N
 *                enforcer N dump N", the timeslices of each thread meanwhile
 *                (/proc/self/task/<tid>/schedstat); exit 3 when schedstat is
 *                not there
 *   signal DIR   asks for a dump with SIGUSR2 and waits (at most 30 s) for
 *                its own in DIR: with NCCLGUARD_POLL_MS=60000 the dump thread
 *                must be woken by the signal, not by its period
 *   hang DIR     one op in flight that never starts: waits (at most 30 s) for
 *                its own dump in DIR (its timeout raises an incident)
 *   join DIR     prints "idle_wakes: ready" once it has a communicator, then
 *                waits (at most 30 s) for its own dump in DIR: the incident
 *                another process of the node raised, through the node's
 *                fan-out, with NCCLGUARD_POLL_MS=60000 and
 *                NCCLGUARD_TRIGGER_POLL_S=3600
 * Each prints "idle_wakes: own dump written" when its dump came, and exits 1
 * when it did not.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../bench/timing.h"
#include "../../fakes/fakecuda.h"
#include "one_rank.h"

/* Timeslices run by the shim's thread `name` so far; -1 when unknown. */
static long long slices(const char *name)
{
    double run, n;
    return bench_threads_stat(name, &run, &n) == 0 ? (long long)n : -1;
}

/* 1 when this process's dump is in dir (its name ends in -<pid>.json). */
static int own_dump(const char *dir)
{
    char tail[32];
    snprintf(tail, sizeof tail, "-%d.json", (int)getpid());
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t k = strlen(e->d_name), m = strlen(tail);
        if (k > m && !strcmp(e->d_name + k - m, tail)) found = 1;
    }
    closedir(d);
    return found;
}

static int wait_own_dump(const char *dir)
{
    for (int i = 0; i < 3000 && !own_dump(dir); i++) usleep(10000);
    if (!own_dump(dir)) {
        fprintf(stderr, "idle_wakes: no dump of its own after 30 s\n");
        return 1;
    }
    printf("idle_wakes: own dump written\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 64;
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    static volatile int release;
    if (one_rank_job(&s, &buf, 64, &comm) != 0) return 2;
    if (!strcmp(argv[1], "signal") && argc == 3) {
        kill(getpid(), SIGUSR2);
        return wait_own_dump(argv[2]);
    }
    if (!strcmp(argv[1], "join") && argc == 3) {
        printf("idle_wakes: ready\n");
        fflush(stdout);
        return wait_own_dump(argv[2]);
    }
    if (!strcmp(argv[1], "hang") && argc == 3) {
        fakecuda_test_spin(s, &release);
        if (ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm, s)) return 2;
        int rc = wait_own_dump(argv[2]);
        fflush(stdout);
        _exit(rc); /* the stream stays held: no teardown */
    }
    if (strcmp(argv[1], "wakes") != 0) return 64;
    fakecuda_test_spin(s, &release);
    if (ncclAllReduce((void *)buf, (void *)buf, 2, ncclFloat, ncclSum, comm, s)) return 2;
    usleep(200000); /* the threads are up and have seen it */
    long long o0 = slices("ncclguard-wd"), e0 = slices("ncclguard-enf");
    long long d0 = slices("ncclguard-dump");
    if (o0 < 0 || e0 < 0 || d0 < 0) return 3;
    long long o1 = o0;
    for (int i = 0; i < 6000 && o1 < o0 + 200; i++) { /* 200 passes: 2 s at 10 ms */
        usleep(10000);
        o1 = slices("ncclguard-wd");
    }
    long long e1 = slices("ncclguard-enf"), d1 = slices("ncclguard-dump");
    printf("idle_wakes: observer %lld enforcer %lld dump %lld\n", o1 - o0, e1 - e0, d1 - d0);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE); /* the fake driver reads it atomically */
    cuStreamSynchronize(s);
    ncclCommDestroy(comm);
    return 0;
}
