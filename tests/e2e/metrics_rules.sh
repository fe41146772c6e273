#!/usr/bin/env bash
# The rule file of docs/examples/ncclguard.rules.yml (docs/metrics.md) against series of
# real runs: the metrics files of a job are copied while it runs (tests/e2e/prom_series.py
# snap: what successive scrapes of node_exporter would serve) and handed to `promtool test
# rules` as its input series.
#  - straggler: rank 2's GPU is 50 ms late at each step (trainloop --late-gpu-rank 2); the
#    straggler alert names rank 2 on the world communicator, and nothing else. The
#    snapshots are placed one scrape interval (15 s) apart: the rule compares rates of the
#    ranks of one communicator, which the spacing scales alike. A job whose ranks take
#    turns (host jitter) raises no straggler alert.
#  - hang: 4 steps of 1 s, then rank 1 blocks in host code (trainloop --hang-rank 1); the
#    alert does not fire while the steps complete (the last snapshot before rank 0's world
#    count stops growing, 2 s or more into the job); the snapshots,
#    0.5 s apart as taken, end while ncclguard's own timeout (8 s) is still to come (no
#    timeout in any file); the no-progress alert fires for ranks 0, 2 and 3, on the world
#    communicator and on each other one where they have ops in flight (those behind the
#    stuck op), and never for rank 1, which has none in flight.
source "$(dirname "$0")/lib.sh"
NG=$ROOT/$B/ncclguard
needs_harness metrics_rules "$APPS/launch" "$APPS/trainloop"
RULES=$ROOT/docs/examples/ncclguard.rules.yml
SERIES="python3 $ROOT/tests/e2e/prom_series.py"
if ! command -v promtool >/dev/null; then
    skip "metrics rules" "promtool not installed (Debian's prometheus: scripts/install-deps)"
    finish; exit
fi
if out=$(promtool check rules "$RULES" 2>&1); then
    pass "promtool check rules: $(grep -o '[0-9]* rules found' <<<"$out")"
else
    fail "promtool check rules" "$out"
fi
# The Grafana dashboard's queries parse (as rules: promtool has no other parser), once its
# variables are given values.
python3 - "$ROOT/docs/examples/ncclguard.grafana.json" >"$TMP/dashboard.rules.yml" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("groups:\n  - name: dashboard\n    rules:")
for i, p in enumerate(d["panels"]):
    for t in p.get("targets", []):
        e = t["expr"].replace("$job", "771234").replace("$__range", "1h")
        print("      - record: dashboard:panel%d:%s" % (p["id"], t["refId"]))
        print("        expr: %s" % json.dumps(e))
PY
if out=$(promtool check rules "$TMP/dashboard.rules.yml" 2>&1); then
    pass "every query of the Grafana dashboard parses: $(grep -o '[0-9]* rules found' <<<"$out")"
else
    fail "the Grafana dashboard's queries" "$out"
fi
FAMILIES=(ncclguard_timed_gpu_seconds_total ncclguard_progress_age_seconds
    ncclguard_ops_in_flight ncclguard_op_timeout_seconds)

# world_comm SNAPS: the comm label of the communicator that carries the AllReduce ops
world_comm() {
    $SERIES value "$1" -1 ncclguard_ops_enqueued_total | grep 'op="AllReduce"' | head -1 |
        grep -o 'comm="[^"]*"' | cut -d'"' -f2
}
host_of() { $SERIES value "$1" -1 ncclguard_info | head -1 | grep -o 'host="[^"]*"' | cut -d'"' -f2; }

