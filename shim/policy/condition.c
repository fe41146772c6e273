/* condition.c: see condition.h. */
#include "policy/condition.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy/confvalue.h"
#include "policy/facts.h"

enum op { OP_EQ, OP_NE, OP_GE, OP_LE, OP_GT, OP_LT };
enum kind { K_GLOB, K_BOOL, K_INT };
enum key { KEY_HOST, KEY_GPU, KEY_JOB, KEY_IB, KEY_GPUS, KEY_WORLD, KEY_NODES };

static const struct {
    const char *name;
    enum key key;
    enum kind kind;
} keys[] = {
    {"host", KEY_HOST, K_GLOB},  {"gpu", KEY_GPU, K_GLOB},  {"job", KEY_JOB, K_GLOB},
    {"ib", KEY_IB, K_BOOL},      {"gpus", KEY_GPUS, K_INT}, {"world_size", KEY_WORLD, K_INT},
    {"nodes", KEY_NODES, K_INT},
};

/* Does one glob of the comma-separated list match text? */
static int any_glob(const char *list, const char *text)
{
    char pat[256];
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, ",");
        if (w < sizeof pat) {
            memcpy(pat, p, w);
            pat[w] = '\0';
            if (ncclguard_glob_match(pat, text)) return 1;
        }
        p += w;
        if (*p == ',') p++;
    }
    return 0;
}

/* The host matches on its full name or on the part before the first dot. */
static int match_host(const char *list)
{
    const struct ng_facts *f = ncclguard_facts(NG_FACT_HOST);
    char shortname[256];
    snprintf(shortname, sizeof shortname, "%s", f->host);
    shortname[strcspn(shortname, ".")] = '\0';
    return any_glob(list, f->host) || any_glob(list, shortname);
}

/* A GPU model matches as written ("NVIDIA H100 80GB HBM3") or without "NVIDIA ". */
static int match_gpu(const char *list, int *known)
{
    const struct ng_facts *f = ncclguard_facts(NG_FACT_GPU);
    *known = f->nmodels > 0;
    for (int i = 0; i < f->nmodels; i++) {
        const char *m = f->gpu_model[i];
        if (any_glob(list, m)) return 1;
        if (!strncasecmp(m, "NVIDIA ", 7) && any_glob(list, m + 7)) return 1;
    }
    return 0;
}

/* Parses "N", "A..B", "A.." or "..B" into [lo, hi]. */
static int parse_range(const char *v, int allow_range, long long *lo, long long *hi)
{
    const char *dots = strstr(v, "..");
    if (!dots) {
        if (ncclguard_parse_int(v, lo) != 0) return -1;
        *hi = *lo;
        return 0;
    }
    if (!allow_range) return -1;
    char a[64];
    size_t n = (size_t)(dots - v);
    if (n >= sizeof a) return -1;
    memcpy(a, v, n);
    a[n] = '\0';
    *lo = -(1LL << 62);
    *hi = 1LL << 62;
    if (n && ncclguard_parse_int(a, lo) != 0) return -1;
    if (dots[2] && ncclguard_parse_int(dots + 2, hi) != 0) return -1;
    return n || dots[2] ? 0 : -1;
}

static int eval_int(enum key key, enum op op, const char *v, char *why, size_t whylen)
{
    long long lo, hi;
    if (parse_range(v, op == OP_EQ || op == OP_NE, &lo, &hi) != 0) {
        snprintf(why, whylen, "'%s' is not an integer%s", v,
                 op == OP_EQ || op == OP_NE ? " or a range A..B" : "");
        return -1;
    }
    const struct ng_facts *f = ncclguard_facts(key == KEY_GPUS ? NG_FACT_GPU : NG_FACT_JOB);
    long long x = key == KEY_GPUS ? f->ngpus : key == KEY_WORLD ? f->world_size : f->nodes;
    if (x < 0) return 0;
    switch (op) {
    case OP_EQ: return x >= lo && x <= hi;
    case OP_NE: return x < lo || x > hi;
    case OP_GE: return x >= lo;
    case OP_LE: return x <= lo;
    case OP_GT: return x > lo;
    default: return x < lo;
    }
}

