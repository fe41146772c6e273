/*
 * python.c: see python.h.
 *
 * Both methods produce the same text, faulthandler's ("Thread 0x... (most
 * recent call first):" then "  File "f", line N in g" per frame, innermost
 * first), and one parser turns it into threads and frames. The walk of 3.13
 * adds the native thread id to the thread line.
 */
#include "evidence/python.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/atomic.h"

#define RAW_MAX (256 << 10)
#define MAX_THREADS 256
#define MAX_FRAMES 8192
#define MAX_DEPTH 100      /* frames per thread, as faulthandler */
#define FRAME_OWNED_BY_CSTACK 3

enum method { NONE, FAULTHANDLER, DEBUG_OFFSETS };
static const char *const method_name[] = {"none", "faulthandler", "debug_offsets"};

typedef const char *(*dump_fn)(int fd, void *interp, void *tstate);
typedef void *(*main_interp_fn)(void);

static char version[32];
static ng_atomic(int) is_python;
static enum method method;
static char why[160];
static dump_fn dump_threads;
static main_interp_fn main_interp;
static uintptr_t runtime, code_type;

/* The part of _Py_DebugOffsets (3.13) that the walk uses, read at init. */
static struct {
    uint64_t interpreters_head, threads_head;
    uint64_t ts_next, ts_current_frame, ts_thread_id, ts_native_thread_id;
    uint64_t fr_previous, fr_executable, fr_instr_ptr, fr_owner;
    uint64_t co_filename, co_name, co_linetable, co_firstlineno, co_code_adaptive;
    uint64_t ob_type, bytes_ob_size, bytes_ob_sval, str_state, str_length, str_ascii_size;
} off;

static char raw[RAW_MAX], parsed[RAW_MAX];
static size_t raw_len;
static struct ng_py_thread threads[MAX_THREADS];
static struct ng_py_frame frames[MAX_FRAMES];
static int nthreads, nframes;
static ng_atomic(int) collected;

const char *ncclguard_python_version(void)
{
    return ng_atomic_load_acquire(&is_python) ? version : NULL;
}

/* ---- reading our own memory without faulting ---- */

