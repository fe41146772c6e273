/*
 * cmd/export.c: `ncclguard export --torch-fr DIR -o OUT`: every rank's dump in DIR
 * written as a PyTorch Flight Recorder dump, OUT/nccl_trace_rank_<global rank>
 * (torch's own default name), which torchfrtrace reads (render/fr.h says how
 * each member is mapped).
 *
 * Two passes over DIR with the reader that `analyze` uses: the first learns the
 * communicators' members and each rank's newest dump, the second writes. All or
 * nothing: the files are written into a new folder beside OUT, which becomes OUT
 * by one rename at the end; any unusable dump, or a failed write, leaves OUT as
 * it was (absent, or an empty folder) and removes what was written.
 */
#include "cmd/export.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "dump/dir.h"
#include "dump/dump.h"
#include "render/fr.h"
#include "render/pickle.h"

#define EXIT_WRITE 2
#define EXIT_UNUSABLE 3
#define FR_PREFIX "nccl_trace_rank_"
#define USAGE_LINE "usage: ncclguard export --torch-fr DIR -o OUT"

static void usage(FILE *out)
{
    fprintf(out,
            USAGE_LINE
            "\n\n"
            "Writes each rank's dump in DIR as a PyTorch Flight Recorder dump (version %s),\n"
            "OUT/" FR_PREFIX "<rank>, for torchfrtrace (`torchfrtrace OUT`) or any\n"
            "tool that reads FR dumps; `ncclguard analyze OUT` reads them too. OUT must\n"
            "not exist, or be an empty folder. A rank with several dumps is written from\n"
            "its newest. See docs/analysis.md for what FR can and cannot hold.\n\n"
            "  --torch-fr DIR  the dump directory to export\n"
            "  -o OUT          the folder to write\n\n"
            "Exit status: 0, 2 (cannot write OUT), 3 (an unusable dump, or none), 64 (usage).\n",
            RN_FR_VERSION);
}

struct run {
    struct rn_fr *fr;
    const char *stage; /* the folder being written, NULL in the first pass */
    size_t dumps, written, entries, left_out, no_members, no_rank, bad;
    int failed; /* 2: a write failed; 3: out of memory */
};

static void on_bad(void *ctx, const char *path, const char *why)
{
    struct run *r = ctx;
    if (!r->stage) fprintf(stderr, "ncclguard export: %s: %s: nothing written\n", path, why);
    r->bad++;
}

static int write_file(struct run *r, const struct dr_dump *d, const struct rn_pk *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" FR_PREFIX "%lld", r->stage, (long long)d->rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) goto bad;
    size_t off = 0;
    while (off < p->len) {
        ssize_t w = write(fd, p->buf + off, p->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            goto bad;
        }
        off += (size_t)w;
    }
    /* the file's time is the dump's: an FR reader takes it for when the dump was written */
    if (d->time_ns > 0) {
        struct timespec ts[2];
        ts[0].tv_sec = ts[1].tv_sec = d->time_ns / 1000000000;
        ts[0].tv_nsec = ts[1].tv_nsec = d->time_ns % 1000000000;
        (void)futimens(fd, ts);
    }
    if (close(fd)) goto bad;
    return 0;
bad:
    fprintf(stderr, "ncclguard export: cannot write %s (%s)\n", path, strerror(errno));
    return -1;
}

static int on_dump(void *ctx, const struct dr_dump *d)
{
    struct run *r = ctx;
    if (!r->stage) {
        r->dumps++;
        if (d->rank < 0) r->no_rank++;
        if (rn_fr_learn(r->fr, d)) {
            r->failed = EXIT_UNUSABLE;
            return 1;
        }
        return 0;
    }
    if (!rn_fr_chosen(r->fr, d)) return 0;
    struct rn_pk p;
    struct rn_fr_counts n;
    rn_pk_init(&p);
    if (rn_fr_write(r->fr, d, &p, &n) || rn_pk_done(&p)) {
        rn_pk_free(&p);
        fprintf(stderr, "ncclguard export: out of memory\n");
        r->failed = EXIT_UNUSABLE;
        return 1;
    }
    int rc = write_file(r, d, &p);
    rn_pk_free(&p);
    if (rc) {
        r->failed = EXIT_WRITE;
        return 1;
    }
    r->written++;
    r->entries += n.entries;
    r->left_out += n.left_out;
    if (n.no_members > r->no_members) r->no_members = n.no_members;
    return 0;
}

/* Removes the staging folder and what is in it (only plain files are written there). */
static void unstage(const char *stage)
{
    DIR *dir = opendir(stage);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", stage, e->d_name);
            (void)unlink(path);
        }
        closedir(dir);
    }
    (void)rmdir(stage);
}

