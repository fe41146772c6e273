/*
 * dump/pickle.c: the bounded pickle reader of dump/pickle.h. One pass over the opcodes,
 * with the pickle machine's stack, marks and memo as arrays; values live in an
 * arena freed with the document. The format is Python's (Lib/pickletools.py
 * documents each opcode); only the binary opcodes of data are read.
 */
#include "dump/pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"

#define CHUNK (64u << 10)

struct chunk {
    struct chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

struct dr_pk_doc {
    struct chunk *chunks;
    const struct dr_pk_val *root;
};

struct pk {
    struct dr_pk_doc *doc;
    const unsigned char *p, *end, *start;
    struct dr_pk_val **stack;
    size_t nstack, capstack;
    size_t *marks;
    size_t nmarks, capmarks;
    struct dr_pk_val **memo;
    size_t capmemo, nmemo; /* slots, and how many are filled (MEMOIZE's next) */
    size_t nvalues;
    char *err;
    size_t errlen;
    size_t at; /* the current opcode's offset */
};

static const struct dr_pk_val none_v = {.kind = DR_PK_NONE, .frozen = 1};
static const struct dr_pk_val true_v = {.kind = DR_PK_BOOL, .frozen = 1, .u.i = 1};
static const struct dr_pk_val false_v = {.kind = DR_PK_BOOL, .frozen = 1, .u.i = 0};

static int fail(struct pk *k, const char *what)
{
    snprintf(k->err, k->errlen, "%s at byte %zu", what, k->at);
    return -1;
}

static void *alloc(struct pk *k, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct chunk *c = k->doc->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > CHUNK ? n : CHUNK;
        c = malloc(sizeof *c + size);
        if (!c) return NULL;
        c->size = size;
        c->used = 0;
        c->next = k->doc->chunks;
        k->doc->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static struct dr_pk_val *value(struct pk *k, int kind)
{
    if (k->nvalues >= DR_PK_MAX_VALUES) {
        fail(k, "too many values");
        return NULL;
    }
    struct dr_pk_val *v = alloc(k, sizeof *v);
    if (!v) {
        fail(k, "out of memory");
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)kind;
    v->depth = kind == DR_PK_LIST || kind == DR_PK_TUPLE || kind == DR_PK_DICT;
    k->nvalues++;
    return v;
}

static int push(struct pk *k, const struct dr_pk_val *v)
{
    if (!v) return -1;
    if (k->nstack == k->capstack) {
        if (k->nstack >= DR_PK_MAX_STACK) return fail(k, "stack deeper than the bound");
        size_t cap = k->capstack ? k->capstack * 2 : 64;
        struct dr_pk_val **s = realloc(k->stack, cap * sizeof *s);
        if (!s) return fail(k, "out of memory");
        k->stack = s;
        k->capstack = cap;
    }
    k->stack[k->nstack++] = (struct dr_pk_val *)v;
    return 0;
}

/* The stack's length at the innermost mark (0 without one). */
static size_t base(const struct pk *k)
{
    return k->nmarks ? k->marks[k->nmarks - 1] : 0;
}

static struct dr_pk_val *pop(struct pk *k)
{
    if (k->nstack <= base(k)) {
        fail(k, "stack underflow");
        return NULL;
    }
    return k->stack[--k->nstack];
}

static int is_container(const struct dr_pk_val *v)
{
    return v->kind == DR_PK_LIST || v->kind == DR_PK_TUPLE || v->kind == DR_PK_DICT;
}

/* Puts v into container c (a list or dict being built, or a tuple being made). */
static int insert(struct pk *k, struct dr_pk_val *c, struct dr_pk_val *v)
{
    if (c->frozen) return fail(k, "a container changed after it was put in another");
    if (v == c) return fail(k, "a container put in itself");
    if (v->depth + 1 > DR_PK_MAX_DEPTH) return fail(k, "containers nested deeper than the bound");
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        struct dr_pk_val **items = alloc(k, cap * sizeof *items);
        if (!items) return fail(k, "out of memory");
        if (c->n) memcpy(items, c->u.items, c->n * sizeof *items);
        c->u.items = items;
        c->cap = cap;
    }
    c->u.items[c->n++] = v;
    if (is_container(v)) v->frozen = 1;
    if (v->depth + 1 > c->depth) c->depth = (uint16_t)(v->depth + 1);
    return 0;
}

static int take(struct pk *k, size_t n, const unsigned char **out)
{
    if ((size_t)(k->end - k->p) < n) return fail(k, "truncated");
    *out = k->p;
    k->p += n;
    return 0;
}

static int le(struct pk *k, size_t n, uint64_t *out)
{
    const unsigned char *b;
    if (take(k, n, &b)) return -1;
    uint64_t x = 0;
    for (size_t i = n; i-- > 0;) x = x << 8 | b[i];
    *out = x;
    return 0;
}

static int int_value(struct pk *k, int64_t x)
{
    struct dr_pk_val *v = value(k, DR_PK_INT);
    if (!v) return -1;
    v->u.i = x;
    return push(k, v);
}

/* LONG1/LONG4: n bytes, little-endian two's complement; at most 8 of them. */
static int long_value(struct pk *k, size_t n)
{
    const unsigned char *b;
    if (n > 8) return fail(k, "an integer beyond 64 bits");
    if (take(k, n, &b)) return -1;
    uint64_t x = 0;
    for (size_t i = n; i-- > 0;) x = x << 8 | b[i];
    if (n && n < 8 && (b[n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n);
    return int_value(k, (int64_t)x);
}

static int string_value(struct pk *k, size_t lenbytes, int kind)
{
    uint64_t n;
    const unsigned char *b;
    if (le(k, lenbytes, &n)) return -1;
    if (lenbytes == 4 && kind != DR_PK_STR && (n & 0x80000000u)) /* BINSTRING: signed */
        return fail(k, "a negative length");
    if (n > (uint64_t)(k->end - k->p)) return fail(k, "truncated");
    if (take(k, (size_t)n, &b)) return -1;
    struct dr_pk_val *v = value(k, kind);
    char *s = v ? alloc(k, (size_t)n + 1) : NULL;
    if (!s) return v ? fail(k, "out of memory") : -1;
    memcpy(s, b, (size_t)n);
    s[n] = '\0';
    v->u.s = s;
    v->n = (size_t)n;
    return push(k, v);
}

static int mark(struct pk *k)
{
    if (k->nmarks == k->capmarks) {
        if (k->nmarks >= DR_PK_MAX_MARKS) return fail(k, "marks nested deeper than the bound");
        size_t cap = k->capmarks ? k->capmarks * 2 : 16;
        size_t *m = realloc(k->marks, cap * sizeof *m);
        if (!m) return fail(k, "out of memory");
        k->marks = m;
        k->capmarks = cap;
    }
    k->marks[k->nmarks++] = k->nstack;
    return 0;
}

static int pop_mark(struct pk *k, size_t *from)
{
    if (!k->nmarks) return fail(k, "no mark");
    *from = k->marks[--k->nmarks];
    return 0;
}

/* LIST, TUPLE, DICT and APPENDS, SETITEMS: the items since the mark into c,
 * pairs for a dict. */
static int fill(struct pk *k, struct dr_pk_val *c, size_t from)
{
    size_t n = k->nstack - from;
    if (c->kind == DR_PK_DICT && n % 2) return fail(k, "a key without a value");
    for (size_t i = from; i < k->nstack; i++) {
        struct dr_pk_val *v = k->stack[i];
        if (c->kind == DR_PK_DICT && (i - from) % 2 == 0 &&
            (v->kind == DR_PK_LIST || v->kind == DR_PK_DICT))
            return fail(k, "an unhashable key");
        if (insert(k, c, v)) return -1;
    }
    k->nstack = from;
    return 0;
}

static int collect(struct pk *k, int kind)
{
    size_t from;
    if (pop_mark(k, &from)) return -1;
    struct dr_pk_val *c = value(k, kind);
    if (!c || fill(k, c, from)) return -1;
    if (kind == DR_PK_TUPLE) c->frozen = 1;
    return push(k, c);
}

static int extend(struct pk *k, int kind)
{
    size_t from;
    if (pop_mark(k, &from)) return -1;
    if (from == 0 || from <= base(k)) return fail(k, "stack underflow");
    struct dr_pk_val *c = k->stack[from - 1];
    if (c->kind != kind)
        return fail(k, kind == DR_PK_LIST ? "APPENDS to a non-list" : "SETITEMS to a non-dict");
    return fill(k, c, from);
}

static int tuple_n(struct pk *k, size_t n)
{
    if (k->nstack - base(k) < n) return fail(k, "stack underflow");
    struct dr_pk_val *c = value(k, DR_PK_TUPLE);
    if (!c) return -1;
    size_t from = k->nstack - n;
    for (size_t i = from; i < k->nstack; i++)
        if (insert(k, c, k->stack[i])) return -1;
    k->nstack = from;
    c->frozen = 1;
    return push(k, c);
}

static int append(struct pk *k)
{
    struct dr_pk_val *v = pop(k);
    if (!v) return -1;
    if (k->nstack <= base(k)) return fail(k, "stack underflow");
    struct dr_pk_val *c = k->stack[k->nstack - 1];
    if (c->kind != DR_PK_LIST) return fail(k, "APPEND to a non-list");
    return insert(k, c, v);
}

static int setitem(struct pk *k)
{
    struct dr_pk_val *v = pop(k), *key = v ? pop(k) : NULL;
    if (!key) return -1;
    if (k->nstack <= base(k)) return fail(k, "stack underflow");
    struct dr_pk_val *c = k->stack[k->nstack - 1];
    if (c->kind != DR_PK_DICT) return fail(k, "SETITEM to a non-dict");
    if (key->kind == DR_PK_LIST || key->kind == DR_PK_DICT) return fail(k, "an unhashable key");
    return insert(k, c, key) || insert(k, c, v) ? -1 : 0;
}

static int put(struct pk *k, uint64_t i)
{
    if (k->nstack <= base(k)) return fail(k, "stack underflow");
    /* a writer numbers its memo from 0: an index beyond the bytes read is not one */
    uint64_t read = (uint64_t)(k->p - k->start);
    if (i >= DR_PK_MAX_MEMO || i > read) return fail(k, "memo index out of bounds");
    if (i >= k->capmemo) {
        size_t cap = k->capmemo ? k->capmemo : 64;
        while (cap <= i) cap *= 2;
        struct dr_pk_val **m = realloc(k->memo, cap * sizeof *m);
        if (!m) return fail(k, "out of memory");
        memset(m + k->capmemo, 0, (cap - k->capmemo) * sizeof *m);
        k->memo = m;
        k->capmemo = cap;
    }
    if (!k->memo[i]) k->nmemo++;
    k->memo[i] = k->stack[k->nstack - 1];
    return 0;
}

static int get(struct pk *k, uint64_t i)
{
    if (i >= k->capmemo || !k->memo[i]) return fail(k, "memo index never stored");
    return push(k, k->memo[i]);
}

/* The opcodes this reader refuses by name: they run code or build other objects. */
static const char *refused(unsigned op)
{
    switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    default: return NULL;
    }
}

static int step(struct pk *k, unsigned op, int *stop)
{
    uint64_t x;
    size_t from;
    const unsigned char *b;
    switch (op) {
    case 0x80: /* PROTO */
        if (le(k, 1, &x)) return -1;
        if (x > 5) return fail(k, "pickle protocol above 5");
        return 0;
    case 0x95: /* FRAME: a length, then as many bytes of opcodes */
        if (le(k, 8, &x)) return -1;
        if (x > (uint64_t)(k->end - k->p)) return fail(k, "truncated");
        return 0;
    case '.': /* STOP */
        if (k->nstack <= base(k) || k->nmarks) return fail(k, "STOP without a single value");
        k->doc->root = k->stack[k->nstack - 1];
        *stop = 1;
        return 0;
    case '(': return mark(k);
    case '0': /* POP: the top value, or the innermost mark when none is above it */
        if (k->nstack > base(k)) {
            k->nstack--;
            return 0;
        }
        return pop_mark(k, &from);
    case '1': /* POP_MARK */
        if (pop_mark(k, &from)) return -1;
        k->nstack = from;
        return 0;
    case '2': /* DUP */
        if (k->nstack <= base(k)) return fail(k, "stack underflow");
        return push(k, k->stack[k->nstack - 1]);
    case 'N': return push(k, &none_v);
    case 0x88: return push(k, &true_v);
    case 0x89: return push(k, &false_v);
    case 'J': return le(k, 4, &x) ? -1 : int_value(k, (int32_t)(uint32_t)x);
    case 'K': return le(k, 1, &x) ? -1 : int_value(k, (int64_t)x);
    case 'M': return le(k, 2, &x) ? -1 : int_value(k, (int64_t)x);
    case 0x8a: return le(k, 1, &x) ? -1 : long_value(k, (size_t)x);
    case 0x8b: /* LONG4: a signed length */
        if (le(k, 4, &x)) return -1;
        if (x & 0x80000000u) return fail(k, "a negative length");
        return long_value(k, (size_t)x);
    case 'G': { /* BINFLOAT: big-endian */
        if (take(k, 8, &b)) return -1;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        struct dr_pk_val *v = value(k, DR_PK_FLOAT);
        if (!v) return -1;
        memcpy(&v->u.f, &bits, sizeof v->u.f);
        return push(k, v);
    }
    case 'X': return string_value(k, 4, DR_PK_STR);    /* BINUNICODE */
    case 0x8c: return string_value(k, 1, DR_PK_STR);   /* SHORT_BINUNICODE */
    case 0x8d: return string_value(k, 8, DR_PK_STR);   /* BINUNICODE8 */
    case 'T': return string_value(k, 4, DR_PK_BYTES);  /* BINSTRING (Python 2 str) */
    case 'U': return string_value(k, 1, DR_PK_BYTES);  /* SHORT_BINSTRING */
    case 'B': return string_value(k, 4, DR_PK_BYTES);  /* BINBYTES */
    case 'C': return string_value(k, 1, DR_PK_BYTES);  /* SHORT_BINBYTES */
    case 0x8e: return string_value(k, 8, DR_PK_BYTES); /* BINBYTES8 */
    case ']': return push(k, value(k, DR_PK_LIST));
    case '}': return push(k, value(k, DR_PK_DICT));
    case ')': {
        struct dr_pk_val *v = value(k, DR_PK_TUPLE);
        if (v) v->frozen = 1;
        return push(k, v);
    }
    case 'l': return collect(k, DR_PK_LIST);
    case 't': return collect(k, DR_PK_TUPLE);
    case 'd': return collect(k, DR_PK_DICT);
    case 0x85: return tuple_n(k, 1);
    case 0x86: return tuple_n(k, 2);
    case 0x87: return tuple_n(k, 3);
    case 'a': return append(k);
    case 'e': return extend(k, DR_PK_LIST);
    case 's': return setitem(k);
    case 'u': return extend(k, DR_PK_DICT);
    case 'q': return le(k, 1, &x) ? -1 : put(k, x); /* BINPUT */
    case 'r': return le(k, 4, &x) ? -1 : put(k, x); /* LONG_BINPUT */
    case 0x94: return put(k, k->nmemo);             /* MEMOIZE */
    case 'h': return le(k, 1, &x) ? -1 : get(k, x); /* BINGET */
    case 'j': return le(k, 4, &x) ? -1 : get(k, x); /* LONG_BINGET */
    }
    char why[160];
    const char *name = refused(op);
    if (name)
        snprintf(why, sizeof why, "opcode %s (0x%02x): pickle code is never run", name, op);
    else
        snprintf(why, sizeof why,
                 "opcode 0x%02x is not in the subset read (data of protocol "
                 "2 to 5)",
                 op);
    return fail(k, why);
}

struct dr_pk_doc *dr_pk_parse(const void *buf, size_t len, char *err, size_t errlen)
{
    struct dr_pk_doc *d = calloc(1, sizeof *d);
    struct pk k = {.doc = d,
                   .p = buf,
                   .start = buf,
                   .end = (const unsigned char *)buf + len,
                   .err = err,
                   .errlen = errlen};
    err[0] = '\0';
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int stop = 0;
    while (!stop) {
        k.at = (size_t)(k.p - k.start);
        if (k.p == k.end) {
            fail(&k, "truncated (no STOP)");
            break;
        }
        if (step(&k, *k.p++, &stop)) break;
    }
    free(k.stack);
    free(k.marks);
    free(k.memo);
    if (!stop) {
        dr_pk_free(d);
        return NULL;
    }
    return d;
}

const struct dr_pk_val *dr_pk_root(const struct dr_pk_doc *d)
{
    return d->root;
}

void dr_pk_free(struct dr_pk_doc *d)
{
    if (!d) return;
    for (struct chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

const struct dr_pk_val *dr_pk_get(const struct dr_pk_val *d, const char *key)
{
    if (!d || d->kind != DR_PK_DICT) return NULL;
    size_t len = strlen(key);
    for (size_t i = d->n; i >= 2; i -= 2) {
        const struct dr_pk_val *k = d->u.items[i - 2];
        if (k->kind == DR_PK_STR && k->n == len && !memcmp(k->u.s, key, len))
            return d->u.items[i - 1];
    }
    return NULL;
}

const struct dr_pk_val *dr_pk_item(const struct dr_pk_val *v, size_t i)
{
    return i < dr_pk_len(v) ? v->u.items[i] : NULL;
}

size_t dr_pk_len(const struct dr_pk_val *v)
{
    return v && (v->kind == DR_PK_LIST || v->kind == DR_PK_TUPLE) ? v->n : 0;
}

int dr_pk_int(const struct dr_pk_val *v, int64_t *out)
{
    if (!v || (v->kind != DR_PK_INT && v->kind != DR_PK_BOOL)) return -1;
    *out = v->u.i;
    return 0;
}

const char *dr_pk_str(const struct dr_pk_val *v)
{
    return v && v->kind == DR_PK_STR ? v->u.s : NULL;
}
