/*
 * python_layout.c: see python_layout.h.
 *
 * Which CPython this is and where its fields are: the version from Py_Version
 * (3.11+) or Py_GetVersion; on 3.8-3.12 the generated table's row
 * (python_layouts.h); on 3.13 and 3.14 the interpreter's _Py_DebugOffsets,
 * read at the word indexes of each version's struct and checked for
 * plausibility (and, on 3.13, against the table's row); before 3.11, the tid's
 * place in glibc's struct pthread. Every read through process_vm_readv on our
 * own pid, split at page boundaries, so that an unmapped or PROT_NONE address
 * gives a short read, never a fault.
 */
#include "evidence/python_layout.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/peek.h"
#include "evidence/python_layouts.h"

static struct ng_py_interp py = {.pthread_tid_off = -1};

/* ---- which interpreter, which layout ---- */

static void refuse(const char *fmt, const char *arg)
{
    snprintf(py.why, sizeof py.why, fmt, arg);
    py.method = NG_PY_NONE;
}

/* The version, from Py_Version (3.11+, plain data) or else Py_GetVersion (a
 * formatting routine that takes no lock and needs no GIL), as "3.11.2". */
static unsigned long read_version(void)
{
    uintptr_t hexv = (uintptr_t)dlsym(RTLD_DEFAULT, "Py_Version");
    uint32_t h = 0;
    if (hexv && ncclguard_peek_all(hexv, &h, sizeof h) == 0 && (h >> 24) == 3) {
        static const char *const level[16] = {[0xA] = "a", [0xB] = "b", [0xC] = "rc"};
        int n = snprintf(py.version, sizeof py.version, "%u.%u.%u", h >> 24, (h >> 16) & 255,
                         (h >> 8) & 255);
        if (level[(h >> 4) & 15] && n > 0)
            snprintf(py.version + n, sizeof py.version - (size_t)n, "%s%u", level[(h >> 4) & 15],
                     h & 15);
        return h;
    }
    const char *(*get)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *v = get ? get() : NULL;
    if (!v) return 0;
    size_t n = strcspn(v, " ");
    if (n >= sizeof py.version) n = sizeof py.version - 1;
    memcpy(py.version, v, n);
    py.version[n] = '\0';
    char *dot = strchr(py.version, '.');
    unsigned long minor = dot ? strtoul(dot + 1, NULL, 10) : 0;
    return ((unsigned long)atoi(py.version) << 24) | (minor << 16);
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
        if (d[fields[i]] >= NG_PY_MAX_BLOCK - 8) return -1;
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
    if (ncclguard_peek_all(py.runtime, d, sizeof d) != 0 || memcmp(d, "xdebugpy", 8) != 0) {
        refuse("Python %s: _PyRuntime has no _Py_DebugOffsets", py.version);
        return -1;
    }
    if ((d[1] >> 16) != (0x0300u | (unsigned)minor)) {
        refuse("Python %s: _Py_DebugOffsets of another version", py.version);
        return -1;
    }
    if (d[2]) {
        refuse("Python %s: free-threaded CPython is not supported", py.version);
        return -1;
    }
    const struct dbg_index *x = NULL;
    for (size_t i = 0; i < sizeof dbg_indexes / sizeof *dbg_indexes && !x; i++)
        if (dbg_indexes[i].minor == minor && dbg_plausible(d, &dbg_indexes[i]) == 0)
            x = &dbg_indexes[i];
    if (!x) {
        refuse("Python %s: _Py_DebugOffsets not laid out as expected", py.version);
        return -1;
    }
    py.lay = (struct ng_py_layout){.minor = minor,
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
                                   .str_ascii = 1u << 6,
                                   /* not in _Py_DebugOffsets: the kind's 3 bits
                                    * after interned's 2, and the text after
                                    * PyCompactUnicodeObject's utf8_length and
                                    * utf8 (3.12 on; 3.13's headers agree) */
                                   .str_kind = 7u << 2,
                                   .str_cdata = 40 + 16};
    int fr[] = {py.lay.fr_prev + 8, py.lay.fr_code + 8, py.lay.fr_instr + 8, py.lay.fr_owner + 1};
    int co[] = {py.lay.co_filename + 8, py.lay.co_name + 8, py.lay.co_firstlineno + 4,
                py.lay.co_lines + 8};
    py.lay.fr_size = max_of(fr, 4);
    py.lay.co_size = max_of(co, 4);
    return 0;
}

