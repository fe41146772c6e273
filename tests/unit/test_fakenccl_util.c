/*
 * Helpers shared by the fake NCCL's Check suites: see test_fakenccl_util.h.
 */
#include "test_fakenccl_util.h"

#include "fakenccl.h"

#include <check.h>

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int fnt_rank = -1;

void fnt_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[1024];
    /* the place, at most half the line; then the reason and a newline, in one write */
    int n = snprintf(msg, sizeof msg / 2, "rank %d: %s:%d: check failed: %s: ", fnt_rank, file,
                     line, cond);
    if (n > (int)sizeof msg / 2 - 1) n = (int)sizeof msg / 2 - 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(msg, "\n");
    (void)!write(2, msg, strlen(msg));
    _exit(1);
}

void fnt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void fnt_spawn(struct fnt_job *job, int rank, int nranks, fnt_rank_fn fn, void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        fnt_rank = rank;
        alarm(FNT_TIMEOUT_S + 30);
        fn(rank, nranks, arg);
        _exit(0);
    }
    job->pid[rank] = pid;
    job->status[rank] = -1;
    if (job->n <= rank) job->n = rank + 1;
}

void fnt_start(struct fnt_job *job, int nranks, fnt_rank_fn fn, void *arg)
{
    memset(job, 0, sizeof *job);
    for (int r = 0; r < nranks; r++) fnt_spawn(job, r, nranks, fn, arg);
}

static bool reap(struct fnt_job *job, int r, bool block)
{
    if (job->pid[r] <= 0) return true; /* reaped, or never started (status stays as it was) */
    int st;
    pid_t p = waitpid(job->pid[r], &st, block ? 0 : WNOHANG);
    if (p == job->pid[r]) {
        job->status[r] = st;
        job->pid[r] = 0;
        return true;
    }
    return false;
}

void fnt_kill_all(struct fnt_job *job)
{
    for (int r = 0; r < job->n; r++)
        if (job->pid[r] > 0) kill(job->pid[r], SIGKILL);
    for (int r = 0; r < job->n; r++) reap(job, r, true);
}

int fnt_wait(struct fnt_job *job, int timeout_s)
{
    for (int waited = 0;; waited += 10) {
        bool all = true;
        for (int r = 0; r < job->n; r++) all &= reap(job, r, false);
        if (all) break;
        if (waited >= timeout_s * 1000) {
            for (int r = 0; r < job->n; r++)
                if (job->pid[r] > 0)
                    fprintf(stderr, "rank %d: still running after %d s; killed\n", r, timeout_s);
            fnt_kill_all(job);
            break;
        }
        fnt_sleep_ms(10);
    }
    int failed = 0;
    for (int r = 0; r < job->n; r++) {
        int st = job->status[r];
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            failed++;
            if (WIFSIGNALED(st)) fprintf(stderr, "rank %d: killed by signal %d\n", r, WTERMSIG(st));
        }
    }
    return failed;
}

int fnt_run(int nranks, fnt_rank_fn fn, void *arg)
{
    struct fnt_job job;
    fnt_start(&job, nranks, fn, arg);
    return fnt_wait(&job, FNT_TIMEOUT_S);
}

bool fnt_still_running(struct fnt_job *job, int rank, int wait_ms)
{
    for (int waited = 0; waited < wait_ms; waited += 10) {
        if (reap(job, rank, false)) return false;
        fnt_sleep_ms(10);
    }
    return !reap(job, rank, false);
}

void *fnt_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    return p;
}

CUstream fnt_setup_rank(int rank)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    fnt_rank = rank;
    FNT_CU(cuInit(0));
    FNT_CU(cuDeviceGet(&dev, rank % 8));
    FNT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    FNT_CU(cuCtxSetCurrent(ctx));
    FNT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

ncclComm_t fnt_join(int rank, int nranks, ncclUniqueId id, CUstream *s)
{
    ncclComm_t comm;
    CUstream stream = fnt_setup_rank(rank);
    if (s) *s = stream;
    FNT_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
    return comm;
}

