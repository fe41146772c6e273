/*
 * cmd/trace.c: `ncclguard trace DIR -o trace.json [--ranks LIST] [--window S]
 * [--incident ID]`: the ops of every rank's dump as a Chrome trace (the JSON
 * trace event format that chrome://tracing and ui.perfetto.dev load).
 *
 *  - one process per rank (pid = global rank), one thread per CUDA stream;
 *  - an `X` span per op from GPU start to end, labelled by where its times come
 *    from: "gpu" (the CUDA events), "discovered" (only the watchdog's discovery
 *    times are known), "in flight" (started, not finished when dumped: the span
 *    ends at the dump);
 *  - an `i` instant per enqueue, one per dump (its reason), a `timeout` instant
 *    where a dump reports timed-out ops, and a global instant at the incident.
 *
 * Clocks: on one host every process shares CLOCK_MONOTONIC. Each op carries a
 * realtime/monotonic pair (enqueue_ns, enqueue_mono_ns); its times are moved by
 * the difference between its own pair and the host's newest pair, so a realtime
 * step (NTP) during the window does not tear a host's timeline (differences
 * under 1 ms are taken for the jitter between the two reads, and ignored). Across hosts the
 * realtime clocks are trusted as far as they are synchronised.
 *
 * The window (default: the last 60 s before the incident) and the ranks keep the
 * file loadable: a browser does not load millions of ops. What was left out is
 * said on stderr. Streaming: two passes over the dumps, each read by the dump
 * reader that `analyze` uses (dump/dump.h: the same checks of the file, a FIFO or
 * an oversized file refused with one line, and the same schema) and freed one at
 * a time; the events are written (jansson) as they are made, and only a few
 * numbers per dump and per host are kept.
 */
#include "cmd/trace.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "dump/dump.h"
#include "dump/read.h"
#include "evidence/dump_format.h"
#include "json/json.h"
#include "json/parser.h"

#define USAGE_LINE                                                    \
    "usage: ncclguard trace DIR -o FILE [--ranks LIST] [--window S] " \
    "[--incident ID]"
#define MAX_SPANS 256   /* rank ranges in --ranks */
#define MAX_STREAMS 64  /* streams per rank with their own track; more share the last */
#define STEP_NS 1000000 /* a realtime step smaller than 1 ms is not corrected */
#define EXIT_UNUSABLE 3 /* no usable dump: analyze's status for it */

static void trace_usage(FILE *out)
{
    fprintf(out, USAGE_LINE
            "\n\n"
            "Writes the ops of the dumps in DIR as a Chrome trace (JSON trace event format):\n"
            "open it in ui.perfetto.dev or chrome://tracing. One track per rank and CUDA\n"
            "stream, spans from GPU start to end, enqueue instants, timeouts and the incident.\n\n"
            "  -o FILE        the trace to write\n"
            "  --ranks LIST   only these global ranks, e.g. 0-7,12 (default: all)\n"
            "  --window S     only the last S seconds before the incident (default 60; 0: all)\n"
            "  --incident ID  the incident to show (default: the newest in the dumps); dumps\n"
            "                 of other incidents are left out\n\n"
            "Exit status: 0, 2 (cannot write FILE), 3 (no usable dump), 64 (usage).\n");
}

struct span {
    long lo, hi;
};
struct host {
    char name[64];
    int64_t mono, delta; /* its newest op's clock pair: monotonic, realtime - monotonic */
    int64_t oldest_mono; /* its oldest enqueue, monotonic */
};
struct dump_info {
    int rank;
    int host;
    int keep;
};

static struct span spans[MAX_SPANS];
static int nspans;
static struct host *hosts;
static size_t nhosts;
static FILE *out;
static ng_jparser *parser;
static int64_t origin; /* window start, realtime ns: ts 0 */
static int64_t win_lo;
static unsigned long nevents, ops_out_window;

static int parse_ranks(const char *s)
{
    for (const char *p = s; *p;) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0) return -1;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo) return -1;
        }
        if (nspans == MAX_SPANS) return -1;
        spans[nspans++] = (struct span){lo, hi};
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return nspans ? 0 : -1;
}

