/*
 * test_analyze_where.c: the verdict's "where" (cli/analyze/where.c, analyze/words.c;
 * docs/analysis.md, "Where"): which threads it shows and which frames it leaves out.
 *
 * A two-rank job written by hand as dumps (schema 2.1) and read through the real
 * reader: rank 0 waits in AllReduce #2 (timed out), rank 1 never called it. Rank 1's
 * ops came from its thread 201; its other threads differ per case. Each case checks
 * the verdict line (an_verdict, as `analyze` runs it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/fold.h"
#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/verdict.h"
#include "check_main.h"
#include "dump/dump.h"
#include "dump/read.h"
#include "json/json.h"
#include "json/parser.h"

#define LIBC "\"module\":\"/lib/x86_64-linux-gnu/libc.so.6\""
#define PROG "\"module\":\"/opt/job/bin/train\""
#define PYLIB "\"module\":\"/usr/lib/libpython3.13.so.1.0\""
#define GUARD "\"module\":\"/usr/lib/libncclguard.so\""
#define FAKE "\"module\":\"/opt/harness/fakes/libcuda.so.1\""
#define FR(mod, fn)                                                         \
    "{\"pc\":\"0000000000001000\"," mod ",\"offset\":4096,\"function\":" fn \
    ",\"function_offset\":16,\"build_id\":null}"
#define TH(tid, name, sys, frames)                             \
    "{\"tid\":" #tid ",\"name\":\"" name "\",\"state\":\"S\"," \
    "\"syscall\":" sys ",\"stack_from\":\"scan\",\"frames\":[" frames "]}"

/* C frames of the threads of the cases */
#define MAIN_STUCK                                                                   \
    TH(200, "train", "\"clock_nanosleep\"",                                          \
       FR(LIBC, "\"clock_nanosleep\"") "," FR(PROG, "\"job_stuck_in_main\"") "," FR( \
           PROG, "\"main\"") "," FR(LIBC, "\"__libc_start_main\"") "," FR(PROG, "\"_start\""))
#define COMM_CONDWAIT                                                 \
    TH(201, "comm", "\"futex\"",                                      \
       FR(LIBC, "null") "," FR(LIBC, "\"pthread_cond_wait\"") "," FR( \
           PROG, "\"comm_main\"") "," FR(LIBC, "null"))
#define COMM_BUSY                                                                     \
    TH(201, "comm", "\"clock_nanosleep\"",                                            \
       FR(LIBC, "\"clock_nanosleep\"") "," FR(PROG, "\"comm_throttle\"") "," FR(PROG, \
                                                                                "\"comm_main\""))
#define COMM_FUTEX               \
    TH(201, "comm", "\"futex\"", \
       FR(LIBC, "null") "," FR(FAKE, "\"fake_collective_wait\"") "," FR(LIBC, "null"))
#define WATCHDOG                                                                  \
    TH(202, "ncclguard-wd", "\"clock_nanosleep\"",                                \
       FR(LIBC, "\"clock_nanosleep\"") "," FR(GUARD, "\"observer_main\"") "," FR( \
           PROG, "\"stale_frame_of_the_job\"") "," FR(LIBC, "null"))
#define HARNESS                         \
    TH(203, "fakecuda-s1", "\"futex\"", \
       FR(LIBC, "\"pthread_cond_wait\"") "," FR(FAKE, "\"stream_worker\"") "," FR(LIBC, "null"))
#define LOADER                \
    TH(204, "loader", "null", \
       FR(PROG, "\"decode_batch\"") "," FR(PROG, "\"loader_main\"") "," FR(LIBC, "null"))
#define IDLE_POOL                                                          \
    TH(205, "pool", "\"futex\"",                                           \
       FR(LIBC, "null") "," FR(LIBC, "\"pthread_cond_timedwait\"") "," FR( \
           PROG, "\"pool_main\"") "," FR(LIBC, "null"))
/* Python: the interpreter's C frames */
#define PY_MAIN                                                                                                              \
    TH(200, "python3", "\"clock_nanosleep\"",                                                                                \
       FR(LIBC, "\"clock_nanosleep\"") "," FR(PYLIB, "\"time_sleep\"") "," FR(PYLIB, "\"_PyEval_EvalFrameDefault\"") "," FR( \
           PYLIB, "\"Py_RunMain\"") "," FR(LIBC, "\"__libc_start_main\"") "," FR(PROG,                                       \
                                                                                 "\"_start\""))
#define PY_COMM                                                                                   \
    TH(201, "python3", "\"futex\"",                                                               \
       FR(LIBC, "null") "," FR(LIBC, "\"pthread_cond_timedwait\"") "," FR(                        \
           PYLIB,                                                                                 \
           "\"PyThread_acquire_lock_timed\"") "," FR(PYLIB,                                       \
                                                     "\"_PyEval_EvalFrameDefault\"") "," FR(LIBC, \
                                                                                            "null"))
