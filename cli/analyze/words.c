/*
 * analyze/words.c: the words of the analysis, shared by its printers: names of
 * ranks and communicators, rank ranges, each culprit's verdict line, and the
 * per-rank status of the summary table.
 */
#include "analyze/words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/where.h"
#include "dump/dump.h"

const char *an_rank_name(const struct an *a, int32_t r, int64_t grank, char *buf, size_t n)
{
    if (r < 0) {
        if (grank >= 0)
            snprintf(buf, n, "rank %lld", (long long)grank);
        else
            snprintf(buf, n, "a rank of unknown global rank");
        return buf;
    }
    const struct an_rank *k = &a->ranks[r];
    char num[24];
    if (k->rank >= 0)
        snprintf(num, sizeof num, "%lld", (long long)k->rank);
    else
        snprintf(num, sizeof num, "?");
    if (!k->host && k->pid < 0) /* a Flight Recorder dump names neither */
        snprintf(buf, n, "rank %s (%s)", num, an_intern_get(&a->strs, k->path));
    else
        snprintf(buf, n, "rank %s (host %s, pid %lld)", num, an_intern_get(&a->strs, k->host),
                 (long long)k->pid);
    return buf;
}

/* The shortest prefix of the id, 4 digits at least, that no other communicator shares. */
const char *an_comm_short(const struct an *a, uint32_t c, char *buf, size_t n)
{
    if (c == AN_NONE || c >= a->ncomms) {
        snprintf(buf, n, "?");
        return buf;
    }
    char full[17], other[17];
    snprintf(full, sizeof full, "%016llx", (unsigned long long)a->comms[c].id);
    size_t len = 4;
    for (size_t i = 0; i < a->ncomms; i++) {
        if (i == c) continue;
        snprintf(other, sizeof other, "%016llx", (unsigned long long)a->comms[i].id);
        while (len < 16 && !strncmp(full, other, len)) len++;
    }
    snprintf(buf, n, "%.*s", (int)len, full);
    return buf;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* "0-4,6,9-11" for sorted ranks; "…" when it does not fit. */
const char *an_ranges(const int64_t *ranks, size_t n, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
        char part[48];
        if (ranks[i] < 0)
            snprintf(part, sizeof part, "?");
        else if (j > i)
            snprintf(part, sizeof part, "%lld-%lld", (long long)ranks[i], (long long)ranks[j]);
        else
            snprintf(part, sizeof part, "%lld", (long long)ranks[i]);
        size_t len = strlen(part) + (at ? 1 : 0);
        if (at + len + 4 >= size) {
            snprintf(buf + at, size - at, ",...");
            break;
        }
        at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? "," : "", part);
        i = j + 1;
    }
    return buf;
}

/* "main thread in f ← g ← h; Python: ..." for thread t of rank ri; "idle in a
 * wait" when it waits for work. */
static size_t where_text(const struct an *a, int32_t ri, uint32_t t, char *buf, size_t n)
{
    const struct an_rank *r = &a->ranks[ri];
    if (t == AN_NONE || t >= r->nth)
        return (size_t)snprintf(buf, n,
                                r->has_threads ? "no thread of it is known"
                                               : "the dump holds no stacks");
    const struct an_thread *th = &a->threads[r->th0 + t];
    const char *sys = an_intern_get(&a->strs, th->syscall);
    char who[96], state[64] = "";
    if (th->tid == r->pid)
        snprintf(who, sizeof who, "main thread");
    else
        snprintf(who, sizeof who, "thread %s (%lld)",
                 an_intern_get(&a->strs, th->name) ? an_intern_get(&a->strs, th->name) : "?",
                 (long long)th->tid);
    if (th->idle)
        snprintf(state, sizeof state, " idle in a wait%s%s%s", sys ? " (" : "", sys ? sys : "",
                 sys ? ")" : "");
    else if (sys && !th->where && !th->py)
        snprintf(state, sizeof state, " blocked in %s", sys);
    size_t at;
    if (th->where)
        at = (size_t)snprintf(buf, n, "%s%s%s in %s", who, state, state[0] ? "," : "",
                              an_intern_get(&a->strs, th->where));
    else if (th->py)
        at = (size_t)snprintf(buf, n, "%s%s%s in Python %s", who, state, state[0] ? "," : "",
                              an_intern_get(&a->strs, th->py));
    else
        at = (size_t)snprintf(buf, n, "%s%s, in no frame of the job", who, state);
    if (th->where && th->py && at < n)
        at += (size_t)snprintf(buf + at, n - at, "; Python: %s", an_intern_get(&a->strs, th->py));
    return at;
}

/* The thread to show for culprit c: the one that called its ops on the comm. */
static uint32_t thread_of(const struct an *a, const struct an_culprit *c)
{
    const struct an_rank *r = &a->ranks[c->f.rank];
    uint64_t tid = 0;
    if (c->f.comm != AN_NONE) {
        const struct an_rcomm *rc = an_rcomm_of(a, c->f.rank, c->f.comm);
        if (rc) tid = rc->last_thread;
    }
    if (c->f.cause == AN_CRASHED) tid = 0;
    return an_pick_thread(a, r, tid);
}

