/*
 * spool.c: see spool.h. The lock guards the queue only: a producer holds it for
 * one memcpy, the writer for taking one line out; write(2) runs without it, so
 * a writer stuck in the kernel blocks nobody but itself, and producers then
 * drop lines once the queue is full.
 */
#include "base/spool.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/outfile.h"

struct slot {
    struct ng_sink *sink;
    int fd;
    size_t len;
    char text[NG_SPOOL_LINE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;    /* a line was queued */
static pthread_cond_t drained = PTHREAD_COND_INITIALIZER; /* the writer finished one */
static struct slot slots[NG_SPOOL_SLOTS];
static size_t head, count; /* next slot to write, lines queued (under lock) */
static int busy;           /* the writer is inside write(2) (under lock) */
static ng_atomic(int) running;

/* Counts a lost line; the first loss of a sink is said on stderr. */
static void lose(struct ng_sink *sink, const char *why)
{
    if (ng_atomic_add_relaxed(&sink->lost, 1) != 0) return;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "ncclguard: %slines of %s are being lost (%s): each one "
                     "that cannot be written is counted in the exit summary\n",
                     ncclguard_identity_tag(), sink->what, why);
    if (n > (int)sizeof msg - 1) n = (int)sizeof msg - 1;
    if (n > 0) ncclguard_outfile_write(STDERR_FILENO, msg, (size_t)n);
}

static void write_now(struct ng_sink *sink, int fd, const char *line, size_t len)
{
    if (ncclguard_outfile_write(fd, line, len) == 0 || fd == STDERR_FILENO) return;
    char why[128];
    snprintf(why, sizeof why, "a write failed: %s", strerror(errno));
    lose(sink, why);
}

int ncclguard_spool_write(struct ng_sink *sink, int fd, const char *line, size_t len)
{
    if (fd == STDERR_FILENO || !ng_atomic_load_acquire(&running) || len > NG_SPOOL_LINE) {
        write_now(sink, fd, line, len);
        return 0;
    }
    pthread_mutex_lock(&lock);
    if (count == NG_SPOOL_SLOTS) {
        pthread_mutex_unlock(&lock);
        lose(sink, "the file has not taken the lines queued before them");
        return -1;
    }
    struct slot *s = &slots[(head + count++) % NG_SPOOL_SLOTS];
    s->sink = sink;
    s->fd = fd;
    s->len = len;
    memcpy(s->text, line, len);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return 0;
}

static void *writer_main(void *arg)
{
    (void)arg;
    static struct slot out; /* this thread's copy of the line being written */
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!count) pthread_cond_wait(&wake, &lock);
        out = slots[head];
        head = (head + 1) % NG_SPOOL_SLOTS;
        count--;
        busy = 1;
        pthread_mutex_unlock(&lock);
        write_now(out.sink, out.fd, out.text, out.len);
        pthread_mutex_lock(&lock);
        busy = 0;
        pthread_cond_broadcast(&drained);
    }
    return NULL;
}

void ncclguard_spool_start(void)
{
    static pthread_t thread;
    if (ng_atomic_load_acquire(&running)) return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signal of the job's */
    int rc = pthread_create(&thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        pthread_detach(thread);
        pthread_setname_np(thread, "ncclguard-out");
        ng_atomic_store_release(&running, 1);
    }
}

int ncclguard_spool_finish(int deadline_ms)
{
    if (!ng_atomic_load_acquire(&running)) return 0;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += deadline_ms / 1000;
    until.tv_nsec += (long)(deadline_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&lock);
    int rc = 0;
    while ((count || busy) && rc == 0) rc = pthread_cond_timedwait(&drained, &lock, &until);
    int left = count || busy;
    /* written: later lines (other exit handlers) go straight to the file, not to a
     * queue that nobody may write any more */
    if (!left) ng_atomic_store_release(&running, 0);
    pthread_mutex_unlock(&lock);
    return left ? -1 : 0;
}

void ncclguard_spool_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&drained, NULL);
    head = count = 0;
    busy = 0;
    ng_atomic_store_relaxed(&running, 0);
}
