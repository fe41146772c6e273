/*
 * paths MODE [ARG]: one-rank jobs, each driving one tracking path that a
 * training loop rarely takes, for tests/e2e/paths.sh (which reads the dumps):
 *
 *   nested N     N nested groups over two streams, an empty group inside
 *   single N     N groups with one op on one stream, then one op on each of two
 *   deferred N   N nonblocking ops, each overwritten in the ring (16 records)
 *                while its end marker is still deferred
 *                (these three end with a probe of the free markers: a dump
 *                with three ops held, renamed held-<name>)
 *   wide N       N groups of one op on each of 17 streams, one more than a
 *                group gets markers for, then 3 s at rest (run with a short
 *                timeout: the 17th stream's ops must not time out)
 *   timeouts GO  ops held on the GPU from the start: AllReduce #1 and #2, then
 *                Send and Recv with peer 0 (p2p_seq 1 and 2); released when the
 *                file GO exists
 *   ends         communicators ended every way (finalize, finalize + destroy,
 *                destroy, revoke, revoke with an op in flight, abort, a destroy
 *                that NCCL refuses), told apart by their commName
 *
 * Exit 0 when every call behaved; any other status names the step that did not.
 * Run with NCCLGUARD_RING=16 for the modes with N, so that a leaked CUDA event
 * (the pool has the ring's size plus 64) runs the pool dry within the run.
 */
#include <cuda.h>
#include <dirent.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

static CUdeviceptr buf;

static int all_reduce(ncclComm_t comm, CUstream s)
{
    void *p = (void *)buf;
    return ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s) != ncclSuccess;
}

static int bcast(ncclComm_t comm, CUstream s)
{
    void *p = (void *)buf;
    return ncclBroadcast(p, p, 4, ncclFloat, 0, comm, s) != ncclSuccess;
}

/* A one-rank communicator named `name`, blocking or not; 0 when NCCL took the call
 * (a nonblocking one is ready once settle() returns). */
static int comm_named(ncclComm_t *comm, const char *name, int blocking)
{
    ncclUniqueId id;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = name;
    cfg.blocking = blocking;
    if (ncclGetUniqueId(&id)) return -1;
    ncclResult_t r = ncclCommInitRankConfig(comm, 1, id, 0, &cfg);
    return r == ncclSuccess || r == ncclInProgress ? 0 : -1;
}

/* Polls the async error of a nonblocking communicator until it settles. */
static int settle(ncclComm_t comm)
{
    for (int i = 0; i < 100000; i++) {
        ncclResult_t err = ncclInProgress;
        if (ncclCommGetAsyncError(comm, &err) != ncclSuccess) return -1;
        if (err == ncclSuccess) return 0;
        if (err != ncclInProgress) return -1;
        usleep(100);
    }
    return -1;
}

static int sync2(CUstream a, CUstream b)
{
    return cuStreamSynchronize(a) || cuStreamSynchronize(b);
}

/* The dump file of this process in NCCLGUARD_DUMP_DIR, into path; 0 if there is one. */
static int dump_path(char *path, size_t len)
{
    const char *dir = getenv("NCCLGUARD_DUMP_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    int found = -1;
    while (d && found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, "ncclguard-", 10) && n > 5 && !strcmp(e->d_name + n - 5, ".json"))
            found = snprintf(path, len, "%s/%s", dir, e->d_name) < (int)len ? 0 : -1;
    }
    if (d) closedir(d);
    return found;
}

/* How many ops the dump at path shows in flight (scheduled or started); -1
 * when it cannot be read. */
