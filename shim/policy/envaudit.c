/*
 * envaudit.c: see envaudit.h. The curated facts (what replaced what, which
 * plugin reads what) come from NCCL's documentation and sources and are listed
 * in ../shared/NCCL-NOTES.md; whether a name is read at all always comes from
 * the loaded library, so a curated entry only adds advice to that answer.
 */
#include "policy/envaudit.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/secret.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "policy/strdist.h"

#define NCCL_DEFAULT_BUFFSIZE 4194304LL

/* Variables that NCCL itself stopped reading, or reads only as an old alias. */
static const struct {
    const char *name;
    const char *use; /* the replacement, when there is one */
    const char *advice;
} retired[] = {
    {"NCCL_MAX_NRINGS", "NCCL_MAX_NCHANNELS", NULL},
    {"NCCL_MIN_NRINGS", "NCCL_MIN_NCHANNELS", NULL},
    {"NCCL_LL_THRESHOLD", NULL,
     "NCCL picks algorithms and protocols itself; restrict them "
     "with NCCL_PROTO or NCCL_ALGO only if you must, else remove it"},
    {"NCCL_TREE_THRESHOLD", NULL,
     "NCCL picks algorithms itself; restrict them with NCCL_ALGO "
     "only if you must, else remove it"},
    {"NCCL_SINGLE_RING_THRESHOLD", NULL, "NCCL picks algorithms and channels itself; remove it"},
    {"NCCL_IB_CUDA_SUPPORT", "NCCL_NET_GDR_LEVEL", NULL},
    {"NCCL_IB_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", NULL},
    {"NCCL_CHECKS_DISABLE", NULL, "argument checks can no longer be turned off; remove it"},
};

/* Prefixes of variables read by network plugins rather than by NCCL. */
static const struct {
    const char *prefix;
    const char *reader;
} plugins[] = {
    {"NCCL_IBEXT_", "the IBext transport of NVIDIA's network plugin (nccl-rdma-sharp-plugins, "
                    "the libnccl-net.so shipped with HPC-X)"},
    {"NCCL_SHARP_", "the SHARP CollNet plugin of nccl-rdma-sharp-plugins (with libsharp)"},
    {"NCCL_UCX_", "the UCX transport of nccl-rdma-sharp-plugins"},
    {"NCCL_GPUDIRECTTCPX_", "Google's GPUDirect-TCPX network plugin"},
    {"NCCL_FASTRAK_", "Google's GPUDirect-TCPXO (FasTrak) network plugin"},
};

/* NCCL_* variables that are not NCCL's settings but install paths and image metadata
 * (NVIDIA's containers set NCCL_VERSION; build systems read NCCL_HOME, NCCL_ROOT...). */
