/*
 * log.h: human-readable messages of the shim.
 *
 * Owns: the log destination (stderr, or the file named by NCCLGUARD_LOG, opened
 * lazily on the first message so that an unused shim opens no file; a path that
 * is not a regular file falls back to stderr, with one line: base/outfile.h), the
 * level (NCCLGUARD_LOG_LEVEL), the "ncclguard: " prefix every line carries, and
 * the count of lines lost to a file that failed to take them.
 *
 * Threads: any thread, not signal handlers (formatting uses vsnprintf). Each line
 * is one write(2), so lines from several threads never interleave, and none is
 * retried: a line the file cannot take is lost and counted, never waited for.
 * Lines for a file go through the writer thread of base/spool.h once it runs.
 */
#ifndef NCCLGUARD_LOG_H
#define NCCLGUARD_LOG_H

#include <stdint.h>

#include "base/atomic.h"

enum ng_level { NG_LOG_ERROR = 0, NG_LOG_WARN = 1, NG_LOG_INFO = 2, NG_LOG_DEBUG = 3 };

/* The one set of spellings of a level, in the order of enum ng_level (any case).
 * The log_level setting (policy/settings.def) takes its choices from here. */
#define NG_LOG_LEVEL_CHOICES "error|warn|info|debug"

/* Reads NCCLGUARD_LOG_LEVEL (when it is one of NG_LOG_LEVEL_CHOICES; the settings
 * report any other value) and NCCLGUARD_LOG. Called by the constructor; cheap. */
void ncclguard_log_init(void);

/* Sets the level alone (the settings' loader, when the site locked log_level, so
 * that the lock governs the lines that refuse the job's own level). */
void ncclguard_log_set_level(int level);

/* Applies the effective settings (config files included); `path` must stay
 * valid (the settings' storage does). */
void ncclguard_log_configure(int level, const char *path);

/* Writes "ncclguard: <message>\n" when lvl is enabled. */
void ncclguard_log(enum ng_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Lines lost because the log file could not take them (full disk, I/O error). */
uint64_t ncclguard_log_lost(void);

/* True when messages of this level are written. */
int ncclguard_log_enabled(enum ng_level lvl);

#define NG_ERROR(...) ncclguard_log(NG_LOG_ERROR, __VA_ARGS__)
#define NG_WARN(...) ncclguard_log(NG_LOG_WARN, __VA_ARGS__)
#define NG_INFO(...) ncclguard_log(NG_LOG_INFO, __VA_ARGS__)
#define NG_DEBUG(...) ncclguard_log(NG_LOG_DEBUG, __VA_ARGS__)

/* Logs at most once per call site. */
#define NG_WARN_ONCE(...)                                                    \
    do {                                                                     \
        static ng_atomic(int) ng_once_;                                      \
        if (!ng_atomic_exchange_relaxed(&ng_once_, 1)) NG_WARN(__VA_ARGS__); \
    } while (0)

#endif
