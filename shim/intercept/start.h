/*
 * init.h: process start-up and shutdown of the shim.
 *
 * Owns: the library constructor (reads NCCLGUARD_DISABLE, identity and log
 * settings, applies the site policy), the lazy start of everything else at the
 * first communicator creation (fork handlers), and the exit summary.
 *
 * Threads: the constructor runs before main; ncclguard_first_comm on the
 * application thread that creates the first communicator.
 */
#ifndef NCCLGUARD_INIT_H
#define NCCLGUARD_INIT_H

/* The constructor's work; re-runnable, which the start-up benchmark relies on. */
void ncclguard_process_init(void);

/* Called at every communicator creation; the first call starts the machinery. */
void ncclguard_first_comm(void);

#endif