static int not_a_setting(const char *name)
{
    static const char *const names[] = {"NCCL_HOME",    "NCCL_ROOT",        "NCCL_ROOT_DIR",
                                        "NCCL_DIR",     "NCCL_INCLUDE_DIR", "NCCL_LIB_DIR",
                                        "NCCL_LIBRARY", "NCCL_VERSION"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

/* Known variables whose values are text that may start with a digit. */
static int textual(const char *name)
{
    static const char *const exact[] = {"NCCL_COMM_ID",
                                        "NCCL_HOSTID",
                                        "NCCL_NET",
                                        "NCCL_ALGO",
                                        "NCCL_PROTO",
                                        "NCCL_THREAD_THRESHOLDS",
                                        "NCCL_NET_FORCE_MERGE",
                                        "NCCL_DEBUG",
                                        "NCCL_LAUNCH_MODE",
                                        "NCCL_IB_ADDR_FAMILY",
                                        "NCCL_SOCKET_FAMILY"};
    static const char *const suffix[] = {"_IFNAME", "_FILE",   "_PLUGIN", "_LEVEL", "_ADDR",
                                         "_RANGE",  "_CPUSET", "_UUID",   "_HCA",   "_SUBSYS",
                                         "_FORMAT", "_LEVELS", "_POLICY", "_RANK"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(name, exact[i])) return 1;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t m = strlen(suffix[i]);
        if (n > m && !strcmp(name + n - m, suffix[i])) return 1;
    }
    return 0;
}

struct ctx {
    const struct ng_known *known;
    const char *version;
    char *const *envp;
    struct ng_audit *out;
};

/* Where a variable's value comes from: the policy rule that set it, or the environment. */
static const char *where(const char *name, const char *value, char *buf, size_t len)
{
    const struct ng_env_change *c = ncclguard_policy_change_of(name);
    int set = c && (c->outcome == NG_OUT_SET || c->outcome == NG_OUT_REPLACED ||
                    c->outcome == NG_OUT_FORCED || (c->outcome == NG_OUT_ALREADY && c->was_parent));
    if (set && !strcmp(c->rule->value, value)) return ncclguard_policy_where(c, buf, len);
    return "environment";
}

static void add(struct ctx *x, int sev, int kind, const char *var, const char *value,
                const char *what, const char *todo_fmt, ...) __attribute__((format(printf, 7, 8)));
static void add(struct ctx *x, int sev, int kind, const char *var, const char *value,
                const char *what, const char *todo_fmt, ...)
{
    struct ng_audit *a = x->out;
    if (sev == NG_SEV_WARNING)
        a->warnings++;
    else
        a->notes++;
    if (a->nfindings == NG_FINDINGS_MAX) {
        a->dropped++;
        return;
    }
    struct ng_finding *f = &a->f[a->nfindings++];
    f->severity = (unsigned char)sev;
    f->kind = (unsigned char)kind;
    snprintf(f->var, sizeof f->var, "%s", var);
    const char *real = value;
    if (ng_secret_name(var, strlen(var))) value = "<not shown>"; /* base/secret.h */
    if (strlen(value) < sizeof f->value)
        snprintf(f->value, sizeof f->value, "%s", value);
    else
        snprintf(f->value, sizeof f->value, "%.*s...", (int)sizeof f->value - 4, value);
    char todo[400], shown[64], src[NG_STR_MAX + 64];
    va_list ap;
    va_start(ap, todo_fmt);
    vsnprintf(todo, sizeof todo, todo_fmt, ap);
    va_end(ap);
    if (strlen(value) > 40)
        snprintf(shown, sizeof shown, "%.37s...", value);
    else if (!*value)
        snprintf(shown, sizeof shown, "\"\"");
    else
        snprintf(shown, sizeof shown, "%s", value);
    snprintf(f->message, sizeof f->message, "%s=%s %s (%s): %s", var, shown, what,
             where(var, real, src, sizeof src), todo);
}

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (!strncmp(*envp, name, n) && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

static const char *suggest_get(size_t i, const void *known)
{
    return ncclguard_known_at(known, i);
}

/* Not read by this NCCL: a myth, a retired name, a plugin's, or a typo. */
static void unknown_name(struct ctx *x, const char *name, const char *value)
{
    char what[128], dym[300];
    snprintf(what, sizeof what, "is not read by NCCL %s", x->version);
    if (!strcmp(name, "NCCL_TIMEOUT")) {
        add(x, NG_SEV_WARNING, NG_FIND_MYTH, name, value, "is not an NCCL variable",
            "NCCL has no timeout for collectives; set the framework's "
            "(torch.distributed.init_process_group(timeout=...)) or ncclguard's "
            "(timeout in the site policy, or NCCLGUARD_TIMEOUT; now %g s)",
            ncclguard_settings()->timeout);
        return;
    }
    if (!strcmp(name, "NCCL_IB_MTU")) {
        add(x, NG_SEV_WARNING, NG_FIND_MYTH, name, value, what,
            "NCCL uses the active MTU of each InfiniBand port, which the fabric (subnet manager "
            "and switches) sets; remove it");
        return;
    }
    if (!strcmp(name, "NCCL_MAX_RINGS") || !strcmp(name, "NCCL_MIN_RINGS")) {
        const char *use = !strcmp(name, "NCCL_MAX_RINGS") ? "NCCL_MAX_NCHANNELS"
                                                          : "NCCL_MIN_NCHANNELS";
        if (ncclguard_known_has(x->known, use)) {
            add(x, NG_SEV_WARNING, NG_FIND_UNKNOWN, name, value, what, "did you mean %s?", use);
            return;
        }
    }
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
        if (strcmp(name, retired[i].name)) continue;
        snprintf(what, sizeof what, "is no longer read by NCCL %s", x->version);
        if (retired[i].use && ncclguard_known_has(x->known, retired[i].use))
            add(x, NG_SEV_WARNING, NG_FIND_REMOVED, name, value, what, "use %s instead",
                retired[i].use);
        else
            add(x, NG_SEV_WARNING, NG_FIND_REMOVED, name, value, what, "%s",
                retired[i].advice ? retired[i].advice : "remove it");
        return;
    }
    for (size_t i = 0; i < sizeof plugins / sizeof plugins[0]; i++) {
        if (strncmp(name, plugins[i].prefix, strlen(plugins[i].prefix))) continue;
        snprintf(what, sizeof what, "is not read by NCCL %s itself", x->version);
        add(x, NG_SEV_NOTE, NG_FIND_PLUGIN, name, value, what,
            "%s reads it; it does nothing unless that plugin is installed and loaded",
            plugins[i].reader);
        return;
    }
    if (x->out->nfindings < NG_FINDINGS_MAX &&
        ncclguard_suggest(name, x->known->n, suggest_get, x->known, dym, sizeof dym))
        add(x, NG_SEV_WARNING, NG_FIND_UNKNOWN, name, value, what, "did you mean %s?", dym);
    else
        add(x, NG_SEV_WARNING, NG_FIND_UNKNOWN, name, value, what,
            "check the spelling, or remove it (a plugin that reads it would make this moot)");
}

/* A read name that is an old alias, or a debugging switch. */
static int retired_but_read(struct ctx *x, const char *name, const char *value)
{
    char what[160];
    if (!strcmp(name, "NCCL_CHECKS_DISABLE")) {
        add(x, NG_SEV_WARNING, NG_FIND_DEBUG, name, value, "turns NCCL's argument checks off",
            "it is a benchmarking switch; remove it in production");
        return 1;
    }
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
        if (strcmp(name, retired[i].name)) continue;
        if (retired[i].use) {
            snprintf(what, sizeof what, "is a deprecated alias of %s in NCCL %s", retired[i].use,
                     x->version);
            /* NCCL_MAX_NCHANNELS -> NCCL_MAX_CTAS, when this NCCL has the newer knob */
            char ctas[64] = "", newer[128] = "";
            if (strstr(retired[i].use, "_NCHANNELS"))
                snprintf(ctas, sizeof ctas, "%.8s_CTAS", retired[i].use);
            if (ctas[0] && ncclguard_known_has(x->known, ctas))
                snprintf(newer, sizeof newer, " (or %s, which supersedes it)", ctas);
            add(x, NG_SEV_WARNING, NG_FIND_DEPRECATED, name, value, what, "use %s instead%s",
                retired[i].use, newer);
        } else {
            snprintf(what, sizeof what, "is deprecated in NCCL %s", x->version);
            add(x, NG_SEV_WARNING, NG_FIND_DEPRECATED, name, value, what, "%s", retired[i].advice);
        }
        return 1;
    }
    return 0;
}

