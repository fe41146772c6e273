/*
 * cmd/dump.c: `ncclguard dump`, a dump by hand. Two ways, as the shim offers them:
 *
 *  - PID... or --all: the processes of this node. Only a process that has a
 *    communicator has the dump signal's handler (before, SIGUSR2 would end it),
 *    and only such a process has a node marker (docs/node-marker.md):
 *    <node dir>/ncclguard-<uid>/<pid>. The directory is another user's to make
 *    first, and a marker is only a claim: the directory must be ours and closed
 *    to others, each marker is read through base/infile.h, and a PID is
 *    signalled only once proved (read_marker), always with the configured dump
 *    signal, never one read from a file; every other PID is refused with one
 *    line.
 *  - --dir D [--incident ID]: the whole job. Writes D/TRIGGER with ID as its
 *    first line, as a rank that times out does (docs/dump-format.md,
 *    "Incidents"): every rank whose dump directory is D dumps once, on every
 *    node that shares D, for the incident "<mtime>-<ID>". A signal carries no
 *    id, so --incident needs --dir.
 */
#include "cmd/dump.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/infile.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "evidence/dump_format.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "policy/confvalue.h"

#define USAGE_LINE                                                   \
    "usage: ncclguard dump [--node-dir D] [--job ID] PID...|--all, " \
    "or ncclguard dump --dir DUMPDIR [--incident ID]"
#define ID_MAX (NG_TRIGGER_LINE_MAX - 1) /* the shim reads this much of TRIGGER's line */
#define MARKER_MAX 4096                  /* a marker is one line of about 200 bytes */

static void dump_usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard dump [--node-dir D] [--job ID] PID... | --all\n"
            "       ncclguard dump --dir DUMPDIR [--incident ID]\n\n"
            "Asks for an evidence dump now.\n\n"
            "  PID...        these processes of this node: each gets its dump signal, if it\n"
            "                has a communicator (a node marker); others are refused\n"
            "  --all         every process of this user on this node that has one\n"
            "  --job ID      with --all: only the processes of job ID\n"
            "  --node-dir D  where the markers are (default: node_dir of the configuration,\n"
            "                NCCLGUARD_NODE_DIR, else /dev/shm)\n"
            "  --dir DUMPDIR the job's dump directory: writes DUMPDIR/TRIGGER, and every rank\n"
            "                of the job, on every node sharing DUMPDIR, dumps once\n"
            "  --incident ID the trigger's first line (letters, digits, . _ @ -; default:\n"
            "                manual@<host>); the incident id is <mtime>-<ID>\n\n"
            "Exit status: 0, 1 (a process refused, or none found), 2 (trigger not\n"
            "written), 64 (usage).\n");
}

static int bad_usage(const char *why, const char *arg)
{
    fprintf(stderr, "ncclguard: dump: %s%s%s; " USAGE_LINE "\n", why, arg ? " " : "",
            arg ? arg : "");
    return CMD_EXIT_USAGE;
}

struct marker {
    int rank, signal;
    char host[80], job[80];
};

static int dump_signal; /* the configured one (dump_signal, NCCLGUARD_DUMP_SIGNAL); 0: off */

/* Reads read_marker's outcomes: */
enum { MARKER_OK = 0, MARKER_STALE = -1, MARKER_OFF = -2, MARKER_REFUSED = -3 };

/* Field 22 of /proc/<pid>/stat, and the real and effective uids of its status;
 * 0 when the process is not there (or not readable). */
static int proc_ids(long pid, unsigned long long *start, uid_t *ruid, uid_t *euid)
{
    *start = ncclguard_process_start_time((int)pid);
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned r, e;
        if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
            *ruid = r;
            *euid = e;
            found = 1;
            break;
        }
    }
    if (f) fclose(f);
    return *start && found;
}

/* 1 when /proc/<pid>/maps maps a file named libncclguard.so (the shim). */
static int maps_shim(long pid)
{
    char path[64], line[PATH_MAX + 256];
    snprintf(path, sizeof path, "/proc/%ld/maps", pid);
    FILE *f = fopen(path, "re");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        line[n] = '\0';
        const char *slash = strrchr(line, '/');
        found = slash && !strcmp(slash + 1, "libncclguard.so");
    }
    if (f) fclose(f);
    return found;
}

