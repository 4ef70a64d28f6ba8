# generate_oracle.py — HF transformers' own generation and scoring, the reference of HfGenerationOracleTest:
# greedy decoding with model.generate (its own KV cache, one prompt at a time, unpadded, so that neither its
# padding nor drmas's batching is in question) and teacher-forced logits of given sequences. Run as
#   python generate_oracle.py MANIFEST.json OUTDIR     (needs torch, transformers >= 5, safetensors)
# MANIFEST.json: {"generate": [{"name", "dir", "dtype", "prompt": [ids], "max_new_tokens", "eos": [ids]}],
#                 "score": [{"name", "dir", "dtype", "ids": [ids], "from": P}]}
# (dtype: float32, bfloat16 or float16, the folder's float32 weights loaded in it).
# Writes OUTDIR/report.json ({"transformers", "torch", "generate": {name: [new token ids]}}) and
# OUTDIR/scores.safetensors: per score case the logits (the model's dtype's values, as float32) [len(ids) - P, V] that predict ids[P:] from a
# full forward (raw logits: the test divides by its temperature and takes log_softmax itself, in float64).
import json, os, sys
import torch
from safetensors.torch import save_file
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig

manifest, out = sys.argv[1], sys.argv[2]
with open(manifest) as f:
    m = json.load(f)
torch.set_num_threads(2)

models = {}


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def model(d, dtype):
    # the float32 folder loaded in the case's dtype (rounded to nearest even, as drmas rounds it); eager
    # attention: the plain softmax(QK^T)V reference, no fused kernel
    if (d, dtype) not in models:
        models[(d, dtype)] = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=DTYPES[dtype]).eval()
    return models[(d, dtype)]


report = {"transformers": transformers.__version__, "torch": torch.__version__, "generate": {}}
scores = {}
with torch.no_grad():
    for c in m["generate"]:
        lm = model(c["dir"], c.get("dtype", "float32"))
        ids = torch.tensor([c["prompt"]], dtype=torch.long)
        eos = c["eos"] or None
        # a config of its own, so that nothing of the folder's (none is written) or of transformers'
        # defaults adds a warper or a penalty: plain argmax, stopped at eos or after max_new_tokens
        g = GenerationConfig(do_sample=False, max_new_tokens=c["max_new_tokens"], eos_token_id=eos,
                             pad_token_id=(eos[0] if eos else 0))
        seq = lm.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=g)
        report["generate"][c["name"]] = seq[0, ids.shape[1]:].tolist()
    for c in m["score"]:
        lm = model(c["dir"], c.get("dtype", "float32"))
        ids = torch.tensor([c["ids"]], dtype=torch.long)
        logits = lm(input_ids=ids).logits[0].float()
        scores[c["name"]] = logits[c["from"] - 1: ids.shape[1] - 1].contiguous()

os.makedirs(out, exist_ok=True)
if scores:
    save_file(scores, os.path.join(out, "scores.safetensors"))
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f)
