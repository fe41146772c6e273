/*
 * dump_body.c: see dump_body.h. The member lists come from dump_format.h;
 * each kind there is a put_<KIND>(writer, key, value) function here.
 *
 * Everything is async-signal-safe: communicator records and ring slots are
 * read with atomic loads (ncclguard_flight_copy for records), names come from
 * static tables, numbers are formatted by json.c.
 */
#include "evidence/dump_body.h"

#include <nccl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/identity.h"
#include "base/ops.h"
#include "base/secret.h"
#include "base/version.h"
#include "evidence/dump_format.h"
#include "evidence/modmap.h"
#include "evidence/python.h"
#include "evidence/ras.h"
#include "evidence/symbolize.h"
#include "evidence/threads.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/markers.h"
#include "track/stacks.h"

/* Largest ring whose dump order is exact (NCCLGUARD_RING's upper bound in
 * settings.def). The bitmap lives in .bss: untouched, it costs no memory. */
#define MAX_RING (1u << 24)

struct dump_ctx {
    const char *reason;
    const char *incident;
    int64_t time_ns;
    int64_t pid;
    const struct ng_identity *id;
    const char *ncclguard_version;
    int64_t nccl_version;
    int64_t cuda_driver_version;
    const char *python_version;
    int symbols;     /* not in a signal handler: frames may be symbolized */
    int symbolizing; /* the session of symbolize_once is open */
};

/* One enqueue stack (put_STACKS), named for the list's `e`. */
struct stack_view {
    int64_t id;
    const uint64_t *pcs;
    int npcs;
    int symbols;
};

/* One frame of a thread, symbolized (put_FRAMES), named for the list's `f`. */
struct frame_view {
    uint64_t pc;
    const char *module;
    uint64_t offset;
    const char *function;
    uint64_t function_offset;
    const char *build_id;
    int guess; /* a thread's frame the unwind could not confirm (threads.h) */
};

/* A communicator record read field by field with atomic loads. */
struct comm_view {
    uint64_t id, parent_id, coll_seq, completed_seq;
    int rank, nranks, device, blocking, state, last_async_error;
    int64_t created_ns;
    char name[sizeof(((struct ng_comm *)0)->name)];
    struct ng_peer *peers; /* read in place, with atomic loads */
    int npeers;
};

struct peer_view {
    int64_t peer;
    uint64_t seq, done;
};

struct op_view {
    uint64_t index;
    int state;
    struct ng_op_record rec;
};

static ng_atomic(ng_dump_config_fn) config_writer;
static uint64_t listed[MAX_RING / 64]; /* slots written by the in-flight pass */

void ncclguard_dump_set_config_writer(ng_dump_config_fn fn)
{
    ng_atomic_store_release(&config_writer, fn);
}

static char incident_id[128];
static ng_atomic(int) incident; /* incident_id is set */

void ncclguard_dump_set_incident(const char *id)
{
    ng_atomic_store_relaxed(&incident, 0);
    if (!id) return;
    size_t n = strnlen(id, sizeof incident_id - 1);
    memcpy(incident_id, id, n);
    incident_id[n] = '\0';
    ng_atomic_store_release(&incident, 1);
}

/* ---- scalar kinds ---- */

/* Every key of dump_format.h needs no escape (check_dump.py format holds
 * them to [a-z_0-9]+), and the ring repeats them thousands of times: each is
 * a fixed key (json.h), quoted at compile time by PUT_FIELD. */
static void put_key(struct ng_json *j, const struct ng_json_key *key)
{
    ncclguard_json_key_fixed(j, key);
}

static void put_STR(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    put_key(j, key);
    ncclguard_json_string(j, v);
}

/* Strings whose kind tells the reader more (dump_format.h); NULL is null. */
static void put_OPT_STR(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    put_STR(j, key, v);
}

static void put_STACK_FROM(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    put_STR(j, key, v);
}

static void put_PY_METHOD(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    put_STR(j, key, v);
}

static void put_BUILD_ID(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    put_STR(j, key, v);
}

