/*
 * test_shim_dump.c: the dump writer (shim/evidence/dump.c, shim/evidence/dump_body.c).
 *
 * The round trip: a registry with two communicators and a ring with records
 * in every state (wrapped, so that records were overwritten) are dumped, and
 * tests/unit/check_dump.py reads the file back with Python's json module and
 * checks the schema, every member, the values the test put in (written out
 * here as an expectation file) and the order of the records. The other tests
 * cover the file: mode, atomic replacement, symlinks, the fallback directory,
 * hostile names, the one-dump-at-a-time guard and the signal-handler path.
 *
 * Each test runs in its own process (Check's fork mode), so the ring and the
 * registry start empty in each.
 */
#include <check.h>

#include "check_main.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/identity.h"
#include "base/json.h"
#include "base/version.h"
#include "evidence/dump.h"
#include "evidence/dump_body.h"
#include "evidence/trigger.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/stacks.h"
#include "track/ops.h"

static char checker[PATH_MAX]; /* absolute path of tests/unit/check_dump.py */
static char repo[PATH_MAX];    /* the repository root (the cwd at start) */
static char root[64];          /* this test's temp dir */

/* snprintf into a PATH_MAX buffer, asserting that it fits. */
static void fmt_path(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fmt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    ck_assert_int_lt(n, PATH_MAX);
}

static void path_of(char *out, const char *leaf)
{
    fmt_path(out, "%s/%s", root, leaf);
}

/* Makes this test's temp dir; TMPDIR points into it, so that even a fallback
 * stays inside. */
