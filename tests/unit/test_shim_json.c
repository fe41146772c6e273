/*
 * test_shim_json.c: the async-signal-safe JSON writer (shim/base/json.c).
 *
 * Documents are written to a temp file through buffers of several sizes (1 and
 * 7 bytes force a flush inside almost every token) and compared byte for byte
 * with the expected text. Numbers are compared with what snprintf writes, and
 * members written through a run with those of the writer's own calls.
 */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"

/* Output of one writer, read back from its temp file. */
struct sink {
    int fd;
    char path[64];
};

static void sink_open(struct sink *s)
{
    strcpy(s->path, "/tmp/ng-json-XXXXXX");
    s->fd = mkstemp(s->path);
    ck_assert_int_ge(s->fd, 0);
}

/* The file's content (NUL-terminated, caller frees); closes and removes it. */
static char *sink_read(struct sink *s, size_t *len)
{
    off_t n = lseek(s->fd, 0, SEEK_END);
    ck_assert_int_ge(n, 0);
    char *out = malloc((size_t)n + 1);
    ck_assert_int_eq(pread(s->fd, out, (size_t)n, 0), n);
    out[n] = '\0';
    close(s->fd);
    unlink(s->path);
    if (len) *len = (size_t)n;
    return out;
}

/* A small document that uses every value kind. */
static void sample(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    ncclguard_json_key(j, "schema");
    ncclguard_json_string(j, "t/1");
    ncclguard_json_key(j, "ints");
    ncclguard_json_begin_array(j);
    ncclguard_json_int64(j, 0);
    ncclguard_json_int64(j, -42);
    ncclguard_json_int64(j, INT64_MIN);
    ncclguard_json_int64(j, INT64_MAX);
    ncclguard_json_uint64(j, UINT64_MAX);
    ncclguard_json_end_array(j);
    static const struct ng_json_key id = NG_JSON_KEY("id");
    ncclguard_json_key_fixed(j, &id); /* the same bytes as ncclguard_json_key */
    ncclguard_json_hex64(j, 0x5f3a00000000beefULL);
    ncclguard_json_key(j, "d");
    ncclguard_json_begin_array(j);
    ncclguard_json_double(j, 1.5, 3);
    ncclguard_json_double(j, -2.25, 1);
    ncclguard_json_double(j, 0.125, 2);
    ncclguard_json_double(j, -0.0001, 2);
    ncclguard_json_double(j, 42.0, 0);
    ncclguard_json_double(j, 0.999, 2);
    ncclguard_json_double(j, 2.5e18, 2);
    ncclguard_json_double(j, 0.0 / 0.0, 2);
    ncclguard_json_end_array(j);
    ncclguard_json_key(j, "flags");
    ncclguard_json_begin_array(j);
    ncclguard_json_bool(j, 1);
    ncclguard_json_bool(j, 0);
    ncclguard_json_null(j);
    ncclguard_json_string(j, NULL);
    ncclguard_json_end_array(j);
    ncclguard_json_key(j, "empty");
    ncclguard_json_begin_object(j);
    ncclguard_json_end_object(j);
    ncclguard_json_key(j, "nested");
    ncclguard_json_begin_array(j);
    ncclguard_json_begin_object(j);
    ncclguard_json_key(j, "k\"ey");
    ncclguard_json_begin_array(j);
    ncclguard_json_end_array(j);
    ncclguard_json_end_object(j);
    ncclguard_json_end_array(j);
    ncclguard_json_end_object(j);
}

static const char sample_text[] =
    "{\"schema\":\"t/1\","
    "\"ints\":[0,-42,-9223372036854775808,9223372036854775807,18446744073709551615],"
    "\"id\":\"5f3a00000000beef\","
    "\"d\":[1.500,-2.3,0.13,0.00,42,1.00,2.50e+18,null],"
    "\"flags\":[true,false,null,null],"
    "\"empty\":{},"
    "\"nested\":[{\"k\\\"ey\":[]}]}\n";

