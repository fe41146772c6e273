/*
 * events.h: the machine-readable event log (NCCLGUARD_EVENTS=path), one JSON
 * object per line: slow op, timeout, async error, dump written, communicator
 * created or destroyed.
 *
 * Threads: any thread but signal handlers. Each line is one write(2) with
 * O_APPEND, so lines of several processes sharing the file do not interleave;
 * it is never retried, so a line the file cannot take is lost and counted.
 * Lines go through the writer thread of base/spool.h once it runs.
 */
#ifndef NCCLGUARD_EVENTS_H
#define NCCLGUARD_EVENTS_H

#include <stdint.h>

/* Opens the file named by the setting (call at the first communicator): a
 * regular file (base/outfile.h) or stderr; anything else gets one line and no
 * event log. */
void ncclguard_events_open(const char *path);

/* Events lost because the file could not take them (full disk, I/O error). */
uint64_t ncclguard_events_lost(void);

/* Appends {"time_ns":…,"rank":…,"host":…,"pid":…,"event":"<type>",<fields>}.
 * `fields` is printf-formatted JSON members without braces, or NULL. */
void ncclguard_event(const char *type, const char *fields, ...)
    __attribute__((format(printf, 2, 3)));

/* fork(): the child keeps the file but writes its own pid. */

#endif
