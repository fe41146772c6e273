/*
 * json.c: see json.h. Everything here is async-signal-safe: the only call out
 * of this file is write(2) (and memcpy, which POSIX lists as safe too).
 */
#include "base/json.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char hex_digits[] = "0123456789abcdef";

static const uint64_t pow10_table[10] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
};

/* Keeps the first error; every later call sees it and does nothing. */
static void fail(struct ng_json *j, int err)
{
    if (!j->err) j->err = err ? err : EIO;
}

/* Hands the buffered bytes to write(2), retrying partial writes and EINTR. On
 * an error the bytes are dropped: the document is lost anyway. */
static void flush(struct ng_json *j)
{
    if (j->fd == NG_JSON_MEMORY) return; /* the bytes stay in the buffer */
    if (j->fd == NG_JSON_COUNT) {
        j->written += j->len;
        j->len = 0;
        return;
    }
    size_t off = 0;
    while (off < j->len && !j->err) {
        ssize_t n = write(j->fd, j->buf + off, j->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fail(j, n < 0 ? errno : EIO);
            break;
        }
        off += (size_t)n;
        j->written += (uint64_t)n;
    }
    j->len = 0;
}

/* Appends n bytes, handing the buffer to write(2) each time it is full. */
static void put(struct ng_json *j, const char *s, size_t n)
{
    while (n && !j->err) {
        if (j->len == j->cap) {
            if (j->fd == NG_JSON_MEMORY) { /* the document does not fit */
                fail(j, ENOBUFS);
                return;
            }
            flush(j);
        }
        if (j->err) return;
        size_t k = j->cap - j->len;
        if (k > n) k = n;
        memcpy(j->buf + j->len, s, k);
        j->len += k;
        s += k;
        n -= k;
    }
}

static void put_char(struct ng_json *j, char c)
{
    put(j, &c, 1);
}

void ncclguard_json_init(struct ng_json *j, int fd, char *buf, size_t cap)
{
    memset(j, 0, sizeof *j);
    j->fd = fd;
    j->buf = buf;
    j->cap = cap;
    if (!buf || cap == 0) fail(j, EINVAL);
}

void ncclguard_json_set_newlines(struct ng_json *j, int depth)
{
    j->newline_depth = depth;
}

/* Separator before a new member of the innermost container: a comma after
 * the previous one, then a newline when this level is laid out one per line. */
static void separate(struct ng_json *j)
{
    if (j->has_member[j->depth]) put_char(j, ',');
    j->has_member[j->depth] = 1;
    if (j->depth > 0 && j->depth <= j->newline_depth) put_char(j, '\n');
}

/* Checks that a value may come here and writes what precedes it. -1 when the
 * writer is in error (possibly because of this call). */
static int begin_value(struct ng_json *j)
{
    if (j->err) return -1;
    if (j->depth == 0) {
        if (j->has_member[0]) fail(j, EINVAL); /* a second top-level value */
        j->has_member[0] = 1;
    } else if (j->is_object[j->depth - 1]) {
        if (!j->want_value) fail(j, EINVAL); /* a member without a key */
        j->want_value = 0;
    } else {
        separate(j);
    }
    return j->err ? -1 : 0;
}

static void open_container(struct ng_json *j, int is_object, char bracket)
{
    if (begin_value(j)) return;
    if (j->depth >= NG_JSON_MAX_DEPTH) {
        fail(j, EINVAL);
        return;
    }
    put_char(j, bracket);
    j->is_object[j->depth] = (unsigned char)is_object;
    j->depth++;
    j->has_member[j->depth] = 0;
}

static void close_container(struct ng_json *j, int is_object, char bracket)
{
    if (j->err) return;
    if (j->depth == 0 || j->is_object[j->depth - 1] != is_object || j->want_value) {
        fail(j, EINVAL);
        return;
    }
    if (j->has_member[j->depth] && j->depth <= j->newline_depth) put_char(j, '\n');
    put_char(j, bracket);
    j->depth--;
}

void ncclguard_json_begin_object(struct ng_json *j)
{
    open_container(j, 1, '{');
}

void ncclguard_json_end_object(struct ng_json *j)
{
    close_container(j, 1, '}');
}

