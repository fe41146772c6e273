/*
 * trainloop: one rank of a data-parallel training job on NCCL (see trainloop.h
 * for the module map and docs/harness.md for the interface). This file holds
 * the command line, the launcher environment, the worker threads and the step
 * loop of each worker.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainloop.h"

static const char usage_text[] =
    "usage: trainloop [--steps K] [--compute-ms M] [--threads T] [--nonblocking] [--graph]\n"
    "                 [--quiet] [--hang-rank R [--hang-step S]] [--skip-rank R [--skip-step S]]\n"
    "                 [--mismatch-rank R [--mismatch-step S]]\n"
    "                 [--stall-gpu-rank R [--stall-step S]] [--corrupt-rank R [--corrupt-step S]]\n"
    "                 [--hang-split-rank R [--hang-split-step S]] [--crash-rank R [--crash-step S]]\n"
    "                 [--stall-split-rank R [--stall-split-step S]]\n"
    "                 [--pipeline [--drop-send-rank R [--drop-send-step S]]]\n"
    "                 [--jitter-ms J] [--pause-ms P] [--seed N]\n"
    "                 [--late-gpu-rank R [--late-gpu-ms M]]\n"
    "One rank of a data-parallel job; run it under launch (RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LAUNCH_RDZV_DIR). Steps count from 0; a fault step defaults to 1.\n"
    "  --steps K          training steps (default 10)\n"
    "  --compute-ms M     fake compute kernel per step, in ms (default 2)\n"
    "  --threads T        T worker threads, each with its own communicators (default 1)\n"
    "  --nonblocking      nonblocking communicators (config.blocking = 0)\n"
    "  --graph            capture one AllReduce into a CUDA graph, launch it every step\n"
    "  --quiet            no informational lines\n"
    "  --jitter-ms J      each rank waits 0..J ms on the host before each step (seeded)\n"
    "  --pause-ms P       every tenth step, one rank (seeded) waits P ms more\n"
    "  --seed N           another draw of the jitter and pauses (then a step has a pause with\n"
    "                     chance 1/10, not every tenth); 0, the default, is the fixed pattern\n"
    "  --late-gpu-rank R  rank R's GPU is M ms (--late-gpu-ms, default 12) late at the first\n"
    "                     collective of every step: a kernel of M ms before it, a straggler\n"
    "  --hang-rank R      rank R blocks forever in trainloop_host_stall() before step S\n"
    "  --skip-rank R      rank R skips AllReduce #0 in step S\n"
    "  --mismatch-rank R  rank R passes count-1 to AllReduce #0 in step S\n"
    "  --stall-gpu-rank R rank R's stream stalls before the first collective of step S\n"
    "  --corrupt-rank R   rank R adds 1 to one input of AllReduce #0 in step S\n"
    "  --hang-split-rank R rank R blocks in trainloop_host_stall() in step S, before its first\n"
    "                     op on the split communicator (its world ops of the step are called)\n"
    "  --crash-rank R     rank R dies of SIGSEGV in trainloop_crash() 0.5 s into step S\n"
    "  --stall-split-rank R the split communicator's ops run on a stream of their own; on\n"
    "                     rank R it stalls before them in step S, and the host waits for\n"
    "                     their results at the end of the step (the next world op never comes)\n"
    "  --pipeline         each step: a Send/Recv hand-off with the rank at the same place of\n"
    "                     the other half (world stream), a ReduceScatter of the half on a tp\n"
    "                     stream after it (an event), a world AllReduce after that (an event)\n"
    "  --drop-send-rank R with --pipeline: rank R leaves the Send out of its hand-off in step S\n"
    "Exit: 0 ok, 1 wrong result, 2 CUDA/NCCL call failed, 3 setup, 64 usage.\n";

/* One line "trainloop: <problem>; see trainloop --help" and exit 64. */
static __attribute__((noreturn, format(printf, 1, 2))) void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "trainloop: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see trainloop --help\n");
    va_end(ap);
    exit(TL_EXIT_USAGE);
}

static int parse_int(const char *opt, const char *s, int min, int max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        usage_error("--%s expects an integer from %d to %d, got '%s'", opt, min, max, s);
    return (int)v;
}