static void make_root(void)
{
    strcpy(root, "/tmp/ng-dump-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char tmp[PATH_MAX];
    path_of(tmp, "tmp");
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    setenv("TMPDIR", tmp, 1);
    unsetenv("NCCLGUARD_DUMP_DIR");
    unsetenv("SLURM_JOB_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
}

extern char **environ;

/* Reloads the configuration from the environment only (no config files), as
 * the constructor would have with this environment, then inits the dump. */
static void init_dump(void)
{
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    ncclguard_dump_init();
}

/* Makes the test's folder the working directory, sets VAR to VALUE (a relative
 * or hostile setting is resolved from there) and inits the identity and the dumps. */
static void init_in_root(const char *var, const char *value)
{
    make_root();
    ck_assert_int_eq(chdir(root), 0);
    setenv(var, value, 1);
    ncclguard_identity_init();
    init_dump();
}

/* Sets the identity and the dump directory (NULL: the default) and inits. */
static void setup(const char *rank, const char *job, const char *dir_leaf)
{
    make_root();
    if (rank) setenv("RANK", rank, 1);
    if (job) setenv("SLURM_JOB_ID", job, 1);
    setenv("LOCAL_RANK", "1", 1);
    if (dir_leaf) {
        char dir[PATH_MAX];
        path_of(dir, dir_leaf);
        setenv("NCCLGUARD_DUMP_DIR", dir, 1);
    }
    ncclguard_identity_init();
    init_dump();
}

/* Number of entries in dir other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Runs the checker on a dump (and an expectation file, when given); asserts
 * that it passed. */
static void run_checker(const char *dump, const char *expect)
{
    ck_assert_msg(access(checker, R_OK) == 0, "%s not found: run from the repository root",
                  checker);
    char cmd[3 * PATH_MAX];
    fmt_path(cmd, "python3 '%s' schema %s%s '%s' 2>&1", checker, expect ? "--expect " : "",
             expect ? expect : "", dump);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "checker failed on %s:\n%s", dump,
                  out);
}

/* Runs the checker on dump with the expectation expect_json, written to expect.json first. */
static void run_checker_expecting(const char *dump, const char *expect_json)
{
    char expect[PATH_MAX];
    path_of(expect, "expect.json");
    FILE *f = fopen(expect, "w");
    ck_assert_ptr_nonnull(f);
    fputs(expect_json, f);
    ck_assert_int_eq(fclose(f), 0);
    run_checker(dump, expect);
}

/* ---- the scenario of the round trip ---- */

#define C1_ID 0x5f3a1c0000000001ULL
#define C2_ID 0x00000000000000a2ULL
#define CAPACITY 16
#define NRECORDS 20
#define T0 1700000000000000000LL

struct row {
    int op, state;
    int64_t dtype, redop, root;
    uint64_t flags;
    const char *op_name, *dtype_name, *redop_json, *flags_json;
};

/* Index i of the ring; indexes 0..3 are overwritten by 16..19. */
static const struct row rows[NRECORDS] = {
    {NG_OP_ALLREDUCE, NG_OP_COMPLETED, ncclFloat32, ncclSum, -1, 0, 0, 0, 0, 0},
    {NG_OP_ALLREDUCE, NG_OP_SCHEDULED, ncclFloat32, ncclSum, -1, 0, 0, 0, 0, 0}, /* dropped */
    {NG_OP_ALLREDUCE, NG_OP_COMPLETED, ncclFloat32, ncclSum, -1, 0, 0, 0, 0, 0},
    {NG_OP_ALLREDUCE, NG_OP_COMPLETED, ncclFloat32, ncclSum, -1, 0, 0, 0, 0, 0},
    {NG_OP_BROADCAST, NG_OP_COMPLETED, ncclBfloat16, -1, 2, NG_REC_FIRST, "Broadcast", "bfloat16",
     "null", "[\"first\"]"},
    {NG_OP_SEND, NG_OP_STARTED, ncclUint8, -1, 3, 0, "Send", "uint8", "null", "[]"},
    {NG_OP_RECV, NG_OP_STARTED, ncclUint8, -1, 0, 0, "Recv", "uint8", "null", "[]"},
    {NG_OP_ALLREDUCE, NG_OP_COMPLETED, ncclFloat16, ncclProd, -1, 0, "AllReduce", "float16",
     "\"prod\"", "[]"},
    {NG_OP_REDUCE, NG_OP_FAILED, ncclFloat64, ncclMax, 0, 0, "Reduce", "float64", "\"max\"", "[]"},
    {NG_OP_ALLGATHER, NG_OP_ABORTED, ncclInt8, -1, -1, 0, "AllGather", "int8", "null", "[]"},
    {NG_OP_REDUCESCATTER, NG_OP_CAPTURED, ncclInt64, ncclMin, -1, 0, "ReduceScatter", "int64",
     "\"min\"", "[]"},
    {NG_OP_ALLTOALL, NG_OP_COMPLETED, ncclUint64, -1, -1, NG_REC_SLOW, "AlltoAll", "uint64", "null",
     "[\"slow\"]"},
    {NG_OP_GATHER, NG_OP_COMPLETED, ncclInt32, -1, 1, 0, "Gather", "int32", "null", "[]"},
    {NG_OP_SCATTER, NG_OP_SCHEDULED, ncclUint32, -1, 1, NG_REC_DEFERRED, "Scatter", "uint32",
     "null", "[\"deferred\"]"},
    {NG_OP_ALLREDUCE, NG_OP_STARTED, ncclFloat8e4m3, ncclAvg, -1, NG_REC_TIMEOUT | NG_REC_SLOW,
     "AllReduce", "float8e4m3", "\"avg\"", "[\"slow\",\"timeout\"]"},
    {NG_OP_ALLREDUCE, NG_OP_COMPLETED, ncclFloat8e5m2, ncclNumOps + 2, -1, 0, "AllReduce",
     "float8e5m2", "\"premulsum/7\"", "[]"},
    {NG_OP_BCAST, NG_OP_COMPLETED, 42, -1, 0, 0x1000, "Bcast", "unknown/42", "null",
     "[\"bit12\"]"}, /* a bit without a name (bits 6, 8-11 are the shim's own, never shown) */
    {NG_OP_ALLREDUCE, NG_OP_SCHEDULED, ncclFloat32, ncclSum, -1, NG_REC_TIMEOUT | NG_REC_FIRST,
     "AllReduce", "float32", "\"sum\"", "[\"timeout\",\"first\"]"},
    {NG_OP_ALLREDUCE, NG_OP_SCHEDULED, ncclFloat32, ncclSum, -1, 0, "AllReduce", "float32",
     "\"sum\"", "[]"},
    /* appended scheduled, then advanced to started with its GPU start time */
    {NG_OP_ALLREDUCE, NG_OP_STARTED, ncclFloat32, ncclSum, -1, 0, "AllReduce", "float32", "\"sum\"",
     "[]"},
};

/* Dump order: in flight newest first, then the others newest first. */
static const int dump_order[] = {19, 18, 17, 14, 13, 6, 5, 16, 15, 12, 11, 10, 9, 8, 7, 4};

static int is_p2p(int op)
{
    return op == NG_OP_SEND || op == NG_OP_RECV;
}

static int has_start(int state)
{
    return state == NG_OP_STARTED || state == NG_OP_COMPLETED;
}

static struct ng_comm *c1, *c2;

/* Record i as a writer stores it, with the fields that a copy derives (the
 * communicator's, the bytes, the CLOCK_REALTIME time) set as the dump must
 * show them: build_registry and build_ring make the copy derive the same. */
static void fill(struct ng_op_record *r, int i)
{
    const struct row *w = &rows[i];
    memset(r, 0, sizeof *r);
    r->comm_slot = i % 2 ? c2->slot : c1->slot;
    r->comm_id = i % 2 ? C2_ID : C1_ID;
    r->comm_rank = i % 2 ? 0 : 1;
    r->comm_nranks = i % 2 ? 2 : 4;
    r->seq = is_p2p(w->op) ? 0 : (uint64_t)i + 1;
    r->p2p_seq = w->op == NG_OP_SEND ? 1 : w->op == NG_OP_RECV ? 2 : 0;
    r->op = w->op;
    r->count = 1024u * ((uint64_t)i + 1);
    r->dtype = w->dtype;
    r->bytes = r->count * ng_dtype_size(w->dtype);
    r->redop = w->redop;
    r->root = w->root;
    r->stream = 0x7f0000001000ULL + (uint64_t)i * 0x10;
    r->group_id = is_p2p(w->op) ? 7 : 0;
    r->thread_id = 4242u + (uint64_t)i;
    r->enqueue_ns = T0 + i * 1000;
    r->enqueue_mono_ns = 5000000 + i * 1000;
    r->marker = i % 3 == 0 ? NG_NO_MARKER : i;
    r->stack = NG_NO_STACK; /* stacks with frames: tests/e2e/stacks.sh */
    r->result = w->state == NG_OP_FAILED ? ncclInvalidUsage : ncclSuccess;
    r->flags = w->flags;
    if (has_start(w->state) && i != 19) {
        r->gpu_start_ns = r->enqueue_ns + 1000;
        r->seen_start_ns = r->enqueue_ns + 1500;
    }
    if (w->state == NG_OP_COMPLETED) {
        r->gpu_end_ns = r->enqueue_ns + 2000;
        r->seen_end_ns = r->enqueue_ns + 2500;
    }
}

/* Appends r as an application thread would, then gives it its times as the
 * observer learns them: a writer never stores them in the ring. */
static uint64_t append(const struct ng_op_record *r, int state)
{
    uint64_t i = ncclguard_flight_append(r, state);
    const int64_t t[] = {r->gpu_start_ns, r->gpu_end_ns, r->seen_start_ns, r->seen_end_ns};
    const enum ng_watch_field f[] = {NG_WATCH_GPU_START, NG_WATCH_GPU_END, NG_WATCH_SEEN_START,
                                     NG_WATCH_SEEN_END};
    for (int k = 0; k < 4; k++)
        if (t[k]) ncclguard_flight_watch(i, NG_WATCHER_OBSERVER, f[k], (uint64_t)t[k]);
    return i;
}

static void build_registry(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "trainer \"main\"\n\xff";
    c1 = ncclguard_comm_new(C1_ID, 1, 4, 0, &cfg);
    ck_assert_ptr_nonnull(c1);
    ncclguard_comm_attach(c1, (ncclComm_t)(uintptr_t)0x1000);
    ncclguard_comm_set_state(c1, NG_COMM_READY);
    c1->device = 5;
    ng_atomic_store_relaxed(&c1->coll_seq, 12);
    ng_atomic_store_relaxed(&c1->completed_seq, 10);
    c1->peers[0] = (struct ng_peer){5, 4}; /* peers 1 and 3: no traffic, not listed */
    c1->peers[2] = (struct ng_peer){2, 2};
    c2 = ncclguard_comm_new(C2_ID, 0, 2, C1_ID, NULL);
    ck_assert_ptr_nonnull(c2);
    ncclguard_comm_set_state(c2, NG_COMM_ABORTED);
    ng_atomic_store_relaxed(&c2->coll_seq, 3);
    ng_atomic_store_relaxed(&c2->completed_seq, 3);
    ng_atomic_store_relaxed(&c2->last_async_error, ncclRemoteError);
}

static void build_ring(void)
{
    ck_assert_int_eq(ncclguard_flight_init(CAPACITY), 0);
    ncclguard_flight_set_realtime_offset(T0 - 5000000); /* fill's clocks */
    struct ng_op_record r;
    for (int i = 0; i < NRECORDS; i++) {
        fill(&r, i);
        int state = i == 19 ? NG_OP_SCHEDULED : rows[i].state;
        ck_assert_uint_eq(append(&r, state), (uint64_t)i);
    }
    ck_assert_int_eq(ncclguard_flight_advance(19, NG_OP_SCHEDULED, NG_OP_STARTED), 0);
    ncclguard_flight_watch(19, NG_WATCHER_OBSERVER, NG_WATCH_GPU_START, T0 + 19 * 1000 + 1000);
    ncclguard_flight_watch(19, NG_WATCHER_OBSERVER, NG_WATCH_SEEN_START, T0 + 19 * 1000 + 1500);
}

static void opt_int(FILE *f, const char *key, int64_t v, int is_null)
{
    if (is_null)
        fprintf(f, "\"%s\":null,", key);
    else
        fprintf(f, "\"%s\":%lld,", key, (long long)v);
}

static void expect_op(FILE *f, int i)
{
    struct ng_op_record r;
    fill(&r, i);
    if (i == 19) {
        r.gpu_start_ns = T0 + 19 * 1000 + 1000;
        r.seen_start_ns = T0 + 19 * 1000 + 1500;
    }
    const struct row *w = &rows[i];
    fprintf(f, "{\"index\":%d,\"comm\":\"%016llx\",\"comm_rank\":%lld,\"comm_nranks\":%lld,", i,
            (unsigned long long)r.comm_id, (long long)r.comm_rank, (long long)r.comm_nranks);
    opt_int(f, "seq", (int64_t)r.seq, r.seq == 0);
    opt_int(f, "p2p_seq", (int64_t)r.p2p_seq, r.p2p_seq == 0);
    fprintf(f, "\"op\":\"%s\",\"count\":%llu,\"datatype\":\"%s\",\"bytes\":%llu,\"redop\":%s,",
            w->op_name, (unsigned long long)r.count, w->dtype_name, (unsigned long long)r.bytes,
            w->redop_json);
    opt_int(f, "root", w->root, is_p2p(w->op) || w->root < 0);
    opt_int(f, "peer", w->root, !is_p2p(w->op));
    fprintf(f, "\"stream\":\"%016llx\",", (unsigned long long)r.stream);
    opt_int(f, "group", (int64_t)r.group_id, r.group_id == 0);
    fprintf(f, "\"thread\":%llu,\"enqueue_ns\":%lld,\"enqueue_mono_ns\":%lld,\"state\":\"%s\",",
            (unsigned long long)r.thread_id, (long long)r.enqueue_ns, (long long)r.enqueue_mono_ns,
            ng_op_state_name(w->state));
    opt_int(f, "gpu_start_ns", r.gpu_start_ns, r.gpu_start_ns == 0);
    opt_int(f, "gpu_end_ns", r.gpu_end_ns, r.gpu_end_ns == 0);
    opt_int(f, "seen_start_ns", r.seen_start_ns, r.seen_start_ns == 0);
    opt_int(f, "seen_end_ns", r.seen_end_ns, r.seen_end_ns == 0);
    fprintf(f, "\"times\":%s,",
            r.gpu_start_ns || r.gpu_end_ns     ? "\"sampled\""
            : r.seen_start_ns || r.seen_end_ns ? "\"discovered\""
                                               : "null");
    fprintf(f, "\"result\":%lld,\"flags\":%s,", (long long)r.result, w->flags_json);
    opt_int(f, "marker", r.marker, r.marker < 0);
    opt_int(f, "stack", r.stack, r.stack < 0);
    fseek(f, -1, SEEK_CUR); /* the last comma */
    fprintf(f, "}");
}

/* Writes the expected values of the round trip into `path`. */
static void write_expectation(const char *path, const char *reason, int64_t t_lo, int64_t t_hi)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    const struct ng_identity *id = ncclguard_identity();
    fprintf(f,
            "{\"top\":{\"schema\":\"ncclguard.dump/2.2\",\"reason\":\"%s\",\"host\":\"%s\","
            "\"pid\":%d,\"rank\":3,\"local_rank\":1,\"job\":\"job42\","
            "\"versions\":{\"ncclguard\":\"%s\",\"nccl\":null,\"python\":null},"
            "\"env\":{\"RANK\":\"3\",\"LOCAL_RANK\":\"1\",\"NCCL_DEBUG\":\"WARN\"}},\n",
            reason, id->host, (int)getpid(), NCCLGUARD_VERSION);
    fprintf(f, "\"time_ns\":[%lld,%lld],\n", (long long)t_lo, (long long)t_hi);
    fprintf(f,
            "\"flight\":{\"capacity\":%d,\"recorded\":%d,\"overwritten\":%d,"
            "\"dropped_inflight\":1},\n",
            CAPACITY, NRECORDS, NRECORDS - CAPACITY);
    fprintf(f,
            "\"comms\":[{\"id\":\"5f3a1c0000000001\",\"rank\":1,\"nranks\":4,\"device\":5,"
            "\"name\":\"trainer \\\"main\\\"\\n\\ufffd\",\"state\":\"ready\",\"blocking\":false,"
            "\"parent\":null,\"created_ns\":%lld,\"last_seq\":12,\"last_completed_seq\":10,"
            "\"last_async_error\":0,\"peers\":[{\"peer\":0,\"last_p2p_seq\":5,"
            "\"last_completed_p2p_seq\":4},{\"peer\":2,\"last_p2p_seq\":2,"
            "\"last_completed_p2p_seq\":2}]},\n",
            (long long)c1->created_ns);
    fprintf(f,
            "{\"id\":\"00000000000000a2\",\"rank\":0,\"nranks\":2,\"device\":null,"
            "\"name\":null,\"state\":\"aborted\",\"blocking\":true,"
            "\"parent\":\"5f3a1c0000000001\",\"created_ns\":%lld,\"last_seq\":3,"
            "\"last_completed_seq\":3,\"last_async_error\":%d,\"peers\":[]}],\n",
            (long long)c2->created_ns, (int)ncclRemoteError);
    fprintf(f, "\"ops\":[");
    for (size_t k = 0; k < sizeof dump_order / sizeof dump_order[0]; k++) {
        if (k) fprintf(f, ",\n");
        expect_op(f, dump_order[k]);
    }
    fprintf(f, "]}\n");
    ck_assert_int_eq(fclose(f), 0);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The name a dump of this process gets, for rank string r and host h. */
static void dump_name(char *out, const char *r, const char *h)
{
    fmt_path(out, "ncclguard-r%s-%s-%d.json", r, h, (int)getpid());
}

NG_TEST(round_trip)
{
    /* env: the allowed variable is written; the others are not (the checker
     * fails on any name off its own allowlist). */
    setenv("NCCL_DEBUG", "WARN", 1);
    setenv("SECRET_TOKEN", "do-not-dump", 1);
    setenv("NCCL_", "a prefix alone is no name", 1);
    setenv("MY_NCCL_HOME", "/opt", 1);
    setup("3", "job42", "dumps/a/b");
    build_registry();
    build_ring();
    char path[PATH_MAX], want[PATH_MAX], name[PATH_MAX], expect[PATH_MAX];
    int64_t lo = now_ns();
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    int64_t hi = now_ns();
    dump_name(name, "3", ncclguard_identity()->host);
    fmt_path(want, "%s/dumps/a/b/%s", root, name);
    ck_assert_str_eq(path, want);
    path_of(expect, "expect.json");
    write_expectation(expect, "timeout", lo, hi);
    run_checker(path, expect);

    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600);
    char dir[PATH_MAX];
    path_of(dir, "dumps/a/b");
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0700);
    ck_assert_int_eq(entries(dir), 1); /* no temp file left */
}
END_TEST