/* What the user probably meant by a number NCCL cannot read: "1e6", "4M", "08". */
static int intended(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno) return -1;
    if (!*end) return *out = v, 0;
    static const char units[] = "KMGT";
    char c = (char)(*end & ~0x20);
    const char *u = c ? strchr(units, c) : NULL;
    if (u &&
        (!end[1] || !strcmp(end + 1, "B") || !strcmp(end + 1, "i") || !strcmp(end + 1, "iB"))) {
        for (long i = 0; i <= u - units; i++) {
            if (v > LLONG_MAX / 1024 || v < LLONG_MIN / 1024) return -1;
            v *= 1024;
        }
        return *out = v, 0;
    }
    double d = strtod(s, &end);
    if (!*end && d < 9e18 && d > -9e18 && d == (double)(long long)d) return *out = (long long)d, 0;
    return -1;
}

/* Values that NCCL's strtoll(s, NULL, 0) reads differently from what was written. */
static int misparse(struct ctx *x, const char *name, const char *value)
{
    const char *p = value + (*value == '-' || *value == '+');
    if (textual(name) || *p < '0' || *p > '9') return 0;
    for (const char *q = p; *q; q++)
        if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
              *q == '.' || *q == '+' || *q == '_'))
            return 0;
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 0);
    long long meant;
    char what[160], hint[96] = "";
    int have_meant = intended(value, &meant) == 0;
    if (errno == ERANGE) {
        add(x, NG_SEV_WARNING, NG_FIND_MISPARSE, name, value, "is out of range for NCCL",
            "NCCL ignores it and uses its default; remove it or use a smaller number");
        return 1;
    }
    int octal = p[0] == '0' && p[1] >= '0' && p[1] <= '9';
    if (*end) {
        snprintf(what, sizeof what, "is read by NCCL as %lld", v);
        if (have_meant) snprintf(hint, sizeof hint, "; write %lld", meant);
        if (octal && end > p && *end >= '8' && *end <= '9')
            add(x, NG_SEV_WARNING, NG_FIND_MISPARSE, name, value, what,
                "NCCL reads a leading 0 as octal and stops at '%c'%s", *end, hint);
        else
            add(x, NG_SEV_WARNING, NG_FIND_MISPARSE, name, value, what,
                "NCCL parses integers with strtoll and ignores '%s'%s", end, hint);
        return 1;
    }
    if (octal && have_meant && meant != v) {
        snprintf(what, sizeof what, "is read by NCCL as %lld", v);
        add(x, NG_SEV_WARNING, NG_FIND_MISPARSE, name, value, what,
            "NCCL reads a leading 0 as octal; write %lld if you meant %lld", meant, meant);
        return 1;
    }
    return 0;
}

