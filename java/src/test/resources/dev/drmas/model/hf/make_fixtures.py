# make_fixtures.py — writes the HF reference checkpoints HfReferenceTest loads: tiny random models of
# each family built, initialised and saved by HF transformers itself (weights rounded to bfloat16 and
# saved so), with HF's logits for a left-padded batch. Regenerate with:
#   python make_fixtures.py OUTDIR     (needs torch, transformers >= 5, safetensors)
import os, sys, torch
from transformers import Qwen2Config, Qwen3Config, LlamaConfig, AutoModelForCausalLM
from safetensors.torch import save_file

out = sys.argv[1]
common = dict(vocab_size=31, hidden_size=32, intermediate_size=48, num_hidden_layers=2, max_position_embeddings=128,
              initializer_range=0.15, bos_token_id=1, eos_token_id=2)
variants = {
    # tied embeddings, q/k/v bias, sharded (transformers 5 orders shards by name)
    "qwen2": (Qwen2Config(num_attention_heads=4, num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=True,
                          **common), 6000),
    # per-head q/k norm, head_dim 16 != hidden/heads
    "qwen3": (Qwen3Config(num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=1e6,
                          tie_word_embeddings=False, **common), None),
    # llama3 rope scaling with all three bands at head_dim 8, 4:1 grouped-query attention
    "llama": (LlamaConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=8, rope_theta=10000.0,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                          **common), None),
    # tied, attention and mlp biases, linear rope scaling
    "llama_tied_bias": (LlamaConfig(num_attention_heads=4, num_key_value_heads=4, rope_theta=5e5,
                                    rope_scaling={"rope_type": "linear", "factor": 4.0}, tie_word_embeddings=True,
                                    attention_bias=True, mlp_bias=True, **common), None),
}
ids = torch.tensor([[0, 0, 5, 17, 3, 9, 2], [26, 30, 1, 7, 8, 9, 10], [0, 0, 0, 0, 0, 14, 15]])
mask = (torch.arange(7)[None, :] >= torch.tensor([[2], [0], [5]])).long()
pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
torch.manual_seed(1)
for name, (cfg, shard) in variants.items():
    m = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("norm.weight") or n.endswith("bias"):  # HF inits these to 1 and 0
                p.add_(torch.randn_like(p) * 0.3)
            p.copy_(p.to(torch.bfloat16).float())  # the values the bf16 files hold
        logits = m(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    d = os.path.join(out, name)
    m.to(torch.bfloat16).save_pretrained(d, max_shard_size=shard or "5GB")
    os.remove(os.path.join(d, "generation_config.json"))
    save_file({"ids": ids.float(), "mask": mask.float(), "pos": pos.float(), "logits": logits.contiguous()},
              os.path.join(d, "reference.safetensors"))