static int rd(uintptr_t addr, void *dst, size_t len)
{
    if (!addr) return -1;
    struct iovec local = {dst, len}, remote = {(void *)addr, len};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

static uintptr_t rd_ptr(uintptr_t addr)
{
    uintptr_t v = 0;
    return rd(addr, &v, sizeof v) == 0 ? v : 0;
}

/* ---- init ---- */

/* The 3.13 layout: cookie, version, free_threaded, then size-prefixed groups
 * of uint64 offsets (Include/internal/pycore_runtime.h of 3.13). */
static int read_debug_offsets(void)
{
    uint64_t d[80];
    if (rd(runtime, d, sizeof d) != 0 || memcmp(d, "xdebugpy", 8) != 0) {
        snprintf(why, sizeof why, "_PyRuntime has no _Py_DebugOffsets cookie");
        return -1;
    }
    if ((d[1] >> 16) != 0x030d) {
        snprintf(why, sizeof why, "_Py_DebugOffsets version %#llx: only the layout of 3.13 "
                 "is known", (unsigned long long)d[1]);
        return -1;
    }
    if (d[2]) {
        snprintf(why, sizeof why, "free-threaded CPython is not supported");
        return -1;
    }
    /* Indexes into d: runtime_state at 3, interpreter_state at 6, thread_state
     * at 19, interpreter_frame at 28, code_object at 34, pyobject at 44,
     * type_object at 46, tuple 50, list 53, dict 56, float 59, long 61,
     * bytes 64, unicode 67. Each group starts with its struct's size. */
    off.interpreters_head = d[5];
    off.threads_head = d[9];
    off.ts_next = d[21];
    off.ts_current_frame = d[23];
    off.ts_thread_id = d[24];
    off.ts_native_thread_id = d[25];
    off.fr_previous = d[29];
    off.fr_executable = d[30];
    off.fr_instr_ptr = d[31];
    off.fr_owner = d[33];
    off.co_filename = d[35];
    off.co_name = d[36];
    off.co_linetable = d[38];
    off.co_firstlineno = d[39];
    off.co_code_adaptive = d[43];
    off.ob_type = d[45];
    off.bytes_ob_size = d[65];
    off.bytes_ob_sval = d[66];
    off.str_state = d[68];
    off.str_length = d[69];
    off.str_ascii_size = d[70];
    return 0;
}

void ncclguard_python_init(void)
{
    const char *(*get)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *v = get ? get() : NULL;
    if (!v) return;
    size_t n = strcspn(v, " ");
    if (n >= sizeof version) n = sizeof version - 1;
    memcpy(version, v, n);
    version[n] = '\0';
    int major = atoi(version), minor = atoi(strchr(version, '.') ? strchr(version, '.') + 1 : "");
    dump_threads = (dump_fn)dlsym(RTLD_DEFAULT, "_Py_DumpTracebackThreads");
    main_interp = (main_interp_fn)dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
    runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
    code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    method = NONE;
    if (major == 3 && (minor == 11 || minor == 12) && dump_threads && main_interp)
        method = FAULTHANDLER;
    else if (major == 3 && minor >= 13 && runtime && code_type && read_debug_offsets() == 0)
        method = DEBUG_OFFSETS;
    else if (!why[0])
        snprintf(why, sizeof why, "Python %s: _Py_DumpTracebackThreads is not exported and "
                 "_Py_DebugOffsets came with 3.13", version);
    ng_atomic_store_release(&is_python, 1);
}

/* ---- the walk of 3.13 ---- */

/* A str object's text when it is compact ASCII (every name and path in
 * practice), else "?". */
static void read_str(uintptr_t obj, char *out, size_t cap)
{
    uint32_t state = 0;
    int64_t len = 0;
    strcpy(out, "?");
    if (rd(obj + off.str_state, &state, sizeof state) != 0 || !(state & (1u << 5)) ||
        !(state & (1u << 6)) || rd(obj + off.str_length, &len, sizeof len) != 0 || len < 0)
        return;
    size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
    if (rd(obj + off.str_ascii_size, out, n) != 0) n = 0;
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\n' || out[i] == '"') out[i] = '?'; /* keep the text parseable */
}

static unsigned varint(const uint8_t *d, int n, int *i)
{
    unsigned v = 0, shift = 0;
    while (*i < n && shift < 32) {
        uint8_t b = d[(*i)++];
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64)) break;
    }
    return v;
}

static int svarint(const uint8_t *d, int n, int *i)
{
    unsigned v = varint(d, n, i);
    return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The line of code unit `addr` from the location table (PEP 626/657's format
 * of 3.11+): entries of 1..8 code units, each with a line delta. */
static int64_t line_of(uintptr_t code, uintptr_t instr_ptr)
{
    int first = 0;
    uint8_t d[4096];
    uintptr_t table = rd_ptr(code + off.co_linetable);
    int64_t size = 0;
    if (rd(code + off.co_firstlineno, &first, sizeof first) != 0 ||
        rd(table + off.bytes_ob_size, &size, sizeof size) != 0 || size <= 0)
        return -1;
    int n = size < (int64_t)sizeof d ? (int)size : (int)sizeof d;
    if (rd(table + off.bytes_ob_sval, d, (size_t)n) != 0) return -1;
    uintptr_t start = code + off.co_code_adaptive;
    if (instr_ptr < start) return -1;
    int64_t addr = (int64_t)(instr_ptr - start) / 2, pos = 0, line = first;
    for (int i = 0; i < n;) {
        uint8_t b = d[i++];
        if (!(b & 0x80)) return -1;
        int kind = (b >> 3) & 15, len = (b & 7) + 1;
        int64_t here = line;
        if (kind == 15) {
            here = -1;
        } else if (kind == 14) {
            line += svarint(d, n, &i);
            varint(d, n, &i), varint(d, n, &i), varint(d, n, &i);
            here = line;
        } else if (kind == 13) {
            line += svarint(d, n, &i);
            here = line;
        } else if (kind >= 10) {
            line += kind - 10;
            i += 2;
            here = line;
        } else {
            i += 1;
        }
        if (addr < pos + len) return here;
        pos += len;
    }
    return -1;
}

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw + raw_len, RAW_MAX - raw_len, fmt, ap);
    va_end(ap);
    if (n > 0) raw_len += (size_t)n < RAW_MAX - raw_len ? (size_t)n : RAW_MAX - 1 - raw_len;
}

