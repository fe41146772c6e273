/*
 * dump/map.c: the members of a dump, read into struct dr_dump (dump/dump.h)
 * through json/json.h. One reader per object of docs/dump-format.md; members that
 * the reader does not know are skipped (minor versions add members), members
 * it needs must be there and of their kind.
 */
#include "dump/map.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump.h"
#include "dump/mem.h"
#include "dump/scalar.h"
#include "evidence/dump_format.h"
#include "json/json.h"

/* ---- ops[] ---- */

static const char *const flag_names[] = NG_DUMP_OP_FLAG_NAMES;
/* The writer's names (base/ops.h): another name reads as DR_OP_UNKNOWN, DR_ST_OTHER. */
#define NAME_OF(id, name, ...) name,
static const char *const op_names[] = {NG_OPS(NAME_OF)};
static const char *const state_names[] = {NG_OP_STATES(NAME_OF)};
#undef NAME_OF

#define F(name, kind, nullable, member, null_as) \
    {name, kind, nullable, offsetof(struct dr_op, member), 0, null_as, NULL}
#define S(name, member) \
    {name, NG_JF_CHARS, 1, offsetof(struct dr_op, member), sizeof(((struct dr_op *)0)->member), 0, NULL}
#define E(name, member, names, other) \
    {name, NG_JF_ENUM, 0, offsetof(struct dr_op, member), sizeof names / sizeof names[0], other, names}

/* Every member, in the writer's order (the reader tries the next one first). */
static const struct ng_jfield op_fields[] = {
    F("index", NG_JF_U64, 0, index, 0),
    F("comm", NG_JF_HEX, 0, comm, 0),
    F("comm_rank", NG_JF_I32, 1, comm_rank, DR_NONE),
    F("comm_nranks", NG_JF_I32, 1, comm_nranks, DR_NONE),
    F("seq", NG_JF_U64_OR_NULL, 1, seq, 0),
    F("p2p_seq", NG_JF_U64_OR_NULL, 1, p2p_seq, 0),
    E("op", op, op_names, DR_OP_UNKNOWN),
    F("count", NG_JF_U64, 0, count, 0),
    S("datatype", datatype),
    F("bytes", NG_JF_U64, 0, bytes, 0),
    S("redop", redop),
    F("root", NG_JF_I32, 1, root, DR_NONE),
    F("peer", NG_JF_I32, 1, peer, DR_NONE),
    F("stream", NG_JF_HEX, 0, stream, 0),
    F("group", NG_JF_U64_OR_NULL, 1, group, 0),
    F("thread", NG_JF_U64, 0, thread, 0),
    F("enqueue_ns", NG_JF_I64, 1, enqueue_ns, 0),
    F("enqueue_mono_ns", NG_JF_I64, 1, enqueue_mono_ns, 0),
    E("state", state, state_names, DR_ST_OTHER),
    F("gpu_start_ns", NG_JF_I64, 1, gpu_start_ns, 0),
    F("gpu_end_ns", NG_JF_I64, 1, gpu_end_ns, 0),
    F("seen_start_ns", NG_JF_I64, 1, seen_start_ns, 0),
    F("seen_end_ns", NG_JF_I64, 1, seen_end_ns, 0),
    S("times", times),
    F("result", NG_JF_I32, 1, result, 0),
    {"flags", NG_JF_FLAGS, 0, offsetof(struct dr_op, flags),
     sizeof flag_names / sizeof flag_names[0], 0, flag_names},
    F("marker", NG_JF_I32, 1, marker, DR_NONE),
    F("stack", NG_JF_I32, 1, stack, DR_NONE),
};
/* The members a dump's op must have. */
static const char *const op_required[] = {"index", "comm", "seq", "op", "state", "enqueue_ns"};
#define NOPFIELDS ((int)(sizeof op_fields / sizeof op_fields[0]))
/* The writer's list (shim/evidence/dump_format.h) and this table have the same members:
 * a member added there fails this until it is read here. */
