/*
 * watchdog.c: see watchdog.h. The enforcer.
 *
 * At each pass the enforcer takes the records appended since its last pass
 * into its agenda (due.h: each op that can time out, keyed by when
 * its next step of the ladder falls due: warn, dump, abort, kill), checks the
 * ops whose step is due against their timeout, looks at communicators
 * still being created, hands the dumps asked for to the dump thread
 * (dumper.h), and carries out the aborts and the kill decided once that dump
 * is durable: the dump shows the state that mattered, before the abort changes
 * it. Meanwhile it goes on polling: a dump that takes long on a slow file
 * system holds up only the dump thread, and the ladder's steps (at most
 * NG_DUMPER_WAIT_S). It reads what the observer and the application threads
 * wrote and never calls CUDA or NCCL, so a CUDA or NCCL call that hangs (on the
 * observer) cannot stop it: it then goes on from the last state the observer
 * saw, and says once that the observer is stuck.
 *
 * It passes only when something can be due (next_pass): the agenda's next
 * step, the soonest step of an op that is appended meanwhile (nobody needs to
 * wake it for a new op: the hot path makes no system call), a creation's
 * init_timeout, the observer's heartbeat (every OBSERVER_STUCK_NS at most),
 * once a second while ops flow; once a period while a step is under way. A pass that found nothing in
 * flight leaves the enforcer at rest: the observer's next pass that finds new
 * records wakes it (ops_arrived, the observer's arrival hook), so that the SIGTERM
 * handler is wrapped again as soon as ops are in flight.
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
#include "base/log.h"
#include "base/thread.h"
#include "evidence/sigterm.h"
#include "policy/config.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/markers.h"
#include "watch/describe.h"
#include "watch/due.h"
#include "watch/dumper.h"
#include "watch/escalation.h"
#include "watch/metrics.h"
#include "watch/observer.h"
#include "policy/timeouts.h"

/* The observer counts as stuck after this long inside one pass (a pass takes
 * microseconds to milliseconds). */
#define OBSERVER_STUCK_NS (5LL * 1000000000)

/* While ops flow (its last pass took records), the enforcer passes at least
 * this often, so that each pass takes a second's records, not a heartbeat's. */
#define FLOW_PASS_NS (1000LL * 1000000)

static pthread_t thread;
static ng_atomic(int) running;
/* The enforcer sleeps on this between passes; the observer cuts it short when
 * ops arrive while it rests (ops_arrived). */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER; /* CLOCK_MONOTONIC once started */
static int kicked;                                           /* under sleep_lock */
static ng_atomic(int) resting; /* the last pass found nothing in flight */
static ng_atomic(uint64_t) nkicks;
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
/* under pass_lock: */
static struct ng_flight_reader reader; /* the records it took are in the agenda, or need none */
static uint64_t ntimeouts, ninit_timeouts, npasses, ntaken;
static int64_t last_pass_ns, next_pass_ns; /* CLOCK_MONOTONIC */
static unsigned char init_reported[NG_MAX_COMMS];
static int64_t stuck_since; /* the observer's pass said stuck (its start), 0: none */
static unsigned dump_due;   /* NG_DUMPER_* bits asked for during the pass */
/* The ladder's steps wait for this dump ticket (0: none), until the deadline. */
static uint64_t gate_ticket;
static int64_t gate_deadline;
static int said_gate;

/* What one pass decided: the timeouts to report (per communicator, the oldest op
 * gets the log line, the ops queued behind it are counted in it), the aborts and
 * the kill to carry out after the pass's dump. */
struct timed_out {
    int slot;
    uint64_t index;
    int more;
    int state;
    double age;
    struct ng_op_record rec;
};
struct pass {
    int64_t now_mono;
    struct timed_out timeouts[64];
    int ntimeouts;
    int decided; /* an abort or the kill was decided: it waits for the dump */
};
/* under pass_lock: the steps decided, carried out once their dump is durable */
static struct ng_comm *pending_abort[NG_MAX_COMMS];
static char pending_why[NG_MAX_COMMS][128];
static char pending_kill[160];

static void note_timeout(struct pass *p, uint64_t index, const struct ng_op_record *r, int state,
                         double age)
{
    struct timed_out t = {(int)r->comm_slot, index, 0, state, age, *r};
    for (int i = 0; i < p->ntimeouts; i++)
        if (p->timeouts[i].slot == (int)r->comm_slot) {
            t.more = p->timeouts[i].more + 1;
            if (index < p->timeouts[i].index)
                p->timeouts[i] = t; /* the oldest gets the line */
            else
                p->timeouts[i].more++;
            return;
        }
    if (p->ntimeouts == (int)(sizeof p->timeouts / sizeof p->timeouts[0])) return;
    p->timeouts[p->ntimeouts++] = t;
}

