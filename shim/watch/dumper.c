/*
 * dumper.c: see dumper.h.
 *
 * The thread sleeps in ppoll on `wake_fd` (an eventfd: a request, or the dump
 * signal, whose handler may write(2) but not signal a condition variable) and
 * on the trigger's descriptor (the node directory changed), until the
 * trigger's next check of its own (every trigger period on the node's poller,
 * never on the others; every NCCLGUARD_POLL_MS when the fan-out cannot be
 * watched). When it wakes it
 * takes every pending request (the bits and the newest ticket among them) at
 * once, raises the incident of a timeout, writes one dump, and then marks
 * those tickets done on `finished`. A wake without a request is the
 * cross-rank trigger's check (a stat on tmpfs when the directory changed; the
 * node's poller also stats the shared file every trigger period). The dump reads the flight
 * recorder and the registry without locks (each record is copied whole under
 * its seqlock), so nobody else waits for it.
 */
#include "watch/dumper.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/events.h"
#include "base/json.h"
#include "base/log.h"
#include "base/thread.h"
#include "evidence/dump.h"
#include "evidence/ras.h"
#include "evidence/trigger.h"
#include "evidence/verdict.h"
#include "policy/config.h"
#include "watch/metrics.h"

static pthread_t thread;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished; /* CLOCK_MONOTONIC */
static int conds_ready;         /* under lock */
static int running;             /* under lock: the thread takes the requests */
static unsigned pending;        /* under lock: NG_DUMPER_* bits */
static uint64_t posted, done;   /* under lock: tickets */
static int last_rc = -1;        /* under lock */
static char last_path[1024];
static ng_atomic(int) signal_asked;
static ng_atomic(int) wake_fd = -1; /* the thread's eventfd, -1: none (it then wakes each period) */
static ng_atomic(int) busy;
static ng_atomic(uint64_t) ndumps;
/* Requests carried out on the caller when there is no thread, one at a time. */
static pthread_mutex_t inline_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_conds(void)
{
    if (conds_ready) return;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&finished, &ca);
    pthread_condattr_destroy(&ca);
    conds_ready = 1;
}

static struct timespec mono_ts(int64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
}

/* The reason a set of requests is dumped under; NULL when none is due. */
static const char *reason_of(unsigned what)
{
    /* the incident first: its TRIGGER file is written before any action */
    int incident = (what & NG_DUMPER_TIMEOUT) && ncclguard_trigger_raise();
    if (what & NG_DUMPER_KILL) return "kill";
    if (what & NG_DUMPER_EXIT) return "exit";
    if (incident) return "timeout";
    if (what & NG_DUMPER_INIT_TIMEOUT) return "init_timeout";
    if (what & NG_DUMPER_SIGNAL) return "signal";
    if (what & NG_DUMPER_RAS) return "ras";
    return NULL;
}

/* Carries out the requests `what`: at most one dump. */
static void carry_out(unsigned what)
{
    if (ng_atomic_exchange_relaxed(&signal_asked, 0)) what |= NG_DUMPER_SIGNAL;
    const char *reason = reason_of(what);
    if (!reason && !(what & NG_DUMPER_TIMEOUT) && ncclguard_trigger_check()) reason = "trigger";
    if (!reason) return;
    char path[1024];
    ng_atomic_store_release(&busy, 1);
    int rc = ncclguard_dump_write(reason, path, sizeof path);
    ng_atomic_store_release(&busy, 0);
    if (rc == 0) {
        ng_atomic_add_relaxed(&ndumps, 1);
        NG_WARN("dump written (%s): %s", reason, path);
        char quoted[2048];
        ncclguard_event("dump", "\"reason\":\"%s\",\"path\":%s", reason,
                        ncclguard_json_quote(path, quoted, sizeof quoted));
    }
    /* each starts once per incident */
    const char *incident = ncclguard_trigger_incident();
    if (incident && ncclguard_trigger_is_reporter(incident)) {
        ncclguard_verdict_after_dump(incident);
        ncclguard_ras_after_dump(incident);
    }
    pthread_mutex_lock(&lock);
    last_rc = rc;
    if (rc == 0) memcpy(last_path, path, sizeof last_path);
    pthread_mutex_unlock(&lock);
}

/* Async-signal-safe: wakes the thread (errno kept). */
static void wake(void)
{
    int fd = ng_atomic_load_acquire(&wake_fd);
    if (fd < 0) return;
    int e = errno;
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one); /* a full counter is awake already */
    (void)n;
    errno = e;
}

/* Sleeps until woken, a change of the fan-out, the trigger's next check or
 * the next metrics file (metrics_at); not at all when a request or the
 * signal's flag is there. Called with lock held; drops it while it sleeps. */
