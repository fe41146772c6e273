/*
 * dumpread_map.c: the members of a dump, read into struct ng_dump (dumpread.h)
 * through jsonread.h. One reader per object of docs/dump-format.md; members that
 * the reader does not know are skipped (minor versions add members), members
 * it needs must be there and of their kind.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumpread.h"
#include "dumpread_mem.h"
#include "dumpread_scalar.h"

/* ---- ops[] ---- */

static const char *const op_keys[] = {
    "index", "comm", "comm_rank", "comm_nranks", "seq", "p2p_seq", "op", "count", "datatype",
    "bytes", "redop", "root", "peer", "stream", "group", "thread", "enqueue_ns",
    "enqueue_mono_ns", "state", "gpu_start_ns", "gpu_end_ns", "seen_start_ns", "seen_end_ns",
    "result", "flags", "marker"};
enum { K_INDEX, K_COMM, K_COMM_RANK, K_COMM_NRANKS, K_SEQ, K_P2P_SEQ, K_OP, K_COUNT, K_DATATYPE,
       K_BYTES, K_REDOP, K_ROOT, K_PEER, K_STREAM, K_GROUP, K_THREAD, K_ENQUEUE_NS,
       K_ENQUEUE_MONO_NS, K_STATE, K_GPU_START_NS, K_GPU_END_NS, K_SEEN_START_NS, K_SEEN_END_NS,
       K_RESULT, K_FLAGS, K_MARKER, K_NOPKEYS };
#define OP_REQUIRED ((1u << K_INDEX) | (1u << K_COMM) | (1u << K_SEQ) | (1u << K_OP) | \
                     (1u << K_STATE) | (1u << K_ENQUEUE_NS))

struct op_ctx {
    struct ng_rd *r;
    struct ng_dop *o;
    uint32_t seen;
};

static int op_flag(void *c, size_t i, ng_jv *v)
{
    static const char *const names[] = {"slow", "timeout", "deferred", "first", "dumped"};
    struct op_ctx *x = c;
    const char *s;
    size_t n;
    (void)i;
    if (ng_jv_string(v, &s, &n)) return ng_rd_fail(x->r, "flags", "not an array of strings");
    for (unsigned b = 0; b < sizeof names / sizeof names[0]; b++)
        if (strlen(names[b]) == n && !memcmp(names[b], s, n)) x->o->flags |= 1u << b;
    if (n > 3 && n < 6 && !memcmp(s, "bit", 3)) {
        int bit = atoi(s + 3);
        if (bit >= 0 && bit < 32) x->o->flags |= 1u << bit;
    }
    return 0;
}

