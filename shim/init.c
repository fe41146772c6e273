/*
 * init.c: see init.h.
 *
 * A preloaded library lands in every process of a job, most of which (the
 * launcher, data-loader workers, `python -c 1`) never touch NCCL. So the
 * constructor only reads a few environment variables: no thread, no file kept
 * open, no allocation. Everything else waits for the first communicator.
 */
#include "init.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "identity.h"
#include "interpose.h"
#include "log.h"
#include "track.h"

static int started; /* the first communicator was created; atomic */

static int env_true(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 &&
           strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0;
}

void ncclguard_process_init(void)
{
    ncclguard_identity_init();
    ncclguard_log_init();
    int on = !env_true("NCCLGUARD_DISABLE");
    __atomic_store_n(&ncclguard_tracking, on, __ATOMIC_RELEASE);
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
    NG_INFO("summary: %d communicators, %llu ops%s%s%s", ncomms, (unsigned long long)total,
            len ? " (" : "", ops, len ? ")" : "");
    for (int i = 0; i < ncclguard_comm_count() && ncclguard_log_enabled(NG_LOG_DEBUG); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        NG_DEBUG("comm %016llx rank %d/%d %s: %llu collectives", (unsigned long long)c->id,
                 c->rank, c->nranks, ncclguard_comm_state_name(c->state),
                 (unsigned long long)c->coll_seq);
    }
}

static void first_comm_once(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(print_summary);
}

void ncclguard_first_comm(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE)) return;
    pthread_once(&once, first_comm_once);
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}
