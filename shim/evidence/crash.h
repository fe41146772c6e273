/*
 * crash.h: the crash path. On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the
 * process writes a dump ("reason": "crash": the flight recorder, the ops in
 * flight, the crashing thread's stack from the faulting instruction, each
 * frame with its module, offset and build-id but no name: modmap.h) with
 * async-signal-safe code only, then hands the signal on to the disposition it
 * had before,
 * so that Python's faulthandler, a core dump or the default death still
 * follow.
 *
 * Owns: those handlers, installed at the first communicator, and the
 * dispositions saved then.
 *
 * The handler runs on an alternate signal stack (base/altstack.h), which the
 * threads that create a communicator or issue an op get from the shim when
 * they have none big enough, so that a stack overflow still leaves a dump.
 *
 * Threads: init under the start lock; the handler on the crashing thread.
 */
#ifndef NCCLGUARD_CRASH_H
#define NCCLGUARD_CRASH_H

/* Installs the handlers (SA_SIGINFO | SA_ONSTACK | SA_RESTART), saving the
 * dispositions they chain to. */
void ncclguard_crash_init(void);

/* fork(): a child's crash writes no dump (it never reports the parent's
 * state) until it creates a communicator of its own; it still chains. */
void ncclguard_crash_atfork_child(void);

#endif
