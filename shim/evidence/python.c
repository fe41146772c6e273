/*
 * python.c: see python.h.
 *
 * One walk for every version, driven by a struct ng_py_layout: the generated
 * table (python_layouts.h) on 3.8-3.12, the interpreter's _Py_DebugOffsets on
 * 3.13 (checked against the table's 3.13 row) and 3.14. Every read of the
 * interpreter's memory goes through process_vm_readv on our own pid, split at
 * page boundaries, so that an address freed or torn by a running thread gives a
 * short read, never a fault; every object is checked for its type before its
 * fields are used, and every loop is bounded and checked for cycles.
 */
#include "evidence/python.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "evidence/python_layouts.h"

#define MAX_INTERPS 16
#define MAX_THREADS 256
#define MAX_FRAMES  8192
#define MAX_DEPTH   100  /* frames kept per thread, as faulthandler */
#define MAX_STEPS   400  /* frames visited per thread, the interpreter's shim frames included */
#define MAX_TABLE   4096 /* bytes of a line table read */
#define MAX_BLOCK   512  /* bytes of a thread state, frame or code object read */
#define POOL_MAX    (512 << 10)
#define CODE_CACHE  1024 /* code objects named per collection, a power of 2 */
#define PAGE        4096
#define WALK_TRIES  5  /* walks of a thread list that changes underneath */
#define TAG_BITS    7u /* 3.14 tags the low bits of a frame's f_executable */

enum method { NONE, LAYOUT, DEBUG_OFFSETS };
static const char *const method_name[] = {"none", "layout", "debug_offsets"};

static char version[32];
static ng_atomic(int) is_python;
static enum method method;
static char why[200];
static struct ng_py_layout lay;
static uintptr_t runtime, code_type, frame_type, str_type, bytes_type;
static int ts_size;
static int pthread_tid_off = -1; /* 3.8-3.10: the tid's offset in glibc's struct pthread */
static const char *tid_note;     /* why tids are not known, when they are not */

static struct ng_py_thread threads[MAX_THREADS];
static struct ng_py_frame frames[MAX_FRAMES];
static int nthreads, nframes;
static char pool[POOL_MAX];
static size_t pool_len;
static ng_atomic(int) collected;

struct code_info {
    uintptr_t code, table;
    const char *file, *name;
    int first, generation;
};
static struct code_info code_cache[CODE_CACHE];
static int generation;
static uintptr_t table_code; /* the code whose line table is in `table` */
static uint8_t table[MAX_TABLE];
static int table_len;

const char *ncclguard_python_version(void)
{
    return ng_atomic_load_acquire(&is_python) ? version : NULL;
}

/* ---- reading our own memory without faulting ---- */

/* Reads up to len bytes at addr into dst; returns how many were read (0 when
 * none), stopping at the first page that cannot be read. */
static size_t rd_some(uintptr_t addr, void *dst, size_t len)
{
    if (!addr || !len || addr + len < addr) return 0;
    struct iovec local = {dst, len}, remote[3];
    int n = 0;
    for (uintptr_t a = addr, end = addr + len; a < end && n < 3; n++) {
        uintptr_t stop = (a & ~(uintptr_t)(PAGE - 1)) + PAGE;
        if (stop > end || n == 2) stop = end;
        remote[n] = (struct iovec){(void *)a, stop - a};
        a = stop;
    }
    ssize_t got = process_vm_readv(getpid(), &local, 1, remote, (unsigned long)n, 0);
    return got > 0 ? (size_t)got : 0;
}

static int rd(uintptr_t addr, void *dst, size_t len)
{
    return rd_some(addr, dst, len) == len ? 0 : -1;
}

static uintptr_t rd_ptr(uintptr_t addr)
{
    uintptr_t v = 0;
    return rd(addr, &v, sizeof v) == 0 ? v : 0;
}

/* The pointer-sized word at byte `off` of a block read (0 for a field the
 * version does not have). */
static uintptr_t word(const uint8_t *b, int off)
{
    uintptr_t v = 0;
    if (off >= 0) memcpy(&v, b + off, sizeof v);
    return v;
}

