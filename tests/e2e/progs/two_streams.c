/*
 * two_streams: one rank, one communicator, two streams. Stream s1 is held by a
 * kernel that spins until released; an AllReduce goes on s1 behind it, then
 * another on s2. NCCL runs a communicator's kernels one after another through
 * its internal stream, so the op on s2 cannot start before the one on s1 ends:
 * it waits, although nothing on s2 is in its way. The process holds s1 for
 * `secs` seconds (for the shim's timeout and dump), then lets go and exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 3;
    CUstream s1, s2;
    CUdeviceptr buf;
    ncclComm_t comm;
    static volatile int release;
    if (one_rank_job(&s1, &buf, 64, &comm) || cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)) return 2;
    void *p = (void *)buf;
    if (fakecuda_test_spin(s1, &release) || ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s1) ||
        ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s2))
        return 3;
    sleep((unsigned)secs);
    release = 1;
    if (cuStreamSynchronize(s1) || cuStreamSynchronize(s2)) return 4;
    printf("two_streams: done\n");
    return ncclCommDestroy(comm) ? 5 : 0;
}
