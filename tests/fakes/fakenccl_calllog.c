/*
 * fakenccl call log: see fakenccl_calllog.h for the format.
 */
#include "fakenccl_calllog.h"

#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Open-addressing map from a 64-bit key (a pointer or an id hash) to its ordinal. */
struct ordmap {
    uint64_t *keys;
    long *vals;
    size_t cap, used;
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;
static bool log_failed;
static struct ordmap maps[FN_LOG_NKINDS];
static const char *const kind_prefix[FN_LOG_NKINDS] = {"comm", "stream", "buf", "reg", "win", "id"};

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)(fn_hash64(&key, sizeof key, 7) & (cap - 1));
}

static bool ordmap_grow(struct ordmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *keys = calloc(cap, sizeof *keys);
    long *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->vals[i]) continue;
        size_t j = slot_of(m->keys[i], cap);
        while (vals[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return true;
}

/* The ordinal of key, numbering it when first seen; -1 if memory ran out. Under log_lock. */
static long ordinal(struct ordmap *m, uint64_t key)
{
    if ((m->used + 1) * 2 > m->cap && !ordmap_grow(m)) return -1;
    size_t j = slot_of(key, m->cap);
    while (m->vals[j]) { /* vals hold ordinal + 1, so 0 marks an empty slot */
        if (m->keys[j] == key) return m->vals[j] - 1;
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = (long)++m->used;
    return m->vals[j] - 1;
}

static void ordmaps_clear(void)
{
    for (int k = 0; k < FN_LOG_NKINDS; k++) {
        free(maps[k].keys);
        free(maps[k].vals);
        memset(&maps[k], 0, sizeof maps[k]);
    }
}

bool fn_log_begin(struct fn_logline *l, const char *name)
{
    const struct fn_config *c = fn_cfg();
    if (!c->call_log[0]) return false;
    pthread_mutex_lock(&log_lock);
    if (log_fd < 0 && !log_failed) {
        log_fd = open(c->call_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            log_failed = true;
            fn_loud("cannot open the call log %s: %s; calls are not logged", c->call_log,
                    strerror(errno));
        }
    }
    if (log_fd < 0) {
        pthread_mutex_unlock(&log_lock);
        return false;
    }
    l->len = 0;
    fn_log_fmt(l, "%s", name);
    return true;
}

void fn_log_fmt(struct fn_logline *l, const char *fmt, ...)
{
    if (l->len >= sizeof l->buf - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
    va_end(ap);
    if (n > 0) l->len += (size_t)n;
    if (l->len > sizeof l->buf - 1) l->len = sizeof l->buf - 1;
}

/* Starts " arg=" (nothing for an array element, whose arg is ""). */
static void arg_name(struct fn_logline *l, const char *arg)
{
    if (arg[0]) fn_log_fmt(l, " %s=", arg);
}

void fn_log_ptr(struct fn_logline *l, const char *arg, enum fn_log_kind kind, const void *p)
{
    arg_name(l, arg);
    if (!p) {
        fn_log_fmt(l, "null");
    } else if (kind == FN_LOG_STREAM && p == (const void *)CU_STREAM_LEGACY) {
        fn_log_fmt(l, "legacy");
    } else if (kind == FN_LOG_STREAM && p == (const void *)CU_STREAM_PER_THREAD) {
        fn_log_fmt(l, "per-thread");
    } else {
        long o = ordinal(&maps[kind], (uint64_t)(uintptr_t)p);
        fn_log_fmt(l, "%s#%ld", kind_prefix[kind], o);
    }
}

void fn_log_id(struct fn_logline *l, const char *arg, const ncclUniqueId *id)
{
    arg_name(l, arg);
    if (!id) {
        fn_log_fmt(l, "null");
        return;
    }
    long o = ordinal(&maps[FN_LOG_ID], fn_hash64(id->internal, sizeof id->internal, 1));
    fn_log_fmt(l, "id#%ld", o);
}

static void log_cstr(struct fn_logline *l, const char *name, const char *s)
{
    if (s)
        fn_log_fmt(l, "%s=\"%s\"", name, s);
    else
        fn_log_fmt(l, "%s=null", name);
}

void fn_log_config(struct fn_logline *l, const char *arg, const ncclConfig_t *c)
{
    if (!c) {
        fn_log_fmt(l, " %s=null", arg);
        return;
    }
    fn_log_fmt(l,
               " %s={size=%zu,magic=0x%x,version=%u,blocking=%d,cgaClusterSize=%d,"
               "minCTAs=%d,maxCTAs=%d,",
               arg, c->size, c->magic, c->version, c->blocking, c->cgaClusterSize, c->minCTAs,
               c->maxCTAs);
    log_cstr(l, "netName", c->netName);
    fn_log_fmt(l, ",splitShare=%d,trafficClass=%d,", c->splitShare, c->trafficClass);
    log_cstr(l, "commName", c->commName);
    fn_log_fmt(l,
               ",collnetEnable=%d,CTAPolicy=%d,shrinkShare=%d,nvlsCTAs=%d,"
               "nChannelsPerNetPeer=%d,nvlinkCentricSched=%d}",
               c->collnetEnable, c->CTAPolicy, c->shrinkShare, c->nvlsCTAs, c->nChannelsPerNetPeer,
               c->nvlinkCentricSched);
}

void fn_log_ints(struct fn_logline *l, const char *arg, const int *v, int n)
{
    if (!v) {
        fn_log_fmt(l, " %s=null", arg);
        return;
    }
    fn_log_fmt(l, " %s=[", arg);
    for (int i = 0; i < n; i++) fn_log_fmt(l, i ? ",%d" : "%d", v[i]);
    fn_log_fmt(l, "]");
}

static void finish(struct fn_logline *l)
{
    char thread[16] = "";
    pthread_getname_np(pthread_self(), thread, sizeof thread);
    fn_log_fmt(l, " thread=%s", thread);
    if (l->len > sizeof l->buf - 2) l->len = sizeof l->buf - 2;
    l->buf[l->len++] = '\n';
    if (write(log_fd, l->buf, l->len) != (ssize_t)l->len && !log_failed) {
        log_failed = true;
        fn_loud("writing the call log failed: %s", strerror(errno));
    }
    pthread_mutex_unlock(&log_lock);
}

void fn_log_end(struct fn_logline *l, ncclResult_t r)
{
    fn_log_fmt(l, " -> %d", (int)r);
    finish(l);
}

void fn_log_end_text(struct fn_logline *l, const char *ret, bool quote)
{
    fn_log_fmt(l, quote ? " -> \"%s\"" : " -> %s", ret ? ret : "null");
    finish(l);
}

void fn_log_atfork(enum fn_fork_phase phase)
{
    if (phase == FN_FORK_PREPARE) {
        pthread_mutex_lock(&log_lock);
        return;
    }
    if (phase == FN_FORK_CHILD) {
        if (log_fd >= 0) close(log_fd);
        log_fd = -1;
        log_failed = false;
        ordmaps_clear();
    }
    pthread_mutex_unlock(&log_lock);
}
