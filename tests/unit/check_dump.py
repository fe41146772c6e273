#!/usr/bin/env python3
"""Checks ncclguard dumps: a dump against its schema (ncclguard.dump/2, or 1.x
for dumps of earlier versions), the schema's lists against the header and the
document, and the dumps of a whole job (one per rank) for the end-to-end tests.

usage: check_dump.py CHECK ARGS...
  schema [--expect EXPECT.json] DUMP...
                            each DUMP read strictly and checked against the schema
                            (members, order, kinds, names, the rules that tie them),
                            and against the expected values of EXPECT.json
  format HEADER DOCS        the X-macro lists of HEADER (shim/evidence/dump_format.h),
                            the tables of DOCS (docs/dump-format.md) and this checker
                            name the same members in the same order
The job checks read DIR's ncclguard-r*.json (DIR may also be one dump file):
  completed DIR NRANKS      every rank dumped; every op completed; per communicator,
                            last_seq == last_completed_seq, identical on every rank;
                            each pair of ranks counts the same point-to-point ops,
                            all completed
  stall DIR RANK            RANK's oldest in-flight collective is scheduled; every other
                            rank has the same (comm, seq) started
  hang DIR RANK             the others' oldest in-flight collective is the same (comm, seq) on
                            all of them; RANK has none in flight, dumped on the trigger, and a
                            thread of it is in trainloop_host_stall; one incident for all
  incident DIR NRANKS       one dump per rank, all of one incident
  mainloop DIR RANK         RANK's main thread is in the training loop (run_worker), not in NCCL
  differ DIR RANK           per communicator, the ranks' collectives agree up to some seq
                            and differ first there, on RANK
  flight DIR CAPACITY       every dump's flight counters are consistent with CAPACITY
  settled DIR               every rank dumped at least one op, and every op is completed
  sane DIR                  only the consistency checks below
  tree DIR                  the consistency checks on every dump anywhere under DIR (what
                            the scripts run on their temp dir at the end)
  stack DIR FUNCTION        every dump lists its main thread (tid = pid), and some thread
                            of it has FUNCTION in its stack
Every job check first reads every dump of DIR and checks what must hold in any
dump (consistency): no two records in flight share a CUDA marker; a completed op
has its end time (GPU or discovered); each op's communicator (its id and rank) is
in comms[], and its seq is not beyond the communicator's (nor, completed, beyond
its last completed one); an aborted op belongs to a communicator that was aborted,
revoked or destroyed.

The schema below is written out here on purpose, independently of the writer:
it is what a reader expects. Exit status 0 when every check passes, 1 when one
fails (schema and format print each failure on stderr, the job checks their
first on stdout), 2 for a wrong command line. Standard library only.
"""
import glob
import json
import os
import re
import sys


# ---- one dump against its schema (schema, format) ----

SCHEMA = "ncclguard.dump/2.2"

# (key, kind) in file order, as in shim/evidence/dump_format.h.
TOP = [("schema", "STR"), ("reason", "STR"), ("incident", "OPT_STR"), ("time_ns", "I64"),
       ("host", "STR"),
       ("pid", "I64"), ("rank", "I64_NONNEG"), ("local_rank", "I64_NONNEG"), ("job", "STR"),
       ("versions", "VERSIONS"), ("env", "ENV"), ("config", "CONFIG"),
       ("flight", "FLIGHT"), ("ops", "OPS"), ("comms", "COMMS"),
       ("stack_table", "STACK_TABLE"), ("stacks", "STACKS"), ("threads", "THREADS"),
       ("python", "PYTHON"), ("ras", "RAS")]
# ncclguard.dump/1.x: the versions were two top-level members, and there was no
# env and no threads. 1.0 had no config, 1.0 and 1.1 no comms[].peers.
TOP_V1 = [("schema", "STR"), ("reason", "STR"), ("time_ns", "I64"), ("host", "STR"),
          ("pid", "I64"), ("rank", "I64_NONNEG"), ("local_rank", "I64_NONNEG"), ("job", "STR"),
          ("ncclguard_version", "STR"), ("nccl_version", "I64_NONZERO"), ("config", "CONFIG"),
          ("flight", "FLIGHT"), ("comms", "COMMS"), ("ops", "OPS")]
VERSIONS = [("ncclguard", "STR"), ("nccl", "I64_NONZERO"), ("cuda_driver", "I64_NONZERO"),
            ("python", "OPT_STR")]
THREAD = [("tid", "I64"), ("name", "STR"), ("state", "STR"), ("syscall", "OPT_STR"),
          ("stack_from", "STACK_FROM"), ("frames", "FRAMES"), ("stack_note", "OPT_STR")]
FRAME = [("pc", "HEX"), ("module", "OPT_STR"), ("offset", "U64"),
         ("function", "OPT_STR"), ("function_offset", "I64_NONNEG"),
         ("build_id", "BUILD_ID"), ("guess", "BOOL")]
# Members that 2.2 added (a 2.1 or 2.0 dump has none of them).
NEW_IN_22 = ("stack_note", "guess")
PYTHON = [("method", "PY_METHOD"), ("why", "OPT_STR"), ("threads", "PY_THREADS"),
          ("raw", "OPT_STR")]
