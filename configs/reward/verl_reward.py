#!/usr/bin/env python3
"""verl_reward.py: serves a verl-style reward function to drmas as a grader command.

    orchestra:
      options:
        grader: {command: [python3, configs/reward/verl_reward.py, FILE.py, FUNCTION]}

FILE.py defines FUNCTION(data_source, solution_str, ground_truth, extra_info=None), as verl's
custom_reward_function.path and .name name one, returning a number or a dict with "score". drmas
sends one JSON request a line on stdin (those four arguments) and reads one line {"score": X} for
each (drmas's workflow/AnswerGrader.java has the protocol). Whatever the function or its imports
print goes to stderr, so that a print left in a reward function cannot be read as a score. Run it
with the Python environment FILE.py needs (e.g. PYTHONPATH naming a code base whose grader it calls).
Only the standard library is used here.
"""
import contextlib
import importlib.util
import json
import math
import os
import sys


def load(path, name):
    if not os.path.isfile(path):
        sys.exit(f"verl_reward.py: {path}: no such file")
    spec = importlib.util.spec_from_file_location("drmas_reward_module", path)
    module = importlib.util.module_from_spec(spec)
    with contextlib.redirect_stdout(sys.stderr):
        spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        sys.exit(f"verl_reward.py: {path} has no function {name}")
    return fn


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: verl_reward.py FILE.py FUNCTION (drmas starts it as orchestra.options.grader.command)")
    fn = load(sys.argv[1], sys.argv[2])
    requests = (line.decode("utf-8") for line in sys.stdin.buffer)
    out = sys.stdout
    for n, line in enumerate(requests, 1):
        r = json.loads(line)
        with contextlib.redirect_stdout(sys.stderr):
            got = fn(r["data_source"], r["solution_str"], r["ground_truth"], r.get("extra_info"))
        score = got["score"] if isinstance(got, dict) else got
        try:
            score = float(score)
        except (TypeError, ValueError):
            sys.exit(f"verl_reward.py: {sys.argv[2]} returned {got!r} for request {n}: not a number")
        if not math.isfinite(score):
            sys.exit(f"verl_reward.py: {sys.argv[2]} returned {score} for request {n}: not finite")
        out.write(json.dumps({"score": score}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
