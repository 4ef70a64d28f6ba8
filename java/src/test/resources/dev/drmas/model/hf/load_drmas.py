# load_drmas.py — the other direction of make_fixtures.py: HF transformers itself opens model folders that
# drmas wrote (HfLoadsDrmasCheckpointsTest, HfLoadsTrainedCheckpointsTest) and says what it found. Run as
#   python load_drmas.py MANIFEST.json OUTDIR     (needs torch, transformers >= 5, safetensors)
# MANIFEST.json: {"cases": [{"name", "dir", "ids": [[...]], "mask": [[0|1 ...]], "texts": [...]}]}. For each
# case it loads dir with AutoModelForCausalLM.from_pretrained (dtype left at transformers 5's default, "auto":
# the dtype config.json names),
# computes float32 logits for ids under mask (position ids counted over real tokens, as generation does), and,
# where dir has tokenizer.json, encodes texts with AutoTokenizer.from_pretrained(dir). It writes
# OUTDIR/logits.safetensors (one float32 [B, T, V] tensor per case name) and OUTDIR/report.json: per case the
# loading info (missing, unexpected, mismatched keys, error messages), every Python warning and transformers
# log record of level WARNING or above raised while loading and running, the dtype and the class loaded, the
# tokenizer's ids. A case that cannot be loaded at all is reported with its error, not raised, so that one bad
# folder does not hide what the others say.
import json, logging, os, sys, traceback, warnings
import torch
from safetensors.torch import save_file
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

manifest, out = sys.argv[1], sys.argv[2]
with open(manifest) as f:
    cases = json.load(f)["cases"]


class Records(logging.Handler):
    """Every transformers log record of level WARNING or above, as text."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(f"{record.name}: {record.getMessage()}")


transformers.logging.set_verbosity_warning()
tf_logger = logging.getLogger("transformers")
report, logits = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": {}}, {}
for case in cases:
    name, d = case["name"], case["dir"]
    r = report["cases"][name] = {}
    records = Records()
    tf_logger.addHandler(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True, attn_implementation="eager")
            r["class"] = type(model).__name__
            r["dtype"] = str(model.dtype).removeprefix("torch.")
            r["loading_info"] = {k: sorted(str(x) for x in v) for k, v in info.items()}
            r["tied"] = model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
            model = model.float().eval()
            ids = torch.tensor(case["ids"], dtype=torch.long)
            mask = torch.tensor(case["mask"], dtype=torch.long)
            pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
            with torch.no_grad():
                logits[name] = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float().contiguous()
            if os.path.exists(os.path.join(d, "tokenizer.json")):
                tok = AutoTokenizer.from_pretrained(d)
                r["tokenizer"] = {"class": type(tok).__name__, "eos_token": tok.eos_token, "pad_token": tok.pad_token,
                                  "ids": [tok.encode(t, add_special_tokens=False) for t in case.get("texts", [])]}
        except Exception as e:  # reported per case: the Java side fails naming it
            r["error"] = f"{type(e).__name__}: {e}"
            r["traceback"] = traceback.format_exc()
    tf_logger.removeHandler(records)
    r["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    r["log"] = records.messages

os.makedirs(out, exist_ok=True)
if logits:
    save_file(logits, os.path.join(out, "logits.safetensors"))
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