PY_THREAD = [("thread_id", "HEX"), ("tid", "I64_NONNEG"), ("frames", "PY_FRAMES"),
             ("note", "OPT_STR")]
PY_FRAME = [("file", "STR"), ("line", "I64_NONNEG"), ("function", "STR")]
PY_METHODS = {"layout", "debug_offsets", "none", "faulthandler"}  # faulthandler: up to 2.1
# The env allowlist, written out independently of the writer's.
ENV_PREFIXES = ("NCCL_", "NCCLGUARD_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
ENV_NAMES = {"CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
             "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "NODE_RANK",
             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
             "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID",
             "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "TORCHELASTIC_RUN_ID",
             "TORCHELASTIC_RESTART_COUNT"}
STACK_FROM = {"self", "signal", "cfi", "scan", "no_answer"}
FLIGHT = [("capacity", "U64"), ("recorded", "U64"), ("overwritten", "U64"),
          ("dropped_inflight", "U64")]
COMM = [("id", "HEX"), ("rank", "I64"), ("nranks", "I64"), ("device", "I64_NONNEG"),
        ("name", "NAME"), ("state", "COMM_STATE"), ("blocking", "BOOL"),
        ("parent", "HEX_NONZERO"), ("created_ns", "I64"), ("last_seq", "U64"),
        ("last_completed_seq", "U64"), ("last_async_error", "I64"), ("peers", "PEERS")]
PEER = [("peer", "I64"), ("last_p2p_seq", "U64"), ("last_completed_p2p_seq", "U64")]
OP = [("index", "U64"), ("comm", "HEX"), ("comm_rank", "I64"), ("comm_nranks", "I64"),
      ("seq", "U64_NONZERO"), ("p2p_seq", "U64_NONZERO"), ("op", "OP_NAME"), ("count", "U64"),
      ("datatype", "DATATYPE"), ("bytes", "U64"), ("redop", "REDOP"), ("root", "ROOT"),
      ("peer", "PEER"), ("stream", "HEX"), ("group", "U64_NONZERO"), ("thread", "U64"),
      ("enqueue_ns", "I64"), ("enqueue_mono_ns", "I64"), ("state", "OP_STATE"),
      ("gpu_start_ns", "I64_NONZERO"), ("gpu_end_ns", "I64_NONZERO"),
      ("seen_start_ns", "I64_NONZERO"), ("seen_end_ns", "I64_NONZERO"), ("times", "OPT_STR"),
      ("result", "I64"), ("flags", "OP_FLAGS"), ("marker", "I64_NONNEG"),
      ("stack", "I64_NONNEG")]
# ncclguard.dump/2.0 and 1.x had no "times" and no enqueue stacks; 2.0 had no
# stack_table, stacks or ras either, and its comms came before its ops.
OP_V1 = [f for f in OP if f[0] not in ("times", "stack")]
TOP_V20 = [f for f in TOP if f[0] not in ("stack_table", "stacks", "ras", "comms")]
TOP_V20.insert(TOP_V20.index(("ops", "OPS")), ("comms", "COMMS"))
STACK_TABLE = [("depth", "I64"), ("capacity", "I64"), ("used", "I64"), ("lost", "U64")]
STACK = [("id", "I64"), ("frames", "STACK_FRAMES")]
RAS = [("incident", "STR"), ("format", "STR"), ("error", "OPT_STR"), ("truncated", "BOOL"),
       ("status", "STR")]
LISTS = {"NG_DUMP_TOP_FIELDS": TOP, "NG_DUMP_VERSION_FIELDS": VERSIONS,
         "NG_DUMP_FLIGHT_FIELDS": FLIGHT, "NG_DUMP_COMM_FIELDS": COMM,
         "NG_DUMP_PEER_FIELDS": PEER, "NG_DUMP_OP_FIELDS": OP,
         "NG_DUMP_STACK_TABLE_FIELDS": STACK_TABLE, "NG_DUMP_STACK_FIELDS": STACK,
         "NG_DUMP_RAS_FIELDS": RAS,
         "NG_DUMP_THREAD_FIELDS": THREAD, "NG_DUMP_FRAME_FIELDS": FRAME,
         "NG_DUMP_PYTHON_FIELDS": PYTHON, "NG_DUMP_PY_THREAD_FIELDS": PY_THREAD,
         "NG_DUMP_PY_FRAME_FIELDS": PY_FRAME}
# Section of docs/dump-format.md that documents each list.
DOC_SECTIONS = {"NG_DUMP_TOP_FIELDS": "Top level", "NG_DUMP_VERSION_FIELDS": "versions",
                "NG_DUMP_FLIGHT_FIELDS": "flight",
                "NG_DUMP_COMM_FIELDS": "comms[]", "NG_DUMP_PEER_FIELDS": "comms[].peers[]",
                "NG_DUMP_OP_FIELDS": "ops[]", "NG_DUMP_STACK_TABLE_FIELDS": "stack_table",
                "NG_DUMP_STACK_FIELDS": "stacks[]", "NG_DUMP_RAS_FIELDS": "ras",
                "NG_DUMP_THREAD_FIELDS": "threads[]",
                "NG_DUMP_FRAME_FIELDS": "threads[].frames[]", "NG_DUMP_PYTHON_FIELDS": "python",
                "NG_DUMP_PY_THREAD_FIELDS": "python.threads[]",
                "NG_DUMP_PY_FRAME_FIELDS": "python.threads[].frames[]"}
NESTED = ("CONFIG", "FLIGHT", "COMMS", "PEERS", "OPS", "VERSIONS", "ENV", "STACK_TABLE",
          "STACKS", "STACK_FRAMES", "THREADS", "FRAMES", "PYTHON", "PY_THREADS", "PY_FRAMES",
          "RAS")

COMM_STATES = {"initializing", "ready", "finalizing", "revoked", "aborted", "destroyed", "failed"}
OP_STATES = {"scheduled", "started", "completed", "failed", "aborted", "captured", "untracked"}
IN_FLIGHT = {"scheduled", "started"}
OP_NAMES = {"AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather", "ReduceScatter",
            "AlltoAll", "Gather", "Scatter", "Send", "Recv", "Unknown"}
P2P = {"Send", "Recv"}
DATATYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
             "float64", "bfloat16", "float8e4m3", "float8e5m2"}