static void report_timeouts(const struct pass *p)
{
    for (int i = 0; i < p->ntimeouts; i++) {
        const struct timed_out *t = &p->timeouts[i];
        const struct ng_op_record *r = &t->rec;
        char idb[8], what[96], more[64] = "", at[256];
        const char *where = t->state == NG_OP_STARTED ? "started on GPU, not finished"
                                                      : "not started on GPU";
        if (t->more) snprintf(more, sizeof more, " (%d more ops queued behind it)", t->more);
        NG_WARN("%s on comm %s…(%lld ranks) in flight %.1f s: %s%s%s",
                ncclguard_describe_op(r, what, sizeof what), ncclguard_short_id(r->comm_id, idb),
                (long long)r->comm_nranks, t->age, where, more,
                ncclguard_describe_where(r, at, sizeof at));
    }
}

static void enforce_flags(uint64_t index, uint64_t flags)
{
    ncclguard_flight_watch(index, NG_WATCHER_ENFORCER, NG_WATCH_FLAGS, flags);
}

/* The op's timeout: the first op of a communicator (or with a peer) connects, so
 * it gets the first-op one. */
static double op_limit(const struct ng_settings *s, const struct ng_op_record *r)
{
    int first = (r->flags & NG_REC_FIRST) != 0;
    return ncclguard_timeout_s(s, first ? NG_TIMEOUT_FIRST_OP : NG_TIMEOUT_OP, (int)r->op,
                               r->bytes);
}

/* Only an op whose progress the GPU tells can time out: one with a marker of
 * its own, or of its group (on its stream, or on the stream of its group it
 * follows, track/groups.h), published or still to come at its group's end. An
 * op without (untracked: the driver refused an event, the pool was empty, the
 * legacy stream during a capture, a group's stream that got no marker at
 * ncclGroupEnd) would otherwise look stuck forever: the observer learns that
 * it finished from a later op of its stream, and the ops around it are
 * followed. A group op whose stream got no marker is scheduled until the
 * observer sees that: it is not held to a timeout meanwhile either. */
static int may_time_out(const struct ng_op_record *r, int state)
{
    return state != NG_OP_CAPTURED && state != NG_OP_UNTRACKED &&
           (r->marker != NG_NO_MARKER || r->group_id);
}

/* may_time_out, and a group op's stream (or the place it follows) did not end
 * up without a marker: asked when a step is due only, since the group table is
 * searched (an op taken before its group's end would search all of it). */
static int can_time_out(const struct ng_op_record *r, int state)
{
    if (!may_time_out(r, state)) return 0;
    return r->marker != NG_NO_MARKER || ncclguard_group_find(r) != NG_GROUP_UNTRACKED;
}

static void check_timeout(uint64_t index, const struct ng_op_record *r, int state, struct pass *p)
{
    const struct ng_settings *s = ncclguard_settings();
    double limit = op_limit(s, r);
    double warn_at = ncclguard_action_after_s(s, NG_ACTION_WARN, limit);
    double dump_at = ncclguard_action_after_s(s, NG_ACTION_DUMP, limit);
    double age = (double)(p->now_mono - r->enqueue_mono_ns) / 1e9;
    uint64_t flags = r->flags & (NG_REC_TIMEOUT | NG_REC_DUMPED);
    if (warn_at > 0 && age >= warn_at && !(flags & NG_REC_TIMEOUT)) {
        flags |= NG_REC_TIMEOUT;
        enforce_flags(index, flags);
        ntimeouts++;
        note_timeout(p, index, r, state, age);
        ncclguard_event("timeout",
                        "\"comm\":\"%016llx\",\"op\":\"%s\",\"seq\":%llu,\"p2p_seq\":%llu,"
                        "\"state\":\"%s\",\"in_flight_s\":%.1f",
                        (unsigned long long)r->comm_id, ng_op_name((int)r->op),
                        (unsigned long long)r->seq, (unsigned long long)r->p2p_seq,
                        ng_op_state_name(state), age);
    }
    if (dump_at > 0 && age >= dump_at && !(flags & NG_REC_DUMPED)) {
        flags |= NG_REC_DUMPED;
        enforce_flags(index, flags);
        dump_due |= NG_DUMPER_TIMEOUT;
    }
    double abort_at = ncclguard_action_after_s(s, NG_ACTION_ABORT, limit);
    double kill_at = ncclguard_action_after_s(s, NG_ACTION_KILL, limit);
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    int slot = (int)(r->comm_slot % NG_MAX_COMMS);
    char what[96];
    if (abort_at > 0 && age >= abort_at && c && !ng_atomic_load_acquire(&c->fenced) &&
        !pending_abort[slot]) {
        pending_abort[slot] = c;
        p->decided = 1;
        snprintf(pending_why[slot], sizeof pending_why[0], "%s was in flight %.1f s, past abort_at",
                 ncclguard_describe_op(r, what, sizeof what), age);
        if (!(flags & NG_REC_DUMPED)) /* evidence first */
            dump_due |= NG_DUMPER_TIMEOUT;
    }
    if (kill_at > 0 && age >= kill_at && !pending_kill[0]) {
        p->decided = 1;
        snprintf(pending_kill, sizeof pending_kill, "%s in flight %.1f s, past kill_at",
                 ncclguard_describe_op(r, what, sizeof what), age);
    }
}

