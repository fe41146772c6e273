/*
 * test_analyze_frread.c: the pickle reader (cli/dump/pickle.c) on hand-made bytes: every
 * opcode it reads, every one it refuses, each prefix of a valid file, the bounds at
 * and beside their limits (nesting, marks, memo, integer width), cycles; then
 * Flight Recorder dumps made here read through dr_parse (detection by
 * content, cli/dump/fr.c's mapping) and a directory of them analyzed.
 */
#include <check.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/read.h"
#include "analyze/verdict.h"
#include "check_main.h"
#include "dump/dump.h"
#include "dump/pickle.h"
#include "dump/read.h"
#include "json/json.h"
#include "json/parser.h"

/* ---- a pickle writer for the tests ---- */

struct buf {
    unsigned char b[1 << 16];
    size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
    ck_assert_uint_le(b->n + n, sizeof b->b);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void op(struct buf *b, int c)
{
    unsigned char x = (unsigned char)c;
    put(b, &x, 1);
}
static void le(struct buf *b, uint64_t x, int n)
{
    for (int i = 0; i < n; i++) op(b, (int)(x >> (8 * i) & 0xff));
}
static void str(struct buf *b, const char *s) /* BINUNICODE */
{
    op(b, 'X');
    le(b, strlen(s), 4);
    put(b, s, strlen(s));
}
static void i32(struct buf *b, int32_t x) /* BININT */
{
    op(b, 'J');
    le(b, (uint32_t)x, 4);
}
static void i64(struct buf *b, int64_t x) /* LONG1, 8 bytes */
{
    op(b, 0x8a);
    op(b, 8);
    le(b, (uint64_t)x, 8);
}
static void start(struct buf *b)
{
    b->n = 0;
    op(b, 0x80);
    op(b, 2);
}

static struct dr_pk_doc *parse(const struct buf *b, char *err, size_t errlen)
{
    return dr_pk_parse(b->b, b->n, err, errlen);
}

static int64_t int_of(const struct dr_pk_val *v)
{
    int64_t x;
    ck_assert_msg(!dr_pk_int(v, &x), "not an int");
    return x;
}

/* ---- every opcode read ---- */

/* A dict with one member per opcode; each key names the opcode of its value. */
static void all_opcodes(struct buf *b)
{
    start(b);
    op(b, 0x95);
    le(b, 0, 8); /* FRAME (its length is not checked) */
    op(b, '}');
    op(b, 0x94); /* EMPTY_DICT, MEMOIZE -> memo 0 */
    op(b, '(');
    str(b, "none");
    op(b, 'N');
    str(b, "true");
    op(b, 0x88);
    str(b, "false");
    op(b, 0x89);
    str(b, "binint");
    i32(b, -5);
    str(b, "binint1");
    op(b, 'K');
    op(b, 200);
    str(b, "binint2");
    op(b, 'M');
    le(b, 60000, 2);
    str(b, "long1");
    i64(b, -1796188671344651437LL);
    str(b, "long1short");
    op(b, 0x8a);
    op(b, 2);
    le(b, 0xff7f, 2); /* -129 */
    str(b, "long4");
    op(b, 0x8b);
    le(b, 3, 4);
    le(b, 0x010203, 3);
    str(b, "long1zero");
    op(b, 0x8a);
    op(b, 0);
    str(b, "binfloat");
    op(b, 'G');
    const unsigned char f[8] = {0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}; /* pi */
    put(b, f, 8);
    op(b, 0x8c);
    op(b, 5);
    put(b, "short", 5);
    op(b, 0x8c);
    op(b, 2);
    put(b, "ab", 2);
    op(b, 0x8d);
    le(b, 4, 8);
    put(b, "long", 4);
    op(b, 0x8d);
    le(b, 3, 8);
    put(b, "xyz", 3);
    str(b, "binbytes");
    op(b, 'B');
    le(b, 2, 4);
    put(b, "\x00\x01", 2);
    str(b, "shortbytes");
    op(b, 'C');
    op(b, 1);
    put(b, "z", 1);
    str(b, "bytes8");
    op(b, 0x8e);
    le(b, 1, 8);
    put(b, "y", 1);
    str(b, "binstring");
    op(b, 'T');
    le(b, 3, 4);
    put(b, "old", 3);
    str(b, "shortstring");
    op(b, 'U');
    op(b, 2);
    put(b, "py", 2);
    /* a list by EMPTY_LIST, APPEND and APPENDS; its memo entry got again */
    str(b, "list");
    op(b, ']');
    op(b, 'q');
    op(b, 1);
    i32(b, 1);
    op(b, 'a');
    op(b, '(');
    i32(b, 2);
    i32(b, 3);
    op(b, 'e');
    str(b, "again");
    op(b, 'h');
    op(b, 1);
    str(b, "marklist");
    op(b, '(');
    i32(b, 7);
    i32(b, 8);
    op(b, 'l');
    str(b, "tuple");
    op(b, '(');
    i32(b, 1);
    i32(b, 2);
    i32(b, 3);
    i32(b, 4);
    op(b, 't');
    str(b, "empty");
    op(b, ')');
    str(b, "t1");
    i32(b, 1);
    op(b, 0x85);
    str(b, "t2");
    i32(b, 1);
    i32(b, 2);
    op(b, 0x86);
    str(b, "t3");
    i32(b, 1);
    i32(b, 2);
    i32(b, 3);
    op(b, 0x87);
    str(b, "markdict");
    op(b, '(');
    str(b, "k");
    i32(b, 9);
    op(b, 'd');
    str(b, "setitem");
    op(b, '}');
    str(b, "k");
    i32(b, 10);
    op(b, 's');
    str(b, "longput");
    i32(b, 77);
    op(b, 'r');
    le(b, 30, 4);
    op(b, '0');
    op(b, 'j');
    le(b, 30, 4); /* LONG_BINPUT, POP, LONG_BINGET */
    str(b, "dup");
    i32(b, 5);
    op(b, '2');
    op(b, '0'); /* DUP then POP: one 5 */
    op(b, '(');
    i32(b, 1);
    i32(b, 2);
    op(b, '1'); /* POP_MARK drops them */
    str(b, "popmark");
    op(b, '(');
    op(b, '0');
    i32(b, 6); /* POP of a bare mark */
    str(b, "dupkey");
    i32(b, 1);
    str(b, "dupkey");
    i32(b, 2);  /* the last wins, as in Python */
    op(b, 'u'); /* SETITEMS */
    op(b, '.');
}

START_TEST(reads_every_data_opcode)
{
    struct buf b;
    all_opcodes(&b);
    char err[256];
    struct dr_pk_doc *d = parse(&b, err, sizeof err);
    ck_assert_msg(d, "refused: %s", err);
    const struct dr_pk_val *r = dr_pk_root(d);
    ck_assert_int_eq(r->kind, DR_PK_DICT);
    ck_assert_int_eq(dr_pk_get(r, "none")->kind, DR_PK_NONE);
    ck_assert_int_eq(dr_pk_get(r, "true")->kind, DR_PK_BOOL);
    ck_assert_int_eq(int_of(dr_pk_get(r, "true")), 1);
    ck_assert_int_eq(int_of(dr_pk_get(r, "false")), 0);
    ck_assert_int_eq(int_of(dr_pk_get(r, "binint")), -5);
    ck_assert_int_eq(int_of(dr_pk_get(r, "binint1")), 200);
    ck_assert_int_eq(int_of(dr_pk_get(r, "binint2")), 60000);
    ck_assert(int_of(dr_pk_get(r, "long1")) == -1796188671344651437LL);
    ck_assert_int_eq(int_of(dr_pk_get(r, "long1short")), -129);
    ck_assert_int_eq(int_of(dr_pk_get(r, "long4")), 0x010203);
    ck_assert_int_eq(int_of(dr_pk_get(r, "long1zero")), 0);
    const struct dr_pk_val *f = dr_pk_get(r, "binfloat");
    ck_assert(f && f->kind == DR_PK_FLOAT && f->u.f > 3.14159 && f->u.f < 3.14160);
    ck_assert_str_eq(dr_pk_str(dr_pk_get(r, "short")), "ab");
    ck_assert_str_eq(dr_pk_str(dr_pk_get(r, "long")), "xyz");
    const struct dr_pk_val *bb = dr_pk_get(r, "binbytes");
    ck_assert(bb && bb->kind == DR_PK_BYTES && bb->n == 2 && bb->u.s[1] == 1);
    ck_assert(!dr_pk_str(bb)); /* bytes are not a str */
    ck_assert_int_eq(dr_pk_get(r, "shortbytes")->kind, DR_PK_BYTES);
    ck_assert_int_eq(dr_pk_get(r, "bytes8")->kind, DR_PK_BYTES);
    ck_assert_int_eq(dr_pk_get(r, "binstring")->n, 3);
    ck_assert_int_eq(dr_pk_get(r, "shortstring")->n, 2);
    const struct dr_pk_val *l = dr_pk_get(r, "list");
    ck_assert_uint_eq(dr_pk_len(l), 3);
    ck_assert_int_eq(int_of(dr_pk_item(l, 2)), 3);
    ck_assert(dr_pk_get(r, "again") == l); /* the memo holds the object, not a copy */
    ck_assert_uint_eq(dr_pk_len(dr_pk_get(r, "marklist")), 2);
    ck_assert_uint_eq(dr_pk_len(dr_pk_get(r, "tuple")), 4);
    ck_assert_int_eq(dr_pk_get(r, "empty")->kind, DR_PK_TUPLE);
    ck_assert_uint_eq(dr_pk_len(dr_pk_get(r, "empty")), 0);
    ck_assert_uint_eq(dr_pk_len(dr_pk_get(r, "t1")), 1);
    ck_assert_uint_eq(dr_pk_len(dr_pk_get(r, "t2")), 2);
    ck_assert_int_eq(int_of(dr_pk_item(dr_pk_get(r, "t3"), 2)), 3);
    ck_assert_int_eq(int_of(dr_pk_get(dr_pk_get(r, "markdict"), "k")), 9);
    ck_assert_int_eq(int_of(dr_pk_get(dr_pk_get(r, "setitem"), "k")), 10);
    ck_assert_int_eq(int_of(dr_pk_get(r, "longput")), 77);
    ck_assert_int_eq(int_of(dr_pk_get(r, "dup")), 5);
    ck_assert_int_eq(int_of(dr_pk_get(r, "popmark")), 6);
    ck_assert_int_eq(int_of(dr_pk_get(r, "dupkey")), 2);
    ck_assert(!dr_pk_get(r, "absent"));
    ck_assert(!dr_pk_item(l, 3));
    dr_pk_free(d);
}
END_TEST

/* ---- what is refused ---- */

static void refused_with(const struct buf *b, const char *what)
{
    char err[256];
    struct dr_pk_doc *d = parse(b, err, sizeof err);
    ck_assert_msg(!d, "accepted, expected '%s'", what);
    ck_assert_msg(strstr(err, what), "'%s' does not say '%s'", err, what);
    ck_assert(!strchr(err, '\n'));
}

START_TEST(refuses_code_by_name)
{
    static const struct {
        int op;
        const char *name;
    } code[] = {{'c', "GLOBAL"},   {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},  {'b', "BUILD"},
                {'i', "INST"},     {'o', "OBJ"},           {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
                {0x82, "EXT1"},    {0x83, "EXT2"},         {0x84, "EXT4"},   {'P', "PERSID"},
                {'Q', "BINPERSID"}};
    for (size_t i = 0; i < sizeof code / sizeof code[0]; i++) {
        struct buf b;
        start(&b);
        str(&b, "os");
        str(&b, "system");
        op(&b, code[i].op);
        op(&b, '.');
        char want[64];
        snprintf(want, sizeof want, "opcode %s (0x%02x): pickle code is never run", code[i].name,
                 code[i].op);
        refused_with(&b, want);
    }
    /* other objects, and the text opcodes of protocol 0 */
    static const int other[] = {0x8f, 0x90, 0x91, 0x96, 0x97, 0x98, 'S', 'V',
                                'I',  'L',  'F',  'p',  'g',  0x00, 0xff};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        struct buf b;
        start(&b);
        op(&b, other[i]);
        op(&b, '.');
        refused_with(&b, "is not in the subset read");
    }
    struct buf b;
    b.n = 0;
    op(&b, 0x80);
    op(&b, 6);
    op(&b, 'N');
    op(&b, '.');
    refused_with(&b, "protocol above 5");
}
END_TEST

START_TEST(every_prefix_is_refused)
{
    struct buf b;
    all_opcodes(&b);
    for (size_t n = 0; n < b.n; n++) {
        char err[256] = "";
        struct dr_pk_doc *d = dr_pk_parse(b.b, n, err, sizeof err);
        ck_assert_msg(!d, "a prefix of %zu bytes accepted", n);
        ck_assert(err[0]);
    }
    /* a length past the end */
    start(&b);
    op(&b, 'X');
    le(&b, 100, 4);
    put(&b, "abc.", 4);
    refused_with(&b, "truncated");
    start(&b);
    op(&b, 0x8d);
    le(&b, UINT64_MAX, 8);
    refused_with(&b, "truncated");
    start(&b);
    op(&b, 0x95);
    le(&b, 1000, 8);
    op(&b, 'N');
    op(&b, '.');
    refused_with(&b, "truncated");
}
END_TEST

/* n lists, each inside the next: the outer one has depth n. */
static void nested(struct buf *b, int n)
{
    start(b);
    for (int i = 0; i < n; i++) op(b, ']');
    for (int i = 0; i < n - 1; i++) op(b, 'a');
    op(b, '.');
}

START_TEST(bounds_depth_marks_memo_integers)
{
    struct buf b;
    char err[256];
    nested(&b, DR_PK_MAX_DEPTH);
    struct dr_pk_doc *d = parse(&b, err, sizeof err);
    ck_assert_msg(d, "depth %d refused: %s", DR_PK_MAX_DEPTH, err);
    ck_assert_int_eq(dr_pk_root(d)->depth, DR_PK_MAX_DEPTH);
    dr_pk_free(d);
    nested(&b, DR_PK_MAX_DEPTH + 1);
    refused_with(&b, "nested deeper than the bound");
    /* a depth bomb of marks */
    start(&b);
    for (int i = 0; i < DR_PK_MAX_MARKS; i++) op(&b, '(');
    for (int i = 0; i < DR_PK_MAX_MARKS; i++) op(&b, '1');
    op(&b, 'N');
    op(&b, '.');
    d = parse(&b, err, sizeof err);
    ck_assert_msg(d, "%d marks refused: %s", DR_PK_MAX_MARKS, err);
    dr_pk_free(d);
    start(&b);
    for (int i = 0; i <= DR_PK_MAX_MARKS; i++) op(&b, '(');
    refused_with(&b, "marks nested deeper than the bound");
    /* the memo: an index beyond the bytes read, one never stored */
    start(&b);
    op(&b, 'N');
    op(&b, 'r');
    le(&b, 0xffffffffu, 4);
    op(&b, '.');
    refused_with(&b, "memo index out of bounds");
    start(&b);
    op(&b, 'N');
    op(&b, 'r');
    le(&b, 8, 4); /* the index equals the bytes read so far: kept */
    op(&b, 'j');
    le(&b, 8, 4);
    op(&b, '.');
    d = parse(&b, err, sizeof err);
    ck_assert_msg(d, "memo 8 refused: %s", err);
    dr_pk_free(d);
    start(&b);
    op(&b, 'N');
    op(&b, 'r');
    le(&b, 9, 4);
    op(&b, '.');
    refused_with(&b, "memo index out of bounds");
    start(&b);
    op(&b, 'h');
    op(&b, 4);
    op(&b, '.');
    refused_with(&b, "memo index never stored");
    /* integers: 8 bytes read, 9 refused */
    start(&b);
    op(&b, 0x8a);
    op(&b, 9);
    le(&b, 1, 8);
    op(&b, 0);
    op(&b, '.');
    refused_with(&b, "an integer beyond 64 bits");
    /* the stack */
    start(&b);
    op(&b, 'a');
    refused_with(&b, "stack underflow");
    start(&b);
    op(&b, '(');
    op(&b, 'N');
    op(&b, ')');
    op(&b, 'u');
    refused_with(&b, "stack underflow");
    start(&b);
    op(&b, 'N');
    op(&b, 'N');
    op(&b, '(');
    op(&b, '.');
    refused_with(&b, "STOP without a single value");
    start(&b);
    op(&b, '}');
    op(&b, '(');
    op(&b, ']');
    op(&b, 'N');
    op(&b, 'u');
    op(&b, '.');
    refused_with(&b, "an unhashable key");
    start(&b);
    op(&b, '}');
    op(&b, '(');
    op(&b, 'N');
    op(&b, 'u');
    op(&b, '.');
    refused_with(&b, "a key without a value");
}
END_TEST

START_TEST(no_cycles)
{
    struct buf b;
    start(&b); /* L.append(L) */
    op(&b, ']');
    op(&b, 'q');
    op(&b, 0);
    op(&b, 'h');
    op(&b, 0);
    op(&b, 'a');
    op(&b, '.');
    refused_with(&b, "a container put in itself");
    start(&b); /* L1.append(L0); L0.append(L1) */
    op(&b, ']');
    op(&b, 'q');
    op(&b, 0);
    op(&b, ']');
    op(&b, 'q');
    op(&b, 1);
    op(&b, 'h');
    op(&b, 0);
    op(&b, 'a');
    op(&b, '0');
    op(&b, 'h');
    op(&b, 1);
    op(&b, 'a');
    op(&b, '.');
    refused_with(&b, "a container changed after it was put in another");
    /* sharing without a cycle is data: [X, X] */
    start(&b);
    op(&b, ']');
    op(&b, ']');
    op(&b, 'q');
    op(&b, 0);
    op(&b, 'a');
    op(&b, 'h');
    op(&b, 0);
    op(&b, 'a');
    op(&b, '.');
    char err[256];
    struct dr_pk_doc *d = parse(&b, err, sizeof err);
    ck_assert_msg(d, "refused: %s", err);
    ck_assert(dr_pk_item(dr_pk_root(d), 0) == dr_pk_item(dr_pk_root(d), 1));
    dr_pk_free(d);
}
END_TEST

/* ---- Flight Recorder dumps ---- */

struct fentry {
    int record, seq, p2p;
    const char *prof, *dtype, *state;
    int dims[2]; /* input_sizes [[d0, d1]] (d1 0: one dimension) */
    int retired;
    int64_t created_ns, timeout_ms;
};

static void kv_str(struct buf *b, const char *k, const char *v)
{
    str(b, k);
    str(b, v);
}

static void fr_dump(struct buf *b, const char *ranks, int last_enqueued, const struct fentry *e,
                    size_t n, int gloo_config)
{
    start(b);
    op(b, '}');
    op(b, '(');
    kv_str(b, "version", "2.10");
    str(b, "pg_config");
    op(b, '}');
    op(b, '(');
    str(b, gloo_config ? "" : "7");
    op(b, '}');
    op(b, '(');
    kv_str(b, "name", gloo_config ? "" : "7");
    kv_str(b, "desc", "");
    kv_str(b, "ranks", ranks);
    op(b, 'u');
    op(b, 'u');
    kv_str(b, "comm_lib_version", "2.21.5");
    str(b, "pg_status");
    op(b, '}');
    op(b, '(');
    str(b, "7");
    op(b, '}');
    op(b, '(');
    str(b, "last_enqueued_collective");
    i32(b, last_enqueued);
    str(b, "last_completed_collective");
    i32(b, -1);
    op(b, 'u');
    op(b, 'u');
    str(b, "entries");
    op(b, ']');
    op(b, '(');
    for (size_t i = 0; i < n; i++) {
        op(b, '}');
        op(b, '(');
        str(b, "record_id");
        i32(b, e[i].record);
        str(b, "process_group");
        str(b, "7");
        str(b, "tp");
        op(b, 0x86);
        str(b, "thread_id");
        str(b, "140139537927040");
        str(b, "collective_seq_id");
        i32(b, e[i].seq);
        str(b, "p2p_seq_id");
        i32(b, e[i].p2p);
        kv_str(b, "profiling_name", e[i].prof);
        str(b, "time_created_ns");
        i64(b, e[i].created_ns);
        str(b, "input_sizes");
        op(b, ']');
        op(b, ']');
        i32(b, e[i].dims[0]);
        op(b, 'a');
        if (e[i].dims[1]) {
            i32(b, e[i].dims[1]);
            op(b, 'a');
        }
        op(b, 'a');
        str(b, "input_dtypes");
        op(b, ']');
        str(b, e[i].dtype);
        op(b, 'a');
        kv_str(b, "state", e[i].state);
        str(b, "retired");
        op(b, e[i].retired ? 0x88 : 0x89);
        str(b, "timeout_ms");
        i32(b, (int32_t)e[i].timeout_ms);
        str(b, "is_p2p");
        op(b, e[i].p2p ? 0x88 : 0x89);
        op(b, 'u');
    }
    op(b, 'e');
    op(b, 'u');
    op(b, '.');
}

#define T0 1796188671000000000LL

static struct dr_dump *read_fr(const struct buf *b, const char *path)
{
    char *copy = malloc(b->n + NG_JSON_PADDING), err[512];
    memcpy(copy, b->b, b->n);
    memset(copy + b->n, 0, NG_JSON_PADDING);
    ng_jparser *p = ng_jparser_new(NG_JSON_SIMDJSON);
    struct dr_dump *d = dr_parse(p, copy, b->n, path, 0, err, sizeof err);
    ck_assert_msg(d, "refused: %s", err);
    ng_jparser_free(p);
    free(copy);
    return d;
}

static const struct dr_op *op_seq(const struct dr_dump *d, uint64_t seq, uint64_t p2p)
{
    for (size_t i = 0; i < d->nops; i++)
        if (d->ops[i].seq == seq && d->ops[i].p2p_seq == p2p) return &d->ops[i];
    ck_abort_msg("no op #%llu", (unsigned long long)seq);
    return NULL;
}

START_TEST(maps_an_fr_dump)
{
    const struct fentry e[] = {
        {0, 1, 0, "nccl:all_reduce", "BFloat16", "scheduled", {4, 8}, 1, T0, 1000},
        {1, 0, 1, "nccl:send 1->2", "Float", "completed", {16, 0}, 0, T0 + 1, 1000},
        {2, 2, 0, "nccl:_allgather_base", "Float", "started", {10, 0}, 0, T0 + 2, 1000},
        {3, 3, 0, "gloo:all_reduce", "Long", "scheduled", {3, 0}, 0, T0 + 3000000000LL, 1000},
        {4, 0, 2, "gloo:recv 1<-0", "Char", "scheduled", {5, 0}, 0, T0 + 3000000000LL, 1000},
    };
    struct buf b;
    fr_dump(&b, "[4, 5, 6]", 3, e, 5, 0);
    struct dr_dump *d = read_fr(&b, "/nonexistent/dir/comm_lib_trace_rank_5");
    ck_assert_str_eq(d->schema, "torch.fr/2.10");
    ck_assert_int_eq(d->rank, 5);
    ck_assert_str_eq(d->job, "torch FR comm_lib_trace_rank_*");
    ck_assert_int_eq(d->versions.nccl, 22105);
    ck_assert(!d->host && d->pid == DR_NONE && !d->has_threads);
    ck_assert(d->time_ns == T0 + 3000000000LL); /* no file: its newest entry */
    ck_assert_uint_eq(d->ncomms, 1);
    ck_assert_int_eq(d->comms[0].rank, 1);
    ck_assert_int_eq(d->comms[0].nranks, 3);
    ck_assert_uint_eq(d->comms[0].last_seq, 3);
    ck_assert_uint_eq(d->nops, 5);
    /* in flight first, newest first */
    ck_assert_uint_eq(d->ops[0].index, 4);
    ck_assert_uint_eq(d->ops[d->nops - 1].index, 0);
    const struct dr_op *o = op_seq(d, 1, 0);
    ck_assert_int_eq(o->op, NG_OP_ALLREDUCE);
    ck_assert_uint_eq(o->count, 32);
    ck_assert_str_eq(o->datatype, "bfloat16");
    ck_assert_uint_eq(o->bytes, 64);
    ck_assert_int_eq(o->state, NG_OP_COMPLETED); /* retired */
    ck_assert_int_eq(o->comm_rank, 1);
    ck_assert_uint_eq(o->thread, 140139537927040ull);
    ck_assert(o->enqueue_ns == T0);
    ck_assert_int_eq(o->flags, 0);
    o = op_seq(d, 0, 1);
    ck_assert_int_eq(o->op, NG_OP_SEND);
    ck_assert_int_eq(o->peer, 2);
    ck_assert_int_eq(o->state, NG_OP_COMPLETED);
    o = op_seq(d, 2, 0);
    ck_assert_int_eq(o->op, NG_OP_ALLGATHER);
    ck_assert_int_eq(o->state, NG_OP_STARTED);
    ck_assert_int_eq(o->flags, DR_OP_TIMEOUT); /* 3 s in flight, 1 s allowed */
    ck_assert_int_eq(o->peer, DR_NONE);
    o = op_seq(d, 3, 0);
    ck_assert_str_eq(o->datatype, "int64");
    ck_assert_uint_eq(o->bytes, 24);
    ck_assert_int_eq(o->flags, 0); /* just enqueued */
    o = op_seq(d, 0, 2);
    ck_assert_int_eq(o->op, NG_OP_RECV);
    ck_assert_int_eq(o->peer, 0);
    ck_assert_str_eq(o->datatype, "int8");
    ck_assert_str_eq(d->reason, "timeout");
    uint64_t id = d->comms[0].id;
    dr_free(d);
    /* another rank of the group: the same communicator id, its own place */
    fr_dump(&b, "[4, 5, 6]", 3, e, 1, 0);
    d = read_fr(&b, "comm_lib_trace_rank_6");
    ck_assert(d->comms[0].id == id);
    ck_assert_int_eq(d->comms[0].rank, 2);
    ck_assert_str_eq(d->reason, "torch_fr");
    dr_free(d);
    /* other members: another communicator */
    fr_dump(&b, "[4, 5]", 3, e, 1, 0);
    d = read_fr(&b, "comm_lib_trace_rank_5");
    ck_assert(d->comms[0].id != id);
    ck_assert_int_eq(d->comms[0].nranks, 2);
    dr_free(d);
    /* Gloo's form: the members under "" */
    fr_dump(&b, "[4, 5, 6]", 3, e, 1, 1);
    d = read_fr(&b, "comm_lib_trace_rank_4");
    ck_assert_uint_eq(d->ncomms, 1);
    ck_assert_int_eq(d->comms[0].rank, 0);
    dr_free(d);
}
END_TEST

START_TEST(refuses_what_is_not_fr)
{
    struct buf b;
    char err[512];
    ng_jparser *p = ng_jparser_new(NG_JSON_SIMDJSON);
    start(&b);
    op(&b, ']');
    op(&b, '.');
    ck_assert(!dr_parse(p, (const char *)b.b, b.n, "x0", 0, err, sizeof err));
    ck_assert_str_eq(err, "Flight Recorder dump: not a dict");
    start(&b);
    op(&b, '}');
    kv_str(&b, "version", "3.0");
    op(&b, 's');
    op(&b, '.');
    ck_assert(!dr_parse(p, (const char *)b.b, b.n, "x0", 0, err, sizeof err));
    ck_assert_msg(strstr(err, "no \"entries\""), "%s", err);
    ng_jparser_free(p);
}
END_TEST

/* A directory of FR dumps: rank 1 never called #3, which ranks 0 and 2 wait in,
 * enqueued just now (no timeout): the dumps' being FR says that it is a hang. */
START_TEST(analyzes_a_directory_of_fr_dumps)
{
    char dir[] = "/tmp/ng-frread-XXXXXX";
    ck_assert(mkdtemp(dir));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t t = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    for (int r = 0; r < 3; r++) {
        struct fentry e[3];
        for (int s = 0; s < 3; s++)
            e[s] = (struct fentry){s,       s + 1,       0,       "gloo:all_reduce",
                                   "Float", "scheduled", {64, 0}, s < 2,
                                   t + s,   600000};
        struct buf b;
        fr_dump(&b, "[0, 1, 2]", r == 1 ? 2 : 3, e, r == 1 ? 2 : 3, 1);
        char path[128];
        snprintf(path, sizeof path, "%s/trace_%d", dir, r);
        FILE *f = fopen(path, "wb");
        ck_assert(f && fwrite(b.b, 1, b.n, f) == b.n);
        fclose(f);
    }
    char junk[128]; /* a file that is neither JSON nor pickle: not a dump */
    snprintf(junk, sizeof junk, "%s/notes.txt", dir);
    FILE *f = fopen(junk, "w");
    fputs("hello", f);
    fclose(f);
    struct an_opts o = {.threads = 1};
    struct an a;
    an_init(&a, &o);
    ck_assert_int_eq(an_read_dir(&a, dir), 0);
    ck_assert_uint_eq(a.files, 3);
    ck_assert_uint_eq(a.nranks, 3);
    ck_assert_str_eq(an_intern_get(&a.strs, a.ranks[0].reason), "torch_fr");
    ck_assert_int_eq(an_verdict(&a), AN_EXIT_CULPRIT);
    ck_assert_uint_eq(a.nculprits, 1);
    ck_assert_int_eq(a.culprits[0].f.cause, AN_MISSING);
    ck_assert_int_eq(a.culprits[0].f.grank, 1);
    ck_assert_uint_eq(a.culprits[0].f.seq, 3);
    an_free(&a);
    for (int r = 0; r < 3; r++) {
        char path[128];
        snprintf(path, sizeof path, "%s/trace_%d", dir, r);
        unlink(path);
    }
    unlink(junk);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("frread");
    TCase *tc = tcase_create("pickle");
    tcase_add_test(tc, reads_every_data_opcode);
    tcase_add_test(tc, refuses_code_by_name);
    tcase_add_test(tc, every_prefix_is_refused);
    tcase_add_test(tc, bounds_depth_marks_memo_integers);
    tcase_add_test(tc, no_cycles);
    suite_add_tcase(s, tc);
    tc = tcase_create("fr");
    tcase_add_test(tc, maps_an_fr_dump);
    tcase_add_test(tc, refuses_what_is_not_fr);
    tcase_add_test(tc, analyzes_a_directory_of_fr_dumps);
    suite_add_tcase(s, tc);
    return ng_check_run(s);
}
