/*
 * start.c: see start.h.
 *
 * A preloaded library lands in every process of a job, most of which (the
 * launcher, data-loader workers, `python -c 1`) never touch NCCL. So the
 * constructor only reads a few environment variables and the site policy: no
 * thread, no file kept open, no allocation. Everything else waits for the
 * first communicator.
 */
#include "intercept/start.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/events.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/spool.h"
#include "evidence/dump.h"
#include "evidence/crash.h"
#include "evidence/dump_body.h"
#include "evidence/marker.h"
#include "evidence/python.h"
#include "evidence/ras.h"
#include "evidence/sigterm.h"
#include "evidence/symbolize.h"
#include "evidence/threads.h"
#include "evidence/trigger.h"
#include "evidence/verdict.h"
#include "intercept/envplugin.h"
#include "intercept/exports.h"
#include "intercept/loader.h"
#include "intercept/profiler.h"
#include "intercept/real.h"
#include "policy/config.h"
#include "policy/config_json.h"
#include "policy/policy.h"
#include "policy/testswitch.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/markers.h"
#include "track/ops.h"
#include "track/track.h"
#include "track/unwind.h"
#include "watch/escalation.h"
#include "watch/nccl_calls.h"
#include "watch/watchdog.h"

static ng_atomic(int) started; /* the first communicator was created */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static int another_copy_first(void);

void ncclguard_process_init(void)
{
    ncclguard_identity_init();
    ncclguard_log_init();             /* from the environment, for messages of the policy itself */
    if (another_copy_first()) return; /* tracking stays 0: every call passes through */
    ncclguard_policy_apply_at_start();
    ncclguard_loader_watch();
    const struct ng_settings *s = ncclguard_settings();
    if (!s->disable) {
        ncclguard_profiler_init(ncclguard_start);
        ncclguard_envplugin_take_env();
    }
    ncclguard_log_configure(s->log_level, s->log);
    ng_atomic_store_release(&ncclguard_tracking, !s->disable);
}

/* dl_iterate_phdr: whether a copy of this library (a file named libncclguard*)
 * is loaded before this one, whose base is *ctx. */
struct twin_search {
    uintptr_t self;
    int self_seen;
    char other[256];
};

static int twin_visit(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    struct twin_search *t = ctx;
    if (info->dlpi_addr == t->self) {
        t->self_seen = 1;
        return 1; /* what comes after us is the other copy's to find */
    }
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libncclguard", 12)) return 0;
    snprintf(t->other, sizeof t->other, "%s", name);
    return 1;
}

/*
 * Two copies of the library in one process (two in LD_PRELOAD, or one
 * preloaded and one loaded by the job) would both interpose: two summaries,
 * two exit dumps to one file, and the second's set-up turns the first's dump
 * signal off. The copy loaded first (the one whose NCCL symbols the job's calls
 * reach) stays; any later one says so in one line and passes every call
 * through, as with NCCLGUARD_DISABLE.
 */
static int another_copy_first(void)
{
    Dl_info me;
    struct twin_search t = {0};
    if (!dladdr((void *)another_copy_first, &me) || !me.dli_fbase) return 0;
    t.self = (uintptr_t)me.dli_fbase;
    dl_iterate_phdr(twin_visit, &t);
    if (t.self_seen || !t.other[0]) return 0;
    NG_WARN("another copy of the library is loaded first (%s; this one %s): this one stays "
            "off; preload one copy only",
            t.other, me.dli_fname ? me.dli_fname : "?");
    return 1;
}

__attribute__((constructor)) static void ncclguard_constructor(void)
{
    ncclguard_process_init();
}

static void atfork_prepare(void)
{
    ncclguard_comm_atfork_prepare();
}

static void atfork_parent(void)
{
    ncclguard_comm_atfork_parent();
}

/* The child of a fork starts clean: it neither tracks nor reports the parent's
 * communicators, and it may create its own. */
static void atfork_child(void)
{
    ncclguard_comm_atfork_child();
    ncclguard_track_atfork_child();
    ncclguard_watchdog_atfork_child();
    ncclguard_dump_atfork_child();
    ncclguard_spool_atfork_child();
    ncclguard_threads_atfork_child();
    ncclguard_trigger_atfork_child();
    ncclguard_crash_atfork_child();
    ncclguard_symbolize_atfork_child();
    pthread_mutex_init(&start_lock, NULL);
    ng_atomic_store_relaxed(&started, 0);
}

