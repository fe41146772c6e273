/*
 * dumpread_echo: reads dumps with the ncclguard command's reader (cli/dump/dump.h)
 * and prints what it read as JSON, member names as in the dump, nulls where the
 * dump has them: tests/unit/check_dumpread.py compares that with the file as
 * Python reads it (the round trip writer -> reader), for both JSON backends.
 *
 *   dumpread_echo [--jansson] FILE...     one line per file: the dump, or {"error": why}
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "dump/dump.h"
#include "dump/read.h"
#include "evidence/dump_format.h"
#include "json/json.h"
#include "json/parser.h"

static json_t *str(const char *s)
{
    return s ? json_string(s) : json_null();
}
static json_t *num(int64_t v)
{
    return json_integer((json_int_t)v);
}
static json_t *num_or(int64_t v, int64_t none)
{
    return v == none ? json_null() : num(v);
}
static json_t *hex(uint64_t v)
{
    char b[17];
    snprintf(b, sizeof b, "%016" PRIx64, v);
    return json_string(b);
}

static json_t *op_json(const struct dr_op *o)
{
    static const char *const flags[] = {NG_DUMP_OP_FLAG_NAMES}; /* the writer's names */
    const int nflags = (int)(sizeof flags / sizeof flags[0]);
    json_t *f = json_array();
    for (int b = 0; b < 32; b++) {
        if (!(o->flags & (1u << b))) continue;
        char name[16];
        snprintf(name, sizeof name, "bit%d", b);
        json_array_append_new(f, json_string(b < nflags ? flags[b] : name));
    }
    return json_pack(
        "{sI so sI sI so so ss sI ss sI so so so so so sI sI sI ss so so so so sI so so}", "index",
        (json_int_t)o->index, "comm", hex(o->comm), "comm_rank", (json_int_t)o->comm_rank,
        "comm_nranks", (json_int_t)o->comm_nranks, "seq", num_or((int64_t)o->seq, 0), "p2p_seq",
        num_or((int64_t)o->p2p_seq, 0), "op", dr_op_name(o->op), "count", (json_int_t)o->count,
        "datatype", o->datatype, "bytes", (json_int_t)o->bytes, "redop",
        o->redop[0] ? json_string(o->redop) : json_null(), "root", num_or(o->root, -1), "peer",
        num_or(o->peer, -1), "stream", hex(o->stream), "group", num_or((int64_t)o->group, 0),
        "thread", (json_int_t)o->thread, "enqueue_ns", (json_int_t)o->enqueue_ns, "enqueue_mono_ns",
        (json_int_t)o->enqueue_mono_ns, "state", dr_state_name(o->state), "gpu_start_ns",
        num_or(o->gpu_start_ns, 0), "gpu_end_ns", num_or(o->gpu_end_ns, 0), "seen_start_ns",
        num_or(o->seen_start_ns, 0), "seen_end_ns", num_or(o->seen_end_ns, 0), "result",
        (json_int_t)o->result, "flags", f, "marker", num_or(o->marker, -1));
}

static json_t *comm_json(const struct dr_comm *c)
{
    json_t *peers = json_array();
    for (size_t i = 0; i < c->npeers; i++)
        json_array_append_new(peers, json_pack("{sIsIsI}", "peer", (json_int_t)c->peers[i].peer,
                                               "last_p2p_seq", (json_int_t)c->peers[i].last_p2p_seq,
                                               "last_completed_p2p_seq",
                                               (json_int_t)c->peers[i].last_completed_p2p_seq));
    return json_pack("{so sI sI so so so sb so sI sI sI sI so}", "id", hex(c->id), "rank",
                     (json_int_t)c->rank, "nranks", (json_int_t)c->nranks, "device",
                     num_or(c->device, -1), "name", str(c->name), "state", str(c->state),
                     "blocking", c->blocking, "parent", c->parent ? hex(c->parent) : json_null(),
                     "created_ns", (json_int_t)c->created_ns, "last_seq", (json_int_t)c->last_seq,
                     "last_completed_seq", (json_int_t)c->last_completed_seq, "last_async_error",
                     (json_int_t)c->last_async_error, "peers", peers);
}

