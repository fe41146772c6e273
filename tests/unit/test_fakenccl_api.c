/*
 * Fake NCCL: the library surface. NCCL's error strings and last-error
 * texts, argument checks, exported symbols (pncclX strong, ncclX weak,
 * nothing else but the fakenccl_ hooks), the NCCL_* names in its read-only
 * data, FAKENCCL_NOOP, ncclGroupSimulateEnd, NCCL_DEBUG, and the call log
 * (identical across two runs of one program despite ASLR).
 */
#include "test_fakenccl_util.h"

#include "fakecuda.h"
#include "fakenccl.h"

#include <check.h>

#include "check_main.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *lib_path(void)
{
    static Dl_info info;
    ck_assert(dladdr((void *)pncclGetVersion, &info) && info.dli_fname);
    return info.dli_fname;
}

NG_TEST(error_strings_are_nccls)
{
    static const char *const want[] = {
        "no error",
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "internal error - please report this issue to the NCCL developers",
        "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "remote process exited or there was a network error",
        "NCCL operation in progress"};
    for (int r = 0; r < ncclNumResults; r++)
        ck_assert_str_eq(ncclGetErrorString((ncclResult_t)r), want[r]);
    ck_assert_str_eq(ncclGetErrorString(ncclNumResults), "unknown result code");
    ck_assert_str_eq(ncclGetLastError(NULL), "");
}
END_TEST

