/*
 * python.h: the CPython interpreter the shim may be loaded into, and the
 * Python stack of each of its threads at dump time.
 *
 * Owns: whether the process is CPython, its version, the method that reads
 * its stacks, and the last collection. The stacks are taken from the dumping
 * thread without the GIL, because the GIL may be what is stuck:
 *  - 3.11 and 3.12: _Py_DumpTracebackThreads, the routine behind faulthandler
 *    (async-signal-safe, no GIL), into a memfd; its text is kept ("raw") and
 *    parsed into threads and frames;
 *  - 3.13: the interpreter's thread and frame lists, walked with the offsets
 *    that CPython publishes for debuggers (_Py_DebugOffsets at the start of
 *    _PyRuntime), every read through process_vm_readv on our own pid, so that
 *    a list that changes underneath gives garbage at worst, never a fault;
 *  - any other version: no stacks, and one line that says why.
 *
 * Threads: ncclguard_python_init under the start lock; collect on the thread
 * that writes the dumps (not async-signal-safe: memfd, dlsym'd routines); the
 * getters from the dump writer, after collect.
 */
#ifndef NCCLGUARD_PYTHON_H
#define NCCLGUARD_PYTHON_H

#include <stdint.h>

/* Looks for the interpreter in the global scope and picks the method. */
void ncclguard_python_init(void);

/* "3.11.2", or NULL when the process is not Python. */
const char *ncclguard_python_version(void);

/* Takes every Python thread's stack (a no-op when the process is not Python). */
void ncclguard_python_collect(void);

/* Drops the last collection (a dump from a signal handler writes none). */
void ncclguard_python_forget(void);

/* The last collection, for the dump writer (dump_body.c). */
struct ng_py_view {
    const char *method; /* "faulthandler", "debug_offsets", "none" */
    const char *why;    /* why there are no stacks; NULL when there are */
    const char *raw;    /* the interpreter's own text; NULL when we walked */
    int nthreads;
};
struct ng_py_thread {
    uint64_t thread_id;  /* threading.get_ident() */
    int64_t tid;         /* native thread id, -1 when not known */
    int first, nframes;  /* frames[first .. first + nframes) */
};
struct ng_py_frame {
    const char *file, *function;
    int64_t line; /* -1 when not known */
};

/* 0 and *out, or -1 when there is nothing to write ("python" is null). */
int ncclguard_python_view(struct ng_py_view *out);
void ncclguard_python_thread(int i, struct ng_py_thread *out);
void ncclguard_python_frame(int i, struct ng_py_frame *out);

#endif
