/*
 * test_shim_python.c: the walk of shim/evidence/python.c over an interpreter
 * that this program fakes in its own memory, laid out as python_layouts.h says
 * for 3.12 (Py_Version) or 3.8 (Py_GetVersion, PyFrameObject and co_lnotab),
 * or as 3.13's row with a _Py_DebugOffsets of 3.13 or 3.14 in front.
 * The program exports _PyRuntime and the type objects (-rdynamic), so the shim
 * finds them as it finds a real interpreter's. Then the states a running
 * interpreter can show a reader without the GIL: a frame list that loops, a
 * frame on a page that cannot be read, a frame without a code object, a thread
 * list that loops, a deep stack, a string that is not compact ASCII. Each must
 * give a shorter stack and a note, never a fault or a hang.
 */
#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "evidence/python.h"
#include "evidence/python_layout.h"
#include "evidence/python_layouts.h"

/* What the shim looks for with dlsym(RTLD_DEFAULT, ...). */
uint8_t _PyRuntime[1024] __attribute__((aligned(16)));
uint32_t Py_Version;
uint8_t PyCode_Type[64], PyFrame_Type[64], PyUnicode_Type[64], PyBytes_Type[64];
static const char *version_text = "3.8.18 (default) [GCC]";
const char *Py_GetVersion(void);
const char *Py_GetVersion(void)
{
    return version_text;
}

static const struct ng_py_layout *L;
static uint8_t heap[1 << 20] __attribute__((aligned(16)));
static size_t used;

static uint8_t *alloc(size_t n)
{
    uint8_t *p = heap + used;
    used += (n + 15) & ~(size_t)15;
    ck_assert(used <= sizeof heap);
    return p;
}

static void put(uint8_t *obj, int off, uintptr_t v)
{
    ck_assert_int_ge(off, 0);
    memcpy(obj + off, &v, sizeof v);
}

static void put32(uint8_t *obj, int off, uint32_t v)
{
    memcpy(obj + off, &v, sizeof v);
}

static uint8_t *str(const char *s)
{
    size_t n = strlen(s);
    uint8_t *o = alloc((size_t)L->str_data + n + 1);
    put(o, L->ob_type, (uintptr_t)PyUnicode_Type);
    put(o, L->str_length, n);
    put32(o, L->str_state, L->str_compact | L->str_ascii);
    memcpy(o + L->str_data, s, n + 1);
    return o;
}

static uint8_t *bytes(const uint8_t *d, size_t n)
{
    uint8_t *o = alloc((size_t)L->bytes_sval + n + 1);
    put(o, L->ob_type, (uintptr_t)PyBytes_Type);
    put(o, L->bytes_size, n);
    memcpy(o + L->bytes_sval, d, n);
    return o;
}

#define FIRST 10 /* every fake function starts at line 10 */

/* A code object whose line table puts code units (or bytes, up to 3.10) 0-1
 * on line FIRST + 1 and 2-5 on line FIRST + 3. */
static uint8_t *code(const char *name)
{
    uint8_t *c = alloc(512);
    put(c, L->ob_type, (uintptr_t)PyCode_Type);
    put(c, L->co_filename, (uintptr_t)str("job.py"));
    put(c, L->co_name, (uintptr_t)str(name));
    put32(c, L->co_firstlineno, FIRST);
    if (L->lines == NG_PY_LOCATIONS) {
        /* two PEP 657 entries without columns (kind 13): 2 units at +1, 4 at +2 */
        static const uint8_t t[] = {0x80 | 13 << 3 | 1, 2, 0x80 | 13 << 3 | 3, 4};
        put(c, L->co_lines, (uintptr_t)bytes(t, sizeof t));
    } else {
        /* co_lnotab: +1 line at byte 0, +2 lines at byte 2 */
        static const uint8_t t[] = {0, 1, 2, 2};
        put(c, L->co_lines, (uintptr_t)bytes(t, sizeof t));
    }
    return c;
}

/* A frame of `c` at code unit `unit` (0-5), called from `prev`. */
static uint8_t *frame(uint8_t *c, int unit, uint8_t *prev)
{
    uint8_t *f = alloc(256);
    put(f, L->fr_code, (uintptr_t)c);
    put(f, L->fr_prev, (uintptr_t)prev);
    if (L->fr_instr >= 0) put(f, L->fr_instr, (uintptr_t)(c + L->co_code + 2 * unit));
    if (L->fr_lasti >= 0) {
        put(f, L->ob_type, (uintptr_t)PyFrame_Type);
        put32(f, L->fr_lasti, (uint32_t)unit);
    }
    return f;
}

