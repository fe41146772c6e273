/*
 * threads.c: see threads.h.
 *
 * A request is a token in the thread's slot, sent as the signal's value with
 * rt_tgsigqueueinfo: bits 2.. hold the slot and a per-collection count, bit 0
 * means "being written", bit 1 "done". The handler claims its slot only by
 * compare-and-swap from the exact token, so an answer that comes after the
 * collector gave up (it swapped the token to 0) writes nothing, and a stray
 * signal of the same number from elsewhere is ignored.
 */
#include "evidence/threads.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "evidence/modmap.h"
#include "evidence/stackscan.h"
#include "track/unwind.h"

#define MAX_THREADS 256 /* a power of two: the slot is token >> 2 & (MAX_THREADS - 1) */
#define MAX_FRAMES 48
#define ANSWER_WAIT_NS (500LL * 1000000)
#define WRITING_GRACE_NS (50LL * 1000000)

enum from { FROM_SELF, FROM_SIGNAL, FROM_SCAN, FROM_NO_ANSWER, FROM_CFI };
static const char *const from_name[] = {"self", "signal", "scan", "no_answer", "cfi"};

struct slot {
    ng_atomic(uint32_t) token;
    pid_t tid;
    int from;
    int npcs;
    int first_guess; /* pcs[first_guess..] are guesses */
    char name[16];
    char state[2];
    char syscall[24];
    char note[160]; /* the stack's note, "" when none */
    void *pcs[MAX_FRAMES];
};

static struct slot slots[MAX_THREADS];
static ng_atomic(int) nslots = -1; /* -1: no collection */
static ng_atomic(int) raw_sample;  /* the slots hold a crash sample: no symbols */
static ng_atomic(int) stack_signal;
static uint32_t round_no;

/* ---- the handler ---- */