static json_t *threads_json(const struct dr_dump *d)
{
    if (!d->has_threads) return json_null();
    json_t *a = json_array();
    for (size_t i = 0; i < d->nthreads; i++) {
        const struct dr_thread *t = &d->threads[i];
        json_t *fr = json_array();
        for (size_t k = 0; k < t->nframes; k++) {
            const struct dr_frame *f = &t->frames[k];
            json_t *o = json_pack("{so so sI so so so}", "pc", hex(f->pc), "module", str(f->module),
                                  "offset", (json_int_t)f->offset, "function", str(f->function),
                                  "function_offset", num_or(f->function_offset, -1), "build_id",
                                  str(f->build_id));
            if (f->guess) json_object_set_new(o, "guess", json_true()); /* 2.2: absent before */
            json_array_append_new(fr, o);
        }
        json_array_append_new(a, json_pack("{sI so so so so so so}", "tid", (json_int_t)t->tid,
                                           "name", str(t->name), "state", str(t->state), "syscall",
                                           str(t->syscall), "stack_from", str(t->stack_from),
                                           "frames", fr, "stack_note", str(t->stack_note)));
    }
    return a;
}

static json_t *python_json(const struct dr_dump *d)
{
    const struct dr_python *y = d->python;
    if (!y) return json_null();
    json_t *a = json_array();
    for (size_t i = 0; i < y->nthreads; i++) {
        json_t *fr = json_array();
        for (size_t k = 0; k < y->threads[i].nframes; k++) {
            const struct dr_pyframe *f = &y->threads[i].frames[k];
            json_array_append_new(fr, json_pack("{sososo}", "file", str(f->file), "line",
                                                num_or(f->line, -1), "function", str(f->function)));
        }
        json_array_append_new(a, json_pack("{sososo}", "thread_id", hex(y->threads[i].thread_id),
                                           "tid", num_or(y->threads[i].tid, -1), "frames", fr));
    }
    return json_pack("{sosososo}", "method", str(y->method), "why", str(y->why), "threads", a,
                     "raw", str(y->raw));
}

static json_t *dump_json(const struct dr_dump *d)
{
    json_t *comms = json_array(), *ops = json_array();
    for (size_t i = 0; i < d->ncomms; i++) json_array_append_new(comms, comm_json(&d->comms[i]));
    for (size_t i = 0; i < d->nops; i++) json_array_append_new(ops, op_json(&d->ops[i]));
    json_t *j = json_pack("{ss ss sI ss? so so so ss}", "schema", d->schema, "reason", d->reason,
                          "time_ns", (json_int_t)d->time_ns, "host", d->host, "pid",
                          num_or(d->pid, -1), "rank", num_or(d->rank, -1), "local_rank",
                          num_or(d->local_rank, -1), "job", d->job);
    json_object_set_new(j, "flight",
                        json_pack("{sIsIsIsI}", "capacity", (json_int_t)d->flight.capacity,
                                  "recorded", (json_int_t)d->flight.recorded, "overwritten",
                                  (json_int_t)d->flight.overwritten, "dropped_inflight",
                                  (json_int_t)d->flight.dropped_inflight));
    if (d->major == 2) {
        json_object_set_new(j, "incident", str(d->incident));
        json_object_set_new(j, "versions",
                            json_pack("{sosososo}", "ncclguard", str(d->versions.ncclguard), "nccl",
                                      num_or(d->versions.nccl, 0), "cuda_driver",
                                      num_or(d->versions.cuda_driver, 0), "python",
                                      str(d->versions.python)));
        json_object_set_new(j, "threads", threads_json(d));
        json_object_set_new(j, "python", python_json(d));
    } else {
        json_object_set_new(j, "ncclguard_version", str(d->versions.ncclguard));
        json_object_set_new(j, "nccl_version", num_or(d->versions.nccl, 0));
    }
    json_object_set_new(j, "comms", comms);
    json_object_set_new(j, "ops", ops);
    return j;
}

int main(int argc, char **argv)
{
    int first = 1;
    enum ng_json_backend b = NG_JSON_SIMDJSON;
    if (argc > 1 && !strcmp(argv[1], "--jansson")) {
        b = NG_JSON_JANSSON;
        first = 2;
    }
    ng_jparser *p = ng_jparser_new(b);
    for (int i = first; i < argc; i++) {
        char err[512];
        struct dr_dump *d = dr_read_file(p, argv[i], 0, err, sizeof err);
        json_t *j = d ? dump_json(d) : json_pack("{ss}", "error", err);
        json_dumpf(j, stdout, JSON_COMPACT);
        putchar('\n');
        json_decref(j);
        dr_free(d);
    }
    ng_jparser_free(p);
    return 0;
}
