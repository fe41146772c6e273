/*
 * gen_dump.c: one rank's dump of the synthetic job (gendumps.h), in the writer's
 * layout (shim/evidence/dump_body.c): one line per top-level member, comm and op.
 * The members come from the writer's lists (evidence/dump_format.h), in their
 * order; each key's value is written by the macro named after it (OP_seq, ...),
 * so that a key renamed or added there fails this build until it is written here.
 *
 * Step k of rank r: AllReduce on the world communicator (seq k+1), AllGather on
 * its group (seq k+1), then Send to r+1 and Recv from r-1 in one group. Ranks
 * arrive at a step within 2 ms of each other (8 ms late for a slow culprit);
 * every rank's AllReduce ends 11 ms into the step, so the early ones wait.
 * In a hang, the last step is the one that never ends.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "evidence/dump_format.h"
#include "gendumps.h"

#define T0 ((int64_t)1718000000000000000)
#define STEP_NS ((int64_t)20000000)
#define MS ((int64_t)1000000)
#define WORLD_ID ((uint64_t)0x5f3a1c2e9d0b4471)

const char *gen_host(int rank)
{
    static __thread char h[32];
    snprintf(h, sizeof h, "gen-%04d", rank / 8);
    return h;
}

int gen_pid(int rank)
{
    return 10000 + rank;
}

static uint64_t tp_id(int group)
{
    uint64_t x = WORLD_ID ^ ((uint64_t)0x9e3779b97f4a7c15 * (uint64_t)(group + 1));
    return x ? x : 1;
}

static int64_t jitter(int rank, long step)
{
    uint64_t h = (uint64_t)step * (uint64_t)0x9e3779b97f4a7c15 ^
                 (uint64_t)(rank + 1) * (uint64_t)0xc2b2ae3d27d4eb4f;
    h ^= h >> 29;
    h *= (uint64_t)0xbf58476d1ce4e5b9;
    h ^= h >> 32;
    return (int64_t)(h % (uint64_t)(2 * MS));
}

struct rankview {
    const struct gen_job *g;
    int rank, next, prev, hang, culprit;
    long steps, last; /* steps called by this rank; the hung step (or < 0) */
};

/* What rank r's op j of step k looks like. */
struct op {
    const char *name, *state, *dtype, *redop, *flags;
    uint64_t comm, seq, p2p, count, bytes, group;
    int comm_rank, comm_nranks, peer;
    int64_t enq, start, end;
};

static int is_hang(const struct gen_job *g)
{
    return g->cause == GEN_MISSING || g->cause == GEN_MISMATCH || g->cause == GEN_GPU_NOT_STARTED ||
           g->cause == GEN_CRASH || g->no_dump >= 0;
}

static void make_op(const struct rankview *v, long k, int j, struct op *o)
{
    const struct gen_job *g = v->g;
    int64_t base = T0 + k * STEP_NS;
    int64_t a = base + jitter(v->rank, k) + (v->culprit && g->cause == GEN_SLOW ? 8 * MS : 0);
    memset(o, 0, sizeof *o);
    o->comm = WORLD_ID;
    o->comm_rank = v->rank;
    o->comm_nranks = g->nranks;
    o->peer = -1;
    o->flags = "";
    o->state = "completed";
    int same = v->next == v->prev;
    switch (j) {
    case 0:
        o->name = "AllReduce";
        o->dtype = "bfloat16";
        o->redop = "sum";
        o->seq = (uint64_t)k + 1;
        o->count = 4194304;
        if (v->culprit && g->cause == GEN_MISMATCH && k == v->last) o->count--;
        o->enq = a;
        o->start = a + 20000;
        o->end = base + 11 * MS;
        break;
    case 1:
        o->name = "AllGather";
        o->dtype = "float32";
        o->comm = tp_id(v->rank / g->tp);
        o->comm_rank = v->rank % g->tp;
        o->comm_nranks = g->tp;
        o->seq = (uint64_t)k + 1;
        o->count = 65536;
        o->enq = a + 5000;
        o->start = base + 11 * MS + 1000;
        o->end = o->start + 200000;
        break;
    default:
        o->name = j == 2 ? "Send" : "Recv";
        o->dtype = "float32";
        o->peer = j == 2 ? v->next : v->prev;
        o->p2p = same ? (uint64_t)(2 * k + j - 1) : (uint64_t)k + 1;
        o->count = 262144;
        o->group = (uint64_t)k + 1;
        o->enq = a + 10000;
        o->start = base + 11 * MS + 300000;
        o->end = o->start + 300000;
    }
    o->bytes = o->count * (strcmp(o->dtype, "bfloat16") ? 4 : 2);
    if (k != v->last) return;
    /* the hung step: the AllReduce started and waits; what follows it is queued */
    o->end = 0;
    if (j == 0 && !(v->culprit && g->cause == GEN_GPU_NOT_STARTED)) {
        o->state = "started";
        o->flags = "\"timeout\"";
    } else {
        o->state = "scheduled";
        o->start = 0;
    }
}

