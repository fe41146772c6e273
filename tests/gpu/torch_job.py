"""A PyTorch job with ProcessGroupNCCL on the GPUs, one rank per GPU (tests/gpu/torch.sh).

Started by torchrun (RANK, LOCAL_RANK and WORLD_SIZE from the environment), one
rank per device: NCCL refuses two ranks of a communicator on one GPU, so a
machine with one GPU runs world size 1, which still goes through
ProcessGroupNCCL, NCCL's kernels, and the shim's wrappers and CUDA events.

    torch_job.py --out DIR [--steps N] [--hang none|gpu|host] [--hang-step K]
                 [--dumps DIR] [--hold S] [--cpu]

Each step all-reduces, all-gathers and broadcasts tensors whose results are
known (small integers in float32, exact whatever the order of the sums), checks
them on the device, and writes one line per op to DIR/result-r<rank>.txt: the
step, the op and the SHA-256 of the result's bytes, so that a run under the shim
can be compared byte for byte with a run without it. Exits 1 when a result is
wrong.

--hang, at step K (after K steps that completed):
  gpu   rank 0 queues a kernel that spins for S seconds (torch.cuda._sleep,
        calibrated first) on its current stream before the all_reduce:
        ProcessGroupNCCL makes its NCCL stream wait for the current stream, so
        the op is enqueued but its GPU never starts it (the shim's verdict:
        gpu_not_started on rank 0). Any world size.
  host  rank 0 stops in a Python function (load_batch) before the all_reduce,
        while the others wait in it (the verdict: rank 0 missing; rank 0's dump
        comes from the cross-rank trigger). World size 2 or more.
--cpu runs the same steps with Gloo on the CPU: a check of the job itself on a
machine without a GPU (the shim sees no NCCL call there); not with --hang gpu.
Then, for --hang, every rank waits until DIR (--dumps) holds one dump per rank that belongs
to an incident, and ends with os._exit(0) (no teardown: the dumps stay as the
timeout wrote them), or with status 3 after 120 s.
"""
import argparse
import glob
import hashlib
import os
import sys
import time


def parse(argv):
    p = argparse.ArgumentParser(prog="torch_job.py")
    p.add_argument("--out", required=True, help="folder for result-r<rank>.txt")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--hang", choices=("none", "gpu", "host"), default="none")
    p.add_argument("--hang-step", type=int, default=4)
    p.add_argument("--dumps", help="the shim's dump folder, watched when the job hangs")
    p.add_argument("--hold", type=float, default=180.0,
                   help="seconds the --hang gpu kernel spins")
    p.add_argument("--cpu", action="store_true", help="Gloo on the CPU (checks the job itself)")
    a = p.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.steps < 1 or not 0 <= a.hang_step < a.steps:
        p.error("need --steps >= 1 and 0 <= --hang-step < --steps")
    if a.hang != "none" and not a.dumps:
        p.error("--hang needs --dumps")
    if a.hang == "host" and world < 2:
        p.error("--hang host needs a peer that waits: world size 2 or more (this is %d)" % world)
    if a.hang == "gpu" and a.cpu:
        p.error("--hang gpu needs a GPU")
    return a


def digest(t):
    return hashlib.sha256(t.cpu().numpy().tobytes()).hexdigest()[:16]


def dumps_done(folder, world):
    n = 0
    for f in glob.glob(os.path.join(folder, "ncclguard-r*.json")):
        try:
            with open(f) as fh:
                n += '"incident":"' in fh.read()
        except OSError:
            pass
    return n >= world


def wait_for_dumps(folder, world, linger=0):
    deadline = time.monotonic() + 120
    while not dumps_done(folder, world):
        if time.monotonic() > deadline:
            print("torch_job: no dump of every rank after 120 s", flush=True)
            os._exit(3)
        time.sleep(0.2)
    print("torch_job: every rank dumped", flush=True)
    time.sleep(linger)  # rank 0 last: a peer never sees it gone before it ends
    os._exit(0)


def load_batch(folder, world):  # --hang host: rank 0 stops here
    wait_for_dumps(folder, world, linger=1.0)


def spin_cycles(torch, seconds):
    """Clock cycles of torch.cuda._sleep that take about SECONDS on this GPU."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe = 50_000_000
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    return int(probe / max(start.elapsed_time(end), 1e-3) * 1000.0 * seconds)


def main(argv):
    a = parse(argv)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    backend = dist.get_backend()
    assert backend == ("gloo" if a.cpu else "nccl"), backend
    cycles = spin_cycles(torch, a.hold) if a.hang == "gpu" and rank == 0 else 0
    lines, bad = [], 0

    def expect(step, what, got, want):
        nonlocal bad
        if not torch.equal(got, want):
            bad += 1
            print("torch_job: rank %d step %d %s: wrong result" % (rank, step, what), flush=True)
        lines.append("%d %s %s" % (step, what, digest(got)))

    base = torch.arange(1024, dtype=torch.float32, device=dev)
    for step in range(a.steps):
        x = base * (rank + 1) + step
        if step == a.hang_step and rank == 0:
            if a.hang == "gpu":
                torch.cuda._sleep(cycles)  # the current stream is busy for --hold s
            elif a.hang == "host":
                load_batch(a.dumps, world)
        if step == a.hang_step and a.hang != "none":
            # async_op: NCCL's all_reduce returns once enqueued either way; Gloo's
            # (--cpu) would block the host here
            dist.all_reduce(x, async_op=True)
            wait_for_dumps(a.dumps, world, linger=1.0 if rank == 0 else 0)
        dist.all_reduce(x)
        expect(step, "all_reduce", x, base * (world * (world + 1) // 2) + step * world)

        y = torch.full((256,), float(rank * 10 + step), device=dev)
        parts = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(parts, y)
        for r, part in enumerate(parts):
            expect(step, "all_gather[%d]" % r, part, torch.full_like(y, float(r * 10 + step)))

        src = step % world
        b = torch.full((512,), float(step * 100 + rank), device=dev)
        dist.broadcast(b, src=src)
        expect(step, "broadcast", b, torch.full_like(b, float(step * 100 + src)))
    if not a.cpu:
        torch.cuda.synchronize()
    dist.destroy_process_group()
    with open(os.path.join(a.out, "result-r%d.txt" % rank), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("torch_job: rank %d of %d: %d steps, %d results checked, %d wrong (torch %s, %s %s)"
          % (rank, world, a.steps, len(lines), bad, torch.__version__, backend,
             ".".join(map(str, torch.cuda.nccl.version())) if not a.cpu else "on the CPU"),
          flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
