/*
 * dumper.h: the dump thread ("ncclguard-dump"), started with the watchdog.
 *
 * Owns: the dump directory's I/O on behalf of the watchdog: the dumps asked
 * for (a timeout, a stuck creation, the dump signal, the exit dump, the kill's
 * dump), the cross-rank trigger (evidence/trigger.h: raising an incident on a
 * timeout, checking for one another rank raised) and the "dump
 * written" line and event. A dump can block for long on a shared file system;
 * only this thread waits for it. The enforcer keeps polling meanwhile, and the
 * escalation ladder waits for the dump of its incident (ncclguard_dumper_done)
 * before it aborts or kills, at most NG_DUMPER_WAIT_S.
 *
 * Requests fold: the dump thread carries out every request pending when it
 * wakes with one dump, under the reason that ranks first (kill, exit, timeout,
 * init_timeout, signal, ras). After a dump of an incident, the rank that
 * reports it starts the verdict (evidence/verdict.h) and the RAS query
 * (evidence/ras.h). Each request gets a ticket; a ticket is done once
 * the dump that carried it out is durable (renamed and the directory synced)
 * or failed, or when no dump was due (an incident this rank dumped for).
 *
 * Threads: post and wait from any thread but a signal handler;
 * ncclguard_dumper_post_signal from anywhere (it sets a flag and wakes the
 * thread with write(2)). Without the thread (it could not start, or after fork in the child
 * before its first communicator) a request is carried out on the caller.
 */
#ifndef NCCLGUARD_DUMPER_H
#define NCCLGUARD_DUMPER_H

#include <stddef.h>
#include <stdint.h>

/* How long the ladder and the exit dump wait for a dump before they go on
 * without it (a file system that hangs must not stop the abort or the kill). */
#define NG_DUMPER_WAIT_S 30

/* What a request asks for: a bit each. */
enum {
    NG_DUMPER_TIMEOUT = 1u << 0,      /* raise or join an incident, dump once per incident */
    NG_DUMPER_INIT_TIMEOUT = 1u << 1, /* a communicator stuck in its creation */
    NG_DUMPER_SIGNAL = 1u << 2,       /* NCCLGUARD_DUMP_SIGNAL */
    NG_DUMPER_EXIT = 1u << 3,         /* dump_at_exit */
    NG_DUMPER_KILL = 1u << 4,         /* the kill step's own dump */
    NG_DUMPER_RAS = 1u << 5,          /* NCCL's RAS answer arrived (evidence/ras.h) */
};

/* Starts the thread; 0, or -1 (logged: requests are then carried out on the
 * thread that posts them). Idempotent. */
int ncclguard_dumper_start(void);

/* Asks for a dump (NG_DUMPER_* bits); returns its ticket. Never waits for the
 * dump, except without the thread. */
uint64_t ncclguard_dumper_post(unsigned what);

/* The enforcer's pass: without the thread, carries out what is pending and
 * the trigger's check on the caller, and returns 1 (the caller then passes
 * every period); with it, nothing, 0. */
int ncclguard_dumper_tick(void);

/* Async-signal-safe: a dump on request by signal, at once. */
void ncclguard_dumper_post_signal(void);

/* The ticket of the latest request (0: none yet). */
uint64_t ncclguard_dumper_last_ticket(void);

/* 1 when ticket t is done. */
int ncclguard_dumper_done(uint64_t t);

/* Waits until ticket t is done or CLOCK_MONOTONIC passes deadline_ns: 1 when
 * done. */
int ncclguard_dumper_wait(uint64_t t, int64_t deadline_ns);

/* The outcome of the latest dump carried out: 0 and its path, or -1. */
int ncclguard_dumper_result(char *path, size_t len);

/* Dumps the thread (or an inline request) wrote. */
uint64_t ncclguard_dumper_count(void);

/* fork(): the child has no dump thread; it starts one at its first comm. */
void ncclguard_dumper_atfork_child(void);

#endif
