/*
 * infile.h: reading a file from a place that someone else may write to (the
 * job's shared dump directory, /dev/shm, a dump directory handed to the
 * command), so that nothing planted there can block, redirect or flood the
 * reader.
 *
 * Owns: the one rule for such files. The name is looked at first without
 * following a symbolic link (fstatat AT_SYMLINK_NOFOLLOW), so a FIFO or a device
 * is refused without being opened; then it is opened with O_RDONLY | O_NONBLOCK
 * | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC and fstat-checked again, and must be the
 * file looked at (same device and inode):
 *  - a regular file;
 *  - owned by the effective user (NG_INFILE_ROOT_OK: or by root;
 *    NG_INFILE_ANY_OWNER: by anyone);
 *  - without group or other write permission (NG_INFILE_ANY_MODE: any mode);
 *  - at most `max` bytes long.
 * NG_INFILE_FOLLOW follows a symbolic link at the last component (a file the
 * person named, not one found in a shared place); the target is checked.
 * A refusal gives one reason in a few words ("a FIFO, not a regular file",
 * "owned by uid 1001, not by you (uid 0)"), for the caller's one line.
 *
 * The shim and the command both use it (cli/cli.mk links shim/base).
 *
 * Threads: any thread; no shared state. Not for signal handlers (snprintf).
 */
#ifndef NCCLGUARD_INFILE_H
#define NCCLGUARD_INFILE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NG_INFILE_ROOT_OK 1u   /* root may own it too */
#define NG_INFILE_ANY_OWNER 2u /* anyone may own it */
#define NG_INFILE_ANY_MODE 4u  /* group or other write permission is no reason to refuse */
#define NG_INFILE_FOLLOW 8u    /* a symbolic link at the last component is followed */

/* Checks an fstat of a file against the rule; 0, or -1 with the reason in why. */
int ncclguard_infile_check(const struct stat *st, unsigned flags, off_t max, char *why,
                           size_t whylen);

/* Opens dirfd/name (dirfd AT_FDCWD: a path) after the checks above. Returns the
 * descriptor (its fstat in *st when st is not NULL), or -1 with errno set
 * (ENOENT and the like from the lookup; EINVAL, EPERM or EFBIG for a refusal)
 * and the reason in why. */
int ncclguard_infile_open(int dirfd, const char *name, unsigned flags, off_t max, struct stat *st,
                          char *why, size_t whylen);

/* Opens as above and reads up to cap - 1 bytes into buf, NUL-terminated (a
 * file larger than that is read as far as it fits). The number of bytes, or -1
 * as for ncclguard_infile_open (a failed read: its errno, and why says so). */
ssize_t ncclguard_infile_read(int dirfd, const char *name, unsigned flags, off_t max, char *buf,
                              size_t cap, struct stat *st, char *why, size_t whylen);

#endif
