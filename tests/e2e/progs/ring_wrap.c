/*
 * ring_wrap: a one-rank job whose stream is held while it enqueues many more
 * ops than NCCLGUARD_RING records (half of them in groups of two), so that
 * records still in flight are overwritten. Then it releases the stream, waits,
 * and enqueues AFTER more ops on the same stream: their CUDA events must come
 * from the pool again (the dropped records returned theirs), which the
 * at-exit dump shows as completed ops with GPU times.
 * Usage: ring_wrap HELD AFTER. Exit 0 when every call succeeded.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

static int enqueue(int n, ncclComm_t comm, CUstream s, CUdeviceptr buf)
{
    for (int i = 0; i < n; i++) {
        void *p = (void *)buf;
        if (i % 4 < 2) { /* ops 0 and 1 of every four: alone */
            if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s)) return -1;
            continue;
        }
        if (ncclGroupStart() || ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s) ||
            ncclBroadcast(p, p, 4, ncclFloat, 0, comm, s) || ncclGroupEnd())
            return -1;
        i++; /* the group held two ops */
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) return 64;
    int held = atoi(argv[1]), after = atoi(argv[2]);
    alarm(60);
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 64, &comm)) return 2;
    static volatile int release;
    if (fakecuda_test_spin(s, &release) || enqueue(held, comm, s, buf)) return 3;
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    if (cuStreamSynchronize(s)) return 4;
    usleep(300 * 1000); /* the watchdog sees the held ops finish (or not) */
    if (enqueue(after, comm, s, buf) || cuStreamSynchronize(s)) return 5;
    usleep(500 * 1000); /* and the later ones */
    return ncclCommDestroy(comm) ? 6 : 0;
}
