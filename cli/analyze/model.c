/*
 * analyze/model.c: one dump folded into the summary of analyze/model.h, and the
 * summary's memory. Everything here is per rank or per (communicator, seq):
 * what a detector needs, never an op.
 */
#include "analyze/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "dump/dump.h"

#define MAX_SEQ_SPAN (1u << 21) /* seqs compared per communicator */
#define MAX_MEMBERS (1 << 22)

const char *an_cause_name(int cause)
{
    static const char *const names[] = {AN_CAUSE_NAMES};
    return cause >= 0 && cause < AN_NCAUSES ? names[cause] : "?";
}

void *an_grow(void *vec, size_t *n, size_t *cap, size_t el)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        void *p = realloc(vec, nc * el);
        if (!p) {
            fprintf(stderr, "ncclguard: out of memory\n");
            exit(AN_EXIT_UNUSABLE);
        }
        vec = p;
        *cap = nc;
    }
    memset((char *)vec + *n * el, 0, el);
    (*n)++;
    return vec;
}

const struct an_rcomm *an_rcomm_of(const struct an *a, int32_t ri, uint32_t c)
{
    const struct an_rank *r = &a->ranks[ri];
    for (uint32_t i = 0; i < r->nrc; i++)
        if (a->rcomms[r->rc0 + i].comm == c) return &a->rcomms[r->rc0 + i];
    return NULL;
}

void an_init(struct an *a, const struct an_opts *o)
{
    memset(a, 0, sizeof *a);
    a->opt = *o;
    a->world = -1;
}

void an_free(struct an *a)
{
    for (size_t i = 0; i < a->ncomms; i++) {
        free(a->comms[i].member);
        free(a->comms[i].seqs);
    }
    for (size_t i = 0; i < a->nnotes; i++) free(a->notes[i]);
    for (size_t i = 0; i < a->nbad; i++) free(a->bad[i]);
    free(a->notes);
    free(a->bad);
    free(a->ranks);
    free(a->rcomms);
    free(a->peers);
    free(a->streams);
    free(a->threads);
    free(a->comms);
    free(a->alts);
    free(a->findings);
    free(a->culprits);
    an_intern_free(&a->strs);
    an_intern_free(&a->sigs);
    an_u64map_free(&a->comm_by_id);
    an_u64map_free(&a->rank_by_grank);
    an_u64map_free(&a->comm_dropped);
}

void an_push_line(char ***vec, size_t *n, size_t *cap, char *s)
{
    *vec = an_grow(*vec, n, cap, sizeof **vec);
    (*vec)[*n - 1] = s;
}

static char *vfmt(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    return s;
}

void an_note(struct an *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vfmt(fmt, ap);
    va_end(ap);
    if (s) an_push_line(&a->notes, &a->nnotes, &a->capnotes, s);
}

void an_add_bad(struct an *a, const char *path, const char *why)
{
    char *s = NULL;
    if (asprintf(&s, "%s: %s", path, why) >= 0) an_push_line(&a->bad, &a->nbad, &a->capbad, s);
}

/* ---- communicators and seqs ---- */

/* 1 when `more` bytes of tables sized by a claim fit the input's bound (and
 * are then counted). */
static int claim(struct an *a, uint64_t more)
{
    uint64_t cap = AN_CLAIM_FLOOR + AN_CLAIM_PER_BYTE * a->read_bytes;
    if (more > cap || a->claim_bytes > cap - more) return 0;
    a->claim_bytes += more;
    return 1;
}

#define WORLD_ROW_BYTES 32 /* what the summary keeps per rank without a dump, at most */

int an_claim_world(struct an *a, int64_t world)
{
    int64_t have = a->world > 0 ? a->world : 0;
    if (world <= have) return 1;
    if (world <= MAX_MEMBERS && claim(a, (uint64_t)(world - have) * WORLD_ROW_BYTES)) return 1;
    if (!a->world_dropped++)
        an_note(a,
                "a dump claims a job of %lld ranks, more than %llu bytes of dumps can hold: "
                "the ranks without a dump are counted up to %lld",
                (long long)world, (unsigned long long)a->read_bytes, (long long)have);
    return 0;
}

