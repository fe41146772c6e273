/*
 * python.c: see python.h.
 *
 * One walk for every version, driven by the struct ng_py_layout that
 * python_layout.c found: the generated table's row on 3.8-3.12, the
 * interpreter's _Py_DebugOffsets on 3.13 and 3.14. Every read of the
 * interpreter's memory goes through ncclguard_peek (process_vm_readv on
 * our own pid), so that an address freed or torn by a running thread gives a
 * short read, never a fault; every object is checked for its type before its
 * fields are used, and every loop is bounded and checked for cycles. A thread
 * list that changes under the walk is walked again.
 */
#include "evidence/python.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/peek.h"
#include "evidence/python_layout.h"

#define MAX_INTERPS 16
#define MAX_THREADS 256
#define MAX_FRAMES 8192
#define MAX_DEPTH 100  /* frames kept per thread, as faulthandler */
#define MAX_STEPS 400  /* frames visited per thread, the interpreter's shim frames included */
#define MAX_TABLE 4096 /* bytes of a line table read */
#define POOL_MAX (512 << 10)
#define NAME_MAX_LEN 4096 /* bytes of a file or function name kept: PATH_MAX */
#define STR_HEAD 80       /* room for a str object's header (40 to 72 bytes) */
#define CODE_CACHE 1024   /* code objects named per collection, a power of 2 */
#define WALK_TRIES 5      /* walks of a thread list that changes underneath */
#define TAG_BITS 7u       /* 3.14 tags the low bits of a frame's f_executable */

static const char *const method_name[] = {
    [NG_PY_NONE] = "none", [NG_PY_LAYOUT] = "layout", [NG_PY_DEBUG_OFFSETS] = "debug_offsets"};

static const struct ng_py_interp *py; /* the interpreter, after init */
static ng_atomic(int) is_python;
static char why[200]; /* which threads may be missing from the last walk */

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
    return ng_atomic_load_acquire(&is_python) ? py->version : NULL;
}

/* ---- reading ---- */