/* When the first step of r's ladder after the check at `now` falls due
 * (CLOCK_MONOTONIC; INT64_MIN: no check yet, so a step already past is due at
 * once), -1 when none. A step is due 2 ns after its time (truncated to the ns), so that
 * the check at that time, in seconds as a double, finds the op past it. */
static int64_t next_due(const struct ng_op_record *r, int64_t now)
{
    const struct ng_settings *s = ncclguard_settings();
    double limit = op_limit(s, r);
    int64_t best = -1;
    for (int a = NG_ACTION_WARN; a <= NG_ACTION_KILL; a++) {
        double after = ncclguard_action_after_s(s, (enum ng_action)a, limit);
        if (after <= 0) continue;
        int64_t at = r->enqueue_mono_ns + (int64_t)(after * 1e9) + 2;
        if (at > now && (best < 0 || at < best)) best = at;
    }
    return best;
}

/* Allocates the agenda (once), with room for twice the ring's records: an
 * entry per record at most, and as many finished ones again before a prune. */
static void agenda_init(void)
{
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    static int said;
    if (ncclguard_due_init(2 * st.capacity) != 0 && !said) {
        said = 1;
        NG_WARN("no memory for the watchdog's agenda of %llu entries: no op can time out",
                (unsigned long long)(2 * st.capacity));
    }
}

static int still_in_flight(uint64_t index)
{
    int state = ncclguard_flight_state(index);
    return state >= 0 && !ng_op_state_final(state);
}

static void schedule(uint64_t index, const struct ng_op_record *r, int64_t now)
{
    int64_t at = next_due(r, now);
    if (at < 0) return;
    if (ncclguard_due_push(at, index) != 0) { /* full of finished ops: drop them */
        ncclguard_due_prune(still_in_flight);
        ncclguard_due_push(at, index);
    }
}

/* A record appended since the last pass, into the agenda. */
static void take(uint64_t index, const struct ng_op_record *r, void *ctx)
{
    (void)ctx;
    ntaken++;
    int state = ng_record_state(r);
    if (!ng_op_state_final(state) && may_time_out(r, state)) schedule(index, r, INT64_MIN);
}

/* The ops whose next step is due: checked, and put back for the step after. */
static void run_due(struct pass *p)
{
    struct ng_due d;
    while (ncclguard_due_peek(&d) && d.at_ns <= p->now_mono) {
        ncclguard_due_pop();
        struct ng_op_record r;
        if (ncclguard_flight_copy(d.index, &r) != 0) continue; /* overwritten */
        int state = ng_record_state(&r);
        if (ng_op_state_final(state) || !can_time_out(&r, state)) continue;
        check_timeout(d.index, &r, state, p);
        schedule(d.index, &r, p->now_mono);
    }
}

/* The abort and kill steps decided, carried out once the dump asked for with
 * them is durable (or NG_DUMPER_WAIT_S later: a hung file system must not
 * stop the ladder). Returns 1 while a step waits for its dump or an abort is
 * under way. */
