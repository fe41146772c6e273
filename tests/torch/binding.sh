#!/usr/bin/env bash
# A real pip PyTorch under the shim: every NCCL call of libtorch_cuda.so binds to
# the shim when the shim wraps it (and to NCCL exactly when it does not, which
# the shim's start line then names), torch reports the same NCCL version, and a
# CPU training step under the shim gets nothing of ncclguard: no thread, no file,
# no node marker.
source "$(dirname "$0")/lib.sh"

# --- binding: LD_BIND_NOW resolves every reference at load, LD_DEBUG says where ---
d=$TMP/bind
mkdir -p "$d"
LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT=$d/ld LD_PRELOAD=$(preload) \
    "$TORCH_PY" -c 'import torch' >"$d/out" 2>&1
cat "$d"/ld.* 2>/dev/null | grep -F '/libtorch_cuda.so ' | grep -F 'symbol `nccl' |
    sed -E 's/.* to ([^ ]+) \[[0-9]+\]: normal symbol `([A-Za-z0-9_]+).*/\2 \1/' |
    awk '{ n = split($2, p, "/"); print $1, p[n] }' | sort -u >"$d/bound"
wrapped_names >"$d/wrapped"
nm -D --undefined-only "$TORCH_LIB/libtorch_cuda.so" | awk '$2 ~ /^nccl[A-Z]/ { print $2 }' |
    sort -u >"$d/referenced"
awk '$2 == "libncclguard.so" { print $1 }' "$d/bound" >"$d/to_shim"
awk '$2 == "libnccl.so.2" { print $1 }' "$d/bound" >"$d/to_nccl"
should_shim=$(comm -12 "$d/referenced" "$d/wrapped")
if [ -s "$d/referenced" ] && [ "$(cat "$d/to_shim")" = "$should_shim" ] &&
    [ -z "$(comm -12 "$d/to_nccl" "$d/wrapped")" ] &&
    [ "$(sort -u "$d/to_shim" "$d/to_nccl")" = "$(cat "$d/referenced")" ]; then
    pass "libtorch_cuda.so: its $(wc -l <"$d/to_shim") wrapped NCCL references bind to the shim, its $(wc -l <"$d/to_nccl") others to NCCL"
else
    fail "binding" "to shim: $(tr '\n' ' ' <"$d/to_shim"); to NCCL: $(tr '\n' ' ' <"$d/to_nccl"); referenced: $(wc -l <"$d/referenced")"
fi

# --- the same NCCL version with and without the shim ---
plain=$("$TORCH_PY" -c 'import torch; print(torch.cuda.nccl.version())' 2>/dev/null)
shimmed=$(LD_PRELOAD=$(preload) "$TORCH_PY" -c 'import torch; print(torch.cuda.nccl.version())' \
    2>/dev/null)
if [ -n "$plain" ] && [ "$plain" = "$shimmed" ]; then
    pass "torch.cuda.nccl.version() is $plain with and without the shim"
else
    fail "torch.cuda.nccl.version()" "without: '$plain', with: '$shimmed'"
fi

# --- inertness: import torch and train a step on the CPU, with and without the shim ---
# The process must end the same: the same threads and open files, no node marker,
# no file in its working directory, no line of ncclguard's.
step() { # DIR [PRELOAD]: runs the step in DIR, its report in DIR/out
    mkdir -p "$1"
    (cd "$1" && LD_PRELOAD=${2:-} "$TORCH_PY" - >out 2>&1 <<'PY'
import os
import torch

model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 64), torch.randn(32, 8)
for _ in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
names = sorted(open(f"/proc/self/task/{t}/comm").read().strip()
               for t in os.listdir("/proc/self/task"))
files = []
for f in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{f}")
    except OSError:
        continue  # the listing's own descriptor
    files.append(target.split(":")[0] if ":[" in target else os.path.basename(target))
print("threads", names)
print("files", sorted(files))
print("marker", os.path.exists(f"/dev/shm/ncclguard-{os.getuid()}/{os.getpid()}"))
print("mapped", "libncclguard" in open("/proc/self/maps").read())
PY
    )
}
step "$TMP/inert-plain"
step "$TMP/inert" "$(preload)"
if grep -qx "mapped True" "$TMP/inert/out" && grep -qx "marker False" "$TMP/inert/out" &&
    [ "$(grep -v '^mapped' "$TMP/inert/out")" = "$(grep -v '^mapped' "$TMP/inert-plain/out")" ] &&
    [ "$(ls -A "$TMP/inert")" = out ]; then
    pass "import torch and a CPU training step: the same threads and files with the shim, no marker, no line"
else
    fail "inertness" "with: $(tr '\n' ';' <"$TMP/inert/out" | cut -c1-300) without: $(tr '\n' ';' <"$TMP/inert-plain/out" | cut -c1-300) dir: $(ls -A "$TMP/inert" | tr '\n' ' ')"
fi
finish