static uint8_t *interp;

/* A thread state at the head of the list, whose innermost frame is `top`. */
static uint8_t *thread(uint8_t *top, uintptr_t thread_id, uintptr_t native)
{
    uint8_t *ts = alloc(512);
    uintptr_t head;
    memcpy(&head, interp + L->is_threads, sizeof head);
    put(ts, L->ts_next, head);
    put(interp, L->is_threads, (uintptr_t)ts);
    put(ts, L->ts_interp, (uintptr_t)interp);
    put(ts, L->ts_thread_id, thread_id);
    if (L->ts_native_id >= 0) put(ts, L->ts_native_id, native);
    if (L->ts_frame >= 0) {
        put(ts, L->ts_frame, (uintptr_t)top);
    } else {
        uint8_t *cf = alloc(64);
        put(cf, L->cf_current, (uintptr_t)top);
        put(ts, L->ts_cframe, (uintptr_t)cf);
    }
    return ts;
}

static void fake(int minor)
{
    for (size_t i = 0; i < sizeof ng_py_layouts / sizeof *ng_py_layouts; i++)
        if (ng_py_layouts[i].minor == minor) L = &ng_py_layouts[i];
    ck_assert_ptr_nonnull(L);
    Py_Version = minor >= 11 ? 0x030000f0u | (uint32_t)minor << 16 : 0;
    interp = alloc(8192);
    put(_PyRuntime, L->rt_interp_head, (uintptr_t)interp);
}

static void collect(struct ng_py_view *v)
{
    ncclguard_python_init();
    ncclguard_python_collect();
    ck_assert_int_eq(ncclguard_python_view(v), 0);
}

static struct ng_py_thread thread_at(int i)
{
    struct ng_py_thread t;
    ncclguard_python_thread(i, &t);
    return t;
}

/* Collects the stacks, then reads the first thread's innermost frame into f, the next into g. */
static void collect_two_frames(struct ng_py_frame *f, struct ng_py_frame *g)
{
    struct ng_py_view v;
    collect(&v);
    ncclguard_python_frame(thread_at(0).first, f);
    ncclguard_python_frame(thread_at(0).first + 1, g);
}

/* Thread I was cut short: it kept NFRAMES frames, and its note says why (NOTE). */
static void ck_note(int i, int nframes, const char *note)
{
    struct ng_py_thread t = thread_at(i);
    ck_assert_int_eq(t.nframes, nframes);
    ck_assert_msg(t.note && strstr(t.note, note), "thread %d's note is '%s', not '%s'", i,
                  t.note ? t.note : "(none)", note);
}

static void ck_frame(int i, const char *function, int64_t line)
{
    struct ng_py_frame f;
    ncclguard_python_frame(i, &f);
    ck_assert_str_eq(f.file, "job.py");
    ck_assert_str_eq(f.function, function);
    ck_assert_int_eq(f.line, line);
}

/* _Py_DebugOffsets at the start of _PyRuntime, for 3.13 or 3.14, with the
 * offsets of L at the word indexes given, in this order: interpreters.head,
 * interp next, interp threads.head, thread next, interp, current_frame,
 * thread_id, native_thread_id, frame previous, executable, instr_ptr, owner,
 * code filename, name, linetable, firstlineno, co_code_adaptive, then the
 * words of PyObject's size and ob_type, bytes' ob_size and ob_sval, str's
 * state, length and ASCII object size. On 3.14 the interpreter list's head
 * moves to byte 800, past these words. */
static void debug_offsets(int minor, const int *at)
{
    static struct ng_py_layout moved;
    moved = *L;
    if (minor > 13) moved.rt_interp_head = 800; /* 3.13's own place is past its words */
    L = &moved;
    uint64_t d[96] = {0};
    memcpy(d, "xdebugpy", 8);
    d[1] = 0x030000f0u | (uint64_t)minor << 16;
    /* clang-format off */
    const int v[] = {L->rt_interp_head, L->is_next, L->is_threads, L->ts_next, L->ts_interp,
                     L->ts_frame, L->ts_thread_id, L->ts_native_id, L->fr_prev, L->fr_code,
                     L->fr_instr, L->fr_owner, L->co_filename, L->co_name, L->co_lines,
                     L->co_firstlineno, L->co_code, 16, 8, 16, 32, 32, 16, 40};
    /* clang-format on */
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) d[at[i]] = (uint64_t)v[i];
    memcpy(_PyRuntime, d, sizeof d);
    put(_PyRuntime, L->rt_interp_head, (uintptr_t)interp);
    Py_Version = (uint32_t)d[1];
}