static int rank_wanted(int rank)
{
    if (!nspans) return 1;
    for (int i = 0; i < nspans; i++)
        if (rank >= spans[i].lo && rank <= spans[i].hi) return 1;
    return 0;
}

/* The dump's own spellings of an op's members, for the events' args. */
static json_t *hex_of(uint64_t v)
{
    char s[17];
    snprintf(s, sizeof s, "%016" PRIx64, v);
    return json_string(s);
}

static json_t *flags_of(uint32_t f)
{
    static const char *const names[] = {NG_DUMP_OP_FLAG_NAMES};
    json_t *a = json_array();
    for (unsigned b = 0; b < 32; b++) {
        if (!(f & (1u << b))) continue;
        char n[16];
        snprintf(n, sizeof n, "bit%u", b);
        json_array_append_new(a, json_string(b < sizeof names / sizeof *names ? names[b] : n));
    }
    return a;
}

/* The realtime of an incident id "<s>.<ns>-<origin>"; 0 when it has none. */
static int64_t incident_time(const char *id)
{
    long long s;
    long ns;
    if (!id || sscanf(id, "%lld.%9ld-", &s, &ns) != 2) return 0;
    return (int64_t)s * 1000000000 + ns;
}

static size_t host_index(const char *name)
{
    for (size_t i = 0; i < nhosts; i++)
        if (!strcmp(hosts[i].name, name)) return i;
    snprintf(hosts[nhosts].name, sizeof hosts[nhosts].name, "%s", name);
    hosts[nhosts].mono = INT64_MIN;
    hosts[nhosts].oldest_mono = INT64_MAX;
    return nhosts++;
}

/* Reads a dump; NULL after one line naming the file and why. */
static struct dr_dump *load(const char *dir, const char *name)
{
    char path[PATH_MAX], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct dr_dump *d = dr_read_file(parser, path, 0, err, sizeof err);
    if (!d) fprintf(stderr, "ncclguard: trace: %s: %s; left out\n", path, err);
    return d;
}

/* Writes one event (and frees it). */
static void emit(json_t *ev)
{
    if (!ev) return;
    fputs(nevents++ ? ",\n" : "\n", out);
    json_dumpf(ev, out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(ev);
}

static double ts_us(int64_t ns)
{
    return (double)(ns - origin) / 1000.0;
}

/* One op of rank pid: its enqueue instant and its span. */
static void emit_op(int pid, const struct dr_op *op, int tid, const struct host *h, int64_t dump_ns)
{
    int64_t enq = op->enqueue_ns, mono = op->enqueue_mono_ns;
    /* this op's realtime/monotonic difference against the host's newest; below
     * STEP_NS it is the jitter between the two clock reads, not a step */
    int64_t shift = h->mono != INT64_MIN && mono ? h->delta - (enq - mono) : 0;
    if (shift > -STEP_NS && shift < STEP_NS) shift = 0;
    int64_t start = op->gpu_start_ns, end = op->gpu_end_ns;
    const char *timing = "gpu";
    if (!start) {
        start = op->seen_start_ns;
        end = op->seen_end_ns;
        timing = "discovered";
    }
    if (start && !end) {
        end = dump_ns;
        timing = "in flight";
    }
    int64_t last = (end ? end : enq) + shift;
    if (enq + shift < win_lo && last < win_lo) {
        ops_out_window++;
        return;
    }
    const char *kind = dr_op_name(op->op);
    char name[96];
    /* a collective has a seq (from 1), a point-to-point op a p2p_seq (the reader's 0: null) */
    json_t *seq = op->seq ? json_integer((json_int_t)op->seq) : NULL;
    json_t *p2p = op->seq ? NULL : json_integer((json_int_t)op->p2p_seq);
    if (op->seq)
        snprintf(name, sizeof name, "%s #%" PRIu64, kind, op->seq);
    else
        snprintf(name, sizeof name, "%s #%" PRIu64 " peer %" PRId32, kind, op->p2p_seq, op->peer);
    json_t *args = json_pack("{s:o, s:o?, s:o?, s:I, s:I, s:s, s:s, s:s, s:o}", "comm",
                             hex_of(op->comm), "seq", seq, "p2p_seq", p2p, "count",
                             (json_int_t)op->count, "bytes", (json_int_t)op->bytes, "datatype",
                             op->datatype, "state", dr_state_name(op->state), "timing",
                             start ? timing : "not started", "flags", flags_of(op->flags));
    if (enq + shift >= win_lo)
        emit(json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:O}", "name", name, "cat", "enqueue",
                       "ph", "i", "s", "t", "ts", ts_us(enq + shift), "pid", pid, "tid", tid,
                       "args", args));
    if (start)
        emit(json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:O}", "name", name, "cat", timing,
                       "ph", "X", "ts", ts_us(start + shift), "dur", (double)(end - start) / 1000.0,
                       "pid", pid, "tid", tid, "args", args));
    json_decref(args);
}