static int32_t word32(const uint8_t *b, int off)
{
    int32_t v = 0;
    if (off >= 0) memcpy(&v, b + off, sizeof v);
    return v;
}

/* ---- init ---- */

static void refuse(const char *fmt, const char *arg)
{
    snprintf(why, sizeof why, fmt, arg);
    method = NONE;
}

/* The version, from Py_Version (3.11+, plain data) or else Py_GetVersion (a
 * formatting routine that takes no lock and needs no GIL), as "3.11.2". */
static unsigned long read_version(void)
{
    uintptr_t hexv = (uintptr_t)dlsym(RTLD_DEFAULT, "Py_Version");
    uint32_t h = 0;
    if (hexv && rd(hexv, &h, sizeof h) == 0 && (h >> 24) == 3) {
        static const char *const level[16] = {[0xA] = "a", [0xB] = "b", [0xC] = "rc"};
        int n =
            snprintf(version, sizeof version, "%u.%u.%u", h >> 24, (h >> 16) & 255, (h >> 8) & 255);
        if (level[(h >> 4) & 15] && n > 0)
            snprintf(version + n, sizeof version - (size_t)n, "%s%u", level[(h >> 4) & 15], h & 15);
        return h;
    }
    const char *(*get)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *v = get ? get() : NULL;
    if (!v) return 0;
    size_t n = strcspn(v, " ");
    if (n >= sizeof version) n = sizeof version - 1;
    memcpy(version, v, n);
    version[n] = '\0';
    char *dot = strchr(version, '.');
    unsigned long minor = dot ? strtoul(dot + 1, NULL, 10) : 0;
    return ((unsigned long)atoi(version) << 24) | (minor << 16);
}

/* The _Py_DebugOffsets words the walk uses, by index, for 3.13 and 3.14: the
 * struct is a cookie, the version, free_threaded, then groups of uint64 that
 * each start with their struct's size (Include/internal/pycore_runtime.h of
 * 3.13, pycore_debug_offsets.h of 3.14). 3.14's groups grew during its
 * development (threads_main, code_object_generation and tlbc_generation in the
 * interpreter, stackpointer and tlbc_index in the frame, co_tlbc in the code, a
 * set group before dict); its two layouts are tried, newest first, and the one
 * whose PyObject, bytes and str words are plausible is taken. */
struct dbg_index {
    int minor;
    int rt_head, is_next, is_threads, ts_next, ts_interp, ts_frame, ts_thread_id, ts_native;
    int fr_prev, fr_code, fr_instr, fr_owner, co_filename, co_name, co_lines, co_first, co_code;
    int ob_size, ob_type, bytes_size, bytes_sval, str_state, str_length, str_data;
};
/* one layout a row */
/* clang-format off */
static const struct dbg_index dbg_indexes[] = {
    {13, 5, 8, 9, 21, 22, 23, 24, 25, 29, 30, 31, 33, 35, 36, 38, 39, 43,
     44, 45, 65, 66, 68, 69, 70},
    {14, 5, 8, 9, 24, 25, 26, 27, 28, 32, 33, 34, 36, 40, 41, 43, 44, 48,
     50, 51, 75, 76, 78, 79, 80},
    {14, 5, 8, 9, 22, 23, 24, 25, 26, 30, 31, 32, 34, 37, 38, 40, 41, 45,
     46, 47, 71, 72, 74, 75, 76},
};
/* clang-format on */

/* The offsets in d are plausible: PyObject, bytes and str where every release
 * build has them, every field offset inside its struct's size. */
static int dbg_plausible(const uint64_t *d, const struct dbg_index *x)
{
    if (d[x->ob_size] != 16 || d[x->ob_type] != 8 || d[x->bytes_size] != 16 ||
        d[x->bytes_sval] != 32 || d[x->str_state] != 32 || d[x->str_length] != 16 ||
        d[x->str_data] != 40)
        return -1;
    const int fields[] = {x->ts_next, x->ts_interp, x->ts_frame, x->ts_thread_id, x->ts_native,
                          x->fr_prev, x->fr_code,   x->fr_instr, x->fr_owner,     x->co_filename,
                          x->co_name, x->co_lines,  x->co_first, x->co_code};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (d[fields[i]] >= MAX_BLOCK - 8) return -1;
    return 0;
}