enum {
    O_STEPS = 256,
    O_COMPUTE,
    O_THREADS,
    O_NONBLOCKING,
    O_GRAPH,
    O_QUIET,
    O_HELP,
    O_JITTER,
    O_PAUSE,
    O_PIPELINE,
    O_SEED,
    O_LATE_RANK,
    O_LATE_MS,
    O_FAULT_BASE
};

/* Fault options come in pairs: O_FAULT_BASE + 2*f is --X-rank, + 2*f+1 is --X-step. */
static const char *const fault_names[] = {"hang",      "skip",        "mismatch",
                                          "stall-gpu", "corrupt",     "hang-split",
                                          "crash",     "stall-split", "drop-send"};
#define N_FAULTS 9

static const struct option long_opts[] = {
    {"steps", required_argument, NULL, O_STEPS},
    {"compute-ms", required_argument, NULL, O_COMPUTE},
    {"threads", required_argument, NULL, O_THREADS},
    {"nonblocking", no_argument, NULL, O_NONBLOCKING},
    {"graph", no_argument, NULL, O_GRAPH},
    {"quiet", no_argument, NULL, O_QUIET},
    {"jitter-ms", required_argument, NULL, O_JITTER},
    {"pause-ms", required_argument, NULL, O_PAUSE},
    {"seed", required_argument, NULL, O_SEED},
    {"late-gpu-rank", required_argument, NULL, O_LATE_RANK},
    {"late-gpu-ms", required_argument, NULL, O_LATE_MS},
    {"help", no_argument, NULL, O_HELP},
    {"pipeline", no_argument, NULL, O_PIPELINE},
    {"hang-rank", required_argument, NULL, O_FAULT_BASE + 0},
    {"hang-step", required_argument, NULL, O_FAULT_BASE + 1},
    {"skip-rank", required_argument, NULL, O_FAULT_BASE + 2},
    {"skip-step", required_argument, NULL, O_FAULT_BASE + 3},
    {"mismatch-rank", required_argument, NULL, O_FAULT_BASE + 4},
    {"mismatch-step", required_argument, NULL, O_FAULT_BASE + 5},
    {"stall-gpu-rank", required_argument, NULL, O_FAULT_BASE + 6},
    {"stall-step", required_argument, NULL, O_FAULT_BASE + 7},
    {"stall-gpu-step", required_argument, NULL, O_FAULT_BASE + 7},
    {"corrupt-rank", required_argument, NULL, O_FAULT_BASE + 8},
    {"corrupt-step", required_argument, NULL, O_FAULT_BASE + 9},
    {"hang-split-rank", required_argument, NULL, O_FAULT_BASE + 10},
    {"hang-split-step", required_argument, NULL, O_FAULT_BASE + 11},
    {"crash-rank", required_argument, NULL, O_FAULT_BASE + 12},
    {"crash-step", required_argument, NULL, O_FAULT_BASE + 13},
    {"stall-split-rank", required_argument, NULL, O_FAULT_BASE + 14},
    {"stall-split-step", required_argument, NULL, O_FAULT_BASE + 15},
    {"drop-send-rank", required_argument, NULL, O_FAULT_BASE + 16},
    {"drop-send-step", required_argument, NULL, O_FAULT_BASE + 17},
    {NULL, 0, NULL, 0},
};

static struct tl_fault *fault_slot(struct tl_opts *o, int f)
{
    struct tl_fault *slots[N_FAULTS] = {&o->hang,      &o->skip,        &o->mismatch,
                                        &o->stall_gpu, &o->corrupt,     &o->hang_split,
                                        &o->crash,     &o->stall_split, &o->drop_send};
    return slots[f];
}

