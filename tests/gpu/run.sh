#!/usr/bin/env bash
# tests/gpu/run.sh BUILD_DIR: the GPU-only measurements and checks (tests/gpu/README.md).
# Needs the real libcuda.so.1 and libnccl.so.2; exits 2 when no GPU answers.
set -u
B=${1:-build}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu: no GPU here"; exit 2
fi
nvidia-smi -L
"$B/tests/gpu/events_bench" || rc=$?
"$B/bench/overhead" "$(realpath "$B/libncclguard.so")" || rc=$?
exit "${rc:-0}"
