/*
 * json.c: see json.h. Everything here is async-signal-safe: the only call out
 * of this file is write(2) (and memcpy, memchr and strlen, which POSIX lists as
 * safe too).
 */
#include "base/json.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char hex_digits[] = "0123456789abcdef";

static const uint64_t pow10_table[20] = {
    1,
    10,
    100,
    1000,
    10000,
    100000,
    1000000,
    10000000,
    100000000,
    1000000000,
    10000000000ULL,
    100000000000ULL,
    1000000000000ULL,
    10000000000000ULL,
    100000000000000ULL,
    1000000000000000ULL,
    10000000000000000ULL,
    100000000000000000ULL,
    1000000000000000000ULL,
    10000000000000000000ULL,
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

/* Appends n bytes, handing the buffer to write(2) each time it is full: the
 * way of pieces larger than the buffer, and of a writer in error or whose
 * memory buffer is full (see room). */
static void put_pieces(struct ng_json *j, const char *s, size_t n)
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

/* Where the next n bytes go in one piece, flushing the buffer first when they
 * do not fit in what is left of it; the caller writes them there and adds n
 * to j->len. NULL when they cannot go in one piece (n above the buffer's size,
 * a memory document that is full, an error): the caller then hands them to
 * put_pieces. The bytes written are the same either way; only the sizes of
 * the write(2) calls differ. */
static inline char *room(struct ng_json *j, size_t n)
{
    if (n > j->cap - j->len && !j->err && j->fd != NG_JSON_MEMORY) flush(j);
    return !j->err && n <= j->cap - j->len ? j->buf + j->len : NULL;
}

static inline void put(struct ng_json *j, const char *s, size_t n)
{
    char *p = room(j, n);
    if (!p) {
        put_pieces(j, s, n);
        return;
    }
    memcpy(p, s, n);
    j->len += n;
}

static inline void put_char(struct ng_json *j, char c)
{
    char *p = room(j, 1);
    if (!p) {
        put_pieces(j, &c, 1);
        return;
    }
    *p = c;
    j->len++;
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

/* Separator before a new member of the innermost container, into out: a
 * comma after the previous one, then a newline when this level is laid out
 * one per line. Its length. */
static size_t separator(struct ng_json *j, char out[2])
{
    size_t n = 0;
    if (j->has_member[j->depth]) out[n++] = ',';
    j->has_member[j->depth] = 1;
    if (j->depth > 0 && j->depth <= j->newline_depth) out[n++] = '\n';
    return n;
}

static void separate(struct ng_json *j)
{
    char sep[2];
    put(j, sep, separator(j, sep));
}

/* Checks that a value may come here and writes what precedes it. -1 when the
 * writer is in error (possibly because of this call). */
static inline int begin_value(struct ng_json *j)
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

/* True for a byte that a string holds as is and that is no part of a
 * multi-byte UTF-8 sequence: printable ASCII but the quote and the backslash. */
static int plain_ascii(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The quoted string with its escapes. Runs of bytes that need no escape go
 * out in one put. */
static void put_escaped(struct ng_json *j, const unsigned char *s, size_t n)
{
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
        } else if (plain_ascii(c)) {
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

/* True when each of the eight bytes of w is plain_ascii. With every byte below
 * 0x80, subtracting k from each byte sets the high bit of those below k, and
 * of no other byte unless a lower one was below k (the borrow): so the high
 * bits of w - 0x20 (controls), (w ^ '"') - 1 and (w ^ '\\') - 1 (a zero byte
 * where w holds the character), all per byte, are clear exactly when no byte
 * needs an escape. */
static int plain_word(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, highs = ones << 7;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    return !((w | (w - ones * 0x20) | (quote - ones) | (backslash - ones)) & highs);
}

/* True when s[0..n) is plain ASCII, read eight bytes at a time: the last word
 * overlaps the one before it. A string shorter than a word is read byte by
 * byte (a copy of a variable size into a word would be a call). */
static int all_plain(const unsigned char *s, size_t n)
{
    uint64_t w;
    if (n < sizeof w) {
        for (size_t i = 0; i < n; i++)
            if (!plain_ascii(s[i])) return 0;
        return 1;
    }
    for (size_t i = 0; i + sizeof w < n; i += sizeof w) {
        memcpy(&w, s + i, sizeof w);
        if (!plain_word(w)) return 0;
    }
    memcpy(&w, s + n - sizeof w, sizeof w);
    return plain_word(w);
}

/* The quoted, escaped string; see json.h for the rules. Most strings (every
 * key and name of a dump) are plain ASCII: they go out in one piece, quotes
 * included. */
static void put_string(struct ng_json *j, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    char *p = all_plain(s, n) ? room(j, n + 2) : NULL;
    if (!p) {
        put_escaped(j, s, n);
        return;
    }
    p[0] = '"';
    memcpy(p + 1, s, n);
    p[n + 1] = '"';
    j->len += n + 2;
}

/* Checks that a member may start here: in an object, no value pending. -1
 * when the writer is in error (possibly because of this call). */
static inline int begin_member(struct ng_json *j)
{
    if (j->err) return -1;
    if (j->depth == 0 || !j->is_object[j->depth - 1] || j->want_value) {
        fail(j, EINVAL);
        return -1;
    }
    return 0;
}

/* The same for a key, which must not be NULL. */
static inline int begin_key(struct ng_json *j, const char *key)
{
    if (!key) fail(j, EINVAL);
    return begin_member(j);
}

/* The separator, the quoted key and the colon: in one piece when the key is
 * plain (all_plain) and they fit. */
static inline void put_key(struct ng_json *j, const char *key, size_t n, int plain)
{
    char *p = plain ? room(j, n + 5) : NULL;
    if (p) {
        p += separator(j, p);
        p[0] = '"';
        memcpy(p + 1, key, n);
        p[n + 1] = '"';
        p[n + 2] = ':';
        j->len = (size_t)(p + n + 3 - j->buf);
    } else {
        separate(j);
        put_escaped(j, (const unsigned char *)key, n);
        put_char(j, ':');
    }
    j->want_value = 1;
}

void ncclguard_json_key(struct ng_json *j, const char *key)
{
    if (begin_key(j, key)) return;
    size_t n = strlen(key);
    put_key(j, key, n, all_plain((const unsigned char *)key, n));
}

void ncclguard_json_key_fixed(struct ng_json *j, const struct ng_json_key *k)
{
    if (begin_key(j, k->text)) return;
    put_key(j, k->text + 1, k->len - 3u, 1);
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

/* The 8 bytes of w at out, its lowest byte first on any machine. */
static inline void store_lowest_first(char *out, uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    memcpy(out, &w, sizeof w);
}

/* The 8 decimal digits of x < 10^8, leading zeros included, as the bytes of a
 * word, the first digit in its lowest byte: all at once, without a division.
 * x is split into lanes, each multiplied by a reciprocal and shifted, which
 * divides every lane at the same time: two 32-bit lanes of 4 digits, then
 * each into two 16-bit lanes of 2 digits (q = v * 5243 >> 19 is v / 100 for
 * v < 43699), then each into two bytes of 1 digit (v * 103 >> 10 is v / 10
 * for v < 179). No lane's product reaches the next lane, and the mask drops
 * what the shift brings down from above. */
static inline uint64_t eight_digits(uint32_t x)
{
    uint64_t w = x / 10000 | (uint64_t)(x % 10000) << 32;
    uint64_t q = (w * 5243 >> 19) & 0x0000007f0000007fu;
    w = q | (w - q * 100) << 16;
    q = (w * 103 >> 10) & 0x000f000f000f000fu;
    w = q | (w - q * 10) << 8;
    return w + 0x3030303030303030u; /* '0' in every byte */
}

/* The decimal digits of v at out (room for 20, all of which may be written;
 * no NUL); their count. In words of 8 digits: the first word holds the
 * leading 1 to 8 digits (its leading zeros shifted out), the others 8 each. */
static size_t decimal_digits(char *out, uint64_t v)
{
    if (v < 10) { /* most counts, ranks and results of a dump */
        out[0] = (char)('0' + v);
        return 1;
    }
    /* The count from the bit length (log10(2) is about 1233 / 4096) is t or
     * t + 1, and one comparison tells which; 0 has one digit. */
    size_t t = (size_t)(64 - __builtin_clzll(v | 1)) * 1233 >> 12;
    size_t n = t + (v >= pow10_table[t]) + (v == 0);
    const uint32_t e8 = 100000000;
    uint64_t lead = v, mid = 0, low = 0;
    size_t words = 0; /* full words of 8 digits after the leading one */
    if (v >= (uint64_t)e8 * e8) {
        lead = v / ((uint64_t)e8 * e8);
        mid = v / e8 % e8;
        low = v % e8;
        words = 2;
    } else if (v >= e8) {
        lead = v / e8;
        low = v % e8;
        words = 1;
    }
    size_t k = n - 8 * words; /* 1 to 8 leading digits */
    store_lowest_first(out, eight_digits((uint32_t)lead) >> 8 * (8 - k));
    if (words == 2) store_lowest_first(out + k, eight_digits((uint32_t)mid));
    if (words) store_lowest_first(out + n - 8, eight_digits((uint32_t)low));
    return n;
}

size_t ncclguard_fmt_uint64(char *out, uint64_t v)
{
    size_t n = decimal_digits(out, v);
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

/* v's digits, formatted in place in the buffer when there is room. */
static inline void put_decimal(struct ng_json *j, uint64_t v)
{
    char digits[20];
    char *p = room(j, sizeof digits);
    if (p)
        j->len += decimal_digits(p, v);
    else
        put(j, digits, decimal_digits(digits, v));
}

void ncclguard_json_int64(struct ng_json *j, int64_t v)
{
    if (begin_value(j)) return;
    if (v < 0) put_char(j, '-');
    /* 0 - (uint64_t)v is the magnitude, INT64_MIN included. */
    put_decimal(j, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

void ncclguard_json_uint64(struct ng_json *j, uint64_t v)
{
    if (begin_value(j)) return;
    put_decimal(j, v);
}

/* The 8 hex digits of x at out, all at once: each nibble is spread to a byte
 * of its own, the highest nibble first in memory; a byte b becomes '0' + b, and
 * 'a' - '0' - 10 more where b > 9, which are the bytes where b + 6 reaches
 * bit 4. */
static inline void eight_hex(char *out, uint32_t x)
{
    const uint64_t ones = 0x0101010101010101u;
    uint64_t b = x;
    b = (b | b << 16) & 0x0000ffff0000ffffu;
    b = (b | b << 8) & 0x00ff00ff00ff00ffu;
    b = (b | b << 4) & 0x0f0f0f0f0f0f0f0fu; /* the lowest nibble in the lowest byte */
    b = __builtin_bswap64(b);               /* the highest nibble there */
    uint64_t letters = (b + ones * 6) >> 4 & ones;
    store_lowest_first(out, b + ones * '0' + letters * ('a' - '0' - 10));
}

/* v as a string of 16 hex digits, quotes included, at out[18]. */
static void quoted_hex(char *out, uint64_t v)
{
    out[0] = out[17] = '"';
    eight_hex(out + 1, (uint32_t)(v >> 32));
    eight_hex(out + 9, (uint32_t)v);
}

void ncclguard_json_hex64(struct ng_json *j, uint64_t v)
{
    if (begin_value(j)) return;
    char s[18];
    quoted_hex(s, v);
    put(j, s, sizeof s);
}

/* ---- runs ---- */

void ncclguard_json_run_begin(struct ng_json_run *r, struct ng_json *j)
{
    r->j = j;
    r->p = r->text;
}

void ncclguard_json_run_flush(struct ng_json_run *r)
{
    struct ng_json *j = r->j;
    size_t n = (size_t)(r->p - r->text);
    r->p = r->text;
    if (!n || begin_member(j)) return;
    if (j->depth <= j->newline_depth) { /* one member per line: not in one piece */
        fail(j, EINVAL);
        return;
    }
    /* text[0] is the comma before the first member: the writer's separator
     * takes its place, in one piece with the members when they fit */
    char *p = room(j, n);
    if (!p) {
        separate(j);
        put(j, r->text + 1, n - 1);
        return;
    }
    p += separator(j, p);
    memcpy(p, r->text + 1, n - 1);
    j->len = (size_t)(p + n - 1 - j->buf);
}

/* The comma and the key k of the next member, after a flush when the buffer
 * has no room for a member; where its value goes (room for
 * NG_JSON_RUN_STRING_MAX + 2 bytes, or 21). The key's whole block is copied:
 * a fixed size, a few moves and no call. */
static inline char *run_key(struct ng_json_run *r, const struct ng_json_key *k)
{
    if (r->p + NG_JSON_RUN_MEMBER_MAX > r->text + sizeof r->text) ncclguard_json_run_flush(r);
    char *p = r->p;
    *p = ',';
    memcpy(p + 1, k->text, sizeof k->text);
    return p + 1 + k->len;
}

void ncclguard_json_run_int64(struct ng_json_run *r, const struct ng_json_key *k, int64_t v)
{
    char *p = run_key(r, k);
    *p = '-';
    p += v < 0;
    /* 0 - (uint64_t)v is the magnitude, INT64_MIN included. */
    r->p = p + decimal_digits(p, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

void ncclguard_json_run_uint64(struct ng_json_run *r, const struct ng_json_key *k, uint64_t v)
{
    char *p = run_key(r, k);
    r->p = p + decimal_digits(p, v);
}

void ncclguard_json_run_hex64(struct ng_json_run *r, const struct ng_json_key *k, uint64_t v)
{
    char *p = run_key(r, k);
    quoted_hex(p, v);
    r->p = p + 18;
}

void ncclguard_json_run_null(struct ng_json_run *r, const struct ng_json_key *k)
{
    char *p = run_key(r, k);
    memcpy(p, "null", 4);
    r->p = p + 4;
}

void ncclguard_json_run_empty_array(struct ng_json_run *r, const struct ng_json_key *k)
{
    char *p = run_key(r, k);
    memcpy(p, "[]", 2);
    r->p = p + 2;
}

void ncclguard_json_run_string_n(struct ng_json_run *r, const struct ng_json_key *k, const char *s,
                                 size_t n)
{
    if (!s) {
        ncclguard_json_run_null(r, k);
    } else if (n <= NG_JSON_RUN_STRING_MAX && all_plain((const unsigned char *)s, n)) {
        char *p = run_key(r, k);
        p[0] = '"';
        memcpy(p + 1, s, n);
        p[n + 1] = '"';
        r->p = p + n + 2;
    } else { /* escapes, or long: the writer's way */
        ncclguard_json_run_flush(r);
        ncclguard_json_key_fixed(r->j, k);
        ncclguard_json_string_n(r->j, s, n);
    }
}

void ncclguard_json_run_string(struct ng_json_run *r, const struct ng_json_key *k, const char *s)
{
    ncclguard_json_run_string_n(r, k, s, s ? strlen(s) : 0);
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
    if (n)
        put(j, out, n);
    else
        put(j, "null", 4);
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