static void print_summary(void)
{
    int ncomms = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        ncomms += ng_comm_state(ncclguard_comm_at(i)) != NG_COMM_FAILED;
    if (ncomms == 0) return;
    char ops[512];
    size_t len = 0;
    uint64_t total = 0;
    ops[0] = '\0';
    for (int t = 0; t < NG_OP_NTYPES; t++) {
        uint64_t n = ncclguard_op_total(t);
        total += n;
        if (n && len < sizeof ops)
            len += (size_t)snprintf(ops + len, sizeof ops - len, "%s%s %llu", len ? ", " : "",
                                    ng_op_name(t), (unsigned long long)n);
    }
    struct ng_watchdog_stats w;
    struct ng_flight_stats f;
    ncclguard_watchdog_stats(&w);
    ncclguard_flight_stats(&f);
    struct ng_marker_stats g;
    uint64_t aborts, aborts_done;
    ncclguard_markers_stats(&g);
    ncclguard_escalation_stats(&aborts, &aborts_done);
    char rare[240] = ""; /* counts that are usually zero, shown when they are not */
    size_t r = 0;
    if (g.captured || g.no_marker || aborts)
        r += (size_t)snprintf(rare, sizeof rare,
                              ", %llu captured in graphs, %llu without GPU "
                              "marker, %llu aborted by ncclguard",
                              (unsigned long long)g.captured, (unsigned long long)g.no_marker,
                              (unsigned long long)aborts);
    if (f.dropped_inflight && r < sizeof rare) /* the watchdog fell a ring behind */
        r += (size_t)snprintf(rare + r, sizeof rare - r, ", %llu records dropped in flight",
                              (unsigned long long)f.dropped_inflight);
    uint64_t lost_lines = ncclguard_log_lost(), lost_events = ncclguard_events_lost();
    if ((lost_lines || lost_events) && r < sizeof rare)
        snprintf(rare + r, sizeof rare - r,
                 ", %llu log lines and %llu events lost (the file "
                 "could not take them)",
                 (unsigned long long)lost_lines, (unsigned long long)lost_events);
    NG_INFO("summary: %d communicators, %llu ops%s%s%s, %llu slow, %llu timeouts, "
            "%llu async errors, %llu dumps, %llu records overwritten%s",
            ncomms, (unsigned long long)total, len ? " (" : "", ops, len ? ")" : "",
            (unsigned long long)w.slow, (unsigned long long)(w.timeouts + w.init_timeouts),
            (unsigned long long)w.async_errors, (unsigned long long)w.dumps,
            (unsigned long long)f.overwritten, rare);
    for (int i = 0; i < ncclguard_comm_count() && ncclguard_log_enabled(NG_LOG_DEBUG); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        NG_DEBUG("comm %016llx rank %d/%d %s: %llu collectives", (unsigned long long)c->id,
                 ng_comm_rank(c), ng_comm_nranks(c), ncclguard_comm_state_name(ng_comm_state(c)),
                 (unsigned long long)ng_atomic_load_relaxed(&c->coll_seq));
    }
}

static void at_exit(void)
{
    /* A fork child that made no communicator of its own has nothing to say. */
    if (!ng_atomic_load_acquire(&started)) return;
    ncclguard_marker_remove();
    ncclguard_trigger_exit();
    ncclguard_watchdog_at_exit();
    print_summary();
    ncclguard_spool_finish(NG_SPOOL_EXIT_MS);
}

static void install_once(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
}

/* The NCCL functions the watchdog and the escalation ladder call themselves. */
static void hand_over_nccl(void)
{
    const struct ng_real *r = ncclguard_real();
    struct ng_nccl_calls calls = {
        .get_version = r->GetVersion,
        .comm_get_async_error = r->CommGetAsyncError,
        .comm_count = r->CommCount,
        .comm_user_rank = r->CommUserRank,
        .comm_cu_device = r->CommCuDevice,
        .comm_abort = r->CommAbort,
        .get_error_string = r->GetErrorString,
    };
    ncclguard_nccl_calls_set(&calls);
}

/*
 * The start order. The writer of the log and event files first, when there is
 * one to write. Then track/: the ring, the group table, the marker pools
 * and the CUDA driver, which the creation that called us uses next. Then
 * evidence/ (dump paths, event log) so that the watchdog can report from its
 * first poll. Then the watchdog thread, which reads everything above, and last
 * the node marker, which promises that the dump signal is handled.
 */
static void start_all(void)
{
    const struct ng_settings *s = ncclguard_settings();
    /* NCCLGUARD_TEST_ANCHOR_MS: a test-only knob (docs/harness.md), not a setting,
     * and a test switch: never where a site file exists */
    const char *anchor = ncclguard_test_switch("NCCLGUARD_TEST_ANCHOR_MS");
    char *end = NULL;
    long anchor_ms = anchor ? strtol(anchor, &end, 10) : 0;
    if (!end || *end || anchor_ms < 1 || anchor_ms > 3600 * 1000) anchor_ms = 0;
    struct ng_track_params tp = {
        .mode = (enum ng_track_mode)s->track,
        .ring = (uint64_t)s->ring,
        .timing_sample = (int)s->timing_sample,
        .anchor_period_ns = anchor_ms > 0 ? (int64_t)anchor_ms * 1000000 : 0,
        .stack_depth = s->stacks ? (int)s->stack_depth : 0,
        .observer = {.settle = ncclguard_watchdog_settle,
                     .async_error = ncclguard_watchdog_async_error,
                     .wake = ncclguard_watchdog_wake},
    };
    if (s->log[0] || s->events[0]) ncclguard_spool_start(); /* a file to write: a writer */
    if (ncclguard_track_start(&tp) != 0) return;
    ncclguard_dump_init();
    ncclguard_dump_set_config_writer(ncclguard_config_write_json);
    /* evidence beyond the ring: the unwinder, the stack signal, the interpreter, the
     * cross-rank trigger, the crash path, SIGTERM */
    ncclguard_unwind_open();
    ncclguard_threads_init(s->dump_signal);
    ncclguard_python_init();
    ncclguard_trigger_init();
    ncclguard_verdict_init(s->verdict_wait_s);
    ncclguard_ras_init(s->ras, ncclguard_watchdog_request_ras_dump);
    ncclguard_crash_init();
    ncclguard_sigterm_init();
    ncclguard_events_open(s->events);
    hand_over_nccl();
    ncclguard_exports_report();
    int dump_signal = ncclguard_marker_signal_free(s->dump_signal); /* before the watchdog's */
    ncclguard_watchdog_start();
    ncclguard_marker_create(dump_signal); /* last: the signal is handled from here on */
}

void ncclguard_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (ng_atomic_load_acquire(&started)) return;
    pthread_once(&once, install_once);
    pthread_mutex_lock(&start_lock);
    if (!ng_atomic_load_relaxed(&started)) {
        start_all();
        ng_atomic_store_release(&started, 1);
    }
    pthread_mutex_unlock(&start_lock);
}