/* ---- members: the key, then its value ---- */

struct out {
    FILE *f;
    int first; /* no member yet in the innermost object */
    int depth; /* of objects: the top level's members are one a line */
};

static void key(struct out *w, const char *k)
{
    fprintf(w->f, "%s\"%s\":", w->first ? "" : w->depth == 1 ? ",\n" : ",", k);
    w->first = 0;
}

static void i64_or_null(FILE *f, int64_t v, int isnull)
{
    if (isnull)
        fputs("null", f);
    else
        fprintf(f, "%" PRId64, v);
}

static void str_or_null(FILE *f, const char *s)
{
    if (s)
        fprintf(f, "\"%s\"", s);
    else
        fputs("null", f);
}

/* Writes list with each key's macro PREFIX##key(k), in an object of its own. */
#define MEMBER(key, kind, source) M_(key);
#define OBJECT(w, LIST)                  \
    do {                                 \
        int first_ = (w)->first;         \
        fputc('{', (w)->f);              \
        (w)->first = 1;                  \
        (w)->depth++;                    \
        NG_DUMP_##LIST##_FIELDS(MEMBER); \
        (w)->depth--;                    \
        fputc('}', (w)->f);              \
        (w)->first = first_;             \
    } while (0)

/* ---- ops ---- */

#define OP_index(k) (key(w, k), fprintf(f, "%ld", index))
#define OP_comm(k) (key(w, k), fprintf(f, "\"%016" PRIx64 "\"", o->comm))
#define OP_comm_rank(k) (key(w, k), fprintf(f, "%d", o->comm_rank))
#define OP_comm_nranks(k) (key(w, k), fprintf(f, "%d", o->comm_nranks))
#define OP_seq(k) (key(w, k), i64_or_null(f, (int64_t)o->seq, !o->seq))
#define OP_p2p_seq(k) (key(w, k), i64_or_null(f, (int64_t)o->p2p, !o->p2p))
#define OP_op(k) (key(w, k), fprintf(f, "\"%s\"", o->name))
#define OP_count(k) (key(w, k), fprintf(f, "%" PRIu64, o->count))
#define OP_datatype(k) (key(w, k), fprintf(f, "\"%s\"", o->dtype))
#define OP_bytes(k) (key(w, k), fprintf(f, "%" PRIu64, o->bytes))
#define OP_redop(k) (key(w, k), str_or_null(f, o->redop))
#define OP_root(k) (key(w, k), fputs("null", f))
#define OP_peer(k) (key(w, k), i64_or_null(f, o->peer, o->peer < 0))
#define OP_stream(k) \
    (key(w, k),      \
     fprintf(f, "\"%016" PRIx64 "\"", (uint64_t)0x000055d0c2a41e20 + (uint64_t)v->rank * 4096))
#define OP_group(k) (key(w, k), i64_or_null(f, (int64_t)o->group, !o->group))
#define OP_thread(k) (key(w, k), fprintf(f, "%d", gen_pid(v->rank)))
#define OP_enqueue_ns(k) (key(w, k), fprintf(f, "%" PRId64, o->enq))
#define OP_enqueue_mono_ns(k) \
    (key(w, k), fprintf(f, "%" PRId64, o->enq - T0 + (int64_t)90000000000))
#define OP_state(k) (key(w, k), fprintf(f, "\"%s\"", o->state))
#define OP_gpu_start_ns(k) (key(w, k), i64_or_null(f, o->start, !o->start))
#define OP_gpu_end_ns(k) (key(w, k), i64_or_null(f, o->end, !o->end))
#define OP_seen_start_ns(k) (key(w, k), i64_or_null(f, o->start + 2 * MS, !o->start))
#define OP_seen_end_ns(k) (key(w, k), i64_or_null(f, o->end + 2 * MS, !o->end))
#define OP_times(k) (key(w, k), str_or_null(f, o->start ? "sampled" : NULL))
#define OP_result(k) (key(w, k), fputs("0", f))
#define OP_flags(k) (key(w, k), fprintf(f, "[%s]", o->flags))
#define OP_marker(k) (key(w, k), fprintf(f, "%ld", index % 4096))
#define OP_stack(k) (key(w, k), fputs("null", f))

