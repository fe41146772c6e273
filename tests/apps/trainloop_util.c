/*
 * Messages of trainloop and its single exit path. Every line starts with
 * "trainloop: rank R"; with --threads > 1, lines from a worker end with
 * " (thread T)", so the fixed message formats stay greppable.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "trainloop.h"

static int g_rank;
static int g_quiet;
static _Thread_local int t_tid = -1;
static atomic_int g_dying;

void tl_set_identity(int rank, int quiet)
{
    g_rank = rank;
    g_quiet = quiet;
}

/* Marks the calling thread as worker TID (only used in messages). */
void tl_set_thread(int tid)
{
    t_tid = tid;
}

static void vmessage(FILE *f, const char *fmt, va_list ap)
{
    char text[1024];
    vsnprintf(text, sizeof(text), fmt, ap);
    if (t_tid >= 0)
        fprintf(f, "trainloop: rank %d%s (thread %d)\n", g_rank, text, t_tid);
    else
        fprintf(f, "trainloop: rank %d%s\n", g_rank, text);
    fflush(f);
}

/*
 * Prints "trainloop: rank R<fmt>" to stderr and exits with CODE. Only the first
 * thread to get here exits: exit() is not safe to run twice concurrently, so
 * any later caller parks until the process is gone. exit() (not _exit) lets
 * preloaded libraries run their exit handlers (summaries, dumps).
 */
void tl_die(int code, const char *fmt, ...)
{
    va_list ap;
    if (atomic_exchange(&g_dying, 1)) {
        for (;;) pause();
    }
    va_start(ap, fmt);
    vmessage(stderr, fmt, ap);
    va_end(ap);
    exit(code);
}

/* A line on stderr that is always printed (fault injection notices). */
void tl_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(stderr, fmt, ap);
    va_end(ap);
}

/* An informational line on stdout, silenced by --quiet. */
void tl_info(const char *fmt, ...)
{
    va_list ap;
    if (g_quiet) return;
    va_start(ap, fmt);
    vmessage(stdout, fmt, ap);
    va_end(ap);
}
