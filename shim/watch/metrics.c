/*
 * metrics.c: see metrics.h.
 *
 * The counters kept here are written by one observer pass at a time and read
 * by the enforcer while it writes the file, all with relaxed atomics: a file
 * may show one op's end in one family and not yet in the next, never a torn
 * number. A histogram's buckets are written cumulative from the bucket counts,
 * and its _count is their sum, so that the +Inf bucket and _count always agree.
 *
 * The dump thread writes it (watch/dumper.c), so that a file system that
 * hangs holds up no timeout. The file is composed in a static buffer and written through it with
 * write(2), into "<name>.tmp" (created O_EXCL | O_NOFOLLOW, mode 0644: the
 * collector runs as another user), then renamed over "<name>". No fsync: the
 * file is current for one interval only. Every name is relative to the
 * directory opened and checked once at start (base/outfile.h), so that a
 * directory swapped meanwhile cannot redirect the file. A write that fails says
 * so in one line and ends the metrics: the job goes on.
 */
#include "watch/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/outfile.h"
#include "base/version.h"
#include "policy/config.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/markers.h"
#include "track/ops.h"

NG_HIDDEN ng_atomic(int) ncclguard_metrics_active;

#define PREFIX "textfile:"
#define NG_STR_(x) #x
#define NG_STR(x) NG_STR_(x)

/* How an op ended, in the ops_total family. */
enum { END_COMPLETED, END_FAILED, END_ABORTED, NENDS };
static const char *const end_names[NENDS] = {"completed", "failed", "aborted"};

/* Size classes of the histograms: upper bounds in bytes, the last open. */
#define NSIZES 5
static const uint64_t size_bound[NSIZES - 1] = {64ull << 10, 1ull << 20, 16ull << 20, 256ull << 20};
static const char *const size_names[NSIZES] = {"64KiB", "1MiB", "16MiB", "256MiB", "more"};

/* Histogram buckets (seconds), 10 us to 5 min, then +Inf. */
#define NBUCKETS 17
static const double bucket_s[NBUCKETS - 1] = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03,
                                              0.1,  0.3,  1,    3,    10,   30,   60,   300};

struct hist {
    ng_atomic(uint64_t) bucket[NBUCKETS]; /* not cumulative */
    ng_atomic(uint64_t) sum_ns;
};

struct mcomm {
    ng_atomic(uint64_t) ends[NG_OP_NTYPES][NENDS];
    ng_atomic(int64_t) last_done_mono;   /* the newest op seen completed, 0: none */
    ng_atomic(uint64_t) timed_ns, timed; /* timing samples of collectives */
    struct hist h[NG_OP_NTYPES][NSIZES];
};

/* Index NG_METRICS_COMMS is "other". Zero pages until a process keeps metrics. */
static struct mcomm comms[NG_METRICS_COMMS + 1];

/* The file; under file_lock. */
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static int dir_fd = -1;
static char name[NG_NAME_PART_MAX * 2 + 64], tmp_name[sizeof name + 8];
static char where[NG_STR_MAX];   /* the directory, for messages */
static char labels[1024];        /* job_id="..",rank="..",host=".." */
static int64_t interval_ns, due; /* CLOCK_MONOTONIC */
static int keep_at_exit, closed;
static ng_metrics_watch_fn watch_counters;
static uint64_t writes;

static int slot_of(int comm_slot)
{
    return comm_slot < NG_METRICS_COMMS ? comm_slot : NG_METRICS_COMMS;
}

static void bump(ng_atomic(uint64_t) * p, uint64_t v)
{
    ng_atomic_add_relaxed(p, v);
}

void ncclguard_metrics_op_end(const struct ng_op_record *r, int state, int64_t gpu_start,
                              int64_t gpu_end, int64_t now_mono)
{
    if (r->comm_slot < 0 || r->op < 0 || r->op >= NG_OP_NTYPES) return;
    int e = state == NG_OP_COMPLETED ? END_COMPLETED
            : state == NG_OP_FAILED  ? END_FAILED
            : state == NG_OP_ABORTED ? END_ABORTED
                                     : -1;
    if (e < 0) return;
    struct mcomm *m = &comms[slot_of(r->comm_slot)];
    bump(&m->ends[r->op][e], 1);
    if (e != END_COMPLETED) return;
    if (now_mono > ng_atomic_load_relaxed(&m->last_done_mono))
        ng_atomic_store_relaxed(&m->last_done_mono, now_mono);
    /* Timing samples only, as the slow-op rules (watch/observer.c): a gap's
     * sample measured waiting for the host, by design. */
    if (!gpu_end || (r->flags & NG_REC_GAP)) return;
    int64_t dur = gpu_end - (gpu_start ? gpu_start : r->enqueue_ns);
    if (dur < 0) return;
    int sc = 0;
    while (sc < NSIZES - 1 && r->bytes > size_bound[sc]) sc++;
    int b = 0;
    while (b < NBUCKETS - 1 && (double)dur > bucket_s[b] * 1e9) b++;
    struct hist *h = &m->h[r->op][sc];
    bump(&h->bucket[b], 1);
    bump(&h->sum_ns, (uint64_t)dur);
    if (!ng_op_is_p2p((int)r->op)) {
        bump(&m->timed_ns, (uint64_t)dur);
        bump(&m->timed, 1);
    }
}