static void write_op(struct out *w, const struct rankview *v, long index, const struct op *o)
{
    FILE *f = w->f;
#define M_(key) OP_##key(#key)
    OBJECT(w, OP);
#undef M_
}

/* ---- threads and Python ---- */

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define APP "/opt/job/bin/trainloop"
#define SHIMLIB "/opt/job/lib/libncclguard.so"

struct frame {
    const char *module, *fn; /* fn NULL: a bare address (a crash dump's) */
    uint64_t off;
};

#define FRAME_pc(k) (key(w, k), fprintf(f, "\"%016" PRIx64 "\"", base + fr->off))
#define FRAME_module(k) (key(w, k), fprintf(f, "\"%s\"", fr->module))
#define FRAME_offset(k) (key(w, k), fprintf(f, "%" PRIu64, fr->off))
#define FRAME_function(k) (key(w, k), str_or_null(f, fr->fn))
#define FRAME_function_offset(k) (key(w, k), i64_or_null(f, (int64_t)(fr->off % 97), !fr->fn))
#define FRAME_build_id(k) (key(w, k), fputs("\"3d2f0b1c9e8a7d6c5b4a39281706f5e4d3c2b1a0\"", f))
#define FRAME_guess(k) (key(w, k), fputs("false", f))

static void write_frames(struct out *w, int rank, const struct frame *frames, int n)
{
    FILE *f = w->f;
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        const struct frame *fr = &frames[i];
        uint64_t base = strstr(fr->module, "trainloop") ? (uint64_t)0x55d0c2a00000
                                                        : (uint64_t)0x7f3c1a200000;
        base += (uint64_t)rank << 24;
        if (i) fputc(',', f);
#define M_(key) FRAME_##key(#key)
        OBJECT(w, FRAME);
#undef M_
    }
    fputc(']', f);
}

/* The main thread's frames, innermost first; their number. */
static int main_frames(const struct rankview *v, int crash, int stalled, struct frame *out)
{
    static const struct frame crashed[] = {{APP, NULL, 0x2a1c},
                                           {APP, NULL, 0x31f0},
                                           {APP, NULL, 0x1e40}};
    static const struct frame exiting[] = {{SHIMLIB, "ncclguard_dump_write", 0x1a2b0},
                                           {LIBC, "__run_exit_handlers", 0x3c4a5},
                                           {LIBC, "exit", 0x3c5f0},
                                           {APP, "main", 0x1e90}};
    static const struct frame sleeping[] = {{LIBC, "clock_nanosleep", 0xe57fa},
                                            {LIBC, "sleep", 0xe5a10},
                                            {APP, "trainloop_host_stall", 0x2a1c}};
    static const struct frame waiting[] = {{LIBC, "__futex_abstimed_wait_common", 0x8a3e6},
                                           {"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                            "cuStreamSynchronize", 0x2b1f0},
                                           {APP, "tl_stream_wait", 0x2f00}};
    static const struct frame step[] = {{APP, "train_step", 0x31f0},
                                        {APP, "main", 0x1e40},
                                        {LIBC, "__libc_start_call_main", 0x271ca}};
    const struct frame *top = crash                          ? crashed
                              : stalled                      ? sleeping
                              : v->last < 0 && v->last != -2 ? exiting
                                                             : waiting;
    int n = crash ? 3 : top == exiting ? 4 : 3;
    memcpy(out, top, (size_t)n * sizeof *out);
    if (crash || top == exiting) return n;
    memcpy(out + n, step, sizeof step);
    return n + 3;
}

struct thread {
    int tid;
    const char *name, *state, *syscall, *from;
    const struct frame *frames;
    int nframes;
};

#define THREAD_tid(k) (key(w, k), fprintf(f, "%d", t->tid))
#define THREAD_name(k) (key(w, k), fprintf(f, "\"%s\"", t->name))
#define THREAD_state(k) (key(w, k), fprintf(f, "\"%s\"", t->state))
#define THREAD_syscall(k) (key(w, k), str_or_null(f, t->syscall))
#define THREAD_stack_from(k) (key(w, k), fprintf(f, "\"%s\"", t->from))
#define THREAD_frames(k) (key(w, k), write_frames(w, rank, t->frames, t->nframes))
#define THREAD_stack_note(k) (key(w, k), fputs("null", f))

static void write_thread(struct out *w, int rank, const struct thread *t)
{
    FILE *f = w->f;
#define M_(key) THREAD_##key(#key)
    OBJECT(w, THREAD);
#undef M_
}

struct pyframe {
    const char *file, *function;
    int line;
};

#define PY_FRAME_file(k) (key(w, k), fprintf(f, "\"%s\"", fr->file))
#define PY_FRAME_line(k) (key(w, k), fprintf(f, "%d", fr->line))
#define PY_FRAME_function(k) (key(w, k), fprintf(f, "\"%s\"", fr->function))

#define PY_THREAD_thread_id(k) (key(w, k), fputs("\"00007f3c1b2c4680\"", f))
#define PY_THREAD_tid(k) (key(w, k), fprintf(f, "%d", gen_pid(v->rank)))
#define PY_THREAD_frames(k) (key(w, k), write_pyframes(w, frames, n))
#define PY_THREAD_note(k) (key(w, k), fputs("null", f))

#define PYTHON_method(k) (key(w, k), fputs("\"debug_offsets\"", f))
#define PYTHON_why(k) (key(w, k), fputs("null", f))
#define PYTHON_threads(k) (key(w, k), write_pythread(w, v, frames, n))
#define PYTHON_raw(k) (key(w, k), fputs("null", f))

static void write_pyframes(struct out *w, const struct pyframe *frames, int n)
{
    FILE *f = w->f;
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        const struct pyframe *fr = &frames[i];
        if (i) fputc(',', f);
#define M_(key) PY_FRAME_##key(#key)
        OBJECT(w, PY_FRAME);
#undef M_
    }
    fputc(']', f);
}

