/*
 * log.c: see log.h. Lines are formatted on the stack and written with one
 * write(2); the destination file, when NCCLGUARD_LOG names one, is opened on
 * the first message only, so a shim that has nothing to say opens nothing.
 */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/identity.h"

static int log_level = NG_LOG_INFO;
static const char *log_path; /* NULL: stderr */
static ng_atomic(int) log_fd = -1; /* opened lazily from log_path */

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

void ncclguard_log_configure(int level, const char *path)
{
    if (level >= NG_LOG_ERROR && level <= NG_LOG_DEBUG) log_level = level;
    log_path = path && *path ? path : NULL;
}

int ncclguard_log_enabled(enum ng_level lvl)
{
    return (int)lvl <= log_level;
}

/* Opens NCCLGUARD_LOG once; falls back to stderr (and says so there) when it can't. */
static int log_destination(void)
{
    if (!log_path) return STDERR_FILENO;
    int fd = ng_atomic_load_acquire(&log_fd);
    if (fd >= 0) return fd;
    fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        char msg[512];
        int n = snprintf(msg, sizeof msg,
                         "ncclguard: cannot open NCCLGUARD_LOG=%s (%s): logging to stderr\n",
                         log_path, strerror(errno));
        if (write(STDERR_FILENO, msg, (size_t)n) < 0) { /* nothing else to do */ }
        fd = STDERR_FILENO;
    }
    int expected = -1;
    if (!ng_atomic_cas_acq_rel(&log_fd, &expected, fd)) {
        if (fd != STDERR_FILENO) close(fd);
        fd = expected;
    }
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
    int fd = log_destination();
    while (write(fd, line, len) < 0 && errno == EINTR) {
    }
}
