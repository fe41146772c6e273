/*
 * Helpers shared by the fake NCCL's Check suites (test_fakenccl_*.c).
 *
 * A multi-rank test forks one child process per rank (the Check test
 * process itself never initialises CUDA, so every child may). Each child
 * sets up its own device and stream, runs the rank body and exits 0 when
 * every check held; a failed check prints "rank R: file:line: ..." and
 * exits 1. Every child has an alarm, and the parent kills what is left at a
 * generous deadline, so a broken fake cannot hang the suite. Data the
 * children and the parent share lives in an anonymous shared mapping made
 * before the fork.
 */
#ifndef TEST_FAKENCCL_UTIL_H
#define TEST_FAKENCCL_UTIL_H

#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FNT_MAX_RANKS 16
#define FNT_TIMEOUT_S 60

/* Fails the current rank (child process): prints where and why, exits 1. */
#define FNT_CHECK(cond, ...)                                           \
    do {                                                               \
        if (!(cond)) fnt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)
/* Checks that an NCCL call returned ncclSuccess. */
#define FNT_NCCL(call)                                                              \
    do {                                                                            \
        ncclResult_t fnt_r_ = (call);                                               \
        FNT_CHECK(fnt_r_ == ncclSuccess, "%s returned %d (%s)", #call, (int)fnt_r_, \
                  ncclGetLastError(NULL));                                          \
    } while (0)
/* Checks that a CUDA driver call returned CUDA_SUCCESS. */
#define FNT_CU(call)                                                             \
    do {                                                                         \
        CUresult fnt_c_ = (call);                                                \
        FNT_CHECK(fnt_c_ == CUDA_SUCCESS, "%s returned %d", #call, (int)fnt_c_); \
    } while (0)

void fnt_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

/* The rank (and name) printed by fnt_fail in this process. */
extern int fnt_rank;

/* One rank's body: returns nothing; a failed FNT_CHECK exits. */
typedef void (*fnt_rank_fn)(int rank, int nranks, void *arg);

/* Forks nranks children running fn and returns at once; fnt_wait collects them. */
struct fnt_job {
    int n;
    pid_t pid[FNT_MAX_RANKS];
    int status[FNT_MAX_RANKS];
};
void fnt_start(struct fnt_job *job, int nranks, fnt_rank_fn fn, void *arg);
/* Forks one more child running fn as `rank` (of nranks) into job (zero the job first). */
void fnt_spawn(struct fnt_job *job, int rank, int nranks, fnt_rank_fn fn, void *arg);
/* Waits up to timeout_s for every child; kills late ones. Returns the number that failed. */
int fnt_wait(struct fnt_job *job, int timeout_s);
/* fnt_start + fnt_wait with FNT_TIMEOUT_S. */
int fnt_run(int nranks, fnt_rank_fn fn, void *arg);
/* True when child `rank` is still running after waiting up to wait_ms for it to exit. */
bool fnt_still_running(struct fnt_job *job, int rank, int wait_ms);
/* Kills every child still running (SIGKILL) and reaps them. */
void fnt_kill_all(struct fnt_job *job);

/* Zeroed memory shared by the parent and every child forked after this call. */
void *fnt_shared(size_t bytes);
/* A job's shared data: fnt_shared(bytes) whose first member is an ncclUniqueId, set fresh
 * (the rest, the test's own fields, zeroed). */
void *fnt_shared_job(size_t bytes);
/* In the Check test: runs fn on nranks ranks with job (from fnt_shared_job) and checks that
 * every rank passed and that the communicator of job's id left nothing in /dev/shm. */
void fnt_run_clean(int nranks, fnt_rank_fn fn, void *job);

/* In a rank: cuInit, the primary context of device (rank % 8) made current, a new stream. */
CUstream fnt_setup_rank(int rank);
/* In a rank, the set-up most rank bodies begin with: fnt_setup_rank, then the communicator
 * of id joined as rank of nranks (ncclCommInitRank, checked). Returns it; *s gets the
 * rank's stream (s may be NULL). */
ncclComm_t fnt_join(int rank, int nranks, ncclUniqueId id, CUstream *s);
/* In the Check test itself: cuInit, then a 1-rank communicator of a fresh id, and where s is
 * not NULL a new stream in *s, each checked. Returns the communicator. */
ncclComm_t fnt_solo_comm(CUstream *s);
/* A new event (CU_EVENT_DEFAULT) in the current context, checked. */
CUevent fnt_event(void);
/* A fresh unique id (in the parent, before forking). */
ncclUniqueId fnt_unique_id(void);
/* True when the communicator of id left nothing in /dev/shm. */
bool fnt_shm_clean(const ncclUniqueId *id);
/* Synchronizes stream s and checks it. */
void fnt_sync(CUstream s);

/* ncclCommDestroy(comm) on a thread of its own: fnt_destroy_start starts it (checked);
 * `returned` is set once the call returned, with its result in r; fnt_destroy_join waits for
 * the thread (checked) and returns r. */
struct fnt_destroyer {
    ncclComm_t comm;
    ncclResult_t r;
    volatile int returned;
    pthread_t t;
};
void fnt_destroy_start(struct fnt_destroyer *d, ncclComm_t comm);
ncclResult_t fnt_destroy_join(struct fnt_destroyer *d);

/* Polls ncclCommGetAsyncError until it leaves ncclInProgress (30 s at most); returns it. */
ncclResult_t fnt_poll_async(ncclComm_t comm);

/* Sleeps ms milliseconds. */
void fnt_sleep_ms(int ms);

/* Waits (sleeping 1 ms steps) until *flag >= value or timeout_s passes; true if reached. */
bool fnt_wait_flag(volatile int *flag, int value, int timeout_s);
void fnt_set_flag(volatile int *flag, int value);
/* Counts this rank in *count, then waits (30 s at most) until all n ranks have; true if they
 * did. */
bool fnt_arrive(volatile int *count, int n);
/* Records ev on s behind the op just enqueued there, sleeps ms and says whether the op is
 * still pending (ev NOT_READY). */
bool fnt_pending_after(CUevent ev, CUstream s, int ms);

/* Starts capturing what this process writes to fd 2 into a temp file; fnt_stderr_end returns
 * its contents (malloc'd) and restores fd 2. */
void fnt_stderr_begin(void);
char *fnt_stderr_end(void);

/* Element size of a datatype; writes a small non-negative integer exactly as type t;
 * reads element i of type t as a double. */
size_t fnt_size(ncclDataType_t t);
void fnt_put(void *buf, size_t i, ncclDataType_t t, long v);
double fnt_get(const void *buf, size_t i, ncclDataType_t t);

/* Reads a whole file (malloc'd, NUL-terminated), or NULL. */
char *fnt_read_file(const char *path);

#endif
