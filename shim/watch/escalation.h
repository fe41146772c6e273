/*
 * escalation.h: the last two steps of the escalation ladder, abort and kill (warn
 * and dump are the watchdog's own). Thresholds come from the settings
 * (abort_at, kill_at, multiples of an op's timeout; abort_deadline; kill_exit;
 * kill_core).
 *
 * abort: ncclCommAbort of a stuck communicator, on a helper thread, because an
 *        abort can itself hang. The communicator is fenced first (comm.h): the
 *        application's later calls on it get an error and a clear
 *        ncclGetLastError text, and never reach the freed handle.
 * kill:  a dump is written and synced, then the process ends with kill_exit
 *        (no core file unless kill_core).
 *
 * Threads: the watchdog only.
 */
#ifndef NCCLGUARD_ESCALATION_H
#define NCCLGUARD_ESCALATION_H

#include <stdint.h>

struct ng_comm;

/* Starts the abort of `c` (once); `why` goes into ncclGetLastError's text. */
void ncclguard_escalation_abort(struct ng_comm *c, const char *why);

/* Checks the aborts under way against abort_deadline; one that missed it
 * escalates to kill when kill_at is configured. Returns how many are still
 * under way (neither returned nor past the deadline). */
int ncclguard_escalation_check(int64_t now_mono);

/* Ends the process after a durable dump. Does not return. */
void ncclguard_escalation_kill(const char *why) __attribute__((noreturn));

/* Aborts started and finished so far (summary, tests). */
void ncclguard_escalation_stats(uint64_t *started, uint64_t *finished);

#endif