static int escalate(const struct pass *p)
{
    if (p->decided && ncclguard_dumper_last_ticket() != gate_ticket) {
        gate_ticket = ncclguard_dumper_last_ticket();
        gate_deadline = p->now_mono + NG_DUMPER_WAIT_S * 1000000000LL;
    }
    if (gate_ticket && !ncclguard_dumper_done(gate_ticket)) {
        if (p->now_mono < gate_deadline) {
            ncclguard_escalation_check(p->now_mono);
            return 1;
        }
        if (!said_gate)
            NG_WARN("the dump asked for before an abort or kill has not finished after %d s: "
                    "the escalation goes on without it",
                    NG_DUMPER_WAIT_S);
        said_gate = 1;
    } else {
        said_gate = 0;
    }
    for (int i = 0; i < NG_MAX_COMMS; i++) {
        if (!pending_abort[i]) continue;
        ncclguard_escalation_abort(pending_abort[i], pending_why[i]);
        pending_abort[i] = NULL;
    }
    /* aborts begun just now too */
    int under_way = ncclguard_escalation_check(ng_clock_ns(CLOCK_MONOTONIC));
    if (pending_kill[0]) ncclguard_escalation_kill(pending_kill);
    return under_way > 0;
}

/* Communicators still being created past init_timeout. Returns in how many
 * ns the next one can be (INT64_MAX: never): one being created, or one
 * created from now on. */
static int64_t check_creations(int64_t now_real)
{
    double limit = ncclguard_timeout_s(ncclguard_settings(), NG_TIMEOUT_INIT, -1, 0);
    if (limit <= 0) return INT64_MAX;
    int64_t soonest = (int64_t)(limit * 1e9);
    for (int i = 0; i < ncclguard_comm_count(); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        double age = (double)(now_real - c->created_ns) / 1e9;
        if (ng_comm_state(c) != NG_COMM_INITIALIZING || init_reported[i]) continue;
        if (age < limit) {
            int64_t left = (int64_t)((limit - age) * 1e9) + 1;
            if (left < soonest) soonest = left;
            continue;
        }
        init_reported[i] = 1;
        ninit_timeouts++;
        char idb[8];
        NG_WARN("communicator %s… (rank %d of %d) still being created after %.1f s",
                ncclguard_short_id(c->id, idb), ng_comm_rank(c), ng_comm_nranks(c), age);
        ncclguard_event("init_timeout", "\"comm\":\"%016llx\"", (unsigned long long)c->id);
        dump_due |= NG_DUMPER_INIT_TIMEOUT;
    }
    return soonest;
}

/* The observer's heartbeat: said once per stuck episode (a pass of the
 * observer, told by when it began). Returns in how many ns the current pass,
 * or one that begins from now on, can be stuck. */
static int64_t check_observer(int64_t now_mono)
{
    int64_t busy = ncclguard_observer_busy_ns(now_mono);
    if (busy < OBSERVER_STUCK_NS) return OBSERVER_STUCK_NS - busy;
    if (stuck_since == now_mono - busy) return INT64_MAX;
    stuck_since = now_mono - busy;
    NG_WARN("the watchdog's observer has been inside a CUDA or NCCL call for %.1f s: op states "
            "may be stale; timeouts, dumps and the escalation ladder go on from the last state "
            "seen",
            (double)busy / 1e9);
    ncclguard_event("observer_stuck", "\"for_s\":%.1f", (double)busy / 1e9);
    return INT64_MAX;
}

/* The soonest a step of the ladder can fall due after an op's enqueue, in
 * seconds (0: never): over every op type, first op or not, at size 0 (the
 * floor bandwidth only adds). */
static double soonest_step_s(const struct ng_settings *s)
{
    double best = 0;
    for (int op = 0; op < NG_OP_NTYPES; op++)
        for (int first = 0; first <= 1; first++) {
            double limit = ncclguard_timeout_s(s, first ? NG_TIMEOUT_FIRST_OP : NG_TIMEOUT_OP, op,
                                               0);
            for (int a = NG_ACTION_WARN; a <= NG_ACTION_KILL; a++) {
                double after = ncclguard_action_after_s(s, (enum ng_action)a, limit);
                if (after > 0 && (best == 0 || after < best)) best = after;
            }
        }
    return best;
}

/* When the pass after p is due (CLOCK_MONOTONIC), given in how many ns a
 * creation or the observer can be late (`soon`: the observer's heartbeat
 * bounds it) and whether a step is under way. The soonest of: the agenda's
 * next step (at most a period after it); the soonest step of an op appended
 * from now on (its enqueue comes after this pass's start, so it falls due no
 * sooner; one appended late, enqueued before, is found at most the delay of
 * its append late); `soon`; FLOW_PASS_NS while ops flow (this pass took
 * some). One period while a step is under way, and one
 * period at least: the agenda keeps an op that finished until its step comes
 * up (due.h), so a job whose ops come and go passes at most once a period, as
 * it always did. */