REDOPS = {"sum", "prod", "max", "min", "avg"}
FLAGS = ["slow", "timeout", "deferred", "first", "dumped", "gap"]

errors = []


def fail(where, msg):
    errors.append(f"{where}: {msg}")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_value(where, kind, v):
    """Checks one scalar value against its kind."""
    ok = True
    if kind == "STR":
        ok = isinstance(v, str)
    elif kind == "OPT_STR":
        ok = v is None or isinstance(v, str)
    elif kind == "STACK_FROM":
        ok = v in STACK_FROM
    elif kind == "PY_METHOD":
        ok = v in PY_METHODS
    elif kind == "BUILD_ID":
        ok = v is None or (isinstance(v, str) and re.fullmatch(r"[0-9a-f]{2,40}", v) is not None)
    elif kind == "NAME":
        ok = v is None or (isinstance(v, str) and v != "")
    elif kind == "I64":
        ok = is_int(v) and -2**63 <= v < 2**63
    elif kind == "U64":
        ok = is_int(v) and 0 <= v < 2**64
    elif kind == "I64_NONNEG":
        ok = v is None or (is_int(v) and 0 <= v < 2**63)
    elif kind == "I64_NONZERO":
        ok = v is None or (is_int(v) and v != 0 and -2**63 <= v < 2**63)
    elif kind == "U64_NONZERO":
        ok = v is None or (is_int(v) and 0 < v < 2**64)
    elif kind in ("HEX", "HEX_NONZERO"):
        ok = isinstance(v, str) and re.fullmatch(r"[0-9a-f]{16}", v) is not None
        if kind == "HEX_NONZERO":
            ok = v is None or (ok and v != "0" * 16)
    elif kind == "BOOL":
        ok = isinstance(v, bool)
    elif kind == "COMM_STATE":
        ok = v in COMM_STATES
    elif kind == "OP_STATE":
        ok = v in OP_STATES
    elif kind == "OP_NAME":
        ok = v in OP_NAMES
    elif kind == "DATATYPE":
        ok = v in DATATYPES or (isinstance(v, str) and re.fullmatch(r"unknown/-?\d+", v))
    elif kind == "REDOP":
        ok = v is None or v in REDOPS or (isinstance(v, str) and
                                          re.fullmatch(r"premulsum/\d+", v) is not None)
    elif kind in ("ROOT", "PEER"):
        ok = v is None or (is_int(v) and v >= 0)
    elif kind == "OP_FLAGS":
        # names in bit order, each once; "bit<N>" only for bits without a name
        ok = isinstance(v, list) and all(
            f in FLAGS or (isinstance(f, str) and re.fullmatch(r"bit\d+", f) is not None
                           and int(f[3:]) >= len(FLAGS)) for f in v)
        if ok:
            bits = [FLAGS.index(f) if f in FLAGS else int(f[3:]) for f in v]
            ok = bits == sorted(set(bits))
    else:
        fail(where, f"checker knows no kind {kind}")
        return
    if not ok:
        fail(where, f"{v!r} is not a valid {kind}")


def check_object(where, pairs, spec, optional=()):
    """Checks member names and order of an object given as (key, value) pairs;
    returns it as a dict."""
    keys = [k for k, _ in pairs]
    want = [k for k, _ in spec if k not in optional or k in keys]
    if keys != want:
        fail(where, f"members {keys} differ from {want}")
    obj = dict(pairs)
    for key, kind in spec:
        if key in obj and kind not in NESTED:
            check_value(f"{where}.{key}", kind, obj[key])
    return obj


def load(path):
    """The dump as nested lists of (key, value) pairs, so that member order
    and duplicates are visible. Strict: UTF-8, no NaN, one document."""
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")  # raises on invalid UTF-8

    def no_constant(name):
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(text, object_pairs_hook=lambda p: ("OBJ", p), parse_constant=no_constant)


def plain(v):
    """Turns ("OBJ", pairs) back into dicts."""
    if isinstance(v, tuple) and v and v[0] == "OBJ":
        return {k: plain(x) for k, x in v[1]}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def pairs_of(where, v):
    if not (isinstance(v, tuple) and v and v[0] == "OBJ"):
        fail(where, "is not an object")
        return []
    return v[1]


