/*
 * render/pickle.c: the pickle writer (render/pickle.h). The opcodes, from
 * Python's Lib/pickle.py (protocol 2): PROTO 0x80, STOP '.', NONE 'N',
 * NEWTRUE 0x88, NEWFALSE 0x89, BININT1 'K' (1 byte), BININT2 'M' (2 bytes),
 * BININT 'J' (4 bytes, signed), LONG1 0x8a (n bytes, two's complement), BINFLOAT
 * 'G' (8 bytes, big-endian), BINUNICODE 'X' (4-byte length), MARK '(',
 * EMPTY_DICT '}', SETITEMS 'u', EMPTY_LIST ']', APPENDS 'e', TUPLE 't'. All
 * lengths and integers are little-endian but the float's.
 */
#include "render/pickle.h"

#include <stdlib.h>
#include <string.h>

#define PK_PROTO 0x80
#define PK_STOP '.'
#define PK_NONE 'N'
#define PK_NEWTRUE 0x88
#define PK_NEWFALSE 0x89
#define PK_BININT1 'K'
#define PK_BININT2 'M'
#define PK_BININT 'J'
#define PK_LONG1 0x8a
#define PK_BINFLOAT 'G'
#define PK_BINUNICODE 'X'
#define PK_MARK '('
#define PK_EMPTY_DICT '}'
#define PK_SETITEMS 'u'
#define PK_EMPTY_LIST ']'
#define PK_APPENDS 'e'
#define PK_TUPLE 't'

static void put(struct rn_pk *p, const void *b, size_t n)
{
    if (p->failed) return;
    if (n > p->cap - p->len) {
        size_t cap = p->cap ? p->cap : 4096;
        while (n > cap - p->len) {
            if (cap > SIZE_MAX / 2) {
                p->failed = 1;
                return;
            }
            cap *= 2;
        }
        unsigned char *nb = realloc(p->buf, cap);
        if (!nb) {
            p->failed = 1;
            return;
        }
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, b, n);
    p->len += n;
}

static void op(struct rn_pk *p, unsigned char c)
{
    put(p, &c, 1);
}

/* v's n bytes, little-endian */
static void le(struct rn_pk *p, uint64_t v, int n)
{
    unsigned char b[8];
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(p, b, (size_t)n);
}

void rn_pk_init(struct rn_pk *p)
{
    memset(p, 0, sizeof *p);
    unsigned char h[2] = {PK_PROTO, 2};
    put(p, h, 2);
}

int rn_pk_done(struct rn_pk *p)
{
    op(p, PK_STOP);
    return p->failed || p->depth ? -1 : 0;
}

void rn_pk_free(struct rn_pk *p)
{
    free(p->buf);
    memset(p, 0, sizeof *p);
}

void rn_pk_none(struct rn_pk *p)
{
    op(p, PK_NONE);
}

void rn_pk_bool(struct rn_pk *p, int v)
{
    op(p, v ? PK_NEWTRUE : PK_NEWFALSE);
}

void rn_pk_int(struct rn_pk *p, int64_t v)
{
    if (v >= 0 && v < 0x100) {
        op(p, PK_BININT1);
        le(p, (uint64_t)v, 1);
    } else if (v >= 0 && v < 0x10000) {
        op(p, PK_BININT2);
        le(p, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, PK_BININT);
        le(p, (uint64_t)v, 4);
    } else {
        /* LONG1: the fewest bytes whose top bit is the sign (at most 8) */
        int n = 8;
        while (n > 1) {
            int64_t top = v >> (8 * (n - 1) - 1); /* the dropped byte and the new sign bit */
            if (top != 0 && top != -1) break;
            n--;
        }
        op(p, PK_LONG1);
        le(p, (uint64_t)n, 1);
        le(p, (uint64_t)v, n);
    }
}

void rn_pk_float(struct rn_pk *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned char b[9] = {PK_BINFLOAT};
    for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(bits >> (56 - 8 * i));
    put(p, b, sizeof b);
}

void rn_pk_strn(struct rn_pk *p, const char *s, size_t len)
{
    if (len > UINT32_MAX) {
        p->failed = 1;
        return;
    }
    op(p, PK_BINUNICODE);
    le(p, len, 4);
    put(p, s, len);
}

void rn_pk_str(struct rn_pk *p, const char *s)
{
    rn_pk_strn(p, s ? s : "", s ? strlen(s) : 0);
}

static void begin(struct rn_pk *p, unsigned char empty)
{
    if (empty) op(p, empty);
    op(p, PK_MARK);
    p->depth++;
}

static void end(struct rn_pk *p, unsigned char c)
{
    if (p->depth-- <= 0) p->failed = 1;
    op(p, c);
}

void rn_pk_dict_begin(struct rn_pk *p)
{
    begin(p, PK_EMPTY_DICT);
}

void rn_pk_dict_end(struct rn_pk *p)
{
    end(p, PK_SETITEMS);
}

void rn_pk_list_begin(struct rn_pk *p)
{
    begin(p, PK_EMPTY_LIST);
}

void rn_pk_list_end(struct rn_pk *p)
{
    end(p, PK_APPENDS);
}

void rn_pk_tuple_begin(struct rn_pk *p)
{
    begin(p, 0);
}

void rn_pk_tuple_end(struct rn_pk *p)
{
    end(p, PK_TUPLE);
}