/* ---- the text ---- */

static struct out {
    int fd, failed;
    size_t len;
    char buf[32 << 10];
} out;

static void out_flush(void)
{
    if (out.len && !out.failed && ncclguard_outfile_write(out.fd, out.buf, out.len) != 0)
        out.failed = 1;
    out.len = 0;
}

__attribute__((format(printf, 1, 2))) static void put(const char *fmt, ...)
{
    if (sizeof out.buf - out.len < 1024) out_flush();
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out.buf + out.len, sizeof out.buf - out.len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof out.buf - out.len) { /* a line over 1 KiB: none is */
        out.failed = 1;
        return;
    }
    out.len += (size_t)n;
}

static void family(const char *metric, const char *type, const char *help)
{
    put("# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

/* A label value in the exposition format: backslash, quote and newline escaped. */
static void escape(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    for (; *src && n + 3 < len; src++) {
        if (*src == '\\' || *src == '"' || *src == '\n') {
            dst[n++] = '\\';
            dst[n++] = *src == '\n' ? 'n' : *src;
        } else {
            dst[n++] = *src;
        }
    }
    dst[n] = '\0';
}

/* The comm label of each row: the first 8 hex digits of the id (the log's
 * short id is the first 4), all 16 when two of one process share the 8. */
struct row {
    struct ng_comm *c; /* NULL for "other" */
    char comm[24];
    int live; /* ready: its gauges are shown */
    uint64_t in_flight;
    int64_t oldest_mono; /* enqueue of the oldest op in flight, 0: none */
};
static struct row rows[NG_METRICS_COMMS + 1];
static int nrows, nother;

static void make_rows(void)
{
    int n = ncclguard_comm_count();
    nrows = nother = 0;
    for (int i = 0; i < n && i < NG_METRICS_COMMS; i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        struct row *w = &rows[nrows++];
        *w = (struct row){.c = c, .live = ng_comm_state(c) == NG_COMM_READY};
        snprintf(w->comm, sizeof w->comm, "%08llx", (unsigned long long)(c->id >> 32));
        for (int k = 0; k < nrows - 1; k++)
            if (!strcmp(rows[k].comm, w->comm)) {
                snprintf(w->comm, sizeof w->comm, "%016llx", (unsigned long long)c->id);
                break;
            }
    }
    if (n > NG_METRICS_COMMS) {
        nother = n - NG_METRICS_COMMS;
        rows[nrows++] = (struct row){.c = NULL, .comm = "other", .live = 1};
    }
}

/* The walk: ops in flight per row, and the oldest one's enqueue. Captured ops
 * (recorded into a CUDA graph) never run as such: not in flight. */
static void count_in_flight(uint64_t index, const struct ng_op_record *r, void *ctx)
{
    (void)index;
    (void)ctx;
    if (r->comm_slot < 0 || ng_record_state(r) == NG_OP_CAPTURED) return;
    int s = slot_of(r->comm_slot);
    struct row *w = s < NG_METRICS_COMMS ? (s < nrows ? &rows[s] : NULL)
                                         : (nother ? &rows[nrows - 1] : NULL);
    if (!w) return;
    w->in_flight++;
    if (!w->oldest_mono || r->enqueue_mono_ns < w->oldest_mono) w->oldest_mono = r->enqueue_mono_ns;
}

/* The ring's records in flight, to count_in_flight: a record's state word is
 * read first, and only those not final are copied, so that a write costs a
 * load per record of the ring and a copy per op in flight. */
static void walk_in_flight(void)
{
    struct ng_flight_stats f;
    ncclguard_flight_stats(&f);
    uint64_t end = ncclguard_flight_head();
    for (uint64_t i = end > f.capacity ? end - f.capacity : 0; i < end; i++) {
        int state = ncclguard_flight_state(i);
        if (state < 0 || ng_op_state_final(state)) continue;
        struct ng_op_record r;
        if (ncclguard_flight_copy(i, &r) == 0 && !ng_op_state_final(ng_record_state(&r)))
            count_in_flight(i, &r, NULL);
    }
}

static struct mcomm *row_counts(int i)
{
    return &comms[rows[i].c ? i : NG_METRICS_COMMS];
}

static uint64_t load(ng_atomic(uint64_t) * p)
{
    return ng_atomic_load_relaxed(p);
}

static void put_comm_families(int64_t now_mono, int64_t now_real)
{
    family("ncclguard_ops_total", "counter",
           "Ops that ncclguard saw end, by communicator, op and state (completed on the GPU, "
           "failed, aborted with their communicator).");
    for (int i = 0; i < nrows; i++)
        for (int t = 0; t < NG_OP_NTYPES; t++) {
            uint64_t v[NENDS], any = 0;
            for (int e = 0; e < NENDS; e++) any |= v[e] = load(&row_counts(i)->ends[t][e]);
            if (!any) continue; /* an op type never seen: no series */
            for (int e = 0; e < NENDS; e++)
                put("ncclguard_ops_total{%s,comm=\"%s\",op=\"%s\",state=\"%s\"} %llu\n", labels,
                    rows[i].comm, ng_op_name(t), end_names[e], (unsigned long long)v[e]);
        }
    family("ncclguard_ops_enqueued_total", "counter",
           "Ops that NCCL accepted from the application, by communicator and op.");
    for (int i = 0; i < nrows; i++)
        for (int t = 0; t < NG_OP_NTYPES; t++) {
            uint64_t v = 0;
            if (rows[i].c) {
                v = ng_atomic_load_relaxed(&rows[i].c->ops_by_type[t]);
            } else {
                for (int k = NG_METRICS_COMMS; k < ncclguard_comm_count(); k++)
                    v += ng_atomic_load_relaxed(&ncclguard_comm_at(k)->ops_by_type[t]);
            }
            if (v)
                put("ncclguard_ops_enqueued_total{%s,comm=\"%s\",op=\"%s\"} %llu\n", labels,
                    rows[i].comm, ng_op_name(t), (unsigned long long)v);
        }
    family("ncclguard_ops_in_flight", "gauge",
           "Ops enqueued and not yet ended, per communicator (ready communicators only).");
    for (int i = 0; i < nrows; i++)
        if (rows[i].live)
            put("ncclguard_ops_in_flight{%s,comm=\"%s\"} %llu\n", labels, rows[i].comm,
                (unsigned long long)rows[i].in_flight);
    family("ncclguard_oldest_in_flight_age_seconds", "gauge",
           "Seconds since the oldest op in flight was enqueued (0: none in flight).");
    for (int i = 0; i < nrows; i++)
        if (rows[i].live)
            put("ncclguard_oldest_in_flight_age_seconds{%s,comm=\"%s\"} %.3f\n", labels,
                rows[i].comm,
                rows[i].oldest_mono ? (double)(now_mono - rows[i].oldest_mono) / 1e9 : 0.0);
    /* The heartbeat: since the last op seen completed, or since the creation
     * before the first. */
    family("ncclguard_progress_age_seconds", "gauge",
           "Seconds since the last op of the communicator was seen completed (since its "
           "creation before the first).");
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].live) continue;
        int64_t last = ng_atomic_load_relaxed(&row_counts(i)->last_done_mono);
        double age = last        ? (double)(now_mono - last) / 1e9
                     : rows[i].c ? (double)(now_real - rows[i].c->created_ns) / 1e9
                                 : 0.0;
        put("ncclguard_progress_age_seconds{%s,comm=\"%s\"} %.3f\n", labels, rows[i].comm,
            age < 0 ? 0.0 : age);
    }
    family("ncclguard_timed_gpu_seconds_total", "counter",
           "GPU time of the timing samples of collectives completed, per communicator: the "
           "rank the others wait for has the least.");
    for (int i = 0; i < nrows; i++)
        put("ncclguard_timed_gpu_seconds_total{%s,comm=\"%s\"} %.9f\n", labels, rows[i].comm,
            (double)load(&row_counts(i)->timed_ns) / 1e9);
    family("ncclguard_timed_collectives_total", "counter",
           "Timing samples of collectives completed, per communicator.");
    for (int i = 0; i < nrows; i++)
        put("ncclguard_timed_collectives_total{%s,comm=\"%s\"} %llu\n", labels, rows[i].comm,
            (unsigned long long)load(&row_counts(i)->timed));
    family("ncclguard_op_gpu_duration_seconds", "histogram",
           "GPU durations of the timing samples, per communicator, op and size class (the "
           "upper bound of the op's bytes).");
    for (int i = 0; i < nrows; i++)
        for (int t = 0; t < NG_OP_NTYPES; t++)
            for (int sc = 0; sc < NSIZES; sc++) {
                struct hist *h = &row_counts(i)->h[t][sc];
                uint64_t b[NBUCKETS], total = 0;
                for (int k = 0; k < NBUCKETS; k++) total += b[k] = load(&h->bucket[k]);
                if (!total) continue;
                uint64_t cum = 0;
                for (int k = 0; k < NBUCKETS; k++) {
                    char le[24];
                    cum += b[k];
                    if (k < NBUCKETS - 1)
                        snprintf(le, sizeof le, "%g", bucket_s[k]);
                    else
                        snprintf(le, sizeof le, "+Inf");
                    put("ncclguard_op_gpu_duration_seconds_bucket{%s,comm=\"%s\",op=\"%s\","
                        "size=\"%s\",le=\"%s\"} %llu\n",
                        labels, rows[i].comm, ng_op_name(t), size_names[sc], le,
                        (unsigned long long)cum);
                }
                put("ncclguard_op_gpu_duration_seconds_sum{%s,comm=\"%s\",op=\"%s\",size=\"%s\"} "
                    "%.9f\n",
                    labels, rows[i].comm, ng_op_name(t), size_names[sc],
                    (double)load(&h->sum_ns) / 1e9);
                put("ncclguard_op_gpu_duration_seconds_count{%s,comm=\"%s\",op=\"%s\","
                    "size=\"%s\"} %llu\n",
                    labels, rows[i].comm, ng_op_name(t), size_names[sc], (unsigned long long)cum);
            }
}

