/*
 * gen_dump.c: one rank's dump of the synthetic job (gendumps.h), in the writer's
 * layout (shim/evidence/dump_body.c): one line per top-level member, comm and op.
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

int gen_pid(int rank) { return 10000 + rank; }

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
    long steps, last;        /* steps called by this rank; the hung step (or < 0) */
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
    return g->cause == GEN_MISSING || g->cause == GEN_MISMATCH ||
           g->cause == GEN_GPU_NOT_STARTED || g->cause == GEN_CRASH || g->no_dump >= 0;
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
        o->name = "AllReduce"; o->dtype = "bfloat16"; o->redop = "sum";
        o->seq = (uint64_t)k + 1; o->count = 4194304;
        if (v->culprit && g->cause == GEN_MISMATCH && k == v->last) o->count--;
        o->enq = a; o->start = a + 20000; o->end = base + 11 * MS;
        break;
    case 1:
        o->name = "AllGather"; o->dtype = "float32";
        o->comm = tp_id(v->rank / g->tp); o->comm_rank = v->rank % g->tp; o->comm_nranks = g->tp;
        o->seq = (uint64_t)k + 1; o->count = 65536;
        o->enq = a + 5000; o->start = base + 11 * MS + 1000; o->end = o->start + 200000;
        break;
    default:
        o->name = j == 2 ? "Send" : "Recv"; o->dtype = "float32";
        o->peer = j == 2 ? v->next : v->prev;
        o->p2p = same ? (uint64_t)(2 * k + j - 1) : (uint64_t)k + 1;
        o->count = 262144; o->group = (uint64_t)k + 1;
        o->enq = a + 10000; o->start = base + 11 * MS + 300000; o->end = o->start + 300000;
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

static void put_opt(FILE *f, const char *key, int64_t v, int isnull)
{
    if (isnull) fprintf(f, ",\"%s\":null", key);
    else fprintf(f, ",\"%s\":%" PRId64, key, v);
}

static void write_op(FILE *f, const struct rankview *v, long index, const struct op *o)
{
    fprintf(f, "{\"index\":%ld,\"comm\":\"%016" PRIx64 "\",\"comm_rank\":%d,\"comm_nranks\":%d",
            index, o->comm, o->comm_rank, o->comm_nranks);
    put_opt(f, "seq", (int64_t)o->seq, !o->seq);
    put_opt(f, "p2p_seq", (int64_t)o->p2p, !o->p2p);
    fprintf(f, ",\"op\":\"%s\",\"count\":%" PRIu64 ",\"datatype\":\"%s\",\"bytes\":%" PRIu64,
            o->name, o->count, o->dtype, o->bytes);
    if (o->redop) fprintf(f, ",\"redop\":\"%s\"", o->redop);
    else fputs(",\"redop\":null", f);
    fputs(",\"root\":null", f);
    put_opt(f, "peer", o->peer, o->peer < 0);
    fprintf(f, ",\"stream\":\"%016" PRIx64 "\"",
            (uint64_t)0x000055d0c2a41e20 + (uint64_t)v->rank * 4096);
    put_opt(f, "group", (int64_t)o->group, !o->group);
    fprintf(f, ",\"thread\":%d,\"enqueue_ns\":%" PRId64 ",\"enqueue_mono_ns\":%" PRId64
               ",\"state\":\"%s\"",
            gen_pid(v->rank), o->enq, o->enq - T0 + (int64_t)90000000000, o->state);
    put_opt(f, "gpu_start_ns", o->start, !o->start);
    put_opt(f, "gpu_end_ns", o->end, !o->end);
    put_opt(f, "seen_start_ns", o->start + 2 * MS, !o->start);
    put_opt(f, "seen_end_ns", o->end + 2 * MS, !o->end);
    fprintf(f, ",\"result\":0,\"flags\":[%s],\"marker\":%ld}", o->flags, index % 4096);
}

/* One frame: function NULL writes a bare address (a crash dump's). */
static void frame(FILE *f, int first, int rank, const char *module, const char *fn, uint64_t off)
{
    uint64_t base = strstr(module, "trainloop") ? (uint64_t)0x55d0c2a00000 : (uint64_t)0x7f3c1a200000;
    base += (uint64_t)rank << 24;
    fprintf(f, "%s{\"pc\":\"%016" PRIx64 "\",\"module\":\"%s\",\"offset\":%" PRIu64,
            first ? "" : ",", base + off, module, off);
    if (fn) fprintf(f, ",\"function\":\"%s\",\"function_offset\":%d", fn, (int)(off % 97));
    else fputs(",\"function\":null,\"function_offset\":null", f);
    fputs(",\"build_id\":\"3d2f0b1c9e8a7d6c5b4a39281706f5e4d3c2b1a0\"}", f);
}

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define APP "/opt/job/bin/trainloop"
#define SHIMLIB "/opt/job/lib/libncclguard.so"

