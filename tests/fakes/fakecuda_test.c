/*
 * fakecuda_test.c: the test-only API declared in fakecuda.h (not part of CUDA).
 * The enqueue functions behave like any launch: ordered on their stream, captured into a
 * graph when the stream is capturing. Threads: any, except stream workers (like CUDA calls).
 */
#include "fakecuda_internal.h"

FC_API CUresult fakecuda_test_kernel(CUstream s, uint64_t duration_ns)
{
    FC_TRY(fc_enter("fakecuda_test_kernel"));
    struct fc_stream *st;
    FC_TRY(fc_stream_resolve(s, false, "fakecuda_test_kernel", &st));
    struct fc_work w = {.kind = FC_WORK_SLEEP, .u.sleep_ns = duration_ns};
    return fc_submit(st, &w, "fakecuda_test_kernel");
}

FC_API CUresult fakecuda_test_spin(CUstream s, const volatile int *release)
{
    FC_TRY(fc_enter("fakecuda_test_spin"));
    if (!release) {
        fc_complain("fakecuda_test_spin", "release flag is NULL");
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_stream *st;
    FC_TRY(fc_stream_resolve(s, false, "fakecuda_test_spin", &st));
    struct fc_work w = {.kind = FC_WORK_SPIN, .u.spin_flag = release};
    return fc_submit(st, &w, "fakecuda_test_spin");
}

FC_API int fakecuda_live_threads(void)
{
    return fc_queue_live_workers();
}
