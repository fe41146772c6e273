/*
 * trigger.c: see trigger.h.
 *
 * Every file is made under a temporary name and renamed into place, so that a
 * reader sees a whole id or none. The shared directory is touched by the
 * poller's one stat per period, by a rank that raises an incident (a few
 * operations, once), and by the reads of a trigger that changed.
 */
#include "evidence/trigger.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
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
#include "base/log.h"
#include "evidence/dump.h"
#include "evidence/dump_body.h"
#include "evidence/nodedir.h"
#include "policy/config.h"

#define TRIGGER_NAME "TRIGGER"
#define TRIGGER_JOIN_S 600 /* a timeout this soon after an incident joins it */
#define ID_MAX 96

struct key { /* what tells one version of a file from the next */
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
};

static int shm_dfd = -1;     /* /dev/shm/ncclguard-<uid>, -1: no fan-out */
static char shm_path[PATH_MAX];
static int notify_fd = -1;   /* inotify on shm_dfd's directory: the fan-out may have changed */
static int notify_tried;
static int lock_fd = -1;
static int is_poller;
static char fanout_name[32], lock_name[32];
static char shared_path[PATH_MAX];
static int64_t start_ns;      /* CLOCK_REALTIME at init: older triggers are history */
static int64_t poll_ns, next_poll_mono;
static struct key shared_seen, fanout_seen;
static char dumped[ID_MAX];    /* the incident this rank dumped for */
static char raised[ID_MAX];    /* the last incident this rank raised */

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
    const char *dir = ncclguard_dump_dir();
    snprintf(shared_path, sizeof shared_path, "%s/" TRIGGER_NAME, dir);
    unsigned long long h = (unsigned long long)ng_hash_str(dir);
    snprintf(fanout_name, sizeof fanout_name, "trigger-%016llx", h);
    snprintf(lock_name, sizeof lock_name, "poller-%016llx.lock", h);
    if (shm_dfd < 0) shm_dfd = ncclguard_node_dir_open(shm_path, sizeof shm_path);
    if (shm_dfd < 0) {
        NG_INFO("cannot use the node directory ncclguard-%u under NCCLGUARD_NODE_DIR or "
                "/dev/shm (%s): this process polls %s itself",
                (unsigned)geteuid(), strerror(errno), shared_path);
        is_poller = 1;
        return;
    }
    if (lock_fd < 0)
        lock_fd = openat(shm_dfd, lock_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* "<mtime s>.<ns>-<origin>": the same on every node that sees this version. */
static void format_id(const struct stat *st, const char *origin, char out[ID_MAX])
{
    snprintf(out, ID_MAX, "%lld.%09ld-%s", (long long)st->st_mtim.tv_sec,
             (long)st->st_mtim.tv_nsec, origin[0] ? origin : "manual");
}

/* The id of an open trigger file: its first line, kept to [A-Za-z0-9._@-]. */
static void id_of(int fd, const struct stat *st, char out[ID_MAX])
{
    char line[48];
    ssize_t n = pread(fd, line, sizeof line - 1, 0);
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

/* Reads an incident id from dirfd/name; 0, or -1 when there is none. */
static int read_id(int dirfd, const char *name, char out[ID_MAX], struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fstat(fd, st);
    if (rc == 0) id_of(fd, st, out);
    close(fd);
    return rc;
}

/* Writes text to dirfd/name through a temporary file and a rename (link
 * instead when exclusive: then -1 with EEXIST if name exists). The new file's
 * stat goes to *st. */
static int put_file(int dirfd, const char *name, const char *text, int exclusive,
                    struct stat *st)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.24s.%d.tmp", name, (int)getpid());
    unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    int rc = write(fd, text, len) == (ssize_t)len && fstat(fd, st) == 0 ? 0 : -1;
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
    int fd = openat(shm_dfd, fanout_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = fstat(fd, st) == 0 ? pread(fd, out, ID_MAX - 1, 0) : -1;
    close(fd);
    if (n <= 0) return -1;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int ncclguard_trigger_raise(void)
{
    char id[ID_MAX];
    struct stat st;
    int dfd = ncclguard_dump_dir_fd();
    int64_t now = ng_clock_ns(CLOCK_REALTIME);
    int have = dfd >= 0 && read_id(dfd, TRIGGER_NAME, id, &st) == 0;
    int fresh = have && mtime_ns(&st) >= start_ns &&
                now - mtime_ns(&st) < TRIGGER_JOIN_S * 1000000000LL;
    if (dfd >= 0 && !fresh) {
        const struct ng_identity *me = ncclguard_identity();
        char origin[40], text[48];
        char host[NG_NAME_PART_MAX + 1];
        ncclguard_name_part(me->host, host);
        snprintf(origin, sizeof origin, "r%d@%.24s", me->rank, host);
        snprintf(text, sizeof text, "%s\n", origin);
        /* Exclusive when there is none, so that ranks timing out together
         * agree on the first one's incident; replacing when it is old. */
        if (put_file(dfd, TRIGGER_NAME, text, !have, &st) == 0) {
            format_id(&st, origin, id);
            snprintf(raised, sizeof raised, "%s", id);
        } else if (!(errno == EEXIST && read_id(dfd, TRIGGER_NAME, id, &st) == 0)) {
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
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0 && inotify_add_watch(fd, shm_path, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        NG_INFO("cannot watch %s (%s): the trigger's fan-out is checked every watchdog "
                "period", shm_path, strerror(errno));
    notify_fd = fd;
    return fd;
}

int64_t ncclguard_trigger_next_ns(int64_t now_mono, int64_t period_ns)
{
    if (poll_ns <= 0) return INT64_MAX; /* before init: nothing to check */
    if (shm_dfd >= 0 && notify_fd < 0 && now_mono + period_ns < next_poll_mono)
        return now_mono + period_ns;
    return next_poll_mono;
}

int ncclguard_trigger_check(void)
{
    int64_t now = ng_clock_ns(CLOCK_MONOTONIC);
    char id[ID_MAX];
    struct stat st;
    /* The events only wake the dump thread: read them before the stat below,
     * so that a change after it leaves one. */
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (notify_fd >= 0 && read(notify_fd, events, sizeof events) > 0) {
    }
    if (now >= next_poll_mono) {
        next_poll_mono = now + poll_ns;
        if (!is_poller && lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) == 0) is_poller = 1;
        /* The one metadata operation per node and period on the shared file system. */
        if (is_poller && stat(shared_path, &st) == 0) {
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
    if (shm_dfd < 0 || fstatat(shm_dfd, fanout_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
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
    is_poller = 0;
    dumped[0] = raised[0] = '\0';
    ncclguard_dump_set_incident(NULL);
}