/* The text of the file at path, NUL-terminated; the caller frees it. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The record of ring index i as expect_op prints it, into out[cap]. */
static void expected_op_text(int i, char *out, size_t cap)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    expect_op(f, i);
    long n = ftell(f);
    ck_assert(n > 0 && (size_t)n < cap);
    rewind(f);
    ck_assert_uint_eq(fread(out, 1, (size_t)n, f), (size_t)n);
    out[n] = '\0';
    fclose(f);
}

/* The records of the round trip, byte for byte: each line of "ops" is what
 * expect_op prints for it with fprintf, independently of the writer. The
 * writer formats them in runs (json.h), which must give exactly the bytes of
 * its one-call-per-key-and-value way: the checker compares parsed values and
 * would miss a difference in the text. */
NG_TEST(ops_bytes_as_printf_writes_them)
{
    setup("3", "job42", "d");
    build_registry();
    build_ring();
    char path[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    char *text = read_text(path);
    static const char start[] = "\n\"ops\":[\n";
    char *line = strstr(text, start);
    ck_assert_ptr_nonnull(line);
    line += strlen(start);
    const size_t n = sizeof dump_order / sizeof dump_order[0];
    for (size_t k = 0; k < n; k++) {
        char want[2048];
        expected_op_text(dump_order[k], want, sizeof want - 1);
        if (k + 1 < n) strcat(want, ",");
        char *end = strchr(line, '\n');
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        ck_assert_str_eq(line, want);
        line = end + 1;
    }
    ck_assert_msg(!strncmp(line, "],\n", 3), "more records than expected: %.80s", line);
    free(text);
}
END_TEST

NG_TEST(schema_header_docs_agree)
{
    ck_assert_msg(access(checker, R_OK) == 0, "%s not found: run from the repository root",
                  checker);
    char cmd[3 * PATH_MAX];
    fmt_path(cmd, "cd '%s' && python3 '%s' format shim/evidence/dump_format.h docs/dump-format.md",
             repo, checker);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
                  "shim/evidence/dump_format.h, docs/dump-format.md and check_dump.py disagree");
}
END_TEST

