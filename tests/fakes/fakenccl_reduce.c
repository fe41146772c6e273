/*
 * fakenccl datatypes and reductions: the arithmetic of the fake's
 * collectives, over every ncclDataType_t of NCCL 2.28.
 *
 * Integer sums and products wrap (computed in unsigned arithmetic, as the
 * GPU does). The 16-bit and 8-bit floating types are widened to double,
 * combined, and rounded back to nearest-even after every step, like a GPU
 * that stores each partial result in the element type. Float8 e4m3
 * saturates to its largest finite value (it has no infinity); e5m2,
 * float16 and bfloat16 overflow to infinity. All functions are pure and
 * thread-safe.
 */
#include "fakenccl_core.h"

#include <math.h>
#include <string.h>

/* A small IEEE-like binary format: float16, bfloat16 and the two float8s. */
struct minifloat {
    int ebits, mbits, bias;
    bool has_inf; /* false for e4m3: the all-ones code is NaN, the rest of the top binade finite */
};

static const struct minifloat fmt_f16 = {5, 10, 15, true};
static const struct minifloat fmt_bf16 = {8, 7, 127, true};
static const struct minifloat fmt_e4m3 = {4, 3, 7, false};
static const struct minifloat fmt_e5m2 = {5, 2, 15, true};

/* Decodes one minifloat code to a double (exact). */
static double mini_decode(uint32_t c, const struct minifloat *m)
{
    uint32_t emax = (1u << m->ebits) - 1, one = 1u << m->mbits;
    uint32_t e = (c >> m->mbits) & emax, f = c & (one - 1);
    bool neg = (c >> (m->ebits + m->mbits)) & 1;
    double v;
    if (m->has_inf && e == emax)
        v = f ? NAN : INFINITY;
    else if (!m->has_inf && e == emax && f == one - 1)
        v = NAN;
    else if (e == 0)
        v = ldexp((double)f, 1 - m->bias - m->mbits);
    else
        v = ldexp((double)(f + one), (int)e - m->bias - m->mbits);
    return neg ? -v : v;
}

/* Encodes a double with round-to-nearest-even (rint in the default rounding mode). */
static uint32_t mini_encode(double x, const struct minifloat *m)
{
    uint32_t emax = (1u << m->ebits) - 1, one = 1u << m->mbits;
    uint32_t sign = signbit(x) ? 1u << (m->ebits + m->mbits) : 0;
    uint32_t max_finite = m->has_inf ? ((emax - 1) << m->mbits) | (one - 1)
                                     : (emax << m->mbits) | (one - 2);
    uint32_t overflow = m->has_inf ? emax << m->mbits : max_finite;
    if (isnan(x)) return sign | (emax << m->mbits) | (one - 1);
    double a = fabs(x);
    if (isinf(a)) return sign | overflow;
    if (a < ldexp(1.0, 1 - m->bias)) /* subnormal; rounding may reach the smallest normal */
        return sign | (uint32_t)rint(a / ldexp(1.0, 1 - m->bias - m->mbits));
    int e;
    double q = rint(frexp(a, &e) * 2.0 * one); /* a = q/one * 2^(e-1), q in [one, 2*one] */
    long biased = e - 1 + m->bias;
    if (q >= 2.0 * one) {
        q = one;
        biased++;
    }
    if (biased > (long)emax) return sign | overflow;
    uint32_t code = ((uint32_t)biased << m->mbits) | ((uint32_t)q - one);
    return sign | (code > max_finite ? overflow : code);
}

size_t fn_type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *fn_type_name(ncclDataType_t t)
{
    static const char *const names[ncclNumTypes] = {"int8",     "uint8",      "int32",
                                                    "uint32",   "int64",      "uint64",
                                                    "float16",  "float32",    "float64",
                                                    "bfloat16", "float8e4m3", "float8e5m2"};
    return (unsigned)t < ncclNumTypes ? names[t] : "invalid";
}

static const struct minifloat *minifloat_of(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat16: return &fmt_f16;
    case ncclBfloat16: return &fmt_bf16;
    case ncclFloat8e4m3: return &fmt_e4m3;
    case ncclFloat8e5m2: return &fmt_e5m2;
    default: return NULL;
    }
}

static double combine_f(double a, double b, ncclRedOp_t op)
{
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b || isnan(a) ? a : b;
    case ncclMin: return a < b || isnan(a) ? a : b;
    default: return a + b;
    }
}