static void write_pythread(struct out *w, const struct rankview *v, const struct pyframe *frames,
                           int n)
{
    FILE *f = w->f;
    fputc('[', f);
#define M_(key) PY_THREAD_##key(#key)
    OBJECT(w, PY_THREAD);
#undef M_
    fputc(']', f);
}

static void write_python(struct out *w, const struct rankview *v, int stalled)
{
    FILE *f = w->f;
    static const struct pyframe loading[] = {{"train.py", "load_batch", 212},
                                             {"train.py", "<module>", 240}};
    static const struct pyframe reducing[] = {
        {"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", "all_reduce",
         2501},
        {"train.py", "train_step", 230},
        {"train.py", "<module>", 240}};
    static const struct pyframe done[] = {{"train.py", "<module>", 240}};
    const struct pyframe *frames = stalled ? loading : v->last != -1 ? reducing : done;
    int n = stalled ? 2 : v->last != -1 ? 3 : 1;
#define M_(key) PYTHON_##key(#key)
    OBJECT(w, PYTHON);
#undef M_
}

/* ---- communicators ---- */

#define PEER_peer(k) (key(w, k), fprintf(f, "%d", p->peer))
#define PEER_last_p2p_seq(k) (key(w, k), fprintf(f, "%ld", p->called))
#define PEER_last_completed_p2p_seq(k) (key(w, k), fprintf(f, "%ld", p->done))

struct peer {
    int peer;
    long called, done;
};

static void write_peers(struct out *w, const struct peer *peers, int n)
{
    FILE *f = w->f;
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        const struct peer *p = &peers[i];
        if (i) fputc(',', f);
#define M_(key) PEER_##key(#key)
        OBJECT(w, PEER);
#undef M_
    }
    fputc(']', f);
}

#define COMM_id(k) \
    (key(w, k), fprintf(f, "\"%016" PRIx64 "\"", world ? WORLD_ID : tp_id(v->rank / g->tp)))
#define COMM_rank(k) (key(w, k), fprintf(f, "%d", world ? v->rank : v->rank % g->tp))
#define COMM_nranks(k) (key(w, k), fprintf(f, "%d", world ? g->nranks : g->tp))
#define COMM_device(k) (key(w, k), fprintf(f, "%d", v->rank % 8))
#define COMM_name(k) (key(w, k), fprintf(f, "\"%s\"", world ? "world" : "tp"))
#define COMM_state(k) (key(w, k), fputs("\"ready\"", f))
#define COMM_blocking(k) (key(w, k), fputs("true", f))
#define COMM_parent(k) \
    (key(w, k), world ? (void)fputs("null", f) : (void)fprintf(f, "\"%016" PRIx64 "\"", WORLD_ID))
