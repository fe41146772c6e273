#!/usr/bin/env bash
# `ncclguard analyze` (and `report`) at scale: synthetic dumps of RANKS ranks x 4096
# records each (bench/gendumps, about 2 MB a rank, rank 2345 % RANKS planted as the
# culprit: it never calls the last AllReduce), read from the page cache. Prints the
# time, the peak RSS and the read rate of each command, whether the culprit was named,
# and, measured in the same run on a sample of 64 ranks, the parse rate of simdjson
# (the reader's library) and of jansson (the baseline) through the same reader.
# Target: 4096 ranks (8.6 GB) in <= 10 s and <= 2 GB on the 2-core machine:
#   make bench ANALYZE_RANKS=4096     (or: bench/analyze.sh build 4096)
# Usage: bench/analyze.sh BUILD_DIR [RANKS] [WORK_DIR]   (with WORK_DIR the dumps are
# kept there and reused while they match; without, they are removed at the end)
set -u
B=$(cd "${1:-build}" && pwd)
RANKS=${2:-512}
if [ -n "${3:-}" ]; then W=$3; else
    W=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-bench.XXXXXX")
    trap 'rm -rf "$W"' EXIT
fi
NG=$B/ncclguard
GEN=$B/bench/gendumps
CULPRIT=$((2345 % RANKS))
mkdir -p "$W"

# dumps NAME N: N ranks x 4096 records in $W/NAME, made unless already there
dumps() {
    local d=$W/$1 n=$2
    if [ "$(cat "$d/.made" 2>/dev/null)" != "$n $CULPRIT" ]; then
        rm -rf "$d"
        echo "bench/analyze: writing $n synthetic dumps to $d ..." >&2
        "$GEN" -o "$d" -n "$n" -r 4096 -t 8 --culprit $((CULPRIT % n)) --cause missing || exit 1
        echo "$n $CULPRIT" >"$d/.made"
    fi
    cat "$d"/*.json >/dev/null # into the page cache
}
dumps full "$RANKS"
dumps sample 64

# measure LABEL CMD...: runs CMD, prints "LABEL seconds peak_rss_bytes exit_status"
measure() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
dt = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(sys.argv[1], f"{dt:.3f}", rss, rc)
PY
}
size() { du -sb --exclude=.made "$1" | cut -f1; }

FULL=$(size "$W/full") SAMPLE=$(size "$W/sample")
read -r _ t rss rc < <(measure analyze "$NG" analyze "$W/full")
named=no
"$NG" analyze "$W/full" 2>/dev/null | head -n 1 | grep -q "^culprit: rank $CULPRIT " && named=yes
read -r _ tr rssr rcr < <(measure report "$NG" report "$W/full" -o "$W/report.html")
read -r _ ts _ _ < <(measure simdjson "$NG" analyze --threads 1 "$W/sample")
read -r _ tj _ _ < <(measure jansson "$NG" analyze --threads 1 --parser jansson "$W/sample")
python3 - "$RANKS" "$FULL" "$t" "$rss" "$rc" "$named" "$tr" "$rssr" "$rcr" "$SAMPLE" "$ts" "$tj" \
    "$(nproc)" <<'PY'
import sys
(ranks, full, t, rss, rc, named, tr, rssr, rcr, sample, ts, tj, cpus) = sys.argv[1:]
full, t, rss, tr, rssr, sample, ts, tj = (float(x) for x in (full, t, rss, tr, rssr, sample, ts, tj))
mb = 1e6
print(f"analyze: {ranks} ranks x 4096 records ({full / 1e9:.2f} GB, {cpus} CPUs): {t:.2f} s, "
      f"peak RSS {rss / mb:.0f} MB, {full / t / mb:.0f} MB/s; exit {rc}; planted culprit named: {named}")
print(f"report:  the same dumps: {tr:.2f} s, peak RSS {rssr / mb:.0f} MB, "
      f"{full / tr / mb:.0f} MB/s; exit {rcr}")
print(f"parse rate, one thread, 64 ranks ({sample / mb:.0f} MB): simdjson {sample / ts / mb:.0f} MB/s, "
      f"jansson {sample / tj / mb:.0f} MB/s (baseline): simdjson is {tj / ts:.1f}x faster")
at = t * 8.6e9 / full
print(f"target: 4096 ranks x 4096 records (8.6 GB) in <= 10 s and <= 2 GB; at this rate "
      f"{at:.1f} s with simdjson, {tj * 8.6e9 / sample / int(cpus):.0f} s with jansson on {cpus} CPUs"
      + ("" if int(ranks) >= 4096 else "; full run: make bench ANALYZE_RANKS=4096"))
PY
