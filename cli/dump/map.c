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

static const char *const flag_names[] = {NG_DUMP_OP_FLAG_NAMES};
/* The writer's names (base/ops.h): another name reads as DR_OP_UNKNOWN, DR_ST_OTHER. */
#define NAME_OF(id, name, ...) name,
static const char *const op_names[] = {NG_OPS(NAME_OF)};
static const char *const state_names[] = {NG_OP_STATES(NAME_OF)};
#undef NAME_OF

#define F(name, kind, nullable, member, null_as)                               \
    {                                                                          \
        name, kind, nullable, offsetof(struct dr_op, member), 0, null_as, NULL \
    }
#define S(name, member)                                                                            \
    {                                                                                              \
        name, NG_JF_CHARS, 1, offsetof(struct dr_op, member), sizeof(((struct dr_op *)0)->member), \
            0, NULL                                                                                \
    }
#define E(name, member, names, other)                                                        \
    {                                                                                        \
        name, NG_JF_ENUM, 0, offsetof(struct dr_op, member), sizeof names / sizeof names[0], \
            other, names                                                                     \
    }

/* How each member of an op is read, by its key in the writer's list
 * (evidence/dump_format.h): a key added or renamed there leaves its OP_<key>
 * undefined here, and this file no longer builds. */
#define OP_index(name) F(name, NG_JF_U64, 0, index, 0)
#define OP_comm(name) F(name, NG_JF_HEX, 0, comm, 0)
#define OP_comm_rank(name) F(name, NG_JF_I32, 1, comm_rank, DR_NONE)
#define OP_comm_nranks(name) F(name, NG_JF_I32, 1, comm_nranks, DR_NONE)
#define OP_seq(name) F(name, NG_JF_U64_OR_NULL, 1, seq, 0)
#define OP_p2p_seq(name) F(name, NG_JF_U64_OR_NULL, 1, p2p_seq, 0)
#define OP_op(name) E(name, op, op_names, DR_OP_UNKNOWN)
#define OP_count(name) F(name, NG_JF_U64, 0, count, 0)
#define OP_datatype(name) S(name, datatype)
#define OP_bytes(name) F(name, NG_JF_U64, 0, bytes, 0)
#define OP_redop(name) S(name, redop)
#define OP_root(name) F(name, NG_JF_I32, 1, root, DR_NONE)
#define OP_peer(name) F(name, NG_JF_I32, 1, peer, DR_NONE)
#define OP_stream(name) F(name, NG_JF_HEX, 0, stream, 0)
#define OP_group(name) F(name, NG_JF_U64_OR_NULL, 1, group, 0)
#define OP_thread(name) F(name, NG_JF_U64, 0, thread, 0)
#define OP_enqueue_ns(name) F(name, NG_JF_I64, 1, enqueue_ns, 0)
#define OP_enqueue_mono_ns(name) F(name, NG_JF_I64, 1, enqueue_mono_ns, 0)
#define OP_state(name) E(name, state, state_names, DR_ST_OTHER)
#define OP_gpu_start_ns(name) F(name, NG_JF_I64, 1, gpu_start_ns, 0)
#define OP_gpu_end_ns(name) F(name, NG_JF_I64, 1, gpu_end_ns, 0)
#define OP_seen_start_ns(name) F(name, NG_JF_I64, 1, seen_start_ns, 0)
#define OP_seen_end_ns(name) F(name, NG_JF_I64, 1, seen_end_ns, 0)
#define OP_times(name) S(name, times)
#define OP_result(name) F(name, NG_JF_I32, 1, result, 0)
#define OP_flags(name)                                              \
    {                                                               \
        name, NG_JF_FLAGS, 0, offsetof(struct dr_op, flags),        \
            sizeof flag_names / sizeof flag_names[0], 0, flag_names \
    }
#define OP_marker(name) F(name, NG_JF_I32, 1, marker, DR_NONE)
#define OP_stack(name) F(name, NG_JF_I32, 1, stack, DR_NONE)

/* Every member, in the writer's order (the reader tries the next one first). */
#define OP_FIELD(key, kind, source) OP_##key(#key),
static const struct ng_jfield op_fields[] = {NG_DUMP_OP_FIELDS(OP_FIELD)};
#define OP_ID(key, kind, source) O_##key,
enum { NG_DUMP_OP_FIELDS(OP_ID) NOPFIELDS };
_Static_assert(NOPFIELDS <= 64, "an op's members are bits of a uint64_t");

/* The members a dump's op must have. */
static const int op_required[] = {O_index, O_comm, O_seq, O_op, O_state, O_enqueue_ns};

/* The members a brief read (DR_BRIEF) skips unparsed; and those it skips too
 * in the ops past the ones in flight (dump-format.md: those come first), which the
 * analysis needs only of an op in flight. */
static const int brief_skips[] = {O_comm_rank,   O_comm_nranks,     O_bytes,
                                  O_group,       O_enqueue_mono_ns, O_seen_start_ns,
                                  O_seen_end_ns, O_marker,          O_stack};
