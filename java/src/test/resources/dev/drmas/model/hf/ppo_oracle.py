# ppo_oracle.py — an independent PPO update for PpoOracleTest: HF transformers' own model (loaded from the
# folder drmas saved), verl's policy-loss formulas written out here from verl's core_algos
# (compute_policy_loss_vanilla, agg_loss, kl_penalty) and dp_actor, torch's autograd, clip_grad_norm_ and
# torch.optim.AdamW. Nothing of drmas runs here. Run as
#   python ppo_oracle.py MANIFEST.json OUTDIR     (needs torch, transformers >= 5, safetensors)
# MANIFEST.json: {"rows": [{"prompt": [ids], "response": [ids], "advantage": a}], "cases": [{...settings...}]}
# (PpoOracleTest.java writes it; the keys are read below). Per case it writes OUTDIR/<name>.safetensors (the
# updated parameters, HF names, one entry per distinct tensor: a tied LM head is embed_tokens.weight) and an
# entry of OUTDIR/report.json: the step's metrics as drmas reports them, each optimiser step's gradient norm
# and lr, and the counts of tokens clipped on each side, so the test can check that the case exercises what
# it claims to. A case in bfloat16 or float16 (its "dtype") keeps fp32 master weights, adds micro-batch
# gradients up in fp32 and scales float16's loss; every case writes the masters too (<name>.masters.safetensors).
#
# Where drmas deliberately differs from verl (README, the `ppo` and `models.optim` rows), this follows drmas's
# documented semantics, and says so at each place ("drmas:" comments):
#   - aggregation over the whole mini-batch (verl: per micro-batch, then divided by their count);
#   - the entropy bonus always the token mean (verl: aggregated with loss_agg_mode);
#   - dual_clip 0 turns the dual clip off (verl's vanilla loss always applies clip_ratio_c);
#   - the warm-up lr of optimiser step i (from 0) is lr·(i + 1)/W (verl: per training step, from 0);
#   - clipfrac, ppo_kl, kl and entropy are means over all tokens of the update, pg_loss the mean of the
#     mini-batches' losses (verl: means of per-micro-batch values).
import json, math, os, sys
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

torch.manual_seed(0)
torch.set_num_threads(int(os.environ.get("DRMAS_ORACLE_THREADS", "2")))
manifest, out = sys.argv[1], sys.argv[2]
with open(manifest) as f:
    spec = json.load(f)
rows = spec["rows"]


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load(d, dtype="float32"):
    # eager attention: the plainest arithmetic transformers has
    return AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=DTYPES[dtype])


def response_logits(model, row, temperature):
    """[R, V] logits of the positions that predict the row's response tokens, divided by the temperature
    (verl's actor: logits.div_(temperature) before log_softmax and the entropy). One row at a time, no
    padding: the oracle shares no batching or masking code with drmas."""
    ids = torch.tensor([row["prompt"] + row["response"]], dtype=torch.long)
    p, r = len(row["prompt"]), len(row["response"])
    logits = model(input_ids=ids).logits[0]
    return logits[p - 1:p - 1 + r].float() / temperature


def padded(values, lengths):
    """Per-row [R_i] tensors to verl's [B, L] layout with its response_mask (1 on real tokens)."""
    l = max(lengths)
    x = torch.stack([F.pad(v, (0, l - n)) for v, n in zip(values, lengths)])  # differentiable, zeros after
    m = torch.stack([torch.arange(l) < n for n in lengths]).float()
    return x, m


def log_probs_and_entropy(model, batch, temperature, with_entropy):
    lps, ents = [], []
    for row in batch:
        z = response_logits(model, row, temperature)
        logp = F.log_softmax(z, dim=-1)
        lps.append(logp.gather(-1, torch.tensor(row["response"], dtype=torch.long)[:, None])[:, 0])
        if with_entropy:
            # verl's entropy_from_logits: logsumexp(z) − Σ softmax(z)·z, i.e. −Σ p log p
            ents.append(-(logp.exp() * logp).sum(-1))
    return lps, ents


