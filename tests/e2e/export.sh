#!/usr/bin/env bash
# `ncclguard export --torch-fr DIR -o OUT` end to end: the dumps of two faults of
# trainloop under the shim (rank 1 hangs in host code; rank 3 calls a mismatched
# AllReduce) exported as PyTorch Flight Recorder dumps: one file per rank, named
# as torch names them, each a pickle that Python's pickle loads with the members
# torchfrtrace reads, of one version on every rank; `ncclguard analyze` of the
# export names the same culprit as of the dumps. Bad input gets one line, a
# non-zero exit, and leaves nothing behind. (tests/torch/export.sh runs
# torchfrtrace itself on the same kind of export.)
source "$(dirname "$0")/lib.sh"
needs_harness export "$APPS/trainloop"
export NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600

# culprits DIR: "rank:cause ..." of `ncclguard analyze --json DIR`, and its exit status
culprits() {
    "$NG" analyze --json "$1" 2>/dev/null | python3 -c 'import json, sys
v = json.load(sys.stdin)
print(" ".join("%s:%s" % (c["rank"], c["cause"]) for c in v["verdict"]["culprits"]) or "none")'
}

# fr_check OUT RANKS: every file of OUT is <prefix><rank> for ranks 0..RANKS-1, loads
# with pickle, has what torchfrtrace reads, one version, entries in record order
fr_check() {
    python3 - "$1" "$2" <<'PY'
import os, pickle, sys
out, n = sys.argv[1], int(sys.argv[2])
names = sorted(os.listdir(out))
want = sorted(f"nccl_trace_rank_{r}" for r in range(n))
assert names == want, f"files {names}, want {want}"
versions, members = set(), set()
entries = 0
for name in names:
    fr = pickle.load(open(os.path.join(out, name), "rb"))
    for k in ("version", "comm_lib_version", "pg_config", "pg_status", "entries"):
        assert k in fr, f"{name}: no {k}"
    versions.add(fr["version"])
    for pg, cfg in fr["pg_config"].items():
        assert set(cfg) == {"name", "desc", "ranks"} and cfg["name"] == pg, cfg
        members.add((pg, cfg["desc"], cfg["ranks"]))
    ids = [e["record_id"] for e in fr["entries"]]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), f"{name}: record ids {ids}"
    for e in fr["entries"]:
        for k in ("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id",
                  "op_id", "profiling_name", "time_created_ns", "input_sizes", "output_sizes",
                  "input_dtypes", "output_dtypes", "state", "time_discovered_started_ns",
                  "time_discovered_completed_ns", "retired", "is_p2p", "timeout_ms", "frames"):
            assert k in e, f"{name}: entry without {k}: {e}"
        assert e["process_group"][0] in fr["pg_config"], e["process_group"]
        assert e["profiling_name"].startswith("nccl:"), e["profiling_name"]
        assert e["state"] in ("scheduled", "started", "completed"), e["state"]
        assert e["retired"] == (e["state"] == "completed"), e
        assert isinstance(e["process_group"], tuple) and e["collective_seq_id"] > 0, e
    entries += len(fr["entries"])
assert versions == {"2.10"}, versions
# every rank describes each group alike
assert len({m[0] for m in members}) == len(members), members
print(f"{len(names)} files, version {versions.pop()}, {entries} entries, groups "
      + " ".join(f"{m[0]}={m[2]}" for m in sorted(members)))
PY
}

# export_case NAME WANT: the dumps of job NAME exported; their verdict is WANT, and so is
# the verdict of the export
export_case() {
    local name=$1 want=$2 dir=$TMP/$1/dumps out=$TMP/$1.fr
    local got
    got=$(culprits "$dir")
    if [ "$got" != "$want" ]; then
        fail "$name: the dumps' verdict" "want $want, got $got"; show "$name"; return
    fi
    if "$NG" export --torch-fr "$dir" -o "$out" >"$TMP/$name.export" 2>&1 &&
        grep -q "^ncclguard export: 4 rank(s), [0-9]* entries, Flight Recorder 2.10, in $out\$" \
            "$TMP/$name.export"; then
        pass "$name: exported ($(head -n 1 "$TMP/$name.export" | cut -c1-100))"
    else
        fail "$name: export" "exit $?: $(head -c 300 "$TMP/$name.export")"; return
    fi
    local info
    if info=$(fr_check "$out" 4 2>&1); then
        pass "$name: the FR files load with pickle, one version on every rank ($info)"
    else
        fail "$name: the FR files" "$info"
    fi
    got=$(culprits "$out")
    if [ "$got" = "$want" ] && "$NG" analyze "$out" >"$TMP/$name.fr.txt" 2>&1; [ $? = 1 ]; then
        pass "$name: analyze of the export names $got too: $(head -n 1 "$TMP/$name.fr.txt" |
            cut -c1-120)"
    else
        fail "$name: analyze of the export" "want $want, got $got: $(head -n 2 "$TMP/$name.fr.txt")"
    fi
}

UNTIL="$(dumped hang) && grep -q 'verdict (' $TMP/hang/out" job hang -n 4 --timeout 60 -- \
    --steps 30 --hang-rank 1 --hang-step 3 --quiet
export_case hang "1:missing"
UNTIL=$(dumped mismatch) job mismatch -n 4 --timeout 60 -- --steps 30 --mismatch-rank 3 \
    --mismatch-step 2 --quiet
export_case mismatch "3:mismatch"