/* A reader of version 2 still reads 1.x files, and rejects unknown majors. */
NG_TEST(checker_reads_1x_and_rejects_3)
{
    char old[PATH_MAX], cmd[3 * PATH_MAX];
    fmt_path(old, "%s/tests/fixtures/dumps/dump-1.2.json", repo);
    run_checker(old, NULL);
    make_root();
    char three[PATH_MAX];
    path_of(three, "three.json");
    fmt_path(cmd,
             "sed 's#ncclguard.dump/1.2#ncclguard.dump/3#' '%s' > '%s' && "
             "python3 '%s' schema '%s' >/dev/null 2>&1",
             old, three, checker, three);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "a /3 dump was accepted (%d)", rc);
}
END_TEST

NG_TEST(large_dump_streams_through_the_buffer)
{
    setup("0", "big", "d");
    build_registry();
    ck_assert_int_eq(ncclguard_flight_init(512), 0);
    struct ng_op_record r;
    for (int i = 0; i < 700; i++) {
        fill(&r, 7);
        r.seq = (uint64_t)i + 1;
        append(&r, i % 5 ? NG_OP_COMPLETED : NG_OP_STARTED);
    }
    char path[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("exit", path, sizeof path), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_gt(st.st_size, 2 * 65536);
    run_checker_expecting(path,
                          "{\"top\":{\"reason\":\"exit\",\"rank\":0},\"ops_count\":512,"
                          "\"flight\":{\"capacity\":512,\"recorded\":700,\"overwritten\":188}}\n");
}
END_TEST

static ng_atomic(int) stop_writers;

/* Appends records until told to stop, some left in flight and some advanced,
 * as application threads and the watchdog would. */
static void *writer(void *arg)
{
    struct ng_op_record r;
    fill(&r, 7);
    r.thread_id = (uint64_t)(uintptr_t)arg;
    uint64_t n = 0;
    while (!ng_atomic_load_relaxed(&stop_writers)) {
        r.seq = ++n;
        uint64_t i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
        if (n % 3) ncclguard_flight_advance(i, NG_OP_SCHEDULED, NG_OP_COMPLETED);
    }
    return NULL;
}

NG_TEST(dump_while_writers_append)
{
    setup("0", "job42", "d");
    build_registry();
    ck_assert_int_eq(ncclguard_flight_init(64), 0);
    pthread_t t[2];
    for (uintptr_t k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, writer, (void *)(k + 1)), 0);
    char path[PATH_MAX];
    for (int d = 0; d < 5; d++) {
        ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
        run_checker(path, NULL); /* valid, each record once, in dump order */
    }
    ng_atomic_store_relaxed(&stop_writers, 1);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
}
END_TEST