/* The track of a stream on this rank: 1 + its index among the rank's streams. */
static int stream_tid(int pid, const char *stream, char names[][17], int *n)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], stream)) return i + 1;
    if (*n == MAX_STREAMS) return *n;
    snprintf(names[*n], 17, "%s", stream);
    char label[48];
    snprintf(label, sizeof label, "stream %s", stream);
    emit(json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", pid,
                   "tid", *n + 1, "args", "name", label));
    return ++*n;
}

static void emit_dump(const struct dr_dump *d, int pid, const struct host *h)
{
    const char *host = d->host ? d->host : "?";
    char label[160], rank[16] = "?";
    if (d->rank != DR_NONE) snprintf(rank, sizeof rank, "%d", pid);
    snprintf(label, sizeof label, "rank %s (host %s, pid %" PRId64 ")", rank, host,
             d->pid == DR_NONE ? 0 : d->pid);
    emit(json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", pid,
                   "args", "name", label));
    emit(json_pack("{s:s, s:s, s:i, s:{s:i}}", "name", "process_sort_index", "ph", "M", "pid", pid,
                   "args", "sort_index", pid));
    emit(json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", pid,
                   "tid", 0, "args", "name", "dumps and timeouts"));
    static char streams[MAX_STREAMS][17];
    int nstreams = 0, ntimeout = 0;
    int64_t dump_ns = d->time_ns;
    for (size_t i = 0; i < d->nops; i++) {
        const struct dr_op *op = &d->ops[i];
        char stream[17];
        snprintf(stream, sizeof stream, "%016" PRIx64, op->stream);
        int tid = stream_tid(pid, stream, streams, &nstreams);
        emit_op(pid, op, tid, h, dump_ns);
        ntimeout += !!(op->flags & DR_OP_TIMEOUT);
    }
    char what[64];
    const char *reason = d->reason ? d->reason : "?";
    snprintf(what, sizeof what, "dump (%s)", reason);
    emit(json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:{s:s?}}", "name", what, "cat", "dump",
                   "ph", "i", "s", "p", "ts", ts_us(dump_ns), "pid", pid, "tid", 0, "args",
                   "incident", d->incident));
    if (ntimeout)
        emit(json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:{s:i}}", "name", "timeout", "cat",
                       "timeout", "ph", "i", "s", "p", "ts", ts_us(dump_ns), "pid", pid, "tid", 0,
                       "args", "timed_out_ops", ntimeout));
}

/* A progress line on a terminal once a pass has run for a second. */
static void progress(const char *what, int i, int n)
{
    static struct timespec t0;
    static int shown;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (i == 0) t0 = now;
    double s = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
    if (!isatty(2) || (s < 1 && !shown)) return;
    int width = 30, done = n ? (int)((long)width * (i + 1) / n) : width;
    fprintf(stderr, "\rncclguard: trace: %s [%.*s%*s] %d/%d", what, done,
            "##############################", width - done, "", i + 1, n);
    shown = 1;
    if (i + 1 == n) {
        fputc('\n', stderr);
        shown = 0;
    }
}

