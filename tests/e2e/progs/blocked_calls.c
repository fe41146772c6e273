/*
 * blocked_calls DIR OUT ROUNDS: one thread in each of the calls that the
 * dump's stacks must leave alone, for tests/e2e/blocked.sh. Run under the shim
 * with dumps on (a communicator of one rank) and NCCLGUARD_DUMP_DIR=DIR; OUT
 * is a directory for the copies of its dumps.
 *
 * The threads, each in a static function of its own: nanosleep, a timed futex
 * wait, an untimed futex wait, epoll_wait, recv on a socket with SO_RCVTIMEO,
 * read on a pipe, poll, and a busy loop; and one more in nanosleep from two
 * static functions built with frame pointers (their CFI needs rbp, which the
 * syscall file does not give: the unwind's confirmed guesses, in every build).
 * Each round, every thread enters its call (timed ones for TIMEOUT_MS), main
 * waits until each is in it, asks for a dump (SIGUSR2 to itself), waits for
 * the renamed file and copies it to OUT/round-R.json, then wakes the untimed
 * ones. Every thread then checks that
 * its call was not cut short (return value, errno, the time against its own
 * timeout) and prints one line:
 *   round R NAME ok|CUT <why> covered|uncovered
 * ("covered": the thread was in its call from before the request until after
 * the file was there, so that dump holds it in the call). Before the rounds it
 * prints "thread NAME TID" for each, and after each dump "dump FILE MS ms"
 * (the time from the request to the file, for a reader). After the last round the threads enter
 * their calls once more with long timeouts, one more dump is copied to
 * OUT/final.json, "ready" is printed and main waits to be killed: a debugger
 * may then attach (its stop would cut some calls short; no check follows).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"
#include "../../unit/proc_syscall.h"

#define TIMEOUT_MS 4000
#define FINAL_MS (600 * 1000)

enum { T_NANOSLEEP, T_TIMED_FUTEX, T_FUTEX, T_EPOLL, T_RECV, T_READ, T_POLL, T_BUSY, T_FRAMED, NT };

struct worker {
    const char *name;
    long nr; /* the call it blocks in, -1: it runs */
    void (*call)(struct worker *w, int ms);
    pthread_t thread;
    atomic_int tid;
    atomic_int inside; /* round number while in the call */
    int64_t t_in, t_out;
    char verdict[160];
};

static pthread_barrier_t start_round, end_round;
static atomic_int round_no, final_round;
static atomic_int futex_word;
static atomic_int busy_stop;
static int read_pipe[2], poll_pipe[2], epoll_pipe[2], socks[2], epfd;
static int64_t t_req, t_done;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void verdict(struct worker *w, long rc, int err, int ok, const char *what)
{
    if (ok)
        snprintf(w->verdict, sizeof w->verdict, "ok");
    else
        snprintf(w->verdict, sizeof w->verdict, "CUT %s returned %ld errno %d after %lld ms", what,
                 rc, err, (long long)((w->t_out - w->t_in) / 1000000));
}

static int lasted(const struct worker *w, int ms)
{
    return w->t_out - w->t_in >= (int64_t)ms * 1000000;
}

__attribute__((noinline)) static void in_nanosleep(struct worker *w, int ms)
{
    struct timespec req = {ms / 1000, (long)(ms % 1000) * 1000000};
    w->t_in = mono_ns();
    long rc = nanosleep(&req, NULL);
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == 0 && lasted(w, ms), "nanosleep");
}

__attribute__((noinline)) static void in_timed_futex(struct worker *w, int ms)
{
    static atomic_int never;
    struct timespec rel = {ms / 1000, (long)(ms % 1000) * 1000000};
    w->t_in = mono_ns();
    long rc = syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == -1 && err == ETIMEDOUT && lasted(w, ms), "timed futex");
}

__attribute__((noinline)) static void in_futex(struct worker *w, int ms)
{
    (void)ms;
    long rc;
    int err;
    int want = atomic_load(&round_no);
    w->t_in = mono_ns();
    do { /* woken when main sets the word to this round's number */
        rc = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, want - 1, NULL, NULL, 0);
        err = errno;
    } while (rc == 0 && atomic_load(&futex_word) != want);
    w->t_out = mono_ns();
    int woken = rc == 0 || (rc == -1 && err == EAGAIN);
    verdict(w, rc, err, woken && atomic_load(&futex_word) == want, "futex");
}

