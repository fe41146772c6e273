/*
 * dump/read.c: one dump: its top-level members (the arrays are read by
 * dump/map.c and dump/stack.c), the schema check, and the file.
 */
#include "dump/read.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/infile.h"
#include "dump/dump.h"
#include "dump/fr.h"
#include "dump/map.h"
#include "dump/mem.h"
#include "dump/scalar.h"
#include "dump/stack.h"
#include "evidence/dump_format.h"
#include "json/json.h"

#define MAX_DUMP_BYTES (1ull << 30)

/* The writer's keys (evidence/dump_format.h), then those of ncclguard.dump/1.x. */
static const char *const top_keys[] = {NG_DUMP_TOP_FIELDS(NG_DUMP_KEY_NAME) "ncclguard_version",
                                       "nccl_version"};
#define TOP_ID(key, kind, source) T_##key,
enum { NG_DUMP_TOP_FIELDS(TOP_ID) T_ncclguard_version, T_nccl_version, T_NKEYS };
_Static_assert(T_NKEYS <= 32, "top-level keys are bits of a uint32_t");
#define BIT(k) (1u << (k))
#define NEED_ALL                                                                               \
    (BIT(T_schema) | BIT(T_reason) | BIT(T_time_ns) | BIT(T_host) | BIT(T_pid) | BIT(T_rank) | \
     BIT(T_local_rank) | BIT(T_job) | BIT(T_flight) | BIT(T_comms) | BIT(T_ops))
#define NEED_2 (NEED_ALL | BIT(T_incident) | BIT(T_versions) | BIT(T_threads) | BIT(T_python))
#define NEED_1 (NEED_ALL | BIT(T_ncclguard_version) | BIT(T_nccl_version))

static const char *const version_keys[] = {NG_DUMP_VERSION_FIELDS(NG_DUMP_KEY_NAME)};
#define VERSION_ID(key, kind, source) V_##key,
enum { NG_DUMP_VERSION_FIELDS(VERSION_ID) V_NKEYS };
static const char *const flight_keys[] = {NG_DUMP_FLIGHT_FIELDS(NG_DUMP_KEY_NAME)};
#define FLIGHT_ID(key, kind, source) F_##key,
enum { NG_DUMP_FLIGHT_FIELDS(FLIGHT_ID) F_NKEYS };
static struct ng_jkeys top_table, version_table, flight_table;

static void init_once(void)
{
    ng_jkeys_init(&top_table, top_keys, T_NKEYS);
    ng_jkeys_init(&version_table, version_keys, V_NKEYS);
    ng_jkeys_init(&flight_table, flight_keys, F_NKEYS);
}

struct top_ctx {
    struct dr_reader *r;
    uint32_t seen;
};

/* "ncclguard.dump/<major>[.<minor>]" with major 1 or 2. */
static int check_schema(struct dr_reader *r, const char *s)
{
    static const char prefix[] = NG_DUMP_SCHEMA_PREFIX;
    const char *p = s + sizeof prefix - 1;
    char *end;
    if (strncmp(s, prefix, sizeof prefix - 1) || *p < '1' || *p > '9') goto bad;
    long major = strtol(p, &end, 10), minor = 0;
    if (*end == '.') {
        if (end[1] < '0' || end[1] > '9') goto bad;
        minor = strtol(end + 1, &end, 10);
    }
    if (*end || (major != 1 && major != 2) || minor > 1000000) goto bad;
    r->d->major = (int)major;
    r->d->minor = (int)minor;
    return 0;
bad:;
    char why[160];
    snprintf(why, sizeof why,
             "unknown schema '%.80s' (this reader knows ncclguard.dump/1.x and "
             "/2.x)",
             s);
    return dr_fail(r, NULL, why);
}

static int version_member(void *c, int k, ng_jv *v)
{
    struct dr_reader *r = c;
    switch (k) {
    case V_ncclguard: return dr_str(r, version_keys[k], v, &r->d->versions.ncclguard);
    case V_nccl: return dr_i64(r, version_keys[k], v, &r->d->versions.nccl, 0);
    case V_cuda_driver: return dr_i64(r, version_keys[k], v, &r->d->versions.cuda_driver, 0);
    case V_python: return dr_str(r, version_keys[k], v, &r->d->versions.python);
    }
    return 0;
}

static int flight_member(void *c, int k, ng_jv *v)
{
    struct dr_reader *r = c;
    uint64_t *f[F_NKEYS] = {[F_capacity] = &r->d->flight.capacity,
                            [F_recorded] = &r->d->flight.recorded,
                            [F_overwritten] = &r->d->flight.overwritten,
                            [F_dropped_inflight] = &r->d->flight.dropped_inflight};
    return f[k] ? dr_u64(r, flight_keys[k], v, f[k]) : 0;
}

static int nested(struct dr_reader *r, const char *name, ng_jv *v, const struct ng_jkeys *keys,
                  ng_jmember_fn fn)
{
    dr_enter(r, name, -1);
    int rc = dr_object(r, v, keys, fn, r);
    dr_leave(r);
    return rc;
}

