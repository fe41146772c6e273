/* events.c: see events.h. */
#include "base/events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/identity.h"
#include "base/json.h"
#include "base/log.h"

static int events_fd = -1;

void ncclguard_events_open(const char *path)
{
    if (!path || !*path || events_fd >= 0) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        NG_WARN("cannot open the event log %s (%s): events are not written; check "
                "NCCLGUARD_EVENTS", path, strerror(errno));
        return;
    }
    events_fd = fd;
}

void ncclguard_event(const char *type, const char *fields, ...)
{
    if (events_fd < 0) return;
    const struct ng_identity *me = ncclguard_identity();
    char line[2048], host[6 * sizeof me->host + 3];
    int n = snprintf(line, sizeof line,
                     "{\"time_ns\":%lld,\"rank\":%d,\"host\":%s,\"pid\":%d,\"event\":\"%s\"",
                     (long long)ng_clock_ns(CLOCK_REALTIME), me->rank,
                     ncclguard_json_quote(me->host, host, sizeof host),
                     (int)getpid(), type);
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
    while (write(events_fd, line, (size_t)n) < 0 && errno == EINTR) {
    }
}
