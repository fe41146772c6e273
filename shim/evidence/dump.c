/*
 * dump.c: see dump.h. The file around the content that dump_body.c writes.
 *
 * A dump is written to "<name>.tmp" in the dump directory (created with its
 * missing parents, mode 0700), opened O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600,
 * fsync'ed and renamed over "<name>", then the directory is fsync'ed: a reader
 * sees the old file or the new one, never half of one. The directory is opened
 * once per dump and everything else is relative to that descriptor (openat,
 * renameat), so a directory swapped meanwhile cannot redirect the file.
 *
 * The default directory (./ncclguard-<job id>) and the fallback ($TMPDIR or
 * /tmp) have names anyone can guess, in places others may write to: someone
 * could have made them first (a symlink to a victim's directory, a directory of
 * theirs where they plant newer dumps or a FIFO named TRIGGER). They are opened
 * with O_NOFOLLOW and used only if they belong to us and neither group nor
 * others may write to them (docs/configuration.md, "Dump directory"); else the
 * dumps go to the fallback, with one line that says why. A directory named by
 * NCCLGUARD_DUMP_DIR or dump_dir is the user's choice and is taken as it is.
 *
 * Everything after init is async-signal-safe except the messages of
 * ncclguard_dump_write (log.h); ncclguard_dump_write_signal composes its
 * messages by hand and writes them to stderr.
 */
#include "evidence/dump.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h> /* renameat only: no stdio stream is used */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/identity.h"
#include "base/json.h"
#include "base/log.h"
#include "evidence/dump_body.h"
#include "evidence/dump_format.h"
#include "evidence/python.h"
#include "evidence/threads.h"
#include "policy/config.h"

#define BUF_SIZE (64 << 10) /* the JSON buffer; a dump of any size streams through it */

static char dump_dir[PATH_MAX];     /* absolute; "" when unusable */
static int dump_dir_checked;        /* the default one: checked like the fallback */
static char fallback_dir[PATH_MAX]; /* absolute */
static char host_part[NG_NAME_PART_MAX + 1];
static int dump_rank;               /* global rank for the file name, -1 unknown */
static ng_atomic(int) ready;        /* init done */
static ng_atomic(int) busy;         /* a dump is under way: the writer's thread id, else 0 */
static ng_atomic(int) use_fallback; /* the dump dir failed once: stay in the fallback */
static ng_atomic(int) said_fallback, said_failure, said_uninit; /* each message once */
static ng_atomic(int) written;                                  /* dumps written by this process */
/* Used only while `busy` is held, so static: a signal handler may run on a
 * small alternate stack. */
static char json_buf[BUF_SIZE];
static char msg_buf[2 * PATH_MAX + 256];
static char mkdir_buf[PATH_MAX];
/* Why open_dir refused the last directory it refused (for the fallback's line). */
static struct {
    enum { REFUSED_NONE, REFUSED_LINK, REFUSED_OWNER, REFUSED_MODE, REFUSED_KIND } why;
    unsigned uid, mode;
} refusal;

/* ---- bounded string building, async-signal-safe ---- */

struct text {
    char *s;
    size_t cap, len; /* len < cap always; s[len] == '\0' */
    int truncated;
};

static void text_init(struct text *t, char *s, size_t cap)
{
    t->s = s;
    t->cap = cap;
    t->len = 0;
    t->truncated = 0;
    s[0] = '\0';
}

static void text_add(struct text *t, const char *s)
{
    for (; *s; s++) {
        if (t->len + 1 >= t->cap) {
            t->truncated = 1;
            break;
        }
        t->s[t->len++] = *s;
    }
    t->s[t->len] = '\0';
}

static void text_int(struct text *t, int64_t v)
{
    char digits[21];
    ncclguard_fmt_int64(digits, v);
    text_add(t, digits);
}

/* dir + "/" + leaf into out[PATH_MAX]; -1 when it does not fit. */
static int join(char *out, const char *dir, const char *leaf)
{
    struct text t;
    text_init(&t, out, PATH_MAX);
    text_add(&t, dir);
    if (t.len == 0 || t.s[t.len - 1] != '/') text_add(&t, "/");
    text_add(&t, leaf);
    return t.truncated ? -1 : 0;
}

static void strip_trailing_slashes(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
}

