/*
 * watchdog.c: see watchdog.h.
 *
 * One poll walks the flight recorder from `tail` (the oldest record that may
 * still change) to the head, asks the GPU markers of unfinished records how far
 * the GPU is, and moves records along scheduled -> started -> completed. It
 * then looks at what is still in flight for timeouts, at communicators still
 * being created, and at each communicator's async error.
 */
#include "watch/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/events.h"
#include "base/identity.h"
#include "base/json.h"
#include "base/log.h"
#include "evidence/dump.h"
#include "evidence/sigterm.h"
#include "evidence/trigger.h"
#include "policy/config.h"
#include "policy/envaudit.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/markers.h"
#include "track/track.h"
#include "watch/escalation.h"
#include "watch/nccl_calls.h"
#include "watch/stats.h"
#include "watch/timeouts.h"

#define SLOW_LINES_PER_WINDOW 10
/* The factor rule ignores ops shorter than this: a 20 us op that took 300 us
 * is launch and scheduling noise, not a slow collective. */
#define SLOW_FACTOR_FLOOR_NS (1000LL * 1000)
#define SLOW_WINDOW_NS (10LL * 1000000000)

/* Why a dump is due: the reason of the most recent request wins. */
enum dump_reason { DUMP_NONE = 0, DUMP_SIGNAL, DUMP_TIMEOUT, DUMP_INIT_TIMEOUT, DUMP_TRIGGER };
static const char *const dump_reason_name[] = {
    [DUMP_SIGNAL] = "signal", [DUMP_TIMEOUT] = "timeout", [DUMP_INIT_TIMEOUT] = "init_timeout",
    [DUMP_TRIGGER] = "trigger"};

static pthread_t thread;
static ng_atomic(int) running;
static ng_atomic(int) dump_requested; /* enum dump_reason; set from signal handlers too */
static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tail;                 /* under poll_lock */
static struct ng_watchdog_stats st;   /* under poll_lock */
static ng_atomic(uint64_t) async_errors; /* reported from any thread */
static unsigned char init_reported[NG_MAX_COMMS];
static int64_t slow_window_start;
static int slow_lines;
static uint64_t slow_suppressed;

static const char *short_id(uint64_t id, char buf[8])
{
    snprintf(buf, 8, "%04llx", (unsigned long long)(id >> 48));
    return buf;
}

static void write_dump(const char *reason)
{
    char path[1024];
    if (ncclguard_dump_write(reason, path, sizeof path) == 0) {
        st.dumps++;
        NG_WARN("dump written (%s): %s", reason, path);
        char quoted[2048];
        ncclguard_event("dump", "\"reason\":\"%s\",\"path\":%s", reason,
                        ncclguard_json_quote(path, quoted, sizeof quoted));
    }
}

/* The size of the record's communicator; a split child learns it only after
 * its first ops were recorded, so the registry may know better. */
static long long comm_size(const struct ng_op_record *r)
{
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    int n = c ? ng_comm_nranks(c) : -1;
    return r->comm_nranks > 0 ? r->comm_nranks : n;
}

/* "AllReduce #1042", "Send #5 to peer 3", "Recv #5 from peer 1". */
static const char *describe(const struct ng_op_record *r, char *buf, size_t len)
{
    const char *name = ng_op_name((int)r->op);
    if (r->op == NG_OP_SEND || r->op == NG_OP_RECV)
        snprintf(buf, len, "%s #%llu %s peer %lld", name, (unsigned long long)r->p2p_seq,
                 r->op == NG_OP_SEND ? "to" : "from", (long long)r->peer);
    else
        snprintf(buf, len, "%s #%llu", name, (unsigned long long)r->seq);
    return buf;
}

/* Logs a slow op, at most SLOW_LINES_PER_WINDOW lines per window; the next
 * line printed says how many were left out. */
