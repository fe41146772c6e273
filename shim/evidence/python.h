/*
 * python.h: the CPython interpreter the shim may be loaded into.
 *
 * Owns: whether the process is a CPython interpreter, and its version, for
 * the dump's "versions" member. (Python stacks come later: issue 10, item 3.)
 *
 * Threads: ncclguard_python_init under the start lock; the getter from any
 * thread, signal handlers included.
 */
#ifndef NCCLGUARD_PYTHON_H
#define NCCLGUARD_PYTHON_H

/* Looks for the interpreter in the global scope (dlsym: not in a handler). */
void ncclguard_python_init(void);

/* "3.11.2", or NULL when the process is not Python. */
const char *ncclguard_python_version(void);

#endif
