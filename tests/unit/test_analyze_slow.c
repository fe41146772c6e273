/*
 * test_analyze_slow.c: the straggler rule (cli/analyze/cmp.c, docs/analysis.md).
 *
 * The binomial tail and the test's thresholds on hand-made counts; then seeded
 * synthetic jobs of trainloop's model (4 ranks, 200 steps, host jitter 0-15 ms on
 * every rank and step, a 40 ms pause on a random rank one step in ten; each step
 * one collective where the ranks meet, then a group of four that follow in step)
 * folded as dumps (an_add_dump) and judged by an_verdict, as `analyze` does:
 * 20 healthy seeds name nobody; 20 seeds with one rank's GPU 12 ms late on every
 * step name that rank, and only it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/cmp.h"
#include "analyze/fold.h"
#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/verdict.h"
#include "check_main.h"
#include "dump/dump.h"

#define RANKS 4
#define STEPS 200
#define FOLLOW 4 /* the step's grouped collectives after the first: one set of timings */
#define MS 1000000LL

static uint64_t rng_state;

static uint64_t next_u64(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return (double)(next_u64() >> 11) / 9007199254740992.0;
}

struct job {
    struct dr_dump d[RANKS];
    struct dr_comm c[RANKS];
    char path[RANKS][32];
};

static void set_op(struct dr_op *o, int r, uint64_t seq, int64_t enq, int64_t start, int64_t end)
{
    memset(o, 0, sizeof *o);
    o->index = seq;
    o->comm = 0xabcdef0123456789ull;
    o->seq = seq;
    o->count = 1024;
    o->stream = 7;
    o->thread = 1;
    o->enqueue_ns = enq;
    o->gpu_start_ns = start;
    o->gpu_end_ns = end;
    o->comm_rank = r;
    o->comm_nranks = RANKS;
    o->root = o->peer = -1;
    o->stack = -1;
    o->op = NG_OP_ALLREDUCE;
    o->state = NG_OP_COMPLETED;
    strcpy(o->datatype, "float32");
    strcpy(o->redop, "sum");
}

/* Dump d (rank r's) gets one communicator c: "world" of RANKS ranks on device, every one of its
 * nops ops completed, and room for those ops. */
static void give_world(struct dr_dump *d, struct dr_comm *c, int r, int device, size_t nops)
{
    *c = (struct dr_comm){.id = 0xabcdef0123456789ull,
                          .rank = r,
                          .nranks = RANKS,
                          .device = device,
                          .last_seq = nops,
                          .last_completed_seq = nops,
                          .name = "world",
                          .state = "ready",
                          .blocking = 1};
    d->comms = c;
    d->ncomms = 1;
    d->ops = calloc(nops, sizeof *d->ops);
    d->nops = nops;
}

/* One seeded run. late: the rank whose GPU is late_ms late every step, -1 none;
 * stall: one extra arrival where rank 0 holds the others up 10 s (the machine
 * stalled once), which must not outweigh everything else. */
static void make_job(struct job *j, uint64_t seed, int late, double late_ms, int stall)
{
    rng_state = seed * 7919 + 1;
    size_t nops = (size_t)(STEPS + stall) * (1 + FOLLOW);
    memset(j, 0, sizeof *j);
    for (int r = 0; r < RANKS; r++) {
        struct dr_dump *d = &j->d[r];
        snprintf(j->path[r], sizeof j->path[r], "ncclguard-r%d.json", r);
        d->path = j->path[r];
        d->schema = "ncclguard.dump/2.1";
        d->major = 2;
        d->minor = 1;
        d->reason = "exit";
        d->host = "h";
        d->job = "synthetic";
        d->time_ns = 1000000 * MS;
        d->pid = 100 + r;
        d->rank = r;
        d->local_rank = r;
        give_world(d, &j->c[r], r, r, nops);
    }
    uint64_t seq = 0;
    size_t k = 0;
    for (int s = 0; s < STEPS + stall; s++) {
        int64_t t0 = (int64_t)s * 100 * MS;
        double host[RANKS], gpu[RANKS], top = 0;
        int pause = uniform() < 0.1 ? (int)(next_u64() % RANKS) : -1;
        for (int r = 0; r < RANKS; r++) {
            host[r] = 15 * uniform() + (r == pause ? 40 : 0);
            gpu[r] = host[r] + 2 + (r == late ? late_ms : 0) + (s == STEPS ? (r ? 0 : 10000) : 0);
            if (gpu[r] > top) top = gpu[r];
        }
        seq++;
        for (int r = 0; r < RANKS; r++)
            set_op(&j->d[r].ops[k], r, seq, t0 + (int64_t)(host[r] * MS),
                   t0 + (int64_t)(gpu[r] * MS), t0 + (int64_t)((top + 0.2) * MS));
        k++;
        /* The group that follows: the ranks leave the first together and meet again
         * at once; what spread there is comes from the harness, rank 0 most often
         * last (its threads start last), identical for the group's members. */
        int g = uniform() < 0.5 ? 0 : (int)(next_u64() % RANKS);
        double d[RANKS];
        for (int r = 0; r < RANKS; r++) d[r] = r == g ? 0.2 : 0.2 + 1 + 2.5 * uniform();
        for (int f = 0; f < FOLLOW; f++, k++) {
            seq++;
            for (int r = 0; r < RANKS; r++) {
                int64_t at = t0 + (int64_t)((top + 1) * MS);
                set_op(&j->d[r].ops[k], r, seq, t0 + (int64_t)(host[r] * MS) + (f + 1) * 10000, at,
                       at + (int64_t)(d[r] * MS));
            }
        }
    }
}