static void report_slow(const struct ng_op_record *r, int64_t dur_ns, int64_t median_ns,
                        int64_t now)
{
    char idb[8];
    st.slow++;
    ncclguard_event("slow_op",
                    "\"comm\":\"%016llx\",\"op\":\"%s\",\"seq\":%llu,\"bytes\":%llu,"
                    "\"duration_ns\":%lld,\"median_ns\":%lld",
                    (unsigned long long)r->comm_id, ng_op_name((int)r->op),
                    (unsigned long long)r->seq, (unsigned long long)r->bytes,
                    (long long)dur_ns, (long long)median_ns);
    if (now - slow_window_start > SLOW_WINDOW_NS) {
        slow_window_start = now;
        slow_lines = 0;
    }
    if (slow_lines >= SLOW_LINES_PER_WINDOW) {
        slow_suppressed++;
        return;
    }
    slow_lines++;
    char more[64] = "";
    if (slow_suppressed)
        snprintf(more, sizeof more, " (%llu more slow ops not shown)",
                 (unsigned long long)slow_suppressed);
    slow_suppressed = 0;
    char ref[64] = "", what[96];
    if (median_ns)
        snprintf(ref, sizeof ref, ", %.1fx the median %.3f ms", (double)dur_ns / (double)median_ns,
                 median_ns / 1e6);
    NG_WARN("slow %s on comm %s…(%lld ranks), %llu bytes: %.3f ms%s%s",
            describe(r, what, sizeof what), short_id(r->comm_id, idb),
            comm_size(r), (unsigned long long)r->bytes, dur_ns / 1e6, ref, more);
}

static void completed(const struct ng_op_record *r, uint64_t index, int64_t gpu_start,
                      int64_t gpu_end, int64_t now_real, int64_t now_mono)
{
    st.completed++;
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    /* The newest op seen completed: a collective's seq, or a peer's p2p_seq.
     * Only this thread writes them. */
    ng_atomic(uint64_t) *done = NULL;
    uint64_t seq = r->seq;
    if (c && r->seq) {
        done = &c->completed_seq;
    } else if (c && r->peer >= 0 && r->peer < c->npeers) {
        done = &ng_atomic_load_acquire(&c->peers)[r->peer].done;
        seq = r->p2p_seq;
    }
    if (done && seq > ng_atomic_load_relaxed(done))
        ng_atomic_store_relaxed(done, seq);
    int64_t dur = gpu_start && gpu_end ? gpu_end - gpu_start : now_real - r->enqueue_ns;
    const struct ng_settings *s = ncclguard_settings();
    int64_t median = ncclguard_stats_observe(r->comm_id, (int)r->op, r->bytes, dur);
    int slow = (s->slow_ms > 0 && dur > s->slow_ms * 1000000LL) ||
               (s->slow_factor > 0 && median > 0 && dur >= SLOW_FACTOR_FLOOR_NS &&
                (double)dur > s->slow_factor * median);
    if (slow) {
        NG_FLIGHT_SET(index, flags, r->flags | NG_REC_SLOW);
        report_slow(r, dur, median, now_mono);
    }
}

/* Streams found busy in this scan: a stream runs its work in order, so once
 * one of its ops is not finished, the later ones have not started; their
 * markers need no query (this keeps a poll cheap with many ops queued). */
#define BUSY_STREAMS 64
static uint64_t busy[BUSY_STREAMS];
static int nbusy;

static int stream_busy(uint64_t stream)
{
    for (int i = 0; i < nbusy; i++)
        if (busy[i] == stream) return 1;
    return 0;
}

