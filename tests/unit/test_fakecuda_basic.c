/*
 * test_fakecuda_basic.c: the fake libcuda.so.1 without streams doing work: initialisation,
 * devices, contexts and primary contexts, handle strictness, error strings, exported names
 * and cuGetProcAddress.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "test_fakecuda_util.h"

NG_TEST(test_calls_fail_before_cuinit)
{
    int n = -1, v = 0;
    const char *s = NULL;
    unsetenv("FAKECUDA_DEVICES");
    unsigned long loud = fakecuda_misuse_count();
    CU_IS(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUstream st;
    CU_IS(cuStreamCreate(&st, 0), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_uint_gt(fakecuda_misuse_count(), loud);
    /* these work before cuInit, as in the real driver */
    CU_OK(cuDriverGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    CU_OK(cuGetErrorName(CUDA_ERROR_NOT_READY, &s));
    ck_assert_str_eq(s, "CUDA_ERROR_NOT_READY");
    CU_IS(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 8);
}
END_TEST

NG_TEST(test_devices_follow_env)
{
    setenv("FAKECUDA_DEVICES", "3", 1);
    setenv("FAKECUDA_MEM_MB", "1024", 1);
    CU_OK(cuInit(0));
    int n = 0, cc = 0, bus = 0;
    CU_OK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 3);
    CUdevice d = -1;
    CU_OK(cuDeviceGet(&d, 2));
    ck_assert_int_eq(d, 2);
    CU_IS(cuDeviceGet(&d, 3), CUDA_ERROR_INVALID_DEVICE);
    char name[64], pci[32];
    CU_OK(cuDeviceGetName(name, sizeof name, 1));
    ck_assert_str_eq(name, "Fake GPU (ncclguard harness)");
    CU_OK(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    ck_assert_int_eq(cc, 9);
    CU_IS(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 2));
    CU_OK(cuDeviceGetPCIBusId(pci, sizeof pci, 2));
    unsigned parsed = 0;
    ck_assert_int_eq(sscanf(pci, "0000:%x:00.0", &parsed), 1);
    ck_assert_int_eq((int)parsed, bus);
    CUdevice back = -1;
    CU_OK(cuDeviceGetByPCIBusId(&back, pci));
    ck_assert_int_eq(back, 2);
    size_t total = 0;
    CU_OK(cuDeviceTotalMem(&total, 0));
    ck_assert_uint_eq(total, 1024ull << 20);
    CUuuid u0, u1;
    CU_OK(cuDeviceGetUuid(&u0, 0));
    CU_OK(cuDeviceGetUuid(&u1, 1));
    ck_assert_int_ne(memcmp(u0.bytes, u1.bytes, sizeof u0.bytes), 0);
}
END_TEST

