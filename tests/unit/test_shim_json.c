/*
 * test_shim_json.c: the async-signal-safe JSON writer (shim/base/json.c).
 *
 * Documents are written to a temp file through buffers of several sizes (1 and
 * 7 bytes force a flush inside almost every token) and compared byte for byte
 * with the expected text. Numbers are compared with what snprintf writes.
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

START_TEST(exact_across_flushes)
{
    check_sample(7);
    check_sample(1);
    check_sample(2);
    check_sample(4096);
}
END_TEST

START_TEST(newline_layout)
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

START_TEST(string_escapes)
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
START_TEST(escape_at_every_position)
{
    static const struct {
        char c;
        const char *esc;
    } special[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\x01', "\\u0001"},
                   {'\x1f', "\\u001f"}, {'\x80', "\\ufffd"}, {'\xff', "\\ufffd"}};
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

START_TEST(string_utf8)
{
    /* valid: 2, 3 and 4 bytes, and the limits of each range */
    check_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
                 "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\n");
    check_string("\xc2\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", 12,
                 "\"\xc2\x80\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\"\n");
    /* invalid: one replacement per byte that starts no valid sequence */
    check_string("a\x80z", 3, "\"a\\ufffdz\"\n");               /* stray continuation */
    check_string("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"\n");         /* overlong '/' */
    check_string("\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"\n"); /* overlong, 3 bytes */
    check_string("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"\n"); /* surrogate D800 */
    check_string("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"\n"); /* > 10FFFF */
    check_string("\xff\xfe", 2, "\"\\ufffd\\ufffd\"\n");
    check_string("x\xe2\x82", 3, "\"x\\ufffd\\ufffd\"\n");      /* truncated at the end */
    check_string("\xe2\x82z", 3, "\"\\ufffd\\ufffdz\"\n");      /* truncated in the middle */
}
END_TEST

/* NG_JSON_MEMORY keeps the document in the buffer and fails when it does not
 * fit; NG_JSON_COUNT keeps nothing and counts. */
START_TEST(memory_and_count_modes)
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
START_TEST(numbers_without_trailing_zeros)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{300, "300"}, {0.5, "0.5"}, {1.25, "1.25"}, {1.2346, "1.235"},
                 {-2, "-2"}, {1e9, "1000000000"}, {0, "0"}};
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

START_TEST(format_helpers)
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

/* Each way json.c writes an integer gives what printf writes: the helper and
 * a value of the writer; v is an int64_t when is_signed. */
static void check_integer(uint64_t v, int is_signed)
{
    char want[32], got[32], doc[64];
    size_t n;
    if (is_signed) {
        snprintf(want, sizeof want, "%lld", (long long)(int64_t)v);
        n = ncclguard_fmt_int64(got, (int64_t)v);
    } else {
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        n = ncclguard_fmt_uint64(got, v);
    }
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(got, want);

    struct ng_json j;
    ncclguard_json_init(&j, NG_JSON_MEMORY, doc, sizeof doc - 1);
    if (is_signed)
        ncclguard_json_int64(&j, (int64_t)v);
    else
        ncclguard_json_uint64(&j, v);
    ck_assert_int_eq(ncclguard_json_finish(&j), 0);
    doc[ncclguard_json_length(&j)] = '\0';
    strcat(want, "\n");
    ck_assert_str_eq(doc, want);
}

/* Integers are formatted eight digits at a time: every count of digits at its
 * limits (powers of ten and their neighbours), both signs, the extremes of
 * both types, and pseudo-random values of every magnitude. */
START_TEST(integers_as_printf_writes_them)
{
    check_integer((uint64_t)INT64_MIN, 1);
    check_integer((uint64_t)INT64_MIN + 1, 1);
    check_integer((uint64_t)INT64_MAX, 1);
    check_integer(UINT64_MAX, 0);
    check_integer((uint64_t)INT64_MAX + 1, 0);
    uint64_t p = 1;
    for (int digits = 1; digits <= 20; digits++, p *= 10) {
        const uint64_t near[] = {p - 1, p, p + 1, digits < 20 ? p * 10 - 1 : UINT64_MAX};
        for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
            check_integer(near[i], 0);
            if (near[i] <= (uint64_t)INT64_MAX) {
                check_integer(near[i], 1);
                check_integer(0 - near[i], 1); /* its negative */
            }
        }
    }
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 200000; i++) {
        uint64_t v = next_value(&state);
        check_integer(v, 0);
        check_integer(v, 1);
    }
}
END_TEST

/* Hex strings, written eight digits at a time, as printf's %016llx. */
START_TEST(hex_as_printf_writes_it)
{
    uint64_t state = 0x243f6a8885a308d3u;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = i == 0 ? 0 : i == 1 ? UINT64_MAX : i == 2 ? 0x0123456789abcdefu
                                                               : next_value(&state);
        char doc[64], want[64];
        struct ng_json j;
        ncclguard_json_init(&j, NG_JSON_MEMORY, doc, sizeof doc - 1);
        ncclguard_json_hex64(&j, v);
        ck_assert_int_eq(ncclguard_json_finish(&j), 0);
        doc[ncclguard_json_length(&j)] = '\0';
        snprintf(want, sizeof want, "\"%016llx\"\n", (unsigned long long)v);
        ck_assert_str_eq(doc, want);
    }
}
END_TEST

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

START_TEST(misuse_is_sticky_einval)
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

START_TEST(write_errors_are_reported)
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

/* ncclguard_json_quote: escaped, quoted, and cut (never broken) when too long. */
START_TEST(quote_for_json_lines)
{
    char out[64];
    ck_assert_str_eq(ncclguard_json_quote("a\"b\\c\n", out, sizeof out), "\"a\\\"b\\\\c\\n\"");
    char small[16]; /* room for (16 - 3) / 6 = 2 input bytes */
    ck_assert_str_eq(ncclguard_json_quote("/some/long/path", small, sizeof small), "\"/s\"");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shim_json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, exact_across_flushes);
    tcase_add_test(tc, newline_layout);
    tcase_add_test(tc, string_escapes);
    tcase_add_test(tc, escape_at_every_position);
    tcase_add_test(tc, string_utf8);
    tcase_add_test(tc, memory_and_count_modes);
    tcase_add_test(tc, numbers_without_trailing_zeros);
    tcase_add_test(tc, format_helpers);
    tcase_add_test(tc, integers_as_printf_writes_them);
    tcase_add_test(tc, hex_as_printf_writes_it);
    tcase_add_test(tc, quote_for_json_lines);
    tcase_add_test(tc, misuse_is_sticky_einval);
    tcase_add_test(tc, write_errors_are_reported);
    suite_add_tcase(s, tc);
    return ng_check_run(s);
}