/* Where the GPU is with record `index`; moves its state on and returns it. */
static int progress(uint64_t index, const struct ng_op_record *r, int state, int has_start,
                    int64_t now_real, int64_t now_mono)
{
    int marker = (int)r->marker, shared = 0;
    if (marker == NG_NO_MARKER && r->group_id) {
        marker = ncclguard_group_find(r->group_id, r->stream);
        shared = 1;
    }
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    int cs = c ? ng_atomic_load_acquire(&c->state) : NG_COMM_READY;
    int end = marker == NG_GROUP_FAILED                       ? NG_OP_FAILED
              : cs == NG_COMM_ABORTED || cs == NG_COMM_REVOKED ? NG_OP_ABORTED
                                                               : -1;
    if (end >= 0) {
        if (ncclguard_flight_advance(index, state, end) != 0) return state;
        /* A deferred marker is still held by track/deferred.c, which returns it. */
        if (marker >= 0 && !(r->flags & NG_REC_DEFERRED)) {
            if (shared) ncclguard_group_put(r->group_id, r->stream);
            else ncclguard_marker_release(marker);
        }
        return end;
    }
    if (marker < 0 || (r->flags & NG_REC_DEFERRED) || stream_busy(r->stream)) return state;
    int64_t gs = 0, ge = 0;
    enum ng_marker_state m = ncclguard_marker_poll(marker, has_start, &gs, &ge);
    if (m != NG_MARKER_DONE && nbusy < BUSY_STREAMS) busy[nbusy++] = r->stream;
    int to = m == NG_MARKER_DONE ? NG_OP_COMPLETED
             : m == NG_MARKER_STARTED ? NG_OP_STARTED
             : m == NG_MARKER_ERROR ? NG_OP_FAILED : state;
    if (to == state || (to == NG_OP_STARTED && state != NG_OP_SCHEDULED)) return state;
    if (to != NG_OP_FAILED) {
        if (!r->seen_start_ns && has_start) NG_FLIGHT_SET(index, seen_start_ns, now_real);
        if (gs && !r->gpu_start_ns) NG_FLIGHT_SET(index, gpu_start_ns, gs);
    }
    if (to == NG_OP_COMPLETED) {
        NG_FLIGHT_SET(index, seen_end_ns, now_real);
        NG_FLIGHT_SET(index, gpu_end_ns, ge);
    }
    if (ncclguard_flight_advance(index, state, to) != 0) return state;
    if (ng_op_state_final(to)) {
        if (shared) ncclguard_group_put(r->group_id, r->stream);
        else ncclguard_marker_release(marker);
    }
    if (to == NG_OP_COMPLETED) completed(r, index, gs, ge, now_real, now_mono);
    return to;
}

/* Escalations decided in one poll (see escalate), per communicator slot. */
static struct ng_comm *pending_abort[NG_MAX_COMMS];
static char pending_why[NG_MAX_COMMS][128];
static char kill_why[160];

/* Timeouts found in one poll, per communicator: the oldest op gets the log
 * line, the ops queued behind it are counted in it. */
struct timed_out {
    int slot;
    int more;
    int state;
    double age;
    struct ng_op_record rec;
};
static struct timed_out new_timeouts[64];
static int nnew_timeouts;

static void note_timeout(const struct ng_op_record *r, int state, double age)
{
    for (int i = 0; i < nnew_timeouts; i++)
        if (new_timeouts[i].slot == (int)r->comm_slot) {
            new_timeouts[i].more++;
            return;
        }
    if (nnew_timeouts == (int)(sizeof new_timeouts / sizeof new_timeouts[0])) return;
    new_timeouts[nnew_timeouts++] = (struct timed_out){(int)r->comm_slot, 0, state, age, *r};
}

static void report_timeouts(void)
{
    for (int i = 0; i < nnew_timeouts; i++) {
        const struct timed_out *t = &new_timeouts[i];
        const struct ng_op_record *r = &t->rec;
        char idb[8], what[96], more[64] = "";
        const char *where = t->state == NG_OP_STARTED ? "started on GPU, not finished"
                            : r->marker == NG_NO_MARKER && !r->group_id
                                ? "GPU progress unknown (no marker)"
                                : "not started on GPU";
        if (t->more) snprintf(more, sizeof more, " (%d more ops queued behind it)", t->more);
        NG_WARN("%s on comm %s…(%lld ranks) in flight %.1f s: %s%s",
                describe(r, what, sizeof what),
                short_id(r->comm_id, idb), comm_size(r), t->age, where, more);
    }
    nnew_timeouts = 0;
}

