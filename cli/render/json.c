/*
 * render/json.c: `ncclguard analyze --json`: the same content as the text,
 * under "schema": "ncclguard.analysis/1" (docs/analysis.md), written with jansson.
 */
#include "render/json.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "dump/dump.h"
#include "render/summary.h"

#define SEP " \xe2\x86\x90 "

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *hex(uint64_t v)
{
    char b[17];
    snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
    return json_string(b);
}

/* "a ← b ← c" as ["a", "b", "c"] */
static json_t *split(const char *s)
{
    json_t *arr = json_array();
    while (s && *s) {
        const char *e = strstr(s, SEP);
        size_t n = e ? (size_t)(e - s) : strlen(s);
        json_array_append_new(arr, json_stringn(s, n));
        s = e ? e + strlen(SEP) : NULL;
    }
    return arr;
}

static json_t *thread_json(const struct an *a, const struct an_rank *r, uint32_t ti)
{
    const struct an_thread *t = &a->threads[r->th0 + ti];
    return json_pack("{sIsososososo}", "tid", (json_int_t)t->tid, "thread",
                     str_or_null(an_intern_get(&a->strs, t->name)), "main",
                     json_boolean(t->tid == r->pid), "idle", json_boolean(t->idle), "frames",
                     split(an_intern_get(&a->strs, t->where)), "python",
                     split(an_intern_get(&a->strs, t->py)));
}

/* The thread of the culprit's ops; "also": the others shown, when it is idle. */
static json_t *where_json(const struct an *a, const struct an_culprit *c)
{
    if (c->f.rank < 0 || c->thread == AN_NONE) return json_null();
    const struct an_rank *r = &a->ranks[c->f.rank];
    json_t *w = thread_json(a, r, c->thread), *also = json_array();
    for (uint32_t i = 0; i < c->nalso; i++)
        json_array_append_new(also, thread_json(a, r, c->also[i]));
    json_object_set_new(w, "also", also);
    return w;
}

static json_t *grank_json(const struct an *a, int32_t r, int64_t g)
{
    if (r >= 0) g = a->ranks[r].rank;
    return g >= 0 ? json_integer(g) : json_null();
}

static json_t *culprit_json(const struct an *a, const struct an_culprit *c)
{
    const struct an_finding *f = &c->f;
    const struct an_rank *r = f->rank >= 0 ? &a->ranks[f->rank] : NULL;
    json_t *chain = json_array(), *path = json_array();
    for (int i = 0; i < c->nchain; i++) {
        const struct an_finding *l = &a->findings[c->path[i]];
        json_array_append_new(chain, grank_json(a, c->chain[i], c->chain[i] < 0 ? l->grank : -1));
        json_array_append_new(
            path, json_pack("{sosssoso}", "rank",
                            grank_json(a, c->chain[i], c->chain[i] < 0 ? l->grank : -1), "cause",
                            an_cause_name(l->cause), "comm",
                            l->comm != AN_NONE ? hex(a->comms[l->comm].id) : json_null(), "seq",
                            l->seq ? json_integer((json_int_t)l->seq) : json_null()));
    }
    json_t *j = json_pack("{sosososssosososo}", "rank", grank_json(a, f->rank, f->grank), "host",
                          r ? str_or_null(an_intern_get(&a->strs, r->host)) : json_null(), "pid",
                          r ? json_integer(r->pid) : json_null(), "cause", an_cause_name(f->cause),
                          "comm", f->comm != AN_NONE ? hex(a->comms[f->comm].id) : json_null(),
                          "seq", f->seq ? json_integer((json_int_t)f->seq) : json_null(), "chain",
                          chain, "where", where_json(a, c));
    json_object_set_new(j, "op",
                        f->op != DR_OP_UNKNOWN ? json_string(dr_op_name(f->op)) : json_null());
    json_object_set_new(j, "p2p", json_boolean(f->peer >= 0));
    json_object_set_new(j, "peer", f->peer >= 0 ? grank_json(a, f->peer, -1) : json_null());
    json_object_set_new(j, "detail", json_string(an_intern_get(&a->strs, f->detail)));
    json_object_set_new(j, "launcher", str_or_null(an_intern_get(&a->strs, f->launcher)));
    json_object_set_new(j, "dump", r ? json_string(an_intern_get(&a->strs, r->path)) : json_null());
    json_object_set_new(j, "text", json_string(an_intern_get(&a->strs, c->text)));
    json_object_set_new(j, "path", path);
    return j;
}

static json_t *finding_json(const struct an *a, const struct an_finding *f)
{
    return json_pack("{sosssososs}", "rank", grank_json(a, f->rank, f->grank), "cause",
                     an_cause_name(f->cause), "comm",
                     f->comm != AN_NONE ? hex(a->comms[f->comm].id) : json_null(), "seq",
                     f->seq ? json_integer((json_int_t)f->seq) : json_null(), "detail",
                     an_intern_get(&a->strs, f->detail));
}

static void row(void *ctx, const char *ranks, size_t n, const char *reason, const char *status)
{
    json_array_append_new(ctx, json_pack("{sssIssss}", "ranks", ranks, "count", (json_int_t)n,
                                         "dump", reason, "state", status));
}

int rn_print_json(const struct an *a, FILE *out)
{
    json_t *culprits = json_array(), *lines = json_array(), *findings = json_array();
    json_t *notes = json_array(), *bad = json_array(), *comms = json_array(),
           *summary = json_array();
    for (size_t i = 0; i < a->nculprits; i++) {
        json_array_append_new(culprits, culprit_json(a, &a->culprits[i]));
        json_array_append_new(lines, json_string(an_intern_get(&a->strs, a->culprits[i].text)));
    }
    for (size_t i = 0; i < a->nfindings; i++)
        json_array_append_new(findings, finding_json(a, &a->findings[i]));
    for (size_t i = 0; i < a->nnotes; i++) json_array_append_new(notes, json_string(a->notes[i]));
    for (size_t i = 0; i < a->nbad; i++) json_array_append_new(bad, json_string(a->bad[i]));
    for (size_t i = 0; i < a->ncomms; i++) {
        const struct an_comm *c = &a->comms[i];
        json_array_append_new(comms,
                              json_pack("{sososIsI}", "id", hex(c->id), "name",
                                        str_or_null(an_intern_get(&a->strs, c->name)), "nranks",
                                        (json_int_t)c->nranks, "dumped", (json_int_t)c->nmembers));
    }
    rn_summary_rows(a, row, summary);
    int healthy = !a->nculprits && !a->hang;
    json_t *doc = json_pack("{ss s{sbso} sbso s{sIsIsIsoso} sososo so}", "schema",
                            "ncclguard.analysis/1", "verdict", "healthy", healthy, "culprits",
                            culprits, "stuck", a->hang, "lines", lines, "input", "files",
                            (json_int_t)a->files, "dumps", (json_int_t)a->nranks, "bytes",
                            (json_int_t)a->bytes, "job",
                            str_or_null(an_intern_get(&a->strs, a->job)), "not_used", bad,
                            "communicators", comms, "findings", findings, "notes", notes, "summary",
                            summary);
    if (!doc) return -1;
    int rc = json_dumpf(doc, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(doc);
    return rc;
}