# snapped NAME JOB_ARGS...: job NAME (4 ranks) with every op timed and a metrics file every
# 0.1 s, kept at exit, while the series helper copies the files into $TMP/NAME/snaps every
# 0.1 s; n: the snapshots taken
snapped() {
    local name=$1 d=$TMP/$1 snapper
    shift
    mkdir -p "$d/metrics" "$d/snaps"
    $SERIES snap "$d/metrics" "$d/snaps" 0.1 &
    snapper=$!
    NCCLGUARD_METRICS=textfile:$d/metrics NCCLGUARD_METRICS_INTERVAL=0.1 \
        NCCLGUARD_METRICS_KEEP_AT_EXIT=1 NCCLGUARD_TIMING_SAMPLE=1 job "$name" -n 4 -- "$@"
    sleep 0.3 # a last snapshot of the files kept at exit
    kill -TERM $snapper
    wait $snapper
    n=$(ls "$d/snaps" | wc -l)
}

# --- straggler
# (the plain build only: under a sanitizer four ranks on two cores do not get fair host
# time, and a rank 50 ms late on its GPU was not the slowest in one clean-clone ASan run)
if [ -n "${SANITIZE:-}" ]; then
    skip "straggler rule on a real run" "judged on the plain build (host time under a sanitizer)"
else
    S=$TMP/straggler
    snapped straggler --steps 150 --late-gpu-rank 2 --late-gpu-ms 50 --quiet
    comm=$(world_comm "$S/snaps")
    host=$(host_of "$S/snaps")
    if [ $rc != 0 ] || [ "$n" -lt 24 ] || [ -z "$comm" ]; then
        fail "straggler run" "rc=$rc, $n snapshots (24 needed: 5 min of 15 s scrapes), comm '$comm'"
        show straggler
    else
        cat >"$S/test.yml" <<EOF
rule_files:
  - $RULES
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
$($SERIES series "$S/snaps" "${FAMILIES[@]}")
    alert_rule_test:
      - eval_time: $(((n - 1) * 15))s
        alertname: NcclguardStraggler
        exp_alerts:
          - exp_labels: {severity: warning, job_id: local, rank: "2", host: "$host", comm: "$comm"}
            exp_annotations:
              summary: "rank 2 on $host holds up communicator $comm of job local"
      - eval_time: $(((n - 1) * 15))s
        alertname: NcclguardNoProgress
        exp_alerts: []
EOF
        if out=$(promtool test rules "$S/test.yml" 2>&1); then
            pass "promtool test rules on $n scrapes of a straggler job: the straggler alert names rank 2 (comm $comm), and only it"
        else
            fail "straggler rule on a real run" "$(head -40 <<<"$out")"
        fi
    fi
fi

# --- a healthy job whose ranks take turns (host jitter of up to 20 ms per step): no straggler
J=$TMP/jitter
snapped jitter --steps 250 --jitter-ms 20 --quiet
if [ $rc != 0 ] || [ "$n" -lt 24 ]; then
    fail "jittered run" "rc=$rc, $n snapshots (24 needed)"; show jitter
else
    cat >"$J/test.yml" <<EOF
rule_files:
  - $RULES
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
$($SERIES series "$J/snaps" "${FAMILIES[@]}")
    alert_rule_test:
      - eval_time: $(((n - 1) * 15))s
        alertname: NcclguardStraggler
        exp_alerts: []
EOF
    if out=$(promtool test rules "$J/test.yml" 2>&1); then
        pass "promtool test rules on $n scrapes of a job whose ranks take turns (jitter): no straggler alert"
    else
        fail "straggler rule on a jittered run" "$(head -30 <<<"$out")"
    fi
fi

