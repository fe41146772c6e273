/*
 * threads.h: the C stack of every thread of the process, for the dump's
 * "threads" member.
 *
 * Owns: the stack signal (a real-time signal the process does not use: the
 * highest one without a handler, never NCCL_PROXY_DUMP_SIGNAL's number nor the
 * dump signal), its handler, and the slots that threads fill from it.
 *
 * How a thread's stack is taken, by what it is doing when the dump starts:
 *  - the dumping thread unwinds itself ("self");
 *  - a thread blocked in a call that any signal handler would cut short
 *    (nanosleep, poll, epoll_wait, a timed futex wait, a socket with a
 *    timeout, ...; signal(7)) is not signalled, nor stopped: its stack is
 *    unwound from outside with DWARF CFI from the pc and sp of
 *    /proc/self/task/<tid>/syscall ("cfi", stackscan.h). Where CFI stops early
 *    (a frame needs rbp), the frames above come from a scan confirmed frame by
 *    frame, and are guesses. Without the CFI unwinder it is the bare scan
 *    ("scan": every frame above the pc a guess). The syscall file is read
 *    again after the unwind: a thread that left its call meanwhile has a torn
 *    stack (every frame above the pc a guess, and a note);
 *  - every other thread gets the stack signal and unwinds itself in the
 *    handler ("signal"): blocking read, untimed futex waits and the like are
 *    restarted by SA_RESTART, so the application never sees the signal;
 *  - a thread that has not answered within 500 ms is listed with no frames
 *    ("no_answer"): it blocks the signal, or is stopped.
 * A thread that enters such a call between the check and the signal (a window
 * of microseconds) would see EINTR; this is the one residual risk.
 *
 * Threads: ncclguard_threads_init under the start lock; collect and
 * put_json on the dumping thread (one dump at a time, dump.c); the handler
 * on any thread.
 */
#ifndef NCCLGUARD_THREADS_H
#define NCCLGUARD_THREADS_H

#include <stdint.h>

/* Picks and installs the stack signal; avoid is the dump signal (0: none).
 * Returns the signal, or 0 when every real-time signal is taken (logged). */
int ncclguard_threads_init(int avoid);

/* The signal picked by init, 0 when none. */
int ncclguard_threads_signal(void);

/* Takes every thread's stack into the slots: waits at most 500 ms for the
 * signalled threads. Not async-signal-safe (reads /proc, sleeps). */
void ncclguard_threads_collect(void);

/* Drops the last collection: the next dump writes null (a dump from a signal
 * handler, which cannot collect), unless the slots hold a crash sample.
 * Async-signal-safe. */
void ncclguard_threads_forget(void);

/* The crash path: the calling thread alone, unwound from the interrupted
 * instruction of uc (the handler's ucontext; NULL: from the caller), in place
 * of any collection. Its frames get module, offset and build-id
 * (modmap.h), no function name (symbolizing is not async-signal-safe: names
 * come offline). Async-signal-safe: open/read of /proc, process_vm_readv and
 * the unwinder. */
void ncclguard_threads_take_self(void *uc);

/* False while the slots hold a crash sample. */
int ncclguard_threads_symbolizable(void);

/* One thread of the last collection, for the dump writer (dump_body.c). */
struct ng_thread_view {
    int64_t tid;
    const char *name;       /* from /proc/self/task/<tid>/comm */
    const char *state;      /* the state letter of /proc/self/task/<tid>/stat */
    const char *syscall;    /* the call it is blocked in; NULL when running or unknown */
    const char *stack_from; /* "self", "signal", "cfi", "scan", "no_answer" */
    void *const *pcs;       /* innermost first */
    int npcs;
    int first_guess;        /* pcs[first_guess..npcs-1] are guesses; npcs when none */
    const char *stack_note; /* why the stack is short or guessed; NULL when it is neither */
};

/* Threads in the last collection; -1 when there is none (forgotten, or never
 * collected). Async-signal-safe. */
int ncclguard_threads_count(void);

/* Thread i (0 <= i < count). Async-signal-safe. */
void ncclguard_threads_get(int i, struct ng_thread_view *out);

/* fork(): the child has one thread and no collection; the handler stays. */
void ncclguard_threads_atfork_child(void);

#endif