static int64_t next_pass(const struct pass *p, int64_t soon, int under_way, int took)
{
    const struct ng_settings *s = ncclguard_settings();
    int64_t period = (int64_t)s->poll_ms * 1000000, now = p->now_mono;
    int64_t wait = under_way ? period : took ? FLOW_PASS_NS : INT64_MAX;
    double step = soonest_step_s(s);
    if (step > 0 && step * 1e9 < (double)wait) wait = (int64_t)(step * 1e9);
    if (soon < wait) wait = soon;
    if (wait < period) wait = period;
    int64_t at = now + wait;
    struct ng_due d;
    if (ncclguard_due_peek(&d) && d.at_ns < at) {
        /* On the periods' grid, as passes always were: ops that fall due within
         * a period of one another (a burst enqueued together) are found in one
         * pass and told in one line, not one pass each. */
        int64_t k = (d.at_ns - now + period - 1) / period;
        at = now + (k > 1 ? k : 1) * period;
    }
    return at;
}

/* One pass; returns when the next is due (CLOCK_MONOTONIC). */
static int64_t enforcer_pass(void)
{
    pthread_mutex_lock(&pass_lock);
    static struct pass p; /* under pass_lock: too large for a thread's stack to matter */
    memset(&p, 0, sizeof p);
    p.now_mono = ng_clock_ns(CLOCK_MONOTONIC);
    agenda_init();
    uint64_t taken_before = ntaken;
    ncclguard_flight_read(&reader, take, NULL);
    run_due(&p);
    report_timeouts(&p);
    int64_t soon = check_creations(ng_clock_ns(CLOCK_REALTIME));
    int64_t heartbeat = check_observer(p.now_mono);
    if (heartbeat < soon) soon = heartbeat;
    npasses++;
    /* The dump thread raises or joins the cross-rank incident of a timeout
     * (evidence/trigger.h) and writes the dump; it also checks for an
     * incident another rank raised. One dump per rank and incident. */
    if (dump_due) ncclguard_dumper_post(dump_due);
    dump_due = 0;
    int under_way = ncclguard_dumper_tick();
    ncclguard_sigterm_rearm(); /* an application handler installed since: wrap it */
    under_way |= escalate(&p);
    last_pass_ns = p.now_mono;
    next_pass_ns = next_pass(&p, soon, under_way, ntaken != taken_before);
    int64_t next = next_pass_ns;
    struct ng_due d;
    int rest = !under_way && ntaken == taken_before && !ncclguard_due_peek(&d);
    ng_atomic_store_seq_cst(&resting, rest);
    /* an op appended since the read: the observer may have looked before the
     * store above; the heartbeat bounds the sleep all the same */
    if (rest && ncclguard_flight_head() != reader.next) ng_atomic_store_seq_cst(&resting, 0);
    pthread_mutex_unlock(&pass_lock);
    return next;
}

static void ops_arrived(void);

void ncclguard_watchdog_poll_once(void)
{
    ncclguard_observer_on_arrival(ops_arrived);
    ncclguard_observer_pass(1);
    enforcer_pass();
}

void ncclguard_watchdog_enforcer_schedule(struct ng_enforcer_schedule *out)
{
    pthread_mutex_lock(&pass_lock);
    *out = (struct ng_enforcer_schedule){npasses, last_pass_ns, next_pass_ns,
                                         ng_atomic_load_seq_cst(&resting),
                                         ng_atomic_load_relaxed(&nkicks)};
    pthread_mutex_unlock(&pass_lock);
}

/* The observer's pass found records appended since its last one: wakes the
 * enforcer when it rests, else nothing (no system call). */
