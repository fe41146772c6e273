/*
 * test_shim_threads.c: every thread's C stack at dump time
 * (shim/evidence/threads.c, stackscan.c, symbolize.c, shim/track/unwind.c).
 *
 * The first test proves that taking the stacks leaves the application's
 * system calls alone: a blocking read and an untimed futex wait (signalled,
 * restarted by SA_RESTART), a nanosleep and a timed futex wait (not
 * signalled: unwound with CFI from outside) all return what they would have returned without the
 * dump, and the sleeps last at least what they asked for. It also checks
 * that each thread's stack names the function it is blocked in, and that a
 * thread that blocks the signal is not waited for. The second test checks
 * which signal is taken.
 */
#include <check.h>

#include "check_main.h"
#include "proc_syscall.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "evidence/symbolize.h"
#include "evidence/threads.h"
#include "track/unwind.h"

#define SLEEP_NS (1500LL * 1000000)

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct blocked {
    void *(*fn)(void *);
    const char *function; /* the name its stack must show */
    long syscall_nr;      /* what it blocks in, -1: it spins */
    const char *from;     /* how its stack must be taken */
    atomic_int tid;
    long rc;
    int err;
    int64_t took_ns;
    pthread_t thread;
};

static int pipe_fd[2];
static atomic_int futex_word;
static atomic_int timed_word;
static atomic_int stop_spinning;

__attribute__((noinline)) static void *blocked_in_read(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, (int)syscall(SYS_gettid));
    char buf[8];
    b->rc = read(pipe_fd[0], buf, sizeof buf);
    b->err = errno;
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) static void *blocked_in_nanosleep(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, (int)syscall(SYS_gettid));
    struct timespec req = {SLEEP_NS / 1000000000, SLEEP_NS % 1000000000};
    int64_t t0 = mono_ns();
    b->rc = nanosleep(&req, NULL);
    b->err = errno;
    b->took_ns = mono_ns() - t0;
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) static void *blocked_in_futex(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, (int)syscall(SYS_gettid));
    do {
        b->rc = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        b->err = errno;
    } while (b->rc != 0 && b->err == EAGAIN && !atomic_load(&futex_word));
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) static void *blocked_in_timed_futex(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, (int)syscall(SYS_gettid));
    struct timespec rel = {SLEEP_NS / 1000000000, SLEEP_NS % 1000000000};
    int64_t t0 = mono_ns();
    b->rc = syscall(SYS_futex, &timed_word, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
    b->err = errno;
    b->took_ns = mono_ns() - t0;
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) static void *spinning(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&stop_spinning)) __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((noinline)) static void *spinning_masked(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    return spinning(arg);
}

/* Waits (bounded, not timed: only a thread that never gets there fails) until
 * the thread is where the test wants it. */
static void wait_in_place(struct blocked *b)
{
    for (int i = 0; i < 20000; i++) {
        int tid = atomic_load(&b->tid);
        if (tid && (b->syscall_nr < 0 || current_syscall(tid) == b->syscall_nr)) return;
        usleep(500);
    }
    ck_abort_msg("%s never blocked where expected", b->function);
}

/* The collected thread with that tid; asserts it is there. */
static void find_thread(int tid, struct ng_thread_view *out)
{
    for (int i = 0; i < ncclguard_threads_count(); i++) {
        ncclguard_threads_get(i, out);
        if (out->tid == tid) return;
    }
    ck_abort_msg("thread %d not collected", tid);
}

/* True when a frame the unwind confirmed (below first_guess) names function. */
static int stack_names(const struct ng_thread_view *t, const char *function)
{
    int found = 0;
    ncclguard_symbolize_begin();
    for (int i = 0; i < t->first_guess && !found; i++) {
        struct ng_symbol sym;
        ncclguard_symbolize((uintptr_t)t->pcs[i], &sym);
        found = sym.function && !strcmp(sym.function, function);
    }
    ncclguard_symbolize_end();
    return found;
}

