/*
 * Fake NCCL: the profiler plugin is loaded and called as NCCL does
 * (docs/harness.md, "Profiler plugin"): by name, by path and from the global
 * scope, newest API version first; events in NCCL's order with a seqNumber
 * per collective type, Coll stopped once enqueued, KernelCh around the run;
 * the activation mask re-read at each event. The plugin is countprof
 * (tests/fakes/countprof.c), which writes a line per call.
 */
#include "test_fakenccl_util.h"

#include <check.h>

#include "check_main.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct args {
    ncclUniqueId id;
    char log[PATH_MAX];
    int version; /* the API version the plugin speaks, 0: no plugin loaded */
};

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static char *rank_trace(const struct args *a)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s.%d", a->log, (int)getpid());
    return fnt_read_file(path);
}

/* 3 AllReduce, 1 Broadcast, one group of Send and Recv; then destroy and read the trace. */
static void job_rank(int rank, int n, void *arg)
{
    const struct args *a = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, a->id, &s);
    float buf[64] = {0}, out[64];
    for (int i = 0; i < 3; i++)
        FNT_NCCL(ncclAllReduce(buf, out, 64, ncclFloat32, ncclSum, comm, s));
    FNT_NCCL(ncclBroadcast(buf, out, 64, ncclFloat32, 0, comm, s));
    FNT_NCCL(ncclGroupStart());
    FNT_NCCL(ncclSend(buf, 64, ncclFloat32, 1 - rank, comm, s));
    FNT_NCCL(ncclRecv(out, 64, ncclFloat32, 1 - rank, comm, s));
    FNT_NCCL(ncclGroupEnd());
    fnt_sync(s);
    FNT_NCCL(ncclCommDestroy(comm));
    char *t = rank_trace(a);
    if (!a->version) {
        FNT_CHECK(!t, "no plugin was to be loaded, but the trace has: %s", t ? t : "");
        return;
    }
    FNT_CHECK(t, "no trace from the plugin");
    char want[128];
    snprintf(want, sizeof want, "init rank=%d nranks=2", rank);
    FNT_CHECK(strstr(t, want), "init with rank and size: %s", t);
    /* v5 on: the API event is the parent, the Group the parentGroup; v4: the Group is
     * the parent. The data type by NCCL's name (ncclDatatypeToString). */
    const char *parent = a->version >= 5 ? "CollApi group=Group" : "Group";
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want,
                 "start Coll func=AllReduce seq=%d rank=%d parent=%s dtype=ncclFloat32\n", i, rank,
                 parent);
        FNT_CHECK(strstr(t, want), "missing '%s' in %s", want, t);
    }
    snprintf(want, sizeof want,
             "start Coll func=Broadcast seq=0 rank=%d parent=%s dtype=ncclFloat32\n", rank, parent);
    FNT_CHECK(strstr(t, want), "seqNumber per type: missing '%s' in %s", want, t);
    snprintf(want, sizeof want, "start P2p func=Send peer=%d rank=%d parent=%s dtype=ncclFloat32\n",
             1 - rank, rank, a->version >= 5 ? "P2pApi group=Group" : "Group");
    FNT_CHECK(strstr(t, want), "missing '%s' in %s", want, t);
    FNT_CHECK(count(t, "start KernelCh parent=Coll\n") == 4, "4 KernelCh under Coll: %s", t);
    FNT_CHECK(count(t, "start KernelCh parent=P2p\n") == 2, "2 KernelCh under P2p: %s", t);
    FNT_CHECK(count(t, "state KernelCh state=22\n") == 6, "6 KernelChStop: %s", t);
    FNT_CHECK(count(t, "start Group parent=-\n") == 5, "one Group per launch: %s", t);
    if (a->version >= 5) {
        FNT_CHECK(count(t, "start GroupApi parent=-\n") == 5, "5 GroupApi: %s", t);
        /* one ungrouped call, in NCCL's order; Coll ends enqueued, before its kernel runs */
        const char *first = "start GroupApi parent=-\nstart CollApi func=AllReduce "
                            "parent=GroupApi\nstart Group parent=-\n";
        FNT_CHECK(strstr(t, first), "API events first: %s", t);
        const char *enq = strstr(t, "start KernelLaunch parent=Group\nstop KernelLaunch\n"
                                    "stop Coll\nstop Group\n");
        const char *k = strstr(t, "start KernelCh");
        FNT_CHECK(enq && k && enq < k, "Coll stops at enqueue, before KernelCh: %s", t);
    } else {
        FNT_CHECK(!strstr(t, "Api"), "v4 has no API events: %s", t);
    }
    FNT_CHECK(strstr(t, "finalize\n"), "finalize at destroy: %s", t);
    free(t);
}

static char dir[256];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "fakeprof");
}

static void teardown(void)
{
    ng_check_rmtree(dir);
}

static struct args *prepare(const char *plugin, int version)
{
    struct args *a = fnt_shared(sizeof *a);
    a->id = fnt_unique_id();
    a->version = version;
    snprintf(a->log, sizeof a->log, "%s/trace", dir);
    setenv("COUNTPROF_LOG", a->log, 1);
    if (plugin)
        setenv("NCCL_PROFILER_PLUGIN", plugin, 1);
    else
        unsetenv("NCCL_PROFILER_PLUGIN");
    return a;
}

