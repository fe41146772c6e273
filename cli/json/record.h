/*
 * json/record.h: reading a flat JSON object straight into a C struct, by a
 * table of its members (struct ng_jrecord, json/json.h), without a callback per
 * member: what the dump reader uses for ops[], the bulk of a dump. The
 * conversions of a value for a member are here, shared by both backends.
 */
#ifndef NCCLGUARD_CLI_JSON_RECORD_H
#define NCCLGUARD_CLI_JSON_RECORD_H

#include <stdint.h>
#include <string.h>

#include "json/json.h"

static inline void *ng_jf_at(const struct ng_jfield *f, void *out)
{
    return (char *)out + f->offset;
}

static inline int ng_jf_int(const struct ng_jfield *f, void *out, int64_t v)
{
    switch (f->kind) {
    case NG_JF_SKIP: return 0;
    case NG_JF_I64: *(int64_t *)ng_jf_at(f, out) = v; return 0;
    case NG_JF_I32:
        if (v < INT32_MIN || v > INT32_MAX) return -1;
        *(int32_t *)ng_jf_at(f, out) = (int32_t)v;
        return 0;
    case NG_JF_U64:
    case NG_JF_U64_OR_NULL:
        if (v < 0) return -1;
        *(uint64_t *)ng_jf_at(f, out) = (uint64_t)v;
        return 0;
    default: return -1;
    }
}

static inline int ng_jf_null(const struct ng_jfield *f, void *out)
{
    if (!f->nullable) return -1;
    switch (f->kind) {
    case NG_JF_I64: *(int64_t *)ng_jf_at(f, out) = f->null_as; return 0;
    case NG_JF_I32: *(int32_t *)ng_jf_at(f, out) = (int32_t)f->null_as; return 0;
    case NG_JF_U64_OR_NULL:
    case NG_JF_HEX: *(uint64_t *)ng_jf_at(f, out) = 0; return 0;
    case NG_JF_CHARS: *(char *)ng_jf_at(f, out) = '\0'; return 0;
    default: return -1;
    }
}

/* The value of a hexadecimal digit, -1 for any other byte. */
static inline int ng_jf_hexval(unsigned char c)
{
    if ((unsigned)(c - '0') < 10) return c - '0';
    c |= 0x20;
    if ((unsigned)(c - 'a') < 6) return c - 'a' + 10;
    return -1;
}

static inline int ng_jf_name(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        /* memcmp, not strncmp: a value with a NUL inside ("gap\u0000x") must not
         * match a shorter name and send us past its end */
        if (len && names[i][0] == s[0] && strlen(names[i]) == len && !memcmp(names[i], s, len))
            return i;
    return -1;
}

static inline int ng_jf_str(const struct ng_jfield *f, void *out, const char *s, size_t len)
{
    switch (f->kind) {
    case NG_JF_HEX: {
        if (len < 1 || len > 16) return -1;
        uint64_t x = 0;
        for (size_t i = 0; i < len; i++) {
            int d = ng_jf_hexval((unsigned char)s[i]);
            if (d < 0) return -1;
            x = x << 4 | (uint64_t)d;
        }
        *(uint64_t *)ng_jf_at(f, out) = x;
        return 0;
    }
    case NG_JF_CHARS: {
        char *buf = (char *)ng_jf_at(f, out);
        size_t n = len < (size_t)f->size - 1 ? len : (size_t)f->size - 1;
        memcpy(buf, s, n);
        buf[n] = '\0';
        return 0;
    }
    case NG_JF_ENUM: {
        int i = ng_jf_name(f->names, f->size, s, len);
        *(uint8_t *)ng_jf_at(f, out) = (uint8_t)(i >= 0 ? i : f->null_as);
        return 0;
    }
    default: return -1;
    }
}

/* One string of a FLAGS member: its bit (index in names, or "bitN") is set. */
static inline int ng_jf_flag(const struct ng_jfield *f, void *out, const char *s, size_t len)
{
    uint32_t *bits = (uint32_t *)ng_jf_at(f, out);
    int i = ng_jf_name(f->names, f->size, s, len);
    if (i < 0 && len > 3 && len < 6 && !memcmp(s, "bit", 3)) {
        i = 0;
        for (size_t k = 3; k < len; k++) {
            if (s[k] < '0' || s[k] > '9') return 0;
            i = i * 10 + (s[k] - '0');
        }
        if (i > 31) return 0;
    }
    if (i >= 0) *bits |= 1u << i;
    return 0;
}

#endif
