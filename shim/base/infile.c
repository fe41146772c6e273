/* infile.c: see infile.h. */
#include "base/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/outfile.h"

int ncclguard_infile_check(const struct stat *st, unsigned flags, off_t max, char *why,
                           size_t whylen)
{
    if (S_ISLNK(st->st_mode)) {
        snprintf(why, whylen, "a symbolic link, which is not followed");
        errno = ELOOP;
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "%s, not a regular file", ncclguard_file_kind(st->st_mode));
        errno = EINVAL;
        return -1;
    }
    uid_t me = geteuid();
    if (!(flags & NG_INFILE_ANY_OWNER) && st->st_uid != me &&
        !(st->st_uid == 0 && (flags & NG_INFILE_ROOT_OK))) {
        snprintf(why, whylen, "owned by uid %u, not by you (uid %u)%s", (unsigned)st->st_uid,
                 (unsigned)me, flags & NG_INFILE_ROOT_OK ? " nor by root" : "");
        errno = EPERM;
        return -1;
    }
    if (!(flags & NG_INFILE_ANY_MODE) && (st->st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(why, whylen, "writable by %s (mode %04o)",
                 st->st_mode & S_IWOTH ? "everyone" : "its group", (unsigned)(st->st_mode & 07777));
        errno = EPERM;
        return -1;
    }
    if (st->st_size > max) {
        snprintf(why, whylen, "too large (%lld bytes; the limit is %lld)", (long long)st->st_size,
                 (long long)max);
        errno = EFBIG;
        return -1;
    }
    return 0;
}

int ncclguard_infile_open(int dirfd, const char *name, unsigned flags, off_t max, struct stat *st,
                          char *why, size_t whylen)
{
    struct stat before, after;
    int follow = flags & NG_INFILE_FOLLOW;
    if (fstatat(dirfd, name, &before, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0) {
        int e = errno;
        snprintf(why, whylen, "cannot read it (%s)", strerror(e));
        errno = e;
        return -1;
    }
    if (ncclguard_infile_check(&before, flags, max, why, whylen) != 0) return -1;
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "cannot open it (%s)", strerror(e));
        errno = e;
        return -1;
    }
    if (fstat(fd, &after) != 0 || after.st_dev != before.st_dev || after.st_ino != before.st_ino) {
        snprintf(why, whylen, "it was replaced while being opened");
        close(fd);
        errno = EAGAIN;
        return -1;
    }
    if (ncclguard_infile_check(&after, flags, max, why, whylen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (st) *st = after;
    return fd;
}

ssize_t ncclguard_infile_read(int dirfd, const char *name, unsigned flags, off_t max, char *buf,
                              size_t cap, struct stat *st, char *why, size_t whylen)
{
    if (cap) buf[0] = '\0';
    int fd = ncclguard_infile_open(dirfd, name, flags, max, st, why, whylen);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            snprintf(why, whylen, "cannot read it (%s)", strerror(e));
            close(fd);
            errno = e;
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (cap) buf[got] = '\0';
    return (ssize_t)got;
}
