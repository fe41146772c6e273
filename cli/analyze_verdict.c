/*
 * analyze_verdict.c: from findings to culprits. A rank blamed on one
 * communicator may itself be waiting on another (it never called the op because
 * it is stuck in an earlier one; its stream is held by an op of another
 * communicator): the chain is followed to the rank at its end, which is named
 * with its own cause. One culprit per rank, with the cause that wins (analyze.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

#define MAX_CHAIN 16

/* The op that rank ri waits on: its oldest in flight of all its streams. */
static const struct an_flight *waits_on(const struct an *a, int32_t ri)
{
    const struct an_rank *r = &a->ranks[ri];
    const struct an_flight *best = NULL;
    for (uint32_t s = 0; s < r->nst; s++) {
        const struct an_flight *f = &a->streams[r->st0 + s];
        if (f->present && f->comm != AN_NONE && (!best || f->enqueue_ns < best->enqueue_ns)) best = f;
    }
    return best;
}

/* A finding on communicator c that blames someone other than ri. */
static const struct an_finding *blamed_on(const struct an *a, uint32_t c, int32_t ri)
{
    const struct an_finding *best = NULL;
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct an_finding *f = &a->findings[i];
        if (f->comm != c || (f->rank == ri && ri >= 0) || f->cause == AN_SLOW) continue;
        if (!best || f->cause < best->cause) best = f;
    }
    return best;
}

/* The next finding of the chain after f, or NULL when f's rank is its end. */
static const struct an_finding *next_of(const struct an *a, const struct an_finding *f)
{
    if (f->rank < 0) return NULL;
    switch (f->cause) {
    case AN_MISSING:
    case AN_P2P: {
        const struct an_flight *w = waits_on(a, f->rank);
        return w ? blamed_on(a, w->comm, f->rank) : NULL;
    }
    case AN_GPU_NOT_STARTED:
        if (f->blocker.comm == AN_NONE || f->blocker.state != NG_ST_STARTED) return NULL;
        return blamed_on(a, f->blocker.comm, f->rank);
    default:
        return NULL;
    }
}

static int same_rank(const struct an_finding *x, const struct an_finding *y)
{
    if (x->rank >= 0 || y->rank >= 0) return x->rank == y->rank;
    if (x->grank >= 0 || y->grank >= 0) return x->grank == y->grank;
    return x->comm == y->comm && x->comm_rank == y->comm_rank;
}

static void add_culprit(struct an *a, const struct an_culprit *c)
{
    for (size_t i = 0; i < a->nculprits; i++) {
        struct an_culprit *o = &a->culprits[i];
        if (!same_rank(&o->f, &c->f)) continue;
        /* the winning cause; for one cause, the longer chain: it shows the ranks that
         * were blamed and are not the culprit */
        if (c->f.cause < o->f.cause ||
            (c->f.cause == o->f.cause && c->nchain > o->nchain) ||
            (c->f.cause == o->f.cause && c->nchain == o->nchain && c->f.since_ns &&
             (!o->f.since_ns || c->f.since_ns < o->f.since_ns)))
            *o = *c;
        return;
    }
    a->culprits = an_grow(a->culprits, &a->nculprits, &a->capculprits, sizeof *a->culprits);
    a->culprits[a->nculprits - 1] = *c;
}

static void follow(struct an *a, const struct an_finding *start)
{
    struct an_culprit c;
    memset(&c, 0, sizeof c);
    const struct an_finding *f = start;
    for (;;) {
        for (int i = 0; i < c.nchain; i++)
            if (c.chain[i] == f->rank && f->rank >= 0) {
                an_note(a, "a cycle of waits: %d ranks wait on each other (a deadlock of the "
                           "order of calls)", c.nchain);
                return;
            }
        if (c.nchain < MAX_CHAIN) c.chain[c.nchain++] = f->rank;
        const struct an_finding *n = next_of(a, f);
        if (!n || c.nchain == MAX_CHAIN) break;
        f = n;
    }
    c.f = *f;
    add_culprit(a, &c);
}

/* A rank that died (crashed, or left no dump) explains the waits of the others:
 * their ops stay in flight, scheduled or started as each rank's watchdog last
 * saw them. Those waits are no culprits then; a mismatch or an async error is
 * evidence of its own and stays. */
static void crash_explains_waits(struct an *a)
{
    int died = 0;
    for (size_t i = 0; i < a->nculprits; i++)
        died |= a->culprits[i].f.cause == AN_CRASHED || a->culprits[i].f.cause == AN_NO_DUMP;
    if (!died) return;
    size_t kept = 0;
    for (size_t i = 0; i < a->nculprits; i++)
        if (a->culprits[i].f.cause <= AN_MISMATCH) a->culprits[kept++] = a->culprits[i];
    a->nculprits = kept;
}

static int by_rank(const void *x, const void *y)
{
    const struct an_culprit *a = x, *b = y;
    if (a->f.cause != b->f.cause) return a->f.cause - b->f.cause;
    return a->f.grank < b->f.grank ? -1 : a->f.grank > b->f.grank;
}

int an_verdict(struct an *a)
{
    if (!a->nranks) return AN_EXIT_UNUSABLE;
    a->hang = an_stuck(a);
    an_detect_crashed(a);
    an_detect_async_error(a);
    an_detect_mismatch(a);
    if (a->hang) {
        an_detect_collectives(a);
        an_detect_p2p(a);
    }
    an_launcher_lines(a);
    for (size_t i = 0; i < a->nfindings; i++) follow(a, &a->findings[i]);
    if (!a->nculprits && !a->hang) {
        size_t before = a->nfindings;
        an_detect_slow(a);
        for (size_t i = before; i < a->nfindings; i++) follow(a, &a->findings[i]);
    }
    crash_explains_waits(a);
    if (a->nculprits > 1) qsort(a->culprits, a->nculprits, sizeof *a->culprits, by_rank);
    an_verdict_lines(a);
    if (a->nculprits) return AN_EXIT_CULPRIT;
    return a->hang ? AN_EXIT_NO_CULPRIT : AN_EXIT_HEALTHY;
}