static void parse_opts(struct tl_opts *o, int argc, char **argv)
{
    *o = (struct tl_opts){
        .steps = 10, .compute_ms = 2, .threads = 1, .late_gpu_rank = -1, .late_gpu_ms = 12};
    for (int f = 0; f < N_FAULTS; f++)
        *fault_slot(o, f) = (struct tl_fault){.rank = -1, .step = -1};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", long_opts, NULL)) != -1) {
        switch (c) {
        case O_STEPS: o->steps = parse_int("steps", optarg, 1, INT_MAX / 8); break;
        case O_COMPUTE: o->compute_ms = parse_int("compute-ms", optarg, 0, 600000); break;
        case O_THREADS: o->threads = parse_int("threads", optarg, 1, 64); break;
        case O_NONBLOCKING: o->nonblocking = 1; break;
        case O_GRAPH: o->graph = 1; break;
        case O_QUIET: o->quiet = 1; break;
        case O_PIPELINE: o->pipeline = 1; break;
        case O_JITTER: o->jitter_ms = parse_int("jitter-ms", optarg, 0, 60000); break;
        case O_PAUSE: o->pause_ms = parse_int("pause-ms", optarg, 0, 600000); break;
        case O_SEED: o->seed = parse_int("seed", optarg, 0, INT_MAX); break;
        case O_LATE_RANK:
            o->late_gpu_rank = parse_int("late-gpu-rank", optarg, 0, INT_MAX / 8);
            break;
        case O_LATE_MS: o->late_gpu_ms = parse_int("late-gpu-ms", optarg, 0, 600000); break;
        case O_HELP: fputs(usage_text, stdout); exit(0);
        case ':': usage_error("missing value for %s", argv[optind - 1]);
        case '?': usage_error("unknown option %s", argv[optind - 1]);
        default: {
            int f = (c - O_FAULT_BASE) / 2, is_step = (c - O_FAULT_BASE) % 2;
            char name[32];
            snprintf(name, sizeof(name), "%s-%s", fault_names[f], is_step ? "step" : "rank");
            int v = parse_int(name, optarg, 0, INT_MAX / 8);
            if (is_step)
                fault_slot(o, f)->step = v;
            else
                fault_slot(o, f)->rank = v;
        }
        }
    }
    if (optind < argc) usage_error("unexpected argument %s", argv[optind]);
}

/* Fault sanity against the job: a fault that can never fire must not pass silently. */
static void check_faults(struct tl_opts *o, int nranks)
{
    if (o->drop_send.rank >= 0 && !o->pipeline) usage_error("--drop-send-rank needs --pipeline");
    if (o->pipeline && (nranks % 2 || o->graph || o->threads > 1))
        usage_error("--pipeline needs an even WORLD_SIZE, one thread and no --graph");
    if (o->late_gpu_rank >= nranks)
        usage_error("--late-gpu-rank %d is not below WORLD_SIZE %d", o->late_gpu_rank, nranks);
    for (int f = 0; f < N_FAULTS; f++) {
        struct tl_fault *slot = fault_slot(o, f);
        if (slot->rank < 0 && slot->step >= 0)
            usage_error("a fault step needs --%s-rank", fault_names[f]);
        if (slot->rank < 0) continue;
        if (slot->step < 0) slot->step = 1;
        if (slot->rank >= nranks)
            usage_error("--%s-rank %d is not below WORLD_SIZE %d", fault_names[f], slot->rank,
                        nranks);
        if (slot->step >= o->steps)
            usage_error("the %s fault step %d is not below --steps %d", fault_names[f], slot->step,
                        o->steps);
    }
}

static int env_int(const char *name, int dflt, int min)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < min || v > INT_MAX) {
        fprintf(stderr, "trainloop: %s='%s' is not a valid value\n", name, s);
        exit(TL_EXIT_SETUP);
    }
    return (int)v;
}

/* RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous; alone, trainloop is a world of one. */
static void read_env(struct tl_proc *p)
{
    p->nranks = env_int("WORLD_SIZE", 1, 1);
    p->rank = env_int("RANK", 0, 0);
    p->local_rank = env_int("LOCAL_RANK", p->rank, 0);
    p->rdzv_dir = getenv("LAUNCH_RDZV_DIR");
    p->run_id = getenv("LAUNCH_RUN_ID");
    if (p->rank >= p->nranks) {
        fprintf(stderr, "trainloop: RANK %d is not below WORLD_SIZE %d\n", p->rank, p->nranks);
        exit(TL_EXIT_SETUP);
    }
    if (p->nranks > 1 && (!p->rdzv_dir || !*p->rdzv_dir)) {
        fprintf(stderr,
                "trainloop: rank %d: LAUNCH_RDZV_DIR is not set; start trainloop "
                "with launch\n",
                p->rank);
        exit(TL_EXIT_SETUP);
    }
}

