/*
 * init.c: see init.h.
 *
 * A preloaded library lands in every process of a job, most of which (the
 * launcher, data-loader workers, `python -c 1`) never touch NCCL. So the
 * constructor only reads a few environment variables: no thread, no file kept
 * open, no allocation. Everything else waits for the first communicator.
 */
#include "intercept/start.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "track/comm.h"
#include "policy/config.h"
#include "evidence/dump.h"
#include "track/flight.h"
#include "track/markers.h"
#include "base/identity.h"
#include "intercept/real.h"
#include "base/json.h"
#include "watch/escalation.h"
#include "base/log.h"
#include "policy/policy.h"
#include "track/ops.h"
#include "watch/watchdog.h"

static int started; /* the first communicator was created; atomic */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void ncclguard_process_init(void)
{
    ncclguard_identity_init();
    ncclguard_log_init(); /* from the environment, for messages of the policy itself */
    ncclguard_policy_apply_at_start();
    const struct ng_settings *s = ncclguard_settings();
    ncclguard_log_configure(s->log_level, s->log);
    __atomic_store_n(&ncclguard_tracking, !s->disable, __ATOMIC_RELEASE);
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
    ncclguard_dump_atfork_child();
    pthread_mutex_init(&start_lock, NULL);
    __atomic_store_n(&started, 0, __ATOMIC_RELAXED);
}

static void print_summary(void)
{
    int ncomms = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        ncomms += ncclguard_comm_at(i)->state != NG_COMM_FAILED;
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
                                    ncclguard_op_name(t), (unsigned long long)n);
    }
    struct ng_watchdog_stats w;
    struct ng_flight_stats f;
    ncclguard_watchdog_stats(&w);
    ncclguard_flight_stats(&f);
    struct ng_gpu_stats g;
    uint64_t aborts, aborts_done;
    ncclguard_gpu_stats(&g);
    ncclguard_ladder_stats(&aborts, &aborts_done);
    char rare[160] = ""; /* counts that are usually zero, shown when they are not */
    if (g.captured || g.no_marker || aborts)
        snprintf(rare, sizeof rare, ", %llu captured in graphs, %llu without GPU marker, "
                 "%llu aborted by ncclguard", (unsigned long long)g.captured,
                 (unsigned long long)g.no_marker, (unsigned long long)aborts);
    NG_INFO("summary: %d communicators, %llu ops%s%s%s, %llu slow, %llu timeouts, "
            "%llu async errors, %llu dumps, %llu records dropped%s", ncomms,
            (unsigned long long)total, len ? " (" : "", ops, len ? ")" : "",
            (unsigned long long)w.slow, (unsigned long long)(w.timeouts + w.init_timeouts),
            (unsigned long long)w.async_errors, (unsigned long long)w.dumps,
            (unsigned long long)f.overwritten, rare);
    for (int i = 0; i < ncclguard_comm_count() && ncclguard_log_enabled(NG_LOG_DEBUG); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        NG_DEBUG("comm %016llx rank %d/%d %s: %llu collectives", (unsigned long long)c->id,
                 ng_comm_rank(c), ng_comm_nranks(c), ncclguard_comm_state_name(c->state),
                 (unsigned long long)c->coll_seq);
    }
}

static void at_exit(void)
{
    /* A fork child that made no communicator of its own has nothing to say. */
    if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return;
    ncclguard_watchdog_at_exit();
    print_summary();
}

/* The dump's "config" member: the effective settings and the policy's changes
 * (async-signal-safe, like the rest of the dump writer). */
static void dump_config(struct ng_json *j)
{
    static char buf[64 * 1024];
    long n = ncclguard_config_json(buf, sizeof buf);
    if (n > 0) ncclguard_json_raw(j, buf, (size_t)n);
}

static void first_comm_once(void)
{
    ncclguard_dump_set_config_writer(dump_config);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
}

void ncclguard_first_comm(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return;
    pthread_once(&once, first_comm_once);
    pthread_mutex_lock(&start_lock);
    if (!started) {
        ncclguard_track_start();
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&start_lock);
}
