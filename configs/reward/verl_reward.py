#!/usr/bin/env python3
"""verl_reward.py: serves a verl-style reward function to drmas as a grader command.

    orchestra:
      options:
        grader: {command: [python3, configs/reward/verl_reward.py, FILE.py, FUNCTION]}

FILE.py defines FUNCTION(data_source, solution_str, ground_truth, extra_info=None), as verl's
custom_reward_function.path and .name name one, returning a number or a dict with "score". Once the
file is loaded this says {"ready": true}; then drmas sends one JSON request a line on stdin (those four
arguments) and reads one line {"score": X} for each (drmas's workflow/AnswerGrader.java has the
protocol).

Everything else written to stdout, by Python's print, a C extension or a subprocess, goes to stderr:
the replies have a descriptor of their own, so a print left in a reward function cannot be read as a
score. An exception in the function, or a result that is not a finite number, ends the grader and
stops the run, as in verl; with --on-error SCORE it scores SCORE instead and prints why (a reply that
breaks a parser would otherwise stop the run again when it resumes, as the same step samples the same
replies). SIGINT and SIGTERM do nothing here (a handler that returns; the processes the function
starts get the default handling back): Ctrl-C or a scheduler's stop reaches every process of the job,
and drmas still needs its grader for the step it finishes before saving; the grader ends when drmas
closes its stdin (or dies). The file is loaded as verl loads it, as a module registered in
sys.modules as custom_module (dataclasses and forked multiprocessing workers need that; workers
started by "spawn" cannot import it, in verl neither). Run it with the Python environment FILE.py needs (e.g. PYTHONPATH naming a code base whose
grader it calls). Only the standard library is used here.
"""
import importlib.util
import json
import math
import os
import signal
import sys
import traceback

USAGE = "usage: verl_reward.py [--on-error SCORE] FILE.py FUNCTION (drmas starts it as orchestra.options.grader.command)"


def load(path, name):
    if not os.path.isfile(path):
        sys.exit(f"verl_reward.py: {path}: no such file")
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        sys.exit(f"verl_reward.py: {path} has no function {name}")
    return fn


class NotAScore(ValueError):
    pass


def number(got, what):
    score = got.get("score") if isinstance(got, dict) else got
    try:
        score = float(score)
    except (TypeError, ValueError):
        raise NotAScore(f"verl_reward.py: {what} is {got!r}: not a number (or a dict with a numeric \"score\")") from None
    if not math.isfinite(score):
        raise NotAScore(f"verl_reward.py: {what} is {score}: not finite")
    return score


def ignore(signum, frame):
    pass


def default_signals():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main():
    # a handler, not SIG_IGN: an ignored signal stays ignored in every program the function runs, a handled one
    # is back to its default there (exec resets it; a fork gets it back here)
    signal.signal(signal.SIGINT, ignore)
    signal.signal(signal.SIGTERM, ignore)
    os.register_at_fork(after_in_child=default_signals)
    args = sys.argv[1:]
    on_error = None
    if args[:1] == ["--on-error"]:
        if len(args) < 2:
            sys.exit(USAGE)
        try:
            on_error = number(args[1], "--on-error")
        except NotAScore as e:
            sys.exit(str(e))
        args = args[2:]
    if len(args) != 2:
        sys.exit(USAGE)
    # the replies get stdout's descriptor of their own; descriptor 1 becomes stderr for everything else
    replies = os.fdopen(os.dup(1), "w", encoding="ascii")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout.reconfigure(line_buffering=True)  # now stderr: each line out at once, not when a buffer fills
    fn = load(args[0], args[1])
    replies.write('{"ready": true}\n')
    replies.flush()
    for n, line in enumerate(sys.stdin.buffer, 1):
        r = json.loads(line.decode("utf-8"))
        try:
            got = fn(r["data_source"], r["solution_str"], r["ground_truth"], r.get("extra_info"))
            score = number(got, f"{args[1]}'s result for request {n}")
        except Exception as e:
            if on_error is None:
                if isinstance(e, NotAScore):
                    sys.exit(str(e))
                raise
            task = (r.get("extra_info") or {}).get("task_id")
            print(f"verl_reward.py: {args[1]} failed on request {n} (task {task!r}); scored {on_error} (--on-error):",
                  file=sys.stderr)
            traceback.print_exc()
            score = on_error
        replies.write(json.dumps({"score": score}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