void ncclguard_json_begin_array(struct ng_json *j)
{
    open_container(j, 0, '[');
}

void ncclguard_json_end_array(struct ng_json *j)
{
    close_container(j, 0, ']');
}

/* Length (2..4) of the valid UTF-8 sequence that starts at s[0] >= 0x80, or 0
 * when it is not one: the ranges of RFC 3629, which exclude overlong forms,
 * surrogates and code points above U+10FFFF. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xbf;
    size_t len;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

/* Escape for one byte that cannot be copied as is, into out; its length. */
static size_t escape_byte(unsigned char c, char *out)
{
    switch (c) {
    case '"': memcpy(out, "\\\"", 2); return 2;
    case '\\': memcpy(out, "\\\\", 2); return 2;
    case '\b': memcpy(out, "\\b", 2); return 2;
    case '\f': memcpy(out, "\\f", 2); return 2;
    case '\n': memcpy(out, "\\n", 2); return 2;
    case '\r': memcpy(out, "\\r", 2); return 2;
    case '\t': memcpy(out, "\\t", 2); return 2;
    default:
        memcpy(out, "\\u00", 4);
        out[4] = hex_digits[c >> 4];
        out[5] = hex_digits[c & 0xf];
        return 6;
    }
}

/* The quoted, escaped string. Runs of bytes that need no escape go out in one
 * put; see json.h for the rules. */
static void put_string(struct ng_json *j, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* start of the pending run of plain bytes */
    size_t i = 0;
    put_char(j, '"');
    while (i < n) {
        unsigned char c = s[i];
        size_t len = 1;
        if (c >= 0x80) {
            len = utf8_sequence(s + i, n - i);
            if (len) {
                i += len;
                continue;
            }
        } else if (c >= 0x20 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        put(j, (const char *)s + run, i - run);
        if (c >= 0x80) {
            put(j, "\\ufffd", 6);
        } else {
            char esc[6];
            put(j, esc, escape_byte(c, esc));
        }
        i++;
        run = i;
    }
    put(j, (const char *)s + run, i - run);
    put_char(j, '"');
}

void ncclguard_json_key(struct ng_json *j, const char *key)
{
    if (j->err) return;
    if (j->depth == 0 || !j->is_object[j->depth - 1] || j->want_value || !key) {
        fail(j, EINVAL);
        return;
    }
    separate(j);
    size_t n = 0;
    while (key[n]) n++;
    put_string(j, key, n);
    put_char(j, ':');
    j->want_value = 1;
}

void ncclguard_json_string(struct ng_json *j, const char *s)
{
    size_t n = 0;
    if (s)
        while (s[n]) n++;
    ncclguard_json_string_n(j, s, n);
}

void ncclguard_json_string_n(struct ng_json *j, const char *s, size_t n)
{
    if (begin_value(j)) return;
    if (s)
        put_string(j, s, n);
    else
        put(j, "null", 4);
}

size_t ncclguard_fmt_uint64(char *out, uint64_t v)
{
    char rev[20];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) out[i] = rev[n - 1 - i];
    out[n] = '\0';
    return n;
}

size_t ncclguard_fmt_int64(char *out, int64_t v)
{
    if (v >= 0) return ncclguard_fmt_uint64(out, (uint64_t)v);
    out[0] = '-';
    /* 0 - (uint64_t)v is the magnitude, INT64_MIN included. */
    return 1 + ncclguard_fmt_uint64(out + 1, (uint64_t)0 - (uint64_t)v);
}

void ncclguard_json_int64(struct ng_json *j, int64_t v)
{
    if (begin_value(j)) return;
    char digits[21];
    put(j, digits, ncclguard_fmt_int64(digits, v));
}

void ncclguard_json_uint64(struct ng_json *j, uint64_t v)
{
    if (begin_value(j)) return;
    char digits[21];
    put(j, digits, ncclguard_fmt_uint64(digits, v));
}

void ncclguard_json_hex64(struct ng_json *j, uint64_t v)
{
    if (begin_value(j)) return;
    char s[18];
    s[0] = s[17] = '"';
    for (int i = 16; i >= 1; i--, v >>= 4) s[i] = hex_digits[v & 0xf];
    put(j, s, sizeof s);
}