static int in_flight(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char text[8 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    int k = 0;
    for (const char *q = text; (q = strstr(q, "\"state\":\"")); q++)
        k += !strncmp(q + 9, "scheduled\"", 10) || !strncmp(q + 9, "started\"", 8);
    return k;
}

/* Asks the watchdog for dumps (signal) until one shows at most `most` ops in
 * flight, up to 60 s: then every op the GPU had finished before this call but
 * those is seen finished and its marker returned. The dumps are the dump
 * thread's, not the observer's, and the observer sleeps up to a second while
 * nothing is in flight: what a dump shows is the barrier, not how many were
 * written. keep: one dump, as it comes, renamed held-<name> so that the exit
 * dump leaves it. */
static int barrier(int keep, int most)
{
    char path[4096], held[4200];
    for (int round = 0; round < 6000; round++) {
        if (dump_path(path, sizeof path) == 0 && unlink(path)) return -1;
        if (raise(SIGUSR2)) return -1;
        for (int i = 0; dump_path(path, sizeof path) != 0; i++) {
            if (i == 6000) return -1;
            usleep(10 * 1000);
        }
        if (keep) break;
        int k = in_flight(path);
        if (k >= 0 && k <= most) return 0;
        usleep(10 * 1000);
    }
    if (!keep) return -1;
    char *slash = strrchr(path, '/');
    snprintf(held, sizeof held, "%.*s/held-%s", (int)(slash - path), path, slash + 1);
    return rename(path, held);
}

/*
 * The free markers after all of the above: with the GPU done and the watchdog
 * caught up, three ops are held in flight and dumped (held-<name>). A marker
 * returned twice sits twice in the pool's free stack, which then hands it out
 * again and again: two of the three get it.
 */
static int probe(ncclComm_t comm, CUstream s)
{
    static volatile int release;
    if (cuStreamSynchronize(s) || barrier(0, 0) || fakecuda_test_spin(s, &release)) return 70;
    for (int k = 0; k < 3; k++)
        if (all_reduce(comm, s)) return 71;
    if (barrier(1, 0)) return 72;
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    return cuStreamSynchronize(s) ? 73 : 0;
}

static int nested(ncclComm_t comm, CUstream s1, CUstream s2, int n)
{
    for (int i = 0; i < n; i++) {
        if (ncclGroupStart() || all_reduce(comm, s1) || ncclGroupStart() || all_reduce(comm, s2) ||
            bcast(comm, s2) || ncclGroupEnd() || ncclGroupStart() || ncclGroupEnd() ||
            all_reduce(comm, s1) || ncclGroupEnd() || sync2(s1, s2))
            return 10;
    }
    return probe(comm, s1);
}

static int single(ncclComm_t comm, CUstream s1, CUstream s2, int n)
{
    for (int i = 0; i < n; i++) {
        if (ncclGroupStart() || all_reduce(comm, s1) || ncclGroupEnd() || ncclGroupStart() ||
            all_reduce(comm, s1) || bcast(comm, s2) || ncclGroupEnd() || sync2(s1, s2))
            return 20;
    }
    return probe(comm, s1);
}

#define WIDE_STREAMS 17
static int wide(ncclComm_t comm, int n)
{
    CUstream s[WIDE_STREAMS];
    for (int k = 0; k < WIDE_STREAMS; k++)
        if (cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING)) return 40;
    for (int i = 0; i < n; i++) {
        if (ncclGroupStart()) return 41;
        for (int k = 0; k < WIDE_STREAMS; k++)
            if (all_reduce(comm, s[k])) return 42;
        if (ncclGroupEnd()) return 43;
        for (int k = 0; k < WIDE_STREAMS; k++)
            if (cuStreamSynchronize(s[k])) return 44;
    }
    sleep(3);
    return 0;
}

/* One nonblocking op on nb whose record 16 ops on `blocking` overwrite in the ring
 * while its end marker is still deferred; then the end marker is recorded. With
 * `quiet`, the GPU and the watchdog are done with everything but the last of the
 * 16 when it overwrites the record. */
static int overwrite_deferred(ncclComm_t nb, ncclComm_t blocking, CUstream s, int quiet)
{
    void *p = (void *)buf;
    ncclResult_t r = ncclAllReduce(p, p, 4, ncclFloat, ncclSum, nb, s);
    if (r != ncclSuccess && r != ncclInProgress) return 31;
    for (int k = 0; k < 16; k++) { /* a whole ring */
        if (quiet && k == 15 && (cuStreamSynchronize(s) || barrier(0, 1))) return 32;
        if (all_reduce(blocking, s)) return 33;
    }
    return settle(nb) ? 34 : 0;
}