void ncclguard_dump_init(void)
{
    const struct ng_identity *id = ncclguard_identity();
    char job[NG_NAME_PART_MAX + 1], leaf[NG_NAME_PART_MAX + 16];
    ncclguard_name_part(id->job, job);
    ncclguard_name_part(id->host, host_part);
    dump_rank = id->rank;
    strcpy(leaf, NG_DUMP_PREFIX);
    strcat(leaf, job);

    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || join(fallback_dir, tmp, leaf) != 0)
        join(fallback_dir, "/tmp", leaf);
    strip_trailing_slashes(fallback_dir);

    /* NCCLGUARD_DUMP_DIR or dump_dir of a config file; the configuration holds
     * the built-in "./ncclguard-<job id>" when neither set it. */
    const char *dir = ncclguard_settings()->dump_dir;
    char def[PATH_MAX];
    /* the default, or its name given as is: checked (docs/configuration.md) */
    ncclguard_default_dump_dir(def, sizeof def);
    dump_dir_checked = !*dir || !strcmp(dir, def);
    if (!*dir) dir = def;
    if (dir[0] == '.' && dir[1] == '/') dir += 2;
    dump_dir[0] = '\0';
    if (dir[0] == '/') {
        if (strlen(dir) < sizeof dump_dir) strcpy(dump_dir, dir);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof cwd) && join(dump_dir, cwd, dir) != 0) dump_dir[0] = '\0';
    }
    strip_trailing_slashes(dump_dir);
    if (!dump_dir[0])
        NG_WARN("dump directory %s cannot be resolved (cwd unknown or path too long): "
                "dumps will go to %s",
                dir, fallback_dir);
    ng_atomic_store_relaxed(&use_fallback, !dump_dir[0]);
    ng_atomic_store_relaxed(&said_fallback, 0);
    ng_atomic_store_relaxed(&said_failure, 0);
    ng_atomic_store_release(&ready, 1);
}

const char *ncclguard_dump_dir(void)
{
    if (!ng_atomic_load_acquire(&ready)) return "";
    return ng_atomic_load_relaxed(&use_fallback) ? fallback_dir : dump_dir;
}

int ncclguard_dump_written(void)
{
    return ng_atomic_load_relaxed(&written);
}

int ncclguard_dump_wait(int64_t ms)
{
    int64_t deadline = ng_clock_ns(CLOCK_MONOTONIC) + ms * 1000000;
    for (;;) {
        int writer = ng_atomic_load_acquire(&busy);
        if (!writer) return 0;
        if (writer == (int)gettid() || ng_clock_ns(CLOCK_MONOTONIC) >= deadline) return -1;
        struct timespec pause = {0, 5 * 1000000};
        nanosleep(&pause, NULL);
    }
}

void ncclguard_dump_atfork_child(void)
{
    ng_atomic_store_relaxed(&busy, 0);
    ng_atomic_store_relaxed(&written, 0);
}

/* ---- messages ---- */

/* Names of the errors a dump meets in practice; others print as a number. */
static const char *errno_name(int e)
{
    switch (e) {
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EEXIST: return "EEXIST";
    case EROFS: return "EROFS";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case ELOOP: return "ELOOP";
    case EIO: return "EIO";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EINVAL: return "EINVAL";
    default: return NULL;
    }
}

static void text_errno(struct text *t, int e)
{
    const char *name = errno_name(e);
    text_add(t, name ? name : "errno ");
    if (!name) text_int(t, e);
}

/* Emits one composed line: through the log from a thread, with write(2) to
 * stderr (plus the "ncclguard: " prefix and identity tag) from a signal. */
static void say(const char *msg, int from_signal)
{
    if (!from_signal) {
        NG_WARN("%s", msg);
        return;
    }
    char line[1024];
    struct text t;
    text_init(&t, line, sizeof line - 1);
    text_add(&t, "ncclguard: ");
    text_add(&t, ncclguard_identity_tag());
    text_add(&t, msg);
    line[t.len++] = '\n';
    while (write(STDERR_FILENO, line, t.len) < 0 && errno == EINTR) {
    }
}

static int first_time(ng_atomic(int) * flag)
{
    return !ng_atomic_exchange_relaxed(flag, 1);
}

/* ---- the file ---- */

/* mkdir -p with mode 0700; 0 when `dir` exists (as a directory or not: the
 * open that follows tells). */
static int make_dirs(const char *dir)
{
    char *p = mkdir_buf;
    size_t n = strlen(dir);
    if (n >= sizeof mkdir_buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        p[i] = saved;
    }
    return 0;
}