/* CPU seconds of the shim's own threads (named "ncclguard-*"), from
 * /proc/self/task/<tid>/stat; by thread name. */
static void put_cpu(void)
{
    family("ncclguard_cpu_seconds_total", "counter",
           "CPU time (user and system) of ncclguard's own threads, by thread name.");
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct {
        char name[20];
        unsigned long long ticks;
    } seen[16];
    int nseen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[sizeof e->d_name + 32], line[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, line, sizeof line - 1);
        close(fd);
        if (n <= 0) continue;
        line[n] = '\0';
        char *open_paren = strchr(line, '('), *close_paren = strrchr(line, ')');
        if (!open_paren || !close_paren || close_paren < open_paren) continue;
        *close_paren = '\0';
        const char *tname = open_paren + 1;
        if (strncmp(tname, "ncclguard", 9)) continue;
        /* after ") ": state(3) ... utime(14) stime(15) */
        unsigned long long ut = 0, st = 0;
        if (sscanf(close_paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                   &st) != 2)
            continue;
        int k = 0;
        while (k < nseen && strcmp(seen[k].name, tname)) k++;
        if (k == nseen) {
            if (nseen == (int)(sizeof seen / sizeof seen[0])) continue;
            snprintf(seen[nseen].name, sizeof seen[0].name, "%s", tname);
            seen[nseen++].ticks = 0;
        }
        seen[k].ticks += ut + st;
    }
    closedir(d);
    long hz = sysconf(_SC_CLK_TCK);
    for (int k = 0; k < nseen; k++)
        put("ncclguard_cpu_seconds_total{%s,thread=\"%s\"} %.2f\n", labels, seen[k].name,
            (double)seen[k].ticks / (double)(hz > 0 ? hz : 100));
}