static void walk_threads(void)
{
    uintptr_t interp = rd_ptr(runtime + off.interpreters_head);
    uintptr_t ts = interp ? rd_ptr(interp + off.threads_head) : 0;
    for (int t = 0; ts && t < MAX_THREADS; t++, ts = rd_ptr(ts + off.ts_next)) {
        emit("Thread 0x%016lx (tid %lu):\n", (unsigned long)rd_ptr(ts + off.ts_thread_id),
             (unsigned long)rd_ptr(ts + off.ts_native_thread_id));
        uintptr_t f = rd_ptr(ts + off.ts_current_frame);
        for (int depth = 0; f && depth < MAX_DEPTH; f = rd_ptr(f + off.fr_previous)) {
            char owner = 0;
            uintptr_t code = rd_ptr(f + off.fr_executable);
            if (rd(f + off.fr_owner, &owner, 1) != 0 || owner == FRAME_OWNED_BY_CSTACK || !code ||
                rd_ptr(code + off.ob_type) != code_type)
                continue;
            char file[256], name[128];
            read_str(rd_ptr(code + off.co_filename), file, sizeof file);
            read_str(rd_ptr(code + off.co_name), name, sizeof name);
            emit("  File \"%s\", line %lld in %s\n", file,
                 (long long)line_of(code, rd_ptr(f + off.fr_instr_ptr)), name);
            depth++;
        }
    }
}

/* ---- faulthandler's routine ---- */

static void run_faulthandler(void)
{
    int fd = memfd_create("ncclguard-python", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof why, "memfd_create failed");
        return;
    }
    const char *err = dump_threads(fd, main_interp(), NULL);
    ssize_t n = pread(fd, raw, RAW_MAX - 1, 0);
    close(fd);
    raw_len = n > 0 ? (size_t)n : 0;
    if (err && !raw_len) snprintf(why, sizeof why, "_Py_DumpTracebackThreads: %s", err);
}

/* ---- the text, parsed ---- */

static void parse(void)
{
    memcpy(parsed, raw, raw_len);
    parsed[raw_len] = '\0';
    nthreads = nframes = 0;
    struct ng_py_thread *cur = NULL;
    for (char *line = parsed, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *t = !strncmp(line, "Thread 0x", 9) ? line + 7
                  : !strncmp(line, "Current thread 0x", 17) ? line + 15 : NULL;
        if (t && nthreads < MAX_THREADS) {
            cur = &threads[nthreads++];
            char *rest;
            cur->thread_id = strtoull(t, &rest, 16);
            char *tid = strstr(rest, "(tid ");
            cur->tid = tid ? strtoll(tid + 5, NULL, 10) : -1;
            cur->first = nframes;
            cur->nframes = 0;
            continue;
        }
        char *file = !strncmp(line, "  File \"", 8) ? line + 8 : NULL;
        char *q = file ? strstr(file, "\", line ") : NULL;
        char *in = q ? strstr(q, " in ") : NULL;
        if (!cur || !in || nframes == MAX_FRAMES) continue;
        *q = '\0';
        frames[nframes++] = (struct ng_py_frame){file, in + 4, strtoll(q + 8, NULL, 10)};
        cur->nframes++;
    }
}

void ncclguard_python_collect(void)
{
    ng_atomic_store_relaxed(&collected, 0);
    if (!ng_atomic_load_acquire(&is_python)) return;
    raw_len = 0;
    if (method == FAULTHANDLER) {
        why[0] = '\0';
        run_faulthandler();
    } else if (method == DEBUG_OFFSETS) {
        walk_threads();
    }
    parse();
    ng_atomic_store_release(&collected, 1);
}

void ncclguard_python_forget(void)
{
    ng_atomic_store_relaxed(&collected, 0);
}

int ncclguard_python_view(struct ng_py_view *out)
{
    if (!ng_atomic_load_acquire(&collected)) return -1;
    *out = (struct ng_py_view){method_name[method], method == NONE || why[0] ? why : NULL,
                               method == FAULTHANDLER ? raw : NULL, nthreads};
    return 0;
}

void ncclguard_python_thread(int i, struct ng_py_thread *out)
{
    *out = threads[i];
}

void ncclguard_python_frame(int i, struct ng_py_frame *out)
{
    *out = frames[i];
}