/* Opens the dump directory. A checked one (the default, the fallback) must not
 * be a symlink, must be ours, and neither group nor others may write to it:
 * else -1 with errno EPERM and the reason in `refusal`. */
static int open_dir(const char *dir, int checked)
{
    if (make_dirs(dir) != 0) return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (checked ? O_NOFOLLOW : 0));
    struct stat st;
    if (dfd < 0) {
        int e = errno;
        if (checked && (e == ELOOP || e == ENOTDIR) && lstat(dir, &st) == 0 &&
            S_ISLNK(st.st_mode)) {
            refusal.why = REFUSED_LINK;
            e = EPERM;
        } else {
            refusal.why = REFUSED_KIND;
        }
        errno = e;
        return -1;
    }
    if (!checked) return dfd;
    if (fstat(dfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
        refusal.why = st.st_uid != geteuid() ? REFUSED_OWNER : REFUSED_MODE;
        refusal.uid = (unsigned)st.st_uid;
        refusal.mode = (unsigned)(st.st_mode & 07777);
        close(dfd);
        errno = EPERM;
        return -1;
    }
    return dfd;
}

int ncclguard_dump_dir_fd(void)
{
    if (!ng_atomic_load_acquire(&ready)) {
        errno = EINVAL;
        return -1;
    }
    int fallen_back = ng_atomic_load_relaxed(&use_fallback);
    return open_dir(fallen_back ? fallback_dir : dump_dir, fallen_back || dump_dir_checked);
}

/* Creates the temp file; a stale one (an earlier crash, or something planted
 * there: a symlink is removed, never followed) is unlinked and the create
 * retried once. */
static int create_temp(int dfd, const char *tmp)
{
    const int flags = O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC;
    int fd = openat(dfd, tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST && unlinkat(dfd, tmp, 0) == 0) fd = openat(dfd, tmp, flags, 0600);
    if (fd >= 0 && fchmod(fd, 0600) != 0) { /* the umask can only have removed bits */
    }
    return fd;
}

/* Writes the dump into `dir` as name, via tmp. 0, or -1 with errno set and no
 * temp file left behind. */
static int write_in(const char *dir, int checked, const char *name, const char *tmp,
                    const char *reason, int from_signal)
{
    int dfd = open_dir(dir, checked);
    if (dfd < 0) return -1;
    int fd = create_temp(dfd, tmp);
    if (fd < 0) {
        int e = errno;
        close(dfd);
        errno = e;
        return -1;
    }
    struct ng_json j;
    ncclguard_json_init(&j, fd, json_buf, sizeof json_buf);
    ncclguard_json_set_newlines(&j, 2);
    ncclguard_dump_body(&j, reason, from_signal);
    int rc = ncclguard_json_finish(&j);
    if (rc == 0 && fsync(fd) != 0) rc = -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0)
        (void)fsync(dfd); /* durability of the rename; some file systems refuse it */
    else
        unlinkat(dfd, tmp, 0);
    close(dfd);
    errno = e;
    return rc;
}

/* "ncclguard-r<rank>-<host>-<pid>.json", and the temp name ("<name>.tmp"). */
static void file_names(char *name, size_t name_len, char *tmp, size_t tmp_len)
{
    struct text t;
    text_init(&t, name, name_len);
    text_add(&t, NG_DUMP_PREFIX "r");
    if (dump_rank >= 0)
        text_int(&t, dump_rank);
    else
        text_add(&t, "x");
    text_add(&t, "-");
    text_add(&t, host_part);
    text_add(&t, "-");
    text_int(&t, getpid());
    text_add(&t, NG_DUMP_SUFFIX);
    text_init(&t, tmp, tmp_len);
    text_add(&t, name);
    text_add(&t, ".tmp");
}

