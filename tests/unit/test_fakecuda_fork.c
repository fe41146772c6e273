/*
 * test_fakecuda_fork.c: fork() and the fake libcuda.so.1. Like the real driver, a child of
 * an initialised process cannot use CUDA (CUDA_ERROR_NOT_INITIALIZED, at once, never a
 * hang); a child of a process that never called cuInit starts clean.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_fakecuda_util.h"

/* Waits for the child with a generous deadline; kills it and fails on a hang. */
static int wait_child(pid_t pid)
{
    int status = 0;
    double end = fct_now() + FCT_DEADLINE_S;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (fct_now() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            ck_abort_msg("the child hung (deadlock after fork?)");
        }
        fct_sleep_ms(10);
    }
    ck_assert_msg(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

/* Child side: returns 0 when every driver call is refused and nothing hangs. */
static int child_after_initialised_parent(CUstream s, CUevent ev)
{
    int v = 0, n = 0;
    const char *str = NULL;
    CUcontext c;
    if (cuInit(0) != CUDA_ERROR_NOT_INITIALIZED) return 1;
    if (cuStreamQuery(s) != CUDA_ERROR_NOT_INITIALIZED) return 2;
    if (cuEventQuery(ev) != CUDA_ERROR_NOT_INITIALIZED) return 3;
    if (cuStreamSynchronize(s) != CUDA_ERROR_NOT_INITIALIZED) return 4;
    if (cuCtxGetCurrent(&c) != CUDA_ERROR_NOT_INITIALIZED) return 5;
    if (cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED) return 6;
    if (fakecuda_test_kernel(s, 1) != CUDA_ERROR_NOT_INITIALIZED) return 7;
    if (cuDriverGetVersion(&v) != CUDA_SUCCESS || v != 13000) return 8;
    if (cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &str) != CUDA_SUCCESS) return 9;
    if (fakecuda_live_threads() != 0) return 10; /* the parent's workers are not here */
    return 0;
}

NG_TEST(test_child_of_busy_parent_does_not_hang)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent ev = fct_event(0);
    int release = 0;
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuEventRecord(ev, s));
    CU_IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    pid_t pid = fork();
    if (pid == 0) _exit(child_after_initialised_parent(s, ev)); /* no Check calls there */
    ck_assert_int_ge(pid, 0);
    ck_assert_int_eq(wait_child(pid), 0);
    CU_IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY); /* the parent goes on as before */
    fct_store(&release, 1);
    CU_OK(cuEventSynchronize(ev));
}
END_TEST

struct hammer {
    CUcontext ctx;
    int stop, failed;
};

/*
 * Keeps the fake's locks busy while the main thread forks. No Check calls here: Check's
 * own lock, held by this thread at the fork, would hang a child that asserts.
 */
static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    CUstream s;
    CUevent ev;
    int ops = 0;
    bool ok = cuCtxSetCurrent(h->ctx) == CUDA_SUCCESS && cuStreamCreate(&s, 0) == CUDA_SUCCESS &&
              cuEventCreate(&ev, 0) == CUDA_SUCCESS;
    while (ok && !fct_load(&h->stop)) {
        ok = cuEventRecord(ev, s) == CUDA_SUCCESS;
        cuEventQuery(ev);
        ok = ok && cuLaunchHostFunc(s, fct_bump, &ops) == CUDA_SUCCESS;
        ok = ok && cuStreamSynchronize(s) == CUDA_SUCCESS;
    }
    fct_store(&h->failed, !ok);
    return NULL;
}

NG_TEST(test_fork_while_other_threads_call_cuda)
{
    struct hammer h = {fct_init_ctx(), 0, 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, hammer_thread, &h);
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            CUstream s;
            CUresult r = cuStreamCreate(&s, 0);
            _exit(r == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);
        }
        ck_assert_int_ge(pid, 0);
        ck_assert_int_eq(wait_child(pid), 0);
    }
    fct_store(&h.stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ck_assert_int_eq(h.failed, 0);
}
END_TEST

/* Child side of a parent that never initialised the driver: full use. */
static int child_fresh(void)
{
    CUcontext ctx;
    CUstream s;
    int ran = 0;
    if (cuInit(0) != CUDA_SUCCESS) return 1;
    if (cuCtxCreate(&ctx, NULL, 0, 0) != CUDA_SUCCESS) return 2;
    if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) return 3;
    if (cuLaunchHostFunc(s, fct_set, &ran) != CUDA_SUCCESS) return 4;
    if (cuStreamSynchronize(s) != CUDA_SUCCESS) return 5;
    return fct_load(&ran) == 1 ? 0 : 6;
}

NG_TEST(test_child_of_uninitialised_parent_starts_clean)
{
    int v;
    CU_OK(cuDriverGetVersion(&v)); /* loaded, not initialised */
    pid_t pid = fork();
    if (pid == 0) _exit(child_fresh());
    ck_assert_int_ge(pid, 0);
    ck_assert_int_eq(wait_child(pid), 0);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakecuda_fork", "fork", 180, ng_check_tests(), NULL));
}