NG_TEST(syscalls_are_left_alone_and_stacks_are_taken)
{
    ck_assert_str_ne(ncclguard_unwind_open(), "none");
    ck_assert_int_gt(ncclguard_threads_init(0), 0);
    ck_assert_int_eq(pipe(pipe_fd), 0);
    struct blocked t[] = {
        {.fn = blocked_in_read,
         .function = "blocked_in_read",
         .syscall_nr = SYS_read,
         .from = "signal"},
        {.fn = blocked_in_futex,
         .function = "blocked_in_futex",
         .syscall_nr = SYS_futex,
         .from = "signal"},
        {.fn = blocked_in_nanosleep,
         .function = "blocked_in_nanosleep",
         .syscall_nr = SYS_clock_nanosleep,
         .from = "cfi"},
        {.fn = blocked_in_timed_futex,
         .function = "blocked_in_timed_futex",
         .syscall_nr = SYS_futex,
         .from = "cfi"},
        {.fn = spinning, .function = "spinning", .syscall_nr = -1, .from = "signal"},
        {.fn = spinning_masked, .function = NULL, .syscall_nr = -1, .from = "no_answer"},
    };
    const int n = sizeof t / sizeof t[0];
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&t[i].thread, NULL, t[i].fn, &t[i]), 0);
    for (int i = 0; i < n; i++) wait_in_place(&t[i]);

    ncclguard_threads_collect();

    /* A stray signal of the same number (not from the collector) is ignored:
     * the process lives on. */
    raise(ncclguard_threads_signal());

    ck_assert_int_eq(write(pipe_fd[1], "hello", 5), 5);
    atomic_store(&futex_word, 1);
    syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    atomic_store(&stop_spinning, 1);
    for (int i = 0; i < n; i++) pthread_join(t[i].thread, NULL);

    ck_assert_msg(t[0].rc == 5, "read returned %ld (errno %d)", t[0].rc, t[0].err);
    ck_assert_msg(t[1].rc == 0, "futex wait returned %ld (errno %d)", t[1].rc, t[1].err);
    ck_assert_msg(t[2].rc == 0, "nanosleep returned %ld (errno %d)", t[2].rc, t[2].err);
    ck_assert_msg(t[2].took_ns >= SLEEP_NS, "nanosleep was cut short: %lld ns",
                  (long long)t[2].took_ns);
    ck_assert_msg(t[3].rc == -1 && t[3].err == ETIMEDOUT, "timed futex: %ld (errno %d)", t[3].rc,
                  t[3].err);
    ck_assert_msg(t[3].took_ns >= SLEEP_NS, "timed futex wait was cut short: %lld ns",
                  (long long)t[3].took_ns);

    /* The stacks stay in the slots after the threads ended. */
    for (int i = 0; i < n; i++) {
        struct ng_thread_view v;
        find_thread(atomic_load(&t[i].tid), &v);
#ifdef __SANITIZE_THREAD__
        /* TSan runs a handler only when an intercepted blocking call returns: a
         * thread blocked in read or futex cannot answer; its calls still must
         * come back whole (checked above). */
        if (t[i].syscall_nr >= 0 && !strcmp(t[i].from, "signal") &&
            !strcmp(v.stack_from, "no_answer"))
            continue;
#endif
        ck_assert_msg(!strcmp(v.stack_from, t[i].from), "%s: stack from %s, expected %s",
                      t[i].function ? t[i].function : "masked", v.stack_from, t[i].from);
        if (t[i].function)
            ck_assert_msg(stack_names(&v, t[i].function), "%s not in its stack", t[i].function);
        else
            ck_assert_int_eq(v.npcs, 0);
        /* guesses only with a note, and only from an unwind from outside */
        ck_assert_msg((v.first_guess < v.npcs) <= (v.stack_note != NULL),
                      "%s: %d of %d guessed, "
                      "no note",
                      t[i].function ? t[i].function : "masked", v.first_guess, v.npcs);
        if (strcmp(v.stack_from, "cfi") && strcmp(v.stack_from, "scan"))
            ck_assert_int_eq(v.first_guess, v.npcs);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
        /* without frame pointers every frame's CFI works from sp alone: whole and exact */
        if (!strcmp(v.stack_from, "cfi"))
            ck_assert_msg(!v.stack_note && v.npcs >= 4, "%s: %d frames, note %s", t[i].function,
                          v.npcs, v.stack_note ? v.stack_note : "none");
#endif
    }
    struct ng_thread_view self;
    find_thread((int)syscall(SYS_gettid), &self);
    ck_assert_str_eq(self.stack_from, "self");
}
END_TEST

static void app_handler(int sig)
{
    (void)sig;
}

NG_TEST(signal_choice_respects_handlers_and_nccl)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = app_handler;
    ck_assert_int_eq(sigaction(SIGRTMAX, &sa, NULL), 0);
    char proxy[16];
    snprintf(proxy, sizeof proxy, "%d", SIGRTMAX - 1);
    setenv("NCCL_PROXY_DUMP_SIGNAL", proxy, 1);
    ck_assert_int_eq(ncclguard_threads_init(SIGRTMAX - 2), SIGRTMAX - 3);
    struct sigaction cur;
    sigaction(SIGRTMAX, NULL, &cur);
    ck_assert_ptr_eq(cur.sa_handler, app_handler); /* never replaced */
    sigaction(SIGRTMAX - 3, NULL, &cur);
    ck_assert_int_ne(cur.sa_flags & SA_RESTART, 0);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("shim_threads", "threads", 60, ng_check_tests(), NULL));
}