/* Says once that dumps moved to the fallback directory, and why. */
static void say_fallback(int err, int from_signal)
{
    if (!first_time(&said_fallback)) return;
    struct text m;
    text_init(&m, msg_buf, sizeof msg_buf);
    text_add(&m, "cannot write dumps to ");
    text_add(&m, dump_dir);
    text_add(&m, " (");
    text_errno(&m, err);
    if (err == EPERM && refusal.why == REFUSED_LINK) {
        text_add(&m, ": a symbolic link, not followed");
    } else if (err == EPERM && refusal.why == REFUSED_OWNER) {
        text_add(&m, ": owned by uid ");
        text_int(&m, refusal.uid);
        text_add(&m, ", not by you");
    } else if (err == EPERM && refusal.why == REFUSED_MODE) {
        char mode[6] = {'0',
                        (char)('0' + (refusal.mode >> 9 & 7)),
                        (char)('0' + (refusal.mode >> 6 & 7)),
                        (char)('0' + (refusal.mode >> 3 & 7)),
                        (char)('0' + (refusal.mode & 7)),
                        '\0'};
        text_add(&m, ": others may write to it, mode ");
        text_add(&m, mode);
    }
    text_add(&m, "): dumps go to ");
    text_add(&m, fallback_dir);
    text_add(&m, " instead; set NCCLGUARD_DUMP_DIR to a writable directory");
    say(msg_buf, from_signal);
}

/* Says once that a dump could not be written anywhere. */
static void say_failure(const char *name, int primary_err, int err, int from_signal)
{
    if (!first_time(&said_failure)) return;
    struct text m;
    text_init(&m, msg_buf, sizeof msg_buf);
    text_add(&m, "cannot write the dump ");
    text_add(&m, name);
    text_add(&m, " to ");
    if (primary_err) {
        text_add(&m, dump_dir);
        text_add(&m, " (");
        text_errno(&m, primary_err);
        text_add(&m, ") nor to ");
    }
    text_add(&m, fallback_dir);
    text_add(&m, " (");
    text_errno(&m, err);
    text_add(&m, "): set NCCLGUARD_DUMP_DIR to a writable directory with free space");
    say(msg_buf, from_signal);
}

/* Writes the dump into the dump directory, else into the fallback one (and
 * stays there for the later dumps of this process). */
static int dump_write(const char *reason, char *path_out, size_t path_len, int from_signal)
{
    int saved_errno = errno; /* a signal handler must leave errno as it found it */
    if (!ng_atomic_load_acquire(&ready)) {
        if (first_time(&said_uninit))
            say("dump requested before ncclguard_dump_init (dump.c): no dump written; "
                "this is a bug of ncclguard, please report it",
                from_signal);
        errno = EINVAL;
        return -1;
    }
    int free_now = 0;
    if (!ng_atomic_cas_acq_rel(&busy, &free_now, (int)gettid())) {
        errno = EBUSY;
        return -1;
    }
    /* every thread's C and Python stack, only outside signal handlers */
    if (from_signal) {
        ncclguard_threads_forget();
        ncclguard_python_forget();
    } else {
        ncclguard_threads_collect();
        ncclguard_python_collect();
    }
    /* ---- */
    char name[NG_NAME_PART_MAX + 64], tmp[NG_NAME_PART_MAX + 72];
    file_names(name, sizeof name, tmp, sizeof tmp);
    const char *dir = dump_dir;
    int primary_err = 0;
    int rc = -1;
    int fallen_back = ng_atomic_load_relaxed(&use_fallback);
    if (!fallen_back) {
        refusal.why = REFUSED_NONE;
        rc = write_in(dump_dir, dump_dir_checked, name, tmp, reason, from_signal);
        if (rc != 0 && strcmp(dump_dir, fallback_dir) != 0) primary_err = errno ? errno : EIO;
    }
    if (rc != 0 && (fallen_back || primary_err)) {
        dir = fallback_dir;
        rc = write_in(fallback_dir, 1, name, tmp, reason, from_signal);
        if (rc == 0 && primary_err) {
            ng_atomic_store_relaxed(&use_fallback, 1);
            say_fallback(primary_err, from_signal);
        }
    }
    int err = errno;
    if (rc == 0 && path_out && path_len) {
        struct text p;
        text_init(&p, path_out, path_len);
        text_add(&p, dir);
        text_add(&p, "/");
        text_add(&p, name);
    } else if (rc != 0) {
        say_failure(name, primary_err, err, from_signal);
    }
    if (rc == 0) ng_atomic_add_relaxed(&written, 1);
    ng_atomic_store_release(&busy, 0);
    errno = rc == 0 ? saved_errno : err;
    return rc;
}

int ncclguard_dump_write(const char *reason, char *path_out, size_t path_len)
{
    return dump_write(reason, path_out, path_len, 0);
}

int ncclguard_dump_write_signal(const char *reason, char *path_out, size_t path_len)
{
    return dump_write(reason, path_out, path_len, 1);
}
