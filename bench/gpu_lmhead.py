#!/usr/bin/env python3
# gpu_lmhead.py — the fused LM head against PyTorch's materialised path on a GPU (bench/gpu-check.sh's
# lmhead step; the GPU machines have python3 + PyTorch but no JDK). One update of the LM head in bf16:
#   materialised: logits = h W^T / T, log_softmax in fp32, gather, entropy, the clipped PPO loss with
#                 the k3 KL and the entropy bonus, autograd backward (dL/dh, dL/dW);
#   fused:        per chunk of tokens, z = h_c W^T / T (a bf16 product), drmas_lmhead_chunk_bf16 over z
#                 through ctypes (log-sum-exp, log-probs, entropy, the same loss, dL/dz written over z) on
#                 torch's current stream, then dL/dh_c = dz W / T and dL/dW += dz^T h_c / T;
#   fused async:  the same with drmas_lmhead_chunk_async_bf16: the row offsets checked once on the host,
#                 each chunk's data errors left on the device and read once after the last chunk (no
#                 wait a chunk; what the trainer calls);
#   products:     the same three products per chunk without the kernel (the limit).
# Each is timed with CUDA events (warm-ups, then the median of --reps) with torch.cuda.max_memory_allocated
# above what the inputs hold (libdrmas's own small scratch, from cudaMallocAsync, is not counted), and the fused loss, log-probs, dL/dh and dL/dW are checked against the
# materialised ones within bf16 tolerance. Writes a markdown table to --out; exits 1 if the check fails.
# --cpu runs the same code on the CPU backend and CPU tensors (no timing of note, no memory figures):
# how the ctypes signatures are tested where there is no GPU (e.g. --cpu --small against a CPU libdrmas).
import argparse
import ctypes
import math
import os
import statistics
import sys
import time

import torch

from drmas_ctypes import check, check_abi, open_library, ptr

DRMAS_DEVICE_CPU, DRMAS_DEVICE_CUDA = 0, 1
DRMAS_KL_K3 = 3


class LmHeadConfig(ctypes.Structure):
    # drmas_lmhead_config, field for field (checked against the library with drmas_abi_value)
    _fields_ = [("clip_low", ctypes.c_double), ("clip_high", ctypes.c_double), ("dual_clip", ctypes.c_double),
                ("kl_coef", ctypes.c_double), ("normalizer", ctypes.c_double), ("entropy_coef", ctypes.c_double),
                ("kl_type", ctypes.c_int32), ("per_row_mean", ctypes.c_int32)]


def load(path):
    lib = open_library(path)
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    lib.drmas_lmhead_chunk_bf16.restype = i32
    lib.drmas_lmhead_chunk_bf16.argtypes = [i32, ctypes.POINTER(LmHeadConfig), i64, p, i64, i64, i64, i64, p, p, p, p, p, p, p,
                                            p, p, p]
    lib.drmas_lmhead_logprobs_bf16.restype = i32
    lib.drmas_lmhead_logprobs_bf16.argtypes = [i32, i64, i64, p, p, p, p, p]
    lib.drmas_lmhead_chunk_async_bf16.restype = i32
    lib.drmas_lmhead_chunk_async_bf16.argtypes = [i32, ctypes.POINTER(LmHeadConfig), i64, p, p, i64, i64, i64, i64, p, p, p, p, p,
                                                  p, p, p, p, p, p]
    lib.drmas_lmhead_logprobs_async_bf16.restype = i32
    lib.drmas_lmhead_logprobs_async_bf16.argtypes = [i32, i64, i64, p, p, p, p, p, p]
    check_abi(lib, path, "gpu_lmhead", "drmas_lmhead_config", LmHeadConfig,
              {"DRMAS_LMHEAD_SUMS": 9, "DRMAS_LOSS_LOSS": 0, "DRMAS_LMHEAD_ENTROPY": 8, "DRMAS_KL_K3": DRMAS_KL_K3,
               "DRMAS_DEVICE_CUDA": DRMAS_DEVICE_CUDA})
    return lib


