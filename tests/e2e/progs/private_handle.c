/*
 * private_handle: calls NCCL the way vLLM's pynccl does, through a private
 * handle: dlopen("libnccl.so.2", RTLD_LOCAL) and dlsym on that handle, which
 * searches that library and its dependencies, never a preloaded one. Runs
 * argv[1] AllReduce calls on a communicator of one rank; the program itself
 * links no NCCL. Exit 0 when every call succeeded.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef ncclResult_t (*uid_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*ar_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);

/* Rank 0 publishes the id in dir (by rename: never half written); the others wait for it. */
static int share_id(ncclUniqueId *id, int rank, const char *dir)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/private_handle.id", dir);
    if (rank == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) || rename(tmp, path)) return -1;
        return 0;
    }
    for (int waited = 0; waited < 30000; waited += 10) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            return got == 1 ? 0 : -1;
        }
        usleep(10000);
    }
    return -1;
}

__attribute__((noinline)) static void private_stall(void)
{
    for (;;) pause();
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5;
    int hang_rank = argc > 3 ? atoi(argv[2]) : -1, hang_call = argc > 3 ? atoi(argv[3]) : -1;
    const char *ws = getenv("WORLD_SIZE"), *rk = getenv("RANK"), *dir = getenv("LAUNCH_RDZV_DIR");
    int nranks = ws && dir ? atoi(ws) : 1, rank = nranks > 1 && rk ? atoi(rk) : 0;
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 3;
    uid_fn get_uid = (uid_fn)dlsym(h, "ncclGetUniqueId");
    init_fn init = (init_fn)dlsym(h, "ncclCommInitRank");
    ar_fn all_reduce = (ar_fn)dlsym(h, "ncclAllReduce");
    destroy_fn destroy = (destroy_fn)dlsym(h, "ncclCommDestroy");
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr buf;
    ncclUniqueId id;
    ncclComm_t comm;
    if (!get_uid || !init || !all_reduce || !destroy || cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&buf, 64))
        return 2;
    memset(&id, 0, sizeof id);
    if ((rank == 0 && get_uid(&id)) || (nranks > 1 && share_id(&id, rank, dir)) ||
        init(&comm, nranks, id, rank))
        return 2;
    for (int i = 0; i < n; i++)
        if (rank == hang_rank && i == hang_call)
            private_stall();
        else if (all_reduce((void *)buf, (void *)buf, 16, ncclFloat32, ncclSum, comm, s))
            return 2;
    if (cuStreamSynchronize(s) || destroy(comm)) return 2;
    const char *env_plugin = getenv("NCCL_ENV_PLUGIN");
    printf("private_handle: NCCL_ENV_PLUGIN %s\n", env_plugin ? env_plugin : "unset");
    printf("private_handle: ok\n");
    return 0;
}
