/*
 * dump/scalar.c: see dump/scalar.h: the value readers and the messages.
 */
#include "dump/scalar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/mem.h"
#include "json/json.h"

/* ---- messages ---- */

int dr_fail(struct dr_reader *r, const char *member, const char *what)
{
    if (r->err[0]) return -1; /* the innermost message stays */
    size_t at = 0;
    int depth = r->depth < DR_DEPTH ? r->depth : DR_DEPTH;
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

int dr_missing(struct dr_reader *r, const char *const *keys, int n, uint32_t seen, uint32_t need)
{
    for (int i = 0; i < n; i++)
        if ((need & (1u << i)) && !(seen & (1u << i))) return dr_fail(r, keys[i], "missing");
    return 0;
}

/* ---- values ---- */

static int is_null(ng_jv *v)
{
    return ng_jv_kind(v) == NG_J_NULL;
}

int dr_i64(struct dr_reader *r, const char *key, ng_jv *v, int64_t *out, int64_t null_as)
{
    if (!ng_jv_int(v, out)) return 0;
    if (is_null(v)) {
        *out = null_as;
        return 0;
    }
    return dr_fail(r, key, "not an integer");
}

int dr_i32(struct dr_reader *r, const char *key, ng_jv *v, int32_t *out, int32_t null_as)
{
    int64_t x;
    if (dr_i64(r, key, v, &x, null_as)) return -1;
    if (x < INT32_MIN || x > INT32_MAX) return dr_fail(r, key, "out of range");
    *out = (int32_t)x;
    return 0;
}

int dr_u64(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out)
{
    int64_t x;
    if (ng_jv_int(v, &x) || x < 0) return dr_fail(r, key, "not a non-negative integer");
    *out = (uint64_t)x;
    return 0;
}

int dr_u64_or_null(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out)
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
    return dr_fail(r, key, "not a non-negative integer or null");
}

int dr_hex(struct dr_reader *r, const char *key, ng_jv *v, uint64_t *out, int nullable)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (nullable && is_null(v)) {
            *out = 0;
            return 0;
        }
        return dr_fail(r, key, "not a hexadecimal string");
    }
    uint64_t x = 0;
    if (n < 1 || n > 16) return dr_fail(r, key, "not 1 to 16 hexadecimal digits");
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return dr_fail(r, key, "not a hexadecimal string");
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    return 0;
}

int dr_bool(struct dr_reader *r, const char *key, ng_jv *v, int *out)
{
    return ng_jv_bool(v, out) ? dr_fail(r, key, "not true or false") : 0;
}

int dr_str(struct dr_reader *r, const char *key, ng_jv *v, const char **out)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (is_null(v)) {
            *out = NULL;
            return 0;
        }
        return dr_fail(r, key, "not a string");
    }
    if (!(*out = dr_mem_strdup(r->m, s, n))) return dr_fail(r, key, "out of memory");
    return 0;
}

int dr_chars(struct dr_reader *r, const char *key, ng_jv *v, char *buf, size_t size)
{
    const char *s;
    size_t n;
    if (ng_jv_string(v, &s, &n)) {
        if (is_null(v)) {
            buf[0] = '\0';
            return 0;
        }
        return dr_fail(r, key, "not a string");
    }
    if (n >= size) n = size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return 0;
}

int dr_enum(struct dr_reader *r, const char *key, ng_jv *v, const char *(*name)(int), int n,
            int other, uint8_t *out)
{
    const char *s;
    size_t len;
    if (ng_jv_string(v, &s, &len)) return dr_fail(r, key, "not a string");
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

int dr_object(struct dr_reader *r, ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn,
              void *ctx)
{
    if (ng_jv_kind(v) != NG_J_OBJECT) return dr_fail(r, NULL, "not an object");
    int rc = ng_jv_object(v, keys, fn, ctx);
    if (rc && !r->err[0]) dr_fail(r, NULL, "malformed object");
    return rc;
}