static int eval_term(enum key key, enum kind kind, enum op op, const char *v, char *why,
                     size_t whylen)
{
    if (kind == K_INT) return eval_int(key, op, v, why, whylen);
    if (op != OP_EQ && op != OP_NE) {
        snprintf(why, whylen, "only = and != compare %s", kind == K_BOOL ? "yes/no" : "names");
        return -1;
    }
    int hit, known = 1;
    if (kind == K_BOOL) {
        int want;
        if (ncclguard_parse_bool(v, &want) != 0) {
            snprintf(why, whylen, "'%s' is not yes or no", v);
            return -1;
        }
        hit = ncclguard_facts(NG_FACT_IB)->ib == want;
    } else if (key == KEY_HOST) {
        hit = match_host(v);
    } else if (key == KEY_GPU) {
        hit = match_gpu(v, &known);
    } else {
        const char *job = ncclguard_facts(NG_FACT_JOB)->job_name;
        known = job[0] != '\0';
        hit = any_glob(v, job);
    }
    if (!known) return 0;
    return op == OP_EQ ? hit : !hit;
}

static const char *parse_op(const char *p, enum op *op)
{
    static const struct {
        const char *s;
        enum op op;
    } ops[] = {{"!=", OP_NE}, {">=", OP_GE}, {"<=", OP_LE}, {"==", OP_EQ},
               {"=", OP_EQ},  {">", OP_GT},  {"<", OP_LT}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        size_t n = strlen(ops[i].s);
        if (!strncmp(p, ops[i].s, n)) {
            *op = ops[i].op;
            return p + n;
        }
    }
    return NULL;
}

/* Reads a bare word or a "quoted string" into v; returns the rest, NULL on error. */
static const char *parse_value(const char *p, char *v, size_t vlen)
{
    size_t n;
    if (*p == '"') {
        const char *q = strchr(p + 1, '"');
        if (!q) return NULL;
        n = (size_t)(q - p - 1);
        if (n >= vlen) return NULL;
        memcpy(v, p + 1, n);
        v[n] = '\0';
        return q + 1;
    }
    n = strcspn(p, " \t");
    if (n == 0 || n >= vlen) return NULL;
    memcpy(v, p, n);
    v[n] = '\0';
    return p + n;
}

int ncclguard_condition_eval(const char *text, char *why, size_t whylen)
{
    const char *p = text;
    int result = 1, terms = 0;
    char name[32], v[256];
    for (;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_");
        int k = -1;
        if (n > 0 && n < sizeof name) {
            memcpy(name, p, n);
            name[n] = '\0';
            for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
                if (!strcasecmp(name, keys[i].name)) k = (int)i;
        }
        if (k < 0) {
            snprintf(why, whylen,
                     "unknown condition '%.*s' (known: host, gpu, job, ib, gpus, "
                     "world_size, nodes)",
                     (int)(n ? n : strcspn(p, " \t=<>!")), p);
            return -1;
        }
        p += n;
        p += strspn(p, " \t");
        enum op op;
        p = parse_op(p, &op);
        if (!p) {
            snprintf(why, whylen, "'%s' needs an operator (=, !=, >=, <=, >, <)", name);
            return -1;
        }
        p += strspn(p, " \t");
        p = parse_value(p, v, sizeof v);
        if (!p) {
            snprintf(why, whylen, "'%s' needs a value (quote values with blanks)", name);
            return -1;
        }
        int r = eval_term(keys[k].key, keys[k].kind, op, v, why, whylen);
        if (r < 0) return -1;
        result &= r;
        terms++;
    }
    if (!terms) {
        snprintf(why, whylen, "[when] needs at least one condition, e.g. [when host=gpu-*]");
        return -1;
    }
    return result;
}
