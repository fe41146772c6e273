/*
 * test_json_read.c: the JSON layer of the command (cli/json/), over both back ends:
 * the record reader's conversions at their limits (json/record.h), the object walk
 * with its key hint (json/json.c), and the same answers from simdjson and jansson.
 * Each test runs once per back end (a loop test: _i is the back end).
 */
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include "json/json.h"
#include "json/parser.h"

struct rec {
    int64_t i64;
    int32_t i32;
    uint64_t u64, hex;
    char chars[6];
    uint8_t e;
    uint32_t flags;
};

static const char *const colours[] = {"red", "green", "blue"};
static const char *const flag_names[] = {"slow", "timeout"};

#define FIELD(name, kind, nullable, member, size, null_as, names)                \
    {                                                                            \
        name, kind, nullable, offsetof(struct rec, member), size, null_as, names \
    }
static const struct ng_jfield fields[] = {
    FIELD("i64", NG_JF_I64, 1, i64, 0, -7, NULL),
    FIELD("i32", NG_JF_I32, 0, i32, 0, 0, NULL),
    FIELD("u64", NG_JF_U64, 0, u64, 0, 0, NULL),
    FIELD("hex", NG_JF_HEX, 1, hex, 0, 0, NULL),
    FIELD("chars", NG_JF_CHARS, 1, chars, sizeof(((struct rec *)0)->chars), 0, NULL),
    FIELD("e", NG_JF_ENUM, 0, e, 3, 9, colours),
    FIELD("flags", NG_JF_FLAGS, 0, flags, 2, 0, flag_names),
};
#define NFIELDS ((int)(sizeof fields / sizeof fields[0]))

struct got {
    struct rec r;
    uint64_t seen;
    int bad, rc;
};

static int root_record(void *ctx, ng_jv *v)
{
    static struct ng_jrecord rec;
    if (!rec.n) ng_jrecord_init(&rec, fields, NFIELDS);
    struct got *g = ctx;
    g->rc = ng_jv_record(v, &rec, &g->r, &g->seen, &g->bad);
    return g->rc ? 1 : 0; /* a refused record ends the walk */
}

/* Reads doc as one record with back end b. */
static struct got record(int b, const char *doc)
{
    struct got g;
    memset(&g, 0, sizeof g);
    g.bad = -2;
    size_t len = strlen(doc);
    char *buf = calloc(1, len + NG_JSON_PADDING);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, doc, len);
    ng_jparser *p = ng_jparser_new(b ? NG_JSON_JANSSON : NG_JSON_SIMDJSON);
    ck_assert_ptr_nonnull(p);
    char err[160];
    int rc = ng_json_parse(p, buf, len, root_record, &g, err, sizeof err);
    ck_assert_msg(rc == (g.rc ? 1 : 0), "%s: %s", doc, err);
    ng_jparser_free(p);
    free(buf);
    return g;
}

/* The record is refused at field `bad` (its index), or read whole (bad -1). */
static void refused_at(int b, const char *doc, const char *field)
{
    struct got g = record(b, doc);
    ck_assert_msg(g.rc == -1, "%s read", doc);
    ck_assert_msg(g.bad >= 0 && !strcmp(fields[g.bad].name, field), "%s: bad %d, not %s", doc,
                  g.bad, field);
}