def kl_penalty(logp, ref, kind):
    """verl's kl_penalty (core_algos): kl / k1, mse / k2, low_var_kl / k3."""
    if kind == "k1":
        return logp - ref
    if kind == "k2":
        return 0.5 * (logp - ref).square()
    if kind == "k3":
        kl = torch.clamp(ref - logp, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise ValueError(kind)


def policy_loss(old, logp, adv, mask, c):
    """verl's compute_policy_loss_vanilla, per token, with its metrics' numerators."""
    neg_kl = torch.clamp(logp - old, min=-20.0, max=20.0)
    ratio = torch.exp(neg_kl)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - c["clip_low"], 1 + c["clip_high"])
    clip1 = torch.maximum(pg1, pg2)
    clipped = torch.gt(pg2, pg1).float()
    if c["dual_clip"] > 0:
        pg3 = -adv * c["dual_clip"]
        clip2 = torch.min(pg3, clip1)
        lower = torch.gt(clip1, pg3).float() * (adv < 0).float()
        pg = torch.where(adv < 0, clip2, clip1)
    else:  # drmas: dual_clip null (0) turns it off; verl's vanilla loss has no such switch
        lower = torch.zeros_like(clip1)
        pg = clip1
    r = ratio.detach()
    sides = {  # which clip acted on each token: the test checks each case reaches the ones it claims to
        "clipped_high": ((adv > 0) & (r > 1 + c["clip_high"]) & (mask > 0)).sum().item(),
        "clipped_low": ((adv < 0) & (r < 1 - c["clip_low"]) & (mask > 0)).sum().item(),
        "dual_clipped": ((lower > 0) & (mask > 0)).sum().item(),
    }
    return pg, (clipped * mask).sum().item(), (lower * mask).sum().item(), (-neg_kl.detach() * mask).sum().item(), sides


def begin(c, dtype="float32"):
    """The case's model (in training mode, as verl's actor; no dropout in these configs either way), its
    reference, the temperature, the rows' response lengths, and the old and reference log-probs: the
    model's own, once before the update (drmas recomputes them so, at temperature T)."""
    model = load(c["init"], dtype)
    model.train()
    ref = load(c["ref"], dtype).eval() if c["kl_type"] != "none" else None
    T = c["temperature"]
    lengths = [len(r["response"]) for r in rows]
    with torch.no_grad():
        old_all = log_probs_and_entropy(model, rows, T, False)[0]
        ref_all = log_probs_and_entropy(ref, rows, T, False)[0] if ref is not None else None
    return model, ref, T, lengths, old_all, ref_all


def adamw(c, tensors):
    """torch's AdamW over tensors, its scheduler and the clip norm. drmas: step i (from 0) at lr·(i + 1)/W
    during warm-up, counted in optimiser steps."""
    opt = torch.optim.AdamW(tensors, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                            weight_decay=c["weight_decay"], foreach=False)
    W = c["warmup_steps"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: (i + 1) / W if W > 0 and i < W else 1.0)
    return opt, sched, (c["grad_clip"] if c["grad_clip"] > 0 else math.inf)


def counters():
    """The sums the metrics are made of, the clip sides' counts, and the per-step lists."""
    return ({"tokens": 0, "clipped": 0, "lower": 0, "ppo_kl": 0.0, "kl": 0.0, "entropy": 0.0},
            {"clipped_high": 0, "clipped_low": 0, "dual_clipped": 0}, [], [], [], [])


def summary(model, sums, sides, pg_losses, kl_losses, norms, lrs):
    """The case's entry of report.json: the metrics as drmas reports them."""
    tok = sums["tokens"]
    return {"pg_loss": sum(pg_losses) / len(pg_losses), "kl_loss": sum(kl_losses) / len(kl_losses),
            "clipfrac": sums["clipped"] / tok, "clipfrac_lower": sums["lower"] / tok, "ppo_kl": sums["ppo_kl"] / tok,
            "kl": sums["kl"] / tok, "entropy": sums["entropy"] / tok, "grad_norm_mean": sum(norms) / len(norms),
            "grad_norm_max": max(norms), "grad_norms": norms, "lrs": lrs, "steps": len(norms), "tokens": tok,
            "sides": sides, "tied": model.get_output_embeddings().weight.data_ptr()
            == model.get_input_embeddings().weight.data_ptr()}


def agg_share(loss_mat, mask, mode, constant, mini_tokens, mini_rows):
    """A micro-batch's share of verl's agg_loss over its mini-batch: the shares add up to agg_loss applied once
    to the whole mini-batch (drmas: verl applies it per micro-batch and divides each by the number of
    micro-batches; for seq-mean-token-sum-norm verl divides the micro-batch's Σ_seq Σ_tok by the constant,
    drmas the mini-batch's by rows × constant, README `ppo` row)."""
    if mode == "token-mean":
        return (loss_mat * mask).sum() / mini_tokens
    seq = (loss_mat * mask).sum(-1)
    if mode == "seq-mean-token-sum":
        return seq.sum() / mini_rows
    if mode == "seq-mean-token-mean":
        return (seq / mask.sum(-1)).sum() / mini_rows
    if mode == "seq-mean-token-sum-norm":
        return seq.sum() / (constant * mini_rows)
    raise ValueError(mode)


