/* outfile.c: see outfile.h. */
#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ncclguard_file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int ncclguard_outfile_is_stderr(const char *path)
{
    return !strcmp(path, "stderr") || !strcmp(path, "-") || !strcmp(path, "/dev/stderr");
}

/* Why st is refused, into why; 0 for a regular file. */
static int refuse(const struct stat *st, char *why, size_t whylen)
{
    if (S_ISREG(st->st_mode)) return 0;
    if (S_ISLNK(st->st_mode))
        snprintf(why, whylen, "a symbolic link, which is not followed");
    else
        snprintf(why, whylen, "%s, not a regular file", ncclguard_file_kind(st->st_mode));
    return -1;
}

/*
 * lstat() first, so that a device is never opened at all (opening one can have
 * effects of its own); the open then cannot block (O_NONBLOCK) nor follow a link
 * planted since (O_NOFOLLOW), and fstat() checks what was opened.
 */
int ncclguard_outfile_open(const char *path, char *why, size_t whylen)
{
    struct stat st;
    if (lstat(path, &st) == 0 && refuse(&st, why, whylen) != 0) return -1;
    int fd = open(path,
                  O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                  0600);
    if (fd < 0) {
        int err = errno;
        if (lstat(path, &st) != 0 || refuse(&st, why, whylen) == 0)
            snprintf(why, whylen, "cannot open it (%s)", strerror(err));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "cannot check it (%s)", strerror(errno));
        close(fd);
        return -1;
    }
    if (refuse(&st, why, whylen) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int ncclguard_outfile_write(int fd, const char *line, size_t len)
{
    ssize_t n;
    while ((n = write(fd, line, len)) < 0 && errno == EINTR) {
    }
    return n == (ssize_t)len ? 0 : -1;
}

int ncclguard_outdir_open(const char *path, char *why, size_t whylen)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            snprintf(why, whylen, "does not exist");
        else
            snprintf(why, whylen, "cannot see it (%s)", strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(why, whylen, "a symbolic link, which is not followed");
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s, not a directory",
                 S_ISREG(st.st_mode) ? "a regular file" : ncclguard_file_kind(st.st_mode));
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, whylen, "cannot open it (%s)", strerror(errno));
        return -1;
    }
    uid_t me = geteuid();
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "cannot check it (%s)", strerror(errno));
    } else if (st.st_uid != me) {
        snprintf(why, whylen, "owned by uid %u, not by you (uid %u)", (unsigned)st.st_uid,
                 (unsigned)me);
    } else if ((st.st_mode & (S_IWUSR | S_IXUSR)) != (S_IWUSR | S_IXUSR)) {
        snprintf(why, whylen, "not writable (mode %04o)", (unsigned)(st.st_mode & 07777));
    } else if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf(why, whylen, "not writable (%s)", strerror(errno));
    } else {
        return fd;
    }
    close(fd);
    return -1;
}
