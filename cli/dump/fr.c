/*
 * dump/fr.c: a Flight Recorder dump into struct dr_dump (dump/fr.h). The pickle is
 * read by pickle.h; then
 *  - each process group becomes a communicator, whose id is a hash of the group's
 *    name and member list (the same on every rank), its comm rank this rank's
 *    place in that list, its last seq the highest collective_seq_id enqueued;
 *  - each entry becomes an op: seq from collective_seq_id (p2p_seq_id for a send
 *    or receive), the op from profiling_name, count and bytes from the input
 *    sizes and dtypes, the state (a retired entry has completed), the enqueue
 *    time from time_created_ns, a timeout when it was in flight longer than its
 *    timeout_ms at the dump's time;
 *  - the rank is the number that ends the file's name, the job the name before it.
 * FR records no thread stacks, no GPU state for Gloo, no reduction, root, peer
 * counts or stream: those read as unknown.
 */
#include "dump/fr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dump/dump.h"
#include "dump/mem.h"
#include "dump/pickle.h"
#include "pickle.h"

#define MAX_GROUP_RANKS (1 << 22)

int dr_fr_is(const char *buf, size_t len)
{
    return len >= 2 && (unsigned char)buf[0] == 0x80;
}

struct fr {
    struct dr_dump *d;
    struct dr_mem *m;
    const struct dr_pk_val *config, *status;
    size_t comms_cap, ops_cap;
    char *err;
    size_t errlen;
};

static int fr_fail(struct fr *f, const char *what)
{
    snprintf(f->err, f->errlen, "Flight Recorder dump: %s", what);
    return -1;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h * 0x100000001b3ull; /* the NUL too: "ab","c" differs from "a","bc" */
}

/* "[0, 1, 2]": this rank's place in it, and the count; -1 when not a list. */
static int parse_ranks(const char *s, int64_t me, int64_t *place, int64_t *n)
{
    *place = DR_NONE;
    *n = 0;
    while (*s == ' ') s++;
    if (*s++ != '[') return -1;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ']' && *n == 0) return 0;
        char *end;
        if (*s < '0' || *s > '9') return -1;
        long long r = strtoll(s, &end, 10);
        if (r == me) *place = *n;
        if (++*n > MAX_GROUP_RANKS) return -1;
        s = end;
        while (*s == ' ') s++;
        if (*s == ']') return 0;
        if (*s++ != ',') return -1;
    }
}

/* The group's entry of pg_config; the lone entry keyed "" otherwise (torch's Gloo
 * writes every group's members under the empty name). */
static const struct dr_pk_val *group_config(const struct fr *f, const char *name)
{
    const struct dr_pk_val *c = dr_pk_get(f->config, name);
    if (c) return c;
    if (f->config && f->config->kind == DR_PK_DICT && f->config->n == 2) {
        const char *k = dr_pk_str(f->config->u.items[0]);
        if (k && !k[0]) return f->config->u.items[1];
    }
    return NULL;
}

static int64_t status_int(const struct fr *f, const char *name, const char *key)
{
    int64_t x;
    if (dr_pk_int(dr_pk_get(dr_pk_get(f->status, name), key), &x)) return -1;
    return x;
}

/* The communicator of group name (made at its first sight); NULL when its
 * members are unknown. */
static struct dr_comm *comm_of(struct fr *f, const char *name, const char *desc)
{
    struct dr_dump *d = f->d;
    const struct dr_pk_val *cfg = group_config(f, name);
    const char *ranks = dr_pk_str(dr_pk_get(cfg, "ranks"));
    int64_t place, n;
    if (!ranks || parse_ranks(ranks, d->rank, &place, &n) || n < 1) return NULL;
    uint64_t id = fnv(fnv(0xcbf29ce484222325ull, name), ranks);
    for (size_t i = 0; i < d->ncomms; i++)
        if (d->comms[i].id == id) return &d->comms[i];
    struct dr_comm *c = dr_mem_push(f->m, (void **)&d->comms, &d->ncomms, &f->comms_cap, sizeof *c);
    if (!c) return NULL;
    c->id = id ? id : 1;
    c->rank = place;
    c->nranks = n;
    c->device = DR_NONE;
    c->blocking = 1;
    if (!desc) desc = dr_pk_str(dr_pk_get(cfg, "desc"));
    char label[256];
    snprintf(label, sizeof label, "pg %.100s%s%.100s%s", name, desc && desc[0] ? " (" : "",
             desc ? desc : "", desc && desc[0] ? ")" : "");
    c->name = dr_mem_strdup(f->m, label, strlen(label));
    c->state = "active";
    int64_t last = status_int(f, name, "last_enqueued_collective");
    int64_t done = status_int(f, name, "last_completed_collective");
    c->last_seq = last > 0 ? (uint64_t)last : 0;
    c->last_completed_seq = done > 0 ? (uint64_t)done : 0;
    return c;
}