/*
 * Reads and checks the marker of pid in the directory dfd (path dir, for
 * messages), and proves that pid is the process that wrote it: the marker is a
 * regular file of ours that nobody else may write (base/infile.h: a FIFO is
 * never waited on), its start_time is the one of /proc/<pid>/stat now (0, or
 * none, never matches), the process's real and effective uids are ours, and it
 * maps libncclguard.so. Its dump_signal must be the configured dump signal: a
 * process that takes another one dies of ours. MARKER_OK, or with why set:
 * MARKER_STALE (no marker, or one of a process that is gone), MARKER_OFF (its
 * dumps on request are off), MARKER_REFUSED (a marker that proves nothing).
 */
static int read_marker(int dfd, const char *dir, long pid, struct marker *m, char *why, size_t len)
{
    char name[24], text[MARKER_MAX + 1], ewhy[160];
    snprintf(name, sizeof name, "%ld", pid);
    memset(m, 0, sizeof *m);
    m->rank = -1;
    ssize_t n = dfd < 0 ? (errno = ENOENT, -1)
                        : ncclguard_infile_read(dfd, name, 0, MARKER_MAX, text, sizeof text, NULL,
                                                ewhy, sizeof ewhy);
    if (n < 0) {
        if (errno == ENOENT) {
            snprintf(why, len, "it has no communicator under the shim (no marker %s/%s)", dir,
                     name);
            return MARKER_STALE;
        }
        snprintf(why, len, "its marker %s/%s is refused (%s)", dir, name, ewhy);
        return MARKER_REFUSED;
    }
    json_error_t err;
    json_t *j = json_loadb(text, (size_t)n, 0, &err);
    if (!j) {
        snprintf(why, len, "its marker %s/%s is unreadable (%s)", dir, name, err.text);
        return MARKER_REFUSED;
    }
    json_int_t mpid = -1, start = 0, rank = -1, sig = -1;
    const char *schema = "", *host = "?", *job = "?";
    json_unpack(j, "{s?s, s?I, s?I, s?I, s?I, s?s, s?s}", "schema", &schema, "pid", &mpid,
                "start_time", &start, "rank", &rank, "dump_signal", &sig, "host", &host, "job",
                &job);
    m->rank = (int)rank;
    m->signal = (int)sig;
    snprintf(m->host, sizeof m->host, "%s", host);
    snprintf(m->job, sizeof m->job, "%s", job);
    int bad_schema = strncmp(schema, "ncclguard.marker/1", 18) || mpid != pid;
    json_decref(j);
    unsigned long long now = 0;
    uid_t ruid = (uid_t)-1, euid = (uid_t)-1;
    int there = proc_ids(pid, &now, &ruid, &euid);
    if (bad_schema) {
        snprintf(why, len, "its marker %s/%s is not a ncclguard.marker/1 for this pid", dir, name);
        return MARKER_REFUSED;
    }
    if (!there) {
        snprintf(why, len, "no such process (a stale marker %s/%s)", dir, name);
        return MARKER_STALE;
    }
    if (start <= 0) {
        snprintf(why, len, "its marker %s/%s names no start time, so it proves nothing", dir, name);
        return MARKER_REFUSED;
    }
    if ((unsigned long long)start != now) {
        snprintf(why, len, "the marker %s/%s belongs to an earlier process with this pid", dir,
                 name);
        return MARKER_STALE;
    }
    if (ruid != geteuid() || euid != geteuid()) {
        snprintf(why, len, "it runs as uid %u/%u, not as you (uid %u)", (unsigned)ruid,
                 (unsigned)euid, (unsigned)geteuid());
        return MARKER_REFUSED;
    }
    if (!maps_shim(pid)) {
        snprintf(why, len, "libncclguard.so is not mapped in it, whatever its marker %s/%s says",
                 dir, name);
        return MARKER_REFUSED;
    }
    if (sig <= 0) {
        snprintf(why, len,
                 "its dumps on request are off (dump_signal = off, or the "
                 "application handles that signal)");
        return MARKER_OFF;
    }
    if (sig != dump_signal) {
        char b[24];
        snprintf(why, len,
                 "it takes signal %lld for a dump, and the dump signal here is %d "
                 "(%s; a process dies of a signal it does not take): run this with the job's "
                 "NCCLGUARD_DUMP_SIGNAL",
                 (long long)sig, dump_signal, ncclguard_signal_name(dump_signal, b, sizeof b));
        return MARKER_REFUSED;
    }
    return MARKER_OK;
}

