/*
 * trigger.c: see trigger.h.
 *
 * Every file is made under a temporary name and renamed into place, so that a
 * reader sees a whole id or none. The shared directory is touched by the
 * poller's one stat per period, by a rank that raises an incident (a few
 * operations, once), and by the reads of a trigger that changed.
 */
#include "evidence/trigger.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/identity.h"
#include "base/infile.h"
#include "base/log.h"
#include "evidence/dump.h"
#include "evidence/dump_body.h"
#include "evidence/dump_format.h"
#include "evidence/nodedir.h"
#include "policy/config.h"
#include "policy/testswitch.h"

#define TRIGGER_JOIN_S 600 /* a timeout this soon after an incident joins it */
#define ID_MAX 96

struct key { /* what tells one version of a file from the next */
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
};

static int shm_dfd = -1; /* /dev/shm/ncclguard-<uid>, -1: no fan-out */
static char shm_path[PATH_MAX];
static int notify_fd = -1; /* inotify on shm_dfd's directory: the fan-out or the lock may
                              * have changed */
static int notify_tried;
static int fanout_looked; /* the fan-out was stat'ed once since init */
static int lock_fd = -1;
/* Set by the dump thread once lock_fd and shm_dfd are final (release), read at exit
 * by whichever thread runs the atexit handlers (acquire). */
static ng_atomic(int) is_poller;
static ng_atomic(int) leaving; /* ncclguard_trigger_exit has run: take no lock */
/* The dump thread is between its look at `leaving` and the end of its try at the
 * lock: the exit waits for it, since the try may have made the lock file, which
 * the process would leave behind if it ended meanwhile. */
static ng_atomic(int) taking;
#define EXIT_WAIT_MS 2000  /* the most the exit waits for a try, which takes microseconds */
static long lock_delay_ms; /* NCCLGUARD_TEST_LOCK_DELAY_MS: a try held open, for the test */
static char fanout_name[32], lock_name[32];
static char shared_path[PATH_MAX];
static int64_t start_ns; /* CLOCK_REALTIME at init: older triggers are history */
static int64_t poll_ns, next_poll_mono;
static struct key shared_seen, fanout_seen;
static char dumped[ID_MAX];          /* the incident this rank dumped for */
static char raised[ID_MAX];          /* the last incident this rank raised */
static char refused[PATH_MAX + 192]; /* the last trigger file refused, and why: said once */

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static struct key key_of(const struct stat *st)
{
    return (struct key){st->st_ino, st->st_size, mtime_ns(st)};
}