NG_TEST(version_and_unique_ids)
{
    int v = 0;
    ncclUniqueId a, b;
    ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
    ck_assert_int_eq(v, 22809);
    ck_assert_int_eq(ncclGetVersion(NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclGetUniqueId(&a), ncclSuccess);
    ck_assert_int_eq(ncclGetUniqueId(&b), ncclSuccess);
    ck_assert_int_eq(memcmp(a.internal, "fakenccl", 8), 0);
    ck_assert_int_ne(memcmp(&a, &b, sizeof a), 0);
    ck_assert_int_eq(ncclGetUniqueId(NULL), ncclInvalidArgument);
    ck_assert_str_eq(ncclGetLastError(NULL), "GetUniqueId : out argument is NULL");
}
END_TEST

#define EXPECT(call, result, text)                                                              \
    do {                                                                                        \
        ck_assert_int_eq((call), (result));                                                     \
        ck_assert_msg(strstr(ncclGetLastError(NULL), (text)) != NULL,                           \
                      "%s: last error '%s' lacks '%s'", #call, ncclGetLastError(NULL), (text)); \
    } while (0)

NG_TEST(arguments_are_checked_like_nccl)
{
    ncclUniqueId id = fnt_unique_id(), id2 = fnt_unique_id();
    ncclComm_t comm, out;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t st;
    int v = 1, r, excl[2] = {0, 5};
    CUstream s;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    EXPECT(ncclCommInitRank(&comm, 2, id, 3), ncclInvalidArgument, "Invalid rank requested : 3/2");
    EXPECT(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "newcomm argument is NULL");
    cfg.magic = 0;
    EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument,
           "ncclConfig_t argument not initialized");
    cfg = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 2;
    EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument,
           "Invalid config blocking attribute value 2");
    ck_assert_int_eq(ncclCommInitRank(&comm, 1, id2, 0), ncclSuccess);
    ck_assert_int_eq(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    EXPECT(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, NULL, s), ncclInvalidArgument,
           "AllReduce : comm argument is NULL");
    EXPECT(ncclAllReduce(&v, &v, 1, ncclNumTypes, ncclSum, comm, s), ncclInvalidArgument,
           "AllReduce : invalid type 12");
    EXPECT(ncclAllReduce(&v, &v, 1, ncclInt32, (ncclRedOp_t)-1, comm, s), ncclInvalidArgument,
           "AllReduce : invalid reduction operation -1");
    EXPECT(ncclAllReduce(&v, &v, 1, ncclInt32, ncclNumOps, comm, s), ncclInvalidArgument,
           "reduction operation 5 unknown to this communicator");
    EXPECT(ncclBroadcast(&v, &v, 1, ncclInt32, 1, comm, s), ncclInvalidArgument,
           "Broadcast : invalid root 1 (root should be in the 0..1 range)");
    EXPECT(ncclSend(&v, 1, ncclInt32, 2, comm, s), ncclInvalidArgument, "Send : invalid root 2");
    EXPECT(ncclAllReduce(NULL, &v, 1, ncclInt32, ncclSum, comm, s), ncclInvalidArgument,
           "AllReduce : sendbuff is not a valid pointer");
    EXPECT(ncclCommCount(comm, NULL), ncclInvalidArgument, "CommCount : count argument is NULL");
    EXPECT(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument, "asyncError argument is NULL");
    EXPECT(ncclCommRevoke(comm, 1), ncclInvalidArgument, "revokeFlags 1");
    EXPECT(ncclCommSplit(comm, -5, 0, &out, NULL), ncclInvalidArgument, "invalid color -5");
    EXPECT(ncclCommShrink(comm, excl, 1, &out, NULL, 0), ncclInvalidArgument,
           "excludeRanksList entry 0 is invalid");
    EXPECT(ncclCommShrink(comm, excl + 1, 1, &out, NULL, 0), ncclInvalidArgument,
           "excludeRanksList entry 5 is invalid");
    EXPECT(ncclCommShrink(comm, excl, 0, &out, NULL, 0), ncclInvalidArgument,
           "excludeRanksCount 0");
    EXPECT(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "operator is a NCCL builtin.");
    EXPECT(ncclRedOpDestroy((ncclRedOp_t)9, comm), ncclInvalidArgument, "operator is garbage.");
    EXPECT(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
    /* NULL handles: destroy, abort, finalize and revoke are no-ops, as in NCCL */
    ck_assert_int_eq(ncclCommDestroy(NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommAbort(NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommFinalize(NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommRevoke(NULL, 0), ncclSuccess);
    /* an error inside a group: returned by the call and by ncclGroupEnd, nothing launched */
    int out1 = -1;
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&v, &out1, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&v, &out1, 1, 99, ncclSum, comm, s), ncclInvalidArgument);
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidArgument);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(out1, -1);
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &st), ncclSuccess);
    ck_assert_int_eq(st, ncclSuccess);
    ck_assert_int_eq(ncclCommUserRank(comm, &r), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

NG_TEST(group_simulate_end_launches_nothing)
{
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER, bad = NCCL_SIM_INFO_INITIALIZER;
    int v = 3, out = -1;
    CUstream s;
    ncclComm_t comm = fnt_solo_comm(&s);
    ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
    bad.magic = 0;
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
    ck_assert_int_eq(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclSuccess);
    ck_assert(sim.estimatedTime > 0);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(out, -1);
    ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage); /* the simulated end closed the group */
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

NG_TEST(only_nccl_names_are_exported)
{
    char cmd[512], line[512];
    int strong = 0, weak = 0, hooks = 0;
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", lib_path());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[256];
        ck_assert_int_eq(sscanf(line, "%63s %7s %255s", addr, type, name), 3);
        if (!strncmp(name, "pnccl", 5) && !strcmp(type, "T")) {
            strong++;
            char *weak_name = name + 1;
            ck_assert_msg(dlsym(RTLD_DEFAULT, weak_name) != NULL, "%s has no alias", name);
        } else if (!strncmp(name, "nccl", 4) && !strcmp(type, "W")) {
            weak++;
        } else if (!strncmp(name, "fakenccl_", 9) && !strcmp(type, "T")) {
            hooks++;
        } else {
            ck_abort_msg("unexpected export: %s", line);
        }
    }
    pclose(p);
    ck_assert_int_eq(strong, 41); /* the whole 2.28 API of NCCL-NOTES.md */
    ck_assert_int_eq(weak, 41);
    ck_assert_int_eq(hooks, 1);
}
END_TEST

