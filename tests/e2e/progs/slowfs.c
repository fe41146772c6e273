/*
 * libslowfs.so: a slow file system for the dump, preloaded beside the shim.
 * It wraps fsync(2) of a dump's temp file ("*.json.tmp"):
 *   SLOWFS_HOLD=PATH      while PATH exists the fsync does not return; on
 *                         entering it creates PATH.held (the test's sign that a
 *                         dump is under way and stuck);
 *   SLOWFS_FIFO=PATH      the fsync blocks in open(PATH) of that FIFO, with
 *                         no wake-up, until someone opens it for writing; it
 *                         creates PATH.held first (the benchmark);
 *   SLOWFS_DELAY_MS=N     each such fsync takes N ms more.
 * Every other fsync passes straight through.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int is_dump_temp(int fd)
{
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = '\0';
    return n > 9 && strcmp(path + n - 9, ".json.tmp") == 0;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (is_dump_temp(fd)) {
        const char *hold = getenv("SLOWFS_HOLD"), *delay = getenv("SLOWFS_DELAY_MS");
        const char *fifo = getenv("SLOWFS_FIFO");
        if (fifo) {
            char held[4096];
            snprintf(held, sizeof held, "%s.held", fifo);
            int h = open(held, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            if (h >= 0) close(h);
            int w = open(fifo, O_RDONLY | O_CLOEXEC);
            if (w >= 0) close(w);
        }
        if (hold && access(hold, F_OK) == 0) {
            char held[4096];
            snprintf(held, sizeof held, "%s.held", hold);
            int h = open(held, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            if (h >= 0) close(h);
            while (access(hold, F_OK) == 0) pause_ms(10);
        }
        if (delay) pause_ms(atol(delay));
    }
    return real(fd);
}
