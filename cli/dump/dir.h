/*
 * dump/dir.h: a directory of dumps, read as a stream: parsed by worker threads
 * and handed to the caller one at a time, in file-name order, each freed once the
 * callback returns, so that only a few are in memory whatever the number of ranks.
 */
#ifndef NCCLGUARD_CLI_DUMP_DIR_H
#define NCCLGUARD_CLI_DUMP_DIR_H

#include "dump/dump.h"
#include "json/json.h"

struct dr_dir_opts {
    enum ng_json_backend backend;
    int threads;  /* parsing threads; 0: one per CPU, at most 8 */
    int progress; /* 1: a progress bar on stderr when it is a terminal and the
                              read takes longer than a second */
    int flags;    /* of dr_parse */
};

/* Called in file-name order (natural order: r2 before r10), one at a time, from
 * the calling thread. on_dump's dump is freed when it returns; a nonzero
 * return stops the read. */
struct dr_dir_cb {
    int (*on_dump)(void *ctx, const struct dr_dump *d);
    void (*on_bad)(void *ctx, const char *path, const char *why);
    void *ctx;
};

struct dr_dir_stats {
    size_t files, dumps, bad;
    uint64_t bytes; /* of the dumps read */
};

/* Reads every *.json entry of dir, and every file that starts as a pickle does
 * (PyTorch's Flight Recorder dumps, dump/fr.h; other files are not dumps, and are
 * left alone). Returns 0, or -1 with the reason in err when dir cannot be listed. */
int dr_dir_read(const char *dir, const struct dr_dir_opts *o, const struct dr_dir_cb *cb,
                struct dr_dir_stats *st, char *err, size_t errlen);

#endif
