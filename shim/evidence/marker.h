/*
 * marker.h: the node-local marker that says "this process has a communicator,
 * and takes the dump signal", for `ncclguard dump` (planned), which must never
 * signal a process that would die of it: before its first communicator a
 * process has no handler, and SIGUSR2 ends it, as it would without the shim.
 *
 * Owns: the file <node_dir>/ncclguard-<uid>/<pid> (evidence/nodedir.h: /dev/shm
 * by default; directory mode 0700, file mode
 * 0600), written atomically at the first communicator and removed at exit. Its
 * one line of JSON is documented in docs/node-marker.md. A process killed
 * before its exit handlers run leaves its file behind; the start_time in it
 * tells a reader whether the pid still is the same process, and the next
 * process of the user to write a marker on the node removes such files.
 *
 * Threads: ncclguard_marker_create on the thread that creates the first
 * communicator (intercept/start.c, under its start lock); ncclguard_marker_remove
 * from the exit handler. Not for signal handlers (snprintf).
 */
#ifndef NCCLGUARD_MARKER_H
#define NCCLGUARD_MARKER_H

/* The dump signal the watchdog will take: `sig` when this process has no handler
 * of its own for it (the watchdog never replaces one), else 0. Call it before the
 * watchdog starts. */
int ncclguard_marker_signal_free(int sig);

/* Writes this process's marker, naming dump_signal (0: none). Once per process
 * (a fork child writes its own at its own first communicator); a failure is
 * logged at debug level only: the marker is an aid, not evidence. */
void ncclguard_marker_create(int dump_signal);

/* Removes this process's marker, if this process wrote one. */
void ncclguard_marker_remove(void);

#endif
