/*
 * start.h: process start-up and shutdown of the shim, and the start order.
 *
 * Owns: the library constructor (identity, log settings, the site policy), the
 * lazy start of everything else at the first communicator creation, in one
 * order (track/, then evidence/, then watch/), the fork handlers and the exit
 * summary.
 *
 * Threads: the constructor runs before main; ncclguard_start on the
 * application thread that creates a communicator (every creation calls it; the
 * first one starts the machinery).
 */
#ifndef NCCLGUARD_START_H
#define NCCLGUARD_START_H

/* The constructor's work; re-runnable, which the start-up benchmark relies on. */
void ncclguard_process_init(void);

/* Called before every communicator creation; the first call starts the
 * machinery, later ones cost one atomic load. */
void ncclguard_start(void);

#endif
