/*
 * proc_syscall.h: which system call a thread of this process is in, read from /proc. Shared
 * by the unit suite of the thread scan (test_shim_threads.c) and the e2e program that parks
 * threads in blocking calls (e2e/progs/blocked_calls.c). Any thread may call it.
 */
#ifndef NCCLGUARD_PROC_SYSCALL_H
#define NCCLGUARD_PROC_SYSCALL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number of the call thread tid is in (first field of /proc/self/task/TID/syscall);
 * -2 when it runs, -3 when the file cannot be opened. */
static inline long current_syscall(int tid)
{
    char path[64], buf[256] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f) return -3;
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!ok || !strncmp(buf, "running", 7)) return -2;
    return strtol(buf, NULL, 10);
}

#endif
