/*
 * launch: start N rank processes of one program the way torchrun does.
 *
 *   launch -n N [--timeout S] [--grace S] [--rdzv DIR] -- PROG ARGS...
 *
 * Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK=0,
 * MASTER_ADDR, MASTER_PORT, LAUNCH_RDZV_DIR (a shared rendezvous directory)
 * and LAUNCH_RUN_ID (unique per launch, so that a reused --rdzv directory
 * never hands out a stale file). Each rank runs in its own process group.
 *
 * The parent is single-threaded: it blocks the signals it cares about and
 * takes them synchronously with sigtimedwait(), so child exits, forwarded
 * signals, the job timeout and the SIGKILL grace period are all handled in
 * one loop without async-signal-safety concerns.
 */
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 64
#define EXIT_OSERR 71
#define EXIT_TIMEOUT 124
#define EXIT_NOEXEC 127

struct rank_proc {
    pid_t pid;    /* 0 once reaped */
    int sent_sig; /* last signal launch sent to this rank, 0 if none */
};

struct launcher {
    int nranks;
    double timeout_s; /* 0: none */
    double deadline;  /* monotonic end of the timeout, when there is one */
    double grace_s;
    const char *rdzv_opt;
    char **prog_argv;
    char rdzv[4096];
    int rdzv_created; /* remove it at the end */
    struct rank_proc *ranks;
    int live;
    int first_status; /* -1 until a rank fails */
    int stopping;     /* SIGTERM sent to all ranks (or a fatal signal forwarded) */
    int timed_out;
    double kill_at; /* monotonic time to SIGKILL survivors, when stopping */
};

static const int forwarded_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded_sigs) / sizeof(forwarded_sigs[0]))

static void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr,
            "launch: %s%s%s; usage: launch -n N [--timeout S] [--grace S] "
            "[--rdzv DIR] -- PROG ARGS...\n",
            msg, arg ? ": " : "", arg ? arg : "");
    exit(EXIT_USAGE);
}

static void print_help(void)
{
    printf("usage: launch -n N [--timeout S] [--grace S] [--rdzv DIR] -- PROG ARGS...\n"
           "Starts N ranks of PROG with torchrun's environment (RANK, LOCAL_RANK,\n"
           "WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT) plus\n"
           "LAUNCH_RDZV_DIR and LAUNCH_RUN_ID. Forwards SIGINT, SIGTERM, SIGHUP, SIGUSR1\n"
           "and SIGUSR2 to every rank. When a rank fails or --timeout S expires, sends\n"
           "SIGTERM to all ranks, then SIGKILL after --grace S (default 5).\n"
           "Exit status: 0 if all ranks succeed; else the first failing rank's status\n"
           "(128+signal if killed); 124 on timeout; 64 usage error; 71 system error.\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double parse_seconds(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 1e7)
        usage_error(opt, "expects a positive number of seconds");
    return v;
}

static void parse_args(struct launcher *l, int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_help();
            exit(0);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--nproc") || !strcmp(a, "--timeout") ||
                   !strcmp(a, "--grace") || !strcmp(a, "--rdzv")) {
            if (i + 1 >= argc) usage_error("missing value for", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--timeout")) {
                l->timeout_s = parse_seconds(a, v);
            } else if (!strcmp(a, "--grace")) {
                l->grace_s = parse_seconds(a, v);
            } else if (!strcmp(a, "--rdzv")) {
                l->rdzv_opt = v;
            } else {
                char *end;
                long n = strtol(v, &end, 10);
                if (end == v || *end || n < 1 || n > 4096)
                    usage_error("-n expects a rank count from 1 to 4096, got", v);
                l->nranks = (int)n;
            }
        } else {
            usage_error("unknown option", a);
        }
    }
    if (l->nranks < 1) usage_error("-n N is required", NULL);
    if (i >= argc) usage_error("missing -- PROG", NULL);
    l->prog_argv = &argv[i];
}

