/*
 * comm_thread: one rank of a job whose NCCL calls come from a communication
 * thread, as a framework's reducer does: the main thread hands each step to the
 * thread "comm" through a condition variable and waits for it to come back.
 * Run under tests/apps/launch (RANK, WORLD_SIZE, LAUNCH_RDZV_DIR, LAUNCH_RUN_ID).
 *
 *   comm_thread STEPS [HANG_RANK HANG_STEP]
 *
 * Rank HANG_RANK's main thread blocks in job_stuck_in_main before HANG_STEP; its
 * comm thread then waits idle on the condition variable while the other ranks
 * wait in the AllReduce. The verdict must show both threads of that rank.
 */
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int posted, finished, quit;
static CUstream stream;
static CUdeviceptr buf;
static ncclComm_t comm;
static CUcontext ctx;
static int rank;

static void die(const char *what)
{
    fprintf(stderr, "comm_thread: rank %d: %s failed\n", rank, what);
    exit(2);
}

/* Rank 0 makes the id and publishes it (write, then rename); the others wait for it. */
static void unique_id(ncclUniqueId *id)
{
    const char *dir = getenv("LAUNCH_RDZV_DIR"), *run = getenv("LAUNCH_RUN_ID");
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/cuid-%s", dir ? dir : ".", run ? run : "x");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (rank == 0) {
        FILE *f;
        if (ncclGetUniqueId(id) || !(f = fopen(tmp, "wb")) || fwrite(id, sizeof *id, 1, f) != 1 ||
            fclose(f) || rename(tmp, path))
            die("publishing the unique id");
        return;
    }
    for (int i = 0; i < 6000 && access(path, R_OK); i++) usleep(10000);
    FILE *f = fopen(path, "rb");
    if (!f || fread(id, sizeof *id, 1, f) != 1) die("reading the unique id");
    fclose(f);
}

/* The communication thread: one AllReduce per step it is handed. */
static void *comm_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "comm");
    if (cuCtxSetCurrent(ctx)) die("cuCtxSetCurrent");
    for (int done = 0;; done++) {
        pthread_mutex_lock(&lock);
        while (posted == done && !quit) pthread_cond_wait(&cond, &lock);
        int stop = quit && posted == done;
        pthread_mutex_unlock(&lock);
        if (stop) return NULL;
        if (ncclAllReduce((void *)buf, (void *)buf, 1024, ncclFloat32, ncclSum, comm, stream))
            die("ncclAllReduce");
        if (cuStreamSynchronize(stream)) die("cuStreamSynchronize");
        pthread_mutex_lock(&lock);
        finished++;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
    }
}

/* Not inlined, so that the frame keeps its name. */
__attribute__((noinline)) static void job_stuck_in_main(void)
{
    for (;;) {
        sleep(1);
        __asm__ volatile("" ::: "memory");
    }
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    int hang_rank = argc > 3 ? atoi(argv[2]) : -1, hang_step = argc > 3 ? atoi(argv[3]) : 0;
    rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
    int world = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
    CUdevice dev;
    ncclUniqueId id;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&buf, 4096))
        die("the device");
    unique_id(&id);
    if (ncclCommInitRank(&comm, world, id, rank)) die("ncclCommInitRank");
    pthread_t t;
    if (pthread_create(&t, NULL, comm_main, NULL)) die("pthread_create");
    for (int step = 0; step < steps; step++) {
        if (rank == hang_rank && step == hang_step) {
            printf("comm_thread: rank %d hangs before step %d\n", rank, step);
            fflush(stdout);
            job_stuck_in_main();
        }
        pthread_mutex_lock(&lock);
        posted++;
        pthread_cond_broadcast(&cond);
        while (finished < posted) pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    quit = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    ncclCommDestroy(comm);
    printf("comm_thread: rank %d ok\n", rank);
    return 0;
}
