/*
 * log.c: see log.h. Lines are formatted on the stack and written with one
 * write(2); the destination file, when NCCLGUARD_LOG names one, is opened on
 * the first message only, so a shim that has nothing to say opens nothing.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/outfile.h"
#include "base/spool.h"

static int log_level = NG_LOG_INFO;
static const char *log_path;                          /* NULL: stderr */
static ng_atomic(int) log_fd = -1;                    /* opened lazily from log_path */
static struct ng_sink log_sink = {.what = "the log"}; /* lines lost */

/* The level named s, spelt as the log_level setting accepts it (NG_LOG_LEVEL_CHOICES,
 * any case); -1 otherwise. */
static int parse_level(const char *s)
{
    size_t n = strlen(s);
    int level = 0;
    for (const char *c = NG_LOG_LEVEL_CHOICES; *c; level++) {
        size_t w = strcspn(c, "|");
        if (w == n && !strncasecmp(c, s, n)) return level;
        c += w + (c[w] == '|');
    }
    return -1;
}

/*
 * Only a valid NCCLGUARD_LOG_LEVEL is taken here, for the messages of the policy
 * step that follows. Anything else keeps the default and is left to the settings
 * (config.c), which reject it with one line at the default level: so the line that
 * rejects a level is never hidden by that level, and it is said once.
 */
void ncclguard_log_init(void)
{
    const char *lvl = getenv("NCCLGUARD_LOG_LEVEL");
    int parsed = lvl ? parse_level(lvl) : -1;
    log_level = parsed < 0 ? NG_LOG_INFO : parsed;
    const char *path = getenv("NCCLGUARD_LOG");
    log_path = path && *path ? path : NULL;
}

void ncclguard_log_set_level(int level)
{
    if (level >= NG_LOG_ERROR && level <= NG_LOG_DEBUG) log_level = level;
}

void ncclguard_log_configure(int level, const char *path)
{
    ncclguard_log_set_level(level);
    log_path = path && *path ? path : NULL;
}

int ncclguard_log_enabled(enum ng_level lvl)
{
    return (int)lvl <= log_level;
}

/* Says on stderr, with one write(2), that the log file cannot be used. */
static void say_cannot_open(const char *why)
{
    char msg[1400];
    int n = snprintf(msg, sizeof msg,
                     "ncclguard: %scannot log to %s (the log setting): %s; "
                     "logging to stderr instead; give the path of a regular file\n",
                     ncclguard_identity_tag(), log_path, why);
    if (n > (int)sizeof msg - 1) n = (int)sizeof msg - 1;
    if (n > 0) ncclguard_outfile_write(STDERR_FILENO, msg, (size_t)n);
}

/* Opens the log file once; stderr (and one line there) when it is not a regular
 * file that can be opened without blocking. */
static int log_destination(void)
{
    if (!log_path || ncclguard_outfile_is_stderr(log_path)) return STDERR_FILENO;
    int fd = ng_atomic_load_acquire(&log_fd);
    if (fd >= 0) return fd;
    char why[300];
    fd = ncclguard_outfile_open(log_path, why, sizeof why);
    if (fd < 0) fd = STDERR_FILENO;
    int expected = -1;
    if (!ng_atomic_cas_acq_rel(&log_fd, &expected, fd)) {
        if (fd != STDERR_FILENO) close(fd);
        return expected;
    }
    if (fd == STDERR_FILENO) say_cannot_open(why);
    return fd;
}

void ncclguard_log(enum ng_level lvl, const char *fmt, ...)
{
    if (!ncclguard_log_enabled(lvl)) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "ncclguard: %s", ncclguard_identity_tag());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ncclguard_spool_write(&log_sink, log_destination(), line, len);
}

uint64_t ncclguard_log_lost(void)
{
    return ng_atomic_load_relaxed(&log_sink.lost);
}