static int same_key(const struct key *a, const struct key *b)
{
    return a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

void ncclguard_trigger_init(void)
{
    const struct ng_settings *set = ncclguard_settings();
    poll_ns = (int64_t)set->trigger_poll_s * 1000000000LL;
    start_ns = ng_clock_ns(CLOCK_REALTIME);
    next_poll_mono = 0;
    fanout_looked = 0;
    ng_atomic_store_relaxed(&leaving, 0);
    const char *delay = ncclguard_test_switch("NCCLGUARD_TEST_LOCK_DELAY_MS");
    lock_delay_ms = delay ? strtol(delay, NULL, 10) : 0;
    if (lock_delay_ms < 0 || lock_delay_ms > 10000) lock_delay_ms = 0;
    const char *dir = ncclguard_dump_dir();
    snprintf(shared_path, sizeof shared_path, "%s/" NG_TRIGGER_NAME, dir);
    unsigned long long h = (unsigned long long)ng_hash_str(dir);
    snprintf(fanout_name, sizeof fanout_name, "trigger-%016llx", h);
    snprintf(lock_name, sizeof lock_name, "poller-%016llx.lock", h);
    if (shm_dfd < 0) shm_dfd = ncclguard_node_dir_open(shm_path, sizeof shm_path);
    if (shm_dfd < 0) {
        NG_INFO("cannot use the node directory ncclguard-%u under NCCLGUARD_NODE_DIR or "
                "/dev/shm (%s): this process polls %s itself",
                (unsigned)geteuid(), strerror(errno), shared_path);
        ng_atomic_store_release(&is_poller, 1);
        return;
    }
}

/* "<mtime s>.<ns>-<origin>": the same on every node that sees this version. */
static void format_id(const struct stat *st, const char *origin, char out[ID_MAX])
{
    snprintf(out, ID_MAX, "%lld.%09ld-%s", (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
             origin[0] ? origin : "manual");
}

/* The id of a trigger file: its first line (in line[0..n)), kept to [A-Za-z0-9._@-]. */
static void id_of(char line[NG_TRIGGER_LINE_MAX], ssize_t n, const struct stat *st,
                  char out[ID_MAX])
{
    size_t k = 0;
    for (ssize_t i = 0; i < n && line[i] != '\n'; i++) {
        char c = line[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-' || c == '@';
        line[k++] = ok ? c : '_';
    }
    line[k] = '\0';
    format_id(st, line, out);
}

/* Reads an incident id from dirfd/name; 0, or -1 when there is none. The file
 * lives in the job's shared directory, where others may write: it is read only
 * as infile.h says (never a FIFO, which would block the dump thread; a regular
 * file of ours or root's, nobody else may write, at most NG_TRIGGER_FILE_MAX
 * bytes); a refused one is said once, and is no incident. */
static int read_id(int dirfd, const char *name, char out[ID_MAX], struct stat *st)
{
    char line[NG_TRIGGER_LINE_MAX], why[160];
    ssize_t n = ncclguard_infile_read(dirfd, name, NG_INFILE_ROOT_OK, NG_TRIGGER_FILE_MAX, line,
                                      sizeof line, st, why, sizeof why);
    if (n < 0) {
        if (errno == ENOENT) return -1;
        char said[sizeof refused];
        snprintf(said, sizeof said, "%s (%s)", shared_path, why);
        if (strcmp(said, refused)) {
            snprintf(refused, sizeof refused, "%s", said);
            NG_WARN("trigger file %s ignored (%s): no incident from it; remove it (a trigger "
                    "is a regular file of yours: touch it, or use ncclguard dump --dir)",
                    shared_path, why);
        }
        return -1;
    }
    id_of(line, n, st, out);
    return 0;
}

/* Writes text to dirfd/name through a temporary file and a rename (link
 * instead when exclusive: then -1 with EEXIST if name exists). The new file's
 * stat goes to *st. */
static int put_file(int dirfd, const char *name, const char *text, int exclusive, struct stat *st)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.24s.%d.tmp", name, (int)getpid());
    unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    /* 0644 whatever the umask: a reader refuses a file that its group may write */
    int rc = fchmod(fd, 0644) == 0 && write(fd, text, len) == (ssize_t)len && fstat(fd, st) == 0
                 ? 0
                 : -1;
    close(fd);
    if (rc == 0)
        rc = exclusive ? linkat(dirfd, tmp, dirfd, name, 0) : renameat(dirfd, tmp, dirfd, name);
    int e = errno;
    unlinkat(dirfd, tmp, 0); /* after a link; gone already after a rename */
    errno = e;
    return rc;
}

static void fan_out(const char *id)
{
    struct stat st;
    char text[ID_MAX + 1];
    snprintf(text, sizeof text, "%s\n", id);
    if (shm_dfd >= 0 && put_file(shm_dfd, fanout_name, text, 0, &st) == 0)
        fanout_seen = key_of(&st);
}

/* Makes id the incident of the next dump; 1 when this rank has not dumped for it. */
static int take(const char *id)
{
    ncclguard_dump_set_incident(id);
    if (!strcmp(dumped, id)) return 0;
    snprintf(dumped, sizeof dumped, "%s", id);
    return 1;
}

/* The fan-out's content, as a plain id (its first line). */
static int read_fanout(char out[ID_MAX], struct stat *st)
{
    char why[160];
    ssize_t n = ncclguard_infile_read(shm_dfd, fanout_name, 0, 4 * ID_MAX, out, ID_MAX, st, why,
                                      sizeof why);
    if (n <= 0) return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int ncclguard_trigger_raise(void)
{
    char id[ID_MAX];
    struct stat st;
    int dfd = ncclguard_dump_dir_fd();
    int64_t now = ng_clock_ns(CLOCK_REALTIME);
    int have = dfd >= 0 && read_id(dfd, NG_TRIGGER_NAME, id, &st) == 0;
    int fresh = have && mtime_ns(&st) >= start_ns &&
                now - mtime_ns(&st) < TRIGGER_JOIN_S * 1000000000LL;
    if (dfd >= 0 && !fresh) {
        const struct ng_identity *me = ncclguard_identity();
        char origin[40], text[NG_TRIGGER_LINE_MAX];
        char host[NG_NAME_PART_MAX + 1];
        ncclguard_name_part(me->host, host);
        snprintf(origin, sizeof origin, "r%d@%.24s", me->rank, host);
        snprintf(text, sizeof text, "%s\n", origin);
        /* Exclusive when there is none, so that ranks timing out together
         * agree on the first one's incident; replacing when it is old. */
        if (put_file(dfd, NG_TRIGGER_NAME, text, !have, &st) == 0) {
            format_id(&st, origin, id);
            snprintf(raised, sizeof raised, "%s", id);
        } else if (!(errno == EEXIST && read_id(dfd, NG_TRIGGER_NAME, id, &st) == 0)) {
            close(dfd);
            dfd = -1;
        }
    }
    if (dfd < 0) { /* no dump directory: an incident of this node alone */
        snprintf(id, sizeof id, "%lld.%09lld-local", (long long)(now / 1000000000),
                 (long long)(now % 1000000000));
        snprintf(raised, sizeof raised, "%s", id);
    } else {
        shared_seen = key_of(&st);
        close(dfd);
    }
    fan_out(id);
    return take(id);
}

const char *ncclguard_trigger_incident(void)
{
    return dumped[0] ? dumped : NULL;
}

int ncclguard_trigger_is_reporter(const char *id)
{
    if (!strcmp(id, raised)) return 1;
    size_t n = strlen(id), m = strlen("-manual");
    return n > m && !strcmp(id + n - m, "-manual") && ncclguard_identity()->rank <= 0;
}

int ncclguard_trigger_wait_fd(void)
{
    if (notify_fd >= 0 || notify_tried || shm_dfd < 0) return notify_fd;
    notify_tried = 1;
    /* IN_CLOSE_WRITE also when the poller's lock file is closed, at its exit
     * however it ends (its lock goes with it), removed before or not */
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0 && inotify_add_watch(fd, shm_path, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        NG_INFO("cannot watch %s (%s): the trigger's fan-out is checked every watchdog "
                "period",
                shm_path, strerror(errno));
    notify_fd = fd;
    return fd;
}

int64_t ncclguard_trigger_next_ns(int64_t now_mono, int64_t period_ns)
{
    if (poll_ns <= 0) return INT64_MAX; /* before init: nothing to check */
    if (shm_dfd >= 0 && notify_fd < 0)
        return now_mono + period_ns < next_poll_mono ? now_mono + period_ns : next_poll_mono;
    /* Watched: a process that is not the poller has nothing to do until the
     * directory changes (the fan-out, or the poller's lock let go), after its
     * first try at the lock. */
    if (shm_dfd >= 0 && next_poll_mono && !ng_atomic_load_relaxed(&is_poller)) return INT64_MAX;
    return next_poll_mono;
}

/* Takes the poller's lock: an flock of lock_name, then a check that the file
 * locked is still the one of that name (a poller that left, or a sweep, removes
 * the file while it holds the lock: a descriptor of the old file locks nothing
 * that others see); else the name is opened again, once. 1: this process polls. */
static int take_lock(void)
{
    for (int tries = 0; tries < 2; tries++) {
        if (lock_fd < 0)
            lock_fd = openat(shm_dfd, lock_name,
                             O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (lock_fd < 0) return 0;
        if (lock_delay_ms) nanosleep(&(struct timespec){0, lock_delay_ms * 1000000L}, NULL);
        int got = flock(lock_fd, LOCK_EX | LOCK_NB) == 0;
        struct stat held, named;
        int same = fstat(lock_fd, &held) == 0 && S_ISREG(held.st_mode) &&
                   fstatat(shm_dfd, lock_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
                   held.st_ino == named.st_ino && held.st_dev == named.st_dev;
        if (same) return got; /* held by another poller: its exit will say so */
        /* a removed file (a poller that left removes it while it still holds
         * it): its lock goes with the descriptor; the name is made again */
        close(lock_fd);
        lock_fd = -1;
    }
    return 0;
}

/* Removes dfd/name, a lock file, when nobody holds it: under its lock, and only
 * if the name still names the file locked. */
static void remove_if_free(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat held, named;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
        fstatat(dfd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
        unlinkat(dfd, name, 0);
    close(fd);
}

/* The node's lock files of jobs that have no poller (gone: killed before they
 * could remove theirs) are removed by the next process that becomes a poller.
 * A live job whose poller just left makes a new file at its next try. */
static void sweep_locks(void)
{
    int fd = openat(shm_dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 12 && !strncmp(e->d_name, "poller-", 7) && !strcmp(e->d_name + n - 5, ".lock") &&
            strcmp(e->d_name, lock_name))
            remove_if_free(shm_dfd, e->d_name);
    }
    closedir(d);
}

/* The poller leaves: its file goes, under its lock; a process of the job that
 * stays makes a new one at its next try (take_lock). Called by the one thread that
 * turned is_poller from 1 to 0. */
static void drop_lock_file(void)
{
    struct stat held, named;
    if (lock_fd >= 0 && shm_dfd >= 0 && fstat(lock_fd, &held) == 0 &&
        fstatat(shm_dfd, lock_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev)
        unlinkat(shm_dfd, lock_name, 0);
}

void ncclguard_trigger_exit(void)
{
    /* After this the dump thread takes no lock (it may still poll during the rest of
     * exit): leaving and is_poller are stored and read in one total order, here and
     * in ncclguard_trigger_check, so either this or that drops a lock taken meanwhile. */
    ng_atomic_store_seq_cst(&leaving, 1);
    for (int ms = 0; ms < EXIT_WAIT_MS && ng_atomic_load_seq_cst(&taking); ms++)
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
    if (ng_atomic_exchange_seq_cst(&is_poller, 0)) drop_lock_file();
}

int ncclguard_trigger_check(void)
{
    int64_t now = ng_clock_ns(CLOCK_MONOTONIC);
    char id[ID_MAX];
    struct stat st;
    /* The events only wake the dump thread: read them before the stat below,
     * so that a change after it leaves one. */
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int changed = notify_fd < 0 || !fanout_looked;
    while (notify_fd >= 0 && read(notify_fd, events, sizeof events) > 0) changed = 1;
    int timed = now >= next_poll_mono;
    if (timed) next_poll_mono = now + poll_ns;
    /* a try at the lock at the first check, then when the directory changed */
    if ((timed || changed) && !ng_atomic_load_relaxed(&is_poller) && shm_dfd >= 0) {
        ng_atomic_store_seq_cst(&taking, 1);
        if (!ng_atomic_load_seq_cst(&leaving) && take_lock()) {
            ng_atomic_store_seq_cst(&is_poller, 1);
            if (!ng_atomic_load_seq_cst(&leaving))
                sweep_locks();
            else if (ng_atomic_exchange_seq_cst(&is_poller, 0))
                drop_lock_file();
        }
        ng_atomic_store_seq_cst(&taking, 0);
    }
    if (timed) {
        /* The one metadata operation per node and period on the shared file system. */
        if (ng_atomic_load_relaxed(&is_poller) && stat(shared_path, &st) == 0) {
            struct key k = key_of(&st);
            if (!same_key(&k, &shared_seen)) {
                shared_seen = k;
                /* Its own fan-out is marked seen: the poller takes the incident here. */
                if (mtime_ns(&st) >= start_ns && read_id(AT_FDCWD, shared_path, id, &st) == 0) {
                    fan_out(id);
                    return take(id);
                }
            }
        }
    }
    /* the fan-out only when the directory changed: a timed wake costs the
     * poller its one stat above, and the others nothing */
    if (shm_dfd < 0 || !changed) return 0;
    fanout_looked = 1;
    if (fstatat(shm_dfd, fanout_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
    struct key k = key_of(&st);
    if (same_key(&k, &fanout_seen)) return 0;
    fanout_seen = k;
    if (mtime_ns(&st) < start_ns || read_fanout(id, &st) != 0) return 0;
    return take(id);
}

void ncclguard_trigger_atfork_child(void)
{
    if (lock_fd >= 0) close(lock_fd); /* the lock stays with the parent's descriptor */
    lock_fd = -1;
    if (notify_fd >= 0) close(notify_fd); /* the parent's: its events would go to either */
    notify_fd = -1;
    notify_tried = 0;
    fanout_looked = 0;
    ng_atomic_store_relaxed(&is_poller, 0);
    dumped[0] = raised[0] = '\0';
    ncclguard_dump_set_incident(NULL);
}