static void put_process_families(int64_t now_real)
{
    struct ng_metrics_watch w = {0};
    struct ng_flight_stats f;
    watch_counters(&w);
    ncclguard_flight_stats(&f);
    family("ncclguard_info", "gauge", "1, with the version of ncclguard in a label.");
    put("ncclguard_info{%s,version=\"%s\"} 1\n", labels, NCCLGUARD_VERSION);
    family("ncclguard_metrics_written_timestamp_seconds", "gauge",
           "When this file was written (Unix time).");
    put("ncclguard_metrics_written_timestamp_seconds{%s} %.3f\n", labels, (double)now_real / 1e9);
    family("ncclguard_communicators", "gauge",
           "Communicators of the process; those past the first " NG_STR(
               NG_METRICS_COMMS) " are added up under comm=\"other\".");
    put("ncclguard_communicators{%s} %d\n", labels, ncclguard_comm_count());
    family("ncclguard_op_timeout_seconds", "gauge",
           "The timeout setting: an op in flight this long times out (0: off; per-op "
           "settings and floor_bandwidth can lengthen it).");
    put("ncclguard_op_timeout_seconds{%s} %g\n", labels, ncclguard_settings()->timeout);
    family("ncclguard_slow_ops_total", "counter", "Ops logged as slow.");
    put("ncclguard_slow_ops_total{%s} %llu\n", labels, (unsigned long long)w.slow);
    family("ncclguard_timeouts_total", "counter",
           "Timeouts: of an op (kind=\"op\"), of a communicator's creation (kind=\"init\").");
    put("ncclguard_timeouts_total{%s,kind=\"op\"} %llu\n", labels, (unsigned long long)w.timeouts);
    put("ncclguard_timeouts_total{%s,kind=\"init\"} %llu\n", labels,
        (unsigned long long)w.init_timeouts);
    family("ncclguard_dumps_total", "counter", "Evidence dumps written.");
    put("ncclguard_dumps_total{%s} %llu\n", labels, (unsigned long long)w.dumps);
    family("ncclguard_async_errors_total", "counter", "NCCL async errors seen.");
    put("ncclguard_async_errors_total{%s} %llu\n", labels, (unsigned long long)w.async_errors);
    family("ncclguard_records_total", "counter", "Op records appended to the flight recorder.");
    put("ncclguard_records_total{%s} %llu\n", labels, (unsigned long long)f.recorded);
    family("ncclguard_records_overwritten_total", "counter",
           "Records of the flight recorder overwritten by newer ones (the ring wrapped).");
    put("ncclguard_records_overwritten_total{%s} %llu\n", labels,
        (unsigned long long)f.overwritten);
    family("ncclguard_records_dropped_total", "counter",
           "Records overwritten while their op was still in flight.");
    put("ncclguard_records_dropped_total{%s} %llu\n", labels,
        (unsigned long long)f.dropped_inflight);
    family("ncclguard_flight_records", "gauge", "Capacity of the flight recorder, in records.");
    put("ncclguard_flight_records{%s} %llu\n", labels, (unsigned long long)f.capacity);
    family("ncclguard_flight_recorder_bytes", "gauge",
           "Memory mapped for the flight recorder (its pages are touched as records arrive).");
    put("ncclguard_flight_recorder_bytes{%s} %llu\n", labels, (unsigned long long)f.bytes);
    family("ncclguard_memory_bytes", "gauge",
           "Memory of ncclguard's own tables (base/mem.h; mapped ones whole, though their "
           "pages are touched as used), the flight recorder included.");
    put("ncclguard_memory_bytes{%s} %llu\n", labels, (unsigned long long)ncclguard_mem_bytes());
    struct ng_marker_stats g;
    ncclguard_markers_stats(&g);
    family("ncclguard_marker_pools", "gauge", "CUDA event pools (one per CUDA context).");
    put("ncclguard_marker_pools{%s} %d\n", labels, g.pools);
    family("ncclguard_ops_captured_total", "counter",
           "Ops enqueued while their stream was being captured into a CUDA graph.");
    put("ncclguard_ops_captured_total{%s} %llu\n", labels, (unsigned long long)g.captured);
    family(
        "ncclguard_ops_without_marker_total", "counter",
        "Ops that got no CUDA event pair (pool empty, unknown context): not followed on the GPU.");
    put("ncclguard_ops_without_marker_total{%s} %llu\n", labels, (unsigned long long)g.no_marker);
    put_cpu();
}