/* The environment audit takes the NCCL variables a library reads from its read-only data. */
NG_TEST(read_only_data_names_only_the_variables_read)
{
    char *data = NULL;
    size_t n = 0;
    FILE *f = fopen(lib_path(), "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = (size_t)ftell(f);
    rewind(f);
    data = malloc(n + 1);
    ck_assert_uint_eq(fread(data, 1, n, f), n);
    fclose(f);
    bool blocking = false, debug = false, profiler = false, envplugin = false;
    for (size_t i = 0; i + 5 < n; i++) {
        if (memcmp(data + i, "NCCL_", 5)) continue;
        size_t k = i + 5;
        while (k < n && ((data[k] >= 'A' && data[k] <= 'Z') || (data[k] >= '0' && data[k] <= '9') ||
                         data[k] == '_'))
            k++;
        if (k == i + 5) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(k - i), data + i);
        if (!strcmp(name, "NCCL_COMM_BLOCKING"))
            blocking = true;
        else if (!strcmp(name, "NCCL_DEBUG"))
            debug = true;
        else if (!strcmp(name, "NCCL_PROFILER_PLUGIN"))
            profiler = true;
        else if (!strcmp(name, "NCCL_ENV_PLUGIN"))
            envplugin = true;
        else
            ck_abort_msg("unexpected NCCL variable name in the library: %s", name);
        i = k;
    }
    ck_assert(blocking && debug && profiler && envplugin);
    free(data);
}
END_TEST

NG_TEST(noop_enqueues_nothing)
{
    setenv("FAKENCCL_NOOP", "1", 1); /* before the first NCCL call, which reads it */
    CUstream s;
    volatile int release = 0;
    int v = 3, out = -1;
    ncclComm_t comm = fnt_solo_comm(&s);
    ck_assert_int_eq(fakecuda_test_spin(s, &release), CUDA_SUCCESS);
    ck_assert_int_eq(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, NULL, s), ncclSuccess);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(out, -1);
    ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

NG_TEST(nccl_debug_warn_prints_warnings)
{
    setenv("NCCL_DEBUG", "WARN", 1);
    fnt_stderr_begin();
    ncclResult_t r = ncclGroupEnd();
    char *err = fnt_stderr_end();
    ck_assert_int_eq(r, ncclInvalidUsage);
    ck_assert_ptr_nonnull(strstr(err, "NCCL WARN ncclGroupEnd: not in a group call."));
    free(err);
}
END_TEST

/* ---- call log ---- */