static int pidfd_of(long pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Sends the dump signal to pid once its marker proves who it is; 0, or 1 after
 * one line saying why not. A pidfd is taken before the proof, so that the signal
 * goes to the process proved even if the pid were reused meanwhile (without
 * pidfds, kill(2), as before Linux 5.3). */
static int ask(int dfd, const char *dir, long pid)
{
    struct marker m;
    char why[PATH_MAX + 512];
    int pfd = pidfd_of(pid);
    int rc = read_marker(dfd, dir, pid, &m, why, sizeof why);
    if (rc == MARKER_OK && pfd < 0 && errno != ENOSYS) {
        snprintf(why, sizeof why, "cannot hold it (%s)", strerror(errno));
        rc = MARKER_STALE;
    }
    if (rc != MARKER_OK) {
        fprintf(stderr, "ncclguard: dump: pid %ld refused: %s\n", pid, why);
        if (pfd >= 0) close(pfd);
        return 1;
    }
    int sent;
#ifdef SYS_pidfd_send_signal
    sent = pfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pfd, dump_signal, NULL, 0)
                    : kill((pid_t)pid, dump_signal);
#else
    sent = kill((pid_t)pid, dump_signal);
#endif
    int e = errno;
    if (pfd >= 0) close(pfd);
    if (sent != 0) {
        fprintf(stderr, "ncclguard: dump: pid %ld: cannot send signal %d: %s\n", pid, dump_signal,
                strerror(e));
        return 1;
    }
    printf("ncclguard: dump: asked pid %ld (rank %d, host %s, job %s) for a dump (signal %d)\n",
           pid, m.rank, m.host, m.job, dump_signal);
    return 0;
}

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* --all: every marked process of the directory (of job, when given). Stale
 * markers are passed over; a marker that proves nothing gets its line. */
static int ask_all(int dfd, const char *dir, const char *job)
{
    int lfd = dfd >= 0 ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        fprintf(stderr,
                "ncclguard: dump: no process with a communicator on this node (%s: "
                "%s)\n",
                dir, strerror(dfd < 0 ? ENOENT : errno));
        if (lfd >= 0) close(lfd);
        return 1;
    }
    int asked = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!all_digits(e->d_name)) continue;
        long pid = strtol(e->d_name, NULL, 10);
        struct marker m;
        char why[PATH_MAX + 512];
        int rc = read_marker(dfd, dir, pid, &m, why, sizeof why);
        if (rc == MARKER_STALE || (rc != MARKER_REFUSED && job && strcmp(m.job, job)))
            continue; /* stale, or another job */
        if (ask(dfd, dir, pid) == 0)
            asked++;
        else
            failed++;
    }
    closedir(d);
    if (!asked && !failed) {
        fprintf(stderr,
                "ncclguard: dump: no process with a communicator%s%s on this node "
                "(markers in %s)\n",
                job ? " in job " : "", job ? job : "", dir);
        return 1;
    }
    return failed ? 1 : 0;
}

/* The marker directory: -1 when there is none (ENOENT: every pid is refused for
 * having no marker), -2 after one line when it is refused: it must be a
 * directory of ours, not a symlink, that neither group nor others may write to
 * (else anyone could plant markers that name our processes). */
static int open_markers(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char why[128] = "";
    if (fd < 0) {
        if (errno == ENOENT) return -1;
        if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
            snprintf(why, sizeof why, "a symbolic link, which is not followed");
        else
            snprintf(why, sizeof why, "%s", strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        snprintf(why, sizeof why, "%s", strerror(errno));
    } else if (st.st_uid != geteuid()) {
        snprintf(why, sizeof why, "owned by uid %u, not by you (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    } else if (st.st_mode & 022) {
        snprintf(why, sizeof why, "writable by %s (mode %04o)",
                 st.st_mode & 002 ? "everyone" : "its group", (unsigned)(st.st_mode & 07777));
    } else {
        return fd;
    }
    if (fd >= 0) close(fd);
    fprintf(stderr,
            "ncclguard: dump: the marker directory %s is refused (%s): nothing signalled; "
            "remove it (the shim makes it mode 0700) or ask with --dir\n",
            dir, why);
    return -2;
}

/* --dir: writes DIR/TRIGGER (through a new file and a rename, never through a
 * link) and prints the incident id the ranks will derive from it. */
static int trigger(const char *dir, const char *id)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/" NG_TRIGGER_NAME ".ncclguard-dump.%d.tmp", dir, (int)getpid());
    snprintf(path, sizeof path, "%s/" NG_TRIGGER_NAME, dir);
    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr,
                "ncclguard: dump: cannot write in %s (%s): give the job's dump "
                "directory to --dir\n",
                dir, strerror(errno));
        return 2;
    }
    char text[ID_MAX + 2];
    snprintf(text, sizeof text, "%s\n", id);
    struct stat st;
    size_t n = strlen(text);
    /* 0644 whatever the umask: the shim refuses a trigger its group may write */
    int ok = fchmod(fd, 0644) == 0 && write(fd, text, n) == (ssize_t)n && fstat(fd, &st) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "ncclguard: dump: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 2;
    }
    printf("ncclguard: dump: wrote %s: every rank of the job dumps once for incident "
           "%lld.%09ld-%s\n",
           path, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, id);
    return 0;
}