/* ---- the file ---- */

static void stop(const char *what, int err)
{
    NG_WARN("cannot write the metrics file %s/%s (%s: %s): no more metrics from this process; "
            "the job goes on",
            where, name, what, strerror(err));
    ng_atomic_store_relaxed(&ncclguard_metrics_active, 0);
    closed = 1;
}

/* Writes the file now; under file_lock. */
static void write_file(void)
{
    int64_t now_mono = ng_clock_ns(CLOCK_MONOTONIC), now_real = ng_clock_ns(CLOCK_REALTIME);
    make_rows();
    walk_in_flight();
    const char *target = tmp_name; /* written whole, then renamed over name */
    const int flags = O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC;
    int fd = openat(dir_fd, target, flags, 0644);
    if (fd < 0 && errno == EEXIST && unlinkat(dir_fd, target, 0) == 0)
        fd = openat(dir_fd, target, flags, 0644); /* a stale one, or one planted */
    if (fd < 0) {
        stop("creating its temporary file", errno);
        return;
    }
    (void)fchmod(fd, 0644); /* the umask may have taken the collector's read bit */
    out.fd = fd;
    out.failed = 0;
    out.len = 0;
    put_process_families(now_real);
    put_comm_families(now_mono, now_real);
    out_flush();
    int err = out.failed ? (errno ? errno : EIO) : 0;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && renameat(dir_fd, target, dir_fd, name) != 0) err = errno;
    if (err) {
        unlinkat(dir_fd, target, 0);
        stop("writing it", err);
        return;
    }
    writes++;
}

