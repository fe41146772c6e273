#!/usr/bin/env bash
# NCCL's RAS view in the dump (evidence/ras.h), against a stand-in RAS service
# (tests/e2e/ras_server.py): asked once per incident and only when
# NCCLGUARD_RAS=1, by the rank that reports it, after its dump; the answer comes
# in a second dump of that rank (reason "ras"); a service that is not there, or
# gives one line and a dump that says why.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "ras" "harness not built"; finish; exit
fi
# the jobs (hang, lib.sh) end without waiting for a verdict
export NCCLGUARD_VERDICT_WAIT_S=0
# serve NAME MODE: a stand-in service in $TMP/NAME; sets $port and $server
serve() {
    mkdir -p "$TMP/$1"
    python3 "$ROOT/tests/e2e/ras_server.py" "$TMP/$1/port" "$TMP/$1/log" "$2" &
    server=$!
    wait_for 30 test -s "$TMP/$1/port"
    port=$(cat "$TMP/$1/port")
}
# ras_dumped NAME: the shell command that is true once rank 0 wrote its "ras" dump
# and rank 1 its dump of the incident
ras_dumped() {
    echo "grep -qs '\"reason\":\"ras\"' $TMP/$1/dumps/ncclguard-r0-*.json &&
        ls $TMP/$1/dumps/ncclguard-r1-*.json >/dev/null"
}
# ras_of NAME RANK: the reason and the ras member of that rank's dump, as JSON
ras_of() {
    python3 -c 'import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/ncclguard-r" + sys.argv[2] + "-*.json")[0]))
print(json.dumps([d["reason"], d["ras"]]))' "$TMP/$1/dumps" "$2"
}

serve json json
hang json 2 "$(ras_dumped json)" NCCLGUARD_RAS=1 NCCL_RAS_ADDR=127.0.0.1:$port
kill $server
r0=$(ras_of json 0) r1=$(ras_of json 1)
cmds=$(tr '\n' '|' <"$TMP/json/log")
if [ "$cmds" = "connection|CLIENT PROTOCOL 2|SET FORMAT json|VERBOSE STATUS|" ] &&
    python3 - "$r0" "$r1" <<'PY'
import json, sys
reason, ras = json.loads(sys.argv[1])
assert reason == "ras" and ras["format"] == "json" and ras["error"] is None, ras
assert json.loads(ras["status"])["communicators"][0]["missing_ranks"] == [1], ras
assert ras["incident"].endswith("-r0@" + ras["incident"].split("@")[1]), ras
assert json.loads(sys.argv[2])[1] is None, sys.argv[2]
PY
then
    pass "NCCLGUARD_RAS=1: one query (handshake, json, VERBOSE STATUS) by the reporting rank, its answer in that rank's next dump"
else
    fail "RAS query" "commands: $cmds; rank 0: $r0; rank 1: $r1"; tail -n 8 "$TMP/json/out"
fi

serve text text
hang text 2 "$(ras_dumped text)" NCCLGUARD_RAS=1 NCCL_RAS_ADDR=127.0.0.1:$port
kill $server
if python3 -c 'import json, sys; r = json.loads(sys.argv[1])[1]
assert r["format"] == "text" and r["status"].startswith("Communicators"), r' "$(ras_of text 0)"; then
    pass "an NCCL before 2.28.7 refuses JSON: the text answer is kept, labelled text"
else
    fail "RAS text fallback" "$(ras_of text 0)"
fi

serve off json
# both dumps, then 2 s: the time a query would have had
hang off 2 "[ \$(ls $TMP/off/dumps/*.json 2>/dev/null | wc -l) -ge 2 ] && sleep 2" \
    NCCL_RAS_ADDR=127.0.0.1:$port
kill $server
if [ ! -s "$TMP/off/log" ] && [ "$(ras_of off 0)" = '["timeout", null]' ]; then
    pass "NCCLGUARD_RAS unset: the service is never contacted"
else
    fail "RAS off by default" "$(cat "$TMP/off/log" 2>/dev/null) $(ras_of off 0)"
fi

# a port where nothing listens: the stand-in's, now closed
hang absent 2 "$(ras_dumped absent)" NCCLGUARD_RAS=1 NCCL_RAS_ADDR=127.0.0.1:$port
ok=1
for name in absent; do
    python3 -c 'import json, sys; reason, r = json.loads(sys.argv[1])
assert reason == "ras" and r["format"] == "none" and r["error"], r' "$(ras_of $name 0)" || ok=0
    [ "$(grep -c 'NCCL RAS query: ' "$TMP/$name/out")" = 1 ] || ok=0
done
if [ $ok = 1 ]; then
    pass "a service that is not there: one line, and the dump says why"
else
    fail "RAS failure" "$(ras_of absent 0)"; grep 'RAS' "$TMP/absent/out"
fi
dumps_sane
finish