/* Reduction loop for an integer type T whose unsigned twin is U (wrapping sum and product). */
#define REDUCE_INT(T, U)                                           \
    do {                                                           \
        T *a = acc;                                                \
        const T *s = src;                                          \
        for (size_t i = 0; i < n; i++) {                           \
            switch (op) {                                          \
            case ncclProd: a[i] = (T)((U)a[i] * (U)s[i]); break;   \
            case ncclMax: a[i] = a[i] > s[i] ? a[i] : s[i]; break; \
            case ncclMin: a[i] = a[i] < s[i] ? a[i] : s[i]; break; \
            default: a[i] = (T)((U)a[i] + (U)s[i]); break;         \
            }                                                      \
        }                                                          \
    } while (0)

#define REDUCE_FLOAT(T)                                                     \
    do {                                                                    \
        T *a = acc;                                                         \
        const T *s = src;                                                   \
        for (size_t i = 0; i < n; i++) a[i] = (T)combine_f(a[i], s[i], op); \
    } while (0)

/* Reduction loop for a minifloat stored in W-bit words. */
#define REDUCE_MINI(W)                                                                            \
    do {                                                                                          \
        uint##W##_t *a = acc;                                                                     \
        const uint##W##_t *s = src;                                                               \
        for (size_t i = 0; i < n; i++)                                                            \
            a[i] = (uint##W##_t)mini_encode(combine_f(mini_decode(a[i], m), mini_decode(s[i], m), \
                                                      op),                                        \
                                            m);                                                   \
    } while (0)

void fn_reduce(void *acc, const void *src, size_t n, ncclDataType_t t, ncclRedOp_t op)
{
    const struct minifloat *m = minifloat_of(t);
    switch (t) {
    case ncclInt8: REDUCE_INT(int8_t, uint8_t); break;
    case ncclUint8: REDUCE_INT(uint8_t, uint32_t); break;
    case ncclInt32: REDUCE_INT(int32_t, uint32_t); break;
    case ncclUint32: REDUCE_INT(uint32_t, uint32_t); break;
    case ncclInt64: REDUCE_INT(int64_t, uint64_t); break;
    case ncclUint64: REDUCE_INT(uint64_t, uint64_t); break;
    case ncclFloat32: REDUCE_FLOAT(float); break;
    case ncclFloat64: REDUCE_FLOAT(double); break;
    case ncclFloat16:
    case ncclBfloat16: REDUCE_MINI(16); break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: REDUCE_MINI(8); break;
    default: break;
    }
}

void fn_scale(void *dst, const void *src, size_t n, ncclDataType_t t, const void *scalar)
{
    size_t es = fn_type_size(t);
    if (es == 0) return;
    if (dst != src) memmove(dst, src, n * es);
    /* multiply by the scalar one element at a time: the scalar is a 1-element "peer" */
    for (size_t i = 0; i < n; i++) fn_reduce((char *)dst + i * es, scalar, 1, t, ncclProd);
}

/* Division for integer and binary floating types (the usual conversions do the rest). */
#define DIVIDE_PLAIN(T)                                            \
    do {                                                           \
        T *b = buf;                                                \
        for (size_t i = 0; i < n; i++) b[i] = (T)(b[i] / divisor); \
    } while (0)

#define DIVIDE_MINI(W)                                                          \
    do {                                                                        \
        uint##W##_t *b = buf;                                                   \
        for (size_t i = 0; i < n; i++)                                          \
            b[i] = (uint##W##_t)mini_encode(mini_decode(b[i], m) / divisor, m); \
    } while (0)

void fn_divide(void *buf, size_t n, ncclDataType_t t, int divisor)
{
    const struct minifloat *m = minifloat_of(t);
    if (divisor <= 0) return;
    switch (t) {
    case ncclInt8: DIVIDE_PLAIN(int8_t); break;
    case ncclUint8: DIVIDE_PLAIN(uint8_t); break;
    case ncclInt32: DIVIDE_PLAIN(int32_t); break;
    case ncclUint32: DIVIDE_PLAIN(uint32_t); break;
    case ncclInt64: DIVIDE_PLAIN(int64_t); break;
    case ncclUint64: DIVIDE_PLAIN(uint64_t); break;
    case ncclFloat32: DIVIDE_PLAIN(float); break;
    case ncclFloat64: DIVIDE_PLAIN(double); break;
    case ncclFloat16:
    case ncclBfloat16: DIVIDE_MINI(16); break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: DIVIDE_MINI(8); break;
    default: break;
    }
}
