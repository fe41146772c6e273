/*
 * nodedir.h: the node-local directory of this user's ncclguard processes,
 * <node_dir>/ncclguard-<uid> (node_dir: /dev/shm by default), where the node
 * markers (marker.c) and the cross-rank trigger's poller lock and fan-out file
 * (trigger.c) live.
 *
 * Threads: any but a signal handler (snprintf).
 */
#ifndef NCCLGUARD_NODEDIR_H
#define NCCLGUARD_NODEDIR_H

#include <stddef.h>

/* Makes the directory if needed (mode 0700) and opens it: a directory, not a
 * symlink, ours and closed to everyone else, or -1 with errno (EPERM when
 * someone else's). Its path goes into dir[len] when dir is not NULL. */
int ncclguard_node_dir_open(char *dir, size_t len);

#endif
