/*
 * thread.h: how the shim starts its own threads (the watchdog's two, the abort
 * helper). They take no signal meant for the application: every signal is
 * blocked in them, so that a SIGTERM or SIGUSR2 sent to the process reaches one
 * of the application's threads and its handlers, never a thread of ours.
 *
 * Threads: any but a signal handler.
 */
#ifndef NCCLGUARD_THREAD_H
#define NCCLGUARD_THREAD_H

#include <pthread.h>

/* pthread_create with every signal blocked in the new thread; detached when t
 * is NULL. 0, or the error number. */
int ncclguard_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