def check_peers(where, peers, nranks):
    """Peers listed once each, in rank order, only those with traffic, and
    never more completed than called."""
    if not isinstance(peers, list):
        fail(where, "is not an array")
        return
    ranks = []
    for i, p in enumerate(peers):
        peer = check_object(f"{where}[{i}]", pairs_of(f"{where}[{i}]", p), PEER)
        ranks.append(peer.get("peer"))
        if not (is_int(peer.get("peer")) and is_int(nranks) and 0 <= peer["peer"] < nranks):
            fail(f"{where}[{i}]", f"peer {peer.get('peer')!r} is not a rank of {nranks!r}")
        called, done = peer.get("last_p2p_seq"), peer.get("last_completed_p2p_seq")
        if called == 0 or (is_int(called) and is_int(done) and not 0 <= done <= called):
            fail(f"{where}[{i}]", f"completed {done!r} of {called!r} (at least one call)")
    if any(not is_int(r) for r in ranks) or ranks != sorted(set(ranks)):
        fail(where, f"peers {ranks} are not in strictly increasing order")


def schema_version(doc):
    """(1 or 2, minor) from "ncclguard.dump/N[.M]"; (None, 0) for anything else."""
    pairs = doc[1] if isinstance(doc, tuple) and doc and doc[0] == "OBJ" else []
    m = re.fullmatch(r"ncclguard\.dump/([12])(?:\.(\d+))?", str(dict(pairs).get("schema")))
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (None, 0)


def check_env(where, env):
    """An object of strings, each named on the allowlist."""
    for name, value in pairs_of(where, env):
        if not (name in ENV_NAMES or any(name.startswith(p) and len(name) > len(p)
                                         for p in ENV_PREFIXES)):
            fail(f"{where}.{name}", "is not on the allowlist")
        if not isinstance(value, str):
            fail(f"{where}.{name}", f"{value!r} is not a string")


def check_threads(where, threads, old=()):
    """null (not collected), or threads with distinct ids and their frames.
    Guesses (2.2) come only from an unwind from outside, above the pc, as the
    stack's last frames, and with a note that says why."""
    if threads is None:
        return
    if not isinstance(threads, list):
        fail(where, "is neither an array nor null")
        return
    tids = []
    for i, t in enumerate(threads):
        th = check_object(f"{where}[{i}]", pairs_of(f"{where}[{i}]", t), THREAD, optional=old)
        tids.append(th.get("tid"))
        frames = check_frames(f"{where}[{i}].frames", th.get("frames"), old)
        if th.get("stack_from") == "no_answer" and frames:
            fail(f"{where}[{i}]", "a thread that did not answer has frames")
        guess = [plain(f).get("guess") is True for f in frames]
        if any(guess):
            first = guess.index(True)
            if th.get("stack_from") not in ("cfi", "scan") or first == 0:
                fail(f"{where}[{i}]", "a guessed frame outside an unwind from outside, or the pc")
            if not all(guess[first:]):
                fail(f"{where}[{i}]", "a confirmed frame above a guessed one")
            if not th.get("stack_note"):
                fail(f"{where}[{i}]", "guessed frames without a stack_note")
        if th.get("stack_from") == "scan" and len(frames) > 1 and not guess[1] and not old:
            fail(f"{where}[{i}]", "a bare scan's frame above the pc not marked a guess")


def check_frames(where, frames, old=()):
    if not isinstance(frames, list):
        fail(where, "is not an array")
        return []
    for k, f in enumerate(frames):
        fr = check_object(f"{where}[{k}]", pairs_of("frame", f), FRAME, optional=old)
        if (fr.get("function") is None) != (fr.get("function_offset") is None):
            fail(f"{where}[{k}]", "function and function_offset disagree")
    return frames


def check_stacks(table, stacks, ops, old=()):
    """The table's figures, stacks listed once each with 1 to depth frames, and
    every op's stack among them. Returns the ids listed."""
    t = check_object("stack_table", pairs_of("stack_table", table), STACK_TABLE)
    if not isinstance(stacks, list):
        fail("stacks", "is not an array")
        return
    ids = []
    for i, s in enumerate(stacks):
        st = check_object(f"stacks[{i}]", pairs_of(f"stacks[{i}]", s), STACK)
        ids.append(st.get("id"))
        frames = check_frames(f"stacks[{i}].frames", st.get("frames"), old)
        if any(plain(f).get("guess") for f in frames):
            fail(f"stacks[{i}]", "an enqueue stack's frame marked a guess")
        if not 1 <= len(frames) <= (t.get("depth") or 0):
            fail(f"stacks[{i}]", f"{len(frames)} frames, depth {t.get('depth')}")
    if len(set(ids)) != len(ids) or len(ids) > (t.get("used") or 0):
        fail("stacks", f"ids {ids} repeat or outnumber the {t.get('used')} entries used")
    if (t.get("used") or 0) > (t.get("capacity") or 0):
        fail("stack_table", "more entries used than the table holds")
    for i, o in enumerate(ops):
        if o.get("stack") is not None and o["stack"] not in ids:
            fail(f"ops[{i}]", f"stack {o['stack']} is not listed in stacks")


