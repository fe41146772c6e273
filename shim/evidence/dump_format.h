/*
 * dump_format.h: the layout of a dump (schema "ncclguard.dump/2.2"), in one place.
 *
 * Owns: the member names of every object of a dump, their order in the file,
 * and the kind of value each holds. The writer (evidence/dump_body.c) expands
 * these lists; a reader written in C includes this header for the same names;
 * docs/dump-format.md documents exactly these members, and the round-trip test
 * (tests/unit/check_dump.py) checks that the header, the document and a written
 * dump agree.
 *
 * Each list is X(key, kind, source):
 *  - key: the JSON member name, as an identifier: the writer and the reader
 *    quote it (#key, NG_DUMP_KEY_NAME), and the reader names its handling of
 *    each key after it (cli/dump/), so that a key renamed here is renamed in the
 *    reader too, or the reader no longer builds;
 *  - kind: how the value is written, one of
 *      STR          string
 *      OPT_STR      string, null when absent (a NULL pointer)
 *      STACK_FROM   "self", "signal", "cfi", "scan" or "no_answer" (threads.h)
 *      PY_METHOD    "layout", "debug_offsets" or "none" (python.h; 2.1's "faulthandler")
 *      BUILD_ID     lowercase hex string, null when absent
 *      NAME         string from a fixed char array, null when empty
 *      I64, U64     integer
 *      I64_NONNEG   integer, null when negative (unknown)
 *      I64_NONZERO  integer, null when 0 (unknown or none)
 *      U64_NONZERO  integer, null when 0 (none)
 *      HEX          string of 16 lowercase hex digits
 *      HEX_NONZERO  the same, null when 0
 *      BOOL         true or false
 *      COMM_STATE, OP_NAME, DATATYPE, REDOP, ROOT, PEER, OP_STATE, OP_FLAGS
 *                   names, documented in docs/dump-format.md
 *      CONFIG, FLIGHT, COMMS, PEERS, OPS, VERSIONS, ENV, STACK_TABLE, STACKS,
 *      STACK_FRAMES, THREADS, FRAMES, PYTHON, PY_THREADS, PY_FRAMES, RAS
 *                   nested members (CONFIG is omitted when no config writer
 *                   is installed; ENV is an object of the allowed variables);
 *  - source: the expression the writer reads, in terms of its locals `d` (the
 *    dump), `s` (ring statistics), `c` (a communicator snapshot), `p` (one of
 *    its peers), `v` (an op: v->index, v->state), `r` (its struct
 *    ng_op_record), `k` (the stack table's statistics), `e` (one enqueue
 *    stack), `a` (the RAS answer), `t` (a thread, evidence/threads.h), `f` (one of its
 *    frames, or of a Python thread's), `y` (the Python collection) and `p`
 *    (one Python thread, evidence/python.h). A reader ignores it.
 *
 * Changing a key, its kind or the order is a schema change: bump the version
 * in NG_DUMP_SCHEMA, and update docs/dump-format.md and check_dump.py.
 */
#ifndef NCCLGUARD_DUMP_FORMAT_H
#define NCCLGUARD_DUMP_FORMAT_H

#define NG_DUMP_SCHEMA_PREFIX "ncclguard.dump/"
#define NG_DUMP_SCHEMA NG_DUMP_SCHEMA_PREFIX "2.2"

/* For a reader: the keys of a list, quoted, in the writer's order
 * ({NG_DUMP_OP_FIELDS(NG_DUMP_KEY_NAME)}), and one to count them. */
#define NG_DUMP_KEY_NAME(key, kind, source) #key,
#define NG_DUMP_KEY_COUNT(key, kind, source) +1

/* File name: <dir>/NG_DUMP_PREFIX "r<rank>-<host>-<pid>" NG_DUMP_SUFFIX;
 * "rx" when the global rank is unknown. */
#define NG_DUMP_PREFIX "ncclguard-"
#define NG_DUMP_SUFFIX ".json"

/* The trigger file <dump dir>/TRIGGER (docs/dump-format.md, "Incidents"): its
 * first NG_TRIGGER_LINE_MAX - 1 bytes are read for the incident's origin (the
 * shim writes "r<rank>@<host>\n", `ncclguard dump --dir` "<ID>\n", both within
 * that); a file larger than NG_TRIGGER_FILE_MAX, or one that is not a regular
 * file of the user's (or root's) without group or other write, is refused. */
#define NG_TRIGGER_NAME "TRIGGER"
#define NG_TRIGGER_LINE_MAX 48
#define NG_TRIGGER_FILE_MAX 4096

