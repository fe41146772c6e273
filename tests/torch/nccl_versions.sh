#!/usr/bin/env bash
# Every real NCCL that scripts/install-torch unpacked (tests/torch/nccl-versions),
# probed with and without the shim: what answers without a GPU (the version,
# the error strings, the last error, a unique id, the failure of a
# communicator's creation) must be the same, and the shim's start line must name
# exactly the nccl* entry points of that library that nccl_api.def lacks.
source "$(dirname "$0")/lib.sh"
PROBE=$E2E/nccl_probe
wrapped_names >"$TMP/wrapped"
while read -r v; do
    case "$v" in ''|'#'*) continue ;; esac
    lib=$TORCH_CACHE/nccl/$v
    if [ ! -f "$lib/libnccl.so.2" ]; then skip "NCCL $v" "not in $lib (scripts/install-torch)"; continue; fi
    d=$TMP/$v
    mkdir -p "$d"
    (cd "$d" && LD_LIBRARY_PATH=$lib "$PROBE" >plain 2>plain.err)
    (cd "$d" && LD_LIBRARY_PATH=$lib LD_PRELOAD=$(preload) "$PROBE" >shim 2>shim.err)
    # ncclGetUniqueId is random; the probe prints only whether it is non-zero
    if [ -s "$d/plain" ] && cmp -s "$d/plain" "$d/shim"; then
        pass "NCCL $v: the same $(wc -l <"$d/plain") answers with and without the shim"
    else
        fail "NCCL $v differential" "$(diff "$d/plain" "$d/shim" | head -n 6 | tr '\n' ';')"
    fi
    nm -D --defined-only "$lib/libnccl.so.2" | awk '$2 ~ /^[TW]$/ && $3 ~ /^nccl[A-Z]/ { print $3 }' |
        sort -u | comm -23 - "$TMP/wrapped" >"$d/expected"
    sed -n 's/.*their calls reach NCCL untracked[^:]*: //p' "$d/shim.err" | tr -d ' ' | tr ',' '\n' |
        grep -v '^$' | sort -u >"$d/said"
    if cmp -s "$d/expected" "$d/said"; then
        pass "NCCL $v: the start line names its $(wc -l <"$d/expected") entry points the shim does not follow"
    else
        fail "NCCL $v unfollowed line" "expected: $(tr '\n' ' ' <"$d/expected") said: $(tr '\n' ' ' <"$d/said")"
    fi
done <"$ROOT/tests/torch/nccl-versions"
finish