#define PF(file, line, fn) "{\"file\":\"" file "\",\"line\":" #line ",\"function\":\"" fn "\"}"
#define PT(tid, frames) \
    "{\"thread_id\":\"00007f0000000" #tid "\",\"tid\":" #tid ",\"frames\":[" frames "]}"
#define PYT_MAIN                                                          \
    PT(200, PF("/opt/job/train.py", 96, "stuck_in_training_step") "," PF( \
                "/opt/job/train.py", 106, "train") "," PF("/opt/job/train.py", 112, "<module>"))
#define PYT_COMM_IDLE                                                   \
    PT(201, PF("/usr/lib/python3.13/threading.py", 359, "wait") "," PF( \
                "/usr/lib/python3.13/queue.py", 202,                    \
                "get") "," PF("/opt/job/train.py", 87,                  \
                              "comm_loop") "," PF("/usr/lib/python3.13/threading.py", 992, "run"))
#define PYT_COMM_BUSY                                                                             \
    PT(201, PF("/opt/job/train.py", 80,                                                           \
               "pack_bucket") "," PF("/opt/job/train.py", 87,                                     \
                                     "comm_loop") "," PF("/usr/lib/python3.13/threading.py", 992, \
                                                         "run"))
#define PYTHON(threads) \
    "{\"method\":\"debug_offsets\",\"why\":null,\"threads\":[" threads "],\"raw\":null}"

static const char *op_json(int seq, const char *state, const char *flags, int thread)
{
    static char buf[2][1024];
    static int k;
    char *b = buf[k++ & 1];
    snprintf(b, sizeof buf[0],
             "{\"index\":%d,\"comm\":\"00000000000000aa\",\"comm_rank\":0,"
             "\"comm_nranks\":2,\"seq\":%d,\"p2p_seq\":null,\"op\":\"AllReduce\",\"count\":1024,"
             "\"datatype\":\"float32\",\"bytes\":4096,\"redop\":\"sum\",\"root\":null,"
             "\"peer\":null,\"stream\":\"0000000000000007\",\"group\":null,\"thread\":%d,"
             "\"enqueue_ns\":%d000000000,\"enqueue_mono_ns\":1,\"state\":\"%s\","
             "\"gpu_start_ns\":null,\"gpu_end_ns\":null,\"seen_start_ns\":null,"
             "\"seen_end_ns\":null,\"times\":null,\"result\":0,\"flags\":[%s],\"marker\":null,"
             "\"stack\":null}",
             seq, seq, thread, 1700000000 + seq, state, flags);
    return b;
}

/* One rank's dump: its op(s), threads and Python member. */
static struct dr_dump *parse(int rank, const char *ops, int last_seq, int done_seq,
                             const char *threads, const char *python)
{
    size_t cap = 1 << 16;
    char *buf = calloc(1, cap + NG_JSON_PADDING);
    int n = snprintf(
        buf, cap,
        "{\"schema\":\"ncclguard.dump/2.1\",\"reason\":\"%s\","
        "\"incident\":\"1-r0@h\",\"time_ns\":1700000100000000000,\"host\":\"h\",\"pid\":%d,"
        "\"rank\":%d,\"local_rank\":%d,\"job\":\"j\",\"versions\":{\"ncclguard\":\"0.1.0\","
        "\"nccl\":22809,\"cuda_driver\":13000,\"python\":null},\"env\":{},\"config\":null,"
        "\"flight\":{\"capacity\":4096,\"recorded\":1,\"overwritten\":0,\"dropped_inflight\":0},"
        "\"ops\":[%s],\"comms\":[{\"id\":\"00000000000000aa\",\"rank\":%d,\"nranks\":2,"
        "\"device\":0,\"name\":\"world\",\"state\":\"ready\",\"blocking\":true,\"parent\":null,"
        "\"created_ns\":1,\"last_seq\":%d,\"last_completed_seq\":%d,\"last_async_error\":0,"
        "\"peers\":[]}],\"stack_table\":null,\"stacks\":[],\"threads\":[%s],\"python\":%s,"
        "\"ras\":null}",
        rank ? "trigger" : "timeout", rank ? 200 : 100, rank, rank, ops, rank, last_seq, done_seq,
        threads, python ? python : "null");
    ck_assert_int_lt(n, (int)cap);
    char err[256] = "";
    ng_jparser *p = ng_jparser_new(NG_JSON_SIMDJSON);
    struct dr_dump *d = dr_parse(p, buf, (size_t)n, rank ? "r1.json" : "r0.json", 0, err,
                                 sizeof err);
    ng_jparser_free(p);
    free(buf);
    ck_assert_msg(d != NULL, "rank %d: %s", rank, err);
    return d;
}

