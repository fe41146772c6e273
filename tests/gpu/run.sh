#!/usr/bin/env bash
# tests/gpu/run.sh [BUILD_DIR [PART...]]: the GPU-only measurements and checks
# (tests/gpu/README.md). PART is events (build/tests/gpu/events_bench), overhead
# (bench/overhead against the real driver and NCCL) or torch (tests/gpu/torch.sh, a
# PyTorch job with ProcessGroupNCCL under the shim); all three, in that order, when
# none is named. Needs the real libcuda.so.1 and libnccl.so.2; exits 2 when no GPU
# answers, 64 on a wrong argument, 1 when a part failed.
set -u
usage() { echo "usage: tests/gpu/run.sh [BUILD_DIR [events|overhead|torch]...]" >&2; exit 64; }
B=${1:-build}
[ $# -gt 0 ] && shift
case $B in -*) usage ;; esac
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(events overhead torch)
for p in "${parts[@]}"; do
    case $p in events | overhead | torch) ;; *) echo "tests/gpu: no part '$p'" >&2; usage ;; esac
done
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu: no GPU here"; exit 2
fi
nvidia-smi -L
for p in "${parts[@]}"; do
    case $p in
    events) "$B/tests/gpu/events_bench" || rc=$? ;;
    overhead) "$B/bench/overhead" "$(realpath "$B/libncclguard.so")" || rc=$? ;;
    torch) B=$B "$(dirname "$0")/torch.sh" || rc=$? ;;
    esac
done
exit "${rc:-0}"
