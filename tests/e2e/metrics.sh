#!/usr/bin/env bash
# Live metrics (metrics = textfile:DIR, docs/metrics.md), checked with the real tools of
# Debian's prometheus and prometheus-node-exporter packages (scripts/install-deps):
#  - every .prom file a job writes passes `promtool check metrics`, names its rank, and
#    counts the job's ops as the summary line does;
#  - a reader that copies the files in a loop while the job runs never sees a part of one;
#  - node_exporter's textfile collector serves them, scraped with curl on a loopback port;
#  - the files are removed at a clean exit unless metrics_keep_at_exit;
#  - a directory that is missing, not writable, a FIFO, a symbolic link or another user's
#    gives one line per process and no file, and the job goes on.
# The rule file and its tests on series of real runs are in metrics_rules.sh.
source "$(dirname "$0")/lib.sh"
NG=$ROOT/$B/ncclguard
# the shim's lines about metrics (not a path that holds the word, such as a worktree's)
said() { grep -E '^ncclguard: .*(no metrics|metrics file|metrics = )' "$1"; }
needs_harness metrics "$APPS/launch" "$APPS/trainloop"
PROMTOOL=$(command -v promtool || true)
EXPORTER=$(command -v prometheus-node-exporter || command -v node_exporter || true)

# promtool_all NAME FILE...: every file passes promtool check metrics
promtool_all() {
    local name=$1 f out bad=0
    shift
    if [ -z "$PROMTOOL" ]; then skip "$name" "promtool not installed (scripts/install-deps)"; return; fi
    for f in "$@"; do
        if ! out=$("$PROMTOOL" check metrics <"$f" 2>&1); then
            bad=1; fail "$name" "$(basename "$f"): $out"; break
        fi
    done
    [ $bad = 0 ] && pass "$name ($# files)"
}

# --- a healthy job, files kept at exit, read in a loop meanwhile
M=$TMP/healthy/metrics
mkdir -p "$M"
python3 "$ROOT/tests/e2e/prom_reader.py" "$M" "$TMP/reader.out" &
reader=$!
NCCLGUARD_METRICS=textfile:$M NCCLGUARD_METRICS_INTERVAL=0.1 NCCLGUARD_METRICS_KEEP_AT_EXIT=1 \
    NCCLGUARD_TIMING_SAMPLE=1 job healthy -n 4 -- --steps 150 --compute-ms 5 --quiet