void ncclguard_metrics_init(ng_metrics_watch_fn watch)
{
    const struct ng_settings *s = ncclguard_settings();
    if (!s->metrics[0]) return;
    pthread_mutex_lock(&file_lock);
    watch_counters = watch;
    if (strncmp(s->metrics, PREFIX, strlen(PREFIX)) || !s->metrics[strlen(PREFIX)]) {
        NG_WARN("metrics = %s is not understood (textfile:DIR is): no metrics", s->metrics);
        goto out;
    }
    snprintf(where, sizeof where, "%s", s->metrics + strlen(PREFIX));
    char why[160];
    dir_fd = ncclguard_outdir_open(where, why, sizeof why);
    if (dir_fd < 0) {
        NG_WARN("no metrics: the directory %s of metrics = textfile:%s is %s%s: name a "
                "directory of yours that node_exporter reads",
                where, where, strncmp(why, "a ", 2) && strncmp(why, "not ", 4) ? "refused, " : "",
                why);
        goto out;
    }
    const struct ng_identity *id = ncclguard_identity();
    char job[NG_NAME_PART_MAX + 1], host[160], jobv[300], rank[16];
    ncclguard_name_part(id->job, job);
    if (id->rank >= 0)
        snprintf(rank, sizeof rank, "%d", id->rank);
    else
        snprintf(rank, sizeof rank, "x");
    snprintf(name, sizeof name, "ncclguard-%s-r%s-%d.prom", job, rank, (int)getpid());
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp", name);
    escape(jobv, sizeof jobv, id->job);
    escape(host, sizeof host, id->host);
    snprintf(labels, sizeof labels, "job_id=\"%s\",rank=\"%s\",host=\"%s\"", jobv,
             id->rank >= 0 ? rank : "unknown", host);
    interval_ns = (int64_t)(s->metrics_interval * 1e9);
    if (interval_ns < 1000000) interval_ns = 1000000;
    keep_at_exit = s->metrics_keep_at_exit;
    due = ng_clock_ns(CLOCK_MONOTONIC); /* the first at the dump thread's first tick */
    closed = 0;
    ng_atomic_store_relaxed(&ncclguard_metrics_active, 1);
    NG_DEBUG("metrics every %.1f s into %s/%s", s->metrics_interval, where, name);
out:
    pthread_mutex_unlock(&file_lock);
}

int64_t ncclguard_metrics_tick(int64_t now_mono)
{
    if (!ncclguard_metrics_on()) return INT64_MAX;
    pthread_mutex_lock(&file_lock);
    int64_t next = INT64_MAX;
    if (!closed) {
        if (now_mono >= due) {
            write_file();
            due = now_mono + interval_ns;
        }
        if (!closed) next = due;
    }
    pthread_mutex_unlock(&file_lock);
    return next;
}

void ncclguard_metrics_at_exit(void)
{
    if (!ncclguard_metrics_on()) return;
    pthread_mutex_lock(&file_lock);
    if (!closed) {
        if (keep_at_exit)
            write_file();
        else if (unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT)
            NG_WARN("cannot remove the metrics file %s/%s (%s)", where, name, strerror(errno));
        closed = 1;
        ng_atomic_store_relaxed(&ncclguard_metrics_active, 0);
    }
    pthread_mutex_unlock(&file_lock);
}

void ncclguard_metrics_atfork_child(void)
{
    pthread_mutex_init(&file_lock, NULL);
    if (dir_fd >= 0) close(dir_fd);
    dir_fd = -1;
    closed = 1;
    writes = 0;
    ng_atomic_store_relaxed(&ncclguard_metrics_active, 0);
    memset(comms, 0, sizeof comms);
}
