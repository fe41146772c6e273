/*
 * json.h: a streaming JSON writer that is async-signal-safe.
 *
 * Owns: the JSON syntax of what the shim writes (dumps, the dump's config
 * object, the JSON of the ncclguard command).
 * The caller supplies a fixed buffer and a file descriptor; the writer fills
 * the buffer and hands it to write(2) when the next piece does not fit, so a
 * document of any size streams out through a small buffer. It never calls
 * malloc, stdio or anything that reads the locale: numbers and escapes are
 * formatted here.
 *
 * Syntax is tracked with a small stack: the writer places the commas and
 * colons, and a misuse (a value without a key inside an object, a key inside an
 * array, unbalanced ends, nesting deeper than NG_JSON_MAX_DEPTH) is an error.
 * Errors are sticky: the first one (a failed write, or EINVAL for a misuse)
 * is kept, later calls do nothing, and ncclguard_json_finish reports it. A
 * run (below) places the commas of its own members and is checked once per
 * piece it hands over: the fast way for thousands of small objects.
 *
 * Strings: '"', '\\' and control characters are escaped (\n, \t, ... or
 * \u00XX); valid UTF-8 is copied as is; each byte that is not part of a valid
 * UTF-8 sequence (stray continuation, truncated or overlong sequence,
 * surrogate, above U+10FFFF) becomes one "\ufffd" (U+FFFD, the replacement
 * character), so the output is always valid UTF-8 and valid JSON.
 *
 * Threads: one writer belongs to one caller; every function is async-signal-
 * safe (only write(2) is called) and may run in a signal handler.
 */
#ifndef NCCLGUARD_JSON_H
#define NCCLGUARD_JSON_H

#include <stddef.h>
#include <stdint.h>

#define NG_JSON_MAX_DEPTH 16

/* Opaque in spirit: callers use the functions below, not the fields. */
struct ng_json {
    char *buf;
    size_t cap, len;
    int fd;
    int err;           /* first error (an errno value), 0 while all is well */
    uint64_t written;  /* bytes handed to write(2) so far */
    int depth;         /* open containers */
    int want_value;    /* a key was written; its value comes next */
    int newline_depth; /* see ncclguard_json_set_newlines */
    unsigned char is_object[NG_JSON_MAX_DEPTH];
    unsigned char has_member[NG_JSON_MAX_DEPTH + 1]; /* [0]: the top-level value */
};

/* Starts a document that goes to fd through buf[cap] (cap >= 1). With fd
 * NG_JSON_MEMORY the document must fit in buf (the writer fails with ENOBUFS
 * when it does not); with NG_JSON_COUNT nothing is kept, and
 * ncclguard_json_length tells how long the document is. */
#define NG_JSON_MEMORY (-2)
#define NG_JSON_COUNT (-3)
void ncclguard_json_init(struct ng_json *j, int fd, char *buf, size_t cap);

void ncclguard_json_begin_object(struct ng_json *j);
void ncclguard_json_end_object(struct ng_json *j);
void ncclguard_json_begin_array(struct ng_json *j);
void ncclguard_json_end_array(struct ng_json *j);

/* The key of the next member of the innermost object (escaped like a string). */
void ncclguard_json_key(struct ng_json *j, const char *key);

/* A fixed key of a format (those of evidence/dump_format.h, which
 * tests/unit/check_dump.py holds to [a-z_0-9]), quoted and followed by its
 * colon at compile time, in a block of fixed size: the writer copies it
 * without scanning it or measuring it, in one move of that size, which makes
 * it the fast way for a key written thousands of times. The key must need no
 * escape (printable ASCII without '"' and '\\'): such a byte would make the
 * document invalid. NG_JSON_KEY("index") initializes one; a key longer than
 * NG_JSON_KEY_MAX bytes does not fit in the block, which the compiler reports
 * (an error with -Werror). */
#define NG_JSON_KEY_MAX 29
struct ng_json_key {
    char text[NG_JSON_KEY_MAX + 3]; /* "\"index\":", then zeros */
    unsigned char len;              /* bytes of text before the zeros */
};
#define NG_JSON_KEY(key)                \
    {                                   \
        "\"" key "\":", sizeof(key) + 2 \
    }

/* The fixed key k of the next member of the innermost object. */
void ncclguard_json_key_fixed(struct ng_json *j, const struct ng_json_key *k);

/* Values. A NULL string is written as null. string_n writes exactly n bytes
 * (a NUL among them is escaped as \u0000). */
void ncclguard_json_string(struct ng_json *j, const char *s);
void ncclguard_json_string_n(struct ng_json *j, const char *s, size_t n);
void ncclguard_json_int64(struct ng_json *j, int64_t v);
void ncclguard_json_uint64(struct ng_json *j, uint64_t v);
/* A string of exactly 16 lowercase hex digits: "00000000005f3a1c". */
void ncclguard_json_hex64(struct ng_json *j, uint64_t v);
/* Fixed-point with `decimals` (0..9) digits after the point, rounded half
 * away from zero; magnitudes >= 1e18 use an exponent ("1.50e+18"); NaN and
 * infinities (which JSON lacks) are written as null. */