static void ops_arrived(void)
{
    if (!ng_atomic_load_relaxed(&resting) || !ng_atomic_exchange_seq_cst(&resting, 0)) return;
    ng_atomic_add_relaxed(&nkicks, 1);
    pthread_mutex_lock(&sleep_lock);
    kicked = 1;
    pthread_cond_signal(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
}

/* Sleeps until `next` (CLOCK_MONOTONIC), or until ops arrive while it rests. */
static void enforcer_sleep(int64_t next)
{
    struct timespec until = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
    pthread_mutex_lock(&sleep_lock);
    while (!kicked && pthread_cond_timedwait(&sleep_cond, &sleep_lock, &until) != ETIMEDOUT) {
    }
    kicked = 0;
    pthread_mutex_unlock(&sleep_lock);
}

void ncclguard_watchdog_settle(void)
{
    int saved = ncclguard_markers_relaxed_begin();
    ncclguard_observer_pass(0);
    ncclguard_markers_relaxed_end(saved);
}

void ncclguard_watchdog_wake(void)
{
    ncclguard_observer_wake();
}

void ncclguard_watchdog_async_error(struct ng_comm *c, int err)
{
    ncclguard_observer_async_error(c, err);
}

/* The counters of the metrics file (watch/metrics.h); not under pass_lock. */
static void metrics_watch(struct ng_metrics_watch *out)
{
    struct ng_watchdog_stats w;
    ncclguard_watchdog_stats(&w);
    *out = (struct ng_metrics_watch){w.slow, w.timeouts, w.init_timeouts, w.dumps, w.async_errors};
}

static void *enforcer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "ncclguard-enf");
    int64_t next = ng_clock_ns(CLOCK_MONOTONIC) + (int64_t)ncclguard_settings()->poll_ms * 1000000;
    while (ng_atomic_load_acquire(&running)) {
        enforcer_sleep(next);
        next = enforcer_pass();
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
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sleep_cond, &ca);
    pthread_condattr_destroy(&ca);
    install_dump_signal(ncclguard_settings()->dump_signal);
    ncclguard_metrics_init(metrics_watch);
    ncclguard_observer_on_arrival(ops_arrived);
    ncclguard_observer_start();
    ncclguard_dumper_start();
    int rc = ncclguard_thread_start(&thread, enforcer_main, NULL);
    if (rc) {
        ng_atomic_store_release(&running, 0);
        NG_WARN("cannot start the watchdog's enforcer thread (%s): no timeouts, no dumps on "
                "timeout",
                strerror(rc));
    }
}

void ncclguard_watchdog_request_dump(void)
{
    ncclguard_dumper_post_signal();
}

void ncclguard_watchdog_request_ras_dump(void)
{
    ncclguard_dumper_post(NG_DUMPER_RAS);
}

/* The one wait for a dump on an application thread: the exit dump that the
 * configuration asks for, which the process must not end before; bounded. */
void ncclguard_watchdog_at_exit(void)
{
    ncclguard_watchdog_settle();
    if (ncclguard_settings()->dump_at_exit) {
        uint64_t t = ncclguard_dumper_post(NG_DUMPER_EXIT);
        if (!ncclguard_dumper_wait(t,
                                   ng_clock_ns(CLOCK_MONOTONIC) + NG_DUMPER_WAIT_S * 1000000000LL))
            NG_WARN("the exit dump has not finished after %d s: the process ends without it",
                    NG_DUMPER_WAIT_S);
    }
    ncclguard_metrics_at_exit(); /* after the exit dump: the last file counts it */
}

void ncclguard_watchdog_atfork_child(void)
{
    ncclguard_observer_atfork_child();
    pthread_mutex_init(&pass_lock, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    kicked = 0;
    ng_atomic_store_relaxed(&resting, 0);
    ng_atomic_store_relaxed(&nkicks, 0);
    ntaken = 0;
    ncclguard_dumper_atfork_child();
    ncclguard_metrics_atfork_child();
    ng_atomic_store_relaxed(&running, 0);
    dump_due = 0;
    memset(&reader, 0, sizeof reader);
    ncclguard_due_clear();
    ntimeouts = ninit_timeouts = npasses = 0;
    last_pass_ns = next_pass_ns = 0;
    stuck_since = 0;
    gate_ticket = 0;
    said_gate = 0;
    pending_kill[0] = '\0';
    memset(init_reported, 0, sizeof init_reported);
    memset(pending_abort, 0, sizeof pending_abort);
}

void ncclguard_watchdog_stats(struct ng_watchdog_stats *out)
{
    struct ng_observer_stats o;
    ncclguard_observer_stats(&o);
    pthread_mutex_lock(&pass_lock);
    *out = (struct ng_watchdog_stats){.completed = o.completed,
                                      .slow = o.slow,
                                      .timeouts = ntimeouts,
                                      .init_timeouts = ninit_timeouts,
                                      .async_errors = o.async_errors,
                                      .dumps = ncclguard_dumper_count(),
                                      .polls = o.passes,
                                      .observer_sleep_ms = o.sleep_ms};
    pthread_mutex_unlock(&pass_lock);
}