/* "Recv #7 with rank 0 on comm 5f3a", "AllReduce #12 on comm 5f3a" */
static void op_text(const struct an *a, const struct an_flight *b, char *buf, size_t n)
{
    char id[24], peer[48] = "";
    an_comm_short(a, b->comm, id, sizeof id);
    if (b->peer >= 0 && b->comm < a->ncomms && b->peer < a->comms[b->comm].nranks) {
        int32_t q = a->comms[b->comm].member[b->peer];
        int64_t g = q >= 0 ? a->ranks[q].rank : -1;
        if (g >= 0)
            snprintf(peer, sizeof peer, " with rank %lld", (long long)g);
        else
            snprintf(peer, sizeof peer, " with comm rank %d", b->peer);
    }
    snprintf(buf, n, "%s #%llu%s on comm %s", dr_op_name(b->op), (unsigned long long)b->seq, peer,
             id);
}

static size_t blocker_text(const struct an *a, const struct an_finding *f, char *buf, size_t n)
{
    const struct an_flight *b = &f->blocker;
    char op[160];
    if (b->comm == AN_NONE || !b->present) return 0;
    if (f->held.present) { /* a stream ordered after another by an event (analyze/hang.c) */
        op_text(a, &f->held, op, sizeof op);
        return (size_t)snprintf(buf, n,
                                "; its stream most likely waits for %s, stuck on another "
                                "of its streams (%s; inferred: ncclguard does not see the "
                                "event waits between streams)",
                                op, f->held.state == NG_OP_STARTED ? "started" : "never started");
    }
    if (b->comm == f->comm && b->seq == f->seq && b->op == f->op)
        return (size_t)snprintf(buf, n,
                                "; its stream is blocked by work that is not NCCL's (no "
                                "NCCL op is queued ahead of it)");
    op_text(a, b, op, sizeof op);
    if (b->state == NG_OP_SCHEDULED)
        return (size_t)snprintf(buf, n,
                                "; its stream is blocked by work that is not NCCL's "
                                "(the oldest op queued on it, %s, never started)",
                                op);
    return (size_t)snprintf(buf, n, "; its stream is held by %s (started, not finished)", op);
}

static void culprit_line(struct an *a, struct an_culprit *c)
{
    char buf[4096], who[128];
    const struct an_finding *f = &c->f;
    char id[24];
    if (f->rank < 0 && f->grank < 0) /* its comm rank is all the dumps tell */
        snprintf(who, sizeof who, "comm rank %lld of comm %s (global rank unknown)",
                 (long long)f->comm_rank, an_comm_short(a, f->comm, id, sizeof id));
    else
        an_rank_name(a, f->rank, f->grank, who, sizeof who);
    size_t at = (size_t)snprintf(buf, sizeof buf, "culprit: %s: %s", who,
                                 an_intern_get(&a->strs, f->detail));
    if (f->cause == AN_GPU_NOT_STARTED && at < sizeof buf)
        at += blocker_text(a, f, buf + at, sizeof buf - at);
    c->thread = AN_NONE;
    if (f->rank >= 0 && f->cause != AN_SLOW && at < sizeof buf) { /* a straggler's stack at
                                                                      the dump says nothing */
        c->thread = thread_of(a, c);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "; ");
        if (at < sizeof buf) at += where_text(a, f->rank, c->thread, buf + at, sizeof buf - at);
        /* the thread of the ops waits for work: where the others are */
        c->nalso = an_also_threads(a, &a->ranks[f->rank], c->thread, c->also, AN_ALSO);
        for (uint32_t i = 0; i < c->nalso && at < sizeof buf; i++) {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "; ");
            if (at < sizeof buf)
                at += where_text(a, f->rank, c->also[i], buf + at, sizeof buf - at);
        }
    }
    if (f->launcher && at < sizeof buf)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "; launcher: %s",
                               an_intern_get(&a->strs, f->launcher));
    for (int i = 0; c->nchain > 1 && i < c->nchain && at < sizeof buf; i++) {
        const struct an_finding *l = &a->findings[c->path[i]];
        char r[32], cid[24];
        int64_t g = c->chain[i] >= 0 ? a->ranks[c->chain[i]].rank : l->grank;
        snprintf(r, sizeof r, g >= 0 ? "%lld" : "?", (long long)g);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%srank %s %s on comm %s",
                               i ? " \xe2\x86\x92 " : " (chain: ", r, an_cause_name(l->cause),
                               an_comm_short(a, l->comm, cid, sizeof cid));
        if (i == c->nchain - 1 && at < sizeof buf)
            at += (size_t)snprintf(buf + at, sizeof buf - at, ")");
    }
    if (at >= sizeof buf) at = sizeof buf - 1;
    c->text = an_intern(&a->strs, buf, at);
}

void an_verdict_lines(struct an *a)
{
    for (size_t i = 0; i < a->nculprits; i++) culprit_line(a, &a->culprits[i]);
    /* ranks of the job without a dump, that no culprit names */
    int64_t *none = NULL;
    size_t n = 0, cap = 0;
    for (int64_t g = 0; g < a->world; g++) {
        if (an_u64map_get(&a->rank_by_grank, (uint64_t)g) != AN_NONE) continue;
        int named = 0;
        for (size_t i = 0; i < a->nculprits; i++) named |= a->culprits[i].f.grank == g;
        if (named) continue;
        none = an_grow(none, &n, &cap, sizeof *none);
        none[n - 1] = g;
    }
    if (n) {
        char r[256];
        qsort(none, n, sizeof *none, cmp_i64);
        an_note(a, "%zu rank(s) of the job left no dump: %s", n, an_ranges(none, n, r, sizeof r));
    }
    free(none);
}
