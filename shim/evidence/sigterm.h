/*
 * sigterm.h: evidence before teardown. SIGTERM is how torchrun ends the other
 * ranks once one has failed; those are often the only dumps left of a job. A
 * SIGTERM that arrives while an op is in flight, or while a communicator is
 * being created (init, split, shrink), writes a dump ("reason":
 * "sigterm", from the handler: the receiving thread's stack from the
 * interrupted instruction, with modules but no names), unless the process
 * dumped already (for an incident, on request: that dump is richer, and it
 * is kept). A dump that another thread is writing
 * when SIGTERM comes is waited for, up to 10 s, so that the process does not
 * end in the middle of it. Then it goes on to the disposition the application chose:
 * its handler is called as the kernel would have called it (its sa_mask,
 * SA_NODEFER, SA_SIGINFO, SA_RESETHAND: the next SIGTERM then kills), a
 * default SIGTERM still kills, an ignored one is still ignored. Never swallowed.
 *
 * Owns: the SIGTERM handler and the application's disposition behind it. An
 * application that installs its own handler after the first communicator
 * (Megatron, Lightning) replaces ours; the enforcer's next pass wraps it
 * again (ncclguard_sigterm_rearm): within 5 s, and as soon as the observer
 * finds ops in flight after none were (watch/watchdog.h), so its handler still
 * runs, after the dump.
 *
 * Threads: init under the start lock; rearm on the watchdog; the handler on
 * whichever thread receives the signal.
 */
#ifndef NCCLGUARD_SIGTERM_H
#define NCCLGUARD_SIGTERM_H

void ncclguard_sigterm_init(void);

/* Puts our handler back in front of one installed since (watchdog poll). */
void ncclguard_sigterm_rearm(void);

#endif