static int valid_id(const char *id)
{
    size_t n = strlen(id);
    if (!n || n > ID_MAX) return 0;
    for (; *id; id++)
        if (!isalnum((unsigned char)*id) && !strchr("._@-", *id)) return 0;
    return 1;
}

int cmd_dump(int argc, char **argv)
{
    static const struct option opts[] = {{"all", no_argument, 0, 'a'},
                                         {"job", required_argument, 0, 'j'},
                                         {"node-dir", required_argument, 0, 'n'},
                                         {"dir", required_argument, 0, 'd'},
                                         {"incident", required_argument, 0, 'i'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *job = NULL, *node_dir = NULL, *dir = NULL, *incident = NULL;
    int all = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': all = 1; break;
        case 'j': job = optarg; break;
        case 'n': node_dir = optarg; break;
        case 'd': dir = optarg; break;
        case 'i': incident = optarg; break;
        case 'h': dump_usage(stdout); return 0;
        default: return bad_usage("bad option", argv[optind - 1]);
        }
    }
    int npids = argc - optind;
    if (dir) {
        if (all || npids || job || node_dir)
            return bad_usage("--dir asks the whole job: no PID, --all, --job or --node-dir "
                             "with it",
                             NULL);
        char id[ID_MAX + 1];
        if (incident && !valid_id(incident))
            return bad_usage("--incident takes 1 to 47 letters, digits, '.', '_', '@' or '-', "
                             "not",
                             incident);
        _Static_assert(ID_MAX == 47, "the usage line above says 47");
        if (!incident) {
            ncclguard_identity_init();
            snprintf(id, sizeof id, "manual@%.32s", ncclguard_identity()->host);
            for (char *p = id; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("._@-", *p)) *p = '_';
            incident = id;
        }
        return trigger(dir, incident);
    }
    if (incident) return bad_usage("--incident travels in the trigger file: give --dir", NULL);
    if (all == (npids > 0)) return bad_usage("give PIDs or --all", NULL);
    if (job && !all) return bad_usage("--job goes with --all", NULL);
    for (int i = optind; i < argc; i++) {
        char *end;
        errno = 0;
        long pid = strtol(argv[i], &end, 10);
        if (errno || *end || pid <= 0 || end == argv[i]) return bad_usage("not a pid:", argv[i]);
    }
    char markers[PATH_MAX];
    /* the configuration, as the shim reads it: node_dir, and the dump signal that
     * is sent (never a number read from a marker) */
    ncclguard_log_init();
    ncclguard_config_load(&(struct ng_config_paths){0}, environ, 1);
    if (!node_dir) node_dir = ncclguard_settings()->node_dir;
    dump_signal = ncclguard_settings()->dump_signal;
    if (dump_signal <= 0) {
        fprintf(stderr, "ncclguard: dump: dumps by signal are off (dump_signal = off): nothing "
                        "signalled; ask the job with --dir\n");
        return 1;
    }
    snprintf(markers, sizeof markers, "%s/ncclguard-%u",
             node_dir && node_dir[0] == '/' ? node_dir : "/dev/shm", (unsigned)geteuid());
    int dfd = open_markers(markers);
    if (dfd == -2) return 1;
    int failed = 0;
    if (all)
        failed = ask_all(dfd, markers, job);
    else
        for (int i = optind; i < argc; i++) failed |= ask(dfd, markers, strtol(argv[i], NULL, 10));
    if (dfd >= 0) close(dfd);
    return failed;
}