static void free_job(struct job *j)
{
    for (int r = 0; r < RANKS; r++) free(j->d[r].ops);
}

/* The verdict on job j: its culprits, as "rank:cause" joined by spaces. */
static void judge(struct job *j, char *out, size_t n, int *exit_status)
{
    struct an a;
    struct an_opts o = {0};
    an_init(&a, &o);
    for (int r = 0; r < RANKS; r++) ck_assert_int_eq(an_add_dump(&a, &j->d[r]), 0);
    *exit_status = an_verdict(&a);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a.nculprits && at < n; i++)
        at += (size_t)snprintf(out + at, n - at, "%s%lld:%s", i ? " " : "",
                               (long long)a.culprits[i].f.grank,
                               an_cause_name(a.culprits[i].f.cause));
    an_free(&a);
}

NG_TEST(binomial_tail)
{
    ck_assert(fabs(an_binom_tail(10, 10, 0.5) - 1.0 / 1024) < 1e-15);
    ck_assert(fabs(an_binom_tail(4, 2, 0.5) - 11.0 / 16) < 1e-12);
    ck_assert(fabs(an_binom_tail(40, 20, 0.25) - 5.724311071761e-4) < 1e-12);
    ck_assert(an_binom_tail(200, 143, 0.25) < 1e-40);
    ck_assert(an_binom_tail(5, 0, 0.25) == 1 && an_binom_tail(5, 6, 0.25) == 0);
    ck_assert(fabs(an_binom_tail(2000000, 500000, 0.25) - 0.5) < 0.01);
}
END_TEST

static int named(uint32_t k, uint32_t m, double share, double ntests, struct an_straggler *st)
{
    uint32_t last[RANKS] = {k, (m - k) / 3, (m - k) / 3, m - k - 2 * ((m - k) / 3)};
    double wait[RANKS] = {share, (1 - share) / 3, (1 - share) / 3, (1 - share) / 3};
    return an_straggler_test(last, wait, RANKS, RANKS, m, ntests, st);
}

NG_TEST(thresholds)
{
    struct an_straggler st;
    /* every arrival, all of the waiting: 7 is too few, whatever the odds (4^-7 x 4) */
    ck_assert_int_eq(named(7, 7, 1.0, 4, &st), 0);
    ck_assert(st.p < AN_STRAGGLER_ALPHA && st.rank == 0 && st.last == 7);
    ck_assert_int_eq(named(8, 8, 1.0, 4, &st), 1);
    /* the chance: last at 20 of 40 (2.3e-3 for 4 ranks tested) is chance, 21 is not */
    ck_assert_int_eq(named(20, 40, 0.9, 4, &st), 0);
    ck_assert(st.p > AN_STRAGGLER_ALPHA && st.p < 3e-3);
    ck_assert_int_eq(named(21, 40, 0.9, 4, &st), 1);
    /* ... unless more ranks were tested: 21 of 40 with 8 (1.4e-3) */
    ck_assert_int_eq(named(21, 40, 0.9, 8, &st), 0);
    /* the share: last most often, but others caused most of the waiting */
    ck_assert_int_eq(named(30, 40, 0.45, 4, &st), 0);
    ck_assert_int_eq(named(30, 40, 0.5, 4, &st), 1);
    ck_assert(st.p < 1e-9 && st.samples == 40);
    /* odds of 1/2 on a communicator of 2 of the job's 8 ranks: 28 of 40 is chance */
    uint32_t last[8] = {0, 0, 0, 0, 0, 28, 12, 0};
    double wait[8] = {0, 0, 0, 0, 0, 0.7, 0.3, 0};
    ck_assert_int_eq(an_straggler_test(last, wait, 8, 2, 40, 2, &st), 0);
    ck_assert(st.rank == 5 && st.p > 0.01 && st.p < 0.02);
    last[5] = 34;
    last[6] = 6;
    ck_assert_int_eq(an_straggler_test(last, wait, 8, 2, 40, 2, &st), 1);
}
END_TEST

NG_TEST(healthy_jitter_names_nobody)
{
    char got[256];
    int status;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct job j;
        make_job(&j, seed, -1, 0, 0);
        judge(&j, got, sizeof got, &status);
        free_job(&j);
        ck_assert_msg(!got[0] && status == AN_EXIT_HEALTHY, "seed %llu: '%s' (exit %d)",
                      (unsigned long long)seed, got, status);
    }
}
END_TEST