static void buffsize(struct ctx *x, const char *name, const char *value)
{
    long long v = strtoll(value, NULL, 0);
    char what[160];
    if (v > 0 && v < NCCL_DEFAULT_BUFFSIZE) {
        if (v % (1 << 20) == 0)
            snprintf(what, sizeof what, "(%lld MiB) is below NCCL's default of 4194304 (4 MiB)",
                     v >> 20);
        else
            snprintf(what, sizeof what, "is below NCCL's default of 4194304 (4 MiB)");
        add(x, NG_SEV_WARNING, NG_FIND_VALUE, name, value, what,
            "it shrinks the buffer rather than growing it, which usually lowers bandwidth; "
            "remove it unless a measurement favours it");
    }
    if (v > 0 && (v & (v - 1)))
        add(x, NG_SEV_WARNING, NG_FIND_VALUE, name, value, "is not a power of two",
            "NCCL splits the buffer into equal steps; use a power of two such as 8388608 "
            "(8 MiB), or remove it");
}

static void debug_values(struct ctx *x, const char *name, const char *value)
{
    if (!strcmp(name, "NCCL_DEBUG") && (!strcasecmp(value, "INFO") || !strcasecmp(value, "TRACE")))
        add(x, NG_SEV_WARNING, NG_FIND_DEBUG, name, value, "is a debugging setting left on",
            "it logs every step of initialisation on every rank; use WARN in production "
            "and %s only to diagnose",
            value);
    if (!strcmp(name, "NCCL_LAUNCH_MODE") && !strcasecmp(value, "GROUP"))
        add(x, NG_SEV_WARNING, NG_FIND_DEBUG, name, value, "is a debugging launch mode",
            "unset it to get NCCL's default (PARALLEL)");
}