/* One worker's whole job: set-up, the step loop with checks, and teardown. */
static void *run_worker(void *arg)
{
    struct tl_worker *w = arg;
    const struct tl_opts *o = &w->p->opt;
    ncclUniqueId id;
    if (o->threads > 1) tl_set_thread(w->tid);
    tl_streams_create(w);
    tl_rdzv_unique_id(w->p, w->tid, &id);
    tl_comms_create(w, id);
    if (o->pipeline)
        tl_pipeline_setup(w);
    else
        tl_ops_setup(w);
    if (o->graph) tl_graph_capture(w);
    for (int step = 0; step < o->steps; step++) {
        if (tl_fault_now(w->p, &o->hang, step)) {
            tl_note(": host stall before step %d (--hang-rank, in trainloop_host_stall)", step);
            trainloop_host_stall();
        }
        if (tl_fault_now(w->p, &o->crash, step)) {
            tl_note(": crash before step %d (--crash-rank, in trainloop_crash)", step);
            /* Half a second first, as a rank dies in the middle of a step: the
             * others wait in this step's ops by then, so that the launcher's
             * SIGTERM finds them in flight (the shim's SIGTERM dump needs one). */
            struct timespec mid_step = {0, 500000000};
            nanosleep(&mid_step, NULL);
            trainloop_crash();
        }
        tl_host_jitter(w->p, step);
        if (o->pipeline)
            tl_pipeline_step(w, step);
        else
            tl_step_issue(w, step);
        tl_stream_wait(w, w->comm_stream);
        if (w->tp_stream) tl_stream_wait(w, w->tp_stream);
        tl_comms_poll_errors(w);
        if (o->pipeline)
            tl_pipeline_check(w, step);
        else
            tl_check_results(w, step);
        if (w->p->rank == 0 && w->tid == 0) tl_info(" step %d ok", step);
    }
    tl_graph_destroy(w);
    tl_comms_destroy(w);
    if (o->pipeline)
        tl_pipeline_free(w);
    else
        tl_ops_free(w);
    tl_streams_destroy(w);
    return NULL;
}

int main(int argc, char **argv)
{
    static struct tl_proc p;
    parse_opts(&p.opt, argc, argv);
    read_env(&p);
    check_faults(&p.opt, p.nranks);
    tl_set_identity(p.rank, p.opt.quiet);
    atexit(tl_release_gpu_stalls);

    tl_device_open(&p);
    tl_info(" of %d: device %d, %d thread(s), %d steps%s%s", p.nranks, p.dev_ordinal, p.opt.threads,
            p.opt.steps, p.opt.nonblocking ? ", nonblocking" : "", p.opt.graph ? ", graph" : "");
    pthread_barrier_init(&p.barrier, NULL, (unsigned)p.opt.threads);
    pthread_mutex_init(&p.capture_lock, NULL);

    int nt = p.opt.threads;
    struct tl_worker *w = calloc((size_t)nt, sizeof(*w));
    pthread_t *th = calloc((size_t)nt, sizeof(*th));
    if (!w || !th) tl_die(TL_EXIT_SETUP, ": out of memory");
    for (int t = 0; t < nt; t++) w[t] = (struct tl_worker){.p = &p, .tid = t, .graph_op = -1};
    if (nt == 1) {
        run_worker(&w[0]);
    } else {
        for (int t = 0; t < nt; t++) {
            int e = pthread_create(&th[t], NULL, run_worker, &w[t]);
            if (e) tl_die(TL_EXIT_SETUP, ": pthread_create failed: %s", strerror(e));
        }
        for (int t = 0; t < nt; t++) pthread_join(th[t], NULL);
    }
    long ops = 0;
    for (int t = 0; t < nt; t++) ops += w[t].nccl_ops;
    free(w);
    free(th);
    pthread_barrier_destroy(&p.barrier);
    pthread_mutex_destroy(&p.capture_lock);
    tl_device_close(&p);
    printf("trainloop: rank %d ok steps=%d ops=%ld\n", p.rank, p.opt.steps, ops);
    return TL_EXIT_OK;
}
