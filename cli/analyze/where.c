/*
 * analyze/where.c: where a thread is, in the job's own code. A rank that hangs
 * is usually not in NCCL: what matters is its innermost frames outside the
 * runtime (libc, CUDA, NCCL, the interpreter, ncclguard itself, the CPU harness's
 * fakes), C and Python; whether it waits idle for work; and, when the thread that
 * calls the communicator's ops does, which other threads are in the job's code.
 */
#include "analyze/where.h"

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "dump/dump.h"

#define WHERE_FRAMES 3
#define SEP " \xe2\x86\x90 " /* " ← " */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Libraries and programs that are not the job's code. */
static int is_runtime(const char *module)
{
    static const char *const prefixes[] = {"libc.so",   "libc-",        "libpthread", "ld-linux",
                                           "ld-",       "libdl",        "librt",      "libm.so",
                                           "libstdc++", "libgcc_s",     "libcuda",    "libcudart",
                                           "libnccl",   "libncclguard", "libpython",  "python",
                                           "libtorch",  "libc10",       "libunwind",  "linux-vdso",
                                           "libnvidia", "libcublas",    "libasan",    "libubsan",
                                           "libtsan",   "libffi"};
    if (!module) return 1;
    const char *b = base_name(module);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(b, prefixes[i], strlen(prefixes[i]))) return 1;
    return 0;
}

/* Functions of the C runtime in the program itself (crt1's entry) or in libc that
 * a frame may name without its module. */
static int is_runtime_fn(const char *fn)
{
    return fn && (!strcmp(fn, "_start") || !strncmp(fn, "__libc_", 7) ||
                  !strcmp(fn, "start_thread") || !strcmp(fn, "clone") || !strcmp(fn, "clone3"));
}

static int runtime_frame(const struct dr_frame *f)
{
    return is_runtime(f->module) || is_runtime_fn(f->function);
}

static int is_runtime_py(const char *file)
{
    return !file || strstr(file, "/lib/python3") || strstr(file, "site-packages/") ||
           strstr(file, "dist-packages/") || !strncmp(file, "<frozen", 7);
}

/* "function", or "module+0xoffset" for a frame without a symbol. */
static void frame_name(const struct dr_frame *f, char *buf, size_t n)
{
    if (f->function)
        snprintf(buf, n, "%s", f->function);
    else
        snprintf(buf, n, "%s+0x%llx", f->module ? base_name(f->module) : "?",
                 (unsigned long long)f->offset);
}

static size_t add(char *buf, size_t at, size_t n, const char *s)
{
    if (at < n) at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? SEP : "", s);
    return at;
}

static uint32_t c_where(const struct dr_thread *t, struct an_intern *strs)
{
    char buf[512], name[160];
    size_t at = 0;
    int got = 0;
    for (size_t i = 0; i < t->nframes && got < WHERE_FRAMES; i++) {
        if (runtime_frame(&t->frames[i]) || t->frames[i].guess) continue; /* never a guess */
        frame_name(&t->frames[i], name, sizeof name);
        at = add(buf, at, sizeof buf, name);
        got++;
    }
    int bare = t->nframes > 0;
    for (size_t i = 0; i < t->nframes; i++) bare &= !t->frames[i].module && !t->frames[i].function;
    for (size_t i = 0; bare && i < t->nframes && got < WHERE_FRAMES; i++, got++) {
        /* a crash dump's: the signal handler cannot symbolize */
        snprintf(name, sizeof name, "0x%llx", (unsigned long long)t->frames[i].pc);
        at = add(buf, at, sizeof buf, name);
    }
    if (bare && at < sizeof buf) at += (size_t)snprintf(buf + at, sizeof buf - at, " (addresses)");
    return got ? an_intern(strs, buf, at < sizeof buf ? at : sizeof buf - 1) : 0;
}

