/* verdict.c: see verdict.h. */
#include "evidence/verdict.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/thread.h"
#include "evidence/dump.h"
#include "evidence/dump_format.h"

#define ID_MAX 128
#define VERDICT_RUN_S 60 /* the analyzer's run, at most */
#define VERDICT_LINES 20 /* lines of the verdict logged, at most */
#define COUNT_PERIOD_MS 250
/* The analyzer's address space, at most (RLIMIT_AS, docs/analysis.md): its model
 * is bounded by its input, and this bounds what a damaged or hostile dump
 * directory can take from the node. Not under a sanitizer, which reserves
 * terabytes of shadow memory. */
#define VERDICT_AS_BYTES (4ull << 30)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VERDICT_AS_LIMITED 0
#else
#define VERDICT_AS_LIMITED 1
#endif

extern char **environ;

static char analyzer[PATH_MAX];
static long world = -1;
static double wait_s;
static char reported[ID_MAX]; /* the last incident a verdict was started for */

struct job {
    char id[ID_MAX];
    char dir[PATH_MAX];
};

void ncclguard_verdict_init(double wait)
{
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "SLURM_NTASKS", NULL};
    wait_s = wait;
    world = ncclguard_env_long(size_vars, 1, 1 << 24);
    Dl_info info;
    if (wait_s <= 0 || !dladdr((void *)&ncclguard_verdict_init, &info) || !info.dli_fname) return;
    char lib[PATH_MAX];
    if (!realpath(info.dli_fname, lib)) return;
    char *slash = strrchr(lib, '/');
    if (!slash) return;
    *slash = '\0';
    const char *const candidates[] = {"%s/ncclguard", "%s/../bin/ncclguard"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, candidates[i], lib);
        if (access(path, X_OK) == 0 && realpath(path, analyzer)) return;
    }
    NG_DEBUG("no ncclguard command next to %s: no verdict in the log after an incident", lib);
}

/* Dumps in dir that belong to incident id (their "incident" member, in the
 * first lines of the file). */
static long count_dumps(const char *dir, const char *id)
{
    char want[ID_MAX + 16], head[1024];
    snprintf(want, sizeof want, "\"incident\":\"%s\"", id);
    DIR *d = opendir(dir);
    if (!d) return 0;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name), sl = strlen(NG_DUMP_SUFFIX);
        if (strncmp(e->d_name, NG_DUMP_PREFIX, strlen(NG_DUMP_PREFIX)) || len < sl ||
            strcmp(e->d_name + len - sl, NG_DUMP_SUFFIX))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t got = read(fd, head, sizeof head - 1);
        close(fd);
        if (got <= 0) continue;
        head[got] = '\0';
        n += strstr(head, want) != NULL;
    }
    closedir(d);
    return n;
}

/* The environment without LD_PRELOAD: the analyzer is not a job process. */
static char **analyzer_env(void)
{
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **env = calloc(n + 1, sizeof *env);
    if (!env) return NULL;
    for (size_t i = 0, k = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11)) env[k++] = environ[i];
    return env;
}

/* Logs the lines of the verdict: the first ones, up to the first empty line. */
static void log_verdict(int fd, pid_t pid, long have)
{
    char buf[8192];
    size_t used = 0;
    int lines = 0, done = 0;
    int64_t end = ng_clock_ns(CLOCK_MONOTONIC) + VERDICT_RUN_S * 1000000000LL;
    for (;;) { /* to the end of its output, so that it never blocks on a full pipe */
        int64_t left_ms = (end - ng_clock_ns(CLOCK_MONOTONIC)) / 1000000;
        struct pollfd p = {fd, POLLIN, 0};
        if (left_ms <= 0 || poll(&p, 1, (int)left_ms) <= 0) {
            kill(pid, SIGKILL);
            if (!lines)
                NG_WARN("ncclguard analyze took more than %d s: killed, no verdict", VERDICT_RUN_S);
            return;
        }
        ssize_t got = read(fd, buf + used, sizeof buf - 1 - used);
        if (got <= 0) return;
        used += (size_t)got;
        buf[used] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n'))) {
            *nl = '\0';
            if (!buf[0] || lines == VERDICT_LINES) done = 1;
            if (!done) {
                lines++;
                NG_WARN("verdict (%ld dumps): %s", have, buf);
            }
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used + 1);
        }
        if (used == sizeof buf - 1) used = 0; /* a line too long: dropped */
    }
}

/*
 * Starts argv[0] with stdout on out_fd, stderr on /dev/null and RLIMIT_AS set,
 * like posix_spawn (which cannot set a limit in the child): vfork, so that no
 * fork handler runs and no memory is copied; the child makes system calls only
 * until execve. Every signal is blocked around it, and the child puts the
 * handlers it inherited back to SIG_DFL before it unblocks them, so that no
 * handler of the job runs in the child on the parent's memory. The child's pid,
 * or -1 with errno set.
 */
static pid_t spawn_limited(char *const argv[], char *const env[], int out_fd)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = vfork();
    if (pid == 0) {
        for (int sig = 1; sig < NSIG; sig++) {
            struct sigaction cur;
            if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler != SIG_DFL &&
                cur.sa_handler != SIG_IGN) {
                struct sigaction dfl = {.sa_handler = SIG_DFL};
                sigaction(sig, &dfl, NULL);
            }
        }
        struct rlimit as = {VERDICT_AS_BYTES, VERDICT_AS_BYTES};
        int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if ((VERDICT_AS_LIMITED && setrlimit(RLIMIT_AS, &as) != 0) ||
            dup2(out_fd, STDOUT_FILENO) < 0 || nul < 0 || dup2(nul, STDERR_FILENO) < 0)
            _exit(127);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execve(argv[0], argv, env);
        _exit(127);
    }
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}

static void *run(void *arg)
{
    struct job *j = arg;
    pthread_setname_np(pthread_self(), "ncclguard-vrd");
    int64_t deadline = ng_clock_ns(CLOCK_MONOTONIC) + (int64_t)(wait_s * 1e9);
    long have;
    while ((have = count_dumps(j->dir, j->id)) < world || world < 0) {
        if (ng_clock_ns(CLOCK_MONOTONIC) >= deadline) break;
        nanosleep(&(struct timespec){0, COUNT_PERIOD_MS * 1000000L}, NULL);
    }
    int out[2];
    char **env = analyzer_env();
    if (!env || pipe2(out, O_CLOEXEC) != 0) {
        NG_WARN("cannot run ncclguard analyze (%s): no verdict", strerror(errno));
        free(env);
        free(j);
        return NULL;
    }
    char *argv[] = {analyzer, "analyze", j->dir, "--incident", j->id, NULL};
    pid_t pid = spawn_limited(argv, env, out[1]);
    int err = pid < 0 ? errno : 0;
    close(out[1]);
    free(env);
    if (err) {
        NG_WARN("cannot run %s (%s): no verdict", analyzer, strerror(err));
    } else {
        log_verdict(out[0], pid, have);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    close(out[0]);
    free(j);
    return NULL;
}

void ncclguard_verdict_after_dump(const char *id)
{
    if (wait_s <= 0 || !analyzer[0] || !id || !strcmp(reported, id)) return;
    snprintf(reported, sizeof reported, "%s", id);
    struct job *j = malloc(sizeof *j);
    if (!j) return;
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->dir, sizeof j->dir, "%s", ncclguard_dump_dir());
    if (ncclguard_thread_start(NULL, run, j) != 0) free(j);
}
