/*
 * cmd/run.c: `ncclguard run [--config F] [--dump-dir D] -- CMD...`, which runs CMD
 * with the library preloaded. The library is found next to the command, where
 * `make` and `make install` put it: build/ncclguard beside build/libncclguard.so,
 * PREFIX/bin/ncclguard beside PREFIX/lib/libncclguard.so.
 *
 * The environment is inherited: torchrun, srun (--export=ALL is its default)
 * and MPICH's or Intel MPI's mpiexec hand it to every rank. Open MPI's mpirun
 * does not forward it to ranks on other nodes, so for an Open MPI launcher
 * `run` adds `-x NAME` for LD_PRELOAD and for each NCCLGUARD_* variable, right
 * after the launcher's name.
 */
#include "cmd/run.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/cmd.h"

#define LIB_NAME "libncclguard.so"
#define USAGE_LINE "usage: ncclguard run [--config FILE] [--dump-dir DIR] -- CMD [ARGS...]"

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard run [--config FILE] [--dump-dir DIR] -- CMD [ARGS...]\n\n"
            "Runs CMD with " LIB_NAME " preloaded (prepended to LD_PRELOAD, in place of\n"
            "any other copy there), found next to this command: DIR/" LIB_NAME " for\n"
            "DIR/ncclguard, PREFIX/lib/" LIB_NAME " for PREFIX/bin/ncclguard. CMD may be\n"
            "torchrun, srun or mpirun: the environment is inherited, NCCLGUARD_* included;\n"
            "for Open MPI's mpirun, -x LD_PRELOAD and -x for each NCCLGUARD_* variable are\n"
            "added so that remote ranks get them too.\n\n"
            "  --config FILE  sets NCCLGUARD_CONFIG (the job's configuration file)\n"
            "  --dump-dir DIR sets NCCLGUARD_DUMP_DIR (made absolute)\n\n"
            "Exit status: CMD's; 126 or 127 when CMD cannot be run, 64 (usage), 2 (no " LIB_NAME
            ",\nor one in a path with a space or ':', which LD_PRELOAD cannot carry).\n");
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The library beside this command; 0, or -1 after saying where it looked. */
static int find_library(char out[PATH_MAX])
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "ncclguard: cannot read /proc/self/exe (%s): cannot find " LIB_NAME "\n",
                strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0';
    snprintf(out, PATH_MAX, "%s/" LIB_NAME, exe);
    if (is_file(out)) return 0;
    char *up = strrchr(exe, '/');
    if (up) *up = '\0';
    char tried[PATH_MAX];
    snprintf(tried, sizeof tried, "%s", out);
    snprintf(out, PATH_MAX, "%s/lib/" LIB_NAME, up ? exe : "");
    if (is_file(out)) return 0;
    fprintf(stderr,
            "ncclguard: no " LIB_NAME " at %s or %s: install it beside the command "
            "(make install puts it in PREFIX/lib)\n",
            tried, out);
    return -1;
}