/* The indexes of Include/internal/pycore_runtime.h of 3.13, and of the two
 * layouts of pycore_debug_offsets.h that 3.14 had (with and without the
 * tlbc and code_object_generation words). */
static const int at_313[] = {5,  8,  9,  21, 22, 23, 24, 25, 29, 30, 31, 33,
                             35, 36, 38, 39, 43, 44, 45, 65, 66, 68, 69, 70};
static const int at_314[] = {5,  8,  9,  24, 25, 26, 27, 28, 32, 33, 34, 36,
                             40, 41, 43, 44, 48, 50, 51, 75, 76, 78, 79, 80};
static const int at_314_early[] = {5,  8,  9,  22, 23, 24, 25, 26, 30, 31, 32, 34,
                                   37, 38, 40, 41, 45, 46, 47, 71, 72, 74, 75, 76};

/* A stack of two frames, the entry frame between them, on tid 4242; 3.14 tags
 * the low bit of f_executable. */
static void two_frames(int tagged)
{
    uint8_t *outer = frame(code("main"), 3, NULL);
    uint8_t *shim = frame(code("trampoline"), 0, outer);
    shim[L->fr_owner] = (uint8_t)L->owner_shim;
    uint8_t *step = code("step"), *inner = frame(step, 1, shim);
    if (tagged) put(inner, L->fr_code, (uintptr_t)step | 1);
    thread(inner, 0x7f00deadbeef, 4242);
}

static void ck_two_frames(const char *method)
{
    struct ng_py_view v;
    collect(&v);
    ck_assert_msg(!strcmp(v.method, method), "method %s: %s", v.method, v.why);
    ck_assert_ptr_null(v.why);
    struct ng_py_thread t = thread_at(0);
    ck_assert_int_eq(t.tid, 4242);
    ck_assert_int_eq(t.nframes, 2);
    ck_frame(t.first, "step", FIRST + 1);
    ck_frame(t.first + 1, "main", FIRST + 3);
}

START_TEST(a_stack_with_lines_and_tid)
{
    fake(12);
    uint8_t *outer = frame(code("main"), 3, NULL);
    uint8_t *shim = frame(code("trampoline"), 0, outer);
    shim[L->fr_owner] = (uint8_t)L->owner_shim; /* the interpreter's entry frame: skipped */
    thread(frame(code("step"), 1, shim), 0x7f00deadbeef, 4242);
    struct ng_py_view v;
    collect(&v);
    ck_assert_str_eq(v.method, "layout");
    ck_assert_ptr_null(v.why);
    ck_assert_int_eq(v.nthreads, 1);
    struct ng_py_thread t = thread_at(0);
    ck_assert_uint_eq(t.thread_id, 0x7f00deadbeef);
    ck_assert_int_eq(t.tid, 4242);
    ck_assert_ptr_null(t.note);
    ck_assert_int_eq(t.nframes, 2);
    ck_frame(t.first, "step", FIRST + 1);
    ck_frame(t.first + 1, "main", FIRST + 3);
}
END_TEST

START_TEST(a_frame_list_that_loops)
{
    fake(12);
    uint8_t *a = frame(code("a"), 0, NULL), *b = frame(code("b"), 2, a);
    put(a, L->fr_prev, (uintptr_t)b);
    thread(b, 1, 7);
    struct ng_py_view v;
    collect(&v);
    ck_note(0, 2, "loops");
}
END_TEST

START_TEST(a_frame_that_cannot_be_read)
{
    fake(12);
    uint8_t *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(page != MAP_FAILED);
    thread(frame(code("a"), 0, page + 64), 1, 7);
    thread(frame(code("b"), 0, (uint8_t *)(uintptr_t)0x10), 2, 8);
    struct ng_py_view v;
    collect(&v);
    ck_assert_int_eq(v.nthreads, 2);
    for (int i = 0; i < 2; i++) ck_note(i, 1, "could not be read");
}
END_TEST

START_TEST(a_frame_without_code)
{
    fake(12);
    uint8_t *c = code("a");
    uint8_t *f = frame(c, 0, NULL);
    put(f, L->fr_code, (uintptr_t)str("not code"));
    thread(frame(code("b"), 0, f), 1, 7);
    struct ng_py_view v;
    collect(&v);
    ck_note(0, 1, "without a code object");
}
END_TEST

