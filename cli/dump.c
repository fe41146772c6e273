/*
 * dump.c: `ncclguard dump`, a dump by hand. Two ways, as the shim offers them:
 *
 *  - PID... or --all: the processes of this node. Only a process that has a
 *    communicator has the dump signal's handler (before, SIGUSR2 would end it),
 *    and only such a process has a node marker (docs/node-marker.md):
 *    <node dir>/ncclguard-<uid>/<pid>. A PID is signalled only when its marker
 *    is there, names it, matches its start time (pids are reused) and gives a
 *    dump signal; every other PID is refused with one line.
 *  - --dir D [--incident ID]: the whole job. Writes D/TRIGGER with ID as its
 *    first line, as a rank that times out does (docs/dump-format.md,
 *    "Incidents"): every rank whose dump directory is D dumps once, on every
 *    node that shares D, for the incident "<mtime>-<ID>". A signal carries no
 *    id, so --incident needs --dir.
 */
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
#include <unistd.h>

#include "cli.h"
#include "base/identity.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/config_load.h"

#define USAGE_LINE "usage: ncclguard dump [--node-dir D] [--job ID] PID...|--all, " \
                   "or ncclguard dump --dir DUMPDIR [--incident ID]"
#define ID_MAX 47 /* the shim reads the first 47 bytes of TRIGGER */

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
    return NG_EXIT_USAGE;
}

struct marker {
    int rank, signal;
    char host[80], job[80];
};

/* Reads and checks the marker of pid; 0, or with why set: -2 when the process is
 * there but its dumps on request are off, -1 otherwise (no, stale or bad marker). */
static int read_marker(const char *dir, long pid, struct marker *m, char *why, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%ld", dir, pid);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) {
        if (access(path, F_OK) != 0)
            snprintf(why, len, "it has no communicator under the shim (no marker %s)", path);
        else
            snprintf(why, len, "its marker %s is unreadable (%s)", path, err.text);
        return -1;
    }
    json_int_t mpid = -1, start = -1, rank = -1, sig = -1;
    const char *schema = "", *host = "?", *job = "?";
    json_unpack(j, "{s?s, s?I, s?I, s?I, s?I, s?s, s?s}", "schema", &schema, "pid", &mpid,
                "start_time", &start, "rank", &rank, "dump_signal", &sig, "host", &host, "job",
                &job);
    int rc = -1;
    unsigned long long now = ncclguard_process_start_time((int)pid);
    if (strncmp(schema, "ncclguard.marker/1", 18) || mpid != pid)
        snprintf(why, len, "its marker %s is not a ncclguard.marker/1 for this pid", path);
    else if (!now)
        snprintf(why, len, "no such process (a stale marker %s)", path);
    else if (start != 0 && (unsigned long long)start != now)
        snprintf(why, len, "the marker %s belongs to an earlier process with this pid", path);
    else if (sig <= 0)
        snprintf(why, len, "its dumps on request are off (dump_signal = off, or the "
                           "application handles that signal)"), rc = -2;
    else
        rc = 0;
    m->rank = (int)rank;
    m->signal = (int)sig;
    snprintf(m->host, sizeof m->host, "%s", host);
    snprintf(m->job, sizeof m->job, "%s", job);
    json_decref(j);
    return rc;
}

/* Signals pid if its marker allows; 0, or 1 after one line saying why not. */
static int ask(const char *dir, long pid)
{
    struct marker m;
    char why[PATH_MAX + 512];
    if (read_marker(dir, pid, &m, why, sizeof why) != 0) {
        fprintf(stderr, "ncclguard: dump: pid %ld refused: %s\n", pid, why);
        return 1;
    }
    if (kill((pid_t)pid, m.signal) != 0) {
        fprintf(stderr, "ncclguard: dump: pid %ld: cannot send signal %d: %s\n", pid, m.signal,
                strerror(errno));
        return 1;
    }
    printf("ncclguard: dump: asked pid %ld (rank %d, host %s, job %s) for a dump (signal %d)\n",
           pid, m.rank, m.host, m.job, m.signal);
    return 0;
}

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* --all: every marked process of the directory (of job, when given). */
static int ask_all(const char *dir, const char *job)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ncclguard: dump: no process with a communicator on this node (%s: "
                        "%s)\n", dir, strerror(errno));
        return 1;
    }
    int asked = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!all_digits(e->d_name)) continue;
        long pid = strtol(e->d_name, NULL, 10);
        struct marker m;
        char why[PATH_MAX + 512];
        int rc = read_marker(dir, pid, &m, why, sizeof why);
        if (rc == -1 || (job && strcmp(m.job, job))) continue; /* stale, or another job */
        if (ask(dir, pid) == 0)
            asked++;
        else
            failed++;
    }
    closedir(d);
    if (!asked && !failed) {
        fprintf(stderr, "ncclguard: dump: no process with a communicator%s%s on this node "
                        "(markers in %s)\n", job ? " in job " : "", job ? job : "", dir);
        return 1;
    }
    return failed ? 1 : 0;
}

/* --dir: writes DIR/TRIGGER (through a new file and a rename, never through a
 * link) and prints the incident id the ranks will derive from it. */
static int trigger(const char *dir, const char *id)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/TRIGGER.ncclguard-dump.%d.tmp", dir, (int)getpid());
    snprintf(path, sizeof path, "%s/TRIGGER", dir);
    int fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "ncclguard: dump: cannot write in %s (%s): give the job's dump "
                        "directory to --dir\n", dir, strerror(errno));
        return 2;
    }
    char text[ID_MAX + 2];
    snprintf(text, sizeof text, "%s\n", id);
    struct stat st;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fstat(fd, &st) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "ncclguard: dump: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 2;
    }
    printf("ncclguard: dump: wrote %s: every rank of the job dumps once for incident "
           "%lld.%09ld-%s\n", path, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, id);
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

int ncclguard_cli_dump(int argc, char **argv)
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
                             "with it", NULL);
        char id[ID_MAX + 1];
        if (incident && !valid_id(incident))
            return bad_usage("--incident takes 1 to 47 letters, digits, '.', '_', '@' or '-', "
                             "not", incident);
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
    if (!node_dir) {
        ncclguard_log_init();
        ncclguard_config_load(&(struct ng_config_paths){0}, environ, 1);
        node_dir = ncclguard_settings()->node_dir;
    }
    snprintf(markers, sizeof markers, "%s/ncclguard-%u",
             node_dir && node_dir[0] == '/' ? node_dir : "/dev/shm", (unsigned)geteuid());
    if (all) return ask_all(markers, job);
    int failed = 0;
    for (int i = optind; i < argc; i++) failed |= ask(markers, strtol(argv[i], NULL, 10));
    return failed;
}