/* A sanitizer's runtime must stay first in LD_PRELOAD, before our library. */
static int is_sanitizer_runtime(const char *entry, size_t len)
{
    const char *base = entry;
    for (size_t i = 0; i < len; i++)
        if (entry[i] == '/') base = entry + i + 1;
    static const char *names[] = {"libasan.so", "libtsan.so", "libubsan.so", "libhwasan.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i]))) return 1;
    return 0;
}

/* Whether the LD_PRELOAD entry (len bytes) is a copy of our library: its file
 * name is LIB_NAME, or it is the same file as lib (a link, another name). */
static int is_our_library(const char *entry, size_t len, const struct stat *lib)
{
    const char *base = entry;
    for (size_t i = 0; i < len; i++)
        if (entry[i] == '/') base = entry + i + 1;
    size_t blen = len - (size_t)(base - entry);
    if (blen == strlen(LIB_NAME) && !strncmp(base, LIB_NAME, blen)) return 1;
    char path[PATH_MAX];
    struct stat st;
    if (!lib || len >= sizeof path) return 0;
    memcpy(path, entry, len);
    path[len] = '\0';
    return stat(path, &st) == 0 && st.st_dev == lib->st_dev && st.st_ino == lib->st_ino;
}

/* LD_PRELOAD with lib added after any sanitizer runtime and before the rest,
 * and any other copy of the library taken out (two copies would both
 * interpose: two summaries, two exit dumps to one file). ld.so separates
 * entries with ':' or spaces (ld.so(8)). */
static char *preload_value(const char *lib, const char *old)
{
    size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *out = malloc(cap), *front = malloc(cap), *rest = malloc(cap);
    if (!out || !front || !rest) {
        perror("ncclguard: run");
        exit(71);
    }
    struct stat lst;
    int have_lib = stat(lib, &lst) == 0;
    front[0] = rest[0] = '\0';
    for (const char *p = old ? old : ""; *p;) {
        size_t len = strcspn(p, ": ");
        if (len && !is_our_library(p, len, have_lib ? &lst : NULL)) {
            char *to = is_sanitizer_runtime(p, len) ? front : rest;
            if (*to) strcat(to, ":");
            strncat(to, p, len);
        }
        p += len;
        p += strspn(p, ": ");
    }
    snprintf(out, cap, "%s%s%s%s%s", front, *front ? ":" : "", lib, *rest ? ":" : "", rest);
    free(front);
    free(rest);
    return out;
}

/* An absolute form of path (relative to the working directory), in buf or path. */
static const char *absolute(const char *path, char buf[PATH_MAX])
{
    if (path[0] == '/') return path;
    char cwd[PATH_MAX / 2];
    if (strlen(path) >= PATH_MAX / 2 - 1 || !getcwd(cwd, sizeof cwd)) return path;
    snprintf(buf, PATH_MAX, "%s/%s", cwd, path);
    return buf;
}

/* Whether launcher is Open MPI's (mpirun, mpiexec, orterun, prterun): asks
 * `launcher --version`, whose first line names "Open MPI" (or "OpenRTE"). */
static int is_open_mpi(const char *launcher)
{
    const char *base = strrchr(launcher, '/');
    base = base ? base + 1 : launcher;
    static const char *names[] = {"mpirun", "mpiexec", "orterun", "prterun", "oshrun"};
    int mpi = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) mpi |= !strcmp(base, names[i]);
    if (!mpi) return 0;
    int fds[2];
    if (pipe(fds) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execlp(launcher, launcher, "--version", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char text[4096];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof text - 1 && (k = read(fds[0], text + n, sizeof text - 1 - n)) > 0) n += k;
    text[n] = '\0';
    close(fds[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return strstr(text, "Open MPI") || strstr(text, "OpenRTE");
}

/* argv for an Open MPI launcher: -x for LD_PRELOAD and every NCCLGUARD_* name. */
static char **with_forwarding(char **cmd)
{
    size_t nvars = 1, ncmd = 0;
    for (char **e = environ; *e; e++) nvars += !strncmp(*e, "NCCLGUARD_", 10);
    while (cmd[ncmd]) ncmd++;
    char **argv = calloc(ncmd + 2 * nvars + 1, sizeof *argv);
    if (!argv) return cmd;
    size_t k = 0;
    argv[k++] = cmd[0];
    argv[k++] = "-x";
    argv[k++] = "LD_PRELOAD";
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "NCCLGUARD_", 10)) continue;
        argv[k++] = "-x";
        argv[k++] = strndup(*e, strcspn(*e, "="));
    }
    for (size_t i = 1; i < ncmd; i++) argv[k++] = cmd[i];
    return argv;
}

int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"dump-dir", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *config = NULL, *dump_dir = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'd': dump_dir = optarg; break;
        case 'h': run_usage(stdout); return 0;
        default:
            fprintf(stderr, "ncclguard: run: bad option '%s'; " USAGE_LINE "\n", argv[optind - 1]);
            return CMD_EXIT_USAGE;
        }
    }
    if (optind >= argc || !*argv[optind]) {
        fprintf(stderr, "ncclguard: run: no command; " USAGE_LINE "\n");
        return CMD_EXIT_USAGE;
    }
    if ((config && !*config) || (dump_dir && !*dump_dir)) {
        fprintf(stderr, "ncclguard: run: --config and --dump-dir need a path; " USAGE_LINE "\n");
        return CMD_EXIT_USAGE;
    }
    char lib[PATH_MAX], buf[PATH_MAX];
    if (find_library(lib) != 0) return 2;
    if (strpbrk(lib, ": ")) { /* ld.so would split the path there, and run the job without it */
        fprintf(stderr,
                "ncclguard: run: the library's path has a space or ':', which LD_PRELOAD "
                "cannot carry (%s): install ncclguard in a directory without them\n",
                lib);
        return 2;
    }
    if (config) {
        if (access(config, R_OK) != 0) {
            fprintf(stderr, "ncclguard: run: cannot read --config %s (%s); " USAGE_LINE "\n",
                    config, strerror(errno));
            return CMD_EXIT_USAGE;
        }
        setenv("NCCLGUARD_CONFIG", absolute(config, buf), 1);
    }
    if (dump_dir) setenv("NCCLGUARD_DUMP_DIR", absolute(dump_dir, buf), 1);
    char **cmd = argv + optind;
    int forward = is_open_mpi(cmd[0]); /* asked before our library is in LD_PRELOAD */
    char *preload = preload_value(lib, getenv("LD_PRELOAD"));
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    if (forward) cmd = with_forwarding(cmd);
    execvp(cmd[0], cmd);
    int e = errno;
    fprintf(stderr, "ncclguard: run: cannot run %s: %s\n", cmd[0], strerror(e));
    return e == ENOENT ? 127 : 126;
}