START_TEST(a_thread_list_that_loops)
{
    fake(12);
    uint8_t *first = thread(frame(code("a"), 0, NULL), 1, 7);
    uint8_t *second = thread(frame(code("b"), 0, NULL), 2, 8);
    put(first, L->ts_next, (uintptr_t)second); /* second -> first -> second */
    struct ng_py_view v;
    collect(&v);
    ck_assert_int_eq(v.nthreads, 2);
    ck_assert_ptr_nonnull(v.why);
    ck_assert_ptr_nonnull(strstr(v.why, "changed while it was read"));
}
END_TEST

START_TEST(a_deep_stack_keeps_the_innermost_100)
{
    fake(12);
    uint8_t *c = code("recurse"), *f = NULL;
    for (int i = 0; i < 150; i++) f = frame(c, i == 149 ? 1 : 3, f);
    thread(f, 1, 7);
    struct ng_py_view v;
    collect(&v);
    struct ng_py_thread t = thread_at(0);
    ck_assert_int_eq(t.nframes, 100);
    ck_frame(t.first, "recurse", FIRST + 1);
    ck_frame(t.first + 99, "recurse", FIRST + 3);
    ck_assert_ptr_nonnull(strstr(t.note, "innermost 100"));
}
END_TEST

START_TEST(a_name_of_no_known_kind)
{
    fake(12);
    uint8_t *c = code("x");
    uint8_t *name = str("caf?");
    put32(name, L->str_state, L->str_compact); /* compact, not ASCII, of kind 0 */
    put(c, L->co_name, (uintptr_t)name);
    thread(frame(c, 0, NULL), 1, 7);
    struct ng_py_view v;
    collect(&v);
    struct ng_py_frame f;
    ncclguard_python_frame(thread_at(0).first, &f);
    ck_assert_str_eq(f.function, "?");
}
END_TEST

/* A file name of `n` bytes: "/" then 'd's. */
static char *long_text(size_t n)
{
    char *t = (char *)alloc(n + 1);
    memset(t, 'd', n);
    t[0] = '/';
    t[n] = '\0';
    return t;
}

START_TEST(long_names_are_kept_up_to_4096_bytes)
{
    fake(12);
    uint8_t *whole = code(long_text(300)), *cut = code("y");
    put(whole, L->co_filename, (uintptr_t)str(long_text(4096)));
    put(cut, L->co_filename, (uintptr_t)str(long_text(5000)));
    thread(frame(whole, 0, frame(cut, 0, NULL)), 1, 7);
    struct ng_py_frame f, g;
    collect_two_frames(&f, &g);
    ck_assert_uint_eq(strlen(f.function), 300); /* was cut at 127 */
    ck_assert_uint_eq(strlen(f.file), 4096);    /* was cut at 255 */
    ck_assert_uint_eq(strlen(g.file), 4099);
    ck_assert_str_eq(g.file + 4096, "...");
    ck_assert_int_eq(g.file[4095], 'd');
}
END_TEST

/* A compact str that is not ASCII: n characters of `kind` bytes each. */
static uint8_t *wide(const uint32_t *cs, size_t n, unsigned kind)
{
    uint8_t *o = alloc((size_t)L->str_cdata + (n + 1) * kind);
    put(o, L->ob_type, (uintptr_t)PyUnicode_Type);
    put(o, L->str_length, n);
    put32(o, L->str_state, L->str_compact | kind << __builtin_ctz(L->str_kind));
    for (size_t i = 0; i < n; i++) memcpy(o + L->str_cdata + i * kind, &cs[i], kind);
    return o;
}

/* On 3.8 (the text 72 bytes in), 3.11 and 3.12 (56): Latin-1, a BMP and an
 * astral character come out as UTF-8, a surrogate as '?'. */
START_TEST(names_that_are_not_ascii_come_out_in_utf8)
{
    static const int minors[] = {8, 11, 12};
    fake(minors[_i]);
    static const uint32_t cafe[] = {'c', 'a', 'f', 0xe9}, kanji[] = {0x6a5f, '/', 0xdc80},
                          snake[] = {0x1f40d, 'x'};
    uint8_t *a = code("a"), *b = code("b");
    put(a, L->co_filename, (uintptr_t)wide(cafe, 4, 1));
    put(a, L->co_name, (uintptr_t)wide(snake, 2, 4));
    put(b, L->co_filename, (uintptr_t)wide(kanji, 3, 2));
    thread(frame(a, 0, frame(b, 0, NULL)), 1, 7);
    struct ng_py_frame f, g;
    collect_two_frames(&f, &g);
    ck_assert_str_eq(f.file, "caf\xc3\xa9");
    ck_assert_str_eq(f.function, "\xf0\x9f\x90\x8dx");
    ck_assert_str_eq(g.file, "\xe6\xa9\x9f/?");
    ck_assert_str_eq(g.function, "b");
}
END_TEST