static uint32_t py_where(const struct dr_pythread *p, struct an_intern *strs)
{
    char buf[512], name[256];
    size_t at = 0;
    int got = 0;
    for (size_t i = 0; i < p->nframes && got < WHERE_FRAMES; i++) {
        const struct dr_pyframe *f = &p->frames[i];
        if (is_runtime_py(f->file)) continue;
        if (f->line >= 0)
            snprintf(name, sizeof name, "%s (%s:%lld)", f->function ? f->function : "?",
                     base_name(f->file), (long long)f->line);
        else
            snprintf(name, sizeof name, "%s (%s)", f->function ? f->function : "?",
                     base_name(f->file));
        at = add(buf, at, sizeof buf, name);
        got++;
    }
    return got ? an_intern(strs, buf, at < sizeof buf ? at : sizeof buf - 1) : 0;
}

/* Every frame, one per line, without the addresses (they differ between processes). */
static uint32_t full_stack(const struct dr_thread *t, const struct dr_pythread *p,
                           struct an_intern *strs)
{
    char buf[8192], name[160];
    size_t at = 0;
    for (size_t i = 0; i < t->nframes && at < sizeof buf; i++) {
        const struct dr_frame *f = &t->frames[i];
        frame_name(f, name, sizeof name);
        const char *guess = f->guess ? "? " : ""; /* a frame the unwind could not confirm */
        if (f->function && f->function_offset >= 0)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s+0x%llx (%s)", guess, name,
                                   (unsigned long long)f->function_offset,
                                   f->module ? base_name(f->module) : "?");
        else
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", guess, name);
        if (f->file && f->line >= 0 && at < sizeof buf) /* named offline (dump/symres.h) */
            at += (size_t)snprintf(buf + at, sizeof buf - at, " at %s:%lld", f->file,
                                   (long long)f->line);
        if (at < sizeof buf) at += (size_t)snprintf(buf + at, sizeof buf - at, "\n");
    }
    if (t->stack_note && at < sizeof buf)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "(%s)\n", t->stack_note);
    for (size_t i = 0; p && i < p->nframes && at < sizeof buf; i++) {
        const struct dr_pyframe *f = &p->frames[i];
        at += (size_t)snprintf(buf + at, sizeof buf - at, "py: %s (%s:%lld)\n",
                               f->function ? f->function : "?", f->file ? f->file : "?",
                               (long long)f->line);
    }
    if (at >= sizeof buf) at = sizeof buf - 1;
    return at ? an_intern(strs, buf, at) : 0;
}

/* The Python thread of C thread t: the one with its tid; else, when the method
 * does not give tids, the only one, or the first (faulthandler lists the current
 * thread first) for the process's main thread. */
static const struct dr_pythread *python_of(const struct dr_dump *d, const struct dr_thread *t)
{
    const struct dr_python *y = d->python;
    if (!y || !y->nthreads) return NULL;
    for (size_t i = 0; i < y->nthreads; i++)
        if (y->threads[i].tid >= 0 && y->threads[i].tid == t->tid) return &y->threads[i];
    int tids = 0;
    for (size_t i = 0; i < y->nthreads; i++) tids |= y->threads[i].tid >= 0;
    if (!tids && (y->nthreads == 1 || t->tid == d->pid)) return &y->threads[0];
    return NULL;
}

static const char *base_or_null(const char *path)
{
    return path ? base_name(path) : NULL;
}

/* A Python thread waits for work: its innermost frame is a wait of queue or threading
 * (Queue.get, Condition.wait, Event.wait, Lock.acquire, Thread.join). */
static int py_idle(const struct dr_pythread *p)
{
    static const char *const waits[] = {"get",     "put",  "wait",
                                        "acquire", "join", "_wait_for_tstate_lock"};
    if (!p->nframes) return 0;
    const char *file = base_or_null(p->frames[0].file), *fn = p->frames[0].function;
    if (!file || !fn || (strcmp(file, "queue.py") && strcmp(file, "threading.py"))) return 0;
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        if (!strcmp(fn, waits[i])) return 1;
    return 0;
}