/* The verdict line about rank 1, with rank 1's threads and Python member. */
static char *verdict(const char *threads, const char *python)
{
    struct dr_dump *d0 = parse(0, op_json(2, "started", "\"timeout\"", 100), 2, 1,
                               TH(100, "train", "\"futex\"", FR(LIBC, "null")), NULL);
    struct dr_dump *d1 = parse(1, op_json(1, "completed", "", 201), 1, 1, threads, python);
    struct an a;
    struct an_opts o = {0};
    an_init(&a, &o);
    ck_assert_int_eq(an_add_dump(&a, d0), 0);
    ck_assert_int_eq(an_add_dump(&a, d1), 0);
    dr_free(d0);
    dr_free(d1);
    ck_assert_int_eq(an_verdict(&a), AN_EXIT_CULPRIT);
    ck_assert_uint_eq(a.nculprits, 1);
    ck_assert_int_eq(a.culprits[0].f.cause, AN_MISSING);
    char *line = strdup(an_intern_get(&a.strs, a.culprits[0].text));
    an_free(&a);
    return line;
}

#define HAS(line, s) ck_assert_msg(strstr(line, s) != NULL, "'%s' not in: %s", s, line)
#define HASNT(line, s) ck_assert_msg(strstr(line, s) == NULL, "'%s' in: %s", s, line)

NG_TEST(idle_comm_thread_shows_main_and_busy_threads)
{
    char *l = verdict(MAIN_STUCK "," COMM_CONDWAIT "," WATCHDOG "," HARNESS "," IDLE_POOL
                                 "," LOADER,
                      NULL);
    HAS(l, "; thread comm (201) idle in a wait (futex), in comm_main; main thread in "
           "job_stuck_in_main \xe2\x86\x90 main; thread loader (204) in decode_batch "
           "\xe2\x86\x90 loader_main");
    HASNT(l, "_start");
    HASNT(l, "__libc");
    HASNT(l, "stale_frame_of_the_job"); /* ncclguard's thread */
    HASNT(l, "observer_main");
    HASNT(l, "stream_worker"); /* the harness's */
    HASNT(l, "pool_main");     /* idle */
    free(l);
}
END_TEST

NG_TEST(busy_comm_thread_alone)
{
    char *l = verdict(MAIN_STUCK "," COMM_BUSY "," LOADER, NULL);
    HAS(l, "; thread comm (201) in comm_throttle \xe2\x86\x90 comm_main");
    HASNT(l, "idle");
    HASNT(l, "job_stuck_in_main");
    HASNT(l, "decode_batch");
    free(l);
}
END_TEST

NG_TEST(futex_without_job_frame_is_idle)
{
    char *l = verdict(MAIN_STUCK "," COMM_FUTEX, NULL);
    HAS(l, "; thread comm (201) idle in a wait (futex), in no frame of the job; main thread in "
           "job_stuck_in_main \xe2\x86\x90 main");
    HASNT(l, "fake_collective_wait");
    free(l);
}
END_TEST

NG_TEST(python_comm_thread_idle_on_queue)
{
    char *l = verdict(PY_MAIN "," PY_COMM, PYTHON(PYT_COMM_IDLE "," PYT_MAIN));
    HAS(l, "; thread python3 (201) idle in a wait (futex), in Python comm_loop (train.py:87); "
           "main thread in Python stuck_in_training_step (train.py:96) \xe2\x86\x90 train "
           "(train.py:106) \xe2\x86\x90 <module> (train.py:112)");
    HASNT(l, "threading.py");
    HASNT(l, "queue.py");
    free(l);
}
END_TEST

NG_TEST(python_comm_thread_busy_alone)
{
    char *l = verdict(PY_MAIN "," PY_COMM, PYTHON(PYT_COMM_BUSY "," PYT_MAIN));
    HAS(l, "; thread python3 (201) in Python pack_bucket (train.py:80) \xe2\x86\x90 comm_loop");
    HASNT(l, "stuck_in_training_step");
    free(l);
}
END_TEST

NG_TEST(thread_without_python_frames_shows_main)
{
    /* the ops' thread is a C thread of a Python process (no Python thread has its tid) */
    char *l = verdict(PY_MAIN "," COMM_BUSY, PYTHON(PYT_MAIN));
    HAS(l, "; thread comm (201) in comm_throttle \xe2\x86\x90 comm_main; main thread in Python "
           "stuck_in_training_step (train.py:96)");
    free(l);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("analyze_where", "where", 0, ng_check_tests(), NULL));
}