/* The interrupted pc, to drop the handler's own frames from the unwind. */
static uintptr_t interrupted_pc(void *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

/* The crash path's stack: from the interrupted instruction on, without the
 * handler's frames (this function, the crash handler, the signal trampoline);
 * all of the unwind when the interrupted pc is not among its first frames. */
static int take_interrupted(void **pcs, void *uc)
{
    static void *raw[MAX_FRAMES + 8];
    int n = ncclguard_unwind_here(raw, MAX_FRAMES + 8), first = 0;
    uintptr_t pc = uc ? interrupted_pc(uc) : 0;
    for (int i = 0; i < n && i < 8 && pc; i++)
        if ((uintptr_t)raw[i] == pc) {
            first = i;
            break;
        }
    int k = 0;
    for (int i = first; i < n && k < MAX_FRAMES; i++) pcs[k++] = raw[i];
    return k;
}

static void on_stack_signal(int signo, siginfo_t *si, void *uc)
{
    (void)signo;
    int saved_errno = errno;
    if (si->si_code == SI_QUEUE && si->si_pid == getpid()) {
        uint32_t token = (uint32_t)si->si_value.sival_int, want = token;
        struct slot *s = &slots[token >> 2 & (MAX_THREADS - 1)];
        if (token && !(token & 3) && ng_atomic_cas_acq_rel(&s->token, &want, token | 1)) {
            void *raw[MAX_FRAMES + 4];
            int n = ncclguard_unwind_here(raw, MAX_FRAMES + 4), first = -1;
            uintptr_t pc = interrupted_pc(uc);
            for (int i = 0; i < n && i < 4 && first < 0; i++)
                if ((uintptr_t)raw[i] == pc) first = i;
            if (first < 0) first = n > 2 ? 2 : 0; /* the handler and the signal trampoline */
            int k = 0;
            for (int i = first; i < n && k < MAX_FRAMES; i++) s->pcs[k++] = raw[i];
            s->npcs = k;
            want = token | 1;
            ng_atomic_cas_acq_rel(&s->token, &want, token | 2);
        }
    }
    errno = saved_errno;
}

/* ---- the signal ---- */

int ncclguard_threads_signal(void)
{
    return ng_atomic_load_acquire(&stack_signal);
}

int ncclguard_threads_init(int avoid)
{
    if (ncclguard_threads_signal()) return ncclguard_threads_signal();
    ncclguard_stackscan_open();
    const char *proxy = getenv("NCCL_PROXY_DUMP_SIGNAL");
    int proxy_sig = proxy ? atoi(proxy) : 0;
    for (int sig = SIGRTMAX; sig >= SIGRTMIN; sig--) {
        struct sigaction old;
        if (sig == avoid || sig == proxy_sig || sigaction(sig, NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_stack_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&sa.sa_mask);
        if (sigaction(sig, &sa, NULL) != 0) continue;
        ng_atomic_store_release(&stack_signal, sig);
        return sig;
    }
    NG_WARN("every real-time signal has a handler already (threads.c): dumps will list "
            "threads without their stacks");
    return 0;
}

/* The handler still ours? An application may install its own later. */
static int signal_usable(int sig)
{
    struct sigaction cur;
    return sig && sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == on_stack_signal;
}

/* ---- /proc ---- */

/* Reads /proc/self/task/<tid>/<leaf> into buf (NUL-terminated); its length or -1. */
static ssize_t read_task_file(pid_t tid, const char *leaf, char *buf, size_t len)
{
    char path[64];
    char digits[21];
    ncclguard_fmt_int64(digits, tid);
    strcpy(path, "/proc/self/task/");
    strcat(path, digits);
    strcat(path, "/");
    strcat(path, leaf);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

static void read_name_state(struct slot *s)
{
    char buf[512];
    ssize_t n = read_task_file(s->tid, "comm", buf, sizeof s->name + 1);
    if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = '\0';
    size_t len = n > 0 ? strnlen(buf, sizeof s->name - 1) : 0;
    memcpy(s->name, buf, len);
    s->name[len] = '\0';
    strcpy(s->state, "?");
    if (read_task_file(s->tid, "stat", buf, sizeof buf) > 0) {
        char *paren = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        if (paren && paren[1] == ' ' && paren[2]) s->state[0] = paren[2];
    }
}

/* The calls that a handler would make fail with EINTR even with SA_RESTART
 * (signal(7)), by number; socket calls are decided by the socket's timeouts. */
static const struct {
    long nr;
    const char *name;
} cut_short[] = {
    {SYS_nanosleep, "nanosleep"},
    {SYS_clock_nanosleep, "clock_nanosleep"},
    {SYS_ppoll, "ppoll"},
    {SYS_pselect6, "pselect6"},
    {SYS_epoll_pwait, "epoll_pwait"},
#ifdef SYS_poll
    {SYS_poll, "poll"},
    {SYS_select, "select"},
    {SYS_epoll_wait, "epoll_wait"},
    {SYS_pause, "pause"},
#endif
#ifdef SYS_epoll_pwait2
    {SYS_epoll_pwait2, "epoll_pwait2"},
#endif
    {SYS_rt_sigsuspend, "rt_sigsuspend"},
    {SYS_rt_sigtimedwait, "rt_sigtimedwait"},
    {SYS_msgrcv, "msgrcv"},
    {SYS_msgsnd, "msgsnd"},
    {SYS_semtimedop, "semtimedop"},
#ifdef SYS_semop
    {SYS_semop, "semop"},
#endif
    {SYS_io_getevents, "io_getevents"},
};

static const struct {
    long nr;
    const char *name;
} socket_calls[] = {
    {SYS_read, "read"},       {SYS_readv, "readv"},       {SYS_recvfrom, "recvfrom"},
    {SYS_recvmsg, "recvmsg"}, {SYS_recvmmsg, "recvmmsg"}, {SYS_write, "write"},
    {SYS_writev, "writev"},   {SYS_sendto, "sendto"},     {SYS_sendmsg, "sendmsg"},
    {SYS_accept, "accept"},   {SYS_accept4, "accept4"},   {SYS_connect, "connect"},
};

/* True when fd is a socket with a receive or send timeout. */
static int socket_with_timeout(long fd)
{
    struct timeval tv[2];
    socklen_t len = sizeof tv[0];
    if (getsockopt((int)fd, SOL_SOCKET, SO_RCVTIMEO, &tv[0], &len) != 0) return 0;
    len = sizeof tv[1];
    if (getsockopt((int)fd, SOL_SOCKET, SO_SNDTIMEO, &tv[1], &len) != 0) return 0;
    return tv[0].tv_sec || tv[0].tv_usec || tv[1].tv_sec || tv[1].tv_usec;
}

/* The call the thread is blocked in, from /proc/self/task/<tid>/syscall: its
 * number, six arguments, sp and pc in v. -1 when it runs or is in no call. */
static long read_syscall(pid_t tid, unsigned long v[8])
{
    char buf[256];
    if (read_task_file(tid, "syscall", buf, sizeof buf) <= 0 || buf[0] == 'r') return -1;
    char *p = buf;
    long nr = strtol(p, &p, 10);
    int n = 0;
    while (n < 8 && *p == ' ') v[n++] = strtoul(p + 1, &p, 16);
    return nr >= 0 && n == 8 && (*p == '\n' || !*p) ? nr : -1; /* else an unknown layout */
}

/* Reads what the thread is blocked in. Returns 1 when a signal would cut that
 * call short, and sets *nr, *pc and *sp for the unwind. */
static int must_not_interrupt(struct slot *s, long *nr_out, uintptr_t *pc, uintptr_t *sp)
{
    unsigned long v[8] = {0};
    s->syscall[0] = '\0';
    long nr = read_syscall(s->tid, v);
    if (nr < 0) return 0;
    *nr_out = nr;
    *sp = v[6];
    *pc = v[7];
    const char *name = NULL;
    int cut = 0;
    for (size_t i = 0; i < sizeof cut_short / sizeof cut_short[0] && !name; i++)
        if (cut_short[i].nr == nr) name = cut_short[i].name, cut = 1;
    for (size_t i = 0; i < sizeof socket_calls / sizeof socket_calls[0] && !name; i++)
        if (socket_calls[i].nr == nr)
            name = socket_calls[i].name, cut = socket_with_timeout((long)v[0]);
    if (nr == SYS_futex) {
        int cmd = (int)(v[1] & FUTEX_CMD_MASK);
        int waits = cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET || cmd == FUTEX_LOCK_PI ||
                    cmd == FUTEX_WAIT_REQUEUE_PI;
        name = "futex";
        cut = waits && v[3] != 0; /* a timed wait returns EINTR */
    }
    if (name) {
        size_t len = strnlen(name, sizeof s->syscall - 1);
        memcpy(s->syscall, name, len);
        s->syscall[len] = '\0';
    } else {
        strcpy(s->syscall, "syscall ");
        ncclguard_fmt_int64(s->syscall + 8, nr);
    }
    return cut;
}

/* True when the thread blocks sig (SigBlk of /proc/self/task/<tid>/status):
 * it would never answer, so it is scanned at once instead of waited for. */
static int blocks_signal(pid_t tid, int sig)
{
    char buf[2048];
    if (!sig || read_task_file(tid, "status", buf, sizeof buf) <= 0) return 0;
    const char *p = strstr(buf, "\nSigBlk:");
    if (!p) return 0;
    unsigned long long mask = strtoull(p + 8, NULL, 16);
    return (mask >> (sig - 1)) & 1;
}

/* ---- the collection ---- */

/* The stack of a thread that is not signalled, from its registers in the
 * syscall file (stackscan.h). The file is read again afterwards: a thread that
 * left the call meanwhile (another call, sp or pc) may have changed the stack
 * under the unwind. A thread that polls with short waits (NCCL's bootstrap, a
 * loop of timed futex waits) leaves its call often, so the unwind is tried
 * again, up to TORN_TRIES times, from where the file says the thread waits now
 * (after a millisecond when it runs); only when every try is torn are the
 * frames above the pc guesses. */
#define TORN_TRIES 4
static void unwind_from_outside(struct slot *s, long nr, uintptr_t pc, uintptr_t sp)
{
    struct timespec pause = {0, 1000000};
    for (int try = 1;; try++) {
        struct ng_scan_result r;
        ncclguard_stackscan(pc, sp, s->pcs, MAX_FRAMES, &r);
        s->from = r.cfi ? FROM_CFI : FROM_SCAN;
        s->npcs = r.n;
        s->first_guess = r.first_guess;
        _Static_assert(sizeof s->note == sizeof r.note, "the note is copied whole");
        memcpy(s->note, r.note, sizeof s->note);
        unsigned long v[8] = {0};
        long now = read_syscall(s->tid, v);
        if (now == nr && v[6] == sp && v[7] == pc) return;
        if (try == TORN_TRIES) break;
        if (now < 0) { /* it runs: look again in a moment */
            nanosleep(&pause, NULL);
            now = read_syscall(s->tid, v);
        }
        if (now < 0) break;
        nr = now, sp = v[6], pc = v[7];
    }
    if (s->first_guess > 1) s->first_guess = 1;
    strcpy(s->note, "torn: the thread left its call during the unwind, frames above the "
                    "pc may be wrong");
}

/* The thread ids of the process, from /proc/self/task. */
static int list_threads(pid_t *tids, int max)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    int n = 0;
    long got;
    while (n < max && (got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && n < max;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            if (d->d_name[0] >= '1' && d->d_name[0] <= '9') tids[n++] = atoi(d->d_name);
            off += d->d_reclen;
        }
    }
    close(fd);
    return n;
}

static int send_request(int sig, pid_t tid, uint32_t token)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = sig;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = (int)token;
    return (int)syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, &si);
}

