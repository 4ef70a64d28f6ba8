#!/usr/bin/env bash
# dist-bench.sh — data-parallel overhead on one machine: trains the toy task (configs/math-toy-drmas.yaml,
# random init, no eval or checkpoints) for STEPS steps with 1 and with 2 local ranks (`drmas launch`)
# and prints samples/s (episodes per second, from the metrics' wall times, first step excluded) and
# rank 0's time inside collectives per step. Usage: bench/dist-bench.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-6}"
OUT="$(mktemp -d)"
for N in 1 2; do
    ./drmas launch --nproc "$N" configs/math-toy-drmas.yaml trainer.steps="$STEPS" trainer.eval_freq=0 \
        trainer.save_freq=0 metrics.progress_bar=false metrics.tensorboard=false run.resume=never \
        run.output_dir="$OUT/n$N" > "$OUT/n$N.log" 2>&1 || { cat "$OUT/n$N.log"; exit 1; }
done
python3 - "$OUT" "$STEPS" <<'PY'
import json, sys
out, steps = sys.argv[1], int(sys.argv[2])
base = None
print("| ranks | threads/rank | s/step | samples/s | vs 1 rank | collective s/step (rank 0) |")
print("|---|---|---|---|---|---|")
for n in (1, 2):
    rows = [json.loads(l) for l in open(f"{out}/n{n}/math-toy-drmas/metrics.jsonl")]
    rows = [r for r in rows if "reward/mean" in r]
    t = [r["wall_time"] for r in rows]
    per_step = (t[-1] - t[0]) / (len(t) - 1)
    episodes = 8 * 4  # tasks_per_step x rollouts_per_task of the config
    sps = episodes / per_step
    base = base or sps
    coll = sum(r.get("time/collective_s", 0.0) for r in rows[1:]) / (len(rows) - 1)
    print(f"| {n} | {2 // n} | {per_step:.2f} | {sps:.2f} | {sps / base:.2f}x | {coll:.3f} |")
PY