/* The top-level object. */
#define NG_DUMP_TOP_FIELDS(X)                    \
    X(schema, STR, NG_DUMP_SCHEMA)               \
    X(reason, STR, d->reason)                    \
    X(incident, OPT_STR, d->incident)            \
    X(time_ns, I64, d->time_ns)                  \
    X(host, STR, d->id->host)                    \
    X(pid, I64, d->pid)                          \
    X(rank, I64_NONNEG, d->id->rank)             \
    X(local_rank, I64_NONNEG, d->id->local_rank) \
    X(job, STR, d->id->job)                      \
    X(versions, VERSIONS, d)                     \
    X(env, ENV, d)                               \
    X(config, CONFIG, d)                         \
    X(flight, FLIGHT, d)                         \
    X(ops, OPS, d)                               \
    X(comms, COMMS, d)                           \
    X(stack_table, STACK_TABLE, d)               \
    X(stacks, STACKS, d)                         \
    X(threads, THREADS, d)                       \
    X(python, PYTHON, d)                         \
    X(ras, RAS, d)

/* "versions": what the process runs; null where not known (yet). */
#define NG_DUMP_VERSION_FIELDS(X)                       \
    X(ncclguard, STR, d->ncclguard_version)             \
    X(nccl, I64_NONZERO, d->nccl_version)               \
    X(cuda_driver, I64_NONZERO, d->cuda_driver_version) \
    X(python, OPT_STR, d->python_version)

/* "env": the variables of the process whose name starts with one of these
 * prefixes or is one of these names, in the order of the environment; never
 * any other variable. */
#define NG_DUMP_ENV_PREFIXES "NCCL_", "NCCLGUARD_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_"
#define NG_DUMP_ENV_NAMES                                                                         \
    "CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", \
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "NODE_RANK", "OMPI_COMM_WORLD_RANK",  \
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",       \
        "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",     \
        "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_ARRAY_JOB_ID",                    \
        "SLURM_ARRAY_TASK_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"

/* One element of "threads": a thread of the process and its C stack. */
#define NG_DUMP_THREAD_FIELDS(X)             \
    X(tid, I64, t->tid)                      \
    X(name, STR, t->name)                    \
    X(state, STR, t->state)                  \
    X(syscall, OPT_STR, t->syscall)          \
    X(stack_from, STACK_FROM, t->stack_from) \
    X(frames, FRAMES, t)                     \
    X(stack_note, OPT_STR, t->stack_note)

/* "python": the Python stacks, null when the process is not CPython (or the
 * dump was written from a signal handler). */
#define NG_DUMP_PYTHON_FIELDS(X)    \
    X(method, PY_METHOD, y->method) \
    X(why, OPT_STR, y->why)         \
    X(threads, PY_THREADS, y)       \
    X(raw, OPT_STR, NULL)

/* One element of "python"."threads". */
#define NG_DUMP_PY_THREAD_FIELDS(X) \
    X(thread_id, HEX, p->thread_id) \
    X(tid, I64_NONNEG, p->tid)      \
    X(frames, PY_FRAMES, p)         \
    X(note, OPT_STR, p->note)

/* One element of a Python thread's "frames", innermost first. */
#define NG_DUMP_PY_FRAME_FIELDS(X) \
    X(file, STR, f->file)          \
    X(line, I64_NONNEG, f->line)   \
    X(function, STR, f->function)

/* One element of a thread's "frames", innermost first. */
#define NG_DUMP_FRAME_FIELDS(X)                                                    \
    X(pc, HEX, f->pc)                                                              \
    X(module, OPT_STR, f->module[0] ? f->module : NULL)                            \
    X(offset, U64, f->offset)                                                      \
    X(function, OPT_STR, f->function)                                              \
    X(function_offset, I64_NONNEG, f->function ? (int64_t)f->function_offset : -1) \
    X(build_id, BUILD_ID, f->build_id)                                             \
    X(guess, BOOL, f->guess)

/* "ras": NCCL's RAS answer (evidence/ras.h), null when it was not asked. */
#define NG_DUMP_RAS_FIELDS(X)        \
    X(incident, STR, a->incident)    \
    X(format, STR, a->format)        \
    X(error, OPT_STR, a->error)      \
    X(truncated, BOOL, a->truncated) \
    X(status, STR, a->status)

/* "flight": the ring's statistics. */
#define NG_DUMP_FLIGHT_FIELDS(X)        \
    X(capacity, U64, s->capacity)       \
    X(recorded, U64, s->recorded)       \
    X(overwritten, U64, s->overwritten) \
    X(dropped_inflight, U64, s->dropped_inflight)

