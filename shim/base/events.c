/* events.c: see events.h. */
#include "base/events.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/identity.h"
#include "base/json.h"
#include "base/log.h"
#include "base/outfile.h"
#include "base/spool.h"

static int events_fd = -1;
static struct ng_sink events_sink = {.what = "the event log"}; /* events lost */

void ncclguard_events_open(const char *path)
{
    if (!path || !*path || events_fd >= 0) return;
    if (ncclguard_outfile_is_stderr(path)) {
        events_fd = STDERR_FILENO;
        return;
    }
    char why[300];
    int fd = ncclguard_outfile_open(path, why, sizeof why);
    if (fd < 0) {
        NG_WARN("cannot write the event log to %s (the events setting): %s; events are not "
                "written, give the path of a regular file",
                path, why);
        return;
    }
    events_fd = fd;
}

uint64_t ncclguard_events_lost(void)
{
    return ng_atomic_load_relaxed(&events_sink.lost);
}

void ncclguard_event(const char *type, const char *fields, ...)
{
    if (events_fd < 0) return;
    const struct ng_identity *me = ncclguard_identity();
    char line[2048], host[6 * sizeof me->host + 3];
    int n = snprintf(line, sizeof line,
                     "{\"time_ns\":%lld,\"rank\":%d,\"host\":%s,\"pid\":%d,\"event\":\"%s\"",
                     (long long)ng_clock_ns(CLOCK_REALTIME), me->rank,
                     ncclguard_json_quote(me->host, host, sizeof host), (int)getpid(), type);
    if (fields && n > 0 && (size_t)n < sizeof line - 1) {
        line[n++] = ',';
        va_list ap;
        va_start(ap, fields);
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fields, ap);
        va_end(ap);
        if (m > 0) n += m;
    }
    if (n < 0 || (size_t)n > sizeof line - 3) {
        NG_WARN_ONCE("an event did not fit in a log line and was dropped");
        return;
    }
    line[n++] = '}';
    line[n++] = '\n';
    ncclguard_spool_write(&events_sink, events_fd, line, (size_t)n);
}