def check_python(where, py):
    """null (not Python, or not collected), or the stacks: a method, and a
    reason when there are none; since 2.2 (a thread's note), a thread whose
    tid is not known says why."""
    if py is None:
        return
    top = check_object(where, pairs_of(where, py), PYTHON)
    threads = top.get("threads")
    if not isinstance(threads, list):
        fail(f"{where}.threads", "is not an array")
        return
    if top.get("method") == "none" and (threads or not top.get("why")):
        fail(where, "method none needs a reason and no threads")
    for i, t in enumerate(threads):
        th = check_object(f"{where}.threads[{i}]", pairs_of("thread", t), PY_THREAD,
                          optional=("note",))
        if "note" in th and th.get("tid") is None and not th.get("note"):
            fail(f"{where}.threads[{i}]", "a thread without a tid needs a note")
        for k, f in enumerate(th.get("frames") or []):
            check_object(f"{where}.threads[{i}].frames[{k}]", pairs_of("frame", f), PY_FRAME)


def check_dump(path):
    """Schema, kinds, names, and the rules that tie members together. Returns
    the dump as plain dicts."""
    doc = load(path)
    major, minor = schema_version(doc)
    current = major == 2 and minor >= 1
    if major is None:
        fail("schema", f"{plain(doc).get('schema')!r} is neither {SCHEMA} nor ncclguard.dump/1.x")
        return plain(doc)
    top = check_object("top", pairs_of("top", doc), TOP if current else TOP_V20 if major == 2 else TOP_V1,
                       optional=("config",))
    if major == 2:
        check_object("versions", pairs_of("versions", top.get("versions")), VERSIONS)
        check_env("env", top.get("env"))
        check_threads("threads", top.get("threads"), () if minor >= 2 else NEW_IN_22)
        check_python("python", top.get("python"))
        if top.get("ras") is not None:
            ras = check_object("ras", pairs_of("ras", top["ras"]), RAS)
            if ras.get("format") not in ("json", "text", "none"):
                fail("ras.format", f"{ras.get('format')!r} is not json, text or none")
            if ras.get("format") == "none" and not ras.get("error"):
                fail("ras", "no answer and no error")
    if "config" in top and not (isinstance(top["config"], tuple) or top["config"] is None):
        fail("config", "is neither an object nor null")
    check_object("flight", pairs_of("flight", top.get("flight")), FLIGHT)
    comms = top.get("comms")
    if not isinstance(comms, list):
        fail("comms", "is not an array")
        comms = []
    for i, c in enumerate(comms):
        comm = check_object(f"comms[{i}]", pairs_of(f"comms[{i}]", c), COMM,
                            optional=("peers",) if major == 1 else ())
        if "peers" in comm:
            check_peers(f"comms[{i}].peers", comm.get("peers"), comm.get("nranks"))
    ops = top.get("ops")
    if not isinstance(ops, list):
        fail("ops", "is not an array")
        ops = []
    plain_ops = []
    for i, o in enumerate(ops):
        op = check_object(f"ops[{i}]", pairs_of(f"ops[{i}]", o), OP if current else OP_V1)
        plain_ops.append(op)
        gpu = op.get("gpu_start_ns") is not None or op.get("gpu_end_ns") is not None
        seen = op.get("seen_start_ns") is not None or op.get("seen_end_ns") is not None
        if "times" in op and op["times"] != ("sampled" if gpu else "discovered" if seen
                                             else None):
            fail(f"ops[{i}].times", f"{op['times']!r} does not match the times present")
        if op.get("op") in P2P and op.get("root") is not None:
            fail(f"ops[{i}]", "a Send/Recv has a root")
        if op.get("op") not in P2P and op.get("peer") is not None:
            fail(f"ops[{i}]", "a collective has a peer")
    if current:
        check_stacks(top.get("stack_table"), top.get("stacks"), plain_ops,
                     () if minor >= 2 else NEW_IN_22)
    # Order: in flight first, then the others; each group newest (highest index) first.
    groups = [[o for o in plain_ops if o.get("state") in IN_FLIGHT],
              [o for o in plain_ops if o.get("state") not in IN_FLIGHT]]
    if plain_ops != groups[0] + groups[1]:
        fail("ops", "records in flight do not all come first")
    all_idx = [o.get("index") for o in plain_ops]
    if len(set(all_idx)) != len(all_idx):
        fail("ops", "a record appears twice")
    for g in groups:
        idx = [o.get("index") for o in g]
        if idx != sorted(idx, reverse=True) or len(set(idx)) != len(idx):
            fail("ops", f"indexes {idx} are not strictly newest first")
    return plain(doc)