NG_TEST(test_no_device)
{
    setenv("FAKECUDA_DEVICES", "0", 1);
    CU_IS(cuInit(0), CUDA_ERROR_NO_DEVICE);
    int n;
    CU_IS(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

NG_TEST(test_no_current_context_rejected)
{
    CU_OK(cuInit(0));
    CUcontext cur = (CUcontext)1;
    CU_OK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_null(cur);
    CUstream s;
    CUevent e;
    CUdeviceptr p;
    CUcontext c;
    CUdevice d;
    int flag = 0;
    unsigned long loud = fakecuda_misuse_count();
    CU_IS(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuMemAlloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuLaunchHostFunc(NULL, fct_set, &flag), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuStreamGetCtx(CU_STREAM_PER_THREAD, &c), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_uint_ge(fakecuda_misuse_count(), loud + 8); /* each one said so */
}
END_TEST

NG_TEST(test_context_stack)
{
    CUcontext a = fct_init_ctx(), b, cur, popped;
    CU_OK(cuCtxCreate(&b, NULL, 0, 1));
    CU_OK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, b);
    CUdevice d;
    CU_OK(cuCtxGetDevice(&d));
    ck_assert_int_eq(d, 1);
    CU_OK(cuCtxPopCurrent(&popped));
    ck_assert_ptr_eq(popped, b);
    CU_OK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    CU_OK(cuCtxPushCurrent(b));
    CU_OK(cuCtxSetCurrent(a)); /* replaces the top */
    CU_OK(cuCtxPopCurrent(&popped));
    ck_assert_ptr_eq(popped, a);
    CU_OK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    CU_OK(cuCtxSetCurrent(NULL)); /* pops */
    CU_OK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_null(cur);
    CU_IS(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    unsigned long long ida, idb;
    CU_OK(cuCtxGetId(a, &ida));
    CU_OK(cuCtxGetId(b, &idb));
    ck_assert_uint_ne(ida, idb);
    CU_OK(cuCtxGetDevice_v2(&d, b));
    ck_assert_int_eq(d, 1);
}
END_TEST

NG_TEST(test_destroyed_handles_rejected)
{
    CUcontext ctx = fct_init_ctx(), other;
    CUstream s = fct_stream(0);
    CUstream s2;
    CUevent e = fct_event(0);
    CU_OK(cuStreamDestroy(s));
    CU_IS(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventRecord(e, s), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventDestroy(e));
    CU_IS(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
    /* foreign pointers and handles of the wrong kind are recognised without a crash */
    int local = 0;
    CU_IS(cuStreamQuery((CUstream)&local), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventQuery((CUevent)(void *)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuStreamCreate(&s2, 0));
    CU_IS(cuEventQuery((CUevent)(void *)s2), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuCtxPushCurrent((CUcontext)(void *)s2), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    /* a destroyed context takes its streams and events with it */
    CU_OK(cuEventCreate(&e, 0));
    CU_OK(cuCtxCreate(&other, NULL, 0, 0));
    CU_OK(cuCtxDestroy(ctx));
    CU_IS(cuCtxDestroy(ctx), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuStreamQuery(s2), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    CUgraph g;
    CU_IS(cuGraphDestroy((CUgraph)(void *)&local), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuStreamEndCapture(s2, &g), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

NG_TEST(test_primary_context)
{
    CU_OK(cuInit(0));
    CUcontext p1, p2;
    unsigned flags;
    int active;
    CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    CU_OK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
    CU_OK(cuDevicePrimaryCtxRetain(&p1, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&p2, 0));
    ck_assert_ptr_eq(p1, p2);
    CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 1);
    ck_assert_uint_eq(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    CU_OK(cuCtxSetCurrent(p1));
    CUstream s = fct_stream(0);
    CU_IS(cuCtxDestroy(p1), CUDA_ERROR_INVALID_CONTEXT);
    CU_OK(cuDevicePrimaryCtxRelease(0));
    CU_OK(cuStreamQuery(s)); /* still retained once */
    CU_OK(cuDevicePrimaryCtxRelease(0));
    CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    CU_IS(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    CU_IS(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CUstream s2;
    CU_IS(cuStreamCreate(&s2, 0), CUDA_ERROR_INVALID_CONTEXT); /* p1 current, released */
    CU_OK(cuDevicePrimaryCtxRetain(&p2, 0));
    ck_assert_ptr_eq(p1, p2); /* one handle per device */
    CU_OK(cuStreamCreate(&s2, 0));
    CU_OK(cuStreamQuery(s2));
    CU_IS(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE); /* the old incarnation's stream */
    CU_OK(cuDevicePrimaryCtxReset(0));
    CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    CU_IS(cuStreamQuery(s2), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

NG_TEST(test_error_strings)
{
    const char *s = NULL;
    CU_OK(cuGetErrorName(CUDA_SUCCESS, &s));
    ck_assert_str_eq(s, "CUDA_SUCCESS");
    CU_OK(cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
    ck_assert_str_eq(s, "device not ready");
    CU_OK(cuGetErrorName(CUDA_ERROR_CAPTURED_EVENT, &s));
    ck_assert_str_eq(s, "CUDA_ERROR_CAPTURED_EVENT");
    CU_OK(cuGetErrorString(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &s));
    ck_assert_str_eq(s, "operation not permitted when stream is capturing");
    s = "x";
    CU_IS(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(s);
    int named = 0;
    for (int code = 0; code < 1000; code++) {
        const char *n = NULL, *t = NULL;
        if (cuGetErrorName((CUresult)code, &n) != CUDA_SUCCESS) continue;
        CU_OK(cuGetErrorString((CUresult)code, &t));
        ck_assert(strncmp(n, "CUDA_", 5) == 0);
        ck_assert(t && *t);
        named++;
    }
    ck_assert_int_ge(named, 100);
}
END_TEST

NG_TEST(test_exports_real_names_only)
{
    static const char *const want[] = {
        "cuInit",
        "cuCtxCreate_v4",
        "cuCtxCreate_v2",
        "cuCtxDestroy_v2",
        "cuCtxPushCurrent_v2",
        "cuCtxPopCurrent_v2",
        "cuDevicePrimaryCtxRelease_v2",
        "cuDevicePrimaryCtxReset_v2",
        "cuStreamDestroy_v2",
        "cuEventDestroy_v2",
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuStreamGetCtx",
        "cuStreamGetCtx_v2",
        "cuStreamGetCtx_ptsz",
        "cuStreamGetCtx_v2_ptsz",
        "cuEventElapsedTime",
        "cuEventElapsedTime_v2",
        "cuStreamBeginCapture_v2",
        "cuStreamBeginCapture_v2_ptsz",
        "cuGetProcAddress",
        "cuGetProcAddress_v2",
        "cuGraphInstantiateWithFlags",
        "cuGraphLaunch_ptsz",
        "cuEventRecord_ptsz",
        "cuLaunchHostFunc_ptsz",
        "cuStreamQuery_ptsz",
        "cuStreamSynchronize_ptsz",
        "cuMemcpyHtoD_v2_ptds",
        "cuMemsetD32_v2_ptds",
        "cuMemcpyDtoHAsync_v2_ptsz",
        "cuStreamGetCaptureInfo_v3",
        "cuThreadExchangeStreamCaptureMode",
        "fakecuda_test_kernel",
        "fakecuda_test_spin",
        "fakecuda_live_threads",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(dlsym(RTLD_DEFAULT, want[i]) != NULL, "%s is not exported", want[i]);
    static const char *const hidden[] = {"fc_enter", "fc_queue_push", "fc_complain",
                                         "fc_handle_new", "fc_cfg"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        ck_assert_msg(dlsym(RTLD_DEFAULT, hidden[i]) == NULL, "%s is exported", hidden[i]);
}
END_TEST

/* Resolves name through cuGetProcAddress_v2 and returns the pointer (NULL when none). */
static void *proc(const char *name, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult *st)
{
    void *fn = (void *)1;
    CU_OK(cuGetProcAddress(name, &fn, version, flags, st));
    return fn;
}

NG_TEST(test_get_proc_address_versions)
{
    CUdriverProcAddressQueryResult st;
    /* works before cuInit; the newest ABI at or before the version wins */
    ck_assert_ptr_eq(proc("cuInit", 13000, 0, &st), dlsym(RTLD_DEFAULT, "cuInit"));
    ck_assert_ptr_eq(proc("cuEventDestroy", 13000, 0, &st),
                     dlsym(RTLD_DEFAULT, "cuEventDestroy_v2"));
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    ck_assert_ptr_eq(proc("cuEventDestroy", 3000, 0, &st), dlsym(RTLD_DEFAULT, "cuEventDestroy"));
    ck_assert_ptr_eq(proc("cuStreamGetCtx", 12000, 0, &st), dlsym(RTLD_DEFAULT, "cuStreamGetCtx"));
    ck_assert_ptr_eq(proc("cuStreamGetCtx", 12050, 0, &st),
                     dlsym(RTLD_DEFAULT, "cuStreamGetCtx_v2"));
    ck_assert_ptr_eq(proc("cuEventElapsedTime", 12080, 0, &st),
                     dlsym(RTLD_DEFAULT, "cuEventElapsedTime_v2"));
    ck_assert_ptr_eq(proc("cuGraphInstantiate", 12000, 0, &st),
                     dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags"));
    ck_assert_ptr_eq(proc("cuCtxCreate", 13000, 0, &st), dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"));
    ck_assert_ptr_eq(proc("cuMemAlloc", 12000, 0, &st), dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    /* per-thread default stream variants, with fallback to the legacy export */
    ck_assert_ptr_eq(proc("cuStreamQuery", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                          &st),
                     dlsym(RTLD_DEFAULT, "cuStreamQuery_ptsz"));
    ck_assert_ptr_eq(proc("cuStreamQuery", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st),
                     dlsym(RTLD_DEFAULT, "cuStreamQuery"));
    ck_assert_ptr_eq(proc("cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                          &st),
                     dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
    ck_assert_ptr_eq(proc("cuEventQuery", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                          &st),
                     dlsym(RTLD_DEFAULT, "cuEventQuery"));
    /* unknown name, too old a version */
    ck_assert_ptr_null(proc("cuNoSuchThing", 12000, 0, &st));
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    ck_assert_ptr_null(proc("cuStreamGetId", 11000, 0, &st));
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    ck_assert_ptr_null(proc("cuMemAlloc_v2", 12000, 0, &st)); /* base names only */
    void *fn;
    CU_IS(cuGetProcAddress("cuInit", &fn, 13010, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuGetProcAddress("cuInit", &fn, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    /* the resolved pointer is callable and is the real thing */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))proc("cuInit", 12000, 0, &st);
    CU_OK(init(0));
}
END_TEST

static void CUDA_CB call_cuda_from_host_fn(void *arg)
{
    *(CUresult *)arg = cuStreamQuery(NULL);
}

NG_TEST(test_host_function_may_not_call_cuda)
{
    fct_init_ctx();
    CUresult seen = CUDA_SUCCESS;
    CUstream s = fct_stream(0);
    CU_OK(cuLaunchHostFunc(s, call_cuda_from_host_fn, &seen));
    CU_OK(cuStreamSynchronize(s));
    CU_IS(seen, CUDA_ERROR_NOT_PERMITTED);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakecuda_basic", "basic", 120, ng_check_tests(), NULL));
}
