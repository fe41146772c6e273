/*
 * dumpread_fuzz.c: libFuzzer target for the dump reader of the ncclguard command
 * (cli/dump/dump.h): the input is read as one dump by both JSON libraries (simdjson
 * and jansson), fully and briefly. Neither may crash, leak or misbehave; when both
 * accept it, they must have read the same values (the two differ only in what they
 * refuse: jansson refuses duplicate keys and integers beyond 64 bits anywhere, and
 * the libraries' nesting limits differ). Then the analysis runs on what was read,
 * as the only dump of a job. An input that starts as a pickle (0x80) is a Flight
 * Recorder dump to the reader (cli/dump/fr.h); the pickle reader's tree is also
 * walked as a whole, every value visited once per path up to a budget.
 *
 * Run: make fuzz-smoke (20 s from the corpus in tests/fuzz/corpus/dumpread).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/fold.h"
#include "analyze/model.h"
#include "analyze/verdict.h"
#include "dump/dump.h"
#include "dump/pickle.h"
#include "dump/read.h"
#include "json/json.h"
#include "json/parser.h"
#include "render/json.h"
#include "render/text.h"

static ng_jparser *fast, *slow;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fast = ng_jparser_new(NG_JSON_SIMDJSON);
    slow = ng_jparser_new(NG_JSON_JANSSON);
    return 0;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

#define CHECK(c)                                 \
    do {                                         \
        if (!(c)) {                              \
            fprintf(stderr, "differ: %s\n", #c); \
            abort();                             \
        }                                        \
    } while (0)

static void same_ops(const struct dr_dump *a, const struct dr_dump *b)
{
    CHECK(a->nops == b->nops);
    for (size_t i = 0; i < a->nops; i++) {
        const struct dr_op *x = &a->ops[i], *y = &b->ops[i];
        CHECK(x->index == y->index && x->comm == y->comm && x->seq == y->seq);
        CHECK(x->p2p_seq == y->p2p_seq && x->count == y->count && x->bytes == y->bytes);
        CHECK(x->stream == y->stream && x->group == y->group && x->thread == y->thread);
        CHECK(x->enqueue_ns == y->enqueue_ns && x->gpu_start_ns == y->gpu_start_ns);
        CHECK(x->gpu_end_ns == y->gpu_end_ns && x->seen_end_ns == y->seen_end_ns);
        CHECK(x->root == y->root && x->peer == y->peer && x->marker == y->marker);
        CHECK(x->flags == y->flags && x->op == y->op && x->state == y->state);
        CHECK(!strcmp(x->datatype, y->datatype) && !strcmp(x->redop, y->redop));
    }
}

static void same_dump(const struct dr_dump *a, const struct dr_dump *b)
{
    CHECK(same_str(a->schema, b->schema) && a->major == b->major && a->minor == b->minor);
    CHECK(same_str(a->reason, b->reason) && same_str(a->incident, b->incident));
    CHECK(same_str(a->host, b->host) && same_str(a->job, b->job));
    CHECK(a->time_ns == b->time_ns && a->pid == b->pid && a->rank == b->rank);
    CHECK(a->flight.recorded == b->flight.recorded && a->ncomms == b->ncomms);
    for (size_t i = 0; i < a->ncomms; i++) {
        const struct dr_comm *x = &a->comms[i], *y = &b->comms[i];
        CHECK(x->id == y->id && x->rank == y->rank && x->nranks == y->nranks);
        CHECK(x->last_seq == y->last_seq && x->npeers == y->npeers);
        CHECK(same_str(x->name, y->name) && same_str(x->state, y->state));
    }
    same_ops(a, b);
    CHECK(a->has_threads == b->has_threads && a->nthreads == b->nthreads);
    for (size_t i = 0; i < a->nthreads; i++) {
        CHECK(a->threads[i].tid == b->threads[i].tid);
        CHECK(a->threads[i].nframes == b->threads[i].nframes);
        for (size_t k = 0; k < a->threads[i].nframes; k++)
            CHECK(same_str(a->threads[i].frames[k].function, b->threads[i].frames[k].function));
    }
    CHECK(!a->python == !b->python);
    if (a->python) CHECK(a->python->nthreads == b->python->nthreads);
}

/* The analysis of one dump: every detector, the verdict and both printers. */
static void analyze_one(const struct dr_dump *d)
{
    struct an_opts o = {0};
    struct an a;
    an_init(&a, &o);
    an_add_dump(&a, d);
    an_verdict(&a);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        rn_print_text(&a, null);
        rn_print_json(&a, null);
        fclose(null);
    }
    an_free(&a);
}

/* Every value under v (a tree may share subtrees: the budget bounds the visits). */
static void walk(const struct dr_pk_val *v, unsigned depth, size_t *budget)
{
    if (!*budget) return;
    --*budget;
    CHECK(depth <= DR_PK_MAX_DEPTH + 1 && v->depth <= DR_PK_MAX_DEPTH);
    if (v->kind == DR_PK_STR || v->kind == DR_PK_BYTES) CHECK(v->u.s[v->n] == '\0');
    if (v->kind != DR_PK_LIST && v->kind != DR_PK_TUPLE && v->kind != DR_PK_DICT) return;
    CHECK(v->depth >= 1);
    if (v->kind == DR_PK_DICT) CHECK(v->n % 2 == 0);
    for (size_t i = 0; i < v->n; i++) {
        CHECK(v->u.items[i]->depth < v->depth); /* no cycle */
        walk(v->u.items[i], depth + 1, budget);
    }
}

static void pickle_tree(const uint8_t *data, size_t size)
{
    char err[256];
    struct dr_pk_doc *d = dr_pk_parse(data, size, err, sizeof err);
    CHECK(d || (err[0] && !strchr(err, '\n')));
    if (!d) return;
    size_t budget = 100000;
    walk(dr_pk_root(d), 1, &budget);
    dr_pk_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && data[0] == 0x80) pickle_tree(data, size);
    char *buf = malloc(size + NG_JSON_PADDING);
    if (!buf) return 0;
    memcpy(buf, data, size);
    memset(buf + size, 0, NG_JSON_PADDING);
    char e1[512], e2[512];
    struct dr_dump *a = dr_parse(fast, buf, size, "fuzz", 0, e1, sizeof e1);
    CHECK(a || e1[0]); /* a refusal says why */
    struct dr_dump *b = dr_parse(slow, buf, size, "fuzz", 0, e2, sizeof e2);
    CHECK(b || e2[0]);
    struct dr_dump *c = dr_parse(fast, buf, size, "fuzz", DR_BRIEF, e1, sizeof e1);
    CHECK(!a || c); /* a brief read checks less: it may accept more */
    if (a && b) same_dump(a, b);
    if (c) analyze_one(c);
    dr_free(a);
    dr_free(b);
    dr_free(c);
    free(buf);
    return 0;
}