/* Contradictions between variables, reported on the one that has no effect. */
static void conflicts(struct ctx *x)
{
    static const struct {
        const char *off, *other;
    } pairs[] = {{"NCCL_IB_DISABLE", "NCCL_IB_HCA"}, {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"}};
    char what[200];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *off = env_get(x->envp, pairs[i].off), *other = env_get(x->envp, pairs[i].other);
        if (!off || !other || !*other || strtoll(off, NULL, 0) == 0) continue;
        snprintf(what, sizeof what, "has no effect because %s=%s", pairs[i].off, off);
        add(x, NG_SEV_WARNING, NG_FIND_CONFLICT, pairs[i].other, other, what,
            "the two contradict each other; remove one of them");
    }
    const char *sig = env_get(x->envp, "NCCL_PROXY_DUMP_SIGNAL");
    int ours = ncclguard_settings()->dump_signal;
    if (sig && ours && strtoll(sig, NULL, 0) == ours) {
        snprintf(what, sizeof what, "is also ncclguard's dump signal (dump_signal)");
        add(x, NG_SEV_WARNING, NG_FIND_CONFLICT, "NCCL_PROXY_DUMP_SIGNAL", sig, what,
            "one signal cannot serve both; choose another for one of them");
    }
}

void ncclguard_envaudit(const struct ng_known *known, const char *version, char *const *envp,
                        struct ng_audit *out)
{
    memset(out, 0, offsetof(struct ng_audit, f));
    snprintf(out->nccl_version, sizeof out->nccl_version, "%s", version ? version : "unknown");
    struct ctx x = {known, out->nccl_version, envp, out};
    char name[NG_NAME_MAX + 1];
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "NCCL_", 5) || !eq || (size_t)(eq - *e) > NG_NAME_MAX) continue;
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        const char *value = eq + 1;
        if (not_a_setting(name) && !ncclguard_known_has(known, name)) continue;
        out->nvars++;
        if (known->n && !ncclguard_known_has(known, name)) {
            unknown_name(&x, name, value);
            continue;
        }
        if (retired_but_read(&x, name, value)) continue;
        if (!*value) {
            add(&x, NG_SEV_NOTE, NG_FIND_EMPTY, name, value, "is set but empty",
                "NCCL treats an empty value as unset; remove it");
            continue;
        }
        debug_values(&x, name, value);
        if (misparse(&x, name, value)) continue;
        if (!strcmp(name, "NCCL_BUFFSIZE")) buffsize(&x, name, value);
    }
    conflicts(&x);
}

const char *ncclguard_finding_kind_name(int kind)
{
    static const char *const names[] = {"unknown",  "plugin", "deprecated", "removed", "myth",
                                        "misparse", "value",  "conflict",   "debug",   "empty"};
    return kind >= 0 && kind <= NG_FIND_EMPTY ? names[kind] : "?";
}

void ncclguard_envaudit_at_first_comm(void)
{
    static ng_atomic(int) ran;
    static struct ng_known known;
    static struct ng_audit audit;
    if (ng_atomic_exchange_acq_rel(&ran, 1)) return;
    const struct ng_settings *s = ncclguard_settings();
    if (s->disable || s->audit == NG_AUDIT_OFF) return;
    if (s->audit == NG_AUDIT_NODE && ncclguard_identity()->local_rank > 0) return;
    char path[PATH_MAX], why[PATH_MAX + 64], version[32];
    if (ncclguard_mapped_nccl(path, sizeof path) != 0) {
        NG_DEBUG("NCCL environment audit skipped: no libnccl.so is mapped in this process");
        return;
    }
    if (ncclguard_known_scan(path, &known, why, sizeof why) != 0) {
        NG_WARN("NCCL environment audit skipped (%s): %s; run `ncclguard envcheck` by hand", path,
                why);
        return;
    }
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    ncclguard_nccl_version(h, version, sizeof version);
    if (h) dlclose(h);
    ncclguard_envaudit(&known, version, environ, &audit);
    for (size_t i = 0; i < audit.nfindings; i++)
        ncclguard_log(audit.f[i].severity == NG_SEV_WARNING ? NG_LOG_WARN : NG_LOG_INFO, "%s",
                      audit.f[i].message);
    if (audit.dropped)
        NG_WARN("%zu more NCCL environment findings not shown; run `ncclguard envcheck`",
                audit.dropped);
    if (!known.n)
        NG_WARN("no NCCL_* names found in %s: the check for unknown variables was skipped", path);
    NG_DEBUG("NCCL environment audit: NCCL %s (%s, %zu names known): %zu variables, "
             "%zu warnings, %zu notes",
             version, path, known.n, audit.nvars, audit.warnings, audit.notes);
}
