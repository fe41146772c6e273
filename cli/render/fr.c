/*
 * render/fr.c: ncclguard's dumps as Flight Recorder dumps (render/fr.h). The
 * member names and their meaning follow torch's writer (FlightRecorder's
 * dump_entries in torch/csrc/distributed/c10d, format "2.10"): per entry
 * record_id, pg_id, process_group (name, desc), collective_seq_id, p2p_seq_id,
 * op_id, profiling_name, time_created_ns, input and output sizes and dtypes,
 * state, the two discovery times, retired, is_p2p, timeout_ms, frames; at the
 * top version, comm_lib_version, pg_config and pg_status.
 */
#include "render/fr.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ops.h"
#include "dump/dump.h"
#include "render/pickle.h"

#define MAX_MEMBERS (1 << 20) /* a communicator larger than this is left without members */

struct group {
    uint64_t id;
    int64_t nranks;
    int64_t *members; /* global rank of each comm rank, DR_NONE when no dump names it */
    char *desc;
};

struct chosen {
    int64_t rank, time_ns;
    char *path;
};

struct rn_fr {
    struct group *groups;
    size_t ngroups, gcap;
    struct chosen *ranks;
    size_t nranks, rcap;
};

struct rn_fr *rn_fr_new(void)
{
    return calloc(1, sizeof(struct rn_fr));
}

void rn_fr_free(struct rn_fr *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->ngroups; i++) {
        free(f->groups[i].members);
        free(f->groups[i].desc);
    }
    for (size_t i = 0; i < f->nranks; i++) free(f->ranks[i].path);
    free(f->groups);
    free(f->ranks);
    free(f);
}

static int grow(void **a, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *b = realloc(*a, c * size);
    if (!b) return -1;
    *a = b;
    *cap = c;
    return 0;
}

static const struct group *group_of(const struct rn_fr *f, uint64_t id)
{
    for (size_t i = 0; i < f->ngroups; i++)
        if (f->groups[i].id == id) return &f->groups[i];
    return NULL;
}

static int learn_comm(struct rn_fr *f, const struct dr_comm *c, int64_t global)
{
    struct group *g = (struct group *)group_of(f, c->id);
    if (!g) {
        if (grow((void **)&f->groups, &f->gcap, f->ngroups, sizeof *f->groups)) return -1;
        g = &f->groups[f->ngroups++];
        memset(g, 0, sizeof *g);
        g->id = c->id;
        g->nranks = c->nranks > 0 && c->nranks <= MAX_MEMBERS ? c->nranks : 0;
        if (g->nranks) {
            g->members = malloc((size_t)g->nranks * sizeof *g->members);
            if (!g->members) return -1;
            for (int64_t i = 0; i < g->nranks; i++) g->members[i] = DR_NONE;
        }
        /* the first dump's commName: torchfrtrace wants one desc per group */
        g->desc = strdup(c->name && c->name[0] ? c->name : "undefined");
        if (!g->desc) return -1;
    }
    if (global >= 0 && c->nranks == g->nranks && c->rank >= 0 && c->rank < g->nranks &&
        g->members[c->rank] == DR_NONE)
        g->members[c->rank] = global;
    return 0;
}

int rn_fr_learn(struct rn_fr *f, const struct dr_dump *d)
{
    for (size_t i = 0; i < d->ncomms; i++)
        if (learn_comm(f, &d->comms[i], d->rank)) return -1;
    if (d->rank < 0 || !d->path) return 0;
    struct chosen *c = NULL;
    for (size_t i = 0; i < f->nranks && !c; i++)
        if (f->ranks[i].rank == d->rank) c = &f->ranks[i];
    if (!c) {
        if (grow((void **)&f->ranks, &f->rcap, f->nranks, sizeof *f->ranks)) return -1;
        c = &f->ranks[f->nranks++];
        c->rank = d->rank;
        c->time_ns = INT64_MIN;
        c->path = NULL;
    }
    if (d->time_ns > c->time_ns || (d->time_ns == c->time_ns && strcmp(d->path, c->path) > 0)) {
        char *p = strdup(d->path);
        if (!p) return -1;
        free(c->path);
        c->path = p;
        c->time_ns = d->time_ns;
    }
    return 0;
}

int rn_fr_chosen(const struct rn_fr *f, const struct dr_dump *d)
{
    for (size_t i = 0; d->path && i < f->nranks; i++)
        if (f->ranks[i].rank == d->rank) return !strcmp(f->ranks[i].path, d->path);
    return 0;
}

/* ---- one dump ---- */

/* FR's name of each op (torch's OpType names), "" for one FR has none of */
static const char *fr_op(int op)
{
    switch (op) {
    case NG_OP_ALLREDUCE: return "all_reduce";
    case NG_OP_BROADCAST:
    case NG_OP_BCAST: return "broadcast";
    case NG_OP_REDUCE: return "reduce";
    case NG_OP_ALLGATHER: return "all_gather";
    case NG_OP_REDUCESCATTER: return "reduce_scatter";
    case NG_OP_ALLTOALL: return "all_to_all";
    case NG_OP_GATHER: return "gather";
    case NG_OP_SCATTER: return "scatter";
    case NG_OP_SEND: return "send";
    case NG_OP_RECV: return "recv";
    default: return "";
    }
}

