/*
 * peek.c: see peek.h. Each page is an iovec of its own: process_vm_readv stops
 * at the first element it cannot read, so a read that runs into an unmapped
 * page still returns the pages before it.
 */
#include "base/peek.h"

#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096
#define PIECES 16 /* iovecs per call; a longer read takes more calls */

size_t ncclguard_peek(uintptr_t addr, void *dst, size_t len)
{
    if (!addr || addr + len < addr) return 0;
    pid_t self = getpid();
    size_t done = 0;
    while (done < len) {
        struct iovec remote[PIECES];
        int n = 0;
        uintptr_t a = addr + done, end = addr + len;
        for (; a < end && n < PIECES; n++) {
            uintptr_t stop = (a & ~(uintptr_t)(PAGE - 1)) + PAGE;
            if (stop > end) stop = end;
            remote[n] = (struct iovec){(void *)a, stop - a};
            a = stop;
        }
        struct iovec local = {(char *)dst + done, a - (addr + done)};
        ssize_t got = process_vm_readv(self, &local, 1, remote, (unsigned long)n, 0);
        if (got <= 0) break;
        done += (size_t)got;
        if ((size_t)got < local.iov_len) break;
    }
    return done;
}