static const int tail_skips[] = {O_index, O_p2p_seq, O_peer, O_stream};
static struct ng_jfield brief_fields[NOPFIELDS], tail_fields[NOPFIELDS];
static struct ng_jrecord op_record, brief_record, tail_record;
static uint64_t op_need, tail_need; /* the bits of op_required in each */

static int in_flight(int state)
{
    return state == NG_OP_SCHEDULED || state == NG_OP_STARTED;
}

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
        if (r->brief && !in_flight(o->state))
            r->tail = 1;
        else if (tail)
            r->order_broken = 1;
        return 0;
    }
    dr_enter(r, "ops", (long)i);
    if (bad >= 0)
        dr_fail(r, rec->fields[bad].name, "not of its kind (see docs/dump-format.md)");
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

static const char *const comm_keys[] = {NG_DUMP_COMM_FIELDS(NG_DUMP_KEY_NAME)};
#define COMM_ID(key, kind, source) C_##key,
enum { NG_DUMP_COMM_FIELDS(COMM_ID) C_NKEYS };
#define COMM_REQUIRED                                                        \
    ((1u << C_id) | (1u << C_rank) | (1u << C_nranks) | (1u << C_last_seq) | \
     (1u << C_last_completed_seq))
static const char *const peer_keys[] = {NG_DUMP_PEER_FIELDS(NG_DUMP_KEY_NAME)};
#define PEER_ID(key, kind, source) P_##key,
enum { NG_DUMP_PEER_FIELDS(PEER_ID) P_NKEYS };
#define PEER_REQUIRED ((1u << P_NKEYS) - 1)

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
    switch (k) {
    case P_peer: return dr_i64(x->r, peer_keys[k], v, &p->peer, DR_NONE);
    case P_last_p2p_seq: return dr_u64(x->r, peer_keys[k], v, &p->last_p2p_seq);
    case P_last_completed_p2p_seq: return dr_u64(x->r, peer_keys[k], v, &p->last_completed_p2p_seq);
    }
    return 0;
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
    if (!rc && x->seen != PEER_REQUIRED)
        rc = dr_missing(x->r, peer_keys, P_NKEYS, x->seen, PEER_REQUIRED);
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
    case C_id: return dr_hex(r, key, v, &cm->id, 0);
    case C_rank: return dr_i64(r, key, v, &cm->rank, DR_NONE);
    case C_nranks: return dr_i64(r, key, v, &cm->nranks, DR_NONE);
    case C_device: return dr_i64(r, key, v, &cm->device, DR_NONE);
    case C_name: return dr_str(r, key, v, &cm->name);
    case C_state: return dr_str(r, key, v, &cm->state);
    case C_blocking: return dr_bool(r, key, v, &cm->blocking);
    case C_parent: return dr_hex(r, key, v, &cm->parent, 1);
    case C_created_ns: return dr_i64(r, key, v, &cm->created_ns, 0);
    case C_last_seq: return dr_u64(r, key, v, &cm->last_seq);
    case C_last_completed_seq: return dr_u64(r, key, v, &cm->last_completed_seq);
    case C_last_async_error: return dr_i64(r, key, v, &cm->last_async_error, 0);
    case C_peers:
        if (ng_jv_kind(v) != NG_J_ARRAY) return dr_fail(r, key, "not an array");
        return ng_jv_array(v, peer_elem, x);
    }
    return 0;
}

static int comm_elem(void *c, size_t i, ng_jv *v)
{
    struct dr_reader *r = c;
    struct dr_dump *d = r->d;
    struct dr_comm *cm = dr_mem_push(r->m, (void **)&d->comms, &d->ncomms, &r->comms_cap,
                                     sizeof *cm);
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
    for (int i = 0; i < NOPFIELDS; i++) brief_fields[i] = tail_fields[i] = op_fields[i];
    for (size_t k = 0; k < sizeof brief_skips / sizeof brief_skips[0]; k++)
        brief_fields[brief_skips[k]].kind = tail_fields[brief_skips[k]].kind = NG_JF_SKIP;
    for (size_t k = 0; k < sizeof tail_skips / sizeof tail_skips[0]; k++)
        tail_fields[tail_skips[k]].kind = NG_JF_SKIP;
    ng_jrecord_init(&brief_record, brief_fields, NOPFIELDS);
    ng_jrecord_init(&tail_record, tail_fields, NOPFIELDS);
    for (size_t k = 0; k < sizeof op_required / sizeof op_required[0]; k++)
        op_need |= 1ull << op_required[k];
    tail_need = op_need;
    for (int i = 0; i < NOPFIELDS; i++)
        if (tail_fields[i].kind == NG_JF_SKIP) tail_need &= ~(1ull << i);
    ng_jkeys_init(&comm_table, comm_keys, C_NKEYS);
    ng_jkeys_init(&peer_table, peer_keys, P_NKEYS);
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