static void put_NAME(struct ng_json *j, const struct ng_json_key *key, const char *v)
{
    size_t n = 0;
    while (n < sizeof(((struct comm_view *)0)->name) && v[n]) n++;
    put_key(j, key);
    if (n)
        ncclguard_json_string_n(j, v, n);
    else
        ncclguard_json_null(j);
}

static void put_I64(struct ng_json *j, const struct ng_json_key *key, int64_t v)
{
    put_key(j, key);
    ncclguard_json_int64(j, v);
}

static void put_U64(struct ng_json *j, const struct ng_json_key *key, uint64_t v)
{
    put_key(j, key);
    ncclguard_json_uint64(j, v);
}

static void put_I64_NONNEG(struct ng_json *j, const struct ng_json_key *key, int64_t v)
{
    put_key(j, key);
    if (v >= 0)
        ncclguard_json_int64(j, v);
    else
        ncclguard_json_null(j);
}

static void put_I64_NONZERO(struct ng_json *j, const struct ng_json_key *key, int64_t v)
{
    put_key(j, key);
    if (v)
        ncclguard_json_int64(j, v);
    else
        ncclguard_json_null(j);
}

static void put_HEX(struct ng_json *j, const struct ng_json_key *key, uint64_t v)
{
    put_key(j, key);
    ncclguard_json_hex64(j, v);
}

static void put_HEX_NONZERO(struct ng_json *j, const struct ng_json_key *key, uint64_t v)
{
    put_key(j, key);
    if (v)
        ncclguard_json_hex64(j, v);
    else
        ncclguard_json_null(j);
}

static void put_BOOL(struct ng_json *j, const struct ng_json_key *key, int v)
{
    put_key(j, key);
    ncclguard_json_bool(j, v);
}

/* ---- named kinds ---- */

/* "<prefix><n>" for a value without a name of its own, into out[48]; its
 * length. */
static size_t numbered(char *out, const char *prefix, int64_t n)
{
    size_t len = strlen(prefix);
    memcpy(out, prefix, len);
    return len + ncclguard_fmt_int64(out + len, n);
}

static void put_COMM_STATE(struct ng_json *j, const struct ng_json_key *key, int v)
{
    put_STR(j, key, ncclguard_comm_state_name(v));
}

/* The flags of an op that has any (op_OP_FLAGS). */
static void put_OP_FLAGS(struct ng_json *j, const struct ng_json_key *key, uint64_t v)
{
    static const char *const names[] = {NG_DUMP_OP_FLAG_NAMES};
    const unsigned nnames = sizeof names / sizeof names[0];
    put_key(j, key);
    ncclguard_json_begin_array(j);
    for (uint64_t rest = v; rest; rest &= rest - 1) { /* the bits set, lowest first */
        unsigned bit = (unsigned)__builtin_ctzll(rest);
        char s[48];
        if (bit < nnames)
            ncclguard_json_string(j, names[bit]);
        else
            ncclguard_json_string_n(j, s, numbered(s, "bit", bit));
    }
    ncclguard_json_end_array(j);
}

/* ---- nested kinds ---- */