/* ---- one entry ---- */

struct dtype {
    const char *c10, *name;
    unsigned size;
};
static const struct dtype dtypes[] = {
    {"Byte", "uint8", 1},
    {"Char", "int8", 1},
    {"Short", "int16", 2},
    {"Int", "int32", 4},
    {"Long", "int64", 8},
    {"Half", "float16", 2},
    {"Float", "float32", 4},
    {"Double", "float64", 8},
    {"BFloat16", "bfloat16", 2},
    {"Bool", "bool", 1},
    {"Float8_e4m3fn", "float8e4m3", 1},
    {"Float8_e5m2", "float8e5m2", 1},
    {"UInt16", "uint16", 2},
    {"UInt32", "uint32", 4},
    {"UInt64", "uint64", 8},
    {"ComplexFloat", "complex64", 8},
    {"ComplexDouble", "complex128", 16},
};

struct opname {
    const char *fr;
    int op;
};
static const struct opname opnames[] = {
    {"all_reduce", NG_OP_ALLREDUCE},
    {"allreduce", NG_OP_ALLREDUCE},
    {"broadcast", NG_OP_BROADCAST},
    {"reduce", NG_OP_REDUCE},
    {"all_gather", NG_OP_ALLGATHER},
    {"_allgather_base", NG_OP_ALLGATHER},
    {"allgather", NG_OP_ALLGATHER},
    {"all_gather_into_tensor_coalesced", NG_OP_ALLGATHER},
    {"reduce_scatter", NG_OP_REDUCESCATTER},
    {"_reduce_scatter_base", NG_OP_REDUCESCATTER},
    {"reduce_scatter_tensor_coalesced", NG_OP_REDUCESCATTER},
    {"all_to_all", NG_OP_ALLTOALL},
    {"all_to_all_single", NG_OP_ALLTOALL},
    {"alltoall_base", NG_OP_ALLTOALL},
    {"alltoall", NG_OP_ALLTOALL},
    {"gather", NG_OP_GATHER},
    {"scatter", NG_OP_SCATTER},
    {"send", NG_OP_SEND},
    {"recv", NG_OP_RECV},
};

/* "nccl:send 1->2", "gloo:recv 3<-0": the op, and the peer (a comm rank). */
static void op_of(const char *name, struct dr_op *o)
{
    const char *c = strrchr(name, ':');
    const char *s = c ? c + 1 : name;
    size_t len = strcspn(s, " ");
    o->op = DR_OP_UNKNOWN;
    for (size_t i = 0; i < sizeof opnames / sizeof opnames[0]; i++)
        if (strlen(opnames[i].fr) == len && !strncmp(opnames[i].fr, s, len))
            o->op = (uint8_t)opnames[i].op;
    const char *arrow = s[len] == ' ' ? strstr(s + len, o->op == NG_OP_SEND ? "->" : "<-") : NULL;
    if (arrow && (o->op == NG_OP_SEND || o->op == NG_OP_RECV) && arrow[2] >= '0' && arrow[2] <= '9')
        o->peer = (int32_t)strtol(arrow + 2, NULL, 10);
}

/* count: the elements of the input tensors; datatype and bytes from the first dtype */
static void sizes_of(const struct dr_pk_val *e, struct dr_op *o)
{
    const struct dr_pk_val *sizes = dr_pk_get(e, "input_sizes");
    uint64_t count = 0;
    for (size_t t = 0; t < dr_pk_len(sizes); t++) {
        const struct dr_pk_val *dims = dr_pk_item(sizes, t);
        uint64_t n = 1;
        for (size_t k = 0; k < dr_pk_len(dims); k++) {
            int64_t x;
            if (dr_pk_int(dr_pk_item(dims, k), &x) || x < 0) x = 0;
            n = x && n > UINT64_MAX / (uint64_t)x ? UINT64_MAX : n * (uint64_t)x;
        }
        count = count > UINT64_MAX - n ? UINT64_MAX : count + n;
    }
    o->count = count;
    const char *dt = dr_pk_str(dr_pk_item(dr_pk_get(e, "input_dtypes"), 0));
    snprintf(o->datatype, sizeof o->datatype, "%s", dt ? dt : "unknown");
    for (size_t i = 0; dt && i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dt, dtypes[i].c10)) {
            snprintf(o->datatype, sizeof o->datatype, "%s", dtypes[i].name);
            o->bytes = count > UINT64_MAX / dtypes[i].size ? UINT64_MAX : count * dtypes[i].size;
        }
}