static uintptr_t rd_ptr(uintptr_t addr)
{
    uintptr_t v = 0;
    return ncclguard_peek_all(addr, &v, sizeof v) == 0 ? v : 0;
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

void ncclguard_python_init(void)
{
    py = ncclguard_python_find();
    if (py) ng_atomic_store_release(&is_python, 1);
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

/* Code point c as UTF-8 at out (1 to 4 bytes); '?' for a control character, a
 * quote, or a surrogate (which UTF-8 cannot carry). */
static size_t utf8_put(char *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = c == '"' || c < 32 ? '?' : (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if ((c >= 0xd800 && c < 0xe000) || c >= 0x110000) {
        out[0] = '?';
        return 1;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 63));
        out[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 63));
    out[2] = (char)(0x80 | (c >> 6 & 63));
    out[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* A str object's text in UTF-8 when it is compact (every name and path in
 * practice: ASCII, or 1, 2 or 4 bytes a character), else "?": whole up to
 * NAME_MAX_LEN bytes (a path's PATH_MAX), the first ones and "..." when
 * longer. Most are short: one read of the header and 256 bytes, a second only
 * for a longer text. */
static const char *read_str(uintptr_t obj)
{
    static uint8_t b[STR_HEAD + 4 * NAME_MAX_LEN];
    static char out[NAME_MAX_LEN + 3];
    size_t got = ncclguard_peek(obj, b, STR_HEAD + 256);
    if (got < (size_t)py->lay.str_data || word(b, py->lay.ob_type) != py->str_type) return "?";
    uint32_t state = (uint32_t)word32(b, py->lay.str_state);
    int64_t len = (int64_t)word(b, py->lay.str_length);
    if ((state & py->lay.str_compact) == 0 || len < 0) return "?";
    size_t off = (size_t)py->lay.str_data, kind = 1;
    if ((state & py->lay.str_ascii) == 0) {
        if (!py->lay.str_kind || py->lay.str_cdata <= 0 || py->lay.str_cdata > STR_HEAD) return "?";
        kind = (state & py->lay.str_kind) >> __builtin_ctz(py->lay.str_kind);
        off = (size_t)py->lay.str_cdata;
        if (kind != 1 && kind != 2 && kind != 4) return "?";
    }
    size_t n = (size_t)len < NAME_MAX_LEN ? (size_t)len : NAME_MAX_LEN;
    if (off + n * kind > got) got = off + ncclguard_peek(obj + off, b + off, n * kind);
    if (got < off + n * kind) return "?"; /* torn: the text is not all there */
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        uint32_t c = b[off + i];
        if (kind == 2) {
            uint16_t c2;
            memcpy(&c2, b + off + 2 * i, 2);
            c = c2;
        } else if (kind == 4) {
            memcpy(&c, b + off + 4 * i, 4);
        }
        char u[4];
        size_t k = utf8_put(u, c);
        if (o + k > NAME_MAX_LEN) break;
        memcpy(out + o, u, k);
        o += k;
    }
    if (i < (size_t)len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    return pool_add(out, o);
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
    uint8_t b[NG_PY_MAX_BLOCK];
    if (ncclguard_peek_all(code, b, (size_t)py->lay.co_size) != 0 ||
        word(b, py->lay.ob_type) != py->code_type)
        return NULL;
    static struct code_info tmp;
    if (!c) c = &tmp; /* the cache is crowded here: named, not kept */
    *c = (struct code_info){.code = code,
                            .table = word(b, py->lay.co_lines),
                            .first = word32(b, py->lay.co_firstlineno),
                            .generation = generation};
    c->file = read_str(word(b, py->lay.co_filename));
    c->name = read_str(word(b, py->lay.co_name));
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
    size_t got = ncclguard_peek(c->table, b, (size_t)py->lay.bytes_sval + MAX_TABLE);
    table_code = 0;
    if (got < (size_t)py->lay.bytes_sval || word(b, py->lay.ob_type) != py->bytes_type) return -1;
    int64_t size = (int64_t)word(b, py->lay.bytes_size);
    if (size < 0 ||
        got < (size_t)py->lay.bytes_sval + (size_t)(size < MAX_TABLE ? size : MAX_TABLE))
        return -1;
    table_len = size < MAX_TABLE ? (int)size : MAX_TABLE;
    memcpy(table, b + py->lay.bytes_sval, (size_t)table_len);
    table_code = c->code;
    return 0;
}

/* The line a frame is at: from f_lasti (3.8-3.10) or its instruction pointer. */
static int64_t line_of(const struct code_info *c, const uint8_t *fb)
{
    if (load_table(c) != 0) return -1;
    if (py->lay.lines == NG_PY_LNOTAB)
        return line_lnotab(table, table_len, c->first, word32(fb, py->lay.fr_lasti));
    if (py->lay.lines == NG_PY_LINETABLE)
        return line_310(table, table_len, c->first, (int64_t)word32(fb, py->lay.fr_lasti) * 2);
    uintptr_t start = c->code + (uintptr_t)py->lay.co_code, instr = word(fb, py->lay.fr_instr);
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
    if (py->lay.ts_frame >= 0) return word(ts, py->lay.ts_frame);
    return rd_ptr(word(ts, py->lay.ts_cframe) + (uintptr_t)py->lay.cf_current);
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
        uint8_t fb[NG_PY_MAX_BLOCK];
        if (ncclguard_peek_all(f, fb, (size_t)py->lay.fr_size) != 0 ||
            (py->lay.fr_lasti >= 0 && word(fb, py->lay.ob_type) != py->frame_type)) {
            add_note(t, "frames stop here: a frame could not be read "
                        "(it changed while read)");
            return;
        }
        uintptr_t prev = word(fb, py->lay.fr_prev);
        uintptr_t code = word(fb, py->lay.fr_code) & ~(uintptr_t)TAG_BITS;
        if (py->lay.fr_owner >= 0 && py->lay.owner_shim >= 0 &&
            fb[py->lay.fr_owner] >= py->lay.owner_shim) {
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
    if (py->lay.ts_native_id >= 0) {
        uintptr_t v = word(ts, py->lay.ts_native_id);
        if (v && v < (1u << 30)) return (int64_t)v;
        *note = "tid not known: the thread has not started";
        return -1;
    }
    if (py->pthread_tid_off < 0) {
        *note = py->tid_note;
        return -1;
    }
    int32_t tid = 0;
    if (!thread_id ||
        ncclguard_peek_all(thread_id + (uintptr_t)py->pthread_tid_off, &tid, sizeof tid) != 0 ||
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
    uintptr_t interp = rd_ptr(py->runtime + (uintptr_t)py->lay.rt_interp_head);
    for (; interp && n_is < MAX_INTERPS; interp = rd_ptr(interp + (uintptr_t)py->lay.is_next)) {
        if (seen_before(seen_is, n_is, interp)) break;
        seen_is[n_is++] = interp;
        uintptr_t ts = rd_ptr(interp + (uintptr_t)py->lay.is_threads);
        while (ts && nthreads < MAX_THREADS) {
            uint8_t b[NG_PY_MAX_BLOCK];
            if (seen_before(seen_ts, nthreads, ts) ||
                ncclguard_peek_all(ts, b, (size_t)py->ts_size) != 0 ||
                word(b, py->lay.ts_interp) != interp) {
                snprintf(why, sizeof why,
                         "the thread list changed while it was read, %d times: "
                         "some threads may be missing",
                         WALK_TRIES);
                return -1;
            }
            seen_ts[nthreads] = ts;
            struct ng_py_thread *t = &threads[nthreads++];
            *t = (struct ng_py_thread){.thread_id = word(b, py->lay.ts_thread_id),
                                       .first = nframes};
            t->tid = tid_of(b, t->thread_id, &t->note);
            walk_frames(t, first_frame(b));
            ts = word(b, py->lay.ts_next);
        }
    }
    return 0;
}

void ncclguard_python_collect(void)
{
    ng_atomic_store_relaxed(&collected, 0);
    if (!ng_atomic_load_acquire(&is_python)) return;
    for (int i = 0; i < WALK_TRIES && py->method != NG_PY_NONE; i++) {
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
    const char *no_stacks = py->method == NG_PY_NONE ? py->why : NULL;
    *out = (struct ng_py_view){method_name[py->method],
                               no_stacks ? no_stacks
                               : why[0]  ? why
                                         : NULL,
                               nthreads};
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
