/*
 * dump_stall HOLD EVENTS [abort|exit|sigterm]: a dump held up by a slow file system stalls
 * nobody but the dump thread. Run under the shim with libslowfs.so (SLOWFS_HOLD
 * = HOLD), a 1 s timeout and the events log at EVENTS.
 *
 * Three one-rank communicators: A's AllReduce never starts (its stream is
 * held), so it times out and its dump blocks in fsync while HOLD exists. Then,
 * with that dump still held: B's AllReduce, enqueued only now, must time out
 * too (the watchdog goes on polling), and ncclCommDestroy of C (healthy) must
 * return. With "abort" (NCCLGUARD_ABORT_AT set) no abort may happen while the
 * dump is held, and one must come once it is let go. With "exit" the process
 * then ends with the dump still held: its exit must not wait for it (the exit
 * dump is off). With "sigterm" the process gets SIGTERM with the dump held,
 * as from a launcher, and the dump is let go a moment later: the process must
 * die of SIGTERM with the dump written. Every wait is bounded
 * (alarm); each step prints one "dump_stall: ok ..." line.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

/* Occurrences of needle in the file at path. */
static int count_in(const char *path, const char *needle)
{
    static char buf[1 << 20];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    int k = 0;
    for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

static void wait_for(const char *path, const char *needle, int count, const char *what)
{
    while (count_in(path, needle) < count) usleep(20 * 1000);
    printf("dump_stall: ok %s\n", what);
    fflush(stdout);
}

/* Lets the held streams go (the fake driver reads the flags atomically). */
static void release_all(volatile int *a, volatile int *b)
{
    __atomic_store_n(a, 1, __ATOMIC_RELEASE);
    __atomic_store_n(b, 1, __ATOMIC_RELEASE);
}

/* Removes the hold file half a second from now: the held dump goes on while
 * the SIGTERM handler waits for it. */
static void *let_go_later(void *hold)
{
    usleep(500 * 1000);
    unlink(hold);
    return NULL;
}

static int new_comm(ncclComm_t *comm)
{
    ncclUniqueId id;
    return ncclGetUniqueId(&id) || ncclCommInitRank(comm, 1, id, 0);
}

int main(int argc, char **argv)
{
    if (argc < 3) return 64;
    const char *hold = argv[1], *events = argv[2];
    int abort_mode = argc > 3 && !strcmp(argv[3], "abort");
    char held[4096];
    snprintf(held, sizeof held, "%s.held", hold);
    alarm(300); /* a stall fails the test instead of hanging it */
    CUstream sa, sb, sc;
    CUdeviceptr buf;
    ncclComm_t a, b, c;
    if (one_rank_job(&sa, &buf, 64, &a) || new_comm(&b) || new_comm(&c) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING))
        return 2;
    void *p = (void *)buf;
    if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, c, sc) || cuStreamSynchronize(sc)) return 3;
    static volatile int release_a, release_b;
    fakecuda_test_spin(sa, &release_a);
    if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, a, sa)) return 3;
    while (access(held, F_OK) != 0) usleep(20 * 1000);
    printf("dump_stall: ok the timeout's dump is held in fsync\n");
    fflush(stdout);

    fakecuda_test_spin(sb, &release_b);
    if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, b, sb)) return 3;
    wait_for(events, "\"event\":\"timeout\"", 2,
             "a later timeout is reported while the dump is held");
    if (ncclCommDestroy(c)) return 4;
    printf("dump_stall: ok ncclCommDestroy returned while the dump is held\n");
    if (abort_mode) {
        if (count_in(events, "\"event\":\"abort\"")) return 5;
        printf("dump_stall: ok no abort while the dump is held\n");
    }
    if (access(held, F_OK) != 0 || access(hold, F_OK) != 0) return 6; /* still held */
    if (!strcmp(argc > 3 ? argv[3] : "", "sigterm")) {
        pthread_t t;
        if (pthread_create(&t, NULL, let_go_later, (void *)hold)) return 7;
        printf("dump_stall: ok SIGTERM with the dump held\n");
        fflush(stdout);
        raise(SIGTERM);
        return 8; /* the default action ends the process before this */
    }
    if (!strcmp(argc > 3 ? argv[3] : "", "exit")) {
        printf("dump_stall: ok exiting with the dump held\n");
        release_all(&release_a, &release_b);
        exit(0);
    }
    fflush(stdout);
    unlink(hold);
    wait_for(events, "\"event\":\"dump\"", 1, "the dump is written once let go");
    if (abort_mode) wait_for(events, "\"event\":\"abort\"", 1, "then the abort");
    release_all(&release_a, &release_b);
    return 0;
}