#define COMM_created_ns(k) (key(w, k), fprintf(f, "%" PRId64, T0 - 5000 * MS))
#define COMM_last_seq(k) (key(w, k), fprintf(f, "%ld", called))
#define COMM_last_completed_seq(k) (key(w, k), fprintf(f, "%ld", done))
#define COMM_last_async_error(k) (key(w, k), fputs("0", f))
#define COMM_peers(k) (key(w, k), write_peers(w, peers, npeers))

static void write_comm(struct out *w, const struct rankview *v, int world, long called, long done)
{
    FILE *f = w->f;
    const struct gen_job *g = v->g;
    struct peer peers[2];
    int npeers = 0;
    if (world && v->next == v->prev) {
        peers[npeers++] = (struct peer){v->next, 2 * called, 2 * done};
    } else if (world) {
        int lo = v->next < v->prev ? v->next : v->prev;
        int hi = v->next < v->prev ? v->prev : v->next;
        peers[npeers++] = (struct peer){lo, called, done};
        peers[npeers++] = (struct peer){hi, called, done};
    }
#define M_(key) COMM_##key(#key)
    OBJECT(w, COMM);
#undef M_
}

/* ---- the top level ---- */

#define VERSION_ncclguard(k) (key(w, k), fputs("\"0.1.0\"", f))
#define VERSION_nccl(k) (key(w, k), fputs("22809", f))
#define VERSION_cuda_driver(k) (key(w, k), fputs("13000", f))
#define VERSION_python(k) (key(w, k), fputs("\"3.11.2\"", f))

#define FLIGHT_capacity(k) (key(w, k), fprintf(f, "%ld", g->records))
#define FLIGHT_recorded(k) (key(w, k), fprintf(f, "%ld", nrec))
#define FLIGHT_overwritten(k) (key(w, k), fputs("0", f))
#define FLIGHT_dropped_inflight(k) (key(w, k), fputs("0", f))

/* One line per member, as the writer does; no config (the writer leaves it out
 * without a site policy), no enqueue stacks (stacks off), no RAS answer. */
#define TOP_schema(k) (key(w, k), fprintf(f, "\"%s\"", NG_DUMP_SCHEMA))
#define TOP_reason(k) (key(w, k), fprintf(f, "\"%s\"", reason))
#define TOP_incident(k) (key(w, k), incident(f, &v, t))
#define TOP_time_ns(k) (key(w, k), fprintf(f, "%" PRId64, t))
#define TOP_host(k) (key(w, k), fprintf(f, "\"%s\"", gen_host(rank)))
#define TOP_pid(k) (key(w, k), fprintf(f, "%d", gen_pid(rank)))
#define TOP_rank(k) (key(w, k), fprintf(f, "%d", rank))
#define TOP_local_rank(k) (key(w, k), fprintf(f, "%d", rank % 8))
#define TOP_job(k) (key(w, k), fputs("\"gen-job\"", f))
#define TOP_versions(k) (key(w, k), write_versions(w))
#define TOP_env(k)                                                                                \
    (key(w, k), fprintf(f, "{\"RANK\":\"%d\",\"WORLD_SIZE\":\"%d\",\"LOCAL_RANK\":\"%d\"}", rank, \
                        g->nranks, rank % 8))
#define TOP_config(k)
#define TOP_flight(k) (key(w, k), write_flight(w, g, nrec))
#define TOP_ops(k) (key(w, k), write_ops(w, &v, nrec))
#define TOP_comms(k) (key(w, k), write_comms(w, &v))
#define TOP_stack_table(k) (key(w, k), write_stack_table(w))
#define TOP_stacks(k) (key(w, k), fputs("[]", f))
#define TOP_threads(k) (key(w, k), write_threads(w, &v))
#define TOP_python(k) (key(w, k), write_python_or_null(w, &v))
#define TOP_ras(k) (key(w, k), fputs("null", f))

#define STACK_TABLE_depth(k) (key(w, k), fputs("0", f))
#define STACK_TABLE_capacity(k) (key(w, k), fputs("0", f))
#define STACK_TABLE_used(k) (key(w, k), fputs("0", f))
#define STACK_TABLE_lost(k) (key(w, k), fputs("0", f))

static void write_stack_table(struct out *w)
{
    FILE *f = w->f;
#define M_(key) STACK_TABLE_##key(#key)
    OBJECT(w, STACK_TABLE);
#undef M_
}