static int64_t int_or(const struct dr_pk_val *e, const char *key, int64_t dflt)
{
    int64_t x;
    return dr_pk_int(dr_pk_get(e, key), &x) ? dflt : x;
}

static int entry(struct fr *f, const struct dr_pk_val *e, size_t i)
{
    struct dr_dump *d = f->d;
    char why[160];
    if (!e || e->kind != DR_PK_DICT) {
        snprintf(why, sizeof why, "entries[%zu] is not a dict", i);
        return fr_fail(f, why);
    }
    const struct dr_pk_val *pg = dr_pk_get(e, "process_group");
    const char *pname = dr_pk_str(dr_pk_item(pg, 0)), *pdesc = dr_pk_str(dr_pk_item(pg, 1));
    const char *prof = dr_pk_str(dr_pk_get(e, "profiling_name"));
    const char *state = dr_pk_str(dr_pk_get(e, "state"));
    if (!pname || !prof || !state) {
        snprintf(why, sizeof why, "entries[%zu] has no %s", i,
                 !pname  ? "process_group"
                 : !prof ? "profiling_name"
                         : "state");
        return fr_fail(f, why);
    }
    struct dr_op *o = dr_mem_push(f->m, (void **)&d->ops, &d->nops, &f->ops_cap, sizeof *o);
    if (!o) return fr_fail(f, "out of memory");
    o->comm_rank = o->comm_nranks = o->root = o->peer = o->marker = o->stack = DR_NONE;
    struct dr_comm *c = comm_of(f, pname, pdesc);
    if (c) {
        o->comm = c->id;
        o->stream = c->id; /* torch gives each group its own stream */
        o->comm_rank = (int32_t)c->rank;
        o->comm_nranks = (int32_t)c->nranks;
    }
    o->index = (uint64_t)int_or(e, "record_id", (int64_t)i);
    op_of(prof, o);
    int64_t seq = int_or(e, "collective_seq_id", 0), p2p = int_or(e, "p2p_seq_id", 0);
    int64_t is_p2p = int_or(e, "is_p2p", o->op == NG_OP_SEND || o->op == NG_OP_RECV);
    if (is_p2p)
        o->p2p_seq = p2p > 0 ? (uint64_t)p2p : 0;
    else
        o->seq = seq > 0 ? (uint64_t)seq : 0;
    if (!is_p2p) o->peer = DR_NONE;
    sizes_of(e, o);
    const char *tid = dr_pk_str(dr_pk_get(e, "thread_id"));
    o->thread = tid ? strtoull(tid, NULL, 10) : 0;
    o->enqueue_ns = int_or(e, "time_created_ns", 0);
    o->seen_start_ns = int_or(e, "time_discovered_started_ns", 0);
    o->seen_end_ns = int_or(e, "time_discovered_completed_ns", 0);
    o->state = !strcmp(state, "completed") || int_or(e, "retired", 0) ? NG_OP_COMPLETED
               : !strcmp(state, "started")                            ? NG_OP_STARTED
               : !strcmp(state, "scheduled")                          ? NG_OP_SCHEDULED
                                                                      : DR_ST_OTHER;
    /* duration_ms (GPU time, when torch times its collectives): the arrival measure */
    const struct dr_pk_val *dur = dr_pk_get(e, "duration_ms");
    if (dur && dur->kind == DR_PK_FLOAT && dur->u.f >= 0 && dur->u.f < 1e9 && o->enqueue_ns) {
        o->gpu_start_ns = o->enqueue_ns;
        o->gpu_end_ns = o->enqueue_ns + (int64_t)(dur->u.f * 1e6);
    }
    int64_t timeout = int_or(e, "timeout_ms", 0);
    if ((o->state == NG_OP_SCHEDULED || o->state == NG_OP_STARTED) && timeout > 0 && d->time_ns &&
        o->enqueue_ns && d->time_ns - o->enqueue_ns > timeout * 1000000)
        o->flags |= DR_OP_TIMEOUT;
    if (c && o->seq > c->last_seq) c->last_seq = o->seq;
    if (c && o->seq > c->last_completed_seq && o->state == NG_OP_COMPLETED)
        c->last_completed_seq = o->seq;
    return 0;
}

/* In flight first, then the others; newest first in each (the writer's order). */
static int by_flight(const void *x, const void *y)
{
    const struct dr_op *a = x, *b = y;
    int fa = a->state == NG_OP_SCHEDULED || a->state == NG_OP_STARTED;
    int fb = b->state == NG_OP_SCHEDULED || b->state == NG_OP_STARTED;
    if (fa != fb) return fb - fa;
    return a->index < b->index ? 1 : a->index > b->index ? -1 : 0;
}

