/* nodedir.c: see nodedir.h. */
#include "evidence/nodedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/config.h"

int ncclguard_node_dir_open(char *dir, size_t len)
{
    const char *base = ncclguard_settings()->node_dir;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ncclguard-%u", base && base[0] == '/' ? base : "/dev/shm",
             (unsigned)geteuid());
    if (dir && len) snprintf(dir, len, "%s", path);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}
