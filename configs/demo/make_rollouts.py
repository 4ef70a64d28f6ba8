# make_rollouts.py — regenerates rollouts.jsonl, the example batch that `./drmas demo` and the
# docs use: a simulated math solver ⇄ verifier run (16 tasks × 8 rollouts, up to 2 rounds).
# Every row's score is the episode reward (final answer right) minus 0.1 when that agent's
# output was malformed; a rejected answer gets a second solver turn, so the solver's rows
# over-represent failing trajectories — the invocation skew that Dr. MAS corrects.
import json, random

rng = random.Random(2602)
rows = []
for task in range(16):
    p_right = [0.15, 0.35, 0.6, 0.85][task % 4]
    for k in range(8):
        traj = f"t{task}-{k}"
        turns = []
        right = False
        for rnd in range(2):
            malformed = rng.random() < 0.05
            right = (not malformed) and rng.random() < p_right
            turns.append(("solver", malformed))
            if rnd == 1:
                break  # the verifier is skipped in the last round
            v_malformed = rng.random() < 0.08
            if v_malformed:
                approve = True  # malformed counts as approve
            else:
                approve = rng.random() < (0.8 if right else 0.3)
            turns.append(("verifier", v_malformed))
            if approve:
                break
        reward = 1.0 if right else 0.0
        for turn, (agent, malformed) in enumerate(turns):
            rows.append({"uid": f"task-{task}", "traj": traj, "agent": agent, "turn": turn,
                         "score": round(reward - (0.1 if malformed else 0.0), 2)})
with open("rollouts.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(len(rows), "rows")