class Problem:
    """One micro-batch: rows of response tokens (a few masked), per-row advantages, old and reference log-probs."""

    def __init__(self, args, dev):
        g = torch.Generator(device="cpu").manual_seed(1234)
        gd = torch.Generator(device=dev).manual_seed(1234)  # the large tensors are drawn where they live
        n, hdim, v = args.tokens, args.hidden, args.vocab
        self.n, self.h_dim, self.v, self.rows = n, hdim, v, args.rows
        self.inv_t = 1.0 / args.temperature
        # h and W at the scale of a trained model's last hidden state and head (logits of a few units)
        self.h = torch.randn(n, hdim, generator=gd, device=dev).to(torch.bfloat16)
        self.w = (torch.randn(v, hdim, generator=gd, device=dev) * (2.0 / math.sqrt(hdim))).to(torch.bfloat16)
        self.y = torch.randint(0, v, (n,), generator=g, dtype=torch.int64).to(dev)
        cuts = sorted(torch.randperm(n - 1, generator=g)[: self.rows - 1].add(1).tolist())
        self.off = torch.tensor([0] + cuts + [n], dtype=torch.int64)
        self.mask = (torch.rand(n, generator=g) > 0.03).to(torch.uint8)
        self.adv_row = torch.randn(self.rows, generator=g).float()
        row_of = torch.repeat_interleave(torch.arange(self.rows), self.off[1:] - self.off[:-1])
        self.adv_tok = self.adv_row[row_of]
        self.noise_old = (torch.randn(n, generator=g) * 0.1).float()
        self.noise_ref = (torch.randn(n, generator=g) * 0.2).float()
        self.off, self.mask, self.adv_row, self.adv_tok = (x.to(dev) for x in (self.off, self.mask, self.adv_row, self.adv_tok))
        self.valid = int(self.mask.sum().item())
        self.cfg = LmHeadConfig(clip_low=0.2, clip_high=0.28, dual_clip=3.0, kl_coef=0.01, normalizer=float(self.valid),
                                entropy_coef=args.entropy_coef / self.valid, kl_type=DRMAS_KL_K3, per_row_mean=0)
        self.old = None
        self.ref = None


def materialised(p, h, w):
    """The loss of the fused kernel's formula through PyTorch's ops and autograd (token-mean, k3 KL)."""
    logits = (h @ w.t()) * p.inv_t if p.inv_t != 1.0 else h @ w.t()
    lp_all = torch.log_softmax(logits.float(), dim=-1)
    logp = lp_all.gather(1, p.y[:, None]).squeeze(1)
    ent = -(lp_all.exp() * lp_all).sum(-1)
    m = p.mask.bool()
    c = p.cfg
    d = logp - p.old
    ratio = torch.exp(d.clamp(-20, 20))
    a = p.adv_tok
    pg = torch.maximum(-a * ratio, -a * ratio.clamp(1 - c.clip_low, 1 + c.clip_high))
    pg = torch.where(a < 0, torch.minimum(pg, -a * c.dual_clip), pg)
    dk = (p.ref - logp).clamp(-20, 20)
    kl = (torch.exp(dk) - dk - 1).clamp(-10, 10)
    loss = ((pg + c.kl_coef * kl) * m).sum() / c.normalizer - c.entropy_coef * (ent * m).sum()
    return loss, logp, ent


NONE = (1 << 64) - 1  # an async call's "no error" (UINT64_MAX)