/* OUT must be absent or an empty folder; 0, or -1 after saying why. */
static int check_out(const char *out)
{
    struct stat st;
    if (lstat(out, &st)) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "ncclguard export: cannot write %s (%s)\n", out, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ncclguard export: %s exists and is not a folder: give a new one\n", out);
        return -1;
    }
    DIR *dir = opendir(out);
    if (!dir) {
        fprintf(stderr, "ncclguard export: %s: %s\n", out, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(dir)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(dir);
    if (!empty) {
        fprintf(stderr,
                "ncclguard export: %s is not empty: give a new or empty folder (torchfrtrace "
                "reads every file in it)\n",
                out);
        return -1;
    }
    return 0;
}

static int export_fr(const char *dir, const char *out)
{
    struct run r = {.fr = rn_fr_new()};
    if (!r.fr) return EXIT_UNUSABLE;
    struct dr_dir_opts o = {0, 0, 1, 0};
    struct dr_dir_cb cb = {on_dump, on_bad, &r};
    struct dr_dir_stats st;
    char err[512], stage[4096] = "";
    int rc = 0;
    if (dr_dir_read(dir, &o, &cb, &st, err, sizeof err)) {
        fprintf(stderr, "ncclguard export: cannot read the dump directory %s\n", err);
        rc = EXIT_UNUSABLE;
        goto done;
    }
    if (r.failed || r.bad || !r.dumps || r.no_rank) {
        if (!r.failed && !r.bad && !r.dumps)
            fprintf(stderr, "ncclguard export: %s: no dump (%zu file(s) read)\n", dir, st.files);
        else if (r.no_rank)
            fprintf(stderr, "ncclguard export: %s: %zu dump(s) name no rank, which FR needs\n", dir,
                    r.no_rank);
        rc = EXIT_UNUSABLE;
        goto done;
    }
    if (check_out(out)) {
        rc = EXIT_WRITE;
        goto done;
    }
    if ((size_t)snprintf(stage, sizeof stage, "%s.part%ld", out, (long)getpid()) >= sizeof stage ||
        mkdir(stage, 0755)) {
        fprintf(stderr, "ncclguard export: cannot create %s (%s)\n", stage, strerror(errno));
        stage[0] = '\0';
        rc = EXIT_WRITE;
        goto done;
    }
    r.stage = stage;
    r.bad = 0;
    if (dr_dir_read(dir, &o, &cb, &st, err, sizeof err) || r.bad) {
        fprintf(stderr, "ncclguard export: %s changed while it was read: nothing written\n", dir);
        rc = EXIT_UNUSABLE;
        goto done;
    }
    if (r.failed) {
        rc = r.failed;
        goto done;
    }
    (void)rmdir(out); /* an empty folder, checked above */
    if (rename(stage, out)) {
        fprintf(stderr, "ncclguard export: cannot rename %s to %s (%s)\n", stage, out,
                strerror(errno));
        rc = EXIT_WRITE;
        goto done;
    }
    stage[0] = '\0';
    if (r.left_out)
        fprintf(stderr,
                "ncclguard export: %zu op(s) left out: recorded into a CUDA graph, untracked, "
                "or of a kind FR has no name for\n",
                r.left_out);
    if (r.no_members)
        fprintf(stderr,
                "ncclguard export: %zu communicator(s) have members no dump names; their groups "
                "list only the ranks that dumped\n",
                r.no_members);
    printf("ncclguard export: %zu rank(s), %zu entries, Flight Recorder %s, in %s\n", r.written,
           r.entries, RN_FR_VERSION, out);
done:
    if (stage[0]) unstage(stage);
    rn_fr_free(r.fr);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    enum { O_TORCH_FR = 256, O_HELP };
    static const struct option opts[] = {{"torch-fr", required_argument, NULL, O_TORCH_FR},
                                         {"help", no_argument, NULL, O_HELP},
                                         {NULL, 0, NULL, 0}};
    const char *dir = NULL, *out = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case O_TORCH_FR: dir = optarg; break;
        case 'o': out = optarg; break;
        case 'h':
        case O_HELP: usage(stdout); return 0;
        default:
            fprintf(stderr, "ncclguard export: bad option '%s'; " USAGE_LINE "\n",
                    argv[optind - 1]);
            return CMD_EXIT_USAGE;
        }
    }
    if (!dir || !out || !out[0] || optind != argc) {
        fprintf(stderr, "ncclguard export: %s; " USAGE_LINE "\n",
                optind != argc ? "unexpected argument"
                : !dir         ? "needs --torch-fr DIR (the only format it writes)"
                               : "needs -o OUT");
        return CMD_EXIT_USAGE;
    }
    return export_fr(dir, out);
}
