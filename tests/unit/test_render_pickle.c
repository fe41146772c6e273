/*
 * test_render_pickle.c: the pickle writer of the Flight Recorder export
 * (cli/render/pickle.c). Its bytes, exactly: for a scalar, the bytes Python's
 * pickle.dumps(v, 2) writes; for containers the MARK forms (Python adds a memo
 * and TUPLE2, which the writer does not need); and the values read back by the
 * command's own reader (dump/pickle.h), integers at each width's edges. The e2e
 * export test loads whole exported files with Python's pickle.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include "dump/pickle.h"
#include "render/pickle.h"

/* The document's bytes between the header (80 02) and STOP ('.'), as checked. */
static void expect(struct rn_pk *p, const char *want, size_t n)
{
    ck_assert_int_eq(rn_pk_done(p), 0);
    ck_assert_uint_eq(p->len, n + 3);
    ck_assert_int_eq(p->buf[0], 0x80);
    ck_assert_int_eq(p->buf[1], 2);
    ck_assert_int_eq(p->buf[p->len - 1], '.');
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(p->buf[2 + i] == (unsigned char)want[i], "byte %zu: %02x, want %02x", i,
                      p->buf[2 + i], (unsigned char)want[i]);
    rn_pk_free(p);
}

#define EXPECT(p, lit) expect(p, lit, sizeof lit - 1)

static struct rn_pk one_int(int64_t v)
{
    struct rn_pk p;
    rn_pk_init(&p);
    rn_pk_int(&p, v);
    return p;
}

NG_TEST(scalars_are_python_s_bytes)
{
    struct rn_pk p;
    rn_pk_init(&p);
    rn_pk_none(&p);
    EXPECT(&p, "N");
    rn_pk_init(&p);
    rn_pk_bool(&p, 1);
    rn_pk_bool(&p, 0);
    EXPECT(&p, "\x88\x89");
    rn_pk_init(&p);
    rn_pk_float(&p, 1.5);
    EXPECT(&p, "G\x3f\xf8\x00\x00\x00\x00\x00\x00");
    rn_pk_init(&p);
    rn_pk_float(&p, -0.1);
    EXPECT(&p, "G\xbf\xb9\x99\x99\x99\x99\x99\x9a");
    rn_pk_init(&p);
    rn_pk_str(&p, "ab");
    rn_pk_str(&p, "");
    rn_pk_str(&p, "\xc3\xa9"); /* é, as UTF-8 */
    EXPECT(&p, "X\x02\x00\x00\x00"
               "abX\x00\x00\x00\x00X\x02\x00\x00\x00\xc3\xa9");
}
END_TEST

