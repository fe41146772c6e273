#!/usr/bin/env bash
# Start-up cost of the shim in a real PyTorch process: `import torch` with and
# without the library preloaded, interleaved, N runs each (default 7); prints
# each median and their ratio. Needs the real-PyTorch environment
# (scripts/install-deps --torch); says so and does nothing without it.
# Usage: bench/torch_startup.sh BUILD_DIR [N]
set -u
b=${1:-build} n=${2:-7}
py=${NCCLGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard}/torch-venv/bin/python
if [ ! -x "$py" ]; then
    echo "torch_startup: no real-PyTorch environment (scripts/install-deps --torch); not measured"
    exit 0
fi
shim=$(cd "$b" && pwd)/libncclguard.so
run() { # PRELOAD: wall ms of one `import torch`
    local t0 t1
    t0=$(date +%s%N)
    LD_PRELOAD=$1 "$py" -c 'import torch' >/dev/null 2>&1
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
run "" >/dev/null # the page cache warm for both
plain=() shimmed=()
for _ in $(seq "$n"); do
    plain+=("$(run "")")
    shimmed+=("$(run "$shim")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
p=$(median "${plain[@]}") s=$(median "${shimmed[@]}")
echo "torch_startup: import torch, median of $n: ${p} ms without the shim, ${s} ms with it" \
    "(ratio $(awk -v a="$s" -v b="$p" 'BEGIN { printf "%.3f", a / b }'))"