/* NG_DUMP_PREFIX "..." NG_DUMP_SUFFIX, the writer's file name (evidence/dump_format.h). */
static int is_dump_name(const char *n)
{
    size_t len = strlen(n), pre = strlen(NG_DUMP_PREFIX), suf = strlen(NG_DUMP_SUFFIX);
    return !strncmp(n, NG_DUMP_PREFIX, pre) && len > pre + suf &&
           !strcmp(n + len - suf, NG_DUMP_SUFFIX);
}

static int trace_dir(const char *dir, struct dirent **names, int n, struct dump_info *info,
                     const char *path, const char *want_incident, double window_s);

int cmd_trace(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"ranks", required_argument, 0, 'r'},
                                         {"window", required_argument, 0, 'w'},
                                         {"incident", required_argument, 0, 'i'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *path = NULL, *want_incident = NULL;
    double window_s = 60;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o': path = optarg; break;
        case 'r':
            if (parse_ranks(optarg) != 0) {
                fprintf(stderr,
                        "ncclguard: trace: --ranks takes ranks and ranges like 0-7,12, "
                        "not '%s'; " USAGE_LINE "\n",
                        optarg);
                return CMD_EXIT_USAGE;
            }
            break;
        case 'w':
            window_s = strtod(optarg, &end);
            if (end == optarg || *end || !(window_s >= 0) || window_s > 1e9) {
                fprintf(stderr,
                        "ncclguard: trace: --window takes seconds (0: all), not '%s'; " USAGE_LINE
                        "\n",
                        optarg);
                return CMD_EXIT_USAGE;
            }
            break;
        case 'i': want_incident = optarg; break;
        case 'h': trace_usage(stdout); return 0;
        default:
            fprintf(stderr, "ncclguard: trace: bad option '%s'; " USAGE_LINE "\n",
                    argv[optind - 1]);
            return CMD_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !path) {
        fprintf(stderr, "ncclguard: trace: %s; " USAGE_LINE "\n",
                !path ? "-o FILE is required" : "give one dump directory");
        return CMD_EXIT_USAGE;
    }
    const char *dir = argv[optind];
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "ncclguard: trace: cannot list %s: %s\n", dir, strerror(errno));
        return EXIT_UNUSABLE;
    }
    struct dump_info *info = calloc((size_t)n + 1, sizeof *info);
    hosts = calloc((size_t)n + 1, sizeof *hosts);
    parser = ng_jparser_new(NG_JSON_SIMDJSON);
    int rc = EXIT_UNUSABLE;
    if (!info || !hosts || !parser)
        perror("ncclguard: trace");
    else
        rc = trace_dir(dir, names, n, info, path, want_incident, window_s);
    ng_jparser_free(parser);
    parser = NULL;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(info);
    free(hosts);
    return rc;
}

