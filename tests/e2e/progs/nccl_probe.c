/*
 * nccl_probe: calls the NCCL entry points that answer without a GPU and prints
 * what they return, so a run with the shim can be compared with a run without
 * it against the real NVIDIA libnccl.so.2 (tests/e2e/shim.sh).
 */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int version = -1;
    ncclResult_t r = ncclGetVersion(&version);
    printf("ncclGetVersion -> %d version=%d\n", r, version);

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    r = ncclGetUniqueId(&id);
    int nonzero = 0;
    for (size_t i = 0; i < sizeof id.internal; i++) nonzero += id.internal[i] != 0;
    printf("ncclGetUniqueId -> %d nonzero_bytes>0=%d\n", r, nonzero > 0);

    ncclComm_t comm = NULL;
    r = ncclCommInitRank(&comm, 1, id, 0);
    printf("ncclCommInitRank -> %d (%s) comm_null=%d\n", r, ncclGetErrorString(r), comm == NULL);
    printf("ncclGetLastError -> %s\n", ncclGetLastError(NULL));
    for (int i = 0; i <= (int)ncclNumResults; i++)
        printf("ncclGetErrorString(%d) -> %s\n", i, ncclGetErrorString((ncclResult_t)i));
    return 0;
}