class Fused:
    def __init__(self, lib, p, device, chunk):
        self.lib, self.p, self.device, self.chunk = lib, p, device, chunk
        self.chunks = list(range(0, p.n, chunk))
        self.host_off = p.off.cpu().contiguous()  # the async calls' host copy of the row offsets

    def errors(self, k, dev):
        """k chunks' async error pairs (uint64 as int64: UINT64_MAX reads -1), one tensor, in the other arrays' memory."""
        return torch.empty(k, 2, dtype=torch.int64, device=dev)

    def raise_errors(self, errs, what):
        """The one read of the async calls' errors after the last chunk: a ValueError naming the first chunk with one."""
        e = errs.cpu()
        bad = (e != -1).any(1).nonzero()
        if len(bad):
            k = int(bad[0])
            t, z = (int(x) & NONE for x in e[k])
            raise ValueError(f"{what}: chunk {k} (tokens from {self.chunks[k]}): first bad target at {t if t != NONE else '-'}, "
                             f"first non-finite logit at flat index {z if z != NONE else '-'}")

    def stream(self):
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream) if self.device == DRMAS_DEVICE_CUDA else None

    def logprobs(self, h, w):
        """Forward only (the old/reference log-prob passes): chunked products and drmas_lmhead_logprobs_bf16."""
        p = self.p
        logp = torch.empty(p.n, dtype=torch.float32, device=h.device)
        for c0 in self.chunks:
            n = min(self.chunk, p.n - c0)
            z = torch.mm(h[c0:c0 + n], w.t())
            if p.inv_t != 1.0:
                z.mul_(p.inv_t)
            check(self.lib, self.lib.drmas_lmhead_logprobs_bf16(self.device, n, p.v, ptr(z), ptr(p.y[c0:c0 + n]),
                                                                 ptr(logp[c0:c0 + n]), None, self.stream()), "drmas_lmhead_logprobs_bf16")
        return logp

    def logprobs_async(self, h, w):
        """logprobs() through drmas_lmhead_logprobs_async_bf16: the errors read once, after the last chunk."""
        p = self.p
        logp = torch.empty(p.n, dtype=torch.float32, device=h.device)
        errs = self.errors(len(self.chunks), h.device)
        for k, c0 in enumerate(self.chunks):
            n = min(self.chunk, p.n - c0)
            z = torch.mm(h[c0:c0 + n], w.t())
            if p.inv_t != 1.0:
                z.mul_(p.inv_t)
            check(self.lib, self.lib.drmas_lmhead_logprobs_async_bf16(self.device, n, p.v, ptr(z), ptr(p.y[c0:c0 + n]),
                                                                       ptr(logp[c0:c0 + n]), None, ptr(errs[k]), self.stream()),
                  "drmas_lmhead_logprobs_async_bf16")
        self.raise_errors(errs, "drmas_lmhead_logprobs_async_bf16")
        return logp

    def update(self, h, w, with_kernel=True, use_async=False):
        """Loss, log-probs, entropies, dL/dh and dL/dW (bf16, accumulated over chunks) of one update."""
        p = self.p
        dev = h.device
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros_like(w)
        logp = torch.empty(p.n, dtype=torch.float32, device=dev)
        ent = torch.empty(p.n, dtype=torch.float32, device=dev)
        sums = torch.zeros(len(self.chunks), 9, dtype=torch.float64, device=dev)
        errs = self.errors(len(self.chunks), dev) if use_async else None
        for k, c0 in enumerate(self.chunks):
            n = min(self.chunk, p.n - c0)
            hc = h[c0:c0 + n]
            z = torch.mm(hc, w.t())
            if p.inv_t != 1.0:
                z.mul_(p.inv_t)
            if with_kernel and use_async:
                st = self.lib.drmas_lmhead_chunk_async_bf16(self.device, ctypes.byref(p.cfg), p.rows, ptr(self.host_off), ptr(p.off),
                                                            p.n, c0, n, p.v, ptr(z), ptr(p.y), ptr(p.old), ptr(p.adv_row),
                                                            ptr(p.ref), ptr(p.mask), ptr(logp[c0:c0 + n]), ptr(ent[c0:c0 + n]),
                                                            ptr(sums[k]), ptr(errs[k]), self.stream())
                check(self.lib, st, "drmas_lmhead_chunk_async_bf16")
            elif with_kernel:
                st = self.lib.drmas_lmhead_chunk_bf16(self.device, ctypes.byref(p.cfg), p.rows, ptr(p.off), p.n, c0, n, p.v, ptr(z),
                                                      ptr(p.y), ptr(p.old), ptr(p.adv_row), ptr(p.ref), ptr(p.mask),
                                                      ptr(logp[c0:c0 + n]), ptr(ent[c0:c0 + n]), ptr(sums[k]), self.stream())
                check(self.lib, st, "drmas_lmhead_chunk_bf16")
            torch.mm(z, w, out=grad_h[c0:c0 + n])
            if p.inv_t != 1.0:
                grad_h[c0:c0 + n].mul_(p.inv_t)
            grad_w.addmm_(z.t(), hc, alpha=p.inv_t)
        if errs is not None:
            self.raise_errors(errs, "drmas_lmhead_chunk_async_bf16")
        tot = sums.sum(0)
        loss = tot[0] - p.cfg.entropy_coef * tot[8]
        return loss, logp, ent, grad_h, grad_w


