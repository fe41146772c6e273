/*
 * fakenccl call log (FAKENCCL_CALL_LOG=path): one line per API call
 * received, for differential tests (the log with the shim preloaded must
 * equal the log without it).
 *
 * Line format:  ncclName arg=value arg=value ... -> result
 *   scalars       verbatim (count=1024 datatype=7)
 *   pointers      first-seen ordinal per kind: comm#0 stream#1 buf#3 reg#0 win#0;
 *                 NULL is "null"; the legacy and per-thread default streams are
 *                 "legacy" and "per-thread"
 *   unique ids    id#N, the first-seen ordinal of the id's contents
 *   out-params    the value written (version=22809, comm=comm#2, asyncError=0),
 *                 "null" when the pointer was NULL
 *   result        the ncclResult_t as a number, a quoted string for
 *                 GetErrorString/GetLastError, "void" for ResetDebugInit
 *   thread=NAME   the calling thread's name (pthread_getname_np), last: a
 *                 differential test can set aside the calls a preloaded tool
 *                 makes on threads of its own
 * Ordinals make two runs of one program give identical logs despite ASLR.
 *
 * Thread safety: fn_log_begin takes the log lock and fn_log_end releases it,
 * so ordinals are numbered in the order the lines are written. Each line is
 * one write(2) on an O_APPEND descriptor.
 */
#ifndef FAKENCCL_CALLLOG_H
#define FAKENCCL_CALLLOG_H

#include "fakenccl_core.h"

enum fn_log_kind {
    FN_LOG_COMM,
    FN_LOG_STREAM,
    FN_LOG_BUF,
    FN_LOG_REG,
    FN_LOG_WIN,
    FN_LOG_ID,
    FN_LOG_NKINDS
};

struct fn_logline {
    char buf[2048];
    size_t len;
};

/* Starts a line for API `name` (e.g. "ncclAllReduce"); false (and no lock) when logging is off. */
bool fn_log_begin(struct fn_logline *l, const char *name);
/* Appends " arg=<ordinal>"; an empty arg appends the bare value (inside a [list]). */
void fn_log_ptr(struct fn_logline *l, const char *arg, enum fn_log_kind kind, const void *p);
void fn_log_id(struct fn_logline *l, const char *arg, const ncclUniqueId *id);
void fn_log_fmt(struct fn_logline *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs a config struct's fields, or "null". */
void fn_log_config(struct fn_logline *l, const char *arg, const ncclConfig_t *config);
/* Logs an int array of n entries, or "null". */
void fn_log_ints(struct fn_logline *l, const char *arg, const int *v, int n);
/* Ends the line with a result code, writes it and releases the lock. */
void fn_log_end(struct fn_logline *l, ncclResult_t r);
/* Ends the line with a literal return value ("void" or a quoted string). */
void fn_log_end_text(struct fn_logline *l, const char *ret, bool quote);
/* Fork: the child drops the parent's file and ordinals and opens its own log on first use. */
void fn_log_atfork(enum fn_fork_phase phase);

#endif
