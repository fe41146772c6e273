/*
 * Fake NCCL: the env plugin is loaded and asked as NCCL 2.28.9 does
 * (docs/harness.md, "Env plugin"): NCCL_ENV_PLUGIN names it, ncclEnvPlugin_v1
 * is found, init gets NCCL's version, and every NCCL variable the library
 * reads is the plugin's answer, even against the process environment. The
 * plugin is envplug (tests/fakes/envplug.c), which logs each call.
 */
#include "test_fakenccl_util.h"

#include <check.h>

#include "check_main.h"
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct args {
    ncclUniqueId id;
    char dir[256];
};

static char dir[256];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "fakeenv");
}

static void teardown(void)
{
    ng_check_rmtree(dir);
}

/* Loads a library of the fakes' folder into this process (RTLD_LOCAL), so that a later
 * dlopen by its name finds it by soname under ASan too (see test_fakenccl_profiler.c). */
static void findable(const char *lib)
{
#if defined(__SANITIZE_ADDRESS__)
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, sizeof path, "%s/../../fakes/%s", exe, lib);
    ck_assert(dlopen(path, RTLD_NOW | RTLD_LOCAL));
#else
    (void)lib;
#endif
}

static void rank_fn(int rank, int n, void *arg)
{
    const struct args *a = arg;
    CUstream s;
    ncclComm_t comm = fnt_join(rank, n, a->id, &s);
    float buf[8] = {0}, out[8];
    FNT_NCCL(ncclAllReduce(buf, out, 8, ncclFloat32, ncclSum, comm, s));
    fnt_sync(s);
    FNT_NCCL(ncclCommDestroy(comm));
}

static struct args *prepare(void)
{
    struct args *a = fnt_shared(sizeof *a);
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    char log[300];
    snprintf(log, sizeof log, "%s/env.log", dir);
    setenv("ENVPLUG_LOG", log, 1);
    snprintf(log, sizeof log, "%s/trace", dir);
    setenv("COUNTPROF_LOG", log, 1);
    return a;
}

static char *read_in(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fnt_read_file(path);
}

/* The environment says no profiler; the env plugin says "count": NCCL obeys the plugin. */
NG_TEST(every_read_is_the_plugins_answer)
{
    findable("libnccl-env-test.so");
    findable("libnccl-profiler-count.so");
    struct args *a = prepare();
    setenv("NCCL_ENV_PLUGIN", "test", 1);
    setenv("NCCL_PROFILER_PLUGIN", "none", 1);
    setenv("ENVPLUG_FORCE", "NCCL_PROFILER_PLUGIN=count", 1);
    a->id = fnt_unique_id();
    ck_assert_int_eq(fnt_run(2, rank_fn, a), 0);
    char *log = read_in("env.log");
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strstr(log, " init 2.28.9\n"), "init with NCCL's version: %s", log);
    ck_assert_msg(strstr(log, " get NCCL_PROFILER_PLUGIN\n"), "%s", log);
    ck_assert_msg(strstr(log, " get NCCL_COMM_BLOCKING\n"), "%s", log);
    ck_assert_msg(strstr(log, " get NCCL_DEBUG\n"), "%s", log);
    ck_assert_msg(!strstr(log, "NCCL_ENV_PLUGIN"), "its own name is read with getenv: %s", log);
    ck_assert_msg(!strstr(log, "FAKENCCL"), "the fake's own knobs are not NCCL's: %s", log);
    free(log);
    /* the profiler the plugin named was loaded, in each rank */
    int traces = 0;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        char *t = strncmp(e->d_name, "trace.", 6) ? NULL : read_in(e->d_name);
        if (t && strstr(t, "start Coll func=AllReduce seq=0")) traces++;
        free(t);
    }
    closedir(d);
    ck_assert_int_eq(traces, 2);
}
END_TEST

NG_TEST(none_means_getenv)
{
    struct args *a = prepare();
    setenv("NCCL_ENV_PLUGIN", "none", 1);
    setenv("ENVPLUG_FORCE", "NCCL_PROFILER_PLUGIN=count", 1);
    unsetenv("NCCL_PROFILER_PLUGIN");
    a->id = fnt_unique_id();
    ck_assert_int_eq(fnt_run(2, rank_fn, a), 0);
    char *log = read_in("env.log");
    ck_assert_msg(!log, "no env plugin was to be loaded: %s", log ? log : "");
}
END_TEST

int main(void)
{
    return ng_check_run(
        ng_check_fixture_suite("fakenccl_envplugin", "envplugin", 120, setup, teardown, NULL));
}