/* the dump's datatype names as c10's ScalarType names, which FR writes */
static const char *const dtypes[][2] = {
    {"uint8", "Byte"},
    {"int8", "Char"},
    {"int16", "Short"},
    {"int32", "Int"},
    {"int64", "Long"},
    {"float16", "Half"},
    {"float32", "Float"},
    {"float64", "Double"},
    {"bfloat16", "BFloat16"},
    {"bool", "Bool"},
    {"float8e4m3", "Float8_e4m3fn"},
    {"float8e5m2", "Float8_e5m2"},
    {"uint16", "UInt16"},
    {"uint32", "UInt32"},
    {"uint64", "UInt64"},
};

static const char *c10_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(name, dtypes[i][0])) return dtypes[i][1];
    return name;
}

static void key(struct rn_pk *p, const char *k)
{
    rn_pk_str(p, k);
}

static void group_name(uint64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%016" PRIx64, id);
}

/* "[0, 1, 2, 3]": the members some dump names, in comm rank order */
static char *ranks_string(const struct group *g, size_t *missing)
{
    size_t cap = 3 + (size_t)g->nranks * 22, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    n += (size_t)snprintf(s + n, cap - n, "[");
    int first = 1;
    for (int64_t i = 0; i < g->nranks; i++) {
        if (g->members[i] == DR_NONE) {
            ++*missing;
            continue;
        }
        n += (size_t)snprintf(s + n, cap - n, "%s%" PRId64, first ? "" : ", ", g->members[i]);
        first = 0;
    }
    snprintf(s + n, cap - n, "]");
    return s;
}

static int write_groups(const struct rn_fr *f, const struct dr_dump *d, struct rn_pk *p,
                        struct rn_fr_counts *n)
{
    char name[24];
    key(p, "pg_config");
    rn_pk_dict_begin(p);
    for (size_t i = 0; i < d->ncomms; i++) {
        const struct group *g = group_of(f, d->comms[i].id);
        if (!g) continue;
        size_t missing = 0;
        char *ranks = ranks_string(g, &missing);
        if (!ranks) return -1;
        if (missing) n->no_members++;
        group_name(g->id, name, sizeof name);
        key(p, name);
        rn_pk_dict_begin(p);
        key(p, "name");
        rn_pk_str(p, name);
        key(p, "desc");
        rn_pk_str(p, g->desc);
        key(p, "ranks");
        rn_pk_str(p, ranks);
        rn_pk_dict_end(p);
        free(ranks);
    }
    rn_pk_dict_end(p);
    key(p, "pg_status");
    rn_pk_dict_begin(p);
    for (size_t i = 0; i < d->ncomms; i++) {
        const struct dr_comm *c = &d->comms[i];
        group_name(c->id, name, sizeof name);
        key(p, name);
        rn_pk_dict_begin(p);
        key(p, "last_enqueued_collective");
        rn_pk_int(p, (int64_t)c->last_seq);
        key(p, "last_started_collective");
        rn_pk_int(p, -1); /* the dump does not say */
        key(p, "last_completed_collective");
        rn_pk_int(p, (int64_t)c->last_completed_seq);
        rn_pk_dict_end(p);
    }
    rn_pk_dict_end(p);
    return 0;
}

/* [[count]]: one tensor of count elements */
static void sizes(struct rn_pk *p, uint64_t count)
{
    rn_pk_list_begin(p);
    rn_pk_list_begin(p);
    rn_pk_int(p, count > INT64_MAX ? INT64_MAX : (int64_t)count);
    rn_pk_list_end(p);
    rn_pk_list_end(p);
}

static void dtype_list(struct rn_pk *p, const char *dt)
{
    rn_pk_list_begin(p);
    rn_pk_str(p, c10_dtype(dt[0] ? dt : "unknown"));
    rn_pk_list_end(p);
}

static void time_or_none(struct rn_pk *p, int64_t t)
{
    if (t > 0)
        rn_pk_int(p, t);
    else
        rn_pk_none(p);
}

struct cursor { /* per communicator of the dump, along the ring */
    uint64_t last_seq, ops;
};

