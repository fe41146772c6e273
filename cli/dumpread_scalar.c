/*
 * dumpread_scalar.c: see dumpread_scalar.h and dumpread_mem.h: the value readers,
 * the messages, and the memory of a dump.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumpread_mem.h"
#include "dumpread_scalar.h"

/* ---- memory ---- */

struct mem_block {
    struct mem_block *next;
    size_t used, size;
    char data[];
};

char *ng_mem_strdup(struct ng_dump_mem *m, const char *s, size_t len)
{
    struct mem_block *b = m->blocks;
    if (!b || b->size - b->used < len + 1) {
        size_t size = len + 1 > 16384 ? len + 1 : 16384;
        b = malloc(sizeof *b + size);
        if (!b) return NULL;
        b->next = m->blocks;
        b->used = 0;
        b->size = size;
        m->blocks = b;
    }
    char *p = b->data + b->used;
    memcpy(p, s, len);
    p[len] = '\0';
    b->used += len + 1;
    return p;
}

void *ng_mem_push(struct ng_dump_mem *m, void **vec, size_t *n, size_t *cap, size_t el)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        void *p = realloc(*vec, ncap * el);
        if (!p) return NULL;
        if (!*vec) { /* a new array: m owns it from now on */
            if (m->nvecs == m->capvecs) {
                size_t nc = m->capvecs ? m->capvecs * 2 : 16;
                void **nv = realloc(m->vecs, nc * sizeof *nv);
                if (!nv) {
                    free(p);
                    return NULL;
                }
                m->vecs = nv;
                m->capvecs = nc;
            }
            m->vecs[m->nvecs++] = p;
        } else {
            for (size_t i = m->nvecs; i-- > 0;)
                if (m->vecs[i] == *vec) {
                    m->vecs[i] = p;
                    break;
                }
        }
        *vec = p;
        *cap = ncap;
    }
    char *e = (char *)*vec + (*n)++ * el;
    memset(e, 0, el);
    return e;
}

void ng_mem_free(struct ng_dump_mem *m)
{
    for (struct mem_block *b = m->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    for (size_t i = 0; i < m->nvecs; i++) free(m->vecs[i]);
    free(m->vecs);
}

/* ---- messages ---- */

int ng_rd_fail(struct ng_rd *r, const char *member, const char *what)
{
    if (r->err[0]) return -1; /* the innermost message stays */
    size_t at = 0;
    int depth = r->depth < NG_RD_DEPTH ? r->depth : NG_RD_DEPTH;
    for (int i = 0; i < depth && at < r->errlen; i++) {
        if (r->path[i].index >= 0)
            at += (size_t)snprintf(r->err + at, r->errlen - at, "%s%s[%ld]", i ? "." : "",
                                   r->path[i].name, r->path[i].index);
        else
            at += (size_t)snprintf(r->err + at, r->errlen - at, "%s%s", i ? "." : "",
                                   r->path[i].name);
    }
    if (at < r->errlen)
        snprintf(r->err + at, r->errlen - at, "%s%s%s%s", at && member ? "." : "",
                 member ? member : "", at || member ? ": " : "", what);
    return -1;
}

int rd_missing(struct ng_rd *r, const char *const *keys, int n, uint32_t seen, uint32_t need)
{
    for (int i = 0; i < n; i++)
        if ((need & (1u << i)) && !(seen & (1u << i))) return ng_rd_fail(r, keys[i], "missing");
    return 0;
}

/* ---- values ---- */

static int is_null(ng_jv *v) { return ng_jv_kind(v) == NG_J_NULL; }

int rd_i64(struct ng_rd *r, const char *key, ng_jv *v, int64_t *out, int64_t null_as)
{
    if (!ng_jv_int(v, out)) return 0;
    if (is_null(v)) {
        *out = null_as;
        return 0;
    }
    return ng_rd_fail(r, key, "not an integer");
}

int rd_i32(struct ng_rd *r, const char *key, ng_jv *v, int32_t *out, int32_t null_as)
{
    int64_t x;
    if (rd_i64(r, key, v, &x, null_as)) return -1;
    if (x < INT32_MIN || x > INT32_MAX) return ng_rd_fail(r, key, "out of range");
    *out = (int32_t)x;
    return 0;
}

int rd_u64(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out)
{
    int64_t x;
    if (ng_jv_int(v, &x) || x < 0) return ng_rd_fail(r, key, "not a non-negative integer");
    *out = (uint64_t)x;
    return 0;
}

int rd_u64_or_null(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out)
{
    int64_t x;
    if (!ng_jv_int(v, &x) && x >= 0) {
        *out = (uint64_t)x;
        return 0;
    }
    if (is_null(v)) {
        *out = 0;
        return 0;
    }
    return ng_rd_fail(r, key, "not a non-negative integer or null");
}

int rd_hex(struct ng_rd *r, const char *key, ng_jv *v, uint64_t *out, int nullable)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (nullable && is_null(v)) {
            *out = 0;
            return 0;
        }
        return ng_rd_fail(r, key, "not a hexadecimal string");
    }
    uint64_t x = 0;
    if (n < 1 || n > 16) return ng_rd_fail(r, key, "not 1 to 16 hexadecimal digits");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return ng_rd_fail(r, key, "not a hexadecimal string");
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    return 0;
}

int rd_bool(struct ng_rd *r, const char *key, ng_jv *v, int *out)
{
    return ng_jv_bool(v, out) ? ng_rd_fail(r, key, "not true or false") : 0;
}

int rd_str(struct ng_rd *r, const char *key, ng_jv *v, const char **out)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (is_null(v)) {
            *out = NULL;
            return 0;
        }
        return ng_rd_fail(r, key, "not a string");
    }
    if (!(*out = ng_mem_strdup(r->m, s, n))) return ng_rd_fail(r, key, "out of memory");
    return 0;
}

int rd_chars(struct ng_rd *r, const char *key, ng_jv *v, char *buf, size_t size)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (is_null(v)) {
            buf[0] = '\0';
            return 0;
        }
        return ng_rd_fail(r, key, "not a string");
    }
    if (n >= size) n = size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return 0;
}

int rd_enum(struct ng_rd *r, const char *key, ng_jv *v, const char *(*name)(int), int n, int other,
            uint8_t *out)
{
    const char *s;
    size_t len;
    if (ng_jv_string(v, &s, &len)) return ng_rd_fail(r, key, "not a string");
    for (int i = 0; i < n; i++) {
        const char *c = name(i);
        if (strlen(c) == len && !memcmp(c, s, len)) {
            *out = (uint8_t)i;
            return 0;
        }
    }
    *out = (uint8_t)other;
    return 0;
}

int rd_object(struct ng_rd *r, ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx)
{
    if (ng_jv_kind(v) != NG_J_OBJECT) return ng_rd_fail(r, NULL, "not an object");
    int rc = ng_jv_object(v, keys, fn, ctx);
    if (rc && !r->err[0]) ng_rd_fail(r, NULL, "malformed object");
    return rc;
}
