/*
 * test_shim_output.c: the files the shim appends to (base/outfile.c) and what the
 * log and the event log do with them: a FIFO, a device, a directory or a
 * symbolic link is refused without blocking; files are created 0600; a file that
 * stops taking lines (here RLIMIT_FSIZE, as a full disk would) loses them,
 * counts them and says so once, and the caller goes on; a writer thread stuck in
 * write(2) (here on a full pipe, as on a stalled NFS mount) blocks no caller.
 *
 * Each test runs in its own forked process (Check's default).
 */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/events.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/outfile.h"
#include "base/spool.h"

static char dir[64], path[128];

static void setup(void)
{
    ng_check_tmpdir(dir, sizeof dir, "output");
}

static void teardown(void)
{
    ck_assert(ng_check_rmtree(dir));
}

static const char *at(const char *name)
{
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* stderr into a pipe (a file would hit the test's own size limit), and what was
 * said there so far. */
static int err_pipe = -1;

static void capture_stderr(void)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_ge(dup2(p[1], STDERR_FILENO), 0);
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    err_pipe = p[0];
}

static const char *said(void)
{
    static char buf[16384];
    static size_t len;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(err_pipe, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    return buf;
}

static int count(const char *text, const char *needle)
{
    int c = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) c++;
    return c;
}

static int count_in(const char *file, const char *needle)
{
    char buf[8192];
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return count(buf, needle);
}

NG_TEST(refuses_what_is_not_a_regular_file)
{
    char why[300];
    ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
    /* no reader: a blocking open would wait here forever */
    ck_assert_int_eq(ncclguard_outfile_open(at("fifo"), why, sizeof why), -1);
    ck_assert_str_eq(why, "a FIFO, not a regular file");
    /* with a reader the open would succeed: still refused */
    int rd = open(at("fifo"), O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(rd, 0);
    ck_assert_int_eq(ncclguard_outfile_open(at("fifo"), why, sizeof why), -1);
    ck_assert_str_eq(why, "a FIFO, not a regular file");
    close(rd);
    ck_assert_int_eq(ncclguard_outfile_open("/dev/null", why, sizeof why), -1);
    ck_assert_str_eq(why, "a character device, not a regular file");
    ck_assert_int_eq(ncclguard_outfile_open(dir, why, sizeof why), -1);
    ck_assert_str_eq(why, "a directory, not a regular file");
    int fd = open(at("target"), O_WRONLY | O_CREAT, 0600);
    close(fd);
    char target[128];
    snprintf(target, sizeof target, "%s", path);
    ck_assert_int_eq(symlink(target, at("link")), 0);
    ck_assert_int_eq(ncclguard_outfile_open(at("link"), why, sizeof why), -1);
    ck_assert_str_eq(why, "a symbolic link, which is not followed");
    ck_assert_int_eq(ncclguard_outfile_open(at("no/such/dir"), why, sizeof why), -1);
    ck_assert_str_eq(why, "cannot open it (No such file or directory)");
}
END_TEST

NG_TEST(creates_files_0600)
{
    char why[300];
    umask(0);
    int fd = ncclguard_outfile_open(at("new.log"), why, sizeof why);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_int_eq(ncclguard_outfile_write(fd, "x\n", 2), 0);
    close(fd);
    /* the event log through its own entry point */
    ncclguard_identity_init();
    ncclguard_events_open(at("events.jsonl"));
    ncclguard_event("test", NULL);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_int_gt(st.st_size, 0);
}
END_TEST

NG_TEST(log_to_a_fifo_falls_back_to_stderr_once)
{
    capture_stderr();
    ck_assert_int_eq(mkfifo(at("log.fifo"), 0600), 0);
    static char fifo[128];
    snprintf(fifo, sizeof fifo, "%s", path);
    ncclguard_identity_init();
    ncclguard_log_configure(NG_LOG_INFO, fifo);
    NG_WARN("first line");
    NG_WARN("second line");
    const char *err = said();
    ck_assert_int_eq(count(err, "a FIFO, not a regular file; logging to stderr instead"), 1);
    ck_assert_int_eq(count(err, "first line"), 1);
    ck_assert_int_eq(count(err, "second line"), 1);
}
END_TEST

/* A file that cannot grow: each line's write fails, as on a full disk. */
static void cap_file_size(rlim_t bytes)
{
    signal(SIGXFSZ, SIG_IGN); /* write(2) then fails with EFBIG instead of killing us */
    struct rlimit rl = {.rlim_cur = bytes, .rlim_max = RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

NG_TEST(lines_a_file_cannot_take_are_lost_counted_and_said_once)
{
    capture_stderr();
    static char log[128], events[128];
    snprintf(log, sizeof log, "%s", at("full.log"));
    snprintf(events, sizeof events, "%s", at("full.jsonl"));
    ncclguard_identity_init();
    ncclguard_log_configure(NG_LOG_INFO, log);
    NG_INFO("this one fits");
    ncclguard_events_open(events);
    ncclguard_event("fits", NULL);
    struct stat st;
    ck_assert_int_eq(stat(log, &st), 0);
    cap_file_size((rlim_t)st.st_size); /* both files have at least that much already */
    for (int i = 0; i < 100; i++) NG_INFO("lost line %d", i);
    for (int i = 0; i < 50; i++) ncclguard_event("lost", NULL);
    cap_file_size(RLIM_INFINITY); /* Check itself writes its results to a file */
    ck_assert_uint_eq(ncclguard_log_lost(), 100);
    ck_assert_uint_eq(ncclguard_events_lost(), 50);
    const char *err = said();
    ck_assert_int_eq(count(err, "lines of the log are being lost (a write failed: File too "
                                "large)"),
                     1);
    ck_assert_int_eq(count(err, "lines of the event log are being lost (a write failed"), 1);
    ck_assert_int_eq(count(err, "counted in the exit summary"), 2);
    ck_assert_int_eq(count_in(log, "this one fits"), 1);
    ck_assert_int_eq(count_in(log, "lost line"), 0);
}
END_TEST

/*
 * The writer thread stuck in write(2), as on a stalled NFS mount: here a pipe that
 * nobody reads, so the writer blocks once the pipe is full. Callers never wait:
 * every call returns, the lines beyond the queue are lost and counted, and once
 * the pipe is read again every line is either written whole or counted as lost.
 */
NG_TEST(a_stuck_writer_never_blocks_the_callers)
{
    capture_stderr();
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ncclguard_identity_init();
    static struct ng_sink sink = {.what = "the test file"};
    ncclguard_spool_start();
    char line[200];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    enum { LINES = 2000 }; /* 400 KB: far more than a pipe (64 KiB) and the queue take */
    int queued = 0;
    for (int i = 0; i < LINES; i++)
        queued += ncclguard_spool_write(&sink, p[1], line, sizeof line) == 0;
    uint64_t lost = ng_atomic_load_relaxed(&sink.lost);
    ck_assert_uint_gt(lost, 0);
    ck_assert_uint_eq(lost, LINES - queued);
    ck_assert_int_eq(count(said(), "lines of the test file are being lost (the file has not "
                                   "taken the lines queued before them)"),
                     1);
    /* the file comes back: everything queued is written, in whole lines */
    int fl = fcntl(p[0], F_GETFL);
    fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
    size_t got = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (ncclguard_spool_finish(100) == 0) { /* drained: one more read empties the pipe */
            while ((n = read(p[0], buf, sizeof buf)) > 0) got += (size_t)n;
            break;
        }
    }
    ck_assert_uint_eq(got, (size_t)queued * sizeof line);
    /* after finish, lines go straight to the file */
    ck_assert_int_eq(ncclguard_spool_write(&sink, p[1], line, sizeof line), 0);
    ck_assert_int_eq(read(p[0], buf, sizeof buf), (ssize_t)sizeof line);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_fixture_suite("output", "output", 0, setup, teardown, NULL));
}
