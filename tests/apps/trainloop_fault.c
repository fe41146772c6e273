/*
 * Host-side faults, where the culprits of real hangs usually are: a rank that
 * stops calling NCCL (trainloop_host_stall) and a stream that never reaches
 * its collective (trainloop_gpu_stall). Both functions keep these exact,
 * non-static names so that they show up in stack traces and evidence dumps.
 * Skip, mismatch, corrupt and hang-split are applied where the ops are issued and filled.
 */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "trainloop.h"

static atomic_int g_release_stalls;

/* True when fault F targets this rank in STEP (every worker thread of the rank). */
int tl_fault_now(const struct tl_proc *p, const struct tl_fault *f, int step)
{
    return f->rank >= 0 && f->rank == p->rank && f->step == step;
}

/*
 * --jitter-ms, --pause-ms: a healthy job is irregular on the host (data loading,
 * Python, the garbage collector): before each step a rank waits a pseudo-random
 * 0..J ms, and every tenth step one pseudo-random rank waits P ms more. Seeded by
 * rank and step, so every run is the same; the peers then wait for it in NCCL.
 * --seed N draws another pattern (N = 0 is the fixed one), in which each step has
 * a pause with chance 1/10: seeded repeats of a job, for the straggler rule.
 */
static uint32_t mix(uint32_t h)
{
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return h;
}

void tl_host_jitter(const struct tl_proc *p, int step)
{
    uint32_t seed = (uint32_t)p->opt.seed * 0x9e3779b9u;
    uint32_t h = mix(((uint32_t)step * 2654435761u ^ (uint32_t)(p->rank + 1) * 40503u) + seed);
    int ms = p->opt.jitter_ms ? (int)(h % (uint32_t)(p->opt.jitter_ms + 1)) : 0;
    uint32_t pick = (uint32_t)step * 2246822519u;
    pick ^= pick >> 16;
    int paused = step % 10 == 0;
    if (seed) { /* another draw: a pause with chance 1/10, on a rank drawn for the step */
        pick = mix(mix((uint32_t)step * 2246822519u + seed) ^ 0x27d4eb2du);
        paused = pick % 10 == 0;
        pick /= 10;
    }
    if (p->opt.pause_ms && paused && (int)(pick % (uint32_t)p->nranks) == p->rank)
        ms += p->opt.pause_ms;
    if (ms) usleep((useconds_t)ms * 1000);
}

/*
 * --hang-rank: the calling thread blocks here forever, outside NCCL, like a
 * rank stuck in its data loader. Not inlined, so the frame keeps its name.
 */
__attribute__((noinline)) void trainloop_host_stall(void)
{
    for (;;) {
        sleep(1);
        __asm__ volatile("" ::: "memory");
    }
}

/*
 * --crash-rank: a write through a null pointer, as a bug in the job would do; the
 * process dies of SIGSEGV (after the shim's crash dump). Not inlined, so the
 * crash dump's frame keeps the name.
 */
__attribute__((noinline, no_sanitize("undefined", "address"))) void trainloop_crash(void)
{ /* not instrumented: UBSan would stop the store to NULL before it faults */
    volatile int *p = NULL;
    __asm__ volatile("" : "+r"(p));
    *p = 1;
}

/*
 * --stall-gpu-rank: a host function on the communication stream that does not
 * return, so the collectives queued behind it are enqueued but never reached
 * by the "GPU". It sleeps in short slices rather than burning a core, and lets
 * go at process exit so that no driver worker thread is left blocked.
 */
__attribute__((noinline)) void CUDA_CB trainloop_gpu_stall(void *arg)
{
    (void)arg;
    struct timespec slice = {.tv_sec = 0, .tv_nsec = 1000000L};
    while (!atomic_load(&g_release_stalls)) nanosleep(&slice, NULL);
}

void tl_enqueue_gpu_stall(struct tl_worker *w, int step)
{
    tl_note(" step %d: stream stalled before the first collective (--stall-gpu-rank)", step);
    TL_CU(cuLaunchHostFunc, (w->comm_stream, trainloop_gpu_stall, NULL));
}

/* --stall-split-rank: the same stall on the split communicator's own stream, before
 * its first op of the step; the world stream runs on. */
void tl_enqueue_split_stall(struct tl_worker *w, int step)
{
    tl_note(" step %d: split stream stalled before its first op (--stall-split-rank)", step);
    TL_CU(cuLaunchHostFunc, (w->tp_stream, trainloop_gpu_stall, NULL));
}

/*
 * --late-gpu-rank: a straggler. A kernel of --late-gpu-ms on the communication
 * stream, after the step's compute and before its first collective, on every
 * step: this rank's GPU reaches each step's first collective that much later
 * than its peers', and they wait for it there.
 */
__attribute__((noinline)) void CUDA_CB trainloop_gpu_late(void *arg)
{
    long ms = (long)arg;
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

void tl_enqueue_gpu_late(struct tl_worker *w)
{
    TL_CU(cuLaunchHostFunc,
          (w->comm_stream, trainloop_gpu_late, (void *)(long)w->p->opt.late_gpu_ms));
}

/* atexit handler: lets any stalled stream go. */
void tl_release_gpu_stalls(void)
{
    atomic_store(&g_release_stalls, 1);
}