/* The rank ends the file's name; the name before it stands for the job. */
static void name_rank(struct fr *f, const char *path)
{
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path ? path : "";
    size_t len = strlen(base), k = len;
    while (k > 0 && base[k - 1] >= '0' && base[k - 1] <= '9' && len - k < 9) k--;
    char job[160];
    snprintf(job, sizeof job, "torch FR %.*s*", (int)(k < 120 ? k : 120), base);
    f->d->job = dr_mem_strdup(f->m, job, strlen(job));
    if (k < len) f->d->rank = strtol(base + k, NULL, 10);
}

static int nccl_version(const char *s)
{
    int a = 0, b = 0, c = 0;
    if (!s || sscanf(s, "%d.%d.%d", &a, &b, &c) < 2 || a < 0 || b < 0 || c < 0 || a > 99 ||
        b > 99 || c > 99)
        return 0;
    return a * 10000 + b * 100 + c;
}

static int fill(struct fr *f, const struct dr_pk_val *root, const char *path)
{
    struct dr_dump *d = f->d;
    if (!root || root->kind != DR_PK_DICT) return fr_fail(f, "not a dict");
    const char *version = dr_pk_str(dr_pk_get(root, "version"));
    const struct dr_pk_val *entries = dr_pk_get(root, "entries");
    f->config = dr_pk_get(root, "pg_config");
    f->status = dr_pk_get(root, "pg_status");
    if (!version || !entries || entries->kind != DR_PK_LIST || !f->config)
        return fr_fail(f, !version     ? "no \"version\""
                          : !entries   ? "no \"entries\""
                          : !f->config ? "no \"pg_config\""
                                       : "\"entries\" is not a list");
    int major = 0, minor = 0;
    if (sscanf(version, "%d.%d", &major, &minor) != 2 || major != 2) {
        char why[160];
        snprintf(why, sizeof why, "version '%.40s' (this reader knows 2.x)", version);
        return fr_fail(f, why);
    }
    char schema[64];
    snprintf(schema, sizeof schema, "torch.fr/%d.%d", major, minor);
    d->schema = dr_mem_strdup(f->m, schema, strlen(schema));
    d->major = major;
    d->minor = minor;
    name_rank(f, path);
    d->versions.nccl = nccl_version(dr_pk_str(dr_pk_get(root, "comm_lib_version")));
    /* the dump's time: when the file was written, else its newest entry */
    struct stat st;
    if (path && !stat(path, &st))
        d->time_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    int64_t newest = 0;
    for (size_t i = 0; i < entries->n; i++) {
        int64_t t = int_or(entries->u.items[i], "time_created_ns", 0);
        if (t > newest) newest = t;
    }
    if (!d->time_ns) d->time_ns = newest;
    for (size_t i = 0; i < entries->n; i++)
        if (entry(f, entries->u.items[i], i)) return -1;
    /* groups with a status and no entry left: their last seqs still count */
    for (size_t i = 0; f->status && f->status->kind == DR_PK_DICT && i + 1 < f->status->n; i += 2) {
        const char *name = dr_pk_str(f->status->u.items[i]);
        if (name) (void)comm_of(f, name, NULL);
    }
    int timeout = 0;
    for (size_t i = 0; i < d->nops; i++) timeout |= !!(d->ops[i].flags & DR_OP_TIMEOUT);
    if (d->nops > 1) qsort(d->ops, d->nops, sizeof *d->ops, by_flight);
    d->reason = timeout ? "timeout" : "torch_fr";
    d->flight.recorded = d->nops;
    return 0;
}

struct dr_dump *dr_fr_parse(const char *buf, size_t len, const char *path, char *err, size_t errlen)
{
    char perr[200];
    struct dr_pk_doc *doc = dr_pk_parse(buf, len, perr, sizeof perr);
    if (!doc) {
        snprintf(err, errlen, "Flight Recorder dump: %s", perr);
        return NULL;
    }
    struct dr_dump *d = calloc(1, sizeof *d);
    struct dr_mem *m = calloc(1, sizeof *m);
    if (!d || !m) {
        free(d);
        free(m);
        dr_pk_free(doc);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->mem = m;
    d->rank = d->local_rank = d->pid = DR_NONE;
    d->path = path ? dr_mem_strdup(m, path, strlen(path)) : NULL;
    struct fr f = {.d = d, .m = m, .err = err, .errlen = errlen};
    err[0] = '\0';
    int rc = fill(&f, dr_pk_root(doc), path);
    dr_pk_free(doc);
    if (rc) {
        dr_free(d);
        return NULL;
    }
    return d;
}
