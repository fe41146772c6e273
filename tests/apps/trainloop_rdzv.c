/*
 * Unique-id exchange through the rendezvous directory that launch creates
 * (LAUNCH_RDZV_DIR), standing in for torchrun's TCP store. Rank 0 writes one
 * id per worker thread; the file appears atomically (temp file + rename), so a
 * reader never sees a partial id. The name carries LAUNCH_RUN_ID, so a reused
 * directory never hands out a previous run's id.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trainloop.h"

#define TL_RDZV_WAIT_S 300

static void id_path(const struct tl_proc *p, int tid, char *out, size_t len)
{
    snprintf(out, len, "%s/trainloop-%s-%d.id", p->rdzv_dir, p->run_id ? p->run_id : "run", tid);
}

static void publish(const char *path, const ncclUniqueId *id)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) tl_die(TL_EXIT_SETUP, ": cannot create %s: %s", tmp, strerror(errno));
    ssize_t n = write(fd, id, sizeof(*id));
    if (n != (ssize_t)sizeof(*id) || close(fd) != 0 || rename(tmp, path) != 0)
        tl_die(TL_EXIT_SETUP, ": cannot publish %s: %s", path, strerror(errno));
}

/* Reads a complete id from PATH; returns 0 while the file does not exist yet. */
static int try_read(const char *path, ncclUniqueId *id)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        tl_die(TL_EXIT_SETUP, ": cannot open %s: %s", path, strerror(errno));
    }
    ssize_t n = read(fd, id, sizeof(*id));
    close(fd);
    if (n != (ssize_t)sizeof(*id))
        tl_die(TL_EXIT_SETUP, ": %s holds %zd bytes, not a unique id", path, n);
    return 1;
}

/* Gives worker TID the unique id of its world communicator: created on rank 0, read elsewhere. */
void tl_rdzv_unique_id(const struct tl_proc *p, int tid, ncclUniqueId *id)
{
    char path[4096];
    if (p->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess)
            tl_die(TL_EXIT_CALL, ": ncclGetUniqueId failed: %s (%s)", ncclGetErrorString(r),
                   ncclGetLastError(NULL));
        if (p->nranks > 1) {
            id_path(p, tid, path, sizeof(path));
            publish(path, id);
        }
        return;
    }
    id_path(p, tid, path, sizeof(path));
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
    for (long waited_ms = 0; waited_ms < TL_RDZV_WAIT_S * 1000L; waited_ms += 10) {
        if (try_read(path, id)) return;
        nanosleep(&pause, NULL);
    }
    tl_die(TL_EXIT_SETUP, ": no unique id from rank 0 in %s after %d s", path, TL_RDZV_WAIT_S);
}