# --- hang, stopped before ncclguard's own timeout
H=$TMP/hang
mkdir -p "$H/metrics" "$H/snaps"
$SERIES snap "$H/metrics" "$H/snaps" 0.5 &
snapper=$!
# until rank 0 has seen no progress for 3 s with ops in flight (the rule's threshold is
# a quarter of the 8 s timeout: 2 s)
stalled="python3 -c 'import glob,re,sys
t=open(glob.glob(\"$H/metrics/*-r0-*.prom\")[0]).read()
a=[float(v) for v in re.findall(r\"^ncclguard_progress_age_seconds\\{.*\\} (\\S+)\", t, re.M)]
f=[int(v) for v in re.findall(r\"^ncclguard_ops_in_flight\\{.*\\} (\\S+)\", t, re.M)]
sys.exit(not any(x >= 3 and y > 0 for x, y in zip(a, f)))' 2>/dev/null"
(export NCCLGUARD_METRICS=textfile:$H/metrics NCCLGUARD_METRICS_INTERVAL=0.5 \
    NCCLGUARD_TIMEOUT=8 NCCLGUARD_FIRST_TIMEOUT=600
 UNTIL="$stalled" job hang -n 4 --timeout 120 -- --steps 100 --compute-ms 1000 --hang-rank 1 \
    --hang-step 4 --quiet
 echo $rc >"$H/rc")
sleep 0.6 # the snapshot of the files that showed it
kill -TERM $snapper
wait $snapper
n=$(ls "$H/snaps" | wc -l)
comm=$(world_comm "$H/snaps")
host=$(host_of "$H/snaps")
timeouts=$($SERIES value "$H/snaps" -1 ncclguard_timeouts_total | awk '{s += $2} END {print s + 0}')
# the (rank comm) pairs with ops in flight in the last snapshot
waiting=$($SERIES value "$H/snaps" -1 ncclguard_ops_in_flight | awk '$2 > 0' |
    sed -E 's/.*rank="([^"]*)".*comm="([^"]*)".*/\1 \2/' | sort)
if [ "$(cat "$H/rc")" != 0 ] || [ "$n" -lt 2 ] || [ -z "$comm" ] || [ "$timeouts" != 0 ] ||
    [ "$(grep -c " $comm$" <<<"$waiting")" != 3 ] || grep -q '^1 ' <<<"$waiting"; then
    fail "hang run" "rc=$(cat "$H/rc"), $n snapshots, comm '$comm', timeouts in the last: $timeouts, in flight: $waiting"
    show hang
else
    alert() {
        echo "          - exp_labels: {severity: critical, job_id: local, rank: \"$1\", host: \"$host\", comm: \"$2\"}"
        echo "            exp_annotations:"
        echo "              summary: \"no op completed on communicator $2 of rank $1 ($host), job local, with ops in flight\""
    }
    # the last snapshot after which rank 0's world ops still completed
    last=$($SERIES value "$H/snaps" -1 ncclguard_ops_total | grep 'rank="0"' |
        grep "comm=\"$comm\",op=\"AllReduce\",state=\"completed\"" | awk '{print $2}')
    healthy=-1
    for ((k = 0; k < n; k++)); do
        v=$($SERIES value "$H/snaps" $k ncclguard_ops_total | grep 'rank="0"' |
            grep "comm=\"$comm\",op=\"AllReduce\",state=\"completed\"" | awk '{print $2}')
        [ -n "$v" ] && [ "$v" -lt "$last" ] && healthy=$k
    done
    cat >"$H/test.yml" <<EOF
rule_files:
  - $RULES
evaluation_interval: 500ms
tests:
  - interval: 500ms
    input_series:
$($SERIES series "$H/snaps" "${FAMILIES[@]}")
    alert_rule_test:
      - eval_time: $(((n - 1) * 500))ms
        alertname: NcclguardNoProgress
        exp_alerts:
$(while read -r r c; do alert "$r" "$c"; done <<<"$waiting")
      - eval_time: $((healthy * 500))ms
        alertname: NcclguardNoProgress
        exp_alerts: []
EOF
    if [ $((healthy * 500)) -lt 2000 ]; then
        fail "no-progress rule on a real hang" "no snapshot 2 s or more into the job while it ran (the last: $healthy)"
    elif out=$(promtool test rules "$H/test.yml" 2>&1); then
        pass "promtool test rules on $n scrapes of a hang, before ncclguard's timeout: no progress on ranks 0, 2, 3 (world comm $comm and $(($(wc -l <<<"$waiting") - 3)) more with ops in flight), never on rank 1; none at $((healthy * 500)) ms, while ops completed"
    else
        fail "no-progress rule on a real hang" "$(head -40 <<<"$out")"
    fi
fi
finish