static void main_frames(FILE *f, const struct rankview *v, int crash, int stalled)
{
    int r = v->rank;
    if (crash) {
        frame(f, 1, r, APP, NULL, 0x2a1c);
        frame(f, 0, r, APP, NULL, 0x31f0);
        frame(f, 0, r, APP, NULL, 0x1e40);
        return;
    }
    if (stalled) {
        frame(f, 1, r, LIBC, "clock_nanosleep", 0xe57fa);
        frame(f, 0, r, LIBC, "sleep", 0xe5a10);
        frame(f, 0, r, APP, "trainloop_host_stall", 0x2a1c);
    } else if (v->last < 0 && v->last != -2) {
        frame(f, 1, r, SHIMLIB, "ncclguard_dump_write", 0x1a2b0);
        frame(f, 0, r, LIBC, "__run_exit_handlers", 0x3c4a5);
        frame(f, 0, r, LIBC, "exit", 0x3c5f0);
        frame(f, 0, r, APP, "main", 0x1e90);
        return;
    } else {
        frame(f, 1, r, LIBC, "__futex_abstimed_wait_common", 0x8a3e6);
        frame(f, 0, r, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuStreamSynchronize", 0x2b1f0);
        frame(f, 0, r, APP, "tl_stream_wait", 0x2f00);
    }
    frame(f, 0, r, APP, "train_step", 0x31f0);
    frame(f, 0, r, APP, "main", 0x1e40);
    frame(f, 0, r, LIBC, "__libc_start_call_main", 0x271ca);
}

static void write_threads(FILE *f, const struct rankview *v)
{
    int pid = gen_pid(v->rank), crash = v->culprit && v->g->cause == GEN_CRASH;
    int stalled = v->culprit && v->g->cause == GEN_MISSING;
    int done = v->last == -1;
    fprintf(f, "\"threads\":[\n{\"tid\":%d,\"name\":\"trainloop\",\"state\":\"%s\",\"syscall\":%s,"
               "\"stack_from\":\"%s\",\"frames\":[",
            pid, crash ? "R" : "S", crash ? "null" : stalled ? "\"clock_nanosleep\"" : "\"futex\"",
            crash ? "self" : "signal");
    main_frames(f, v, crash, stalled);
    fputs("]}", f);
    if (!crash) {
        fprintf(f, ",\n{\"tid\":%d,\"name\":\"ncclguard-wd\",\"state\":\"S\",\"syscall\":"
                   "\"clock_nanosleep\",\"stack_from\":\"self\",\"frames\":[", pid + 1);
        frame(f, 1, v->rank, LIBC, "clock_nanosleep", 0xe57fa);
        frame(f, 0, v->rank, SHIMLIB, "ng_watchdog_main", 0x31c00);
        frame(f, 0, v->rank, LIBC, "start_thread", 0x89134);
        fputs("]}", f);
    }
    fputs("\n],\n", f);
    if (crash) {
        fputs("\"python\":null\n", f);
        return;
    }
    fprintf(f, "\"python\":{\"method\":\"debug_offsets\",\"why\":null,\"threads\":[{\"thread_id\":"
               "\"00007f3c1b2c4680\",\"tid\":%d,\"frames\":[", pid);
    if (stalled)
        fputs("{\"file\":\"train.py\",\"line\":212,\"function\":\"load_batch\"},", f);
    else if (!done)
        fputs("{\"file\":\"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\","
              "\"line\":2501,\"function\":\"all_reduce\"},{\"file\":\"train.py\",\"line\":230,"
              "\"function\":\"train_step\"},", f);
    fputs("{\"file\":\"train.py\",\"line\":240,\"function\":\"<module>\"}]}],\"raw\":null}\n", f);
}

static void write_comm(FILE *f, const struct rankview *v, int world, long called, long done)
{
    const struct gen_job *g = v->g;
    fprintf(f, "{\"id\":\"%016" PRIx64 "\",\"rank\":%d,\"nranks\":%d,\"device\":%d,\"name\":\"%s\","
               "\"state\":\"ready\",\"blocking\":true,\"parent\":",
            world ? WORLD_ID : tp_id(v->rank / g->tp), world ? v->rank : v->rank % g->tp,
            world ? g->nranks : g->tp, v->rank % 8, world ? "world" : "tp");
    if (world) fputs("null", f);
    else fprintf(f, "\"%016" PRIx64 "\"", WORLD_ID);
    fprintf(f, ",\"created_ns\":%" PRId64 ",\"last_seq\":%ld,\"last_completed_seq\":%ld,"
               "\"last_async_error\":0,\"peers\":[",
            T0 - 5000 * MS, called, done);
    if (world && v->next == v->prev) {
        fprintf(f, "{\"peer\":%d,\"last_p2p_seq\":%ld,\"last_completed_p2p_seq\":%ld}",
                v->next, 2 * called, 2 * done);
    } else if (world) {
        int lo = v->next < v->prev ? v->next : v->prev;
        int hi = v->next < v->prev ? v->prev : v->next;
        fprintf(f, "{\"peer\":%d,\"last_p2p_seq\":%ld,\"last_completed_p2p_seq\":%ld},"
                   "{\"peer\":%d,\"last_p2p_seq\":%ld,\"last_completed_p2p_seq\":%ld}",
                lo, called, done, hi, called, done);
    }
    fputs("]}", f);
}

void gen_write_dump(FILE *f, const struct gen_job *g, int rank)
{
    long steps = g->records / 4;
    struct rankview v = {.g = g, .rank = rank, .next = (rank + 1) % g->nranks,
                         .prev = (rank + g->nranks - 1) % g->nranks,
                         .hang = is_hang(g), .culprit = rank == g->culprit, .steps = steps};
    v.last = v.hang ? steps - 1 : -1;
    if (v.culprit && (g->cause == GEN_MISSING || g->cause == GEN_CRASH)) {
        v.steps = steps - 1; /* never called the last step */
        v.last = -2;
    }
    int crash = v.culprit && g->cause == GEN_CRASH;
    int64_t t = T0 + steps * STEP_NS + (v.hang ? 300000 * MS : 1000 * MS);
    const char *reason = crash ? "crash" : !v.hang ? "exit" : v.culprit ? "trigger" : "timeout";
    fprintf(f, "{\n\"schema\":\"ncclguard.dump/2\",\n\"reason\":\"%s\",\n\"incident\":", reason);
    if (v.hang) fprintf(f, "\"%" PRId64 ".118000000-r0@gen-0000\"", t / 1000000000);
    else fputs("null", f);
    fprintf(f, ",\n\"time_ns\":%" PRId64 ",\n\"host\":\"%s\",\n\"pid\":%d,\n\"rank\":%d,\n"
               "\"local_rank\":%d,\n\"job\":\"gen-job\",\n",
            t, gen_host(rank), gen_pid(rank), rank, rank % 8);
    fputs("\"versions\":{\"ncclguard\":\"0.1.0\",\"nccl\":22809,\"cuda_driver\":13000,"
          "\"python\":\"3.11.2\"},\n", f);
    fprintf(f, "\"env\":{\"RANK\":\"%d\",\"WORLD_SIZE\":\"%d\",\"LOCAL_RANK\":\"%d\"},\n", rank,
            g->nranks, rank % 8);
    long nrec = v.steps * 4;
    fprintf(f, "\"flight\":{\n\"capacity\":%ld,\n\"recorded\":%ld,\n\"overwritten\":0,\n"
               "\"dropped_inflight\":0\n},\n\"comms\":[\n", g->records, nrec);
    long hung = v.last >= 0 ? 1 : 0;
    write_comm(f, &v, 1, v.steps, v.steps - hung);
    fputs(",\n", f);
    write_comm(f, &v, 0, v.steps, v.steps - hung);
    fputs("\n],\n\"ops\":[\n", f);
    /* in flight first (only the last step can be), then the others, each newest first */
    int first = 1;
    for (int pass = 0; pass < 2; pass++)
        for (long i = nrec - 1; i >= (pass == 0 && nrec > 4 ? nrec - 4 : 0); i--) {
            struct op o;
            make_op(&v, i / 4, (int)(i % 4), &o);
            int inflight = strcmp(o.state, "completed") != 0;
            if (inflight != (pass == 0)) continue;
            if (!first) fputs(",\n", f);
            first = 0;
            write_op(f, &v, i, &o);
        }
    fputs("\n],\n", f);
    write_threads(f, &v);
    fputs("}\n", f);
}