/* Writes sample() through a buffer of `cap` bytes and checks the bytes. */
static void check_sample(size_t cap)
{
    struct sink s;
    sink_open(&s);
    char *buf = malloc(cap);
    struct ng_json j;
    ncclguard_json_init(&j, s.fd, buf, cap);
    sample(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    size_t len;
    char *out = sink_read(&s, &len);
    ck_assert_str_eq(out, sample_text);
    ck_assert_uint_eq(j.written, strlen(sample_text));
    free(out);
    free(buf);
}

NG_TEST(exact_across_flushes)
{
    check_sample(7);
    check_sample(1);
    check_sample(2);
    check_sample(4096);
}
END_TEST

NG_TEST(newline_layout)
{
    struct sink s;
    sink_open(&s);
    char buf[7];
    struct ng_json j;
    ncclguard_json_init(&j, s.fd, buf, sizeof buf);
    ncclguard_json_set_newlines(&j, 2);
    ncclguard_json_begin_object(&j);
    ncclguard_json_key(&j, "a");
    ncclguard_json_int64(&j, 1);
    ncclguard_json_key(&j, "ops");
    ncclguard_json_begin_array(&j);
    for (int i = 0; i < 2; i++) {
        ncclguard_json_begin_object(&j);
        ncclguard_json_key(&j, "i");
        ncclguard_json_int64(&j, i);
        ncclguard_json_key(&j, "f");
        ncclguard_json_begin_array(&j);
        ncclguard_json_string(&j, "x");
        ncclguard_json_string(&j, "y");
        ncclguard_json_end_array(&j);
        ncclguard_json_end_object(&j);
    }
    ncclguard_json_end_array(&j);
    ncclguard_json_key(&j, "none");
    ncclguard_json_begin_array(&j);
    ncclguard_json_end_array(&j);
    ncclguard_json_end_object(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    char *out = sink_read(&s, NULL);
    ck_assert_str_eq(out, "{\n\"a\":1,\n\"ops\":[\n{\"i\":0,\"f\":[\"x\",\"y\"]},\n"
                          "{\"i\":1,\"f\":[\"x\",\"y\"]}\n],\n\"none\":[]\n}\n");
    free(out);
}
END_TEST

/* One string value through a buffer of `cap` bytes; returns the document. */
static char *string_doc(const char *s, size_t n, size_t cap)
{
    struct sink k;
    sink_open(&k);
    char buf[4096];
    struct ng_json j;
    ncclguard_json_init(&j, k.fd, buf, cap);
    ncclguard_json_string_n(&j, s, n);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    return sink_read(&k, NULL);
}

/* Through a 7-byte buffer (a flush inside the string) and a large one (the
 * string in one piece). */
static void check_string(const char *in, size_t n, const char *want)
{
    static const size_t caps[] = {7, 4096};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char *out = string_doc(in, n, caps[i]);
        ck_assert_msg(!strcmp(out, want), "buffer of %zu: %s, want %s", caps[i], out, want);
        free(out);
    }
}

NG_TEST(string_escapes)
{
    check_string("plain", 5, "\"plain\"\n");
    check_string("q\"b\\s/", 6, "\"q\\\"b\\\\s/\"\n");
    check_string("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"\n");
    check_string("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\"\n");
    check_string("a\0b", 3, "\"a\\u0000b\"\n");
    check_string("", 0, "\"\"\n");
}
END_TEST

/* Plain strings are scanned eight bytes at a time: a byte to escape is found
 * at every position of strings of every length around the word size. */
NG_TEST(escape_at_every_position)
{
    static const struct {
        char c;
        const char *esc;
    } special[] = {{'"', "\\\""},       {'\\', "\\\\"},      {'\n', "\\n"},
                   {'\x01', "\\u0001"}, {'\x1f', "\\u001f"}, {'\x80', "\\ufffd"},
                   {'\xff', "\\ufffd"}};
    for (size_t len = 0; len <= 24; len++) {
        char in[32], want[64];
        for (size_t i = 0; i < len; i++) in[i] = (char)('a' + i);
        snprintf(want, sizeof want, "\"%.*s\"\n", (int)len, in);
        check_string(in, len, want); /* no byte to escape */
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) {
                in[at] = special[k].c;
                snprintf(want, sizeof want, "\"%.*s%s%.*s\"\n", (int)at, in, special[k].esc,
                         (int)(len - at - 1), in + at + 1);
                check_string(in, len, want);
                in[at] = (char)('a' + at);
            }
    }
}
END_TEST

NG_TEST(string_utf8)
{
    /* valid: 2, 3 and 4 bytes, and the limits of each range */
    check_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
                 "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\n");
    check_string("\xc2\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", 12,
                 "\"\xc2\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\"\n");
    /* invalid: one replacement per byte that starts no valid sequence */
    check_string("a\x80z", 3, "\"a\\ufffdz\"\n");                   /* stray continuation */
    check_string("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"\n");            /* overlong '/' */
    check_string("\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"\n"); /* overlong, 3 bytes */
    check_string("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"\n"); /* surrogate D800 */
    check_string("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"\n"); /* > 10FFFF */
    check_string("\xff\xfe", 2, "\"\\ufffd\\ufffd\"\n");
    check_string("x\xe2\x82", 3, "\"x\\ufffd\\ufffd\"\n"); /* truncated at the end */
    check_string("\xe2\x82z", 3, "\"\\ufffd\\ufffdz\"\n"); /* truncated in the middle */
}
END_TEST

/* NG_JSON_MEMORY keeps the document in the buffer and fails when it does not
 * fit; NG_JSON_COUNT keeps nothing and counts. */
NG_TEST(memory_and_count_modes)
{
    char buf[32];
    struct ng_json j;
    ncclguard_json_init(&j, NG_JSON_MEMORY, buf, sizeof buf);
    ncclguard_json_begin_object(&j);
    ncclguard_json_key(&j, "a");
    ncclguard_json_int64(&j, 12);
    ncclguard_json_end_object(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    ck_assert_int_eq(ncclguard_json_length(&j), 9);
    ck_assert_int_eq(memcmp(buf, "{\"a\":12}\n", 9), 0);

    char small[8];
    ncclguard_json_init(&j, NG_JSON_MEMORY, small, sizeof small);
    ncclguard_json_string(&j, "longer than eight");
    ck_assert_int_eq(ncclguard_json_finish(&j), -1);
    ck_assert_int_eq(errno, ENOBUFS);

    char scratch[4];
    ncclguard_json_init(&j, NG_JSON_COUNT, scratch, sizeof scratch);
    ncclguard_json_string(&j, "0123456789");
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    ck_assert_int_eq(ncclguard_json_length(&j), 13); /* quotes and the newline */
}
END_TEST

/* ncclguard_json_number: at most N decimals, without trailing zeros. */
NG_TEST(numbers_without_trailing_zeros)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{300, "300"}, {0.5, "0.5"},        {1.25, "1.25"}, {1.2346, "1.235"},
                 {-2, "-2"},   {1e9, "1000000000"}, {0, "0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        struct ng_json j;
        ncclguard_json_init(&j, NG_JSON_MEMORY, buf, sizeof buf);
        ncclguard_json_number(&j, cases[i].v, 3);
        ck_assert_int_eq(ncclguard_json_finish(&j), 0);
        buf[ncclguard_json_length(&j) - 1] = '\0';
        ck_assert_str_eq(buf, cases[i].want);
    }
}
END_TEST

NG_TEST(format_helpers)
{
    char s[32];
    ck_assert_uint_eq(ncclguard_fmt_uint64(s, 0), 1);
    ck_assert_str_eq(s, "0");
    ck_assert_uint_eq(ncclguard_fmt_uint64(s, UINT64_MAX), 20);
    ck_assert_str_eq(s, "18446744073709551615");
    ck_assert_uint_eq(ncclguard_fmt_int64(s, INT64_MIN), 20);
    ck_assert_str_eq(s, "-9223372036854775808");
    ck_assert_uint_eq(ncclguard_fmt_int64(s, -7), 2);
    ck_assert_str_eq(s, "-7");
    /* every count of digits, at its limits */
    uint64_t p = 1;
    for (int digits = 1; digits <= 20; digits++, p *= 10) {
        uint64_t v[] = {p - 1, p, p + 1, digits < 20 ? p * 10 - 1 : UINT64_MAX};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            char want[32];
            snprintf(want, sizeof want, "%llu", (unsigned long long)v[i]);
            ck_assert_uint_eq(ncclguard_fmt_uint64(s, v[i]), strlen(want));
            ck_assert_str_eq(s, want);
        }
    }
}
END_TEST

/* A pseudo-random 64-bit value of a random magnitude (xorshift, fixed seed:
 * the same values in every run, so that a failure can be repeated). */
static uint64_t next_value(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x >> (x % 64);
}

enum number { SIGNED, UNSIGNED, HEX };

/* v written both ways into doc[cap], as a value of the writer and as a
 * member of a run: [value,{"v":value}] (v is an int64_t when SIGNED). */
static void both_ways(char *doc, size_t cap, enum number kind, uint64_t v)
{
    static const struct ng_json_key k = NG_JSON_KEY("v");
    static struct ng_json_run run;
    struct ng_json j;
    ncclguard_json_init(&j, NG_JSON_MEMORY, doc, cap - 1);
    ncclguard_json_begin_array(&j);
    if (kind == SIGNED) ncclguard_json_int64(&j, (int64_t)v);
    if (kind == UNSIGNED) ncclguard_json_uint64(&j, v);
    if (kind == HEX) ncclguard_json_hex64(&j, v);
    ncclguard_json_begin_object(&j);
    ncclguard_json_run_begin(&run, &j);
    if (kind == SIGNED) ncclguard_json_run_int64(&run, &k, (int64_t)v);
    if (kind == UNSIGNED) ncclguard_json_run_uint64(&run, &k, v);
    if (kind == HEX) ncclguard_json_run_hex64(&run, &k, v);
    ncclguard_json_run_flush(&run);
    ncclguard_json_end_object(&j);
    ncclguard_json_end_array(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    doc[ncclguard_json_length(&j)] = '\0';
}

/* Each way json.c writes an integer gives what printf writes: the helper, a
 * value of the writer and a member of a run. */
static void check_integer(uint64_t v, enum number kind)
{
    char want[32], got[32], doc[64], want_doc[96];
    size_t n;
    if (kind == SIGNED) {
        snprintf(want, sizeof want, "%lld", (long long)(int64_t)v);
        n = ncclguard_fmt_int64(got, (int64_t)v);
    } else {
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        n = ncclguard_fmt_uint64(got, v);
    }
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(got, want);
    both_ways(doc, sizeof doc, kind, v);
    snprintf(want_doc, sizeof want_doc, "[%s,{\"v\":%s}]\n", want, want);
    ck_assert_str_eq(doc, want_doc);
}

/* Integers are formatted eight digits at a time: every count of digits at its
 * limits (powers of ten and their neighbours), both signs, the extremes of
 * both types, and pseudo-random values of every magnitude. */
NG_TEST(integers_as_printf_writes_them)
{
    check_integer((uint64_t)INT64_MIN, SIGNED);
    check_integer((uint64_t)INT64_MIN + 1, SIGNED);
    check_integer((uint64_t)INT64_MAX, SIGNED);
    check_integer(UINT64_MAX, UNSIGNED);
    check_integer((uint64_t)INT64_MAX + 1, UNSIGNED);
    uint64_t p = 1;
    for (int digits = 1; digits <= 20; digits++, p *= 10) {
        const uint64_t near[] = {p - 1, p, p + 1, digits < 20 ? p * 10 - 1 : UINT64_MAX};
        for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
            check_integer(near[i], UNSIGNED);
            if (near[i] <= (uint64_t)INT64_MAX) {
                check_integer(near[i], SIGNED);
                check_integer(0 - near[i], SIGNED); /* its negative */
            }
        }
    }
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        uint64_t v = next_value(&state);
        check_integer(v, UNSIGNED);
        check_integer(v, SIGNED);
    }
}
END_TEST

/* Hex strings, written eight digits at a time, as printf's %016llx. */
NG_TEST(hex_as_printf_writes_it)
{
    uint64_t state = 0x243f6a8885a308d3u;
    for (int i = 0; i < 20000; i++) {
        uint64_t v = i == 0   ? 0
                     : i == 1 ? UINT64_MAX
                     : i == 2 ? 0x0123456789abcdefu
                              : next_value(&state);
        char doc[64], want[64];
        both_ways(doc, sizeof doc, HEX, v);
        snprintf(want, sizeof want, "[\"%016llx\",{\"v\":\"%016llx\"}]\n", (unsigned long long)v,
                 (unsigned long long)v);
        ck_assert_str_eq(doc, want);
    }
}
END_TEST

/* The members of the document of runs_write_what_the_calls_write: with a run, or (run NULL)
 * with the writer's own calls, which the run must match byte for byte. */
static void record_members(struct ng_json *j, struct ng_json_run *run, int i)
{
    static const struct ng_json_key a = NG_JSON_KEY("a"), b = NG_JSON_KEY("bee"),
                                    c = NG_JSON_KEY("c"), d = NG_JSON_KEY("d"),
                                    s = NG_JSON_KEY("s"), f = NG_JSON_KEY("flags"),
                                    longest = NG_JSON_KEY("a_key_of_twenty_nine_bytes___");
    static const char *const strings[] = {
        "plain",
        "",
        NULL,
        "needs \"escapes\"",
        "caf\xc3\xa9",
        "bad \xff byte",
        "123456789012345678901234567890123456789012345678",  /* NG_JSON_RUN_STRING_MAX */
        "1234567890123456789012345678901234567890123456789", /* one more: the writer's */
    };
    _Static_assert(sizeof("1234567890123456789012345678901234567890123456789") ==
                       NG_JSON_RUN_STRING_MAX + 2,
                   "the strings straddle the limit");
    _Static_assert(sizeof("a_key_of_twenty_nine_bytes___") == NG_JSON_KEY_MAX + 1,
                   "the longest key fills its block");
    const char *str = strings[i % (sizeof strings / sizeof strings[0])];
    if (run) {
        ncclguard_json_run_int64(run, &a, -i * 1000003LL);
        ncclguard_json_run_uint64(run, &b, UINT64_MAX - (uint64_t)i);
        ncclguard_json_run_hex64(run, &c, (uint64_t)i * 0x9e3779b97f4a7c15u);
        ncclguard_json_run_null(run, &d);
        ncclguard_json_run_string(run, &s, str);
        if (i % 3 == 0) {
            ncclguard_json_run_empty_array(run, &f);
        } else { /* an array with elements: the run is flushed before it */
            ncclguard_json_run_flush(run);
            ncclguard_json_key_fixed(j, &f);
            ncclguard_json_begin_array(j);
            ncclguard_json_string(j, "slow");
            ncclguard_json_end_array(j);
        }
        for (int k = 0; k < 64; k++) /* more members than the run's buffer holds */
            ncclguard_json_run_int64(run, &longest, INT64_MIN + k);
        ncclguard_json_run_flush(run);
        return;
    }
    ncclguard_json_key_fixed(j, &a);
    ncclguard_json_int64(j, -i * 1000003LL);
    ncclguard_json_key_fixed(j, &b);
    ncclguard_json_uint64(j, UINT64_MAX - (uint64_t)i);
    ncclguard_json_key_fixed(j, &c);
    ncclguard_json_hex64(j, (uint64_t)i * 0x9e3779b97f4a7c15u);
    ncclguard_json_key_fixed(j, &d);
    ncclguard_json_null(j);
    ncclguard_json_key_fixed(j, &s);
    ncclguard_json_string(j, str);
    ncclguard_json_key_fixed(j, &f);
    ncclguard_json_begin_array(j);
    if (i % 3) ncclguard_json_string(j, "slow");
    ncclguard_json_end_array(j);
    for (int k = 0; k < 64; k++) {
        ncclguard_json_key_fixed(j, &longest);
        ncclguard_json_int64(j, INT64_MIN + k);
    }
}

/* A document laid out as a dump (newlines to depth 2), records at depth 3,
 * through a buffer of `cap` bytes; the caller frees it. */
static char *records_doc(size_t cap, int with_runs)
{
    static struct ng_json_run run;
    struct sink k;
    sink_open(&k);
    char *buf = malloc(cap);
    struct ng_json j;
    ncclguard_json_init(&j, k.fd, buf, cap);
    ncclguard_json_set_newlines(&j, 2);
    ncclguard_json_begin_object(&j);
    ncclguard_json_key(&j, "ops");
    ncclguard_json_begin_array(&j);
    for (int i = 0; i < 24; i++) {
        ncclguard_json_begin_object(&j);
        if (with_runs) ncclguard_json_run_begin(&run, &j);
        record_members(&j, with_runs ? &run : NULL, i);
        ncclguard_json_end_object(&j);
    }
    ncclguard_json_end_array(&j);
    ncclguard_json_end_object(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    free(buf);
    return sink_read(&k, NULL);
}

/* Members written through a run are the bytes of the writer's calls: numbers,
 * null, strings in place and those that go the writer's way (escapes, above
 * NG_JSON_RUN_STRING_MAX), an array after a flush, a run longer than its
 * buffer; through buffers that flush inside a run's piece and that do not. */
NG_TEST(runs_write_what_the_calls_write)
{
    static const size_t caps[] = {1, 7, 100, 4096, 1 << 16};
    char *want = records_doc(4096, 0);
    ck_assert_ptr_nonnull(strstr(want, "\"s\":\"needs \\\"escapes\\\"\"")); /* as written */
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        char *got = records_doc(caps[i], 1);
        ck_assert_msg(!strcmp(got, want), "buffer of %zu: the runs wrote other bytes", caps[i]);
        free(got);
    }
    free(want);
}
END_TEST

/* A run is refused where its members cannot go: in an array, after a key
 * without its value, at a depth laid out one member per line. An empty run
 * writes nothing. */
static void run_of_one(struct ng_json *j)
{
    static const struct ng_json_key k = NG_JSON_KEY("k");
    static struct ng_json_run run;
    ncclguard_json_run_begin(&run, j);
    ncclguard_json_run_null(&run, &k);
    ncclguard_json_run_flush(&run);
}

static void run_in_array(struct ng_json *j)
{
    ncclguard_json_begin_array(j);
    run_of_one(j);
    ncclguard_json_end_array(j);
}

static void run_after_key(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    ncclguard_json_key(j, "pending");
    run_of_one(j);
    ncclguard_json_end_object(j);
}

static void run_on_lines(struct ng_json *j)
{
    ncclguard_json_set_newlines(j, 1);
    ncclguard_json_begin_object(j);
    run_of_one(j);
    ncclguard_json_end_object(j);
}

static void empty_run(struct ng_json *j)
{
    static struct ng_json_run run;
    ncclguard_json_set_newlines(j, 1); /* refused with members, not without */
    ncclguard_json_begin_object(j);
    ncclguard_json_run_begin(&run, j);
    ncclguard_json_run_flush(&run);
    ncclguard_json_end_object(j);
}

/* Runs `build` into a writer and returns finish's result and errno, and the
 * document (whatever reached the file). */
static int run_doc(void (*build)(struct ng_json *), int *err, char **out)
{
    struct sink k;
    sink_open(&k);
    char buf[64];
    struct ng_json j;
    ncclguard_json_init(&j, k.fd, buf, sizeof buf);
    build(&j);
    errno = 0;
    int rc = ncclguard_json_finish(&j);
    *err = errno;
    *out = sink_read(&k, NULL);
    return rc;
}

NG_TEST(runs_refused_where_members_cannot_go)
{
    void (*bad[])(struct ng_json *) = {run_in_array, run_after_key, run_on_lines};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err;
        char *out;
        ck_assert_msg(run_doc(bad[i], &err, &out) == -1, "case %zu accepted", i);
        ck_assert_int_eq(err, EINVAL);
        ck_assert_ptr_null(strstr(out, "\"k\"")); /* the run's member never reached it */
        free(out);
    }
    int err;
    char *out;
    ck_assert_int_eq(run_doc(empty_run, &err, &out), 0);
    ck_assert_str_eq(out, "{}\n");
    free(out);
}
END_TEST

/* ncclguard_json_quote: escaped, quoted, and cut (never broken) when too long. */
NG_TEST(quote_for_json_lines)
{
    char out[64];
    ck_assert_str_eq(ncclguard_json_quote("a\"b\\c\n", out, sizeof out), "\"a\\\"b\\\\c\\n\"");
    char small[16]; /* room for (16 - 3) / 6 = 2 input bytes */
    ck_assert_str_eq(ncclguard_json_quote("/some/long/path", small, sizeof small), "\"/s\"");
}
END_TEST

static void value_without_key(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    ncclguard_json_int64(j, 1);
    ncclguard_json_end_object(j);
}

static void key_in_array(struct ng_json *j)
{
    ncclguard_json_begin_array(j);
    ncclguard_json_key(j, "k");
    ncclguard_json_end_array(j);
}

static void key_without_value(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    ncclguard_json_key(j, "k");
    ncclguard_json_end_object(j);
}

static void wrong_end(struct ng_json *j)
{
    ncclguard_json_begin_object(j);
    ncclguard_json_end_array(j);
}

static void left_open(struct ng_json *j)
{
    ncclguard_json_begin_array(j);
    ncclguard_json_int64(j, 1);
}

static void two_values(struct ng_json *j)
{
    ncclguard_json_int64(j, 1);
    ncclguard_json_int64(j, 2);
}

static void nothing(struct ng_json *j)
{
    (void)j;
}

static void too_deep(struct ng_json *j)
{
    for (int i = 0; i <= NG_JSON_MAX_DEPTH; i++) ncclguard_json_begin_array(j);
    for (int i = 0; i <= NG_JSON_MAX_DEPTH; i++) ncclguard_json_end_array(j);
}

static void deepest(struct ng_json *j)
{
    for (int i = 0; i < NG_JSON_MAX_DEPTH; i++) ncclguard_json_begin_array(j);
    for (int i = 0; i < NG_JSON_MAX_DEPTH; i++) ncclguard_json_end_array(j);
}

NG_TEST(misuse_is_sticky_einval)
{
    void (*bad[])(struct ng_json *) = {value_without_key, key_in_array, key_without_value,
                                       wrong_end,         left_open,    two_values,
                                       nothing,           too_deep};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err;
        char *out;
        ck_assert_msg(run_doc(bad[i], &err, &out) == -1, "case %zu accepted", i);
        ck_assert_int_eq(err, EINVAL);
        free(out);
    }
    /* after the error nothing more is written (the buffered "{" is dropped) */
    int err;
    char *out;
    run_doc(value_without_key, &err, &out);
    ck_assert_ptr_null(strchr(out, '1'));
    ck_assert_ptr_null(strchr(out, '}'));
    free(out);
    /* the maximum depth itself is fine */
    ck_assert_int_eq(run_doc(deepest, &err, &out), 0);
    free(out);
}
END_TEST

NG_TEST(write_errors_are_reported)
{
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    char buf[7];
    struct ng_json j;
    ncclguard_json_init(&j, fd, buf, sizeof buf);
    sample(&j);
    ck_assert_int_eq(j.err, ENOSPC); /* known as soon as the first flush failed */
    errno = 0;
    ck_assert_int_eq(ncclguard_json_finish(&j), -1);
    ck_assert_int_eq(errno, ENOSPC);
    close(fd);

    ncclguard_json_init(&j, -1, buf, sizeof buf);
    ncclguard_json_string(&j, "a long enough string to need a flush");
    ck_assert_int_eq(ncclguard_json_finish(&j), -1);
    ck_assert_int_eq(errno, EBADF);

    ncclguard_json_init(&j, 1, NULL, 0);
    ncclguard_json_null(&j);
    ck_assert_int_eq(ncclguard_json_finish(&j), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("shim_json", "json", 0, ng_check_tests(), NULL));
}