CUevent fnt_event(void)
{
    CUevent ev;
    FNT_CU(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    return ev;
}

ncclUniqueId fnt_unique_id(void)
{
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) abort();
    return id;
}

void *fnt_shared_job(size_t bytes)
{
    ncclUniqueId *id = fnt_shared(bytes);
    *id = fnt_unique_id();
    return id;
}

ncclComm_t fnt_solo_comm(CUstream *s)
{
    ncclUniqueId id = fnt_unique_id();
    ncclComm_t comm;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
    if (s) ck_assert_int_eq(cuStreamCreate(s, 0), CUDA_SUCCESS);
    return comm;
}

void fnt_run_clean(int nranks, fnt_rank_fn fn, void *job)
{
    const ncclUniqueId *id = job;
    ck_assert_int_eq(fnt_run(nranks, fn, job), 0);
    ck_assert(fnt_shm_clean(id));
}

bool fnt_shm_clean(const ncclUniqueId *id)
{
    char name[64], path[96];
    fakenccl_shm_name(id, name, sizeof name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return access(path, F_OK) != 0 && errno == ENOENT;
}

void fnt_sync(CUstream s)
{
    FNT_CU(cuStreamSynchronize(s));
}

bool fnt_wait_flag(volatile int *flag, int value, int timeout_s)
{
    for (int waited = 0; waited < timeout_s * 1000; waited++) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value) return true;
        fnt_sleep_ms(1);
    }
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value;
}

void fnt_set_flag(volatile int *flag, int value)
{
    __atomic_store_n(flag, value, __ATOMIC_RELEASE);
}

bool fnt_arrive(volatile int *count, int n)
{
    __atomic_fetch_add(count, 1, __ATOMIC_ACQ_REL);
    return fnt_wait_flag(count, n, 30);
}

static void *destroy_main(void *arg)
{
    struct fnt_destroyer *d = arg;
    d->r = ncclCommDestroy(d->comm);
    fnt_set_flag(&d->returned, 1);
    return NULL;
}

void fnt_destroy_start(struct fnt_destroyer *d, ncclComm_t comm)
{
    d->comm = comm;
    d->r = ncclInternalError;
    d->returned = 0;
    FNT_CHECK(pthread_create(&d->t, NULL, destroy_main, d) == 0, "no thread");
}

ncclResult_t fnt_destroy_join(struct fnt_destroyer *d)
{
    FNT_CHECK(pthread_join(d->t, NULL) == 0, "join");
    return d->r;
}

bool fnt_pending_after(CUevent ev, CUstream s, int ms)
{
    FNT_CU(cuEventRecord(ev, s));
    fnt_sleep_ms(ms);
    return cuEventQuery(ev) == CUDA_ERROR_NOT_READY;
}

static int saved_stderr = -1;
static char capture_path[64];

void fnt_stderr_begin(void)
{
    snprintf(capture_path, sizeof capture_path, "/tmp/fnt-stderr-XXXXXX");
    int fd = mkstemp(capture_path);
    if (fd < 0) abort();
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

char *fnt_stderr_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    char *text = fnt_read_file(capture_path);
    unlink(capture_path);
    (void)!write(2, text ? text : "", text ? strlen(text) : 0); /* keep it in the test log */
    return text;
}