def compare(where, want, got):
    """Every member of `want` must equal the one in `got` (a subset match for
    objects, an exact match for arrays of the same length)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            fail(where, f"expected an object, got {got!r}")
            return
        for k, v in want.items():
            if k not in got:
                fail(where, f"member {k} is missing")
            else:
                compare(f"{where}.{k}", v, got[k])
    elif isinstance(want, list) and want and isinstance(want[0], dict):
        if not isinstance(got, list) or len(got) != len(want):
            n = len(got) if isinstance(got, list) else repr(got)
            fail(where, f"expected {len(want)} elements, got {n}")
            return
        for i, (w, g) in enumerate(zip(want, got)):
            compare(f"{where}[{i}]", w, g)
    elif want != got or type(want) is not type(got):
        fail(where, f"expected {want!r}, got {got!r}")


def check_expect(dump, expect):
    """Expected values: "top", "flight", "comms", "ops" (compared as above),
    "ops_count", and "time_ns": [lowest, highest]."""
    compare("top", expect.get("top", {}), dump)
    if "flight" in expect:
        compare("flight", expect["flight"], dump.get("flight"))
    if "comms" in expect:
        compare("comms", expect["comms"], dump.get("comms"))
    if "ops" in expect:
        compare("ops", expect["ops"], dump.get("ops"))
    if "ops_count" in expect and len(dump.get("ops", [])) != expect["ops_count"]:
        fail("ops", f"{len(dump.get('ops', []))} records, expected {expect['ops_count']}")
    if "time_ns" in expect:
        lo, hi = expect["time_ns"]
        if not lo <= dump.get("time_ns", -1) <= hi:
            fail("time_ns", f"{dump.get('time_ns')} is outside [{lo}, {hi}]")


def check_format(header_path, docs_path):
    """The X-macro lists of the header, the tables of the document and the
    lists above must name the same members in the same order."""
    header = open(header_path, encoding="utf-8").read()
    docs = open(docs_path, encoding="utf-8").read()
    for name, spec in LISTS.items():
        m = re.search(r"#define " + name + r"\(X\)(.*?)(?:\n\n|\n/\*|\n#)", header, re.S)
        if not m:
            fail(header_path, f"no list {name}")
            continue
        found = re.findall(r'X\(([a-z_0-9]+),\s*([A-Z_0-9]+),', m.group(1))
        if found != spec:
            fail(header_path, f"{name} is {found}, the checker expects {spec}")
        sect = re.search(r"^#+ `?" + re.escape(DOC_SECTIONS[name]) + r"`?.*?$(.*?)(?=^#+ |\Z)",
                         docs, re.S | re.M)
        if not sect:
            fail(docs_path, f"no section '{DOC_SECTIONS[name]}'")
            continue
        rows = re.findall(r"^\| `([a-z_0-9]+)` \|", sect.group(1), re.M)
        if rows != [k for k, _ in spec]:
            fail(docs_path, f"section '{DOC_SECTIONS[name]}' lists {rows}, "
                            f"expected {[k for k, _ in spec]}")
    if f'"{SCHEMA}"' not in header or SCHEMA not in docs:
        fail("schema", f"{SCHEMA} is not named in both {header_path} and {docs_path}")


# ---- the dumps of one job (completed, stall, ... tree, stack) ----

def load_job(d):
    dumps = {}
    paths = [d] if os.path.isfile(d) else glob.glob(os.path.join(d, "ncclguard-r*.json"))
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("schema", "").split("/")[0] != "ncclguard.dump":
            stop(f"{path}: schema {doc.get('schema')}")
        consistent(path, doc)
        dumps[doc["rank"]] = doc
    return dumps


ENDED = ("aborted", "revoked", "destroyed")


def consistent(path, doc):
    """What every dump must show, whatever the job did."""
    # one process may hold several ranks of one communicator (a thread per device,
    # or ncclCommInitAll): the entry of an op is the one of its id and its rank
    comms = {(c["id"], c["rank"]): c for c in doc["comms"]}
    markers = {}
    for o in doc["ops"]:
        where = f"{path}: op {o['index']} ({o['op']} seq {o['seq']} p2p_seq {o['p2p_seq']})"
        if o["state"] in IN_FLIGHT and o["marker"] is not None:
            if o["marker"] in markers:
                stop(f"{where} shares marker {o['marker']} with op {markers[o['marker']]}, "
                     "both in flight")
            markers[o["marker"]] = o["index"]
        if o["state"] == "completed" and o["gpu_end_ns"] is None and o["seen_end_ns"] is None:
            stop(f"{where} is completed without an end time")
        c = comms.get((o["comm"], o.get("comm_rank")))
        if c is None:  # a 1.x op names no rank
            c = next((c for (i, _), c in comms.items() if i == o["comm"]), None)
        if c is None:
            stop(f"{where}: communicator {o['comm']} is not in comms[]")
        if o["seq"] and o["seq"] > c["last_seq"]:
            stop(f"{where}: seq beyond the communicator's last_seq {c['last_seq']}")
        if o["seq"] and o["state"] == "completed" and o["seq"] > c["last_completed_seq"]:
            stop(f"{where}: completed, but last_completed_seq is {c['last_completed_seq']}")
        if o["p2p_seq"] and o["state"] == "completed":
            done = {p["peer"]: p["last_completed_p2p_seq"] for p in c["peers"]}
            if o["p2p_seq"] > done.get(o["peer"], 0):
                stop(f"{where}: completed, but peer {o['peer']} has "
                     f"last_completed_p2p_seq {done.get(o['peer'])}")
        if o["state"] == "aborted" and c["state"] not in ENDED:
            stop(f"{where} is aborted on a communicator in state {c['state']}")


def stop(msg):
    print("check_dump: FAIL: " + msg)
    sys.exit(1)


def inflight(doc):
    """The first collective still in flight, by enqueue time: (comm, seq, state)."""
    ops = [o for o in doc["ops"] if o["state"] in ("scheduled", "started") and o["seq"]]
    if not ops:
        return None
    o = min(ops, key=lambda o: o["enqueue_mono_ns"])
    return (o["comm"], o["seq"], o["state"])


def colls(doc):
    """comm -> {seq: (op, count, datatype)} for collectives."""
    out = {}
    for o in doc["ops"]:
        if o["seq"]:
            out.setdefault(o["comm"], {})[o["seq"]] = (o["op"], o["count"], o["datatype"])
    return out


def job_completed(dumps, nranks):
    if len(dumps) != nranks:
        stop(f"{len(dumps)} dumps for {nranks} ranks")
    per_comm = {}
    for rank, doc in dumps.items():
        bad = [o for o in doc["ops"] if o["state"] != "completed"]
        if bad:
            stop(f"rank {rank}: {len(bad)} ops not completed, e.g. {bad[0]}")
        if not doc["ops"]:
            stop(f"rank {rank}: no ops recorded")
        for c in doc["comms"]:
            if c["last_seq"] != c["last_completed_seq"]:
                stop(f"rank {rank} comm {c['id']}: last_seq {c['last_seq']} != "
                     f"last_completed_seq {c['last_completed_seq']}")
            per_comm.setdefault(c["id"], set()).add((c["last_seq"], c["last_completed_seq"]))
    for cid, seqs in per_comm.items():
        if len(seqs) != 1:
            stop(f"comm {cid}: ranks disagree on seqs: {sorted(seqs)}")
    pairs = job_pairs(dumps)
    print(f"check_dump: {nranks} ranks, {len(per_comm)} comms, all ops completed, seqs agree, "
          f"{pairs} point-to-point pairs agree")


def job_pairs(dumps):
    """Per communicator, rank a's entry for peer b equals b's entry for a, and
    every op counted completed. Returns the number of pairs."""
    p2p = {}  # (comm id, comm rank, peer) -> (called, completed)
    for doc in dumps.values():
        for c in doc["comms"]:
            for p in c["peers"]:
                p2p[(c["id"], c["rank"], p["peer"])] = (p["last_p2p_seq"],
                                                         p["last_completed_p2p_seq"])
    for (cid, a, b), (called, done) in p2p.items():
        if done != called:
            stop(f"comm {cid}: rank {a} completed {done} of {called} ops with peer {b}")
        if p2p.get((cid, b, a)) != (called, done):
            stop(f"comm {cid}: rank {a} counts {called} ops with {b}, "
                 f"which counts {p2p.get((cid, b, a))}")
    if not p2p:
        stop("no point-to-point traffic in any dump")
    return len(p2p) // 2


def job_stall(dumps, rank):
    if rank not in dumps:
        stop(f"no dump from rank {rank}")
    mine = inflight(dumps[rank])
    if not mine or mine[2] != "scheduled":
        stop(f"rank {rank}: oldest in-flight op is {mine}, want scheduled")
    for r, doc in dumps.items():
        if r == rank:
            continue
        same = [o for o in doc["ops"] if o["comm"] == mine[0] and o["seq"] == mine[1]]
        if not same or same[0]["state"] != "started":
            stop(f"rank {r}: op {mine[:2]} is {same[0]['state'] if same else 'absent'}, "
                 "want started")
    print(f"check_dump: rank {rank} scheduled at comm {mine[0]} seq {mine[1]}; "
          f"{len(dumps) - 1} peers started there")


def job_incident(dumps, nranks):
    if sorted(dumps) != list(range(nranks)):
        stop(f"dumps of ranks {sorted(dumps)}, expected 0..{nranks - 1}")
    ids = {doc.get("incident") for doc in dumps.values()}
    if len(ids) != 1 or None in ids:
        stop(f"incidents {ids}: expected one")
    print(f"check_dump: {nranks} dumps of incident {ids.pop()}")


def job_mainloop(dumps, rank):
    doc = dumps.get(rank)
    if doc is None:
        stop(f"no dump from rank {rank}")
    main = [t for t in doc.get("threads") or [] if t["tid"] == doc["pid"]]
    if not main:
        stop(f"rank {rank}: its main thread is not listed")
    frames = main[0]["frames"]
    names = [f["function"] for f in frames]
    in_nccl = [f["module"] for f in frames if "libnccl" in (f["module"] or "")]
    if "run_worker" not in names or in_nccl:
        stop(f"rank {rank}: main thread in {names} (NCCL frames: {in_nccl})")
    print(f"check_dump: rank {rank}'s main thread is in the training loop, not in NCCL")


def job_hang(dumps, rank):
    if rank not in dumps:
        stop(f"rank {rank} wrote no dump")
    culprit = dumps.pop(rank)
    if not dumps:
        stop("no dumps of the peers")
    seen = {r: inflight(doc) for r, doc in dumps.items()}
    keys = {v[:2] if v else None for v in seen.values()}
    if len(keys) != 1 or None in keys:
        stop(f"peers disagree on the stuck op: {seen}")
    if inflight(culprit) is not None or culprit.get("reason") != "trigger":
        stop(f"rank {rank}: {culprit.get('reason')} dump with {inflight(culprit)} in flight")
    ids = {doc.get("incident") for doc in dumps.values()} | {culprit.get("incident")}
    if len(ids) != 1 or None in ids:
        stop(f"incidents {ids}: expected one")
    job_stack({rank: culprit}, "trainloop_host_stall")
    print(f"check_dump: ranks {sorted(dumps)} all stuck at comm/seq {keys.pop()}; rank {rank} "
          "dumped on the trigger, in trainloop_host_stall")


def job_differ(dumps, rank):
    if rank not in dumps:
        stop(f"no dump from rank {rank}")
    tables = {r: colls(doc) for r, doc in dumps.items()}
    found = False
    for cid in tables[rank]:
        seqs = sorted(set().union(*(t.get(cid, {}).keys() for t in tables.values())))
        for s in seqs:
            vals = {r: t.get(cid, {}).get(s) for r, t in tables.items() if s in t.get(cid, {})}
            if len(set(vals.values())) <= 1:
                continue
            others = {v for r, v in vals.items() if r != rank}
            if len(others) != 1 or vals.get(rank) in others:
                stop(f"comm {cid} seq {s}: the ranks differ, but not on rank {rank} alone: {vals}")
            print(f"check_dump: comm {cid}: ranks agree up to seq {s - 1}; at seq {s} rank "
                  f"{rank} has {vals.get(rank)}, the others {others.pop()}")
            found = True
            break
    if not found:
        stop("the dumps agree everywhere")


def job_flight(dumps, capacity):
    for rank, doc in dumps.items():
        fl = doc["flight"]
        want = max(0, fl["recorded"] - capacity)
        if fl["capacity"] != capacity or fl["overwritten"] != want:
            stop(f"rank {rank}: flight {fl}, want capacity {capacity} overwritten {want}")
        if want == 0:
            stop(f"rank {rank}: the ring never wrapped ({fl})")
        if len(doc["ops"]) > capacity:
            stop(f"rank {rank}: {len(doc['ops'])} ops listed for a ring of {capacity}")
    print(f"check_dump: flight counters consistent on {len(dumps)} ranks")


def job_settled(dumps, _):
    for rank, doc in dumps.items():
        if not doc["ops"]:
            stop(f"rank {rank}: no ops recorded")
        bad = [(o["index"], o["op"], o["state"]) for o in doc["ops"] if o["state"] != "completed"]
        if bad:
            stop(f"rank {rank}: {len(bad)} ops not completed: {bad[:8]}")
    print(f"check_dump: {len(dumps)} dumps, every op completed")


def job_sane(dumps, _):
    if not dumps:
        stop("no dumps")
    print(f"check_dump: {len(dumps)} dumps consistent")


def job_tree(d):
    paths = [os.path.join(root, f) for root, _, files in os.walk(d) for f in files
             if f.endswith(".json") and (f.startswith("ncclguard-") or f.startswith("held-"))]
    for path in paths:
        load_job(path)
    print(f"check_dump: {len(paths)} dumps under the tree, each consistent")


def job_stack(dumps, function):
    if not dumps:
        stop("no dumps")
    for rank, doc in sorted(dumps.items()):
        threads = doc.get("threads") or []
        if not any(t["tid"] == doc["pid"] for t in threads):
            stop(f"rank {rank}: its main thread is not listed")
        names = {f["function"] for t in threads for f in t["frames"]}
        if function not in names:
            stop(f"rank {rank}: no thread has {function} in its stack ({sorted(map(str, names))})")
    print(f"check_dump: {len(dumps)} dumps, each with a thread in {function}")



def main_schema(args):
    expect = None
    if args[:1] == ["--expect"] and len(args) > 1:
        with open(args[1], encoding="utf-8") as f:
            expect = json.load(f)
        args = args[2:]
    if not args:
        return usage()
    for path in args:
        try:
            dump = check_dump(path)
        except (ValueError, UnicodeDecodeError) as e:
            fail(path, f"is not valid JSON: {e}")
            continue
        if expect is not None:
            check_expect(dump, expect)
    return report(f"{len(args)} dumps")


def main_format(args):
    if len(args) != 2:
        return usage()
    check_format(args[0], args[1])
    return report("format and docs")


def report(what):
    for e in errors:
        print(f"check_dump: {e}", file=sys.stderr)
    if not errors:
        print(f"check_dump: ok ({what})")
    return 1 if errors else 0


JOB_CHECKS = {"completed": job_completed, "stall": job_stall, "hang": job_hang,
              "differ": job_differ, "flight": job_flight, "settled": job_settled,
              "sane": job_sane, "incident": job_incident, "mainloop": job_mainloop}


def main_job(check, args):
    if not args or len(args) > 2:
        return usage()
    d = args[0]
    if check == "tree":
        job_tree(d)
        return 0
    arg = args[1] if len(args) > 1 else "0"
    dumps = load_job(d)
    if check == "stack":
        job_stack(dumps, arg)
    else:
        JOB_CHECKS[check](dumps, int(arg))
    return 0


def usage():
    print(__doc__, file=sys.stderr)
    return 2


def main(argv):
    if len(argv) < 2:
        return usage()
    check, args = argv[1], argv[2:]
    if check == "schema":
        return main_schema(args)
    if check == "format":
        return main_format(args)
    if check in JOB_CHECKS or check in ("tree", "stack"):
        return main_job(check, args)
    return usage()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
