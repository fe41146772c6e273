/*
 * marker.c: see marker.h. The directory is per user, so that no other user can
 * plant or read markers: it is made 0700 and used only when it is a directory
 * of ours that nobody else may write to (opened O_NOFOLLOW, then fstat). The
 * file is written as "<pid>.tmp" and renamed, so a reader sees all of it or
 * nothing.
 */
#include "evidence/marker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/json.h"
#include "base/log.h"
#include "evidence/nodedir.h"

static pid_t owner; /* the process that wrote the marker, 0 for none */
static char path[96];

int ncclguard_marker_signal_free(int sig)
{
    struct sigaction cur;
    if (sig <= 0 || sigaction(sig, NULL, &cur) != 0) return 0;
    return cur.sa_handler == SIG_DFL && !(cur.sa_flags & SA_SIGINFO) ? sig : 0;
}

/*
 * Removes the markers of processes that are gone (killed before their exit
 * handlers ran: the kill action, a launcher's SIGKILL, a crash), so that they do
 * not pile up in /dev/shm: a marker whose pid has no process, or another process
 * than the one that wrote it (start_time differs). Only names of digits are
 * markers; other files of the directory are not ours to judge.
 */
static void sweep(int dfd)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    char text[256];
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (!*n || n[strspn(n, "0123456789")]) continue;
        int mfd = openat(dfd, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (mfd < 0) continue;
        ssize_t len = read(mfd, text, sizeof text - 1);
        close(mfd);
        text[len > 0 ? len : 0] = '\0';
        const char *st = strstr(text, "\"start_time\":");
        unsigned long long written = 0;
        if (!st || sscanf(st + 13, "%llu", &written) != 1) continue; /* being written */
        int pid = atoi(n);
        if (ncclguard_process_start_time(pid) != written) unlinkat(dfd, n, 0);
    }
    closedir(d);
}

void ncclguard_marker_create(int dump_signal)
{
    if (owner == getpid()) return;
    char dir[64], tmp[32], name[24], host[6 * 64 + 3], job[6 * 128 + 3], line[1200];
    int dfd = ncclguard_node_dir_open(dir, sizeof dir);
    if (dfd < 0) {
        NG_DEBUG("no node marker in %s (%s)", dir, strerror(errno));
        return;
    }
    sweep(dfd);
    const struct ng_identity *me = ncclguard_identity();
    int n = snprintf(line, sizeof line,
                     "{\"schema\":\"ncclguard.marker/1\",\"pid\":%d,\"start_time\":%llu,"
                     "\"rank\":%d,\"local_rank\":%d,\"host\":%s,\"job\":%s,\"dump_signal\":%d}\n",
                     (int)getpid(), ncclguard_process_start_time((int)getpid()), me->rank,
                     me->local_rank, ncclguard_json_quote(me->host, host, sizeof host),
                     ncclguard_json_quote(me->job, job, sizeof job), dump_signal);
    snprintf(name, sizeof name, "%d", (int)getpid());
    snprintf(tmp, sizeof tmp, "%d.tmp", (int)getpid());
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = fd >= 0 && n > 0 && n < (int)sizeof line && write(fd, line, (size_t)n) == n;
    if (fd >= 0) close(fd);
    if (ok && renameat(dfd, tmp, dfd, name) == 0) {
        owner = getpid();
        snprintf(path, sizeof path, "%s/%s", dir, name);
    } else {
        NG_DEBUG("no node marker in %s (%s)", dir, strerror(errno));
        unlinkat(dfd, tmp, 0);
    }
    close(dfd);
}

void ncclguard_marker_remove(void)
{
    if (owner != getpid()) return;
    unlink(path);
    owner = 0;
}