char *fnt_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (cap - n - 1 == 0) {
            char *more = realloc(buf, cap *= 2);
            if (!more) {
                free(buf);
                buf = NULL;
            }
            buf = more;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* ---- element values ---- */

struct mini {
    int ebits, mbits, bias;
};

static const struct mini *mini_of(ncclDataType_t t)
{
    static const struct mini f16 = {5, 10, 15}, e4m3 = {4, 3, 7}, e5m2 = {5, 2, 15};
    return t == ncclFloat16      ? &f16
           : t == ncclFloat8e4m3 ? &e4m3
           : t == ncclFloat8e5m2 ? &e5m2
                                 : NULL;
}

/* Encodes a small non-negative integer exactly (the tests only use those). */
static uint32_t mini_from_int(long k, const struct mini *m)
{
    if (k <= 0) return 0;
    int e = 63 - __builtin_clzl((unsigned long)k);
    long rest = k - (1L << e);
    uint32_t mant = e <= m->mbits ? (uint32_t)(rest << (m->mbits - e))
                                  : (uint32_t)(rest >> (e - m->mbits));
    return ((uint32_t)(e + m->bias) << m->mbits) | mant;
}

static double mini_to_double(uint32_t c, const struct mini *m)
{
    int e = (int)((c >> m->mbits) & ((1u << m->ebits) - 1));
    double f = (double)(c & ((1u << m->mbits) - 1));
    double v = e == 0 ? f * pow(2.0, 1 - m->bias - m->mbits)
                      : (f + (double)(1u << m->mbits)) * pow(2.0, e - m->bias - m->mbits);
    return (c >> (m->ebits + m->mbits)) & 1 ? -v : v;
}

size_t fnt_size(ncclDataType_t t)
{
    static const size_t bytes[ncclNumTypes] = {
        [ncclInt8] = 1,    [ncclUint8] = 1,    [ncclInt32] = 4,      [ncclUint32] = 4,
        [ncclInt64] = 8,   [ncclUint64] = 8,   [ncclFloat16] = 2,    [ncclFloat32] = 4,
        [ncclFloat64] = 8, [ncclBfloat16] = 2, [ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1};
    return (unsigned)t < ncclNumTypes ? bytes[t] : 4;
}

void fnt_put(void *buf, size_t i, ncclDataType_t t, long v)
{
    char *p = (char *)buf + i * fnt_size(t);
    switch (t) {
    case ncclInt8: *(int8_t *)p = (int8_t)v; break;
    case ncclUint8: *(uint8_t *)p = (uint8_t)v; break;
    case ncclInt32: *(int32_t *)p = (int32_t)v; break;
    case ncclUint32: *(uint32_t *)p = (uint32_t)v; break;
    case ncclInt64: *(int64_t *)p = v; break;
    case ncclUint64: *(uint64_t *)p = (uint64_t)v; break;
    case ncclFloat32: *(float *)p = (float)v; break;
    case ncclFloat64: *(double *)p = (double)v; break;
    case ncclBfloat16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        *(uint16_t *)p = (uint16_t)(u >> 16);
        break;
    }
    case ncclFloat16: *(uint16_t *)p = (uint16_t)mini_from_int(v, mini_of(t)); break;
    default: *(uint8_t *)p = (uint8_t)mini_from_int(v, mini_of(t)); break;
    }
}

double fnt_get(const void *buf, size_t i, ncclDataType_t t)
{
    const char *p = (const char *)buf + i * fnt_size(t);
    switch (t) {
    case ncclInt8: return *(const int8_t *)p;
    case ncclUint8: return *(const uint8_t *)p;
    case ncclInt32: return *(const int32_t *)p;
    case ncclUint32: return *(const uint32_t *)p;
    case ncclInt64: return (double)*(const int64_t *)p;
    case ncclUint64: return (double)*(const uint64_t *)p;
    case ncclFloat32: return *(const float *)p;
    case ncclFloat64: return *(const double *)p;
    case ncclBfloat16: {
        uint32_t u = (uint32_t) * (const uint16_t *)p << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case ncclFloat16: return mini_to_double(*(const uint16_t *)p, mini_of(t));
    default: return mini_to_double(*(const uint8_t *)p, mini_of(t));
    }
}

ncclResult_t fnt_poll_async(ncclComm_t comm)
{
    ncclResult_t st = ncclInProgress;
    for (int t = 0; t < 30000 && st == ncclInProgress; t++) {
        FNT_NCCL(ncclCommGetAsyncError(comm, &st));
        if (st == ncclInProgress) fnt_sleep_ms(1);
    }
    return st;
}