/* Splits v >= 0 (< 1.8e19) into an integer part and `decimals` fractional
 * digits, rounded half away from zero, carrying into the integer part. */
static void split_fixed(double v, int decimals, uint64_t *ip, uint64_t *frac)
{
    *ip = (uint64_t)v;
    double f = (v - (double)*ip) * (double)pow10_table[decimals] + 0.5;
    *frac = (uint64_t)f;
    if (*frac >= pow10_table[decimals]) {
        *frac -= pow10_table[decimals];
        (*ip)++;
    }
}

/* v with `decimals` fixed digits into out[64]; its length, 0 for NaN and
 * infinities (which JSON lacks). Why by hand: printf is not async-signal-safe
 * and follows the locale's decimal point. Precision is that of the double,
 * which is all a dump needs (durations and ratios), not a correctly rounded
 * shortest form. */
static size_t format_double(char *out, double v, int decimals)
{
    if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308) return 0;
    if (decimals < 0) decimals = 0;
    if (decimals > 9) decimals = 9;
    int negative = v < 0;
    if (negative) v = -v;
    int exp10 = 0;
    if (v >= 1e18) {
        while (v >= 10.0) {
            v /= 10.0;
            exp10++;
        }
    }
    uint64_t ip, frac;
    split_fixed(v, decimals, &ip, &frac);
    if (exp10 && ip >= 10) { /* 9.99..9 rounded up to 10 */
        ip = 1;
        exp10++;
    }
    size_t n = 0;
    if (negative && (ip || frac)) out[n++] = '-'; /* no "-0.00" */
    n += ncclguard_fmt_uint64(out + n, ip);
    if (decimals) {
        out[n++] = '.';
        for (int d = decimals - 1; d >= 0; d--) out[n++] = (char)('0' + frac / pow10_table[d] % 10);
    }
    if (exp10) {
        out[n++] = 'e';
        out[n++] = '+';
        n += ncclguard_fmt_uint64(out + n, (uint64_t)exp10);
    }
    return n;
}

void ncclguard_json_double(struct ng_json *j, double v, int decimals)
{
    if (begin_value(j)) return;
    char out[64];
    size_t n = format_double(out, v, decimals);
    if (n) put(j, out, n);
    else put(j, "null", 4);
}

void ncclguard_json_number(struct ng_json *j, double v, int max_decimals)
{
    if (begin_value(j)) return;
    char out[64];
    size_t n = format_double(out, v, max_decimals);
    if (!n) {
        put(j, "null", 4);
        return;
    }
    const char *point = memchr(out, '.', n), *e = memchr(out, 'e', n);
    if (point && !e) {
        while (out[n - 1] == '0') n--;
        if (out[n - 1] == '.') n--;
    }
    put(j, out, n);
}

void ncclguard_json_bool(struct ng_json *j, int v)
{
    if (begin_value(j)) return;
    if (v)
        put(j, "true", 4);
    else
        put(j, "false", 5);
}

void ncclguard_json_null(struct ng_json *j)
{
    if (begin_value(j)) return;
    put(j, "null", 4);
}

uint64_t ncclguard_json_length(const struct ng_json *j)
{
    return j->written + j->len;
}

int ncclguard_json_value_pending(const struct ng_json *j)
{
    return j->want_value;
}

int ncclguard_json_depth(const struct ng_json *j)
{
    return j->depth;
}

int ncclguard_json_finish(struct ng_json *j)
{
    if (!j->err && (j->depth != 0 || j->want_value || !j->has_member[0])) fail(j, EINVAL);
    put_char(j, '\n');
    flush(j);
    if (!j->err) return 0;
    errno = j->err;
    return -1;
}

const char *ncclguard_json_quote(const char *s, char *out, size_t cap)
{
    /* An escaped byte takes at most 6 characters (\u00XX), so input of
     * (cap - 3) / 6 bytes always fits: longer input is cut, never lost whole. */
    size_t n = strlen(s), fit = cap > 3 ? (cap - 3) / 6 : 0;
    struct ng_json j;
    ncclguard_json_init(&j, NG_JSON_MEMORY, out, cap - 1);
    ncclguard_json_string_n(&j, s, n < fit ? n : fit);
    out[j.err ? 0 : j.len] = '\0';
    return out;
}