/* Runs the check every dump of the end-to-end tests must pass
 * (check_dump.py sane) on one dump. */
static void run_sane(const char *dump)
{
    char cmd[3 * PATH_MAX];
    fmt_path(cmd, "python3 '%s' sane '%s'", checker, dump);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "check_dump.py sane failed on %s", dump);
}

/* An application thread and the watchdog in one: numbers a collective of c1
 * and appends it, then counts it completed and publishes that, in the order
 * of track/ops.c and watch/observer.c. */
static void *collectives(void *arg)
{
    (void)arg;
    struct ng_op_record r;
    fill(&r, 7);
    r.comm_id = C1_ID;
    r.comm_slot = c1->slot;
    r.marker = NG_NO_MARKER;
    r.gpu_end_ns = r.seen_end_ns = r.enqueue_ns + 2000;
    while (!ng_atomic_load_relaxed(&stop_writers)) {
        r.seq = ng_atomic_add_relaxed(&c1->coll_seq, 1) + 1;
        uint64_t i = append(&r, NG_OP_SCHEDULED);
        ncclguard_comm_count_completed(c1, r.seq, -1, 0);
        ncclguard_flight_advance(i, NG_OP_SCHEDULED, NG_OP_COMPLETED);
    }
    return NULL;
}

/* A dump taken while ops are called and complete lists none beyond its
 * communicator's counters (seen once in CI: a completed op above
 * last_completed_seq, when comms were read before the ops), and no completed op
 * without its end time (a record overwritten between its copy and the merge of
 * what lay beside it: the small ring laps often). */
NG_TEST(comm_counters_cover_the_listed_ops)
{
    setup("0", "job42", "d");
    build_registry();
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, collectives, NULL), 0);
    char path[PATH_MAX];
    for (int d = 0; d < 20; d++) {
        ck_assert_int_eq(ncclguard_dump_write("signal", path, sizeof path), 0);
        run_sane(path);
    }
    ng_atomic_store_relaxed(&stop_writers, 1);
    pthread_join(t, NULL);
}
END_TEST