def run(c):
    """One case's update, as mixed-precision training does it (Megatron's and DeepSpeed's optimisers, FSDP's
    MixedPrecision with fp32 params): forward and backward in the model's dtype, one backward per micro-batch
    (c["micro_batch"] rows) whose gradient is added up in fp32, unscaled there by the loss scale (float16:
    loss × S in the backward, as torch.amp's GradScaler with a fixed S), clip_grad_norm_ on the fp32 sum,
    AdamW on fp32 masters, and the weights set to the masters rounded to the dtype. The masters start as the
    loaded weights (already rounded). In float32 the masters are exact copies of the weights: this is plain
    torch AdamW on the model."""
    dt = DTYPES[c["dtype"]]
    model, ref, T, lengths, old_all, ref_all = begin(c, c["dtype"])
    S = c["loss_scale"] if c["loss_scale"] > 0 else 1.0
    params = [p for p in model.parameters() if p.requires_grad]
    masters = [p.detach().float().clone() for p in params]
    opt, sched, max_norm = adamw(c, masters)
    sums, sides, pg_losses, kl_losses, norms, lrs = counters()
    n, mb, micro = len(rows), c["mini_batch"], c["micro_batch"]
    for epoch in range(c["epochs"]):
        for start in range(0, n, mb):  # drmas with ppo.shuffle false: mini-batches in row order
            mini = list(range(start, min(n, start + mb)))
            mini_tokens, mini_rows = sum(lengths[i] for i in mini), len(mini)
            acc = [torch.zeros_like(m) for m in masters]
            pg_loss_sum, kl_loss_sum = 0.0, 0.0
            for ms in range(0, len(mini), micro):
                idx = mini[ms:ms + micro]
                batch = [rows[i] for i in idx]
                lens = [lengths[i] for i in idx]
                lps, ents = log_probs_and_entropy(model, batch, T, True)
                logp, mask = padded(lps, lens)
                old, _ = padded([old_all[i] for i in idx], lens)
                adv = torch.tensor([rows[i]["advantage"] for i in idx], dtype=torch.float32)[:, None].expand_as(logp)
                pg, clipped, lower, ppo_kl, s = policy_loss(old, logp, adv, mask, c)
                pg_share = agg_share(pg, mask, c["loss_agg"], c["constant"], mini_tokens, mini_rows)
                loss = pg_share
                pg_loss_sum += pg_share.item()
                if ref is not None:
                    refp, _ = padded([ref_all[i] for i in idx], lens)
                    kld = kl_penalty(logp, refp, c["kl_type"])
                    kl_share = agg_share(kld, mask, c["loss_agg"], c["constant"], mini_tokens, mini_rows)  # verl: the same mode
                    loss = loss + c["kl_coef"] * kl_share
                    kl_loss_sum += kl_share.item()
                    sums["kl"] += (kld.detach() * mask).sum().item()
                ent, _ = padded(ents, lens)
                if c["entropy_coef"] > 0:
                    # drmas: the token mean of the mini-batch whatever loss_agg (verl: agg_loss with loss_agg_mode)
                    loss = loss - c["entropy_coef"] * (ent * mask).sum() / mini_tokens
                for p in params:
                    p.grad = None
                (loss * S).backward()
                for a, p in zip(acc, params):
                    a += p.grad.float() / S  # unscaled in fp32, as the gradient goes into the fp32 sum
                sums["tokens"] += int(mask.sum().item())
                sums["clipped"] += clipped
                sums["lower"] += lower
                sums["ppo_kl"] += ppo_kl
                sums["entropy"] += (ent.detach() * mask).sum().item()
                for k in sides:
                    sides[k] += s[k]
            for m, a in zip(masters, acc):
                m.grad = a
            norm = torch.nn.utils.clip_grad_norm_(masters, max_norm=max_norm)
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            with torch.no_grad():
                for p, m in zip(params, masters):
                    p.copy_(m.to(dt))
            norms.append(norm.item())
            pg_losses.append(pg_loss_sum)
            kl_losses.append(kl_loss_sum)
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    save_file({name: m.contiguous() for name, m in zip(names, masters)}, os.path.join(out, c["name"] + ".masters.safetensors"))
    save_file({name: p.detach().contiguous() for name, p in zip(names, params)}, os.path.join(out, c["name"] + ".safetensors"))
    return summary(model, sums, sides, pg_losses, kl_losses, norms, lrs)


os.makedirs(out, exist_ok=True)
import transformers
report = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": {}}
for c in spec["cases"]:
    report["cases"][c["name"]] = run(c)
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
