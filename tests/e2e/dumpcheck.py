#!/usr/bin/env python3
"""Checks a set of ncclguard dumps (one per rank) for the end-to-end tests.

usage: dumpcheck.py CHECK DIR [ARGS]     (DIR may also be one dump file)
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
  sane DIR                  only the checks below
  tree DIR                  the checks below on every dump anywhere under DIR (what
                            the scripts run on their temp dir at the end)
  stack DIR FUNCTION        every dump lists its main thread (tid = pid), and some thread
                            of it has FUNCTION in its stack
Every check first reads every dump of DIR and checks what must hold in any dump
(sane): no two records in flight share a CUDA marker; a completed op has its end
time (GPU or discovered); each op's communicator is in comms[], and its seq is
not beyond the communicator's (nor, completed, beyond its last completed one);
an aborted op belongs to a communicator that was aborted, revoked or destroyed.
Prints what it found; exits 1 with a reason when the check fails.
"""
import glob
import json
import os
import sys


def load(d):
    dumps = {}
    paths = [d] if os.path.isfile(d) else glob.glob(os.path.join(d, "ncclguard-r*.json"))
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("schema", "").split("/")[0] != "ncclguard.dump":
            fail(f"{path}: schema {doc.get('schema')}")
        sane(path, doc)
        dumps[doc["rank"]] = doc
    return dumps


IN_FLIGHT = ("scheduled", "started")
ENDED = ("aborted", "revoked", "destroyed")


def sane(path, doc):
    """What every dump must show, whatever the job did."""
    comms = {c["id"]: c for c in doc["comms"]}
    markers = {}
    for o in doc["ops"]:
        where = f"{path}: op {o['index']} ({o['op']} seq {o['seq']} p2p_seq {o['p2p_seq']})"
        if o["state"] in IN_FLIGHT and o["marker"] is not None:
            if o["marker"] in markers:
                fail(f"{where} shares marker {o['marker']} with op {markers[o['marker']]}, "
                     "both in flight")
            markers[o["marker"]] = o["index"]
        if o["state"] == "completed" and o["gpu_end_ns"] is None and o["seen_end_ns"] is None:
            fail(f"{where} is completed without an end time")
        c = comms.get(o["comm"])
        if c is None:
            fail(f"{where}: communicator {o['comm']} is not in comms[]")
        if o["seq"] and o["seq"] > c["last_seq"]:
            fail(f"{where}: seq beyond the communicator's last_seq {c['last_seq']}")
        if o["seq"] and o["state"] == "completed" and o["seq"] > c["last_completed_seq"]:
            fail(f"{where}: completed, but last_completed_seq is {c['last_completed_seq']}")
        if o["p2p_seq"] and o["state"] == "completed":
            done = {p["peer"]: p["last_completed_p2p_seq"] for p in c["peers"]}
            if o["p2p_seq"] > done.get(o["peer"], 0):
                fail(f"{where}: completed, but peer {o['peer']} has "
                     f"last_completed_p2p_seq {done.get(o['peer'])}")
        if o["state"] == "aborted" and c["state"] not in ENDED:
            fail(f"{where} is aborted on a communicator in state {c['state']}")


def fail(msg):
    print("dumpcheck: FAIL: " + msg)
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


def check_completed(dumps, nranks):
    if len(dumps) != nranks:
        fail(f"{len(dumps)} dumps for {nranks} ranks")
    per_comm = {}
    for rank, doc in dumps.items():
        bad = [o for o in doc["ops"] if o["state"] != "completed"]
        if bad:
            fail(f"rank {rank}: {len(bad)} ops not completed, e.g. {bad[0]}")
        if not doc["ops"]:
            fail(f"rank {rank}: no ops recorded")
        for c in doc["comms"]:
            if c["last_seq"] != c["last_completed_seq"]:
                fail(f"rank {rank} comm {c['id']}: last_seq {c['last_seq']} != "
                     f"last_completed_seq {c['last_completed_seq']}")
            per_comm.setdefault(c["id"], set()).add((c["last_seq"], c["last_completed_seq"]))
    for cid, seqs in per_comm.items():
        if len(seqs) != 1:
            fail(f"comm {cid}: ranks disagree on seqs: {sorted(seqs)}")
    pairs = check_peers(dumps)
    print(f"dumpcheck: {nranks} ranks, {len(per_comm)} comms, all ops completed, seqs agree, "
          f"{pairs} point-to-point pairs agree")


def check_peers(dumps):
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
            fail(f"comm {cid}: rank {a} completed {done} of {called} ops with peer {b}")
        if p2p.get((cid, b, a)) != (called, done):
            fail(f"comm {cid}: rank {a} counts {called} ops with {b}, "
                 f"which counts {p2p.get((cid, b, a))}")
    if not p2p:
        fail("no point-to-point traffic in any dump")
    return len(p2p) // 2


def check_stall(dumps, rank):
    if rank not in dumps:
        fail(f"no dump from rank {rank}")
    mine = inflight(dumps[rank])
    if not mine or mine[2] != "scheduled":
        fail(f"rank {rank}: oldest in-flight op is {mine}, want scheduled")
    for r, doc in dumps.items():
        if r == rank:
            continue
        same = [o for o in doc["ops"] if o["comm"] == mine[0] and o["seq"] == mine[1]]
        if not same or same[0]["state"] != "started":
            fail(f"rank {r}: op {mine[:2]} is {same[0]['state'] if same else 'absent'}, "
                 "want started")
    print(f"dumpcheck: rank {rank} scheduled at comm {mine[0]} seq {mine[1]}; "
          f"{len(dumps) - 1} peers started there")