NG_TEST(later_dump_replaces_earlier)
{
    setup("2", "job42", "d");
    build_registry();
    char p1[PATH_MAX], p2[PATH_MAX], dir[PATH_MAX];
    errno = ERANGE;
    ck_assert_int_eq(ncclguard_dump_write("first", p1, sizeof p1), 0);
    ck_assert_int_eq(errno, ERANGE); /* left as found, as a signal handler needs */
    ck_assert_int_eq(ncclguard_dump_write("manual \"second\"", p2, sizeof p2), 0);
    ck_assert_str_eq(p1, p2);
    path_of(dir, "d");
    ck_assert_int_eq(entries(dir), 1);
    run_checker_expecting(p2, "{\"top\":{\"reason\":\"manual \\\"second\\\"\",\"ops\":[],"
                              "\"flight\":{\"capacity\":0,\"recorded\":0}}}\n");
}
END_TEST

/* Plants a symlink at `leaf` in the dump dir pointing to a file outside it,
 * dumps, and checks that the file was left alone and the link replaced or
 * removed. */
static void check_symlink_not_followed(int at_temp)
{
    setup("1", "job42", "d");
    char dir[PATH_MAX], target[PATH_MAX], link[PATH_MAX], name[PATH_MAX], path[PATH_MAX];
    path_of(dir, "d");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    path_of(target, "precious");
    FILE *f = fopen(target, "w");
    fputs("keep", f);
    fclose(f);
    dump_name(name, "1", ncclguard_identity()->host);
    fmt_path(link, "%s/%s%s", dir, name, at_temp ? ".tmp" : "");
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    char want[PATH_MAX];
    fmt_path(want, "%s/%s", dir, name);
    ck_assert_str_eq(path, want); /* not in the fallback */
    char buf[16] = {0};
    f = fopen(target, "r");
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), 4);
    fclose(f);
    ck_assert_str_eq(buf, "keep");
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(entries(dir), 1); /* the dump only: no link, no temp */
    run_checker(path, NULL);
}

NG_TEST(symlink_at_final_name_not_followed)
{
    check_symlink_not_followed(0);
}
END_TEST

NG_TEST(symlink_at_temp_name_not_followed)
{
    check_symlink_not_followed(1);
}
END_TEST