static void check_timeout(uint64_t index, const struct ng_op_record *r, int state,
                          int64_t now_mono)
{
    if (state == NG_OP_CAPTURED) return;
    const struct ng_settings *s = ncclguard_settings();
    int first = (r->flags & NG_REC_FIRST) != 0;
    double limit = ncclguard_timeout_s(s, first ? NG_TIMEOUT_FIRST_OP : NG_TIMEOUT_OP,
                                       (int)r->op, r->bytes);
    double warn_at = ncclguard_action_after_s(s, NG_ACTION_WARN, limit);
    double dump_at = ncclguard_action_after_s(s, NG_ACTION_DUMP, limit);
    double age = (double)(now_mono - r->enqueue_mono_ns) / 1e9;
    uint64_t flags = r->flags;
    if (warn_at > 0 && age >= warn_at && !(flags & NG_REC_TIMEOUT)) {
        flags |= NG_REC_TIMEOUT;
        NG_FLIGHT_SET(index, flags, flags);
        st.timeouts++;
        note_timeout(r, state, age);
        ncclguard_event("timeout",
                        "\"comm\":\"%016llx\",\"op\":\"%s\",\"seq\":%llu,\"p2p_seq\":%llu,"
                        "\"state\":\"%s\",\"in_flight_s\":%.1f",
                        (unsigned long long)r->comm_id, ng_op_name((int)r->op),
                        (unsigned long long)r->seq, (unsigned long long)r->p2p_seq,
                        ng_op_state_name(state), age);
    }
    if (dump_at > 0 && age >= dump_at && !(flags & NG_REC_DUMPED)) {
        NG_FLIGHT_SET(index, flags, flags | NG_REC_DUMPED);
        ng_atomic_store_relaxed(&dump_requested, DUMP_TIMEOUT);
    }
    double abort_at = ncclguard_action_after_s(s, NG_ACTION_ABORT, limit);
    double kill_at = ncclguard_action_after_s(s, NG_ACTION_KILL, limit);
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    char what[96];
    if (abort_at > 0 && age >= abort_at && c && !ng_atomic_load_acquire(&c->fenced) &&
        !pending_abort[r->comm_slot % NG_MAX_COMMS]) {
        pending_abort[r->comm_slot % NG_MAX_COMMS] = c;
        snprintf(pending_why[r->comm_slot % NG_MAX_COMMS], sizeof pending_why[0],
                 "%s was in flight %.1f s, past abort_at", describe(r, what, sizeof what), age);
        if (!(flags & NG_REC_DUMPED)) /* evidence first */
            ng_atomic_store_relaxed(&dump_requested, DUMP_TIMEOUT);
    }
    if (kill_at > 0 && age >= kill_at && !kill_why[0]) {
        snprintf(kill_why, sizeof kill_why, "%s in flight %.1f s, past kill_at",
                 describe(r, what, sizeof what), age);
    }
}

/* The abort and kill steps decided during a scan, carried out after its dump. */
static void escalate(int64_t now_mono)
{
    for (int i = 0; i < NG_MAX_COMMS; i++) {
        if (!pending_abort[i]) continue;
        ncclguard_escalation_abort(pending_abort[i], pending_why[i]);
        pending_abort[i] = NULL;
    }
    ncclguard_escalation_check(now_mono);
    if (kill_why[0]) ncclguard_escalation_kill(kill_why);
}

static void scan_ops(int64_t now_real, int64_t now_mono)
{
    uint64_t head = ncclguard_flight_head();
    struct ng_flight_stats fs;
    ncclguard_flight_stats(&fs);
    if (head - tail > fs.capacity) tail = head - fs.capacity;
    enum ng_track_mode track = ncclguard_track_mode;
    if (track == NG_TRACK_OFF) { /* GPU progress is not followed */
        tail = head;
        return;
    }
    nbusy = 0;
    int at_tail = 1;
    for (uint64_t i = tail; i < head; i++) {
        struct ng_op_record r;
        int state = ncclguard_flight_state(i);
        if (ncclguard_flight_copy(i, &r) != 0) {
            if (state >= 0) at_tail = 0; /* still being written */
            else if (at_tail) tail = i + 1;
            continue;
        }
        state = ng_record_state(&r);
        if (!ng_op_state_final(state))
            state = progress(i, &r, state, track == NG_TRACK_FULL, now_real, now_mono);
        if (ng_op_state_final(state)) {
            if (at_tail) tail = i + 1;
            continue;
        }
        at_tail = 0;
        check_timeout(i, &r, state, now_mono);
    }
}