/* Creates the rendezvous directory: the --rdzv one (kept) or a fresh mkdtemp one. */
static void make_rdzv(struct launcher *l)
{
    if (l->rdzv_opt) {
        if (mkdir(l->rdzv_opt, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "launch: cannot create %s: %s\n", l->rdzv_opt, strerror(errno));
            exit(EXIT_OSERR);
        }
        snprintf(l->rdzv, sizeof(l->rdzv), "%s", l->rdzv_opt);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(l->rdzv, sizeof(l->rdzv), "%s/launch-rdzv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(l->rdzv)) {
        fprintf(stderr, "launch: cannot create a directory in %s: %s\n", tmp && *tmp ? tmp : "/tmp",
                strerror(errno));
        exit(EXIT_OSERR);
    }
    l->rdzv_created = 1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_rdzv(struct launcher *l)
{
    if (l->rdzv_created) nftw(l->rdzv, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A free TCP port on the loopback, like torchrun's --master-port auto choice. */
static int pick_port(void)
{
    int port = 29500;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static void setenv_int(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%ld", v);
    setenv(name, buf, 1);
}

/*
 * Child side of a rank: its own process group (so a signal sent to the group
 * reaches the rank and whatever it spawned), death with the launcher, the
 * original signal mask, and the torchrun environment. Never returns.
 */
static void exec_rank(struct launcher *l, int rank, const sigset_t *orig_mask, pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(EXIT_OSERR);
    for (size_t i = 0; i < N_FORWARDED; i++) signal(forwarded_sigs[i], SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, orig_mask, NULL);
    setenv_int("RANK", rank);
    setenv_int("LOCAL_RANK", rank);
    setenv_int("WORLD_SIZE", l->nranks);
    setenv_int("LOCAL_WORLD_SIZE", l->nranks);
    setenv("GROUP_RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("LAUNCH_RDZV_DIR", l->rdzv, 1);
    execvp(l->prog_argv[0], l->prog_argv);
    fprintf(stderr, "launch: rank %d: cannot run %s: %s\n", rank, l->prog_argv[0], strerror(errno));
    _exit(EXIT_NOEXEC);
}

static void start_ranks(struct launcher *l, const sigset_t *orig_mask)
{
    char run_id[64];
    snprintf(run_id, sizeof(run_id), "%ld-%.0f", (long)getpid(), now_s() * 1e6);
    setenv("LAUNCH_RUN_ID", run_id, 1);
    setenv_int("MASTER_PORT", pick_port());
    pid_t self = getpid();
    for (int r = 0; r < l->nranks; r++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "launch: fork of rank %d failed: %s\n", r, strerror(errno));
            if (l->first_status < 0) l->first_status = EXIT_OSERR;
            return;
        }
        if (pid == 0) exec_rank(l, r, orig_mask, self);
        setpgid(pid, pid); /* also in the child: whichever runs first wins the race */
        l->ranks[r].pid = pid;
        l->live++;
    }
}

/* Sends SIG to the process group of every rank not yet reaped (its pid is still ours). */
static void signal_all(struct launcher *l, int sig)
{
    for (int r = 0; r < l->nranks; r++) {
        if (l->ranks[r].pid > 0) {
            killpg(l->ranks[r].pid, sig);
            l->ranks[r].sent_sig = sig;
        }
    }
}

/* Starts the shutdown: SIGTERM now (unless the job already got a fatal signal), SIGKILL later. */
static void begin_stop(struct launcher *l, int send_term)
{
    if (l->stopping) return;
    l->stopping = 1;
    l->kill_at = now_s() + l->grace_s;
    if (send_term) signal_all(l, SIGTERM);
}

/* Prints the line for a rank that failed; the first failure stops the job and sets the status. */
static void report_exit(struct launcher *l, int rank, int status)
{
    int code;
    if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
        if (code != 0) fprintf(stderr, "launch: rank %d exited with status %d\n", rank, code);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = sigabbrev_np(sig);
        code = 128 + sig;
        fprintf(stderr, "launch: rank %d killed by signal SIG%s%s\n", rank, name ? name : "?",
                l->ranks[rank].sent_sig == sig ? " (sent by launch)" : "");
    } else {
        return;
    }
    if (code != 0 && l->first_status < 0) {
        l->first_status = code;
        begin_stop(l, 1);
    }
}

static void reap(struct launcher *l)
{
    int status;
    pid_t pid;
    while (l->live > 0 && (pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int r = 0; r < l->nranks; r++) {
            if (l->ranks[r].pid == pid) {
                l->ranks[r].pid = 0;
                l->live--;
                report_exit(l, r, status);
                break;
            }
        }
    }
}

static int is_forwarded(int sig)
{
    for (size_t i = 0; i < N_FORWARDED; i++)
        if (forwarded_sigs[i] == sig) return 1;
    return 0;
}

/* Waits for the next signal or deadline and acts on it; returns after each event. */
static void wait_event(struct launcher *l, const sigset_t *waitset)
{
    double deadline = -1;
    if (l->stopping && l->kill_at > 0)
        deadline = l->kill_at;
    else if (!l->stopping && l->timeout_s > 0)
        deadline = l->deadline;
    struct timespec ts, *tsp = NULL;
    if (deadline >= 0) {
        double left = deadline - now_s();
        if (left < 0) left = 0;
        ts.tv_sec = (time_t)left;
        ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
        tsp = &ts;
    }
    siginfo_t info;
    int sig = tsp ? sigtimedwait(waitset, &info, tsp) : sigwaitinfo(waitset, &info);
    if (sig < 0) {
        if (errno != EAGAIN) return;
        if (l->stopping) {
            fprintf(stderr, "launch: %d rank(s) still running after %.0f s; sending SIGKILL\n",
                    l->live, l->grace_s);
            signal_all(l, SIGKILL);
            l->kill_at = 0;
        } else {
            fprintf(stderr, "launch: timeout after %g s; stopping %d rank(s)\n", l->timeout_s,
                    l->live);
            l->timed_out = 1;
            begin_stop(l, 1);
        }
    } else if (is_forwarded(sig)) {
        signal_all(l, sig);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) begin_stop(l, 0);
    }
}

static void on_signal(int sig)
{
    (void)sig;
}

int main(int argc, char **argv)
{
    struct launcher l = {.grace_s = 5, .first_status = -1};
    parse_args(&l, argc, argv);

    /* Catch (not ignore) every awaited signal, so none is discarded, then block them. */
    sigset_t waitset, orig_mask;
    sigemptyset(&waitset);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_FORWARDED; i++) {
        sigaction(forwarded_sigs[i], &sa, NULL);
        sigaddset(&waitset, forwarded_sigs[i]);
    }
    sigaction(SIGCHLD, &sa, NULL);
    sigaddset(&waitset, SIGCHLD);
    sigprocmask(SIG_BLOCK, &waitset, &orig_mask);

    l.ranks = calloc((size_t)l.nranks, sizeof(*l.ranks));
    if (!l.ranks) {
        fprintf(stderr, "launch: out of memory\n");
        return EXIT_OSERR;
    }
    make_rdzv(&l);
    l.deadline = now_s() + l.timeout_s;
    start_ranks(&l, &orig_mask);
    if (l.first_status >= 0) begin_stop(&l, 1);
    for (;;) {
        reap(&l);
        if (l.live == 0) break;
        wait_event(&l, &waitset);
    }
    remove_rdzv(&l);
    free(l.ranks);
    if (l.timed_out) return EXIT_TIMEOUT;
    return l.first_status > 0 ? l.first_status : 0;
}
