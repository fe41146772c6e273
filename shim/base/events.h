/*
 * events.h: the machine-readable event log (NCCLGUARD_EVENTS=path), one JSON
 * object per line: slow op, timeout, async error, dump written, communicator
 * created or destroyed.
 *
 * Threads: any thread but signal handlers. Each line is one write(2) with
 * O_APPEND, so lines of several processes sharing the file do not interleave.
 */
#ifndef NCCLGUARD_EVENTS_H
#define NCCLGUARD_EVENTS_H

/* Opens the file named by the setting (call at the first communicator). */
void ncclguard_events_open(const char *path);

/* Appends {"time_ns":…,"rank":…,"host":…,"pid":…,"event":"<type>",<fields>}.
 * `fields` is printf-formatted JSON members without braces, or NULL. */
void ncclguard_event(const char *type, const char *fields, ...)
    __attribute__((format(printf, 2, 3)));

/* fork(): the child keeps the file but writes its own pid. */

#endif