static void write_versions(struct out *w)
{
    FILE *f = w->f;
#define M_(key) VERSION_##key(#key)
    OBJECT(w, VERSION);
#undef M_
}

static void write_flight(struct out *w, const struct gen_job *g, long nrec)
{
    FILE *f = w->f;
#define M_(key) FLIGHT_##key(#key)
    OBJECT(w, FLIGHT);
#undef M_
}

static void incident(FILE *f, const struct rankview *v, int64_t t)
{
    if (v->hang)
        fprintf(f, "\"%" PRId64 ".118000000-r0@gen-0000\"", t / 1000000000);
    else
        fputs("null", f);
}

static void write_ops(struct out *w, const struct rankview *v, long nrec)
{
    FILE *f = w->f;
    fputs("[\n", f);
    /* in flight first (only the last step can be), then the others, each newest first */
    int first = 1;
    for (int pass = 0; pass < 2; pass++)
        for (long i = nrec - 1; i >= (pass == 0 && nrec > 4 ? nrec - 4 : 0); i--) {
            struct op o;
            make_op(v, i / 4, (int)(i % 4), &o);
            int inflight = strcmp(o.state, "completed") != 0;
            if (inflight != (pass == 0)) continue;
            if (!first) fputs(",\n", f);
            first = 0;
            write_op(w, v, i, &o);
        }
    fputs("\n]", f);
}

static void write_comms(struct out *w, const struct rankview *v)
{
    long hung = v->last >= 0 ? 1 : 0;
    fputs("[\n", w->f);
    write_comm(w, v, 1, v->steps, v->steps - hung);
    fputs(",\n", w->f);
    write_comm(w, v, 0, v->steps, v->steps - hung);
    fputs("\n]", w->f);
}

static void write_threads(struct out *w, const struct rankview *v)
{
    int pid = gen_pid(v->rank), crash = v->culprit && v->g->cause == GEN_CRASH;
    int stalled = v->culprit && v->g->cause == GEN_MISSING;
    struct frame frames[6];
    int n = main_frames(v, crash, stalled, frames);
    static const struct frame wd[] = {{LIBC, "clock_nanosleep", 0xe57fa},
                                      {SHIMLIB, "ng_watchdog_main", 0x31c00},
                                      {LIBC, "start_thread", 0x89134}};
    struct thread main_thread = {pid,
                                 "trainloop",
                                 crash ? "R" : "S",
                                 crash     ? NULL
                                 : stalled ? "clock_nanosleep"
                                           : "futex",
                                 crash ? "self" : "signal",
                                 frames,
                                 n};
    struct thread watchdog = {pid + 1, "ncclguard-wd", "S", "clock_nanosleep", "self", wd, 3};
    fputs("[\n", w->f);
    write_thread(w, v->rank, &main_thread);
    if (!crash) {
        fputs(",\n", w->f);
        write_thread(w, v->rank, &watchdog);
    }
    fputs("\n]", w->f);
}

static void write_python_or_null(struct out *w, const struct rankview *v)
{
    int crash = v->culprit && v->g->cause == GEN_CRASH;
    if (crash)
        fputs("null", w->f);
    else
        write_python(w, v, v->culprit && v->g->cause == GEN_MISSING);
}

void gen_write_dump(FILE *f, const struct gen_job *g, int rank)
{
    long steps = g->records / 4;
    struct rankview v = {.g = g,
                         .rank = rank,
                         .next = (rank + 1) % g->nranks,
                         .prev = (rank + g->nranks - 1) % g->nranks,
                         .hang = is_hang(g),
                         .culprit = rank == g->culprit,
                         .steps = steps};
    v.last = v.hang ? steps - 1 : -1;
    if (v.culprit && (g->cause == GEN_MISSING || g->cause == GEN_CRASH)) {
        v.steps = steps - 1; /* never called the last step */
        v.last = -2;
    }
    int crash = v.culprit && g->cause == GEN_CRASH;
    int64_t t = T0 + steps * STEP_NS + (v.hang ? 300000 * MS : 1000 * MS);
    const char *reason = crash ? "crash" : !v.hang ? "exit" : v.culprit ? "trigger" : "timeout";
    long nrec = v.steps * 4;
    struct out top = {f, 1, 0}, *w = &top;
#define M_(key) TOP_##key(#key)
    OBJECT(w, TOP);
#undef M_
    fputs("\n", f);
}
