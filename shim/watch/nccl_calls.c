/* nccl_calls.c: see nccl_calls.h. */
#include "watch/nccl_calls.h"

static struct ng_nccl_calls calls;

void ncclguard_nccl_calls_set(const struct ng_nccl_calls *c)
{
    calls = *c;
}

const struct ng_nccl_calls *ncclguard_nccl_calls(void)
{
    return &calls;
}