START_TEST(integers_at_their_limits)
{
    struct got g = record(_i, "{\"i32\":2147483647,\"i64\":-9223372036854775808,\"u64\":0}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g.r.i32, INT32_MAX);
    ck_assert(g.r.i64 == INT64_MIN);
    ck_assert_uint_eq(g.seen, 7);
    g = record(_i, "{\"i32\":-2147483648}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g.r.i32, INT32_MIN);
    refused_at(_i, "{\"i32\":2147483648}", "i32");
    refused_at(_i, "{\"i32\":-2147483649}", "i32");
    refused_at(_i, "{\"u64\":-1}", "u64");
    refused_at(_i, "{\"i32\":1.5}", "i32");
    refused_at(_i, "{\"i32\":null}", "i32"); /* not nullable */
    g = record(_i, "{\"i64\":null}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g.r.i64, -7); /* null_as */
}
END_TEST

START_TEST(hex_of_one_to_sixteen_digits)
{
    struct got g = record(_i, "{\"hex\":\"ffffffffffffffff\"}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert(g.r.hex == UINT64_MAX);
    g = record(_i, "{\"hex\":\"A\"}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_uint_eq(g.r.hex, 10);
    refused_at(_i, "{\"hex\":\"1ffffffffffffffff\"}", "hex"); /* 17 digits */
    refused_at(_i, "{\"hex\":\"\"}", "hex");
    refused_at(_i, "{\"hex\":\"12g4\"}", "hex");
    refused_at(_i, "{\"hex\":12}", "hex");
    g = record(_i, "{\"hex\":null}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_uint_eq(g.r.hex, 0);
}
END_TEST

START_TEST(chars_cut_to_fit)
{
    struct got g = record(_i, "{\"chars\":\"abcdefgh\"}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_str_eq(g.r.chars, "abcde"); /* 5 bytes and the NUL of a char[6] */
    g = record(_i, "{\"chars\":\"ab\"}");
    ck_assert_str_eq(g.r.chars, "ab");
    g = record(_i, "{\"chars\":null}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_str_eq(g.r.chars, "");
}
END_TEST

START_TEST(enum_names_match_whole)
{
    struct got g = record(_i, "{\"e\":\"blue\"}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g.r.e, 2);
    const char *others[] = {"{\"e\":\"blu\"}", "{\"e\":\"blues\"}", "{\"e\":\"\"}",
                            "{\"e\":\"gr\\u0000een\"}", "{\"e\":\"Blue\"}"};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        g = record(_i, others[k]);
        ck_assert_int_eq(g.rc, 0);
        ck_assert_msg(g.r.e == 9, "%s read as %d, not the other value", others[k], g.r.e);
    }
}
END_TEST

START_TEST(flags_by_name_and_bit)
{
    struct got g = record(_i, "{\"flags\":[\"timeout\",\"bit5\",\"slow\"]}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_uint_eq(g.r.flags, (1u << 1) | (1u << 5) | 1u);
    g = record(_i, "{\"flags\":[\"slo\"]}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_uint_eq(g.r.flags, 0);
    refused_at(_i, "{\"flags\":\"slow\"}", "flags");
}
END_TEST

START_TEST(unknown_members_skipped)
{
    struct got g = record(_i, "{\"x\":{\"i32\":1,\"y\":[1,{\"i32\":2}]},\"i32\":3,\"i3\":4,"
                              "\"i322\":5}");
    ck_assert_int_eq(g.rc, 0);
    ck_assert_int_eq(g.r.i32, 3);
    ck_assert_uint_eq(g.seen, 2);
}
END_TEST

/* ---- the object walk and its key hint ---- */

static const char *const keys_names[] = {"name", "names", "n", "id"};

struct walk {
    char order[64];
    int n;
};

static int member(void *ctx, int k, ng_jv *v)
{
    (void)v;
    struct walk *w = ctx;
    w->order[w->n++] = (char)('0' + k);
    return 0;
}

static int root_object(void *ctx, ng_jv *v)
{
    static struct ng_jkeys keys;
    if (!keys.n) ng_jkeys_init(&keys, keys_names, 4);
    return ng_jv_object(v, &keys, member, ctx);
}

static const char *walk(int b, const char *doc)
{
    static struct walk w;
    memset(&w, 0, sizeof w);
    size_t len = strlen(doc);
    char *buf = calloc(1, len + NG_JSON_PADDING);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, doc, len);
    ng_jparser *p = ng_jparser_new(b ? NG_JSON_JANSSON : NG_JSON_SIMDJSON);
    char err[160];
    int rc = ng_json_parse(p, buf, len, root_object, &w, err, sizeof err);
    ng_jparser_free(p);
    free(buf);
    return rc ? "error" : w.order;
}

START_TEST(keys_found_by_their_whole_name)
{
    /* in the table's order (the hint guesses right), out of it, and names that the
     * hint's next key begins with or that begin with it */
    ck_assert_str_eq(walk(_i, "{\"name\":1,\"names\":2,\"n\":3,\"id\":4}"), "0123");
    ck_assert_str_eq(walk(_i, "{\"id\":4,\"n\":3,\"names\":2,\"name\":1}"), "3210");
    ck_assert_str_eq(walk(_i, "{\"name\":1,\"nam\":0,\"namesx\":0,\"names\":2}"), "01");
    ck_assert_str_eq(walk(_i, "{\"n\":1,\"i\":0,\"idx\":0,\"nam\":0}"), "2");
    ck_assert_str_eq(walk(_i, "[1]"), "error");
}
END_TEST

static Suite *suite(void)
{
    TCase *tc;
    static const TTest *const none[] = {NULL};
    Suite *s = ng_check_suite("json_read", "both back ends", 0, none, &tc);
    tcase_add_loop_test(tc, integers_at_their_limits, 0, 2);
    tcase_add_loop_test(tc, hex_of_one_to_sixteen_digits, 0, 2);
    tcase_add_loop_test(tc, chars_cut_to_fit, 0, 2);
    tcase_add_loop_test(tc, enum_names_match_whole, 0, 2);
    tcase_add_loop_test(tc, flags_by_name_and_bit, 0, 2);
    tcase_add_loop_test(tc, unknown_members_skipped, 0, 2);
    tcase_add_loop_test(tc, keys_found_by_their_whole_name, 0, 2);
    return s;
}

int main(void)
{
    return ng_check_run(suite());
}