def timed(fn, device, warmup, reps, reset=None):
    """Median wall time (ms) of fn() and the peak memory it allocates above what was live before (bytes).
    The previous rep's results are dropped, and reset() run, before each rep's baseline: otherwise a path
    that frees its previous results inside fn (the materialised one's .grad) would count them in the
    baseline and reuse their memory, and its peak would read low by their size."""
    cuda = device == DRMAS_DEVICE_CUDA
    for _ in range(warmup):
        fn()
    times, peaks = [], []
    out = None
    for _ in range(reps):
        out = None
        if reset is not None:
            reset()
        if cuda:
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
            peaks.append(torch.cuda.max_memory_allocated() - base)
        else:
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e3)
        del out
    return statistics.median(times), (max(peaks) if peaks else None)


def rel_err(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lib", default="build-gpu/libdrmas.so", help="libdrmas.so to load")
    ap.add_argument("--cpu", action="store_true", help="CPU backend and CPU tensors (tests the bindings without a GPU)")
    ap.add_argument("--small", action="store_true", help="tiny shapes: V 1031, H 64, N 300, chunk 64")
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--hidden", type=int, default=2560)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--rows", type=int, default=32, help="responses in the micro-batch")
    ap.add_argument("--chunk", type=int, default=2048, help="tokens per chunk of the fused pass")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--entropy-coef", type=float, default=0.001, help="the PPO entropy bonus (per token mean)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None, help="markdown file for the table (default: stdout only)")
    args = ap.parse_args()
    if args.small:
        args.vocab, args.hidden, args.tokens, args.chunk, args.rows = 1031, 64, 300, 64, 7

    lib = load(args.lib)
    if args.cpu:
        device, dev = DRMAS_DEVICE_CPU, torch.device("cpu")
        lib.drmas_set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    else:
        if not torch.cuda.is_available():
            sys.exit("gpu_lmhead: torch sees no CUDA device (use --cpu to test on the CPU)")
        if not lib.drmas_cuda_available():
            sys.exit(f"gpu_lmhead: {args.lib} has no usable CUDA device: {lib.drmas_last_error().decode()}")
        device, dev = DRMAS_DEVICE_CUDA, torch.device("cuda")
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False

    p = Problem(args, dev)
    fused = Fused(lib, p, device, args.chunk)
    # old and reference log-probs near the current ones (ratios near 1, some clipped), from the fused forward
    with torch.no_grad():
        lp0 = fused.logprobs(p.h, p.w)
    p.old = (lp0 + p.noise_old.to(dev)).contiguous()
    p.ref = (lp0 + p.noise_ref.to(dev)).contiguous()

    h_leaf = p.h.clone().requires_grad_(True)
    w_leaf = p.w.clone().requires_grad_(True)

    def run_materialised():
        h_leaf.grad = None
        w_leaf.grad = None
        loss, logp, ent = materialised(p, h_leaf, w_leaf)
        loss.backward()
        return loss.detach(), logp.detach(), ent.detach(), h_leaf.grad, w_leaf.grad

    def run_fused():
        with torch.no_grad():
            return fused.update(p.h, p.w)

    def run_fused_async():
        with torch.no_grad():
            return fused.update(p.h, p.w, use_async=True)

    def run_products():
        with torch.no_grad():
            return fused.update(p.h, p.w, with_kernel=False)

    # correctness first (one run of each), then the timings
    m_loss, m_logp, m_ent, m_gh, m_gw = run_materialised()
    f_loss, f_logp, f_ent, f_gh, f_gw = run_fused()
    a_loss, a_logp, a_ent, a_gh, a_gw = run_fused_async()
    with torch.no_grad():
        a_lp0 = fused.logprobs_async(p.h, p.w)
    # the async calls give bit for bit the synchronising ones' results (drmas.h): compared exactly
    same_async = (a_loss.item() == f_loss.item() and torch.equal(a_logp, f_logp) and torch.equal(a_ent, f_ent)
                  and torch.equal(a_gh, f_gh) and torch.equal(a_gw, f_gw) and torch.equal(a_lp0, lp0))
    del a_loss, a_logp, a_ent, a_gh, a_gw, a_lp0
    valid = p.mask.bool()
    # The two paths' bf16 logits come from different products (chunks vs one [N, V] product), whose fp32
    # sums may round to neighbouring bf16 values now and then: a log-prob may then differ by a bf16 step of
    # its logit (~0.03 at |z| = 8), so the per-token checks bound the mean and allow a step or two at most.
    d_lp = (f_logp - m_logp)[valid].abs()
    d_ent = (f_ent - m_ent)[valid].abs()
    checks = {
        "loss (relative)": abs(f_loss.item() - m_loss.item()) / max(abs(m_loss.item()), 1e-12),
        "forward logp vs update logp (max abs)": (lp0 - f_logp)[valid].abs().max().item(),
        "logp (mean abs)": d_lp.mean().item(),
        "logp (max abs)": d_lp.max().item(),
        "entropy (mean abs)": d_ent.mean().item(),
        "entropy (max abs)": d_ent.max().item(),
        "dL/dh (relative norm)": rel_err(f_gh, m_gh),
        "dL/dW (relative norm)": rel_err(f_gw, m_gw),
    }
    limits = {"loss (relative)": 1e-3, "forward logp vs update logp (max abs)": 1e-4, "logp (mean abs)": 2e-4,
              "logp (max abs)": 0.15, "entropy (mean abs)": 2e-4, "entropy (max abs)": 0.05,
              "dL/dh (relative norm)": 2e-2, "dL/dW (relative norm)": 2e-2}
    ok = all(checks[k] <= limits[k] for k in checks) and same_async
    del m_loss, m_logp, m_ent, m_gh, m_gw, f_loss, f_logp, f_ent, f_gh, f_gw
    h_leaf.grad = None
    w_leaf.grad = None

    def clear_grads():
        h_leaf.grad = None
        w_leaf.grad = None

    t_m, mem_m = timed(run_materialised, device, args.warmup, args.reps, reset=clear_grads)
    h_leaf.grad = None
    w_leaf.grad = None
    t_f, mem_f = timed(run_fused, device, args.warmup, args.reps)
    t_a, mem_a = timed(run_fused_async, device, args.warmup, args.reps)
    t_p, mem_p = timed(run_products, device, args.warmup, args.reps)

    gib = lambda b: "n/a" if b is None else f"{b / 2**30:.2f}"
    where = torch.cuda.get_device_name() if device == DRMAS_DEVICE_CUDA else "CPU"
    lines = [
        f"LM head update, bf16, V = {p.v:,}, H = {p.h_dim}, N = {p.n:,} tokens ({p.valid:,} valid) in {p.rows} rows, "
        f"chunk {args.chunk}, T = {args.temperature}, on {where} (torch {torch.__version__}); "
        f"median of {args.reps} after {args.warmup} warm-up",
        "",
        "| path | time (ms) | peak memory above the inputs (GiB) |",
        "|---|---:|---:|",
        f"| materialised (PyTorch: logits, log_softmax, autograd) | {t_m:.1f} | {gib(mem_m)} |",
        f"| fused (chunks + drmas_lmhead_chunk_bf16) | {t_f:.1f} | {gib(mem_f)} |",
        f"| fused async (chunks + drmas_lmhead_chunk_async_bf16, errors read once) | {t_a:.1f} | {gib(mem_a)} |",
        f"| the fused pass's three products alone | {t_p:.1f} | {gib(mem_p)} |",
        "",
        f"fused vs materialised: {t_m / t_f:.2f}x faster"
        + (f", {mem_m / mem_f:.1f}x less memory" if mem_m and mem_f else "")
        + f"; fused at {100 * t_p / t_f:.0f}% of the products-alone limit, async at {100 * t_p / t_a:.0f}%",
        "",
        "| check (fused vs materialised) | value | limit |",
        "|---|---:|---:|",
    ]
    lines += [f"| {k} | {v:.3g} | {limits[k]:g} |" for k, v in checks.items()]
    lines += [f"| async results equal to the synchronising calls' (bit for bit) | {'yes' if same_async else 'NO'} | yes |"]
    lines += ["", f"correctness: {'PASS' if ok else 'FAIL'}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