static int op_member(void *c, int k, ng_jv *v)
{
    struct op_ctx *x = c;
    struct ng_rd *r = x->r;
    struct ng_dop *o = x->o;
    const char *key = op_keys[k];
    x->seen |= 1u << k;
    switch (k) {
    case K_INDEX: return rd_u64(r, key, v, &o->index);
    case K_COMM: return rd_hex(r, key, v, &o->comm, 0);
    case K_COMM_RANK: return rd_i32(r, key, v, &o->comm_rank, NG_DUMP_NONE);
    case K_COMM_NRANKS: return rd_i32(r, key, v, &o->comm_nranks, NG_DUMP_NONE);
    case K_SEQ: return rd_u64_or_null(r, key, v, &o->seq);
    case K_P2P_SEQ: return rd_u64_or_null(r, key, v, &o->p2p_seq);
    case K_OP: return rd_enum(r, key, v, ng_dop_name_str, NG_OP_NNAMES, NG_OP_UNKNOWN, &o->op);
    case K_COUNT: return rd_u64(r, key, v, &o->count);
    case K_DATATYPE: return rd_chars(r, key, v, o->datatype, sizeof o->datatype);
    case K_BYTES: return rd_u64(r, key, v, &o->bytes);
    case K_REDOP: return rd_chars(r, key, v, o->redop, sizeof o->redop);
    case K_ROOT: return rd_i32(r, key, v, &o->root, NG_DUMP_NONE);
    case K_PEER: return rd_i32(r, key, v, &o->peer, NG_DUMP_NONE);
    case K_STREAM: return rd_hex(r, key, v, &o->stream, 0);
    case K_GROUP: return rd_u64_or_null(r, key, v, &o->group);
    case K_THREAD: return rd_u64(r, key, v, &o->thread);
    case K_ENQUEUE_NS: return rd_i64(r, key, v, &o->enqueue_ns, 0);
    case K_ENQUEUE_MONO_NS: return rd_i64(r, key, v, &o->enqueue_mono_ns, 0);
    case K_STATE: return rd_enum(r, key, v, ng_dop_state_str, NG_ST_NSTATES, NG_ST_OTHER, &o->state);
    case K_GPU_START_NS: return rd_i64(r, key, v, &o->gpu_start_ns, 0);
    case K_GPU_END_NS: return rd_i64(r, key, v, &o->gpu_end_ns, 0);
    case K_SEEN_START_NS: return rd_i64(r, key, v, &o->seen_start_ns, 0);
    case K_SEEN_END_NS: return rd_i64(r, key, v, &o->seen_end_ns, 0);
    case K_RESULT: return rd_i32(r, key, v, &o->result, 0);
    case K_MARKER: return rd_i32(r, key, v, &o->marker, NG_DUMP_NONE);
    case K_FLAGS:
        o->flags = 0;
        if (ng_jv_kind(v) != NG_J_ARRAY) return ng_rd_fail(r, key, "not an array");
        return ng_jv_array(v, op_flag, x);
    }
    return 0;
}

static struct ng_jkeys op_table;
static int op_elem(void *c, size_t i, ng_jv *v)
{
    struct ng_rd *r = c;
    struct ng_dump *d = r->d;
    struct ng_dop *o = ng_mem_push(r->m, (void **)&d->ops, &d->nops, &r->ops_cap, sizeof *o);
    if (!o) return ng_rd_fail(r, NULL, "out of memory");
    o->comm_rank = o->comm_nranks = o->root = o->peer = o->marker = NG_DUMP_NONE;
    struct op_ctx x = {r, o, 0};
    rd_enter(r, "ops", (long)i);
    int rc = rd_object(r, v, &op_table, op_member, &x);
    if (!rc && (x.seen & OP_REQUIRED) != OP_REQUIRED)
        rc = rd_missing(r, op_keys, K_NOPKEYS, x.seen, OP_REQUIRED);
    rd_leave(r);
    return rc;
}

/* ---- comms[] and their peers ---- */

static const char *const comm_keys[] = {"id", "rank", "nranks", "device", "name", "state",
                                        "blocking", "parent", "created_ns", "last_seq",
                                        "last_completed_seq", "last_async_error", "peers"};
enum { C_ID, C_RANK, C_NRANKS, C_DEVICE, C_NAME, C_STATE, C_BLOCKING, C_PARENT, C_CREATED,
       C_LAST_SEQ, C_LAST_DONE, C_ASYNC, C_PEERS, C_NKEYS };
#define COMM_REQUIRED ((1u << C_ID) | (1u << C_RANK) | (1u << C_NRANKS) | (1u << C_LAST_SEQ) | \
                       (1u << C_LAST_DONE))
static const char *const peer_keys[] = {"peer", "last_p2p_seq", "last_completed_p2p_seq"};

struct comm_ctx {
    struct ng_rd *r;
    struct ng_dcomm *c;
    size_t peers_cap;
    uint32_t seen;
};

static int peer_member(void *c, int k, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct ng_dpeer *p = &x->c->peers[x->c->npeers - 1];
    x->seen |= 1u << k;
    if (k == 0) return rd_i64(x->r, peer_keys[k], v, &p->peer, NG_DUMP_NONE);
    return rd_u64(x->r, peer_keys[k], v, k == 1 ? &p->last_p2p_seq : &p->last_completed_p2p_seq);
}

