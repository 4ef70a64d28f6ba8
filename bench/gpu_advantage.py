#!/usr/bin/env python3
# gpu_advantage.py — Dr. MAS advantage normalisation on a GPU: libdrmas (drmas_advantage_f32 and
# drmas_advantage_trusted_f32 through ctypes, on torch's current stream, on the same device tensors)
# against the PyTorch composition a PyTorch user would write (bincount / index_add_ per (uid, agent)
# segment in fp64, then (s - mu_k) / (sigma_k + eps)), with a device-to-device copy of the same bytes
# as the bandwidth baseline in the same run (bench/gpu-check.sh's advantage step; issue 17 asks for
# exactly this comparison). Rows as AdvantageBench builds them: 8 trajectories a uid, 1 or 2 turns
# (2 with probability 3/4), solver and verifier interleaved, scores uniform in [0, 1); "grouped" as
# rollouts write them, "random" permuted. Only whole uids are generated (so no agent segment has a
# single row and the composition needs no singleton policy; the script checks it).
# Each path is timed with CUDA events (warm-ups, then the median of --reps); GB/s counts the 20 bytes
# a row must move (uid, traj, agent, score read; advantage written); "% of copy" divides by the copy's
# GB/s. The results of both libdrmas entries are checked against the composition (|a - b| <= 1e-5 +
# 1e-5 |b|); exits 1 if one differs. --cpu runs the same code on CPU tensors and the CPU backend
# (timings of no note, both on every core): how the script is tested where there is no GPU, e.g.
#   /usr/bin/python3 bench/gpu_advantage.py --cpu --lib build/libdrmas.so --sizes 100000,1000000
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

from drmas_ctypes import check, check_abi, open_library, ptr

DRMAS_DEVICE_CPU, DRMAS_DEVICE_CUDA = 0, 1
FROM_AGENT, NUMERATOR_ROW, POOL_TRAJECTORIES, SINGLETON_FALLBACK = 1, 0, 0, 0
EPS = 1e-6
BYTES_PER_ROW = 20


class NormConfig(ctypes.Structure):
    # drmas_norm_config, field for field (checked against the library with drmas_abi_value)
    _fields_ = [("mean_from", ctypes.c_int32), ("std_from", ctypes.c_int32), ("numerator", ctypes.c_int32),
                ("global_pooling", ctypes.c_int32), ("singleton", ctypes.c_int32), ("ddof", ctypes.c_int32),
                ("scale_by_std", ctypes.c_int32), ("reserved", ctypes.c_int32), ("eps", ctypes.c_double)]


def load(path):
    lib = open_library(path)
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    for name in ("drmas_advantage_f32", "drmas_advantage_trusted_f32"):
        f = getattr(lib, name)
        f.restype = i32
        f.argtypes = [i32, ctypes.POINTER(NormConfig), i64, p, p, p, p, i64, i64, i64, p, p, p]
    check_abi(lib, path, "gpu_advantage", "drmas_norm_config", NormConfig,
              {"DRMAS_FROM_AGENT": FROM_AGENT, "DRMAS_NUMERATOR_ROW": NUMERATOR_ROW,
               "DRMAS_POOL_TRAJECTORIES": POOL_TRAJECTORIES, "DRMAS_SINGLETON_FALLBACK": SINGLETON_FALLBACK,
               "DRMAS_DEVICE_CUDA": DRMAS_DEVICE_CUDA})
    return lib