# The in-flight op of the hang, as FR has it: rank 0 waits in an all_reduce of the
# 4-rank group, one seq past rank 1's last entry in that group, and rank 1 has none in flight
if python3 - "$TMP/hang.fr" >"$TMP/flight.txt" 2>&1 <<'PY'
import pickle, sys
fr = [pickle.load(open(f"{sys.argv[1]}/nccl_trace_rank_{r}", "rb")) for r in range(4)]
world = [n for n, c in fr[0]["pg_config"].items() if c["ranks"] == "[0, 1, 2, 3]"]
assert len(world) == 1, fr[0]["pg_config"]
def mine(f):
    return [e for e in f["entries"] if e["process_group"][0] == world[0]]
flight = [e for e in mine(fr[0]) if not e["retired"]]
last1 = max(e["collective_seq_id"] for e in mine(fr[1]))
assert flight and flight[0]["collective_seq_id"] == last1 + 1, (last1, flight[:1])
assert flight[0]["profiling_name"] == "nccl:all_reduce", flight[0]
assert all(e["retired"] for e in mine(fr[1])), "rank 1 has an op in flight"
print(f"rank 0 waits in all_reduce #{last1 + 1}; rank 1's last is #{last1}")
PY
then
    pass "hang: as FR has it: $(cat "$TMP/flight.txt")"
else
    fail "hang: the op in flight" "$(tail -n 3 "$TMP/flight.txt")"
fi

# --- bad input: one line, a non-zero exit, nothing left behind ---
# bad NAME WANT_RC PATTERN ARGS...: export ARGS; exit WANT_RC, one line on stderr that
# matches PATTERN, nothing on stdout, and no OUT (the argument after -o) nor part of it
bad() {
    local name=$1 want=$2 pattern=$3; shift 3
    local out=""
    local a prev=""
    for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
    "$NG" export "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    local rc=$?
    local left
    left=$(ls -d "$out" "$out".part* 2>/dev/null | grep -v "^$TMP/kept\$")
    if [ $rc = "$want" ] && [ "$(wc -l <"$TMP/bad.err")" = 1 ] && [ ! -s "$TMP/bad.out" ] &&
        grep -qE "$pattern" "$TMP/bad.err" && [ -z "$left" ]; then
        pass "$name: exit $rc, $(cut -c1-110 "$TMP/bad.err")"
    else
        fail "$name" "exit $rc (want $want), left '$left': $(head -c 300 "$TMP/bad.err")"
    fi
}
bad "missing dir" 3 '^ncclguard export: cannot read the dump directory .*nowhere' \
    --torch-fr "$TMP/nowhere" -o "$TMP/o1"
touch "$TMP/afile"
bad "unwritable -o" 2 "^ncclguard export: cannot write $TMP/afile/o2 \\(Not a directory\\)" \
    --torch-fr "$TMP/hang/dumps" -o "$TMP/afile/o2"
mkdir -p "$TMP/kept" && echo keep >"$TMP/kept/x"
bad "-o a folder not empty" 2 "^ncclguard export: $TMP/kept is not empty" \
    --torch-fr "$TMP/hang/dumps" -o "$TMP/kept"
[ "$(ls "$TMP/kept")" = x ] && pass "-o a folder not empty: left as it was" ||
    fail "-o not empty: changed" "$(ls "$TMP/kept")"
mkdir -p "$TMP/corrupt"
cp "$TMP"/hang/dumps/*.json "$TMP/corrupt/"
f=$(ls "$TMP"/corrupt/*.json | sed -n 3p)
head -c 700 "$f" >"$f.cut" && mv "$f.cut" "$f"
bad "a corrupt dump" 3 "^ncclguard export: $f: .*: nothing written\$" \
    --torch-fr "$TMP/corrupt" -o "$TMP/o3"
mkdir -p "$TMP/empty"
bad "no dump" 3 "^ncclguard export: $TMP/empty: no dump" --torch-fr "$TMP/empty" -o "$TMP/o4"
one_usage() { # NAME ARGS...: exit 64, one line naming the usage, nothing written
    local name=$1; shift
    "$NG" export "$@" >/dev/null 2>"$TMP/bad.err"
    local rc=$?
    if [ $rc = 64 ] && [ "$(wc -l <"$TMP/bad.err")" = 1 ] &&
        grep -q '; usage: ncclguard export --torch-fr DIR -o OUT$' "$TMP/bad.err" &&
        [ ! -e "$TMP/o5" ]; then
        pass "usage: $name: exit 64, $(cut -c1-80 "$TMP/bad.err")"
    else
        fail "usage: $name" "exit $rc: $(head -n 2 "$TMP/bad.err")"
    fi
}
one_usage "no --torch-fr" -o "$TMP/o5"
one_usage "no -o" --torch-fr "$TMP/hang/dumps"
one_usage "a bad option" --torch-fr "$TMP/hang/dumps" -o "$TMP/o5" --bogus
one_usage "an extra argument" --torch-fr "$TMP/hang/dumps" -o "$TMP/o5" extra
"$NG" export --help | grep -q "^usage: ncclguard export --torch-fr DIR -o OUT" &&
    pass "--help prints the usage" || fail "--help" "$("$NG" export --help 2>&1 | head -n 2)"
# an empty folder as OUT is filled
mkdir -p "$TMP/given"
"$NG" export --torch-fr "$TMP/mismatch/dumps" -o "$TMP/given" >/dev/null 2>&1 &&
    [ "$(ls "$TMP/given" | wc -l)" = 4 ] && pass "-o an empty folder: filled with 4 files" ||
    fail "-o an empty folder" "$(ls "$TMP/given")"
finish