void ncclguard_json_double(struct ng_json *j, double v, int decimals);
/* The same with at most max_decimals (0..9) digits, trailing zeros and a bare
 * point dropped: 300, 0.5, 1.25. */
void ncclguard_json_number(struct ng_json *j, double v, int max_decimals);
void ncclguard_json_bool(struct ng_json *j, int v);
void ncclguard_json_null(struct ng_json *j);

/* ---- Runs: members formatted in place ----
 * For objects written thousands of times whose members are small (the
 * records of the dump's ring). A run collects members of the innermost
 * object, formatted one after the other into the run's own buffer without
 * the writer's checks, and hands them to the writer in one piece when it is
 * flushed: one call per member instead of a key call and a value call with a
 * check each. The bytes are those of ncclguard_json_key_fixed followed by the
 * value function of the same name. A string longer than
 * NG_JSON_RUN_STRING_MAX bytes, or one that needs escapes, flushes the run
 * and goes through the writer; so does a full buffer.
 *
 * Between ncclguard_json_run_begin and ncclguard_json_run_flush the members of
 * the run are the only ones written: anything else (a key whose value is an
 * array, an object) goes after a flush, through the writer. The flush checks
 * what a key would (EINVAL outside an object or with a value pending), and
 * refuses a depth laid out one member per line (ncclguard_json_set_newlines),
 * which a run would run together (EINVAL); an empty run writes nothing.
 *
 * Threads: a run belongs to its writer's caller, like the writer. */
#define NG_JSON_RUN_STRING_MAX 48
/* a member at most: its comma, the key's whole block, a string and its quotes */
#define NG_JSON_RUN_MEMBER_MAX (1 + sizeof(struct ng_json_key) + NG_JSON_RUN_STRING_MAX + 2)
#define NG_JSON_RUN_MEMBERS 32 /* in the buffer: an op record's 28 in one piece */
struct ng_json_run {
    struct ng_json *j;
    char *p; /* where the next member's comma goes */
    char text[NG_JSON_RUN_MEMBERS * NG_JSON_RUN_MEMBER_MAX]; /* [0]: the first one's comma */
};

void ncclguard_json_run_begin(struct ng_json_run *r, struct ng_json *j);
void ncclguard_json_run_int64(struct ng_json_run *r, const struct ng_json_key *k, int64_t v);
void ncclguard_json_run_uint64(struct ng_json_run *r, const struct ng_json_key *k, uint64_t v);
void ncclguard_json_run_hex64(struct ng_json_run *r, const struct ng_json_key *k, uint64_t v);
void ncclguard_json_run_null(struct ng_json_run *r, const struct ng_json_key *k);
/* NULL is null, as for ncclguard_json_string. */
void ncclguard_json_run_string(struct ng_json_run *r, const struct ng_json_key *k, const char *s);
void ncclguard_json_run_string_n(struct ng_json_run *r, const struct ng_json_key *k, const char *s,
                                 size_t n);
/* An empty array, []. */
void ncclguard_json_run_empty_array(struct ng_json_run *r, const struct ng_json_key *k);
/* Hands the members collected so far to the writer; the run goes on, empty. */
void ncclguard_json_run_flush(struct ng_json_run *r);

/* Members of containers at depth <= `depth` (1: the members of the top-level
 * object; 2: also the elements of its arrays) start on a new line, and so does
 * the closing bracket of such a non-empty container. 0 (the default): compact.
 * Makes a large dump readable with grep and less; still one JSON document. */
void ncclguard_json_set_newlines(struct ng_json *j, int depth);

/* True when a key has been written and its value has not. */
int ncclguard_json_value_pending(const struct ng_json *j);

/* Ends the document: checks that every container is closed and a value was
 * written, appends a newline and flushes. 0, or -1 with errno set to the first
 * error. */
int ncclguard_json_finish(struct ng_json *j);

/* Bytes of the document so far, written out or buffered. */
uint64_t ncclguard_json_length(const struct ng_json *j);

/* s as a JSON string literal, quotes included, in out[cap] (NUL-terminated;
 * input that cannot fit is cut). For JSON lines formatted with printf. */
const char *ncclguard_json_quote(const char *s, char *out, size_t cap);

/* Decimal digits of v into out (at least 21 bytes), NUL-terminated; returns
 * the length. Async-signal-safe helpers for messages composed by hand. */
size_t ncclguard_fmt_int64(char *out, int64_t v);
size_t ncclguard_fmt_uint64(char *out, uint64_t v);

#endif