static void *stay(void *arg)
{
    pid_t *tid = arg;
    __atomic_store_n(tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    pause();
    return NULL;
}

/* 3.8: no native_thread_id; the tid comes from the thread's struct pthread. */
START_TEST(before_3_11_the_tid_comes_from_struct_pthread)
{
    fake(8);
    pid_t tid = 0;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, stay, &tid), 0);
    while (!__atomic_load_n(&tid, __ATOMIC_ACQUIRE)) usleep(1000);
    uint8_t *outer = frame(code("main"), 3, NULL);
    thread(frame(code("step"), 1, outer), (uintptr_t)th, 0);
    struct ng_py_view v;
    collect(&v);
    ck_assert_str_eq(ncclguard_python_version(), "3.8.18");
    ck_assert_str_eq(v.method, "layout");
    struct ng_py_thread t = thread_at(0);
    ck_assert_int_eq(t.tid, tid);
    ck_assert_ptr_null(t.note);
    ck_frame(t.first, "step", FIRST + 1);
    ck_frame(t.first + 1, "main", FIRST + 3);
}
END_TEST

START_TEST(a_version_without_layout_is_refused)
{
    fake(12);
    Py_Version = 0x030700f0; /* 3.7 */
    struct ng_py_view v;
    collect(&v);
    ck_assert_str_eq(v.method, "none");
    ck_assert_int_eq(v.nthreads, 0);
    ck_assert_ptr_nonnull(strstr(v.why, "no layout"));
}
END_TEST

START_TEST(debug_offsets_of_3_13)
{
    fake(13);
    debug_offsets(13, at_313);
    two_frames(0);
    ck_two_frames("debug_offsets");
}
END_TEST

START_TEST(debug_offsets_of_3_13_must_agree_with_its_headers)
{
    fake(13);
    struct ng_py_layout wrong = *L;
    wrong.fr_instr += 8; /* as if an index were off by one */
    L = &wrong;
    debug_offsets(13, at_313);
    struct ng_py_view v;
    collect(&v);
    ck_assert_str_eq(v.method, "none");
    ck_assert_ptr_nonnull(strstr(v.why, "disagree"));
}
END_TEST

START_TEST(debug_offsets_of_3_14_either_layout)
{
    fake(13); /* objects laid out as 3.13's; the offsets say where */
    debug_offsets(14, _i ? at_314_early : at_314);
    two_frames(1);
    ck_two_frames("debug_offsets");
}
END_TEST

START_TEST(debug_offsets_not_as_expected_are_refused)
{
    fake(13);
    debug_offsets(14, at_314);
    uint64_t garbage = 24; /* PyObject's size at neither layout's place */
    memcpy(_PyRuntime + 8 * 50, &garbage, sizeof garbage);
    struct ng_py_view v;
    collect(&v);
    ck_assert_str_eq(v.method, "none");
    ck_assert_ptr_nonnull(strstr(v.why, "not laid out as expected"));
}
END_TEST

static Suite *python_suite(void)
{
    Suite *s = suite_create("python");
    TCase *tc = tcase_create("walk");
    tcase_add_test(tc, a_stack_with_lines_and_tid);
    tcase_add_test(tc, a_frame_list_that_loops);
    tcase_add_test(tc, a_frame_that_cannot_be_read);
    tcase_add_test(tc, a_frame_without_code);
    tcase_add_test(tc, a_thread_list_that_loops);
    tcase_add_test(tc, a_deep_stack_keeps_the_innermost_100);
    tcase_add_test(tc, a_name_of_no_known_kind);
    tcase_add_loop_test(tc, names_that_are_not_ascii_come_out_in_utf8, 0, 3);
    tcase_add_test(tc, long_names_are_kept_up_to_4096_bytes);
    tcase_add_test(tc, before_3_11_the_tid_comes_from_struct_pthread);
    tcase_add_test(tc, a_version_without_layout_is_refused);
    tcase_add_test(tc, debug_offsets_of_3_13);
    tcase_add_test(tc, debug_offsets_of_3_13_must_agree_with_its_headers);
    tcase_add_loop_test(tc, debug_offsets_of_3_14_either_layout, 0, 2);
    tcase_add_test(tc, debug_offsets_not_as_expected_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ng_check_run(python_suite());
}
