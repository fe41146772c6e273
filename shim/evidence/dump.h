/*
 * dump.h: the evidence dump, one JSON file per process (its schema and layout
 * in dump_format.h, documented in docs/dump-format.md).
 *
 * Owns: the dump directory (NCCLGUARD_DUMP_DIR, default ./ncclguard-<job id>,
 * resolved to an absolute path at init; $TMPDIR/ncclguard-<job id> or
 * /tmp/ncclguard-<job id> when it cannot be written), the file name
 * ncclguard-r<rank>-<host>-<pid>.json, the atomic replacement of that file, and
 * its content: identity, communicators and the flight recorder's records.
 *
 * Nothing is created before the first dump: init only computes paths, so a
 * healthy job leaves no directory behind.
 *
 * Threads: ncclguard_dump_init on the thread that creates the first
 * communicator (it reads the environment and the cwd). Dumps may then be
 * written from any thread, and from a signal handler: one dump at a time; a
 * caller that finds another dump under way gets -1 at once (errno EBUSY).
 */
#ifndef NCCLGUARD_DUMP_H
#define NCCLGUARD_DUMP_H

#include <stddef.h>
#include <stdint.h>

/* Computes the dump and fallback directories and the file name parts from the
 * dump_dir setting (NCCLGUARD_DUMP_DIR or a config file; config.h), TMPDIR, the
 * cwd and the identity. Not async-signal-safe. Call it after the identity and
 * the configuration are loaded; calling it again recomputes (tests). */
void ncclguard_dump_init(void);

/* Writes one dump with the given reason ("timeout", "init_timeout", "signal",
 * "exit", ...). Returns 0 and copies the final path (truncated to fit) into
 * path_out when path_out is not NULL (errno unchanged), or -1 with errno set.
 *
 * Takes every thread's stack first (threads.h: /proc, the stack signal, up to
 * 500 ms of waiting) and symbolizes them while writing, so it is not
 * async-signal-safe. The file itself is: the JSON is formatted by json.c
 * into a static 64 KiB buffer, and the file is made with mkdir, open(at),
 * fchmod, write, fsync, renameat, unlinkat and close only (no malloc, stdio or
 * getenv). Its messages (a fallback to TMPDIR, a failure: each said once) go
 * through log.h, which formats with vsnprintf. A signal handler calls
 * ncclguard_dump_write_signal instead. */
int ncclguard_dump_write(const char *reason, char *path_out, size_t path_len);

/* The same, fully async-signal-safe: no thread stacks ("threads" is null), and
 * its messages are composed by hand and written to stderr with one write(2)
 * each (not to NCCLGUARD_LOG). */
int ncclguard_dump_write_signal(const char *reason, char *path_out, size_t path_len);

/* The directory the next dump goes to (the fallback once one was needed);
 * "" before init. For messages and tests. */
const char *ncclguard_dump_dir(void);

/* Opens the directory the next dump goes to, creating it (mode 0700) like a
 * dump would: a descriptor (O_DIRECTORY, close-on-exec), or -1 with errno set.
 * For the cross-rank trigger file, which lives there. Call it on the thread
 * that writes the dumps, never during one (they share a path buffer). */
int ncclguard_dump_dir_fd(void);

/* Dumps this process has written (a fork child counts its own). Any thread,
 * signal handlers included. */
int ncclguard_dump_written(void);

/* Waits up to `ms` for a dump that another thread is writing to be done: 0
 * when none is under way (any more), -1 when it still is, or when it is this
 * thread's own (a signal handler that interrupted it). Async-signal-safe: for
 * a handler about to end the process, which would lose that dump. */
int ncclguard_dump_wait(int64_t ms);

/* fork(): the child may dump (its own ops) even if the parent was dumping. */
void ncclguard_dump_atfork_child(void);

#endif