static void entry(struct rn_pk *p, const struct dr_dump *d, const struct dr_op *o,
                  const struct group *g, size_t pg, struct cursor *cur)
{
    char name[24], prof[96];
    int p2p = o->op == NG_OP_SEND || o->op == NG_OP_RECV;
    int64_t me = o->comm_rank >= 0 ? o->comm_rank : d->comms[pg].rank;
    int64_t nranks = g->nranks > 0 ? g->nranks : 1;
    if (o->op == NG_OP_SEND)
        snprintf(prof, sizeof prof, "nccl:send %" PRId64 "->%d", me, (int)o->peer);
    else if (o->op == NG_OP_RECV)
        snprintf(prof, sizeof prof, "nccl:recv %" PRId64 "<-%d", me, (int)o->peer);
    else
        snprintf(prof, sizeof prof, "nccl:%s", fr_op(o->op));
    if (!p2p && o->seq > cur->last_seq) cur->last_seq = o->seq;
    cur->ops++;
    /* the tensors' sizes as torch records them: NCCL's count is per rank where
     * one side holds every rank's part */
    uint64_t in = o->count, out = o->count, all = o->count * (uint64_t)nranks;
    if (o->op == NG_OP_ALLGATHER || o->op == NG_OP_GATHER) out = all;
    if (o->op == NG_OP_REDUCESCATTER || o->op == NG_OP_SCATTER) in = all;
    if (o->op == NG_OP_ALLTOALL) in = out = all;
    int done = o->state == NG_OP_COMPLETED;
    group_name(g->id, name, sizeof name);

    rn_pk_dict_begin(p);
    key(p, "record_id");
    rn_pk_int(p, (int64_t)o->index);
    key(p, "pg_id");
    rn_pk_int(p, (int64_t)pg);
    key(p, "process_group");
    rn_pk_tuple_begin(p);
    rn_pk_str(p, name);
    rn_pk_str(p, g->desc);
    rn_pk_tuple_end(p);
    key(p, "collective_seq_id");
    rn_pk_int(p, (int64_t)(p2p ? cur->last_seq : o->seq));
    key(p, "p2p_seq_id");
    rn_pk_int(p, p2p ? (int64_t)o->p2p_seq : 0);
    key(p, "op_id");
    rn_pk_int(p, (int64_t)cur->ops);
    key(p, "profiling_name");
    rn_pk_str(p, prof);
    key(p, "time_created_ns");
    rn_pk_int(p, o->enqueue_ns);
    key(p, "input_sizes");
    sizes(p, in);
    key(p, "output_sizes");
    sizes(p, out);
    key(p, "input_dtypes");
    dtype_list(p, o->datatype);
    key(p, "output_dtypes");
    dtype_list(p, o->datatype);
    key(p, "state");
    rn_pk_str(p, done ? "completed" : o->state == NG_OP_SCHEDULED ? "scheduled" : "started");
    key(p, "time_discovered_started_ns");
    time_or_none(p, o->seen_start_ns);
    key(p, "time_discovered_completed_ns");
    time_or_none(p, done ? o->seen_end_ns : 0);
    key(p, "retired");
    rn_pk_bool(p, done);
    key(p, "is_p2p");
    rn_pk_bool(p, p2p);
    key(p, "timeout_ms");
    rn_pk_int(p, 0); /* the dump does not carry the timeout the shim applied */
    key(p, "thread_id");
    char tid[24];
    snprintf(tid, sizeof tid, "%" PRIu64, o->thread);
    rn_pk_str(p, tid);
    key(p, "thread_name");
    rn_pk_str(p, "");
    key(p, "frames");
    rn_pk_list_begin(p);
    rn_pk_list_end(p);
    rn_pk_dict_end(p);
}

static int by_index(const void *x, const void *y)
{
    const struct dr_op *a = *(const struct dr_op *const *)x, *b = *(const struct dr_op *const *)y;
    return a->index < b->index ? -1 : a->index > b->index;
}

static size_t comm_index(const struct dr_dump *d, uint64_t id)
{
    for (size_t i = 0; i < d->ncomms; i++)
        if (d->comms[i].id == id) return i;
    return SIZE_MAX;
}

int rn_fr_write(const struct rn_fr *f, const struct dr_dump *d, struct rn_pk *p,
                struct rn_fr_counts *n)
{
    memset(n, 0, sizeof *n);
    const struct dr_op **ops = malloc((d->nops ? d->nops : 1) * sizeof *ops);
    struct cursor *cur = calloc(d->ncomms ? d->ncomms : 1, sizeof *cur);
    if (!ops || !cur) {
        free(ops);
        free(cur);
        return -1;
    }
    for (size_t i = 0; i < d->nops; i++) ops[i] = &d->ops[i];
    qsort(ops, d->nops, sizeof *ops, by_index);

    rn_pk_dict_begin(p);
    key(p, "version");
    rn_pk_str(p, RN_FR_VERSION);
    key(p, "comm_lib_version");
    char v[32] = "";
    if (d->versions.nccl > 0)
        snprintf(v, sizeof v, "%d.%d.%d", (int)(d->versions.nccl / 10000),
                 (int)(d->versions.nccl / 100 % 100), (int)(d->versions.nccl % 100));
    rn_pk_str(p, v);
    int rc = write_groups(f, d, p, n);
    key(p, "entries");
    rn_pk_list_begin(p);
    for (size_t i = 0; i < d->nops && !rc; i++) {
        const struct dr_op *o = ops[i];
        size_t pg = comm_index(d, o->comm);
        const struct group *g = pg == SIZE_MAX ? NULL : group_of(f, o->comm);
        if (!g || !fr_op(o->op)[0] || o->state == NG_OP_CAPTURED || o->state == NG_OP_UNTRACKED) {
            n->left_out++;
            continue;
        }
        entry(p, d, o, g, pg, &cur[pg]);
        n->entries++;
    }
    rn_pk_list_end(p);
    rn_pk_dict_end(p);
    free(ops);
    free(cur);
    return rc || p->failed ? -1 : 0;
}
