/*
 * track.c: see track.h. The wrappers call these hooks around every NCCL call;
 * the hooks map handles to registry records and keep the sequence numbers that
 * make one op comparable across ranks.
 */
#include "track.h"

#include <string.h>
#include <unistd.h>

#include "init.h"
#include "log.h"

int ncclguard_tracking;

static __thread int group_depth;
static uint64_t init_all_calls; /* CommInitAll ids: this process only, atomic */

const char *ncclguard_op_name(int type)
{
    static const char *const names[] = {
#define NG_OP_NAME(e, s) s,
        NG_OPS(NG_OP_NAME)
#undef NG_OP_NAME
    };
    return type >= 0 && type < NG_OP_NTYPES ? names[type] : "Unknown";
}

static int accepted(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

void ncclguard_op_pre(struct ng_op_ticket *t, int type, ncclComm_t comm, cudaStream_t stream,
                      size_t count, ncclDataType_t dtype, int redop, int root)
{
    (void)stream, (void)count, (void)dtype, (void)redop, (void)root;
    t->comm = ncclguard_comm_find(comm);
    t->type = type;
    t->peer = root;
}

void ncclguard_op_post(struct ng_op_ticket *t, ncclResult_t r)
{
    struct ng_comm *c = t->comm;
    if (!c || !accepted(r)) return;
    __atomic_fetch_add(&c->ops_by_type[t->type], 1, __ATOMIC_RELAXED);
    if (t->type == NG_OP_SEND || t->type == NG_OP_RECV) {
        if (c->p2p_seq && t->peer >= 0 && t->peer < c->nranks)
            __atomic_fetch_add(&c->p2p_seq[t->peer], 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&c->coll_seq, 1, __ATOMIC_RELAXED);
    }
}

void ncclguard_group_start_post(ncclResult_t r)
{
    if (r == ncclSuccess) group_depth++;
}

void ncclguard_group_end_post(ncclResult_t r)
{
    (void)r; /* NCCL leaves the group level whatever the result */
    if (group_depth > 0) group_depth--;
}

static void start_creation(struct ng_init_ticket *t, ncclComm_t *out, uint64_t id, int rank,
                           int nranks, uint64_t parent, const ncclConfig_t *config)
{
    ncclguard_first_comm();
    t->out = out;
    t->comm = ncclguard_comm_new(id, rank, nranks, parent, config);
}

void ncclguard_init_pre(struct ng_init_ticket *t, ncclComm_t *out, int nranks, int rank,
                        int nids, const ncclUniqueId *ids, const ncclConfig_t *config)
{
    uint64_t id = NG_HASH_SEED;
    for (int i = 0; ids && i < nids; i++) id = ncclguard_hash(id, &ids[i], sizeof ids[i]);
    start_creation(t, out, id, rank, nranks, 0, config);
}

void ncclguard_init_all_pre(struct ng_init_ticket *t, ncclComm_t *out, int ndev)
{
    (void)ndev;
    t->out = out;
    t->comm = NULL; /* one record per device is made in the post hook */
}

/* A child's id: the parent's id, the ordinal of this split on the parent (the
 * same on every rank, since splits are collective over the parent) and the
 * color or excluded set. */
static uint64_t child_id(struct ng_comm *parent, const void *what, size_t len)
{
    uint64_t ordinal = __atomic_fetch_add(&parent->splits, 1, __ATOMIC_RELAXED);
    uint64_t id = ncclguard_hash(parent->id, &ordinal, sizeof ordinal);
    return ncclguard_hash(id, what, len);
}

void ncclguard_split_pre(struct ng_init_ticket *t, ncclComm_t parent, int color,
                         ncclComm_t *out, const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t id = child_id(p, &color, sizeof color);
    if (color != NCCL_SPLIT_NOCOLOR) start_creation(t, out, id, -1, -1, p->id, config);
}

void ncclguard_shrink_pre(struct ng_init_ticket *t, ncclComm_t parent, const int *excluded,
                          int nexcluded, ncclComm_t *out, const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t set = NG_HASH_SEED;
    if (excluded && nexcluded > 0)
        set = ncclguard_hash(set, excluded, (size_t)nexcluded * sizeof *excluded);
    start_creation(t, out, child_id(p, &set, sizeof set), -1, -1, p->id, config);
}

void ncclguard_init_post(struct ng_init_ticket *t, ncclResult_t r)
{
    struct ng_comm *c = t->comm;
    if (!c) return;
    if (!accepted(r) || !t->out || !*t->out) {
        ncclguard_comm_set_state(c, NG_COMM_FAILED);
        return;
    }
    ncclguard_comm_attach(c, *t->out);
    if (r == ncclSuccess) ncclguard_comm_set_state(c, NG_COMM_READY);
}

void ncclguard_init_all_post(struct ng_init_ticket *t, int ndev, ncclResult_t r)
{
    if (r != ncclSuccess || !t->out) return;
    ncclguard_first_comm();
    uint64_t call = __atomic_fetch_add(&init_all_calls, 1, __ATOMIC_RELAXED);
    pid_t pid = getpid();
    for (int i = 0; i < ndev; i++) {
        uint64_t id = ncclguard_hash(NG_HASH_SEED, &pid, sizeof pid);
        id = ncclguard_hash(id, &call, sizeof call);
        struct ng_comm *c = ncclguard_comm_new(id, i, ndev, 0, NULL);
        ncclguard_comm_attach(c, t->out[i]);
        ncclguard_comm_set_state(c, NG_COMM_READY);
    }
}

void ncclguard_end_pre(struct ng_end_ticket *t, ncclComm_t comm, int kind)
{
    t->comm = ncclguard_comm_find(comm);
    t->kind = kind;
    /* Abort frees the handle even when it fails, so forget it first. */
    if (t->comm && kind == NG_END_ABORT) ncclguard_comm_set_state(t->comm, NG_COMM_ABORTED);
}

void ncclguard_end_post(struct ng_end_ticket *t, ncclResult_t r)
{
    static const int state_of[] = {
        [NG_END_FINALIZE] = NG_COMM_FINALIZING,
        [NG_END_DESTROY] = NG_COMM_DESTROYED,
        [NG_END_ABORT] = NG_COMM_ABORTED,
        [NG_END_REVOKE] = NG_COMM_REVOKED,
    };
    if (!t->comm || t->kind == NG_END_ABORT) return;
    if (accepted(r)) ncclguard_comm_set_state(t->comm, state_of[t->kind]);
}

void ncclguard_async_error_post(ncclComm_t comm, const ncclResult_t *err, ncclResult_t r)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (!c || r != ncclSuccess || !err) return;
    __atomic_store_n(&c->last_async_error, (int)*err, __ATOMIC_RELAXED);
    if (*err == ncclSuccess &&
        __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == NG_COMM_INITIALIZING)
        ncclguard_comm_set_state(c, NG_COMM_READY);
}

uint64_t ncclguard_op_total(int type)
{
    uint64_t n = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        n += __atomic_load_n(&ncclguard_comm_at(i)->ops_by_type[type], __ATOMIC_RELAXED);
    return n;
}