NG_TEST(late_gpu_is_named)
{
    char got[256], want[32];
    int status;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct job j;
        int late = (int)(seed % RANKS);
        make_job(&j, seed, late, 12, seed % 5 == 0);
        judge(&j, got, sizeof got, &status);
        free_job(&j);
        snprintf(want, sizeof want, "%d:slow", late);
        ck_assert_msg(!strcmp(got, want) && status == AN_EXIT_CULPRIT,
                      "seed %llu%s: want '%s', got '%s' (exit %d)", (unsigned long long)seed,
                      seed % 5 == 0 ? " (with a 10 s stall of rank 0)" : "", want, got, status);
    }
}
END_TEST

NG_TEST(verdict_words)
{
    struct job j;
    make_job(&j, 3, 2, 12, 0);
    struct an a;
    struct an_opts o = {0};
    an_init(&a, &o);
    for (int r = 0; r < RANKS; r++) an_add_dump(&a, &j.d[r]);
    ck_assert_int_eq(an_verdict(&a), AN_EXIT_CULPRIT);
    const char *line = an_intern_get(&a.strs, a.culprits[0].text);
    ck_assert_msg(strstr(line, "arrived last at ") && strstr(line, " of 200 collectives") &&
                      strstr(line, "% of the waiting, p < 1e-9 by chance") &&
                      strstr(line, "4 rank(s) tested"),
                  "%s", line);
    an_free(&a);
    free_job(&j);
}
END_TEST

/* A job of `steps` steps, 100 ms apart, of `per` collectives each, the k-th of a step
 * enqueued k * gap after its first; rank 3 enqueues every one `late` ns after the
 * others. No GPU times: the arrivals are the enqueues. The culprit's line in out. */
static void enqueue_job(int steps, int per, int64_t gap, int64_t late, char *out, size_t n,
                        int *exit_status)
{
    struct job j;
    memset(&j, 0, sizeof j);
    size_t nops = (size_t)steps * (size_t)per;
    for (int r = 0; r < RANKS; r++) {
        struct dr_dump *d = &j.d[r];
        snprintf(j.path[r], sizeof j.path[r], "ncclguard-r%d.json", r);
        *d = (struct dr_dump){.path = j.path[r],
                              .schema = "ncclguard.dump/2.2",
                              .major = 2,
                              .minor = 2,
                              .reason = "exit",
                              .host = "h",
                              .job = "enqueue",
                              .time_ns = 1000000 * MS,
                              .pid = 100 + r,
                              .rank = r,
                              .local_rank = r};
        give_world(d, &j.c[r], r, 0, nops);
        for (size_t k = 0; k < nops; k++) {
            int64_t at = 1000 * MS + (int64_t)(k / (size_t)per) * 100 * MS +
                         (int64_t)(k % (size_t)per) * gap; /* 0: an unknown time */
            set_op(&d->ops[k], r, k + 1, at + (r == 3 ? late : 0), 0, 0);
        }
    }
    struct an a;
    struct an_opts o = {0};
    an_init(&a, &o);
    for (int r = 0; r < RANKS; r++) ck_assert_int_eq(an_add_dump(&a, &j.d[r]), 0);
    *exit_status = an_verdict(&a);
    snprintf(out, n, "%s", a.nculprits ? an_intern_get(&a.strs, a.culprits[0].text) : "nobody");
    an_free(&a);
    free_job(&j);
}

NG_TEST(late_at_the_lateness_threshold)
{
    char line[512];
    int status;
    /* AN_LATE_NS after the others, at each of 20 collectives: last at every one */
    enqueue_job(20, 1, 0, AN_LATE_NS, line, sizeof line, &status);
    ck_assert_int_eq(status, AN_EXIT_CULPRIT);
    ck_assert_msg(strstr(line, "rank 3 ") && strstr(line, "arrived last at 20 of 20 collectives"),
                  "%s", line);
    /* a nanosecond less is no arrival at all: nobody */
    enqueue_job(20, 1, 0, AN_LATE_NS - 1, line, sizeof line, &status);
    ck_assert_int_eq(status, AN_EXIT_HEALTHY);
    ck_assert_str_eq(line, "nobody");
}
END_TEST

NG_TEST(collectives_apart_by_the_burst_window)
{
    char line[512];
    int status;
    /* two collectives a step, AN_BURST_NS apart: two arrivals a step */
    enqueue_job(20, 2, AN_BURST_NS, AN_LATE_NS, line, sizeof line, &status);
    ck_assert_int_eq(status, AN_EXIT_CULPRIT);
    ck_assert_msg(strstr(line, "arrived last at 40 of 40 collectives"), "%s", line);
    /* a nanosecond closer: one burst, counted once */
    enqueue_job(20, 2, AN_BURST_NS - 1, AN_LATE_NS, line, sizeof line, &status);
    ck_assert_int_eq(status, AN_EXIT_CULPRIT);
    ck_assert_msg(strstr(line, "arrived last at 20 of 20 collectives"), "%s", line);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("analyze_slow", "straggler", 60, ng_check_tests(), NULL));
}