/* One call of (nearly) every API, in a fixed order; run in a fresh exec'd process. */
#define STEP(x)                                                   \
    do {                                                          \
        if (x) {                                                  \
            fprintf(stderr, "calllog scenario: %s failed\n", #x); \
            return 1;                                             \
        }                                                         \
    } while (0)

static int calllog_scenario(void)
{
    ncclUniqueId id;
    ncclComm_t comm, child, all[2];
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    ncclResult_t st;
    ncclRedOp_t op;
    ncclWindow_t win;
    CUstream s;
    int version, count, *a = malloc(64), *b = malloc(4096);
    void *dev, *reg;
    float scalar = 2;
    cfg.commName = "logged";
    STEP(ncclGetVersion(&version));
    STEP(ncclGetUniqueId(&id));
    STEP(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg)); /* makes device 0 current */
    STEP(cuStreamCreate(&s, 0));
    STEP(ncclCommCount(comm, &count));
    STEP(ncclAllReduce(a, b, 4, ncclFloat32, ncclSum, comm, s));
    STEP(ncclGroupStart() || ncclSend(a, 2, ncclInt32, 0, comm, s) ||
         ncclRecv(b, 2, ncclInt32, 0, comm, s) || ncclGroupEnd());
    STEP(ncclBroadcast(a, b, 1, ncclInt8, 0, comm, CU_STREAM_LEGACY));
    STEP(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    STEP(ncclReduce(a, b, 3, ncclFloat32, op, 0, comm, s) || ncclRedOpDestroy(op, comm));
    STEP(ncclCommSplit(comm, 0, 0, &child, NULL) || ncclCommDestroy(child));
    STEP(ncclMemAlloc(&dev, 256) || ncclCommRegister(comm, dev, 256, &reg) ||
         ncclCommDeregister(comm, reg) || ncclMemFree(dev));
    STEP(ncclCommWindowRegister(comm, b, 4096, &win, 0) || ncclCommWindowDeregister(comm, win));
    STEP(ncclGroupStart() || ncclAlltoAll(a, b, 1, ncclInt32, comm, s) ||
         ncclGroupSimulateEnd(&sim));
    STEP(ncclCommGetAsyncError(comm, &st));
    STEP(ncclAllReduce(a, b, 1, ncclInt32, ncclSum, NULL, s) != ncclInvalidArgument);
    ncclGetLastError(comm);
    ncclGetErrorString(ncclRemoteError);
    STEP(ncclCommInitAll(all, 2, NULL) || ncclCommDestroy(all[0]) || ncclCommDestroy(all[1]));
    STEP(cuStreamSynchronize(s));
    STEP(ncclCommFinalize(comm) || ncclCommDestroy(comm));
    return 0;
}

/* Runs this test program as "calllog-child" with the given environment; returns its status. */
static int run_child(const char *log, const char *rank)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("FAKENCCL_CALL_LOG", log, 1);
        if (rank)
            setenv("RANK", rank, 1);
        else
            unsetenv("RANK");
        execl("/proc/self/exe", "test_fakenccl_api", "calllog-child", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Finds the one file in dir whose name starts with prefix; returns its contents. */
static char *read_log(const char *dir, const char *prefix)
{
    char cmd[256], path[256] = "";
    snprintf(cmd, sizeof cmd, "ls %s/%s* 2>/dev/null", dir, prefix);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(path, sizeof path, p));
    path[strcspn(path, "\n")] = '\0';
    pclose(p);
    return fnt_read_file(path);
}

NG_TEST(call_log_is_identical_across_runs)
{
    char dir[64], log[128];
    ng_check_tmpdir(dir, sizeof dir, "fnt-log");
    snprintf(log, sizeof log, "%s/run1-%%r-%%p.log", dir);
    ck_assert_int_eq(run_child(log, "7"), 0);
    snprintf(log, sizeof log, "%s/run2-%%r-%%p.log", dir);
    ck_assert_int_eq(run_child(log, NULL), 0);
    char *one = read_log(dir, "run1-7-"), *two = read_log(dir, "run2-x-");
    ck_assert_ptr_nonnull(one);
    ck_assert_ptr_nonnull(two);
    ck_assert_str_eq(one, two);
    static const char *const lines[] = {
        "ncclGetVersion version=22809 -> 0 thread=",
        "ncclGetUniqueId uniqueId=id#0 -> 0 thread=",
        "ncclCommInitRankConfig comm=comm#0 nranks=1 commId=id#0 rank=0 config={size=",
        "commName=\"logged\"",
        "ncclCommCount comm=comm#0 count=1 -> 0 thread=",
        "ncclAllReduce sendbuff=buf#0 recvbuff=buf#1 count=4 datatype=7 op=0 comm=comm#0 "
        "stream=stream#0 -> 0 thread=",
        "ncclSend sendbuff=buf#0 count=2 datatype=2 peer=0 comm=comm#0 stream=stream#0 -> 0 thread=",
        "ncclBroadcast sendbuff=buf#0 recvbuff=buf#1 count=1 datatype=0 root=0 comm=comm#0 "
        "stream=legacy -> 0 thread=",
        "ncclRedOpCreatePreMulSum op=5 scalar=buf#2 datatype=7 residence=1 comm=comm#0 -> 0 thread=",
        "ncclCommSplit comm=comm#0 color=0 key=0 newcomm=comm#1 config=null -> 0 thread=",
        "ncclCommRegister comm=comm#0 buff=buf#3 size=256 handle=reg#0 -> 0 thread=",
        "ncclGroupSimulateEnd simInfo={estimatedTime=",
        "ncclCommGetAsyncError comm=comm#0 asyncError=0 -> 0 thread=",
        "ncclAllReduce sendbuff=buf#0 recvbuff=buf#1 count=1 datatype=2 op=0 comm=null "
        "stream=stream#0 -> 4 thread=",
        "ncclGetLastError comm=comm#0 -> \"AllReduce : comm argument is NULL\" thread=",
        "ncclGetErrorString result=6 -> \"remote process exited or there was a network error\" thread=",
        "ncclCommInitAll comm=[comm#2,comm#3] ndev=2 devlist=null -> 0 thread=",
        "ncclCommDestroy comm=comm#0 -> 0 thread="};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg(strstr(one, lines[i]) != NULL, "log lacks: %s\n--- log:\n%s", lines[i], one);
    ck_assert_msg(strstr(one, "0x7f") == NULL && strstr(one, "0x5") == NULL,
                  "an address leaked into the log");
    free(one);
    free(two);
    ck_assert(ng_check_rmtree(dir));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "calllog-child")) return calllog_scenario();
    return ng_check_run(ng_check_suite("fakenccl_api", "api", 120, ng_check_tests(), NULL));
}