/* A C thread waits for work: inside a condition variable or semaphore wait before
 * any frame of the job, or blocked in a futex with no frame of the job at all. */
static int c_idle(const struct dr_thread *t)
{
    static const char *const waits[] = {"pthread_cond_wait",      "pthread_cond_timedwait",
                                        "pthread_cond_clockwait", "sem_wait",
                                        "sem_timedwait",          "sem_clockwait"};
    int job = 0;
    for (size_t i = 0; i < t->nframes; i++) {
        const struct dr_frame *f = &t->frames[i];
        if (f->guess) break; /* past what the unwind confirmed: nothing to say */
        if (!runtime_frame(f)) {
            job = 1;
            break;
        }
        /* glibc's own names of them, as its .symtab and DWARF give them offline:
         * ___pthread_cond_wait, __new_sem_wait, ... */
        const char *fn = f->function;
        while (fn && *fn == '_') fn++;
        if (fn && !strncmp(fn, "new_", 4)) fn += 4;
        for (size_t k = 0; fn && k < sizeof waits / sizeof waits[0]; k++)
            if (!strcmp(fn, waits[k])) return 1;
    }
    return !job && t->syscall && !strcmp(t->syscall, "futex");
}

/* A thread of ncclguard: by its name ("ncclguard-wd", ...), or started in the library
 * (its outermost frame outside libc is the library's). */
static int c_ours(const struct dr_thread *t)
{
    if (t->name && !strncmp(t->name, "ncclguard-", 10)) return 1;
    for (size_t i = t->nframes; i-- > 0;) {
        const char *m = t->frames[i].module ? base_name(t->frames[i].module) : NULL;
        if (t->frames[i].guess || !m || !strncmp(m, "libc.so", 7) || !strncmp(m, "libc-", 5) ||
            !strncmp(m, "libpthread", 10))
            continue;
        return !strncmp(m, "libncclguard", 12);
    }
    return 0;
}

void an_thread_of(const struct an *a, const struct dr_dump *d, const struct dr_thread *t,
                  struct an_thread *out, struct an_intern *strs)
{
    (void)a;
    const struct dr_pythread *p = python_of(d, t);
    out->tid = t->tid;
    out->name = an_intern_str(strs, t->name);
    out->syscall = an_intern_str(strs, t->syscall);
    out->where = c_where(t, strs);
    out->py = p ? py_where(p, strs) : 0;
    out->stack = full_stack(t, p, strs);
    /* a Python thread's C frames are the interpreter's (its waits for the GIL among
     * them): its Python frames say whether it waits for work */
    out->idle = (uint8_t)(p && p->nframes ? py_idle(p) : c_idle(t));
    out->ours = (uint8_t)c_ours(t);
}

uint32_t an_pick_thread(const struct an *a, const struct an_rank *r, uint64_t tid)
{
    for (uint32_t i = 0; tid && i < r->nth; i++)
        if ((uint64_t)a->threads[r->th0 + i].tid == tid) return i;
    return r->main;
}

uint32_t an_also_threads(const struct an *a, const struct an_rank *r, uint32_t t, uint32_t *out,
                         uint32_t max)
{
    if (t == AN_NONE || t >= r->nth) return 0;
    const struct an_thread *th = &a->threads[r->th0 + t];
    if (!th->idle && !(r->has_python && !th->py)) return 0;
    uint32_t n = 0;
    if (r->main != AN_NONE && r->main != t && n < max) {
        const struct an_thread *m = &a->threads[r->th0 + r->main];
        if (m->where || m->py) out[n++] = r->main;
    }
    for (uint32_t i = 0; i < r->nth && n < max; i++) {
        const struct an_thread *o = &a->threads[r->th0 + i];
        if (i == t || i == r->main || o->ours || o->idle || !(o->where || o->py)) continue;
        out[n++] = i;
    }
    return n;
}