/* Runs fn with stderr going to a file; returns what was written there. */
static char *capture_stderr(int (*fn)(char *), char *path, int *rc)
{
    char log[PATH_MAX];
    path_of(log, "stderr.txt");
    int fd = open(log, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    *rc = fn(path);
    dup2(saved, STDERR_FILENO);
    close(saved);
    static char text[8192];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    return text;
}

static int dump_timeout(char *path)
{
    return ncclguard_dump_write("timeout", path, PATH_MAX);
}

/* This test's root with NCCLGUARD_DUMP_DIR (in dir) below a plain file, where no directory
 * can be made, and SLURM_JOB_ID job42; tmpdir gets the root's TMPDIR. */
static void root_with_unmakeable_dir(char *dir, char *tmpdir)
{
    char file[PATH_MAX];
    make_root();
    path_of(file, "plainfile");
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    fmt_path(dir, "%s/sub", file);
    path_of(tmpdir, "tmp");
    setenv("NCCLGUARD_DUMP_DIR", dir, 1);
    setenv("SLURM_JOB_ID", "job42", 1);
}

NG_TEST(unwritable_dir_falls_back_to_tmpdir)
{
    char dir[PATH_MAX], tmpdir[PATH_MAX], fallback[PATH_MAX];
    root_with_unmakeable_dir(dir, tmpdir);
    setenv("RANK", "5", 1);
    ncclguard_identity_init();
    init_dump();
    build_registry();
    char path[PATH_MAX];
    int rc;
    const char *said = capture_stderr(dump_timeout, path, &rc);
    ck_assert_int_eq(rc, 0);
    fmt_path(fallback, "%s/ncclguard-job42", tmpdir);
    ck_assert_msg(strncmp(path, fallback, strlen(fallback)) == 0, "dump at %s", path);
    ck_assert_str_eq(ncclguard_dump_dir(), fallback);
    ck_assert_msg(strstr(said, fallback) && strstr(said, dir) && strstr(said, "ENOTDIR"),
                  "the fallback is not explained: '%s'", said);
    ck_assert_msg(strncmp(said, "ncclguard: ", 11) == 0, "no prefix: '%s'", said);
    run_checker(path, NULL);
    /* said once: the second dump goes to the fallback silently */
    said = capture_stderr(dump_timeout, path, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(said, "");
    ck_assert_int_eq(entries(fallback), 1);
}
END_TEST

NG_TEST(foreign_fallback_dir_is_refused)
{
    char dir[PATH_MAX], tmpdir[PATH_MAX], fallback[PATH_MAX];
    root_with_unmakeable_dir(dir, tmpdir);
    fmt_path(fallback, "%s/ncclguard-job42", tmpdir);
    ck_assert_int_eq(mkdir(fallback, 0700), 0);
    ck_assert_int_eq(chmod(fallback, 0777), 0); /* as if someone else had made it */
    ncclguard_identity_init();
    init_dump();
    char path[PATH_MAX] = "";
    int rc;
    const char *said = capture_stderr(dump_timeout, path, &rc);
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(entries(fallback), 0);
    ck_assert_msg(strstr(said, "cannot write the dump") && strstr(said, "EPERM"),
                  "the failure is not explained: '%s'", said);
    /* a fallback that is a symlink is refused too */
    ck_assert_int_eq(rmdir(fallback), 0);
    ck_assert_int_eq(symlink(root, fallback), 0);
    ck_assert_int_eq(dump_timeout(path), -1);
}
END_TEST

NG_TEST(hostile_job_id_stays_inside)
{
    init_in_root("SLURM_JOB_ID", "../../etc x/y");
    char path[PATH_MAX], want[PATH_MAX], name[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    dump_name(name, "x", ncclguard_identity()->host);
    fmt_path(want, "%s/ncclguard-_._.._etc_x_y/%s", root, name);
    ck_assert_str_eq(path, want);
    ck_assert_int_eq(entries(root), 2); /* the dump dir and the empty TMPDIR */
    ck_assert_int_eq(entries(getenv("TMPDIR")), 0);
    run_checker(path, NULL);
}
END_TEST

NG_TEST(hostile_host_and_long_job_are_sanitised)
{
    make_root();
    char job[300];
    memset(job, 'j', sizeof job - 1);
    job[sizeof job - 1] = '\0';
    setenv("SLURM_JOB_ID", job, 1);
    ck_assert_int_eq(chdir(root), 0);
    ncclguard_identity_init();
    /* the identity is the module's static struct: this test may change it */
    struct ng_identity *id = (struct ng_identity *)ncclguard_identity();
    strcpy(id->host, ".hidden/../x y\n");
    init_dump();
    char path[PATH_MAX], want[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    fmt_path(want, "%s/ncclguard-%.64s/ncclguard-rx-_hidden_.._x_y_-%d.json", root, job,
             (int)getpid());
    ck_assert_str_eq(path, want);
    ck_assert_int_eq(entries(root), 2); /* the dump dir and the empty TMPDIR */
    ck_assert_int_eq(entries(getenv("TMPDIR")), 0);
    /* the JSON keeps the real values, escaped */
    run_checker_expecting(path, "{\"top\":{\"host\":\".hidden/../x y\\n\",\"rank\":null}}\n");
}
END_TEST

static int inner_rc, inner_errno;

/* A config writer that tries to start a second dump while the first runs. */
static void config_with_nested_dump(struct ng_json *j)
{
    char path[PATH_MAX];
    errno = 0;
    inner_rc = ncclguard_dump_write("nested", path, sizeof path);
    inner_errno = errno;
    ncclguard_json_begin_object(j);
    ncclguard_json_key(j, "inner_rc");
    ncclguard_json_int64(j, inner_rc);
    ncclguard_json_end_object(j);
}

NG_TEST(second_concurrent_dump_is_refused_and_config_hook)
{
    setup("3", "job42", "d");
    ncclguard_dump_set_config_writer(config_with_nested_dump);
    char path[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    ck_assert_int_eq(inner_rc, -1);
    ck_assert_int_eq(inner_errno, EBUSY);
    run_checker_expecting(path,
                          "{\"top\":{\"reason\":\"timeout\",\"config\":{\"inner_rc\":-1}}}\n");
    /* the guard was released: the next dump works */
    ncclguard_dump_set_config_writer(NULL);
    ck_assert_int_eq(ncclguard_dump_write("again", path, sizeof path), 0);
}
END_TEST

static void config_writes_nothing(struct ng_json *j)
{
    (void)j;
}

NG_TEST(config_hook_that_writes_nothing_gives_null)
{
    setup("3", "job42", "d");
    ncclguard_dump_set_config_writer(config_writes_nothing);
    char path[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    run_checker_expecting(path, "{\"top\":{\"config\":null}}\n");
}
END_TEST

static int child_status = -1;

/* A config writer that forks: the child starts clean and may dump. */
static void config_forks(struct ng_json *j)
{
    pid_t pid = fork();
    if (pid == 0) {
        ncclguard_dump_atfork_child();
        ncclguard_dump_set_config_writer(NULL);
        char path[PATH_MAX];
        _exit(ncclguard_dump_write("child", path, sizeof path) == 0 ? 0 : 1);
    }
    waitpid(pid, &child_status, 0);
    ncclguard_json_null(j);
}

NG_TEST(fork_child_may_dump)
{
    setup("3", "job42", "d");
    ncclguard_dump_set_config_writer(config_forks);
    char path[PATH_MAX], dir[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("parent", path, sizeof path), 0);
    ck_assert(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0);
    path_of(dir, "d");
    ck_assert_int_eq(entries(dir), 2); /* the parent's and the child's (another pid) */
}
END_TEST

static int signal_rc = 1;
static char signal_path[PATH_MAX];

static void on_signal(int sig)
{
    (void)sig;
    signal_rc = ncclguard_dump_write_signal("signal", signal_path, sizeof signal_path);
}

NG_TEST(dump_from_signal_handler)
{
    setup("3", "job42", "d");
    build_registry();
    build_ring();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR2, &sa, NULL);
    raise(SIGUSR2);
    ck_assert_int_eq(signal_rc, 0);
    run_checker_expecting(signal_path, "{\"top\":{\"reason\":\"signal\"},\"ops_count\":16}\n");
}
END_TEST

NG_TEST(dump_before_init_fails)
{
    char path[PATH_MAX] = "untouched";
    errno = 0;
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_str_eq(path, "untouched");
    ck_assert_str_eq(ncclguard_dump_dir(), "");
}
END_TEST

NG_TEST(dump_dir_from_config_file)
{
    make_root();
    setenv("SLURM_JOB_ID", "job42", 1);
    ncclguard_identity_init();
    char text[PATH_MAX + 64], want[PATH_MAX];
    path_of(want, "site-dumps");
    snprintf(text, sizeof text, "[ncclguard]\ndump_dir = %s\n", want);
    ncclguard_config_begin(0);
    ncclguard_config_add_buffer(NG_SRC_SITE, "site.conf", text, strlen(text));
    ncclguard_config_finish(environ);
    ncclguard_dump_init();
    ck_assert_str_eq(ncclguard_dump_dir(), want);
    /* NCCLGUARD_DUMP_DIR wins over the file */
    char env_dir[PATH_MAX];
    path_of(env_dir, "env-dumps");
    setenv("NCCLGUARD_DUMP_DIR", env_dir, 1);
    ncclguard_config_begin(0);
    ncclguard_config_add_buffer(NG_SRC_SITE, "site.conf", text, strlen(text));
    ncclguard_config_finish(environ);
    ncclguard_dump_init();
    ck_assert_str_eq(ncclguard_dump_dir(), env_dir);
}
END_TEST

NG_TEST(relative_dir_is_resolved_at_init)
{
    init_in_root("NCCLGUARD_DUMP_DIR", "rel/dumps/");
    ck_assert_int_eq(chdir("/"), 0); /* the job changes directory later */
    char path[PATH_MAX], want[PATH_MAX];
    ck_assert_int_eq(ncclguard_dump_write("timeout", path, sizeof path), 0);
    path_of(want, "rel/dumps");
    ck_assert_str_eq(ncclguard_dump_dir(), want);
    ck_assert_msg(strncmp(path, want, strlen(want)) == 0, "dump at %s", path);
    /* a short path_out is truncated, never overrun */
    char small[8];
    memset(small, 'z', sizeof small);
    ck_assert_int_eq(ncclguard_dump_write("timeout", small, 5), 0);
    ck_assert_str_eq(small, "/tmp");
    ck_assert_int_eq(small[5], 'z');
}
END_TEST

/* A process's poller lock file in the node directory. */
static int lock_files(const char *node)
{
    DIR *d = opendir(node);
    ck_assert_msg(d != NULL, "cannot open %s", node);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, "poller-", 7);
    closedir(d);
    return n;
}

/* This test's root with NCCLGUARD_NODE_DIR set to a new directory in it, then identity and
 * dump initialised; node gets this user's node directory (made by ncclguard_trigger_init). */
static void init_with_node_dir(char *node)
{
    char base[PATH_MAX];
    make_root();
    path_of(base, "node");
    ck_assert_int_eq(mkdir(base, 0700), 0);
    setenv("NCCLGUARD_NODE_DIR", base, 1);
    fmt_path(node, "%s/ncclguard-%u", base, (unsigned)geteuid());
    ncclguard_identity_init();
    init_dump();
}

/* The dump thread goes on polling while the process exits; once the exit handler
 * has run it takes no poller lock, which nobody would remove (seen in e2e/hostile:
 * a job's lock file left after the job). */
NG_TEST(no_poller_lock_after_exit)
{
    char node[PATH_MAX];
    init_with_node_dir(node);
    ncclguard_trigger_init();
    ncclguard_trigger_exit(); /* before this process became the poller */
    ncclguard_trigger_check();
    ck_assert_int_eq(lock_files(node), 0);
    ncclguard_trigger_init();
    ncclguard_trigger_check();
    ck_assert_int_eq(lock_files(node), 1); /* the poller's */
    ncclguard_trigger_exit();
    ck_assert_int_eq(lock_files(node), 0);
    unsetenv("NCCLGUARD_NODE_DIR");
}
END_TEST

/* A process that is not the node's poller checks nothing on a timer: its dump
 * thread sleeps until the node directory changes. When the poller's lock is
 * let go (here: its holder closes it, as a killed poller's exit does), the
 * change wakes it and it becomes the poller, which checks every period. */
NG_TEST(non_poller_waits_for_the_lock_to_go)
{
    char node[PATH_MAX], lock[PATH_MAX + 64];
    init_with_node_dir(node);
    ncclguard_trigger_init(); /* makes the node directory */
    snprintf(lock, sizeof lock, "%s/poller-%016llx.lock", node,
             (unsigned long long)ng_hash_str(ncclguard_dump_dir()));
    int held = open(lock, O_RDWR | O_CREAT, 0600); /* another process's poller */
    ck_assert_int_ge(held, 0);
    ck_assert_int_eq(flock(held, LOCK_EX | LOCK_NB), 0);
    int fd = ncclguard_trigger_wait_fd();
    ck_assert_int_ge(fd, 0);
    int64_t period = 100000000, now = ng_clock_ns(CLOCK_MONOTONIC);
    ck_assert_int_le(ncclguard_trigger_next_ns(now, period), now); /* the first try */
    ncclguard_trigger_check();
    now = ng_clock_ns(CLOCK_MONOTONIC);
    ck_assert_int_eq(ncclguard_trigger_next_ns(now, period), INT64_MAX);
    close(held);
    struct pollfd p = {fd, POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, 30000), 1); /* a generous bound: the close wakes it */
    ncclguard_trigger_check();
    now = ng_clock_ns(CLOCK_MONOTONIC);
    int64_t next = ncclguard_trigger_next_ns(now, period);
    ck_assert_int_lt(next, INT64_MAX); /* the poller: its stat of TRIGGER each period */
    ck_assert_int_gt(next, now);
    ncclguard_trigger_exit();
    unsetenv("NCCLGUARD_NODE_DIR");
}
END_TEST

/* Removes the temp dir of a test that passed (a failed one keeps it to look at). */
static void cleanup(void)
{
    if (!root[0] || strncmp(root, "/tmp/ng-dump-", 13) != 0) return;
    char cmd[PATH_MAX + 16];
    fmt_path(cmd, "rm -rf '%s'", root);
    if (chdir("/") != 0 || system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

int main(void)
{
    if (!getcwd(repo, sizeof repo) || strlen(repo) + 32 > sizeof checker) return EXIT_FAILURE;
    strcpy(checker, repo);
    strcat(checker, "/tests/unit/check_dump.py");
    return ng_check_run(ng_check_fixture_suite("shim_dump", "dump", 60, NULL, cleanup, NULL));
}
