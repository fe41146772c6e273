/*
 * env_after_start: sets NCCL_PROFILER_PLUGIN to argv[1] in main, after the
 * library constructors ran (as Python code setting os.environ would), then
 * runs one AllReduce on a communicator of one rank. Which profiler plugin NCCL
 * then loads says whose value held at NCCL's read time: the process's, or a
 * site policy's forced one (through the env plugin). Exit 0 when every call
 * succeeded.
 */
#include <stdio.h>
#include <stdlib.h>

#include "one_rank.h"

int main(int argc, char **argv)
{
    if (argc != 2) return 64;
    setenv("NCCL_PROFILER_PLUGIN", argv[1], 1);
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 64, &comm)) return 2;
    if (ncclAllReduce((void *)buf, (void *)buf, 16, ncclFloat32, ncclSum, comm, s) ||
        cuStreamSynchronize(s) || ncclCommDestroy(comm))
        return 2;
    printf("env_after_start: ok\n");
    return 0;
}
