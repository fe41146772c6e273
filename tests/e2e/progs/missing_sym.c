/*
 * missing_sym: calls an entry point that the NCCL behind the shim lacks,
 * twice, and one that it has. Prints the results; run against old_nccl.
 */
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    int version = 0;
    ncclResult_t v = ncclGetVersion(&version);
    ncclComm_t out = NULL;
    ncclResult_t a = ncclCommShrink(NULL, NULL, 0, &out, NULL, 0);
    ncclResult_t b = ncclCommShrink(NULL, NULL, 0, &out, NULL, 0);
    printf("version %d -> %d; shrink -> %d, %d\n", version, v, a, b);
    return 0;
}
