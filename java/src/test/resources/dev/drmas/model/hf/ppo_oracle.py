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
# it claims to.
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


def load(d):
    # eager attention in float32: the plainest arithmetic transformers has
    return AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)


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


def agg_loss(loss_mat, mask, mode, constant):
    """verl's agg_loss, applied once to the whole mini-batch (drmas: verl applies it per micro-batch and
    divides each by the number of micro-batches; for seq-mean-token-sum-norm verl divides the micro-batch's
    Σ_seq Σ_tok by the constant, drmas the mini-batch's by rows × constant, README `ppo` row)."""
    if mode == "token-mean":
        return (loss_mat * mask).sum() / mask.sum()
    seq = (loss_mat * mask).sum(-1)
    if mode == "seq-mean-token-sum":
        return seq.mean()
    if mode == "seq-mean-token-mean":
        return (seq / mask.sum(-1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return seq.sum() / (constant * loss_mat.shape[0])
    raise ValueError(mode)


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


def run(c):
    model = load(c["init"])
    model.train()  # as verl's actor (no dropout in these configs either way)
    ref = load(c["ref"]).eval() if c["kl_type"] != "none" else None
    T = c["temperature"]
    lengths = [len(r["response"]) for r in rows]
    with torch.no_grad():
        # old log-probs: the model's own, once before the update (drmas recomputes them so, at temperature T)
        old_all = log_probs_and_entropy(model, rows, T, False)[0]
        ref_all = log_probs_and_entropy(ref, rows, T, False)[0] if ref is not None else None
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                            weight_decay=c["weight_decay"], foreach=False)
    W = c["warmup_steps"]
    # drmas: step i (from 0) at lr·(i + 1)/W during warm-up, counted in optimiser steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: (i + 1) / W if W > 0 and i < W else 1.0)
    max_norm = c["grad_clip"] if c["grad_clip"] > 0 else math.inf
    sums = {"tokens": 0, "clipped": 0, "lower": 0, "ppo_kl": 0.0, "kl": 0.0, "entropy": 0.0}
    sides = {"clipped_high": 0, "clipped_low": 0, "dual_clipped": 0}
    pg_losses, kl_losses, norms, lrs = [], [], [], []
    n, mb = len(rows), c["mini_batch"]
    for epoch in range(c["epochs"]):
        for start in range(0, n, mb):  # drmas with ppo.shuffle false: mini-batches in row order
            idx = list(range(start, min(n, start + mb)))
            batch = [rows[i] for i in idx]
            lens = [lengths[i] for i in idx]
            lps, ents = log_probs_and_entropy(model, batch, T, True)
            logp, mask = padded(lps, lens)
            old, _ = padded([old_all[i] for i in idx], lens)
            adv = torch.tensor([rows[i]["advantage"] for i in idx], dtype=torch.float32)[:, None].expand_as(logp)
            pg, clipped, lower, ppo_kl, s = policy_loss(old, logp, adv, mask, c)
            pg_loss = agg_loss(pg, mask, c["loss_agg"], c["constant"])
            loss = pg_loss
            if ref is not None:
                refp, _ = padded([ref_all[i] for i in idx], lens)
                kld = kl_penalty(logp, refp, c["kl_type"])
                kl_loss = agg_loss(kld, mask, c["loss_agg"], c["constant"])  # verl: the same loss_agg_mode
                loss = loss + c["kl_coef"] * kl_loss
                kl_losses.append(kl_loss.item())
                sums["kl"] += (kld.detach() * mask).sum().item()
            else:
                kl_losses.append(0.0)
            ent, _ = padded(ents, lens)
            if c["entropy_coef"] > 0:
                # drmas: the token mean of the mini-batch whatever loss_agg (verl: agg_loss with loss_agg_mode)
                loss = loss - c["entropy_coef"] * (ent * mask).sum() / mask.sum()
            opt.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm=max_norm)
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            norms.append(norm.item())
            pg_losses.append(pg_loss.item())
            sums["tokens"] += int(mask.sum().item())
            sums["clipped"] += clipped
            sums["lower"] += lower
            sums["ppo_kl"] += ppo_kl
            sums["entropy"] += (ent.detach() * mask).sum().item()
            for k in sides:
                sides[k] += s[k]
    tok = sums["tokens"]
    weights = {name: p.detach().clone().contiguous() for name, p in model.named_parameters()}
    save_file(weights, os.path.join(out, c["name"] + ".safetensors"))
    return {"pg_loss": sum(pg_losses) / len(pg_losses), "kl_loss": sum(kl_losses) / len(kl_losses),
            "clipfrac": sums["clipped"] / tok, "clipfrac_lower": sums["lower"] / tok, "ppo_kl": sums["ppo_kl"] / tok,
            "kl": sums["kl"] / tok, "entropy": sums["entropy"] / tok, "grad_norm_mean": sum(norms) / len(norms),
            "grad_norm_max": max(norms), "grad_norms": norms, "lrs": lrs, "steps": len(norms), "tokens": tok,
            "sides": sides, "tied": model.get_output_embeddings().weight.data_ptr()
            == model.get_input_embeddings().weight.data_ptr()}


os.makedirs(out, exist_ok=True)
import transformers
report = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": {}}
for c in spec["cases"]:
    report["cases"][c["name"]] = run(c)
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
