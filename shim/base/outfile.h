/*
 * outfile.h: the files the shim appends lines to (the log, the event log).
 *
 * Owns: opening such a file so that nothing a job names can block or redirect
 * it (O_NONBLOCK, so a FIFO without a reader fails at once instead of waiting
 * for one; O_NOFOLLOW, so a planted symbolic link is not followed; O_CLOEXEC;
 * created mode 0600, since lines name hosts, paths and the job's settings), and
 * accepting only a regular file; the names that mean the process's stderr; and
 * appending one line without ever retrying or waiting: a line that cannot be
 * written whole at once (a full disk, an I/O error) is lost, and the caller
 * counts it.
 *
 * Threads: any thread; no shared state. Not for signal handlers (snprintf).
 */
#ifndef NCCLGUARD_OUTFILE_H
#define NCCLGUARD_OUTFILE_H

#include <stddef.h>
#include <sys/types.h>

/* "a FIFO", "a directory", ... for a file that is not a regular one. */
const char *ncclguard_file_kind(mode_t mode);

/* 1 when path names the process's own stderr ("stderr", "-", "/dev/stderr"),
 * which the shim writes to as it is, without opening anything. */
int ncclguard_outfile_is_stderr(const char *path);

/*
 * Opens path for appending (created 0600 when absent). Returns the descriptor,
 * or -1 with the reason in why ("a FIFO, not a regular file", "cannot open it
 * (Permission denied)"); a descriptor that turns out not to be a regular file
 * is closed again. Never blocks on a FIFO or a device.
 */
int ncclguard_outfile_open(const char *path, char *why, size_t whylen);

/* Appends one line with one write(2) (EINTR retried); 0 when all of it was
 * written, -1 when some or all of it was not (the line is lost). */
int ncclguard_outfile_write(int fd, const char *line, size_t len);

/*
 * Opens directory path for files that the shim replaces whole (a temporary file
 * in it, then a rename: the metrics). It must be a directory, not a symbolic
 * link (O_NOFOLLOW), owned by the effective user, with its owner's write and
 * search bits set, and writable (a read-only mount is not). Never blocks: a
 * FIFO is refused from lstat() before any open. Returns the descriptor
 * (O_DIRECTORY | O_CLOEXEC), or -1 with the reason in why ("does not exist", "a
 * FIFO, not a directory", "owned by uid 0, not by you (uid 1000)").
 */
int ncclguard_outdir_open(const char *path, char *why, size_t whylen);

#endif