static void check_comms(int64_t now_real)
{
    const struct ng_settings *s = ncclguard_settings();
    double init_limit = ncclguard_timeout_s(s, NG_TIMEOUT_INIT, -1, 0);
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    for (int i = 0; i < ncclguard_comm_count(); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        int state = ng_atomic_load_acquire(&c->state);
        if (state == NG_COMM_INITIALIZING && init_limit > 0 && !init_reported[i] && (double)(now_real - c->created_ns) / 1e9 >= init_limit) {
            init_reported[i] = 1;
            st.init_timeouts++;
            char idb[8];
            NG_WARN("communicator %s… (rank %d of %d) still being created after %.1f s",
                    short_id(c->id, idb), ng_comm_rank(c), ng_comm_nranks(c),
                    (double)(now_real - c->created_ns) / 1e9);
            ncclguard_event("init_timeout", "\"comm\":\"%016llx\"", (unsigned long long)c->id);
            ng_atomic_store_relaxed(&dump_requested, DUMP_INIT_TIMEOUT);
        }
        if (state != NG_COMM_READY && state != NG_COMM_INITIALIZING) continue;
        ncclResult_t err = ncclSuccess;
        int rank = -1, nranks = -1, dev = -1;
        pthread_mutex_lock(&c->poll_lock);
        ncclComm_t h = ncclguard_comm_handle(c);
        int usable = !c->ending && h && nccl->comm_get_async_error;
        ncclResult_t r = usable ? nccl->comm_get_async_error(h, &err) : ncclInvalidUsage;
        if (usable && r == ncclSuccess && err == ncclSuccess &&
            ng_atomic_load_relaxed(&c->device) < 0 &&
            nccl->comm_count && nccl->comm_user_rank && nccl->comm_cu_device) {
            nccl->comm_count(h, &nranks);
            nccl->comm_user_rank(h, &rank);
            nccl->comm_cu_device(h, &dev);
        }
        pthread_mutex_unlock(&c->poll_lock);
        if (r != ncclSuccess) continue;
        if (nranks > 0) { /* read by application threads: atomic stores */
            ng_atomic_store_relaxed(&c->nranks, nranks);
            ng_atomic_store_relaxed(&c->rank, rank);
            ng_atomic_store_relaxed(&c->device, dev);
        }
        if (err == ncclSuccess && state == NG_COMM_INITIALIZING)
            ncclguard_comm_set_state(c, NG_COMM_READY);
        ncclguard_watchdog_async_error(c, err);
    }
}

void ncclguard_watchdog_async_error(struct ng_comm *c, int err)
{
    int last = ng_atomic_exchange_relaxed(&c->last_async_error, err);
    if (err == ncclSuccess || err == ncclInProgress || err == last) return;
    ng_atomic_add_relaxed(&async_errors, 1);
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    char idb[8];
    NG_WARN("async error on comm %s… (rank %d of %d): %s", short_id(c->id, idb),
            ng_comm_rank(c), ng_comm_nranks(c), nccl->get_error_string ? nccl->get_error_string((ncclResult_t)err) : "?");
    ncclguard_event("async_error", "\"comm\":\"%016llx\",\"error\":%d",
                    (unsigned long long)c->id, err);
}

/* One poll. `full` is 0 when an application thread settles the GPU progress
 * (before it ends a communicator): then only CUDA markers are queried, and the
 * NCCL calls, dumps and escalations stay on the watchdog thread. */