#define COUNT_ONE(key, kind, source) +1
_Static_assert(NOPFIELDS == 0 NG_DUMP_OP_FIELDS(COUNT_ONE), "ops[] members differ from dump_format.h");

/* The members a brief read (DR_BRIEF) skips unparsed; and those it skips too
 * in the ops past the ones in flight (dump-format.md: those come first), which the
 * analysis needs only of an op in flight. */
static const char *const brief_skips[] = {"comm_rank", "comm_nranks", "bytes", "group",
                                          "enqueue_mono_ns", "seen_start_ns", "seen_end_ns",
                                          "marker", "stack"};
static const char *const tail_skips[] = {"index", "p2p_seq", "peer", "stream"};
static struct ng_jfield brief_fields[NOPFIELDS], tail_fields[NOPFIELDS];
static struct ng_jrecord op_record, brief_record, tail_record;
static uint64_t op_need, tail_need; /* the bits of op_required in each */

static int in_flight(int state) { return state == NG_OP_SCHEDULED || state == NG_OP_STARTED; }

static int op_elem(void *c, size_t i, ng_jv *v)
{
    struct dr_reader *r = c;
    struct dr_dump *d = r->d;
    struct dr_op *o = dr_mem_push(r->m, (void **)&d->ops, &d->nops, &r->ops_cap, sizeof *o);
    if (!o) return dr_fail(r, NULL, "out of memory");
    o->comm_rank = o->comm_nranks = o->root = o->peer = o->marker = o->stack = DR_NONE;
    uint64_t seen = 0;
    int bad, tail = r->brief && r->tail && !r->no_tail;
    const struct ng_jrecord *rec = !r->brief ? &op_record : tail ? &tail_record : &brief_record;
    uint64_t need = tail ? tail_need : op_need;
    if (!ng_jv_record(v, rec, o, &seen, &bad) && (seen & need) == need) {
        if (r->brief && !in_flight(o->state)) r->tail = 1;
        else if (tail) r->order_broken = 1;
        return 0;
    }
    dr_enter(r, "ops", (long)i);
    if (bad >= 0) dr_fail(r, rec->fields[bad].name, "not of its kind (see docs/dump-format.md)");
    else if ((seen & need) != need && !r->err[0])
        for (int k = 0; k < rec->n; k++)
            if ((need & ~seen) & (1ull << k)) {
                dr_fail(r, rec->fields[k].name, "missing");
                break;
            }
    if (!r->err[0]) dr_fail(r, NULL, "not an object");
    dr_leave(r);
    return -1;
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
    struct dr_reader *r;
    struct dr_comm *c;
    size_t peers_cap;
    uint32_t seen;
};

static int peer_member(void *c, int k, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct dr_peer *p = &x->c->peers[x->c->npeers - 1];
    x->seen |= 1u << k;
    if (k == 0) return dr_i64(x->r, peer_keys[k], v, &p->peer, DR_NONE);
    return dr_u64(x->r, peer_keys[k], v, k == 1 ? &p->last_p2p_seq : &p->last_completed_p2p_seq);
}

static struct ng_jkeys peer_table, comm_table;

static int peer_elem(void *c, size_t i, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct dr_comm *cm = x->c;
    if (!dr_mem_push(x->r->m, (void **)&cm->peers, &cm->npeers, &x->peers_cap, sizeof *cm->peers))
        return dr_fail(x->r, NULL, "out of memory");
    uint32_t seen = x->seen;
    x->seen = 0;
    dr_enter(x->r, "peers", (long)i);
    int rc = dr_object(x->r, v, &peer_table, peer_member, x);
    if (!rc && x->seen != 7) rc = dr_missing(x->r, peer_keys, 3, x->seen, 7);
    dr_leave(x->r);
    x->seen = seen;
    return rc;
}

