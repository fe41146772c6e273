/*
 * dump/stack.c: the stacks of a dump, threads[] (C frames) and python
 * (Python frames), into struct dr_dump (dump/dump.h).
 */
#include "dump/stack.h"

#include <pthread.h>
#include <string.h>

#include "dump/dump.h"
#include "dump/mem.h"
#include "dump/scalar.h"
#include "evidence/dump_format.h"
#include "json/json.h"

/* The writer's keys (evidence/dump_format.h), and an id for each: K_<list>_<key>. */
#define KEYS(list, LIST)                                                                  \
    static const char *const list##_keys[] = {NG_DUMP_##LIST##_FIELDS(NG_DUMP_KEY_NAME)}; \
    enum { NG_DUMP_##LIST##_FIELDS(list##_ID) list##_NKEYS }
#define thread_ID(key, kind, source) K_thread_##key,
#define frame_ID(key, kind, source) K_frame_##key,
#define python_ID(key, kind, source) K_python_##key,
#define pythread_ID(key, kind, source) K_pythread_##key,
#define pyframe_ID(key, kind, source) K_pyframe_##key,
KEYS(thread, THREAD);
KEYS(frame, FRAME);
KEYS(python, PYTHON);
KEYS(pythread, PY_THREAD);
KEYS(pyframe, PY_FRAME);
static struct ng_jkeys thread_table, frame_table, python_table, pythread_table, pyframe_table;

static void init_once(void)
{
    ng_jkeys_init(&thread_table, thread_keys, thread_NKEYS);
    ng_jkeys_init(&frame_table, frame_keys, frame_NKEYS);
    ng_jkeys_init(&python_table, python_keys, python_NKEYS);
    ng_jkeys_init(&pythread_table, pythread_keys, pythread_NKEYS);
    ng_jkeys_init(&pyframe_table, pyframe_keys, pyframe_NKEYS);
}

static void init_tables(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

/* ---- threads[] ---- */

struct thread_ctx {
    struct dr_reader *r;
    struct dr_thread *t;
    struct dr_frame *f;
    size_t frames_cap;
};

static int frame_member(void *c, int k, ng_jv *v)
{
    struct thread_ctx *x = c;
    struct dr_frame *f = x->f;
    const char *key = frame_keys[k];
    switch (k) {
    case K_frame_pc: return dr_hex(x->r, key, v, &f->pc, 0);
    case K_frame_module: return dr_str(x->r, key, v, &f->module);
    case K_frame_offset: return dr_u64(x->r, key, v, &f->offset);
    case K_frame_function: return dr_str(x->r, key, v, &f->function);
    case K_frame_function_offset: return dr_i64(x->r, key, v, &f->function_offset, DR_NONE);
    case K_frame_build_id: return dr_str(x->r, key, v, &f->build_id);
    case K_frame_guess: return dr_bool(x->r, key, v, &f->guess); /* 2.2; absent before: 0 */
    }
    return 0;
}

static int frame_elem(void *c, size_t i, ng_jv *v)
{
    struct thread_ctx *x = c;
    struct dr_thread *t = x->t;
    x->f = dr_mem_push(x->r->m, (void **)&t->frames, &t->nframes, &x->frames_cap, sizeof *x->f);
    if (!x->f) return dr_fail(x->r, NULL, "out of memory");
    x->f->function_offset = x->f->line = DR_NONE;
    dr_enter(x->r, "frames", (long)i);
    int rc = dr_object(x->r, v, &frame_table, frame_member, x);
    dr_leave(x->r);
    return rc;
}

static int thread_member(void *c, int k, ng_jv *v)
{
    struct thread_ctx *x = c;
    struct dr_thread *t = x->t;
    const char *key = thread_keys[k];
    switch (k) {
    case K_thread_tid: return dr_i64(x->r, key, v, &t->tid, DR_NONE);
    case K_thread_name: return dr_str(x->r, key, v, &t->name);
    case K_thread_state: return dr_str(x->r, key, v, &t->state);
    case K_thread_syscall: return dr_str(x->r, key, v, &t->syscall);
    case K_thread_stack_from: return dr_str(x->r, key, v, &t->stack_from);
    case K_thread_frames:
        if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(x->r, key, "not an array");
        return ng_jv_array(v, frame_elem, x);
    case K_thread_stack_note: return dr_str(x->r, key, v, &t->stack_note); /* 2.2 */
    }
    return 0;
}

static int thread_elem(void *c, size_t i, ng_jv *v)
{
    struct dr_reader *r = c;
    struct dr_dump *d = r->d;
    struct dr_thread *t = dr_mem_push(r->m, (void **)&d->threads, &d->nthreads, &r->threads_cap,
                                      sizeof *t);
    if (!t) return dr_fail(r, NULL, "out of memory");
    t->tid = DR_NONE;
    struct thread_ctx x = {r, t, NULL, 0};
    dr_enter(r, "threads", (long)i);
    int rc = dr_object(r, v, &thread_table, thread_member, &x);
    dr_leave(r);
    return rc;
}

int dr_read_threads(struct dr_reader *r, ng_jv *v)
{
    init_tables();
    int kind = ng_jv_kind(v);
    r->d->has_threads = kind == NG_J_ARRAY;
    if (kind == NG_J_NULL) return 0;
    if (kind != NG_J_ARRAY) return dr_fail(r, "threads", "not an array or null");
    return ng_jv_array(v, thread_elem, r);
}

/* ---- offline names ---- */

static dr_frame_resolver resolver;

void dr_set_resolver(dr_frame_resolver fn)
{
    resolver = fn;
}

void dr_resolve_frames(struct dr_dump *d)
{
    if (!resolver || !d->has_threads) return;
    /* written in a handler: each thread's pcs start at the interrupted instruction */
    int handler = d->reason && (!strcmp(d->reason, "crash") || !strcmp(d->reason, "sigterm"));
    for (size_t i = 0; i < d->nthreads; i++) {
        const struct dr_thread *t = &d->threads[i];
        int exact = handler || (t->stack_from && strcmp(t->stack_from, "self"));
        for (size_t k = 0; k < t->nframes; k++) resolver(&t->frames[k], k == 0 && exact);
    }
}

/* ---- python ---- */

struct py_ctx {
    struct dr_reader *r;
    struct dr_python *py;
    struct dr_pythread *t;
    struct dr_pyframe *f;
    size_t frames_cap;
};

static int pyframe_member(void *c, int k, ng_jv *v)
{
    struct py_ctx *x = c;
    const char *key = pyframe_keys[k];
    switch (k) {
    case K_pyframe_file: return dr_str(x->r, key, v, &x->f->file);
    case K_pyframe_line: return dr_i64(x->r, key, v, &x->f->line, DR_NONE);
    case K_pyframe_function: return dr_str(x->r, key, v, &x->f->function);
    }
    return 0;
}

static int pyframe_elem(void *c, size_t i, ng_jv *v)
{
    struct py_ctx *x = c;
    struct dr_pythread *t = x->t;
    x->f = dr_mem_push(x->r->m, (void **)&t->frames, &t->nframes, &x->frames_cap, sizeof *x->f);
    if (!x->f) return dr_fail(x->r, NULL, "out of memory");
    x->f->line = DR_NONE;
    dr_enter(x->r, "frames", (long)i);
    int rc = dr_object(x->r, v, &pyframe_table, pyframe_member, x);
    dr_leave(x->r);
    return rc;
}

static int pythread_member(void *c, int k, ng_jv *v)
{
    struct py_ctx *x = c;
    const char *key = pythread_keys[k];
    switch (k) {
    case K_pythread_thread_id: return dr_hex(x->r, key, v, &x->t->thread_id, 0);
    case K_pythread_tid: return dr_i64(x->r, key, v, &x->t->tid, DR_NONE);
    case K_pythread_frames:
        if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(x->r, key, "not an array");
        x->frames_cap = 0;
        return ng_jv_array(v, pyframe_elem, x);
    }
    return 0; /* "note": not shown */
}

static int pythread_elem(void *c, size_t i, ng_jv *v)
{
    struct py_ctx *x = c;
    struct dr_python *py = x->py;
    x->t = dr_mem_push(x->r->m, (void **)&py->threads, &py->nthreads, &x->r->pythreads_cap,
                       sizeof *x->t);
    if (!x->t) return dr_fail(x->r, NULL, "out of memory");
    x->t->tid = DR_NONE;
    dr_enter(x->r, "threads", (long)i);
    int rc = dr_object(x->r, v, &pythread_table, pythread_member, x);
    dr_leave(x->r);
    return rc;
}

static int python_member(void *c, int k, ng_jv *v)
{
    struct py_ctx *x = c;
    const char *key = python_keys[k];
    switch (k) {
    case K_python_method: return dr_str(x->r, key, v, &x->py->method);
    case K_python_why: return dr_str(x->r, key, v, &x->py->why);
    case K_python_raw: return dr_str(x->r, key, v, &x->py->raw);
    case K_python_threads:
        if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(x->r, key, "not an array");
        return ng_jv_array(v, pythread_elem, x);
    }
    return 0;
}

int dr_read_python(struct dr_reader *r, ng_jv *v)
{
    init_tables();
    int kind = ng_jv_kind(v);
    if (kind == NG_J_NULL) return 0;
    if (kind != NG_J_OBJECT) return dr_fail(r, "python", "not an object or null");
    struct dr_python *py = NULL;
    size_t n = 0, cap = 0;
    py = dr_mem_push(r->m, (void **)&py, &n, &cap, sizeof *py);
    if (!py) return dr_fail(r, "python", "out of memory");
    r->d->python = py;
    struct py_ctx x = {r, py, NULL, NULL, 0};
    dr_enter(r, "python", -1);
    int rc = dr_object(r, v, &python_table, python_member, &x);
    dr_leave(r);
    return rc;
}