static struct ng_jkeys peer_table, comm_table;

static int peer_elem(void *c, size_t i, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct ng_dcomm *cm = x->c;
    if (!ng_mem_push(x->r->m, (void **)&cm->peers, &cm->npeers, &x->peers_cap, sizeof *cm->peers))
        return ng_rd_fail(x->r, NULL, "out of memory");
    uint32_t seen = x->seen;
    x->seen = 0;
    rd_enter(x->r, "peers", (long)i);
    int rc = rd_object(x->r, v, &peer_table, peer_member, x);
    if (!rc && x->seen != 7) rc = rd_missing(x->r, peer_keys, 3, x->seen, 7);
    rd_leave(x->r);
    x->seen = seen;
    return rc;
}

static int comm_member(void *c, int k, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct ng_rd *r = x->r;
    struct ng_dcomm *cm = x->c;
    const char *key = comm_keys[k];
    x->seen |= 1u << k;
    switch (k) {
    case C_ID: return rd_hex(r, key, v, &cm->id, 0);
    case C_RANK: return rd_i64(r, key, v, &cm->rank, NG_DUMP_NONE);
    case C_NRANKS: return rd_i64(r, key, v, &cm->nranks, NG_DUMP_NONE);
    case C_DEVICE: return rd_i64(r, key, v, &cm->device, NG_DUMP_NONE);
    case C_NAME: return rd_str(r, key, v, &cm->name);
    case C_STATE: return rd_str(r, key, v, &cm->state);
    case C_BLOCKING: return rd_bool(r, key, v, &cm->blocking);
    case C_PARENT: return rd_hex(r, key, v, &cm->parent, 1);
    case C_CREATED: return rd_i64(r, key, v, &cm->created_ns, 0);
    case C_LAST_SEQ: return rd_u64(r, key, v, &cm->last_seq);
    case C_LAST_DONE: return rd_u64(r, key, v, &cm->last_completed_seq);
    case C_ASYNC: return rd_i64(r, key, v, &cm->last_async_error, 0);
    case C_PEERS:
        if (ng_jv_kind(v) != NG_J_ARRAY) return ng_rd_fail(r, key, "not an array");
        return ng_jv_array(v, peer_elem, x);
    }
    return 0;
}

static int comm_elem(void *c, size_t i, ng_jv *v)
{
    struct ng_rd *r = c;
    struct ng_dump *d = r->d;
    struct ng_dcomm *cm = ng_mem_push(r->m, (void **)&d->comms, &d->ncomms, &r->comms_cap, sizeof *cm);
    if (!cm) return ng_rd_fail(r, NULL, "out of memory");
    cm->device = NG_DUMP_NONE;
    cm->blocking = 1;
    struct comm_ctx x = {r, cm, 0, 0};
    rd_enter(r, "comms", (long)i);
    int rc = rd_object(r, v, &comm_table, comm_member, &x);
    if (!rc && (x.seen & COMM_REQUIRED) != COMM_REQUIRED)
        rc = rd_missing(r, comm_keys, C_NKEYS, x.seen, COMM_REQUIRED);
    rd_leave(r);
    return rc;
}

/* ---- the arrays of the top level ---- */

static void init_once(void)
{
    ng_jkeys_init(&op_table, op_keys, K_NOPKEYS);
    ng_jkeys_init(&comm_table, comm_keys, C_NKEYS);
    ng_jkeys_init(&peer_table, peer_keys, 3);
}

static void init_tables(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

int ng_rd_ops(struct ng_rd *r, ng_jv *v)
{
    init_tables();
    if (ng_jv_kind(v) != NG_J_ARRAY) return ng_rd_fail(r, "ops", "not an array");
    return ng_jv_array(v, op_elem, r);
}

int ng_rd_comms(struct ng_rd *r, ng_jv *v)
{
    init_tables();
    if (ng_jv_kind(v) != NG_J_ARRAY) return ng_rd_fail(r, "comms", "not an array");
    return ng_jv_array(v, comm_elem, r);
}