static int deferred(ncclComm_t blocking, CUstream s, int n)
{
    ncclComm_t nb;
    int rc;
    if (comm_named(&nb, "nonblocking", 0) || settle(nb)) return 30;
    for (int i = 0; i < n; i++)
        if ((rc = overwrite_deferred(nb, blocking, s, i == n - 1))) return rc;
    if ((rc = probe(blocking, s))) return rc;
    return ncclCommDestroy(nb) ? 39 : 0;
}

static int timeouts(ncclComm_t comm, CUstream s, const char *go)
{
    static volatile int release;
    void *p = (void *)buf;
    if (fakecuda_test_spin(s, &release) || all_reduce(comm, s) || all_reduce(comm, s) ||
        ncclGroupStart() || ncclSend(p, 4, ncclFloat, 0, comm, s) ||
        ncclRecv(p, 4, ncclFloat, 0, comm, s) || ncclGroupEnd())
        return 40;
    for (int i = 0; access(go, F_OK) != 0; i++) {
        if (i == 9000) return 41; /* 90 s */
        usleep(10 * 1000);
    }
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    return cuStreamSynchronize(s) ? 42 : 0;
}

static int ends(CUstream s)
{
    ncclComm_t fin, findes, des, rev, revbusy, abo, refused;
    if (comm_named(&fin, "finalized", 1) || comm_named(&findes, "finalized-destroyed", 1) ||
        comm_named(&des, "destroyed", 1) || comm_named(&rev, "revoked", 1) ||
        comm_named(&revbusy, "revoked-in-flight", 0) || settle(revbusy) ||
        comm_named(&abo, "aborted", 1) || comm_named(&refused, "destroy-refused", 1))
        return 50;
    ncclComm_t each[] = {fin, findes, des, rev, abo, refused};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
        if (all_reduce(each[i], s)) return 51;
    if (cuStreamSynchronize(s)) return 52;
    if (ncclCommFinalize(fin) || ncclCommFinalize(findes) || ncclCommDestroy(findes)) return 53;
    if (ncclCommDestroy(des) || ncclCommRevoke(rev, NCCL_REVOKE_DEFAULT)) return 54;
    /* the fake refuses the third ncclCommDestroy (FAKENCCL_FAIL_OP=CommDestroy, NTH=3) */
    if (ncclCommDestroy(refused) == ncclSuccess) return 55;
    static volatile int release;
    void *p = (void *)buf;
    if (fakecuda_test_spin(s, &release)) return 56;
    ncclResult_t r = ncclAllReduce(p, p, 4, ncclFloat, ncclSum, revbusy, s);
    if (r != ncclSuccess && r != ncclInProgress) return 57;
    r = ncclCommRevoke(revbusy, NCCL_REVOKE_DEFAULT);
    if (r != ncclSuccess && r != ncclInProgress) return 58;
    if (all_reduce(abo, s) || ncclCommAbort(abo)) return 59;
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    if (cuStreamSynchronize(s) || settle(revbusy)) return 60;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 2 && !strcmp(argv[1], "ends"))) return 64;
    alarm(120);
    CUstream s1, s2;
    ncclComm_t comm;
    if (one_rank_job(&s1, &buf, 64, &comm) || cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)) return 2;
    int n = argc == 3 ? atoi(argv[2]) : 0, rc;
    if (!strcmp(argv[1], "nested"))
        rc = nested(comm, s1, s2, n);
    else if (!strcmp(argv[1], "single"))
        rc = single(comm, s1, s2, n);
    else if (!strcmp(argv[1], "deferred"))
        rc = deferred(comm, s1, n);
    else if (!strcmp(argv[1], "wide"))
        rc = wide(comm, n);
    else if (!strcmp(argv[1], "timeouts"))
        rc = timeouts(comm, s1, argv[2]);
    else if (!strcmp(argv[1], "ends"))
        rc = ends(s1);
    else
        return 64;
    if (rc) return rc;
    return ncclCommDestroy(comm) ? 3 : 0;
}