static void wait_for_work(int64_t period_ns, int64_t metrics_at)
{
    if (pending || ng_atomic_load_relaxed(&signal_asked)) return;
    pthread_mutex_unlock(&lock);
    int64_t now = ng_clock_ns(CLOCK_MONOTONIC);
    int64_t at = ncclguard_trigger_next_ns(now, period_ns);
    int fd = ng_atomic_load_relaxed(&wake_fd);
    if (fd < 0 && now + period_ns < at) at = now + period_ns;
    if (metrics_at < at) at = metrics_at;
    struct timespec left = mono_ts(at > now ? at - now : 0);
    struct pollfd p[2] = {{fd, POLLIN, 0}, {ncclguard_trigger_wait_fd(), POLLIN, 0}};
    ppoll(p, 2, &left, NULL); /* a negative fd is left out */
    uint64_t n;
    if (fd >= 0 && read(fd, &n, sizeof n) < 0) { /* drained before pending is read */
    }
    pthread_mutex_lock(&lock);
}

static void *dumper_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ncclguard-dump");
    int64_t period = (int64_t)ncclguard_settings()->poll_ms * 1000000;
    int64_t metrics_at = ncclguard_metrics_tick(ng_clock_ns(CLOCK_MONOTONIC));
    pthread_mutex_lock(&lock);
    for (;;) {
        wait_for_work(period, metrics_at);
        unsigned what = pending;
        uint64_t upto = posted;
        pending = 0;
        pthread_mutex_unlock(&lock);
        carry_out(what);
        metrics_at = ncclguard_metrics_tick(ng_clock_ns(CLOCK_MONOTONIC)); /* when due */
        pthread_mutex_lock(&lock);
        if (upto > done) done = upto;
        pthread_cond_broadcast(&finished);
    }
    return NULL;
}

int ncclguard_dumper_start(void)
{
    pthread_mutex_lock(&lock);
    init_conds();
    if (running) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    running = 1;
    pthread_mutex_unlock(&lock);
    if (ng_atomic_load_relaxed(&wake_fd) < 0)
        ng_atomic_store_release(&wake_fd, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    int rc = ncclguard_thread_start(&thread, dumper_main, NULL);
    if (!rc) return 0;
    int fd = ng_atomic_exchange_relaxed(&wake_fd, -1);
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&lock);
    running = 0;
    unsigned what = pending; /* posted meanwhile: carried out by the next post */
    pthread_mutex_unlock(&lock);
    NG_WARN("cannot start the dump thread (%s): dumps are written by the watchdog itself",
            strerror(rc));
    if (what) ncclguard_dumper_post(0);
    return -1;
}

uint64_t ncclguard_dumper_post(unsigned what)
{
    pthread_mutex_lock(&lock);
    init_conds();
    uint64_t t = ++posted;
    pending |= what;
    if (running) {
        pthread_mutex_unlock(&lock);
        wake();
        return t;
    }
    what = pending;
    pending = 0;
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&inline_lock);
    carry_out(what);
    pthread_mutex_unlock(&inline_lock);
    pthread_mutex_lock(&lock);
    if (t > done) done = t;
    pthread_cond_broadcast(&finished);
    pthread_mutex_unlock(&lock);
    return t;
}

int ncclguard_dumper_tick(void)
{
    pthread_mutex_lock(&lock);
    int threaded = running;
    pthread_mutex_unlock(&lock);
    if (!threaded) {
        ncclguard_dumper_post(0);
        ncclguard_metrics_tick(ng_clock_ns(CLOCK_MONOTONIC)); /* the pass is every period */
    }
    return !threaded;
}

void ncclguard_dumper_post_signal(void)
{
    ng_atomic_store_relaxed(&signal_asked, 1);
    wake();
}

uint64_t ncclguard_dumper_last_ticket(void)
{
    pthread_mutex_lock(&lock);
    uint64_t t = posted;
    pthread_mutex_unlock(&lock);
    return t;
}

int ncclguard_dumper_done(uint64_t t)
{
    pthread_mutex_lock(&lock);
    int d = done >= t;
    pthread_mutex_unlock(&lock);
    return d;
}

int ncclguard_dumper_wait(uint64_t t, int64_t deadline_ns)
{
    struct timespec until = mono_ts(deadline_ns);
    pthread_mutex_lock(&lock);
    init_conds();
    while (done < t && pthread_cond_timedwait(&finished, &lock, &until) != ETIMEDOUT) {
    }
    int d = done >= t;
    pthread_mutex_unlock(&lock);
    return d;
}

int ncclguard_dumper_result(char *path, size_t len)
{
    pthread_mutex_lock(&lock);
    int rc = last_rc;
    if (rc == 0 && path && len) {
        strncpy(path, last_path, len - 1);
        path[len - 1] = '\0';
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

uint64_t ncclguard_dumper_count(void)
{
    return ng_atomic_load_relaxed(&ndumps);
}

void ncclguard_dumper_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_mutex_init(&inline_lock, NULL);
    conds_ready = 0;
    running = 0;
    pending = 0;
    posted = done = 0;
    last_rc = -1;
    ng_atomic_store_relaxed(&signal_asked, 0);
    int fd = ng_atomic_exchange_relaxed(&wake_fd, -1); /* the parent's: it would wake either */
    if (fd >= 0) close(fd);
    ng_atomic_store_relaxed(&busy, 0);
    ng_atomic_store_relaxed(&ndumps, 0);
}
