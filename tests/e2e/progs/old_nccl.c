/*
 * An "older NCCL" for the missing-symbol test: a libnccl.so.2 that has only
 * ncclGetVersion (and pnccl aliases are absent too).
 */
#include <nccl.h>

__attribute__((visibility("default"))) ncclResult_t ncclGetVersion(int *version)
{
    *version = 21903;
    return ncclSuccess;
}
