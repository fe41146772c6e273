/*
 * analyze/read.c: a dump directory into the summary (analyze/model.h). Dumps of
 * different jobs are summarized apart, and the job with the most dumps is the
 * one analyzed (a directory can hold the leftovers of an earlier job); each
 * dump of another job is listed as not used.
 */
#include "analyze/read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/fold.h"
#include "analyze/intern.h"
#include "analyze/model.h"
#include "dump/dir.h"
#include "dump/dump.h"
#include "dump/read.h"

#define MAX_JOBS 16

struct reader {
    struct an *jobs[MAX_JOBS];
    int njobs;
    const struct an_opts *opt;
    char **bad; /* the reader's own "FILE: why" lines, in file order */
    size_t nbad, capbad;
    size_t overflow; /* dumps of jobs beyond MAX_JOBS */
};

static struct an *job_of(struct reader *rd, const char *job)
{
    for (int i = 0; i < rd->njobs; i++)
        if (!strcmp(an_intern_get(&rd->jobs[i]->strs, rd->jobs[i]->job), job)) return rd->jobs[i];
    if (rd->njobs == MAX_JOBS) return NULL;
    struct an *a = malloc(sizeof *a);
    if (!a) return NULL;
    an_init(a, rd->opt);
    a->job = an_intern_str(&a->strs, job);
    rd->jobs[rd->njobs++] = a;
    return a;
}

static int on_dump(void *ctx, const struct dr_dump *d)
{
    struct reader *rd = ctx;
    struct an *a = job_of(rd, d->job);
    if (!a) {
        rd->overflow++;
        return 0;
    }
    an_add_dump(a, d);
    return 0;
}

static void on_bad(void *ctx, const char *path, const char *why)
{
    struct reader *rd = ctx;
    char *s = NULL;
    if (asprintf(&s, "%s: %s", path, why) >= 0) an_push_line(&rd->bad, &rd->nbad, &rd->capbad, s);
}

/* The job with the most dumps (the newest dump breaks a tie). */
static int main_job(const struct reader *rd)
{
    int best = 0;
    for (int i = 1; i < rd->njobs; i++) {
        const struct an *a = rd->jobs[i], *b = rd->jobs[best];
        int64_t ta = 0, tb = 0;
        for (size_t k = 0; k < a->nranks; k++)
            ta = a->ranks[k].time_ns > ta ? a->ranks[k].time_ns : ta;
        for (size_t k = 0; k < b->nranks; k++)
            tb = b->ranks[k].time_ns > tb ? b->ranks[k].time_ns : tb;
        if (a->nranks > b->nranks || (a->nranks == b->nranks && ta > tb)) best = i;
    }
    return best;
}

static void move_bad(struct an *to, struct an *from)
{
    for (size_t i = 0; i < from->nbad; i++)
        an_push_line(&to->bad, &to->nbad, &to->capbad, from->bad[i]);
    from->nbad = 0;
}

int an_read_dir(struct an *a, const char *dir)
{
    struct reader rd = {.opt = &a->opt};
    struct dr_dir_opts o = {a->opt.backend, a->opt.threads, a->opt.progress, DR_BRIEF};
    struct dr_dir_cb cb = {on_dump, on_bad, &rd};
    struct dr_dir_stats st;
    char err[512];
    int rc = dr_dir_read(dir, &o, &cb, &st, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ncclguard: cannot read the dump directory %s\n", err);
        for (size_t i = 0; i < rd.nbad; i++) free(rd.bad[i]);
        free(rd.bad);
        return -1;
    }
    struct an *keep = NULL;
    if (rd.njobs) {
        int m = main_job(&rd);
        keep = rd.jobs[m];
        const char *job = an_intern_get(&keep->strs, keep->job);
        for (int i = 0; i < rd.njobs; i++) {
            struct an *other = rd.jobs[i];
            if (other == keep) continue;
            for (size_t k = 0; k < other->nranks; k++) {
                char why[512];
                snprintf(why, sizeof why, "a dump of job %s, not of job %s (%zu dumps): ignored",
                         an_intern_get(&other->strs, other->job), job, keep->nranks);
                an_add_bad(keep, an_intern_get(&other->strs, other->ranks[k].path), why);
            }
            move_bad(keep, other);
            an_free(other);
            free(other);
        }
    }
    if (rd.overflow)
        an_note(keep, "%zu dumps of more than %d jobs were not read", rd.overflow, MAX_JOBS);
    struct an_opts opt = a->opt;
    if (keep) {
        *a = *keep;
        free(keep);
    } else {
        an_init(a, &opt);
    }
    /* the reader's lines first, in file order, then the analysis's own */
    size_t nown = a->nbad;
    char **own = a->bad;
    a->bad = rd.bad;
    a->nbad = rd.nbad;
    a->capbad = rd.capbad;
    for (size_t i = 0; i < nown; i++) an_push_line(&a->bad, &a->nbad, &a->capbad, own[i]);
    free(own);
    a->files = st.files;
    a->bytes = st.bytes;
    return 0;
}