def rows(min_rows, layout, dev, seed=42):
    """Whole uids of 8 trajectories (1 or 2 turns, two agents a turn) until at least min_rows rows."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    # ~28 rows a uid (8 trajectories of 1.75 turns, 2 rows a turn): start there and grow by 1%, so that
    # n is min_rows plus a few uids, not 15% over it
    num_uids = -(-min_rows // 28) + 1
    while True:
        turns = torch.where(torch.rand(num_uids * 8, generator=g) < 0.25, 1, 2)
        if int(turns.sum()) * 2 >= min_rows:
            break
        num_uids = num_uids * 101 // 100 + 1
    per_traj = turns * 2
    t_total = int(turns.numel())
    traj = torch.repeat_interleave(torch.arange(t_total, dtype=torch.int32), per_traj)
    uid = torch.div(traj, 8, rounding_mode="floor").to(torch.int32)
    # within a trajectory: solver, verifier, solver, verifier
    start = torch.cumsum(per_traj, 0) - per_traj
    pos = torch.arange(traj.numel()) - torch.repeat_interleave(start, per_traj)
    agent = (pos % 2).to(torch.int32)
    n = traj.numel()
    score = torch.rand(n, generator=g, dtype=torch.float32)
    if layout == "random":
        perm = torch.randperm(n, generator=g)
        uid, traj, agent, score = uid[perm], traj[perm], agent[perm], score[perm]
    return (score.to(dev).contiguous(), uid.to(dev).contiguous(), traj.to(dev).contiguous(), agent.to(dev).contiguous(),
            num_uids, t_total)


def torch_composition(score, uid, agent, num_uids, num_agents):
    """Dr. MAS as a PyTorch user writes it: fp64 statistics per (uid, agent) segment, two passes."""
    seg = uid.long() * num_agents + agent.long()
    s = score.double()
    nseg = num_uids * num_agents
    count = torch.bincount(seg, minlength=nseg).double()
    mean = torch.zeros(nseg, dtype=torch.float64, device=s.device).index_add_(0, seg, s) / count.clamp(min=1)
    d = s - mean[seg]
    m2 = torch.zeros(nseg, dtype=torch.float64, device=s.device).index_add_(0, seg, d * d)
    std = torch.sqrt(m2 / (count - 1).clamp(min=1))
    return (d / (std[seg] + EPS)).float(), count


def timed(fn, cuda, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lib", required=True, help="libdrmas.so (the CUDA build for the GPU)")
    ap.add_argument("--sizes", default="16777216,67108864", help="comma-separated row counts (at least)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", help="markdown table to write")
    ap.add_argument("--cpu", action="store_true", help="CPU tensors and the CPU backend (a test of the script)")
    args = ap.parse_args()
    lib = load(args.lib)
    cuda = not args.cpu
    if cuda and not torch.cuda.is_available():
        sys.exit("gpu_advantage: torch sees no GPU (use --cpu to test the script on the CPU backend)")
    dev = torch.device("cuda") if cuda else torch.device("cpu")
    device = DRMAS_DEVICE_CUDA if cuda else DRMAS_DEVICE_CPU
    if not cuda:
        # Both on every core, explicitly: PyTorch lowers OpenMP's default thread count of the
        # threads it initialises (to 1 on the 2-core development VM), which libdrmas's default follows.
        threads = os.cpu_count() or 1
        torch.set_num_threads(threads)
        lib.drmas_set_num_threads(threads)
    cfg = NormConfig(FROM_AGENT, FROM_AGENT, NUMERATOR_ROW, POOL_TRAJECTORIES, SINGLETON_FALLBACK, 1, 1, 0, EPS)
    stream = (lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)) if cuda else (lambda: None)
    name = torch.cuda.get_device_name() if cuda else "CPU"
    lines = [f"gpu_advantage.py · {name} · torch {torch.__version__} · median of {args.reps} · GB/s = {BYTES_PER_ROW} B a row "
             f"/ time · copy = a device-to-device copy moving the same bytes (read + written)", "",
             "| rows | layout | path | ms | GB/s | % of copy | vs PyTorch |", "|---:|---|---|---:|---:|---:|---:|"]
    ok = True
    for size in [int(x) for x in args.sizes.split(",")]:
        for layout in ("grouped", "random"):
            score, uid, traj, agent, U, T = rows(size, layout, dev)
            n, K = score.numel(), 2
            ref, count = torch_composition(score, uid, agent, U, K)
            if int(count.min()) < 2:
                sys.exit("gpu_advantage: a single-row agent segment (the composition has no singleton policy)")
            out = torch.empty_like(score)
            src = torch.empty(n * BYTES_PER_ROW // 2, dtype=torch.uint8, device=dev)
            dst = torch.empty_like(src)
            copy_ms = timed(lambda: dst.copy_(src), cuda, args.reps)
            copy_gbs = n * BYTES_PER_ROW / copy_ms / 1e6
            torch_ms = timed(lambda: torch_composition(score, uid, agent, U, K), cuda, args.reps)
            results = [("PyTorch composition", torch_ms)]
            for entry in ("drmas_advantage_f32", "drmas_advantage_trusted_f32"):
                f = getattr(lib, entry)
                call = lambda: check(lib, f(device, ctypes.byref(cfg), n, ptr(score), ptr(uid), ptr(traj), ptr(agent), U, T, K,
                                            ptr(out), None, stream()), entry)
                out.fill_(float("nan"))
                call()
                if cuda:
                    torch.cuda.synchronize()
                bad = ~((out - ref).abs() <= 1e-5 + 1e-5 * ref.abs())
                if bool(bad.any()):
                    i = int(bad.nonzero()[0])
                    print(f"gpu_advantage: {entry}, {layout}, {n} rows: row {i} is {float(out[i])}, PyTorch {float(ref[i])}",
                          file=sys.stderr)
                    ok = False
                results.append((entry, timed(call, cuda, args.reps)))
            results.append(("copy", copy_ms))
            for path, ms in results:
                gbs = n * BYTES_PER_ROW / ms / 1e6
                lines.append(f"| {n:,} | {layout} | {path} | {ms:.3f} | {gbs:.1f} | {100 * gbs / copy_gbs:.0f}% | "
                             f"{torch_ms / ms:.2f}× |")
            del score, uid, traj, agent, ref, count, out, src, dst
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(table)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