static int top_member(void *c, int k, ng_jv *v)
{
    struct top_ctx *x = c;
    struct dr_reader *r = x->r;
    struct dr_dump *d = r->d;
    const char *key = top_keys[k];
    if (x->seen & BIT(k)) return dr_fail(r, key, "appears twice");
    x->seen |= BIT(k);
    switch (k) {
    case T_schema:
        if (dr_str(r, key, v, &d->schema)) return -1;
        if (!d->schema) return dr_fail(r, key, "not a string");
        return check_schema(r, d->schema);
    case T_reason: return dr_str(r, key, v, &d->reason);
    case T_incident: return dr_str(r, key, v, &d->incident);
    case T_time_ns: return dr_i64(r, key, v, &d->time_ns, 0);
    case T_host: return dr_str(r, key, v, &d->host);
    case T_pid: return dr_i64(r, key, v, &d->pid, DR_NONE);
    case T_rank: return dr_i64(r, key, v, &d->rank, DR_NONE);
    case T_local_rank: return dr_i64(r, key, v, &d->local_rank, DR_NONE);
    case T_job: return dr_str(r, key, v, &d->job);
    case T_versions: return nested(r, key, v, &version_table, version_member);
    case T_flight: return nested(r, key, v, &flight_table, flight_member);
    case T_comms: return dr_read_comms(r, v);
    case T_ops: return dr_read_ops(r, v);
    case T_threads: return dr_read_threads(r, v);
    case T_python: return dr_read_python(r, v);
    case T_ncclguard_version: return dr_str(r, key, v, &d->versions.ncclguard);
    case T_nccl_version: return dr_i64(r, key, v, &d->versions.nccl, 0);
    case T_ras:
        if (ng_jv_kind(v) == NG_J_STRING || ng_jv_kind(v) == NG_J_NULL)
            return dr_str(r, key, v, &d->ras);
        return 0; /* another shape: not one this reader shows */
    }
    return 0;
}

static int root(void *c, ng_jv *v)
{
    struct top_ctx *x = c;
    struct dr_reader *r = x->r;
    if (dr_object(r, v, &top_table, top_member, x)) return -1;
    if (!(x->seen & BIT(T_schema))) return dr_fail(r, NULL, "no \"schema\": not a dump");
    uint32_t need = r->d->major == 2 ? NEED_2 : NEED_1;
    if ((x->seen & need) != need) return dr_missing(r, top_keys, T_NKEYS, x->seen, need);
    if (!r->d->host || !r->d->job || !r->d->reason)
        return dr_fail(r, !r->d->host ? "host" : !r->d->job ? "job" : "reason", "null");
    return 0;
}

static struct dr_dump *parse_once(ng_jparser *p, const char *buf, size_t len, const char *path,
                                  int flags, int no_tail, int *again, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
    struct dr_dump *d = calloc(1, sizeof *d);
    struct dr_mem *m = calloc(1, sizeof *m);
    char jerr[256] = "";
    if (!d || !m) {
        free(d);
        free(m);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->mem = m;
    d->bytes = len;
    d->rank = d->local_rank = d->pid = DR_NONE;
    d->path = path ? dr_mem_strdup(m, path, strlen(path)) : NULL;
    err[0] = '\0';
    struct dr_reader r = {.d = d,
                          .m = m,
                          .err = err,
                          .errlen = errlen,
                          .brief = flags & DR_BRIEF,
                          .no_tail = no_tail};
    struct top_ctx x = {&r, 0};
    int rc = ng_json_parse(p, buf, len, root, &x, jerr, sizeof jerr);
    *again = rc == 0 && r.order_broken;
    if (rc == 0 && !*again) return d;
    if (jerr[0]) /* the document itself is malformed: that says more than a member */
        snprintf(err, errlen, "%s", jerr);
    else if (!err[0])
        snprintf(err, errlen, "not a dump");
    dr_free(d);
    return NULL;
}

struct dr_dump *dr_parse(ng_jparser *p, const char *buf, size_t len, const char *path, int flags,
                         char *err, size_t errlen)
{
    if (dr_fr_is(buf, len)) return dr_fr_parse(buf, len, path, err, errlen); /* by content */
    int again;
    struct dr_dump *d = parse_once(p, buf, len, path, flags, 0, &again, err, errlen);
    if (again) /* an op in flight after one that is not: read everything of every op */
        d = parse_once(p, buf, len, path, flags, 1, &again, err, errlen);
    if (d) dr_resolve_frames(d);
    return d;
}

/* The file is opened as base/infile.h says (a FIFO or a device is refused
 * without being opened, nothing blocks), at most MAX_DUMP_BYTES. Dumps of any
 * owner and mode are read, and a symlink is followed: the person names the
 * directory, and an administrator reads the dumps of every user. */
int dr_slurp(const char *path, struct dr_bytes *b, char *err, size_t errlen)
{
    struct stat st;
    b->len = 0;
    int fd = ncclguard_infile_open(AT_FDCWD, path,
                                   NG_INFILE_ANY_OWNER | NG_INFILE_ANY_MODE | NG_INFILE_FOLLOW,
                                   (off_t)MAX_DUMP_BYTES, &st, err, errlen);
    if (fd < 0) return -1;
    size_t size = (size_t)st.st_size, got = 0;
    if (size + NG_JSON_PADDING > b->cap) {
        char *nb = realloc(b->buf, size + NG_JSON_PADDING);
        if (!nb) {
            snprintf(err, errlen, "out of memory");
            close(fd);
            return -1;
        }
        b->buf = nb;
        b->cap = size + NG_JSON_PADDING;
    }
    while (got < size) { /* a file that shrank meanwhile is read as far as it goes */
        ssize_t n = read(fd, b->buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (got == 0) {
        snprintf(err, errlen, "empty file");
        return -1;
    }
    memset(b->buf + got, 0, NG_JSON_PADDING);
    b->len = got;
    return 0;
}

void dr_unslurp(struct dr_bytes *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

struct dr_dump *dr_read_file(ng_jparser *p, const char *path, int flags, char *err, size_t errlen)
{
    struct dr_bytes b = {0};
    struct dr_dump *d = NULL;
    if (!dr_slurp(path, &b, err, errlen)) d = dr_parse(p, b.buf, b.len, path, flags, err, errlen);
    dr_unslurp(&b);
    return d;
}