/* The fakes' folder, where the plugins are built next to libnccl.so.2. */
static void fakes_path(const char *lib, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(out, cap, "%s/../../fakes/%s", exe, lib);
}

/*
 * A plugin given by name is found through the run path of libnccl.so.2 ($ORIGIN, the fakes'
 * folder). Under ASan, dlopen is called from the sanitizer's runtime, which has no run path:
 * there the library is loaded first (RTLD_LOCAL, so not into the global scope) and the
 * name then finds it by its soname. Without a sanitizer this changes nothing of the lookup.
 */
static void findable(const char *lib)
{
    char path[PATH_MAX + 64];
    fakes_path(lib, path, sizeof path);
#if defined(__SANITIZE_ADDRESS__)
    ck_assert(dlopen(path, RTLD_NOW | RTLD_LOCAL));
#endif
}

NG_TEST(short_name_gets_the_prefix_and_v5)
{
    findable("libnccl-profiler-count.so");
    struct args *a = prepare("count", 5);
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
}
END_TEST

/* The plugin's init runs inside the creation: a nonblocking communicator is not ready before
 * init returned, however long it takes (init.cc: initTransportsRank, then initState). */
static void slow_init_rank(int rank, int n, void *arg)
{
    const struct args *a = arg;
    (void)fnt_setup_rank(rank);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, a->id, rank, &config);
    FNT_CHECK(r == ncclSuccess || r == ncclInProgress, "init: %d", r);
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) FNT_NCCL(ncclCommGetAsyncError(comm, &state));
    FNT_CHECK(state == ncclSuccess, "creation: %d", state);
    char *t = rank_trace(a);
    FNT_CHECK(t && strstr(t, "init rank=0 nranks=1"), "ready before the plugin's init: %s",
              t ? t : "no trace");
    free(t);
    FNT_NCCL(ncclCommDestroy(comm));
}

NG_TEST(init_runs_before_the_communicator_is_ready)
{
    findable("libnccl-profiler-count.so");
    struct args *a = prepare("count", 5);
    setenv("COUNTPROF_INIT_SLEEP_MS", "300", 1);
    ck_assert_int_eq(fnt_run(1, slow_init_rank, a), 0);
}
END_TEST

NG_TEST(newest_version_first_v6)
{
    findable("libnccl-profiler-count6.so");
    struct args *a = prepare("count6", 6);
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
}
END_TEST

NG_TEST(path_and_fallback_to_v4)
{
    char path[PATH_MAX + 64];
    fakes_path("libnccl-profiler-count4.so", path, sizeof path);
    struct args *a = prepare(path, 4);
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
}
END_TEST

NG_TEST(static_plugin_is_the_global_scope)
{
    char path[PATH_MAX + 64];
    fakes_path("libnccl-profiler-count.so", path, sizeof path);
    ck_assert(dlopen(path, RTLD_NOW | RTLD_GLOBAL));
    struct args *a = prepare("STATIC_PLUGIN", 5);
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
}
END_TEST

NG_TEST(none_and_unset_load_nothing)
{
    struct args *a = prepare("none", 0);
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
    a = prepare(NULL, 0); /* libnccl-profiler.so: not there */
    ck_assert_int_eq(fnt_run(2, job_rank, a), 0);
}
END_TEST

/* Mask: CollApi only, widened by the plugin at its 6th start (the 3rd call's CollApi). */
static void widen_rank(int rank, int n, void *arg)
{
    const struct args *a = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, a->id, &s);
    float buf[8] = {0}, out[8];
    for (int i = 0; i < 4; i++) FNT_NCCL(ncclAllReduce(buf, out, 8, ncclFloat32, ncclSum, comm, s));
    fnt_sync(s);
    FNT_NCCL(ncclCommDestroy(comm));
    char *t = rank_trace(a);
    FNT_CHECK(t, "no trace");
    FNT_CHECK(count(t, "start CollApi") == 4, "CollApi for each call: %s", t);
    FNT_CHECK(count(t, "start Group parent") == 2, "Group only once widened: %s", t);
    FNT_CHECK(!strstr(t, "seq=0") && !strstr(t, "seq=1 "), "no Coll before the widening: %s", t);
    FNT_CHECK(strstr(t, "func=AllReduce seq=2 ") && strstr(t, "func=AllReduce seq=3 "),
              "Coll after it, seqNumber counted all along: %s", t);
    free(t);
}

NG_TEST(mask_is_read_again_at_each_event)
{
    findable("libnccl-profiler-count.so");
    struct args *a = prepare("count", 5);
    setenv("COUNTPROF_MASK", "0x200", 1);
    setenv("COUNTPROF_WIDEN", "6", 1);
    ck_assert_int_eq(fnt_run(2, widen_rank, a), 0);
}
END_TEST

int main(void)
{
    return ng_check_run(
        ng_check_fixture_suite("fakenccl_profiler", "profiler", 120, setup, teardown, NULL));
}