/* The two passes over the n entries of dir; the exit status. */
static int trace_dir(const char *dir, struct dirent **names, int n, struct dump_info *info,
                     const char *path, const char *want_incident, double window_s)
{

    /* pass 1: the incident, each dump's rank and host, each host's newest clock pair */
    char newest[128] = "";
    int64_t newest_t = 0, last_dump = 0, oldest_enq = INT64_MAX;
    int ndumps = 0;
    for (int i = 0; i < n; i++) {
        progress("reading ", i, n);
        info[i].keep = 0;
        if (!is_dump_name(names[i]->d_name)) continue;
        struct dr_dump *d = load(dir, names[i]->d_name);
        if (!d) continue;
        const char *inc = d->incident;
        if (want_incident && (!inc || strcmp(inc, want_incident))) {
            fprintf(stderr, "ncclguard: trace: %s/%s: of incident %s, not %s; left out\n", dir,
                    names[i]->d_name, inc ? inc : "none", want_incident);
            dr_free(d);
            continue;
        }
        if (inc && incident_time(inc) > newest_t) {
            newest_t = incident_time(inc);
            snprintf(newest, sizeof newest, "%s", inc);
        }
        info[i].rank = d->rank != DR_NONE ? (int)d->rank : 1000000 + i;
        info[i].host = (int)host_index(d->host ? d->host : "?");
        info[i].keep = 1;
        ndumps++;
        int64_t t = d->time_ns;
        if (t > last_dump) last_dump = t;
        struct host *h = &hosts[info[i].host];
        for (size_t k = 0; k < d->nops; k++) {
            int64_t mono = d->ops[k].enqueue_mono_ns, enq = d->ops[k].enqueue_ns;
            if (mono && mono < h->oldest_mono)
                h->oldest_mono = mono;
            else if (!mono && enq && enq < oldest_enq)
                oldest_enq = enq; /* no pair */
            if (mono > h->mono) {
                h->mono = mono;
                h->delta = enq - mono;
            }
        }
        dr_free(d);
    }
    if (!ndumps) {
        fprintf(stderr, "ncclguard: trace: no usable dump (ncclguard-*.json) in %s\n", dir);
        return EXIT_UNUSABLE;
    }
    int64_t end_t = newest_t ? newest_t : last_dump;
    if (last_dump > end_t) end_t = last_dump; /* dumps come just after the incident */
    int64_t inc_t = newest_t ? newest_t : end_t;
    win_lo = window_s > 0 ? inc_t - (int64_t)(window_s * 1e9) : INT64_MIN;
    /* ts 0: the window's start, or the oldest enqueue without a window, on the
     * hosts' aligned clocks (realtime when a dump has no monotonic times) */
    for (size_t h = 0; h < nhosts; h++)
        if (hosts[h].mono != INT64_MIN && hosts[h].oldest_mono + hosts[h].delta < oldest_enq)
            oldest_enq = hosts[h].oldest_mono + hosts[h].delta;
    origin = window_s > 0 ? win_lo : oldest_enq < inc_t ? oldest_enq : inc_t;

    out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "ncclguard: trace: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    fputs("{\"traceEvents\":[", out);
    /* pass 2: the events, one dump at a time */
    int ranks_out = 0, shown = 0;
    for (int i = 0; i < n; i++) {
        progress("writing ", i, n);
        if (!info[i].keep) continue;
        if (!rank_wanted(info[i].rank)) {
            ranks_out++;
            continue;
        }
        struct dr_dump *d = load(dir, names[i]->d_name);
        if (!d) continue;
        emit_dump(d, info[i].rank, &hosts[info[i].host]);
        shown++;
        dr_free(d);
    }
    if (newest_t)
        emit(json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:{s:s}}", "name", "incident", "cat",
                       "incident", "ph", "i", "s", "g", "ts", ts_us(newest_t), "pid", 0, "tid", 0,
                       "args", "id", newest));
    char origin_s[32];
    snprintf(origin_s, sizeof origin_s, "%" PRId64, origin);
    fprintf(out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":");
    json_t *meta = json_pack("{s:s, s:s, s:s?, s:f}", "generator", "ncclguard trace",
                             "origin_realtime_ns", origin_s, "incident", *newest ? newest : NULL,
                             "window_s", window_s);
    json_dumpf(meta, out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(meta);
    fputs("}\n", out);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad) {
        fprintf(stderr, "ncclguard: trace: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    if (ranks_out)
        fprintf(stderr, "ncclguard: trace: left out %d rank%s not in --ranks\n", ranks_out,
                ranks_out == 1 ? "" : "s");
    if (ops_out_window)
        fprintf(stderr,
                "ncclguard: trace: left out %lu op%s older than the window (the last "
                "%g s before the %s; --window 0 shows all)\n",
                ops_out_window, ops_out_window == 1 ? "" : "s", window_s,
                newest_t ? "incident" : "last dump");
    fprintf(stderr, "ncclguard: trace: %s: %d rank%s, %lu events%s%s\n", path, shown,
            shown == 1 ? "" : "s", nevents, *newest ? ", incident " : "", newest);
    return 0;
}