kill -TERM $reader 2>/dev/null
wait $reader
files=("$M"/ncclguard-*.prom)
if [ $rc = 0 ] && [ ${#files[@]} = 4 ] && [ -z "$(ls "$M"/*.tmp 2>/dev/null)" ]; then
    pass "a 4-rank job kept one metrics file per rank at exit, and no temporary file"
else
    fail "metrics files of a healthy job" "rc=$rc, files: $(ls "$M")"; show healthy
fi
promtool_all "promtool check metrics on the files kept at exit" "${files[@]}"
if out=$(python3 "$ROOT/tests/e2e/prom_hist.py" "${files[@]}" 2>&1); then
    pass "the GPU-duration histograms agree with the timed collectives' counters (${out##*: })"
else
    fail "GPU-duration histograms" "$(head -5 <<<"$out")"
fi
# the memory of all the shim's tables: the flight recorder and more (the registry, the
# lanes, the marker pools), and not absurd (under 1 GiB at the default sizes)
value() { awk -v m="$1" '$1 ~ "^"m"[{]" {print $2}' "$2"; }
f0=${files[0]}
mem=$(value ncclguard_memory_bytes "$f0") ring=$(value ncclguard_flight_recorder_bytes "$f0")
if [ -n "$mem" ] && [ -n "$ring" ] && [ "$mem" -gt "$ring" ] && [ "$mem" -lt $((1 << 30)) ]; then
    pass "the shim's memory, $mem bytes, counts more than the flight recorder's $ring"
else
    fail "ncclguard_memory_bytes" "memory '$mem', flight recorder '$ring'"
fi
for r in 0 1 2 3; do
    f=$(ls "$M"/ncclguard-local-r$r-*.prom 2>/dev/null)
    # the summary line counts AllReduce calls over both communicators; the world has them all
    want=$(grep -o "rank $r host [^]]*\] summary: .*AllReduce [0-9]*" "$TMP/healthy/out" |
        grep -o 'AllReduce [0-9]*$' | cut -d' ' -f2)
    got=$(grep -E "^ncclguard_ops_total\{job_id=\"local\",rank=\"$r\",.*op=\"AllReduce\",state=\"completed\"\}" \
        "$f" 2>/dev/null | awk '{s += $2} END {print s + 0}')
    if [ -n "$want" ] && [ "$got" = "$want" ]; then
        pass "rank $r's file counts its $want AllReduce ops completed, as its summary line"
    else
        fail "rank $r's completed AllReduce count" "file $got, summary '${want}'"
    fi
done
if read -r nread nbad nstamps <"$TMP/reader.out" && [ "$nbad" = 0 ] && [ "$nread" -ge 20 ] &&
    [ "$nstamps" -ge 2 ]; then
    pass "a reader in a loop read $nread files while the job ran ($nstamps distinct writes), none partial"
else
    fail "reader in a loop" "$(cat "$TMP/reader.out" 2>/dev/null)"
fi

# --- bounded cardinality: 9 threads of 2 communicators each, 18 per process: the first 16
# have series of their own, the other 2 are added up under comm="other"
M3=$TMP/many/metrics
mkdir -p "$M3"
NCCLGUARD_METRICS=textfile:$M3 NCCLGUARD_METRICS_INTERVAL=0.1 NCCLGUARD_METRICS_KEEP_AT_EXIT=1 \
    job many -n 2 -- --steps 5 --threads 9 --quiet
f=$(ls "$M3"/ncclguard-local-r0-*.prom 2>/dev/null)
labels=$(grep -v '^#' "$f" 2>/dev/null | grep -o 'comm="[^"]*"' | sort -u)
want=$(grep -o 'rank 0 host [^]]*\] summary: [0-9]* communicators, [0-9]* ops' "$TMP/many/out" |
    grep -o '[0-9]* ops' | cut -d' ' -f1)
got=$(grep '^ncclguard_ops_total{.*state="completed"' "$f" 2>/dev/null | awk '{s += $2} END {print s + 0}')
if [ $rc = 0 ] && [ "$(wc -l <<<"$labels")" = 17 ] && grep -qx 'comm="other"' <<<"$labels" &&
    [ -n "$want" ] && [ "$got" = "$want" ]; then
    pass "18 communicators in a process: 16 with series of their own and comm=\"other\"; their completed ops add up to the summary's $want"
else
    fail "communicators past the first 16" "rc=$rc, $(wc -l <<<"$labels") comm labels, completed $got, summary '$want'"
fi
promtool_all "promtool check metrics with 18 communicators" "$f"

# --- node_exporter's textfile collector serves the files; curl scrapes it
if [ -z "$EXPORTER" ]; then
    skip "node_exporter scrape" "prometheus-node-exporter not installed (scripts/install-deps)"
else
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$EXPORTER" --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$M" --web.listen-address=127.0.0.1:$port \
        >"$TMP/exporter.log" 2>&1 &
    exporter=$!
    scrape() { curl -sf "http://127.0.0.1:$port/metrics" >"$TMP/scrape.txt"; }
    if wait_for 30 scrape; then
        n=$(grep -c '^ncclguard_ops_total{' "$TMP/scrape.txt")
        ranks=$(grep '^ncclguard_info{' "$TMP/scrape.txt" | grep -o 'rank="[0-9]*"' | sort -u | wc -l)
        if [ "$ranks" = 4 ] && [ "$n" -gt 0 ] && grep -q '^node_textfile_scrape_error 0' "$TMP/scrape.txt"; then
            pass "node_exporter (textfile collector, 127.0.0.1:$port) serves the 4 ranks' metrics to curl ($n ops_total series)"
        else
            fail "node_exporter scrape" "ranks=$ranks series=$n; $(grep -E 'textfile|error' "$TMP/scrape.txt" | head -5)"
        fi
    else
        fail "node_exporter scrape" "no answer on 127.0.0.1:$port: $(tail -3 "$TMP/exporter.log")"
    fi
    kill $exporter 2>/dev/null
    wait $exporter 2>/dev/null
fi

# --- removed at a clean exit by default
M2=$TMP/removed/metrics
mkdir -p "$M2"
NCCLGUARD_METRICS=textfile:$M2 NCCLGUARD_METRICS_INTERVAL=0.1 \
    job removed -n 2 -- --steps 20 --quiet
if [ $rc = 0 ] && [ -z "$(ls -A "$M2")" ] && ! said "$TMP/removed/out" >/dev/null; then
    pass "without metrics_keep_at_exit the files are gone after a clean exit, silently"
else
    fail "files removed at exit" "rc=$rc, left: $(ls -A "$M2")"; show removed
fi

# --- fork: 20 children of a process with a communicator (forked while threads are inside
# NCCL calls) keep no file of the parent's and write none of their own
if [ -x "$E2E/fork_in_call" ]; then
    M4=$TMP/fork/metrics
    mkdir -p "$M4"
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 NCCLGUARD_METRICS=textfile:$M4 \
        NCCLGUARD_METRICS_INTERVAL=0.1 NCCLGUARD_METRICS_KEEP_AT_EXIT=1 \
        NCCLGUARD_DUMP_DIR=$TMP/fork/dumps under_shim timeout 120 "$E2E/fork_in_call" \
        >"$TMP/fork/out" 2>&1
    rc=$?
    files=$(ls "$M4")
    if [ $rc = 0 ] && [ "$(grep -c 'fork_in_call: child ok' "$TMP/fork/out")" = 20 ] &&
        [ "$(wc -w <<<"$files")" = 1 ] && [ -z "$(ls -a "$M4" | grep '\.tmp$')" ]; then
        pass "fork: 20 children write no metrics file; the parent's is the only one"
    else
        fail "metrics across fork" "rc=$rc, files: $files"
    fi
fi

# --- bad directories: one line per process, no metrics, the job goes on
bad() {
    local name=$1 dir=$2 reason=$3 n
    NCCLGUARD_METRICS=textfile:$dir NCCLGUARD_METRICS_INTERVAL=0.1 job "bad-$name" -n 2 -- \
        --steps 10 --quiet
    n=$(grep -c "no metrics: the directory $dir .*$reason" "$TMP/bad-$name/out")
    if [ $rc = 0 ] && [ "$n" = 2 ] && [ "$(said "$TMP/bad-$name/out" | wc -l)" = 2 ] &&
        ! find "$TMP/bad-$name" "$TMP/target" -name '*.prom*' | grep -q .; then
        pass "metrics into $name: one line per rank ('$reason'), no file, the job goes on"
    else
        fail "metrics into $name" "rc=$rc, $n lines; $(said "$TMP/bad-$name/out" | head -3)"
    fi
}
mkdir -p "$TMP/target" "$TMP/ro" "$TMP/theirs"
chmod 0555 "$TMP/ro"
mkfifo "$TMP/fifo"
ln -s "$TMP/target" "$TMP/link"
bad missing "$TMP/nowhere" "does not exist"
bad unwritable "$TMP/ro" "not writable"
bad fifo "$TMP/fifo" "a FIFO, not a directory"
bad symlink "$TMP/link" "a symbolic link"
if [ "$(id -u)" = 0 ]; then
    chown 65534 "$TMP/theirs"
    bad "another-user's" "$TMP/theirs" "owned by uid 65534, not by you"
elif [ "$(stat -c %u /)" != "$(id -u)" ]; then
    bad "another-user's" / "owned by uid $(stat -c %u /), not by you"
else
    skip "metrics into another user's directory" "no directory of another user to try"
fi
chmod 0755 "$TMP/ro"

NCCLGUARD_METRICS=prometheus:9100 job badvalue -n 2 -- --steps 5 --quiet
if [ $rc = 0 ] && [ "$(grep -c 'metrics = prometheus:9100 is not understood' "$TMP/badvalue/out")" = 2 ]; then
    pass "metrics = prometheus:9100: one line per rank (textfile:DIR is the form), the job goes on"
else
    fail "a metrics value not understood" "rc=$rc; $(said "$TMP/badvalue/out" | head -2)"
fi
finish