#define PUT_FIELD(key, kind, source)                              \
    {                                                             \
        static const struct ng_json_key key_ = NG_JSON_KEY(#key); \
        put_##kind(j, &key_, source);                             \
    }

/* The optional config object (the effective site policy): omitted without a
 * writer; null when
 * the writer wrote nothing. */
static void put_CONFIG(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    ng_dump_config_fn fn = ng_atomic_load_acquire(&config_writer);
    if (!fn) return;
    put_key(j, key);
    fn(j);
    if (ncclguard_json_value_pending(j)) ncclguard_json_null(j);
}

static void put_FLIGHT(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    const struct ng_flight_stats *s = &st;
    put_key(j, key);
    ncclguard_json_begin_object(j);
    NG_DUMP_FLIGHT_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

#define LOAD(x) ng_atomic_load_relaxed(&(x))

/* Reads one communicator record; the fields written after creation are atomic. */
static void comm_snapshot(struct ng_comm *src, struct comm_view *c)
{
    c->id = src->id;
    c->rank = LOAD(src->rank);
    c->nranks = LOAD(src->nranks);
    c->device = LOAD(src->device);
    c->blocking = src->blocking;
    memcpy(c->name, src->name, sizeof c->name);
    c->parent_id = src->parent_id;
    c->created_ns = src->created_ns;
    c->state = LOAD(src->state);
    c->last_async_error = LOAD(src->last_async_error);
    c->coll_seq = LOAD(src->coll_seq);
    c->completed_seq = LOAD(src->completed_seq);
    c->peers = ng_atomic_load_acquire(&src->peers);
    c->npeers = c->peers ? src->npeers : 0;
}

static void put_PEERS(struct ng_json *j, const struct ng_json_key *key, const struct comm_view *c)
{
    put_key(j, key);
    ncclguard_json_begin_array(j);
    for (int i = 0; i < c->npeers; i++) {
        struct peer_view view = {i, LOAD(c->peers[i].seq), LOAD(c->peers[i].done)};
        const struct peer_view *p = &view;
        if (!p->seq) continue;
        ncclguard_json_begin_object(j);
        NG_DUMP_PEER_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

static void put_COMMS(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    put_key(j, key);
    ncclguard_json_begin_array(j);
    int n = ncclguard_comm_count();
    for (int i = 0; i < n; i++) {
        struct ng_comm *src = ncclguard_comm_at(i);
        if (!src) continue;
        struct comm_view view;
        const struct comm_view *c = &view;
        comm_snapshot(src, &view);
        ncclguard_json_begin_object(j);
        NG_DUMP_COMM_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

/* ---- op records, in runs ---- */

/* The ring's records are most of a dump (4,096 of them by default, 2 MB): their
 * members go through a run of the writer (json.h), formatted in place and
 * handed over in one piece per record instead of two writer calls per member.
 * op_<KIND> writes what put_<KIND> writes in the other objects. */
static struct ng_json_run run; /* one dump at a time (dump_body.h) */

static void op_U64(struct ng_json_run *o, const struct ng_json_key *key, uint64_t v)
{
    ncclguard_json_run_uint64(o, key, v);
}

static void op_I64(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    ncclguard_json_run_int64(o, key, v);
}

static void op_HEX(struct ng_json_run *o, const struct ng_json_key *key, uint64_t v)
{
    ncclguard_json_run_hex64(o, key, v);
}

static void op_U64_NONZERO(struct ng_json_run *o, const struct ng_json_key *key, uint64_t v)
{
    if (v)
        ncclguard_json_run_uint64(o, key, v);
    else
        ncclguard_json_run_null(o, key);
}

static void op_I64_NONZERO(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    if (v)
        ncclguard_json_run_int64(o, key, v);
    else
        ncclguard_json_run_null(o, key);
}

static void op_I64_NONNEG(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    if (v >= 0)
        ncclguard_json_run_int64(o, key, v);
    else
        ncclguard_json_run_null(o, key);
}

static void op_OPT_STR(struct ng_json_run *o, const struct ng_json_key *key, const char *v)
{
    ncclguard_json_run_string(o, key, v);
}

static void op_OP_NAME(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    ncclguard_json_run_string(o, key, ng_op_name(v >= 0 && v < NG_OP_NTYPES ? (int)v : -1));
}

static void op_OP_STATE(struct ng_json_run *o, const struct ng_json_key *key, int v)
{
    ncclguard_json_run_string(o, key, ng_op_state_name(v));
}

static void op_DATATYPE(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    static const char *const names[] = {NG_DUMP_DATATYPE_NAMES};
    char s[48];
    if (v >= 0 && v < (int64_t)(sizeof names / sizeof names[0]))
        ncclguard_json_run_string(o, key, names[v]);
    else
        ncclguard_json_run_string_n(o, key, s, numbered(s, "unknown/", v));
}

static void op_REDOP(struct ng_json_run *o, const struct ng_json_key *key, int64_t v)
{
    static const char *const names[] = {NG_DUMP_REDOP_NAMES};
    _Static_assert(sizeof names / sizeof names[0] == ncclNumOps, "one name per built-in op");
    char s[48];
    if (v < 0)
        ncclguard_json_run_null(o, key);
    else if (v < ncclNumOps)
        ncclguard_json_run_string(o, key, names[v]);
    else
        ncclguard_json_run_string_n(o, key, s, numbered(s, "premulsum/", v));
}

/* ng_op_record.root holds the root of a rooted collective or the peer of a
 * Send/Recv; the dump names it accordingly, and the other key is null. */
static void op_ROOT(struct ng_json_run *o, const struct ng_json_key *key,
                    const struct ng_op_record *r)
{
    op_I64_NONNEG(o, key, ng_op_is_p2p((int)r->op) ? -1 : r->root);
}

static void op_PEER(struct ng_json_run *o, const struct ng_json_key *key,
                    const struct ng_op_record *r)
{
    op_I64_NONNEG(o, key, ng_op_is_p2p((int)r->op) ? r->peer : -1);
}

/* Most ops have no flag: [] in the run, else the writer's array after it. */
static void op_OP_FLAGS(struct ng_json_run *o, const struct ng_json_key *key, uint64_t v)
{
    if (!v) {
        ncclguard_json_run_empty_array(o, key);
        return;
    }
    ncclguard_json_run_flush(o);
    put_OP_FLAGS(o->j, key, v);
}

#define RUN_FIELD(key, kind, source)                              \
    {                                                             \
        static const struct ng_json_key key_ = NG_JSON_KEY(#key); \
        op_##kind(&run, &key_, source);                           \
    }

static void put_op(struct ng_json *j, const struct op_view *v)
{
    const struct ng_op_record *r = &v->rec;
    ncclguard_json_begin_object(j);
    ncclguard_json_run_begin(&run, j);
    NG_DUMP_OP_FIELDS(RUN_FIELD)
    ncclguard_json_run_flush(&run);
    ncclguard_json_end_object(j);
}

/* Copies record `index`; 0, or -1 when it is being written or was overwritten. */
static int op_snapshot(uint64_t index, struct op_view *v)
{
    if (ncclguard_flight_copy(index, &v->rec) != 0) return -1;
    v->index = index;
    v->state = ng_record_state(&v->rec);
    return 0;
}

/* The ring, in dump order: records not in a final state (in flight) first,
 * then the others, each group newest first. Two passes over the ring from the
 * same head; a bitmap of the slots the first pass wrote keeps a record that
 * completes between the passes from appearing twice. Writers are never held
 * up: a record being written at that moment is skipped. Without the bitmap
 * (a ring larger than MAX_RING) such a record may appear twice. */
static void put_OPS(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    uint64_t head = ncclguard_flight_head();
    uint64_t cap = st.capacity;
    uint64_t oldest = head > cap ? head - cap : 0;
    int exact = cap <= MAX_RING;
    if (exact) memset(listed, 0, (size_t)((cap + 63) / 64) * sizeof listed[0]);
    put_key(j, key);
    ncclguard_json_begin_array(j);
    struct op_view v;
    for (uint64_t i = head; i-- > oldest;) {
        /* A state only moves on: a record final now is final in its copy too,
         * so most of the ring is passed over without one. */
        if (ng_op_state_final(ncclguard_flight_state(i))) continue;
        if (op_snapshot(i, &v) != 0 || ng_op_state_final(v.state)) continue;
        put_op(j, &v);
        if (exact) listed[(i % cap) / 64] |= (uint64_t)1 << (i % cap % 64);
    }
    for (uint64_t i = head; i-- > oldest;) {
        if (exact && (listed[(i % cap) / 64] >> (i % cap % 64) & 1)) continue;
        /* In flight now but not listed: it was being written during the first
         * pass; leave it out rather than break the order. */
        if (op_snapshot(i, &v) != 0 || !ng_op_state_final(v.state)) continue;
        put_op(j, &v);
    }
    ncclguard_json_end_array(j);
}

static void put_VERSIONS(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    put_key(j, key);
    ncclguard_json_begin_object(j);
    NG_DUMP_VERSION_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

extern char **environ;

/* True when the variable "NAME=value" is on the allowlist of dump_format.h. */
static int env_allowed(const char *var, size_t name_len)
{
    static const char *const prefixes[] = {NG_DUMP_ENV_PREFIXES};
    static const char *const names[] = {NG_DUMP_ENV_NAMES};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(var, prefixes[i], strlen(prefixes[i])) && name_len > strlen(prefixes[i]))
            return 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == name_len && !strncmp(var, names[i], name_len)) return 1;
    return 0;
}

/* The allowed variables. environ is read without the lock that setenv takes
 * (this may run in a signal handler): a variable set at that very moment may
 * be missed. */
static void put_ENV(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    put_key(j, key);
    ncclguard_json_begin_object(j);
    char **env = environ;
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || !env_allowed(env[i], (size_t)(eq - env[i]))) continue;
        char name[256];
        size_t n = (size_t)(eq - env[i]);
        if (n >= sizeof name) continue;
        memcpy(name, env[i], n);
        name[n] = '\0';
        ncclguard_json_key(j, name);
        /* an allowed name that says secret (NCCL_PASSWORD): set, its value not shown */
        ncclguard_json_string(j, ng_secret_name(name, n) ? "<not shown>" : eq + 1);
    }
    ncclguard_json_end_object(j);
}

/* One element of a list of frames; symbolized between ncclguard_symbolize_begin
 * and _end; else, in a crash sample's dump, module + offset + build-id from the
 * maps read in the handler (modmap.h); else a bare address. exact: pc is the
 * interrupted instruction, not a return address; guess: an unconfirmed frame
 * of a scan. */
static void put_frame(struct ng_json *j, uintptr_t pc, int symbols, int exact, int guess)
{
    struct ng_symbol sym = {.module = "", .offset = pc};
    if (symbols)
        ncclguard_symbolize_at(pc, exact, &sym);
    else if (!ncclguard_threads_symbolizable())
        ncclguard_modmap_find(pc, exact, &sym);
    struct frame_view view = {pc,           sym.module,          sym.offset,
                              sym.function, sym.function_offset, sym.build_id,
                              guess};
    const struct frame_view *f = &view;
    ncclguard_json_begin_object(j);
    NG_DUMP_FRAME_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

static void put_FRAMES(struct ng_json *j, const struct ng_json_key *key,
                       const struct ng_thread_view *t)
{
    put_key(j, key);
    ncclguard_json_begin_array(j);
    int symbols = ncclguard_threads_symbolizable();
    /* The innermost frame is the interrupted instruction, except for the dumping
     * thread's own unwind ("self" outside a handler: return addresses only). */
    int exact = !symbols || strcmp(t->stack_from, "self");
    for (int i = 0; i < t->npcs; i++)
        put_frame(j, (uintptr_t)t->pcs[i], symbols, i == 0 && exact, i >= t->first_guess);
    ncclguard_json_end_array(j);
}

static void put_STACK_TABLE(struct ng_json *j, const struct ng_json_key *key,
                            const struct dump_ctx *d)
{
    (void)d;
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    const struct ng_stacks_stats *k = &st;
    put_key(j, key);
    ncclguard_json_begin_object(j);
    NG_DUMP_STACK_TABLE_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

static void put_STACK_FRAMES(struct ng_json *j, const struct ng_json_key *key,
                             const struct stack_view *e)
{
    put_key(j, key);
    ncclguard_json_begin_array(j);
    for (int i = 0; i < e->npcs; i++) put_frame(j, (uintptr_t)e->pcs[i], e->symbols, 0, 0);
    ncclguard_json_end_array(j);
}

/* Opens the dump's one symbolization session, if not yet open; the dump
 * closes it at its end. The enqueue stacks and the threads share it, so that
 * each module's file is opened, mapped and unmapped once per dump. */
static void symbolize_once(struct dump_ctx *d)
{
    if (d->symbolizing) return;
    ncclguard_symbolize_begin();
    d->symbolizing = 1;
}

/* Every stack of the table (an entry still being written is left out). */
static void put_STACKS(struct ng_json *j, const struct ng_json_key *key, struct dump_ctx *d)
{
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    put_key(j, key);
    ncclguard_json_begin_array(j);
    if (d->symbols && st.used) symbolize_once(d);
    for (int i = 0; i < st.used; i++) {
        struct stack_view view = {.id = i, .symbols = d->symbols};
        const struct stack_view *e = &view;
        view.npcs = ncclguard_stack_frames(i, &view.pcs);
        if (view.npcs == 0) continue;
        ncclguard_json_begin_object(j);
        NG_DUMP_STACK_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

/* The threads of the last collection (threads.h), null without one: a dump
 * from a signal handler cannot collect, and cannot symbolize either (the crash
 * path's own thread is written with modules and offsets, no names). */
static void put_THREADS(struct ng_json *j, const struct ng_json_key *key, struct dump_ctx *d)
{
    int n = ncclguard_threads_count();
    put_key(j, key);
    if (n < 0) {
        ncclguard_json_null(j);
        return;
    }
    if (d->symbols && ncclguard_threads_symbolizable()) symbolize_once(d);
    ncclguard_json_begin_array(j);
    for (int i = 0; i < n; i++) {
        struct ng_thread_view view;
        ncclguard_threads_get(i, &view);
        const struct ng_thread_view *t = &view;
        ncclguard_json_begin_object(j);
        NG_DUMP_THREAD_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

static void put_PY_FRAMES(struct ng_json *j, const struct ng_json_key *key,
                          const struct ng_py_thread *p)
{
    put_key(j, key);
    ncclguard_json_begin_array(j);
    for (int i = 0; i < p->nframes; i++) {
        struct ng_py_frame view;
        ncclguard_python_frame(p->first + i, &view);
        const struct ng_py_frame *f = &view;
        ncclguard_json_begin_object(j);
        NG_DUMP_PY_FRAME_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

static void put_PY_THREADS(struct ng_json *j, const struct ng_json_key *key,
                           const struct ng_py_view *y)
{
    put_key(j, key);
    ncclguard_json_begin_array(j);
    for (int i = 0; i < y->nthreads; i++) {
        struct ng_py_thread view;
        ncclguard_python_thread(i, &view);
        const struct ng_py_thread *p = &view;
        ncclguard_json_begin_object(j);
        NG_DUMP_PY_THREAD_FIELDS(PUT_FIELD)
        ncclguard_json_end_object(j);
    }
    ncclguard_json_end_array(j);
}

/* The Python stacks of the last collection (python.h); null without one. */
static void put_PYTHON(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    struct ng_py_view view;
    const struct ng_py_view *y = &view;
    put_key(j, key);
    if (ncclguard_python_view(&view) != 0) {
        ncclguard_json_null(j);
        return;
    }
    ncclguard_json_begin_object(j);
    NG_DUMP_PYTHON_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

/* NCCL's RAS answer (ras.h); null when there is none. */
static void put_RAS(struct ng_json *j, const struct ng_json_key *key, const struct dump_ctx *d)
{
    (void)d;
    struct ng_ras_view view;
    const struct ng_ras_view *a = &view;
    put_key(j, key);
    if (ncclguard_ras_view(&view) != 0) {
        ncclguard_json_null(j);
        return;
    }
    ncclguard_json_begin_object(j);
    NG_DUMP_RAS_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
}

void ncclguard_dump_body(struct ng_json *j, const char *reason, int from_signal)
{
    struct dump_ctx ctx = {
        .reason = reason,
        .incident = ng_atomic_load_acquire(&incident) ? incident_id : NULL,
        .time_ns = ng_clock_ns(CLOCK_REALTIME),
        .pid = getpid(),
        .id = ncclguard_identity(),
        .ncclguard_version = NCCLGUARD_VERSION,
        .nccl_version = ncclguard_identity_nccl_version(),
        .cuda_driver_version = ncclguard_markers_driver_version(),
        .python_version = ncclguard_python_version(),
        .symbols = !from_signal,
    };
    struct dump_ctx *d = &ctx;
    ncclguard_json_begin_object(j);
    NG_DUMP_TOP_FIELDS(PUT_FIELD)
    ncclguard_json_end_object(j);
    if (ctx.symbolizing) ncclguard_symbolize_end();
}
