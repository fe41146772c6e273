/*
 * group_sim: one rank; a group of one AllReduce ended by ncclGroupSimulateEnd
 * (which, on a blocking communicator, only estimates the group and runs
 * nothing), then `n` plain AllReduce calls, each waited for. Exits 0 when every
 * call succeeded. Under the shim with NCCLGUARD_DUMP_AT_EXIT=1 the dump shows
 * how each op was followed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "one_rank.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5;
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 64, &comm)) return 2;
    void *p = (void *)buf;
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    if (ncclGroupStart() || ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s) ||
        ncclGroupSimulateEnd(&info))
        return 3;
    for (int i = 0; i < n; i++)
        if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s) || cuStreamSynchronize(s)) return 4;
    printf("group_sim: simulated %.1f us, then %d AllReduce\n", info.estimatedTime, n);
    return ncclCommDestroy(comm) ? 5 : 0;
}