static int max_of(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static int layout_from_debug_offsets(int minor)
{
    uint64_t d[96]; /* past the last index of any layout below */
    if (rd(runtime, d, sizeof d) != 0 || memcmp(d, "xdebugpy", 8) != 0) {
        refuse("Python %s: _PyRuntime has no _Py_DebugOffsets", version);
        return -1;
    }
    if ((d[1] >> 16) != (0x0300u | (unsigned)minor)) {
        refuse("Python %s: _Py_DebugOffsets of another version", version);
        return -1;
    }
    if (d[2]) {
        refuse("Python %s: free-threaded CPython is not supported", version);
        return -1;
    }
    const struct dbg_index *x = NULL;
    for (size_t i = 0; i < sizeof dbg_indexes / sizeof *dbg_indexes && !x; i++)
        if (dbg_indexes[i].minor == minor && dbg_plausible(d, &dbg_indexes[i]) == 0)
            x = &dbg_indexes[i];
    if (!x) {
        refuse("Python %s: _Py_DebugOffsets not laid out as expected", version);
        return -1;
    }
    lay = (struct ng_py_layout){.minor = minor,
                                .lines = NG_PY_LOCATIONS,
                                .rt_interp_head = (int)d[x->rt_head],
                                .is_next = (int)d[x->is_next],
                                .is_threads = (int)d[x->is_threads],
                                .ts_next = (int)d[x->ts_next],
                                .ts_interp = (int)d[x->ts_interp],
                                .ts_frame = (int)d[x->ts_frame],
                                .ts_cframe = -1,
                                .cf_current = -1,
                                .ts_thread_id = (int)d[x->ts_thread_id],
                                .ts_native_id = (int)d[x->ts_native],
                                .fr_prev = (int)d[x->fr_prev],
                                .fr_code = (int)d[x->fr_code],
                                .fr_lasti = -1,
                                .fr_instr = (int)d[x->fr_instr],
                                .fr_owner = (int)d[x->fr_owner],
                                .owner_shim = 3,
                                .co_filename = (int)d[x->co_filename],
                                .co_name = (int)d[x->co_name],
                                .co_firstlineno = (int)d[x->co_first],
                                .co_lines = (int)d[x->co_lines],
                                .co_code = (int)d[x->co_code],
                                .ob_type = 8,
                                .bytes_size = 16,
                                .bytes_sval = 32,
                                .str_state = 32,
                                .str_length = 16,
                                .str_data = 40,
                                .str_compact = 1u << 5,
                                .str_ascii = 1u << 6};
    int fr[] = {lay.fr_prev + 8, lay.fr_code + 8, lay.fr_instr + 8, lay.fr_owner + 1};
    int co[] = {lay.co_filename + 8, lay.co_name + 8, lay.co_firstlineno + 4, lay.co_lines + 8};
    lay.fr_size = max_of(fr, 4);
    lay.co_size = max_of(co, 4);
    return 0;
}

/* 3.13's offsets must be those of its headers (the table's row): a mismatch
 * means the indexes above are wrong, and the walk would read garbage. */
static int agrees_with_table(const struct ng_py_layout *t)
{
    return t->rt_interp_head == lay.rt_interp_head && t->is_next == lay.is_next &&
           t->is_threads == lay.is_threads && t->ts_next == lay.ts_next &&
           t->ts_interp == lay.ts_interp && t->ts_frame == lay.ts_frame &&
           t->ts_thread_id == lay.ts_thread_id && t->ts_native_id == lay.ts_native_id &&
           t->fr_prev == lay.fr_prev && t->fr_code == lay.fr_code && t->fr_instr == lay.fr_instr &&
           t->fr_owner == lay.fr_owner && t->co_filename == lay.co_filename &&
           t->co_name == lay.co_name && t->co_firstlineno == lay.co_firstlineno &&
           t->co_lines == lay.co_lines && t->co_code == lay.co_code && t->str_data == lay.str_data;
}

/* A debug build (Py_REF_DEBUG, Py_TRACE_REFS) exports one of these. */
static int debug_build(void)
{
    static const char *const names[] = {"_Py_RefTotal", "_Py_GetRefTotal", "_Py_GetGlobalRefTotal",
                                        "_Py_PrintReferences"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (dlsym(RTLD_DEFAULT, names[i])) return 1;
    return 0;
}

#define TID_SCAN 2048 /* bytes of struct pthread searched for the tid */

/* Keeps in hit[] the 4-byte slots of the calling thread's struct pthread that
 * hold its tid (while it runs: glibc clears the tid when a thread ends). */
static void tid_slots(uint8_t *hit)
{
    static int32_t w[TID_SCAN / 4];
    pid_t tid = (pid_t)syscall(SYS_gettid);
    size_t got = rd_some((uintptr_t)pthread_self(), w, sizeof w) / 4;
    for (size_t i = 0; i < TID_SCAN / 4; i++) hit[i] &= i < got && w[i] == tid;
}

static void *tid_probe_thread(void *hit)
{
    tid_slots(hit);
    return NULL;
}

/* Before 3.11 a thread state has only its pthread_t, which on glibc is the
 * address of the thread's struct pthread, whose `tid` the kernel's tid. Its
 * offset is learnt from two threads of our own: the one slot that holds each
 * thread's gettid(). */
static void learn_pthread_tid(void)
{
    static uint8_t hit[TID_SCAN / 4];
    memset(hit, 1, sizeof hit);
    pthread_t t;
    if (pthread_create(&t, NULL, tid_probe_thread, hit) != 0) {
        tid_note = "tid not known: no thread to learn struct pthread's layout from";
        return;
    }
    pthread_join(t, NULL);
    tid_slots(hit);
    int found = -1, n = 0;
    for (int i = 0; i < TID_SCAN / 4; i++)
        if (hit[i]) found = i, n++;
    if (n == 1)
        pthread_tid_off = found * 4;
    else
        tid_note = "tid not known: the tid's place in glibc's struct pthread was not found";
}

void ncclguard_python_init(void)
{
    runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
    unsigned long hexv = read_version();
    if (!hexv) return; /* not CPython */
    int minor = (hexv >> 24) == 3 ? (int)((hexv >> 16) & 255) : -1;
    code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    frame_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyFrame_Type");
    str_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    bytes_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyBytes_Type");
    const struct ng_py_layout *row = NULL;
    for (size_t i = 0; i < sizeof ng_py_layouts / sizeof *ng_py_layouts; i++)
        if (ng_py_layouts[i].minor == minor) row = &ng_py_layouts[i];
    uint64_t probe;
    method = NONE;
    if (!runtime || !code_type || !str_type || !bytes_type)
        refuse("Python %s: _PyRuntime or a type object is not exported", version);
    else if (rd(runtime, &probe, sizeof probe) != 0)
        refuse("Python %s: process_vm_readv on our own pid is refused (seccomp?)", version);
    else if (minor == 13 || minor == 14) {
        if (layout_from_debug_offsets(minor) == 0) method = DEBUG_OFFSETS;
        if (method == DEBUG_OFFSETS && row && !agrees_with_table(row))
            refuse("Python %s: _Py_DebugOffsets disagree with the headers' layout", version);
    } else if (!row)
        refuse("Python %s: no layout for this version (3.8 to 3.14 are known)", version);
    else if (debug_build())
        refuse("Python %s: a debug build, whose objects are laid out differently", version);
    else if (row->lines != NG_PY_LOCATIONS && !frame_type)
        refuse("Python %s: PyFrame_Type is not exported", version);
    else {
        lay = *row;
        method = LAYOUT;
    }
    if (method != NONE) {
        int ts[] = {lay.ts_next,   lay.ts_interp,    lay.ts_frame,
                    lay.ts_cframe, lay.ts_thread_id, lay.ts_native_id};
        ts_size = max_of(ts, 6) + 8;
        if (ts_size > MAX_BLOCK || lay.fr_size > MAX_BLOCK || lay.co_size > MAX_BLOCK)
            refuse("Python %s: a struct larger than the walk reads", version);
        if (lay.ts_native_id < 0) learn_pthread_tid();
    }
    ng_atomic_store_release(&is_python, 1);
}

/* ---- names ---- */

static const char *pool_add(const char *s, size_t n)
{
    if (pool_len + n + 1 > POOL_MAX) return "?";
    char *p = pool + pool_len;
    memcpy(p, s, n);
    p[n] = '\0';
    pool_len += n + 1;
    return p;
}

/* A str object's text when it is compact ASCII (every name and path in
 * practice), else "?". */
static const char *read_str(uintptr_t obj, size_t cap)
{
    uint8_t b[48 + 256];
    if (cap > 256) cap = 256;
    size_t got = rd_some(obj, b, (size_t)lay.str_data + cap);
    if (got < (size_t)lay.str_data || word(b, lay.ob_type) != str_type) return "?";
    uint32_t state = (uint32_t)word32(b, lay.str_state);
    int64_t len = (int64_t)word(b, lay.str_length);
    if ((state & lay.str_compact) == 0 || (state & lay.str_ascii) == 0 || len < 0) return "?";
    size_t n = (size_t)len < cap ? (size_t)len : cap;
    if (got < (size_t)lay.str_data + n) return "?"; /* torn: the text is not all there */
    char *t = (char *)b + lay.str_data;
    for (size_t i = 0; i < n; i++)
        if (t[i] == '\n' || t[i] == '"' || (unsigned char)t[i] < 32) t[i] = '?';
    return pool_add(t, n);
}

/* The file, name and line table of a code object, named once per collection. */
static const struct code_info *code_info(uintptr_t code)
{
    unsigned h = (unsigned)((code >> 4) * 2654435761u) & (CODE_CACHE - 1);
    struct code_info *c = NULL;
    for (int i = 0; i < 8; i++) {
        struct code_info *e = &code_cache[(h + (unsigned)i) & (CODE_CACHE - 1)];
        if (e->generation == generation && e->code == code) return e;
        if (e->generation != generation) {
            c = e;
            break;
        }
    }
    uint8_t b[MAX_BLOCK];
    if (rd(code, b, (size_t)lay.co_size) != 0 || word(b, lay.ob_type) != code_type) return NULL;
    static struct code_info tmp;
    if (!c) c = &tmp; /* the cache is crowded here: named, not kept */
    *c = (struct code_info){.code = code,
                            .table = word(b, lay.co_lines),
                            .first = word32(b, lay.co_firstlineno),
                            .generation = generation};
    c->file = read_str(word(b, lay.co_filename), 255);
    c->name = read_str(word(b, lay.co_name), 127);
    return c;
}

/* ---- lines ---- */

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

/* The line of code unit `addr` from a PEP 657 location table (3.11+): entries
 * of 1..8 code units, each with a line delta. */
static int64_t line_locations(const uint8_t *d, int n, int64_t first, int64_t addr)
{
    int64_t pos = 0, line = first;
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

/* 3.8 and 3.9's co_lnotab: (bytecode delta, signed line delta) pairs; the line
 * of the last pair that starts at or before byte `addr`. */
static int64_t line_lnotab(const uint8_t *d, int n, int64_t first, int64_t addr)
{
    int64_t pos = 0, line = first;
    for (int i = 0; i + 1 < n; i += 2) {
        pos += d[i];
        if (pos > addr) break;
        line += (int8_t)d[i + 1];
    }
    return line;
}

/* 3.10's co_linetable: (byte length, signed line delta) pairs, each a range of
 * bytecode; -128 is a range without a line. */
static int64_t line_310(const uint8_t *d, int n, int64_t first, int64_t addr)
{
    int64_t end = 0, line = first;
    if (addr < 0) return first;
    for (int i = 0; i + 1 < n; i += 2) {
        end += d[i];
        int8_t delta = (int8_t)d[i + 1];
        int64_t here = delta == -128 ? -1 : (line += delta);
        if (addr < end) return here;
    }
    return -1;
}

/* The line table of `c` into `table`; -1 when it cannot be read whole. */
static int load_table(const struct code_info *c)
{
    if (table_code == c->code) return 0;
    static uint8_t b[MAX_TABLE + 64];
    size_t got = rd_some(c->table, b, (size_t)lay.bytes_sval + MAX_TABLE);
    table_code = 0;
    if (got < (size_t)lay.bytes_sval || word(b, lay.ob_type) != bytes_type) return -1;
    int64_t size = (int64_t)word(b, lay.bytes_size);
    if (size < 0 || got < (size_t)lay.bytes_sval + (size_t)(size < MAX_TABLE ? size : MAX_TABLE))
        return -1;
    table_len = size < MAX_TABLE ? (int)size : MAX_TABLE;
    memcpy(table, b + lay.bytes_sval, (size_t)table_len);
    table_code = c->code;
    return 0;
}

/* The line a frame is at: from f_lasti (3.8-3.10) or its instruction pointer. */
static int64_t line_of(const struct code_info *c, const uint8_t *fb)
{
    if (load_table(c) != 0) return -1;
    if (lay.lines == NG_PY_LNOTAB)
        return line_lnotab(table, table_len, c->first, word32(fb, lay.fr_lasti));
    if (lay.lines == NG_PY_LINETABLE)
        return line_310(table, table_len, c->first, (int64_t)word32(fb, lay.fr_lasti) * 2);
    uintptr_t start = c->code + (uintptr_t)lay.co_code, instr = word(fb, lay.fr_instr);
    if (instr < start) return -1;
    return line_locations(table, table_len, c->first, (int64_t)(instr - start) / 2);
}

/* ---- the walk ---- */

/* Adds a note to a thread's (the tid's and the frames' may both be there). */
static void add_note(struct ng_py_thread *t, const char *note)
{
    if (!t->note) {
        t->note = note;
        return;
    }
    char both[256];
    int n = snprintf(both, sizeof both, "%s; %s", t->note, note);
    if (n > 0 && (size_t)n < sizeof both) t->note = pool_add(both, (size_t)n);
}

static int seen_before(const uintptr_t *seen, int n, uintptr_t p)
{
    for (int i = 0; i < n; i++)
        if (seen[i] == p) return 1;
    return 0;
}

/* The innermost frame of a thread state read into ts. */
static uintptr_t first_frame(const uint8_t *ts)
{
    if (lay.ts_frame >= 0) return word(ts, lay.ts_frame);
    return rd_ptr(word(ts, lay.ts_cframe) + (uintptr_t)lay.cf_current);
}

static void walk_frames(struct ng_py_thread *t, uintptr_t f)
{
    static uintptr_t seen[MAX_STEPS];
    int steps = 0;
    for (; f; steps++) {
        if (steps == MAX_STEPS) {
            add_note(t, "frames stop here: too many frames of the interpreter's own");
            return;
        }
        if (seen_before(seen, steps, f)) {
            add_note(t, "frames stop here: the frame list loops (it changed while read)");
            return;
        }
        seen[steps] = f;
        uint8_t fb[MAX_BLOCK];
        if (rd(f, fb, (size_t)lay.fr_size) != 0 ||
            (lay.fr_lasti >= 0 && word(fb, lay.ob_type) != frame_type)) {
            add_note(t, "frames stop here: a frame could not be read "
                        "(it changed while read)");
            return;
        }
        uintptr_t prev = word(fb, lay.fr_prev);
        uintptr_t code = word(fb, lay.fr_code) & ~(uintptr_t)TAG_BITS;
        if (lay.fr_owner >= 0 && lay.owner_shim >= 0 && fb[lay.fr_owner] >= lay.owner_shim) {
            f = prev; /* the interpreter's own entry frame: no code of the job */
            continue;
        }
        if (t->nframes == MAX_DEPTH) {
            add_note(t, "frames stop here: the innermost 100 are kept");
            return;
        }
        if (nframes == MAX_FRAMES) {
            add_note(t, "frames stop here: the dump's frames are spent");
            return;
        }
        const struct code_info *c = code_info(code);
        if (!c) {
            add_note(t, "frames stop here: a frame without a code object "
                        "(it changed while read)");
            return;
        }
        frames[nframes++] = (struct ng_py_frame){c->file, c->name, line_of(c, fb)};
        t->nframes++;
        f = prev;
    }
}

/* The kernel's tid of a thread state: native_thread_id (3.11+), or the tid in
 * the thread's struct pthread (before). -1 and a note when not known. */
static int64_t tid_of(const uint8_t *ts, uint64_t thread_id, const char **note)
{
    if (lay.ts_native_id >= 0) {
        uintptr_t v = word(ts, lay.ts_native_id);
        if (v && v < (1u << 30)) return (int64_t)v;
        *note = "tid not known: the thread has not started";
        return -1;
    }
    if (pthread_tid_off < 0) {
        *note = tid_note;
        return -1;
    }
    int32_t tid = 0;
    if (!thread_id || rd(thread_id + (uintptr_t)pthread_tid_off, &tid, sizeof tid) != 0 ||
        tid <= 0) {
        *note = "tid not known: the thread has not started or has ended";
        return -1;
    }
    return tid;
}

/* Walks every thread of every interpreter; -1 when a list changed underneath
 * (then some threads are missing, and `why` says so). */
static int walk_threads(void)
{
    static uintptr_t seen_ts[MAX_THREADS];
    uintptr_t seen_is[MAX_INTERPS];
    int n_is = 0;
    uintptr_t interp = rd_ptr(runtime + (uintptr_t)lay.rt_interp_head);
    for (; interp && n_is < MAX_INTERPS; interp = rd_ptr(interp + (uintptr_t)lay.is_next)) {
        if (seen_before(seen_is, n_is, interp)) break;
        seen_is[n_is++] = interp;
        uintptr_t ts = rd_ptr(interp + (uintptr_t)lay.is_threads);
        while (ts && nthreads < MAX_THREADS) {
            uint8_t b[MAX_BLOCK];
            if (seen_before(seen_ts, nthreads, ts) || rd(ts, b, (size_t)ts_size) != 0 ||
                word(b, lay.ts_interp) != interp) {
                snprintf(why, sizeof why,
                         "the thread list changed while it was read, %d times: "
                         "some threads may be missing",
                         WALK_TRIES);
                return -1;
            }
            seen_ts[nthreads] = ts;
            struct ng_py_thread *t = &threads[nthreads++];
            *t = (struct ng_py_thread){.thread_id = word(b, lay.ts_thread_id), .first = nframes};
            t->tid = tid_of(b, t->thread_id, &t->note);
            walk_frames(t, first_frame(b));
            ts = word(b, lay.ts_next);
        }
    }
    return 0;
}

void ncclguard_python_collect(void)
{
    ng_atomic_store_relaxed(&collected, 0);
    if (!ng_atomic_load_acquire(&is_python)) return;
    for (int i = 0; i < WALK_TRIES && method != NONE; i++) {
        nthreads = nframes = 0;
        pool_len = 0;
        table_code = 0;
        generation++;
        why[0] = '\0';
        if (walk_threads() == 0) break;
        /* a thread came or went under the walk: it is over in microseconds */
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    ng_atomic_store_release(&collected, 1);
}

void ncclguard_python_forget(void)
{
    ng_atomic_store_relaxed(&collected, 0);
}

int ncclguard_python_view(struct ng_py_view *out)
{
    if (!ng_atomic_load_acquire(&collected)) return -1;
    *out = (struct ng_py_view){method_name[method], why[0] ? why : NULL, nthreads};
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