__attribute__((noinline)) static void in_epoll_wait(struct worker *w, int ms)
{
    struct epoll_event ev;
    w->t_in = mono_ns();
    long rc = epoll_wait(epfd, &ev, 1, ms);
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == 0 && lasted(w, ms), "epoll_wait");
}

__attribute__((noinline)) static void in_recv(struct worker *w, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(socks[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    w->t_in = mono_ns();
    long rc = recv(socks[0], &c, 1, 0);
    int err = errno;
    w->t_out = mono_ns();
    /* the kernel rounds the timeout to its tick: a few ms short is not a cut */
    int whole = w->t_out - w->t_in >= (int64_t)(ms - 20) * 1000000;
    verdict(w, rc, err, rc == -1 && (err == EAGAIN || err == EWOULDBLOCK) && whole, "recv");
}

__attribute__((noinline)) static void in_read(struct worker *w, int ms)
{
    (void)ms;
    char c;
    w->t_in = mono_ns();
    long rc = read(read_pipe[0], &c, 1);
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == 1, "read");
}

__attribute__((noinline)) static void in_poll(struct worker *w, int ms)
{
    struct pollfd p = {.fd = poll_pipe[0], .events = POLLIN};
    w->t_in = mono_ns();
    long rc = poll(&p, 1, ms);
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == 0 && lasted(w, ms), "poll");
}

__attribute__((noinline)) static void busy_loop(struct worker *w, int ms)
{
    (void)ms;
    int want = atomic_load(&round_no);
    w->t_in = mono_ns();
    while (atomic_load_explicit(&busy_stop, memory_order_relaxed) != want)
        __asm__ volatile("" ::: "memory");
    w->t_out = mono_ns();
    verdict(w, 0, 0, 1, "busy loop");
}

#define FRAMED __attribute__((noinline, optimize("no-omit-frame-pointer")))

/* Called directly by framed_outer: the confirmed scan's direct-call case. */
/* Its caller's return address: a word like those an earlier call leaves behind. */
__attribute__((noinline)) static void *return_address(void)
{
    return __builtin_return_address(0);
}