/* 3.13's offsets must be those of its headers (the table's row): a mismatch
 * means the indexes above are wrong, and the walk would read garbage. */
static int agrees_with_table(const struct ng_py_layout *t)
{
    return t->rt_interp_head == py.lay.rt_interp_head && t->is_next == py.lay.is_next &&
           t->is_threads == py.lay.is_threads && t->ts_next == py.lay.ts_next &&
           t->ts_interp == py.lay.ts_interp && t->ts_frame == py.lay.ts_frame &&
           t->ts_thread_id == py.lay.ts_thread_id && t->ts_native_id == py.lay.ts_native_id &&
           t->fr_prev == py.lay.fr_prev && t->fr_code == py.lay.fr_code &&
           t->fr_instr == py.lay.fr_instr && t->fr_owner == py.lay.fr_owner &&
           t->co_filename == py.lay.co_filename && t->co_name == py.lay.co_name &&
           t->co_firstlineno == py.lay.co_firstlineno && t->co_lines == py.lay.co_lines &&
           t->co_code == py.lay.co_code && t->str_data == py.lay.str_data &&
           t->str_cdata == py.lay.str_cdata && t->str_kind == py.lay.str_kind;
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
    size_t got = ncclguard_peek((uintptr_t)pthread_self(), w, sizeof w) / 4;
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
        py.tid_note = "tid not known: no thread to learn struct pthread's layout from";
        return;
    }
    pthread_join(t, NULL);
    tid_slots(hit);
    int found = -1, n = 0;
    for (int i = 0; i < TID_SCAN / 4; i++)
        if (hit[i]) found = i, n++;
    if (n == 1)
        py.pthread_tid_off = found * 4;
    else
        py.tid_note = "tid not known: the tid's place in glibc's struct pthread was not found";
}

const struct ng_py_interp *ncclguard_python_find(void)
{
    py.runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
    unsigned long hexv = read_version();
    if (!hexv) return NULL; /* not CPython */
    int minor = (hexv >> 24) == 3 ? (int)((hexv >> 16) & 255) : -1;
    py.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.frame_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyFrame_Type");
    py.str_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    py.bytes_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyBytes_Type");
    const struct ng_py_layout *row = NULL;
    for (size_t i = 0; i < sizeof ng_py_layouts / sizeof *ng_py_layouts; i++)
        if (ng_py_layouts[i].minor == minor) row = &ng_py_layouts[i];
    uint64_t probe;
    py.method = NG_PY_NONE;
    if (!py.runtime || !py.code_type || !py.str_type || !py.bytes_type)
        refuse("Python %s: _PyRuntime or a type object is not exported", py.version);
    else if (ncclguard_peek_all(py.runtime, &probe, sizeof probe) != 0)
        refuse("Python %s: process_vm_readv on our own pid is refused (seccomp?)", py.version);
    else if (minor == 13 || minor == 14) {
        if (layout_from_debug_offsets(minor) == 0) py.method = NG_PY_DEBUG_OFFSETS;
        if (py.method == NG_PY_DEBUG_OFFSETS && row && !agrees_with_table(row))
            refuse("Python %s: _Py_DebugOffsets disagree with the headers' layout", py.version);
    } else if (!row)
        refuse("Python %s: no layout for this version (3.8 to 3.14 are known)", py.version);
    else if (debug_build())
        refuse("Python %s: a debug build, whose objects are laid out differently", py.version);
    else if (row->lines != NG_PY_LOCATIONS && !py.frame_type)
        refuse("Python %s: PyFrame_Type is not exported", py.version);
    else {
        py.lay = *row;
        py.method = NG_PY_LAYOUT;
    }
    if (py.method != NG_PY_NONE) {
        int ts[] = {py.lay.ts_next,   py.lay.ts_interp,    py.lay.ts_frame,
                    py.lay.ts_cframe, py.lay.ts_thread_id, py.lay.ts_native_id};
        py.ts_size = max_of(ts, 6) + 8;
        if (py.ts_size > NG_PY_MAX_BLOCK || py.lay.fr_size > NG_PY_MAX_BLOCK ||
            py.lay.co_size > NG_PY_MAX_BLOCK)
            refuse("Python %s: a struct larger than the walk reads", py.version);
        if (py.lay.ts_native_id < 0) learn_pthread_tid();
    }
    return &py;
}