/* One element of "comms". */
#define NG_DUMP_COMM_FIELDS(X)                    \
    X(id, HEX, c->id)                             \
    X(rank, I64, c->rank)                         \
    X(nranks, I64, c->nranks)                     \
    X(device, I64_NONNEG, c->device)              \
    X(name, NAME, c->name)                        \
    X(state, COMM_STATE, c->state)                \
    X(blocking, BOOL, c->blocking)                \
    X(parent, HEX_NONZERO, c->parent_id)          \
    X(created_ns, I64, c->created_ns)             \
    X(last_seq, U64, c->coll_seq)                 \
    X(last_completed_seq, U64, c->completed_seq)  \
    X(last_async_error, I64, c->last_async_error) \
    X(peers, PEERS, c)

/* One element of a communicator's "peers": the point-to-point traffic with one
 * peer (comm rank), for the peers it has had any with. */
#define NG_DUMP_PEER_FIELDS(X)   \
    X(peer, I64, p->peer)        \
    X(last_p2p_seq, U64, p->seq) \
    X(last_completed_p2p_seq, U64, p->done)

/* One element of "ops": every field of struct ng_op_record (track/flight.h). */
#define NG_DUMP_OP_FIELDS(X)                        \
    X(index, U64, v->index)                         \
    X(comm, HEX, r->comm_id)                        \
    X(comm_rank, I64, r->comm_rank)                 \
    X(comm_nranks, I64, r->comm_nranks)             \
    X(seq, U64_NONZERO, r->seq)                     \
    X(p2p_seq, U64_NONZERO, r->p2p_seq)             \
    X(op, OP_NAME, r->op)                           \
    X(count, U64, r->count)                         \
    X(datatype, DATATYPE, r->dtype)                 \
    X(bytes, U64, r->bytes)                         \
    X(redop, REDOP, r->redop)                       \
    X(root, ROOT, r)                                \
    X(peer, PEER, r)                                \
    X(stream, HEX, r->stream)                       \
    X(group, U64_NONZERO, r->group_id)              \
    X(thread, U64, r->thread_id)                    \
    X(enqueue_ns, I64, r->enqueue_ns)               \
    X(enqueue_mono_ns, I64, r->enqueue_mono_ns)     \
    X(state, OP_STATE, v->state)                    \
    X(gpu_start_ns, I64_NONZERO, r->gpu_start_ns)   \
    X(gpu_end_ns, I64_NONZERO, r->gpu_end_ns)       \
    X(seen_start_ns, I64_NONZERO, r->seen_start_ns) \
    X(seen_end_ns, I64_NONZERO, r->seen_end_ns)     \
    X(times, OPT_STR, NG_DUMP_OP_TIMES(r))          \
    X(result, I64, r->result)                       \
    X(flags, OP_FLAGS, r->flags & ~NG_REC_INTERNAL) \
    X(marker, I64_NONNEG, r->marker)                \
    X(stack, I64_NONNEG, r->stack)

/* "stack_table": the table of enqueue stacks (track/stacks.h). */
#define NG_DUMP_STACK_TABLE_FIELDS(X) \
    X(depth, I64, k->depth)           \
    X(capacity, I64, k->capacity)     \
    X(used, I64, k->used)             \
    X(lost, U64, k->lost)

/* One element of "stacks": an enqueue stack, named by the ops' "stack". Its
 * frames are those of "threads", innermost first, from the caller of the NCCL
 * function on. */
#define NG_DUMP_STACK_FIELDS(X) \
    X(id, I64, e->id)           \
    X(frames, STACK_FRAMES, e)

/* Where an op's times come from (2.1): "sampled" when it was a timing sample
 * and its GPU times are known, "discovered" when only the watchdog's discovery
 * times are, null before either. */
#define NG_DUMP_OP_TIMES(r)                                  \
    ((r)->gpu_start_ns || (r)->gpu_end_ns     ? "sampled"    \
     : (r)->seen_start_ns || (r)->seen_end_ns ? "discovered" \
                                              : NULL)

/* Names of the bits of ng_op_record.flags (NG_REC_* of track/flight.h), in bit order;
 * a bit without a name is written as "bit<N>". */
#define NG_DUMP_OP_FLAG_NAMES "slow", "timeout", "deferred", "first", "dumped", "gap"

/* Names of ncclDataType_t values, indexed by value; others: "unknown/<n>". */
#define NG_DUMP_DATATYPE_NAMES                                                              \
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", \
        "bfloat16", "float8e4m3", "float8e5m2"

/* Names of the built-in ncclRedOp_t values; a value >= ncclNumOps (created by
 * ncclRedOpCreatePreMulSum) is written "premulsum/<n>", a negative one null. */
#define NG_DUMP_REDOP_NAMES "sum", "prod", "max", "min", "avg"

#endif