static int comm_member(void *c, int k, ng_jv *v)
{
    struct comm_ctx *x = c;
    struct dr_reader *r = x->r;
    struct dr_comm *cm = x->c;
    const char *key = comm_keys[k];
    x->seen |= 1u << k;
    switch (k) {
    case C_ID: return dr_hex(r, key, v, &cm->id, 0);
    case C_RANK: return dr_i64(r, key, v, &cm->rank, DR_NONE);
    case C_NRANKS: return dr_i64(r, key, v, &cm->nranks, DR_NONE);
    case C_DEVICE: return dr_i64(r, key, v, &cm->device, DR_NONE);
    case C_NAME: return dr_str(r, key, v, &cm->name);
    case C_STATE: return dr_str(r, key, v, &cm->state);
    case C_BLOCKING: return dr_bool(r, key, v, &cm->blocking);
    case C_PARENT: return dr_hex(r, key, v, &cm->parent, 1);
    case C_CREATED: return dr_i64(r, key, v, &cm->created_ns, 0);
    case C_LAST_SEQ: return dr_u64(r, key, v, &cm->last_seq);
    case C_LAST_DONE: return dr_u64(r, key, v, &cm->last_completed_seq);
    case C_ASYNC: return dr_i64(r, key, v, &cm->last_async_error, 0);
    case C_PEERS:
        if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(r, key, "not an array");
        return ng_jv_array(v, peer_elem, x);
    }
    return 0;
}

static int comm_elem(void *c, size_t i, ng_jv *v)
{
    struct dr_reader *r = c;
    struct dr_dump *d = r->d;
    struct dr_comm *cm = dr_mem_push(r->m, (void **)&d->comms, &d->ncomms, &r->comms_cap, sizeof *cm);
    if (!cm) return dr_fail(r, NULL, "out of memory");
    cm->device = DR_NONE;
    cm->blocking = 1;
    struct comm_ctx x = {r, cm, 0, 0};
    dr_enter(r, "comms", (long)i);
    int rc = dr_object(r, v, &comm_table, comm_member, &x);
    if (!rc && (x.seen & COMM_REQUIRED) != COMM_REQUIRED)
        rc = dr_missing(r, comm_keys, C_NKEYS, x.seen, COMM_REQUIRED);
    dr_leave(r);
    return rc;
}

/* ---- the arrays of the top level ---- */

static void init_once(void)
{
    ng_jrecord_init(&op_record, op_fields, NOPFIELDS);
    for (int i = 0; i < NOPFIELDS; i++) {
        brief_fields[i] = tail_fields[i] = op_fields[i];
        for (size_t k = 0; k < sizeof brief_skips / sizeof brief_skips[0]; k++)
            if (!strcmp(op_fields[i].name, brief_skips[k]))
                brief_fields[i].kind = tail_fields[i].kind = NG_JF_SKIP;
        for (size_t k = 0; k < sizeof tail_skips / sizeof tail_skips[0]; k++)
            if (!strcmp(op_fields[i].name, tail_skips[k])) tail_fields[i].kind = NG_JF_SKIP;
    }
    ng_jrecord_init(&brief_record, brief_fields, NOPFIELDS);
    ng_jrecord_init(&tail_record, tail_fields, NOPFIELDS);
    for (size_t k = 0; k < sizeof op_required / sizeof op_required[0]; k++)
        for (int i = 0; i < op_record.n; i++)
            if (!strcmp(op_fields[i].name, op_required[k])) op_need |= 1ull << i;
    tail_need = op_need;
    for (int i = 0; i < NOPFIELDS; i++)
        if (tail_fields[i].kind == NG_JF_SKIP) tail_need &= ~(1ull << i);
    ng_jkeys_init(&comm_table, comm_keys, C_NKEYS);
    ng_jkeys_init(&peer_table, peer_keys, 3);
}

static void init_tables(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

int dr_read_ops(struct dr_reader *r, ng_jv *v)
{
    init_tables();
    if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(r, "ops", "not an array");
    return ng_jv_array(v, op_elem, r);
}

int dr_read_comms(struct dr_reader *r, ng_jv *v)
{
    init_tables();
    if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(r, "comms", "not an array");
    return ng_jv_array(v, comm_elem, r);
}