uint32_t an_comm_of(struct an *a, const struct dr_comm *dc)
{
    uint32_t c = an_u64map_get(&a->comm_by_id, dc->id);
    if (c != AN_NONE) {
        struct an_comm *cm = &a->comms[c];
        if (cm->nranks != dc->nranks) cm->nranks_conflict = 1;
        return c;
    }
    if (dc->nranks < 1 || dc->nranks > MAX_MEMBERS ||
        !claim(a, (uint64_t)dc->nranks * sizeof *a->comms->member)) {
        /* its member table (4 bytes per rank it claims) would be more than the
         * input bounds, or it claims no size: left out, said once */
        if (an_u64map_get(&a->comm_dropped, dc->id) == AN_NONE) {
            an_u64map_put(&a->comm_dropped, dc->id, 1);
            an_note(a,
                    "comm %016llx claims %lld ranks, more than the %llu bytes of dumps "
                    "read can bound (docs/analysis.md, \"Memory\"): it is left out",
                    (unsigned long long)dc->id, (long long)dc->nranks,
                    (unsigned long long)a->read_bytes);
        }
        return AN_NONE;
    }
    struct an_comm *cm = PUSH(a->comms, a->ncomms, a->capcomms);
    cm->id = dc->id;
    cm->parent = dc->parent;
    cm->nranks = dc->nranks;
    cm->name = an_intern_str(&a->strs, dc->name);
    cm->member = malloc((size_t)dc->nranks * sizeof *cm->member);
    if (!cm->member) {
        fprintf(stderr, "ncclguard: out of memory\n");
        exit(AN_EXIT_UNUSABLE);
    }
    memset(cm->member, 0xff, (size_t)dc->nranks * sizeof *cm->member);
    c = (uint32_t)(a->ncomms - 1);
    an_u64map_put(&a->comm_by_id, dc->id, c);
    return c;
}

static void seq_init(struct an_seq *s, size_t n)
{
    memset(s, 0, n * sizeof *s);
    for (size_t i = 0; i < n; i++) {
        s[i].sig_ranks[0] = s[i].sig_ranks[1] = s[i].d_last = s[i].e_last = -1;
    }
}

/* The aggregate of seq on c, made when new; NULL beyond the span compared. */
struct an_seq *an_seq_slot(struct an *a, struct an_comm *c, uint64_t seq)
{
    if (!c->nseqs) c->seq_base = seq;
    uint64_t lo = seq < c->seq_base ? seq : c->seq_base;
    uint64_t hi = seq >= c->seq_base + c->nseqs ? seq + 1 : c->seq_base + c->nseqs;
    size_t need = (size_t)(hi - lo), cap = c->capseqs;
    if (need > cap) {
        cap = cap ? cap : 64;
        while (cap < need) cap *= 2;
    }
    if (hi - lo > MAX_SEQ_SPAN ||
        (cap > c->capseqs && !claim(a, (uint64_t)(cap - c->capseqs) * sizeof *c->seqs))) {
        /* seqs this far apart would take more than the input bounds */
        if (!c->seqs_dropped++)
            an_note(a,
                    "comm %016llx: its ops' seqs %llu and %llu are too far apart for this "
                    "input (%llu bytes of dumps read); ops beyond are not compared",
                    (unsigned long long)c->id, (unsigned long long)c->seq_base,
                    (unsigned long long)seq, (unsigned long long)a->read_bytes);
        return NULL;
    }
    if (need > c->capseqs) {
        struct an_seq *p = realloc(c->seqs, cap * sizeof *p);
        if (!p) {
            fprintf(stderr, "ncclguard: out of memory\n");
            exit(AN_EXIT_UNUSABLE);
        }
        c->seqs = p;
        c->capseqs = cap;
    }
    if (lo < c->seq_base) { /* older seqs than any so far: shift up */
        size_t by = (size_t)(c->seq_base - lo);
        memmove(c->seqs + by, c->seqs, c->nseqs * sizeof *c->seqs);
        seq_init(c->seqs, by);
        c->nseqs += by;
        c->seq_base = lo;
    }
    if (need > c->nseqs) {
        seq_init(c->seqs + c->nseqs, need - c->nseqs);
        c->nseqs = need;
    }
    return &c->seqs[seq - c->seq_base];
}