/* Waits for the signalled slots until the deadline; then gives up on the rest. */
static void wait_answers(int n)
{
    int64_t start = ng_clock_ns(CLOCK_MONOTONIC);
    struct timespec tick = {0, 1000000};
    for (;;) {
        int pending = 0;
        int64_t waited = ng_clock_ns(CLOCK_MONOTONIC) - start;
        for (int i = 0; i < n; i++) {
            struct slot *s = &slots[i];
            if (s->from != FROM_SIGNAL) continue;
            uint32_t t = ng_atomic_load_acquire(&s->token);
            if (t & 2) continue;
            /* Give up on a thread that never started; one that is writing
             * gets a short grace. */
            if ((!(t & 1) && waited >= ANSWER_WAIT_NS) ||
                waited >= ANSWER_WAIT_NS + WRITING_GRACE_NS) {
                if (ng_atomic_cas_acq_rel(&s->token, &t, 0) || !(t & 2)) {
                    s->from = FROM_NO_ANSWER;
                    s->npcs = 0;
                }
                continue;
            }
            pending++;
        }
        if (!pending) return;
        nanosleep(&tick, NULL);
    }
}

void ncclguard_threads_collect(void)
{
    pid_t tids[MAX_THREADS];
    int ntids = list_threads(tids, MAX_THREADS);
    int sig = ncclguard_threads_signal();
    int usable = signal_usable(sig);
    pid_t self = (pid_t)syscall(SYS_gettid);
    round_no++;
    ng_atomic_store_relaxed(&nslots, -1);
    ng_atomic_store_relaxed(&raw_sample, 0);
    ncclguard_stackscan_begin();
    int n = 0;
    for (int i = 0; i < ntids; i++) {
        struct slot *s = &slots[n];
        s->tid = tids[i];
        s->npcs = 0;
        read_name_state(s);
        s->first_guess = MAX_FRAMES;
        s->note[0] = '\0';
        uintptr_t pc = 0, sp = 0;
        long nr = -1;
        if (s->tid == self) {
            s->from = FROM_SELF;
            s->syscall[0] = '\0';
            s->npcs = ncclguard_unwind_here(s->pcs, MAX_FRAMES);
        } else if (must_not_interrupt(s, &nr, &pc, &sp) || !usable || blocks_signal(s->tid, sig)) {
            /* No pc when it runs: a running thread that blocks the signal. */
            s->from = FROM_NO_ANSWER;
            if (pc) unwind_from_outside(s, nr, pc, sp);
        } else {
            uint32_t token = (round_no << 10 | (uint32_t)n << 2) & ~3u;
            if (!token) token = 1u << 10 | (uint32_t)n << 2;
            s->from = FROM_SIGNAL;
            ng_atomic_store_release(&s->token, token);
            if (send_request(sig, s->tid, token) != 0) {
                ng_atomic_store_relaxed(&s->token, 0);
                if (errno == ESRCH) continue; /* it exited meanwhile */
                s->from = FROM_NO_ANSWER;
            }
        }
        n++;
    }
    wait_answers(n);
    ng_atomic_store_release(&nslots, n);
}