FRAMED static void framed_inner(struct worker *w, int ms)
{
    /* A stale-looking return address in this frame, below its own: a scan that kept
     * every return address would take it for the caller (it follows a call of
     * return_address, not of this function). */
    void *volatile decoy[1] = {return_address()};
    struct timespec req = {ms / 1000, (long)(ms % 1000) * 1000000};
    w->t_in = mono_ns();
    long rc = nanosleep(&req, NULL); /* straight from here: rbp is still this frame's */
    int err = errno;
    w->t_out = mono_ns();
    verdict(w, rc, err, rc == 0 && lasted(w, ms) && decoy[0], "nanosleep");
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

FRAMED static void framed_outer(struct worker *w, int ms)
{
    framed_inner(w, ms);
    __asm__ volatile("" ::: "memory");
}

static struct worker workers[NT] = {
    [T_NANOSLEEP] = {"nanosleep", SYS_clock_nanosleep, in_nanosleep},
    [T_TIMED_FUTEX] = {"timed_futex", SYS_futex, in_timed_futex},
    [T_FUTEX] = {"futex", SYS_futex, in_futex},
    [T_EPOLL] = {"epoll_wait", SYS_epoll_wait, in_epoll_wait},
    [T_RECV] = {"recv", SYS_recvfrom, in_recv},
    [T_READ] = {"read", SYS_read, in_read},
    [T_POLL] = {"poll", SYS_poll, in_poll},
    [T_BUSY] = {"busy", -1, busy_loop},
    [T_FRAMED] = {"framed", SYS_clock_nanosleep, framed_outer},
};

__attribute__((noinline)) static void *worker_main(void *arg)
{
    struct worker *w = arg;
    atomic_store(&w->tid, (int)syscall(SYS_gettid));
    for (;;) {
        pthread_barrier_wait(&start_round);
        int r = atomic_load(&round_no);
        atomic_store(&w->inside, r);
        w->call(w, atomic_load(&final_round) ? FINAL_MS : TIMEOUT_MS);
        atomic_store(&w->inside, 0);
        pthread_barrier_wait(&end_round);
    }
    return NULL;
}

static int all_in_place(int r)
{
    for (int i = 0; i < NT; i++) {
        struct worker *w = &workers[i];
        if (atomic_load(&w->inside) != r) return 0;
        if (w->nr >= 0 && current_syscall(atomic_load(&w->tid)) != w->nr) return 0;
    }
    return 1;
}

/* This process's dump in dir (its name ends in -<pid>.json) into path; 0 when found. */
static int find_dump(const char *dir, char *path, size_t len)
{
    char tail[32];
    snprintf(tail, sizeof tail, "-%d.json", (int)getpid());
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = -1;
    while (d && found && (e = readdir(d))) {
        size_t n = strlen(e->d_name), t = strlen(tail);
        if (n > t && !strcmp(e->d_name + n - t, tail) && !strncmp(e->d_name, "ncclguard-", 10))
            found = snprintf(path, len, "%s/%s", dir, e->d_name) < (int)len ? 0 : -1;
    }
    if (d) closedir(d);
    return found;
}

/* Asks for a dump and copies it to OUT/name once the renamed file is there. */
static void dump_to(const char *dir, const char *out, const char *name)
{
    char dump[4096];
    struct stat before = {0}, now;
    if (find_dump(dir, dump, sizeof dump) == 0) stat(dump, &before);
    t_req = mono_ns();
    kill(getpid(), SIGUSR2);
    while (find_dump(dir, dump, sizeof dump) != 0 || stat(dump, &now) != 0 ||
           now.st_ino == before.st_ino)
        usleep(10 * 1000);
    t_done = mono_ns();
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out, name);
    FILE *in = fopen(dump, "r"), *to = fopen(path, "w");
    if (!in || !to) exit(70);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, to);
    fclose(in);
    fclose(to);
}

int main(int argc, char **argv)
{
    if (argc < 4) return 64;
    const char *dump = argv[1], *out = argv[2];
    int rounds = atoi(argv[3]);
    alarm(600); /* a stall fails the test instead of hanging it */
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 1024, &comm)) return 1;
    struct epoll_event ev = {.events = EPOLLIN};
    if (pipe(read_pipe) || pipe(poll_pipe) || pipe(epoll_pipe) ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, socks) || (epfd = epoll_create1(0)) < 0 ||
        epoll_ctl(epfd, EPOLL_CTL_ADD, epoll_pipe[0], &ev))
        return 2;
    pthread_barrier_init(&start_round, NULL, NT + 1);
    pthread_barrier_init(&end_round, NULL, NT + 1);
    for (int i = 0; i < NT; i++) pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    for (int i = 0; i < NT; i++) {
        while (!atomic_load(&workers[i].tid)) usleep(1000);
        printf("thread %s %d\n", workers[i].name, atomic_load(&workers[i].tid));
    }
    fflush(stdout);
    for (int r = 1; r <= rounds + 1; r++) {
        int last = r == rounds + 1;
        atomic_store(&round_no, r);
        atomic_store(&final_round, last);
        pthread_barrier_wait(&start_round);
        while (!all_in_place(r)) usleep(1000);
        char name[32];
        snprintf(name, sizeof name, last ? "final.json" : "round-%d.json", r);
        dump_to(dump, out, name);
        printf("dump %s %.1f ms\n", name, (double)(t_done - t_req) / 1e6); /* for reading */
        if (last) break;
        atomic_store(&futex_word, r);
        syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        if (write(read_pipe[1], "x", 1) != 1) return 3;
        atomic_store(&busy_stop, r);
        pthread_barrier_wait(&end_round);
        for (int i = 0; i < NT; i++) {
            struct worker *w = &workers[i];
            int covered = w->t_in < t_req && w->t_out > t_done;
            printf("round %d %s %s %s\n", r, w->name, w->verdict,
                   covered ? "covered" : "uncovered");
        }
        fflush(stdout);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