static void poll(int full)
{
    pthread_mutex_lock(&poll_lock);
    int64_t now_real = ng_clock_ns(CLOCK_REALTIME), now_mono = ng_clock_ns(CLOCK_MONOTONIC);
    scan_ops(now_real, now_mono);
    report_timeouts();
    if (full) {
        ncclguard_track_refresh_clock();
        ncclguard_markers_maintain();
        check_comms(now_real);
        st.polls++;
        int why = ng_atomic_exchange_relaxed(&dump_requested, 0);
        /* ---- issue 10: the cross-rank trigger (evidence/trigger.h): a timeout
         * raises or joins an incident, one dump per rank and incident ---- */
        if (why == DUMP_TIMEOUT && !ncclguard_trigger_raise()) why = DUMP_NONE;
        if (why == DUMP_NONE && ncclguard_trigger_check()) why = DUMP_TRIGGER;
        ncclguard_sigterm_rearm(); /* evidence/sigterm.h */
        /* ---- */
        if (why != DUMP_NONE) write_dump(dump_reason_name[why]);
        escalate(now_mono);
    }
    pthread_mutex_unlock(&poll_lock);
}

void ncclguard_watchdog_poll_once(void)
{
    poll(1);
}

void ncclguard_watchdog_settle(void)
{
    poll(0);
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    /* Named before anything else: the fake NCCL's call log tells the shim's own
     * calls from the application's by this name. */
    pthread_setname_np(pthread_self(), "ncclguard-wd");
    ncclguard_markers_watchdog_setup();
    /* NCCL calls of the shim's own are made on this thread only, so that the
     * application's threads see exactly their own calls. */
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    int version = 0;
    if (nccl->get_version && nccl->get_version(&version) == ncclSuccess)
        ncclguard_identity_set_nccl_version(version);
    ncclguard_envaudit_at_first_comm(); /* once per process; local rank 0 by default */
    long ms = ncclguard_settings()->poll_ms;
    struct timespec period = {ms / 1000, (ms % 1000) * 1000000};
    while (ng_atomic_load_acquire(&running)) {
        nanosleep(&period, NULL);
        poll(1);
    }
    return NULL;
}

static void on_dump_signal(int signo)
{
    (void)signo;
    ncclguard_watchdog_request_dump();
}

/* NCCLGUARD_DUMP_SIGNAL asks for a dump, unless the application handles that
 * signal itself: its handler is never replaced. */
static void install_dump_signal(int signo)
{
    struct sigaction old;
    if (signo <= 0 || sigaction(signo, NULL, &old) != 0) return;
    if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
        NG_INFO("signal %d already has a handler: dumps on request by signal are off", signo);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(signo, &sa, NULL);
}

void ncclguard_watchdog_start(void)
{
    if (ng_atomic_exchange_acq_rel(&running, 1)) return;
    install_dump_signal(ncclguard_settings()->dump_signal);
    /* The thread takes no signals meant for the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, watchdog_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        ng_atomic_store_release(&running, 0);
        NG_WARN("cannot start the watchdog thread (%s): ops are recorded but not followed",
                strerror(rc));
        return;
    }
}

void ncclguard_watchdog_request_dump(void)
{
    ng_atomic_store_relaxed(&dump_requested, DUMP_SIGNAL);
}

void ncclguard_watchdog_at_exit(void)
{
    poll(0);
    pthread_mutex_lock(&poll_lock);
    if (ncclguard_settings()->dump_at_exit) write_dump("exit");
    pthread_mutex_unlock(&poll_lock);
}

void ncclguard_watchdog_atfork_child(void)
{
    pthread_mutex_init(&poll_lock, NULL);
    ng_atomic_store_relaxed(&running, 0);
    ng_atomic_store_relaxed(&dump_requested, DUMP_NONE);
    ng_atomic_store_relaxed(&async_errors, 0);
    tail = 0;
    memset(&st, 0, sizeof st);
    memset(init_reported, 0, sizeof init_reported);
    ncclguard_stats_reset();
}

void ncclguard_watchdog_stats(struct ng_watchdog_stats *out)
{
    pthread_mutex_lock(&poll_lock);
    *out = st;
    pthread_mutex_unlock(&poll_lock);
    out->async_errors = ng_atomic_load_relaxed(&async_errors);
}