NG_TEST(integers_take_the_shortest_opcode)
{
    struct rn_pk p;
    p = one_int(0);
    EXPECT(&p, "K\x00");
    p = one_int(255);
    EXPECT(&p, "K\xff");
    p = one_int(256);
    EXPECT(&p, "M\x00\x01");
    p = one_int(65535);
    EXPECT(&p, "M\xff\xff");
    p = one_int(65536);
    EXPECT(&p, "J\x00\x00\x01\x00");
    p = one_int(-1);
    EXPECT(&p, "J\xff\xff\xff\xff");
    p = one_int(INT32_MAX);
    EXPECT(&p, "J\xff\xff\xff\x7f");
    p = one_int(INT32_MIN);
    EXPECT(&p, "J\x00\x00\x00\x80");
    /* past 32 bits: LONG1, the fewest bytes that keep the sign */
    p = one_int((int64_t)INT32_MAX + 1);
    EXPECT(&p, "\x8a\x05\x00\x00\x00\x80\x00");
    p = one_int((int64_t)INT32_MIN - 1);
    EXPECT(&p, "\x8a\x05\xff\xff\xff\x7f\xff");
    p = one_int(1796303433489228517LL); /* a time_created_ns */
    EXPECT(&p, "\x8a\x08\xe5\xa2\xf0\x9d\x74\xc0\xed\x18");
    p = one_int(INT64_MAX);
    EXPECT(&p, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f");
    p = one_int(INT64_MIN);
    EXPECT(&p, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80");
}
END_TEST

NG_TEST(containers_are_written_as_they_fill)
{
    /* {"a": [1, ("b", None)], "c": {}} */
    struct rn_pk p;
    rn_pk_init(&p);
    rn_pk_dict_begin(&p);
    rn_pk_str(&p, "a");
    rn_pk_list_begin(&p);
    rn_pk_int(&p, 1);
    rn_pk_tuple_begin(&p);
    rn_pk_str(&p, "b");
    rn_pk_none(&p);
    rn_pk_tuple_end(&p);
    rn_pk_list_end(&p);
    rn_pk_str(&p, "c");
    rn_pk_dict_begin(&p);
    rn_pk_dict_end(&p);
    rn_pk_dict_end(&p);
    EXPECT(&p, "}(X\x01\x00\x00\x00"
               "a](K\x01(X\x01\x00\x00\x00"
               "bNteX\x01\x00\x00\x00"
               "c}(uu");
}
END_TEST

NG_TEST(unbalanced_containers_fail)
{
    struct rn_pk p;
    rn_pk_init(&p);
    rn_pk_list_begin(&p);
    ck_assert_int_eq(rn_pk_done(&p), -1); /* a list left open */
    rn_pk_free(&p);
    rn_pk_init(&p);
    rn_pk_dict_end(&p);
    ck_assert_int_eq(rn_pk_done(&p), -1); /* closed, never opened */
    rn_pk_free(&p);
}
END_TEST

NG_TEST(the_reader_reads_back_what_it_wrote)
{
    static const int64_t ints[] = {0,         1,
                                   255,       256,
                                   65535,     65536,
                                   -1,        -255,
                                   -256,      -65536,
                                   INT32_MAX, INT32_MIN,
                                   1LL << 31, -(1LL << 31) - 1,
                                   1LL << 40, -(1LL << 40),
                                   1LL << 55, INT64_MAX,
                                   INT64_MIN};
    const size_t n = sizeof ints / sizeof ints[0];
    struct rn_pk p;
    rn_pk_init(&p);
    rn_pk_dict_begin(&p);
    rn_pk_str(&p, "ints");
    rn_pk_list_begin(&p);
    for (size_t i = 0; i < n; i++) rn_pk_int(&p, ints[i]);
    rn_pk_list_end(&p);
    rn_pk_str(&p, "pg");
    rn_pk_tuple_begin(&p);
    rn_pk_str(&p, "00000000000000aa");
    rn_pk_str(&p, "undefined");
    rn_pk_tuple_end(&p);
    rn_pk_str(&p, "retired");
    rn_pk_bool(&p, 1);
    rn_pk_str(&p, "t");
    rn_pk_none(&p);
    rn_pk_str(&p, "f");
    rn_pk_float(&p, 2.25);
    rn_pk_dict_end(&p);
    ck_assert_int_eq(rn_pk_done(&p), 0);

    char err[200];
    struct dr_pk_doc *doc = dr_pk_parse(p.buf, p.len, err, sizeof err);
    ck_assert_msg(doc != NULL, "%s", err);
    const struct dr_pk_val *root = dr_pk_root(doc), *l = dr_pk_get(root, "ints");
    ck_assert_uint_eq(dr_pk_len(l), n);
    for (size_t i = 0; i < n; i++) {
        int64_t x;
        ck_assert_int_eq(dr_pk_int(dr_pk_item(l, i), &x), 0);
        ck_assert_msg(x == ints[i], "ints[%zu]: %lld, want %lld", i, (long long)x,
                      (long long)ints[i]);
    }
    const struct dr_pk_val *pg = dr_pk_get(root, "pg");
    ck_assert_int_eq(pg->kind, DR_PK_TUPLE);
    ck_assert_str_eq(dr_pk_str(dr_pk_item(pg, 0)), "00000000000000aa");
    ck_assert_str_eq(dr_pk_str(dr_pk_item(pg, 1)), "undefined");
    ck_assert_int_eq(dr_pk_get(root, "retired")->kind, DR_PK_BOOL);
    ck_assert_int_eq(dr_pk_get(root, "t")->kind, DR_PK_NONE);
    ck_assert(dr_pk_get(root, "f")->u.f == 2.25);
    dr_pk_free(doc);
    rn_pk_free(&p);
}
END_TEST

static Suite *suite(void)
{
    return ng_check_suite("render_pickle", "writer", 30, ng_check_tests(), NULL);
}

int main(void)
{
    return ng_check_run(suite());
}