def check_incident(dumps, nranks):
    if sorted(dumps) != list(range(nranks)):
        fail(f"dumps of ranks {sorted(dumps)}, expected 0..{nranks - 1}")
    ids = {doc.get("incident") for doc in dumps.values()}
    if len(ids) != 1 or None in ids:
        fail(f"incidents {ids}: expected one")
    print(f"dumpcheck: {nranks} dumps of incident {ids.pop()}")


def check_mainloop(dumps, rank):
    doc = dumps.get(rank)
    if doc is None:
        fail(f"no dump from rank {rank}")
    main = [t for t in doc.get("threads") or [] if t["tid"] == doc["pid"]]
    if not main:
        fail(f"rank {rank}: its main thread is not listed")
    frames = main[0]["frames"]
    names = [f["function"] for f in frames]
    in_nccl = [f["module"] for f in frames if "libnccl" in (f["module"] or "")]
    if "run_worker" not in names or in_nccl:
        fail(f"rank {rank}: main thread in {names} (NCCL frames: {in_nccl})")
    print(f"dumpcheck: rank {rank}'s main thread is in the training loop, not in NCCL")


def check_hang(dumps, rank):
    if rank not in dumps:
        fail(f"rank {rank} wrote no dump")
    culprit = dumps.pop(rank)
    if not dumps:
        fail("no dumps of the peers")
    seen = {r: inflight(doc) for r, doc in dumps.items()}
    keys = {v[:2] if v else None for v in seen.values()}
    if len(keys) != 1 or None in keys:
        fail(f"peers disagree on the stuck op: {seen}")
    if inflight(culprit) is not None or culprit.get("reason") != "trigger":
        fail(f"rank {rank}: {culprit.get('reason')} dump with {inflight(culprit)} in flight")
    ids = {doc.get("incident") for doc in dumps.values()} | {culprit.get("incident")}
    if len(ids) != 1 or None in ids:
        fail(f"incidents {ids}: expected one")
    check_stack({rank: culprit}, "trainloop_host_stall")
    print(f"dumpcheck: ranks {sorted(dumps)} all stuck at comm/seq {keys.pop()}; rank {rank} "
          "dumped on the trigger, in trainloop_host_stall")


def check_differ(dumps, rank):
    if rank not in dumps:
        fail(f"no dump from rank {rank}")
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
                fail(f"comm {cid} seq {s}: the ranks differ, but not on rank {rank} alone: {vals}")
            print(f"dumpcheck: comm {cid}: ranks agree up to seq {s - 1}; at seq {s} rank "
                  f"{rank} has {vals.get(rank)}, the others {others.pop()}")
            found = True
            break
    if not found:
        fail("the dumps agree everywhere")


def check_flight(dumps, capacity):
    for rank, doc in dumps.items():
        fl = doc["flight"]
        want = max(0, fl["recorded"] - capacity)
        if fl["capacity"] != capacity or fl["overwritten"] != want:
            fail(f"rank {rank}: flight {fl}, want capacity {capacity} overwritten {want}")
        if want == 0:
            fail(f"rank {rank}: the ring never wrapped ({fl})")
        if len(doc["ops"]) > capacity:
            fail(f"rank {rank}: {len(doc['ops'])} ops listed for a ring of {capacity}")
    print(f"dumpcheck: flight counters consistent on {len(dumps)} ranks")


def check_settled(dumps, _):
    for rank, doc in dumps.items():
        if not doc["ops"]:
            fail(f"rank {rank}: no ops recorded")
        bad = [(o["index"], o["op"], o["state"]) for o in doc["ops"] if o["state"] != "completed"]
        if bad:
            fail(f"rank {rank}: {len(bad)} ops not completed: {bad[:8]}")
    print(f"dumpcheck: {len(dumps)} dumps, every op completed")


def check_sane(dumps, _):
    if not dumps:
        fail("no dumps")
    print(f"dumpcheck: {len(dumps)} dumps consistent")


def check_tree(d):
    paths = [os.path.join(root, f) for root, _, files in os.walk(d) for f in files
             if f.endswith(".json") and (f.startswith("ncclguard-") or f.startswith("held-"))]
    for path in paths:
        load(path)
    print(f"dumpcheck: {len(paths)} dumps under the tree, each consistent")
def check_stack(dumps, function):
    if not dumps:
        fail("no dumps")
    for rank, doc in sorted(dumps.items()):
        threads = doc.get("threads") or []
        if not any(t["tid"] == doc["pid"] for t in threads):
            fail(f"rank {rank}: its main thread is not listed")
        names = {f["function"] for t in threads for f in t["frames"]}
        if function not in names:
            fail(f"rank {rank}: no thread has {function} in its stack ({sorted(map(str, names))})")
    print(f"dumpcheck: {len(dumps)} dumps, each with a thread in {function}")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(64)
    check, d = sys.argv[1], sys.argv[2]
    if check == "tree":
        return check_tree(d)
    arg = sys.argv[3] if len(sys.argv) > 3 else "0"
    dumps = load(d)
    if check == "stack":
        check_stack(dumps, arg)
        return
    {"completed": check_completed, "stall": check_stall, "hang": check_hang,
     "differ": check_differ, "flight": check_flight, "settled": check_settled,
     "sane": check_sane, "incident": check_incident,
     "mainloop": check_mainloop}[check](dumps, int(arg))


if __name__ == "__main__":
    main()