struct an_seq *an_seq_at(struct an_comm *c, uint64_t seq)
{
    if (!c->nseqs || seq < c->seq_base || seq - c->seq_base >= c->nseqs) return NULL;
    struct an_seq *s = &c->seqs[seq - c->seq_base];
    return s->n ? s : NULL;
}

uint32_t an_sig_of(struct an *a, const struct dr_op *o)
{
    struct an_sig k;
    memset(&k, 0, sizeof k);
    k.count = o->count; /* bytes is count x the type's size: a brief read skips it */
    k.root = o->root;
    k.op = o->op;
    memcpy(k.datatype, o->datatype, sizeof k.datatype);
    memcpy(k.redop, o->redop, sizeof k.redop);
    /* ops repeat: a few recent signatures answer most lookups without hashing */
    unsigned slot = (unsigned)(o->count ^ o->op ^ (uint64_t)o->datatype[0] << 3) % AN_SIG_CACHE;
    if (a->sig_cache_id[slot] && !memcmp(&a->sig_cache[slot], &k, sizeof k))
        return a->sig_cache_id[slot];
    uint32_t id = an_intern(&a->sigs, &k, sizeof k);
    a->sig_cache[slot] = k;
    a->sig_cache_id[slot] = id;
    return id;
}

void an_count_sig(struct an *a, struct an_seq *s, uint32_t sig, int32_t rank)
{
    s->n++;
    if (!s->sig || s->sig == sig) {
        s->sig = sig;
        if (s->nsig < 2) s->sig_ranks[s->nsig] = rank;
        s->nsig++;
        return;
    }
    uint32_t *link = &s->alt;
    while (*link) {
        struct an_alt *x = &a->alts[*link - 1];
        if (x->sig == sig) {
            if (x->n < 2) x->ranks[x->n] = rank;
            x->n++;
            return;
        }
        link = &x->next;
    }
    struct an_alt *x = PUSH(a->alts, a->nalts, a->capalts);
    x->sig = sig;
    x->n = 1;
    x->ranks[0] = rank;
    x->ranks[1] = -1;
    *link = (uint32_t)a->nalts; /* index + 1 */
}

/* Arrival at a completed collective: the GPU duration (the last to arrive
 * waited least; no clock is compared across hosts) and the enqueue time. */
void an_count_arrival(struct an_seq *s, const struct dr_op *o, int32_t rank)
{
    if (o->gpu_start_ns && o->gpu_end_ns >= o->gpu_start_ns) {
        int64_t dur = o->gpu_end_ns - o->gpu_start_ns;
        if (!s->dn || dur < s->dmin) {
            s->dmin = dur;
            s->d_last = rank;
        }
        if (!s->dn || dur > s->dmax) s->dmax = dur;
        s->dn++;
    }
    if (o->enqueue_ns) {
        if (!s->en || o->enqueue_ns > s->emax) {
            s->emax = o->enqueue_ns;
            s->e_last = rank;
        }
        if (!s->en || o->enqueue_ns < s->emin) s->emin = o->enqueue_ns;
        s->en++;
    }
}

int an_is_culprit(const struct an *a, int32_t ri)
{
    for (size_t i = 0; i < a->nculprits; i++)
        if (a->culprits[i].f.rank == ri && ri >= 0) return 1;
    return 0;
}