void ncclguard_threads_forget(void)
{
    if (!ng_atomic_load_acquire(&raw_sample)) ng_atomic_store_release(&nslots, -1);
}

void ncclguard_threads_take_self(void *uc)
{
    ng_atomic_store_release(&nslots, -1);
    struct slot *s = &slots[0];
    s->tid = (pid_t)syscall(SYS_gettid);
    s->from = FROM_SELF;
    s->syscall[0] = '\0';
    s->first_guess = MAX_FRAMES;
    s->note[0] = '\0';
    strcpy(s->state, "R");
    s->name[0] = '\0';
    char buf[32];
    ssize_t n = read_task_file(s->tid, "comm", buf, sizeof s->name + 1);
    for (ssize_t i = 0; i < n && buf[i] != '\n' && i < (ssize_t)sizeof s->name - 1; i++) {
        s->name[i] = buf[i];
        s->name[i + 1] = '\0';
    }
    s->npcs = take_interrupted(s->pcs, uc);
    ncclguard_modmap_load(); /* the frames' modules, for the dump writer */
    ng_atomic_store_relaxed(&raw_sample, 1);
    ng_atomic_store_release(&nslots, 1);
}

int ncclguard_threads_symbolizable(void)
{
    return !ng_atomic_load_acquire(&raw_sample);
}

int ncclguard_threads_count(void)
{
    return ng_atomic_load_acquire(&nslots);
}

void ncclguard_threads_get(int i, struct ng_thread_view *out)
{
    const struct slot *s = &slots[i];
    *out = (struct ng_thread_view){
        .tid = s->tid,
        .name = s->name,
        .state = s->state,
        .syscall = s->syscall[0] ? s->syscall : NULL,
        .stack_from = from_name[s->from],
        .pcs = s->pcs,
        .npcs = s->npcs,
        .first_guess = s->first_guess < s->npcs ? s->first_guess : s->npcs,
        .stack_note = s->note[0] ? s->note : NULL,
    };
}

void ncclguard_threads_atfork_child(void)
{
    ng_atomic_store_relaxed(&nslots, -1);
}
