#!/usr/bin/env bash
# mutation-check.sh — shows that the native suites catch the bugs they are there for: each mutation
# below is applied to a copy of the sources (the work tree is never touched) and built there
# without nvcc, and its suite must fail: the emulated CUDA suite (ctest -L emulation; the default)
# or, for entries marked `cpu`, drmas_test_cpu (on this CPU's kernels and on the x86-64-v2 ones).
# Prints one line per mutation; exits 1 if any mutation went unnoticed. ~1-2 min a mutation on 2 cores.
#   native/emu/mutation-check.sh [NAME...]     (default: all)
#   native/emu/mutation-check.sh --applies     only checks, in a second, that every mutation still
#                                              applies to the sources (ctest runs this: an entry whose
#                                              line was rewritten would otherwise go stale unseen)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d /tmp/drmas-mutation.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

# name | file | python expression applied to the file's text (s), without a '|' — each must change the file [| cpu]
MUTATIONS=(
  "block_sum-first-barrier|kernels/drmas_common.cuh|s.replace('    __syncthreads();\n    if (warp == 0) {', '    if (warp == 0) {', 1)"
  # (block_sum's last __syncthreads is its contract — smem reusable at once — but since the loss's rows
  # went to a warp each (0a3c724) no caller writes smem before another barrier: removing it changes nothing)
  "divergent-all_sync|kernels/drmas_common.cuh|s.replace('if (__all_sync(kFullMask, active && (long long)seg == first)) {', 'if (active && __all_sync(kFullMask, (long long)seg == first)) {')"
  "divergent-ballot|kernels/drmas_common.cuh|s.replace('const unsigned flagged = __ballot_sync(kFullMask, bad);', 'const unsigned flagged = bad ? __ballot_sync(kFullMask, bad) : 0u;')"
  "divergent-warp0-shuffle|kernels/drmas_common.cuh|s.replace('            for (int offset = 16; offset > 0; offset >>= 1)\n                x += __shfl_down_sync', '            if (lane < kWarpsPerBlock) for (int offset = 16; offset > 0; offset >>= 1)\n                x += __shfl_down_sync')"
  "no-device-guard|native/src/cuda_backend.cu|s.replace('        if (device_ < 0) return DRMAS_OK;\n        int current = 0;', '        return DRMAS_OK;\n        int current = 0;')"
  "loss-row-barrier|kernels/clipped_loss.cuh|s.replace('        n_r = smem[0];\n        __syncthreads();', '        n_r = smem[0];')"
  # the one-pass sorted kernel's own checks on trusted input (bad rows must go to the multi-kernel path)
  "sorted-agent-range|kernels/advantage.cuh|s.replace('bool ok = id_in_range(u, num_uids) && id_in_range(k, num_agents) &&\n                      (traj', 'bool ok = id_in_range(u, num_uids) &&\n                      (traj')"
  "sorted-traj-range|kernels/advantage.cuh|s.replace('id_in_range(t, num_trajs));\n            if (i > 0) ok = ok', 'true);\n            if (i > 0) ok = ok')"
  "sorted-first-tile-unflagged|kernels/advantage.cuh|s.replace('if (lane == 0) *(volatile unsigned long long*)not_sorted', 'if (lane == 0 && tb > 0) *(volatile unsigned long long*)not_sorted')"
  "loss-mask-byte-one|kernels/clipped_loss.cuh|s.replace('mask[t] != 0);', 'mask[t] == 1);')"
  # the host-offsets loss must stay inside the arrays whatever the device offsets hold
  "loss-row-span-guard|kernels/clipped_loss.cuh|s.replace('const bool ok = b >= 0 && b <= e && e <= num_tokens;', 'const bool ok = true;')"
  # the validation kernel's order check (it picks the one-pass kernel and gates the trajectory checks)
  "validate-lane0-row-before|kernels/validate.cuh|s.replace('            up = uid[i - 1];\n            tp = traj != nullptr ? traj[i - 1] : 0;\n        }\n        record_first_bad(first_bad + kAdvUnsorted', '        }\n        record_first_bad(first_bad + kAdvUnsorted')"
  "validate-traj-across-uid|kernels/validate.cuh|s.replace('(u != up && t == tp))', '(false))')"
  "validate-traj-decrease|kernels/validate.cuh|s.replace('(tp > t ', '(false ')"
  "validate-offsets-first-pair|kernels/validate.cuh|s.replace('const bool decreasing = in && r > 0 &&', 'const bool decreasing = in && r > 1 &&')"
  # runs longer than kSortedLongRun: the validation must send them to the multi-kernel path (the
  # one-pass kernel leaves them alone)
  "validate-long-run|kernels/validate.cuh|s.replace('return i >= kSortedLongRun && uid[i - kSortedLongRun] == u;', 'return false;')"
  # the host side: the first bad row's field, named in the CPU's order; the gradient outside the rows
  "validate-first-kind-order|native/src/cuda_backend.cu|s.replace('(int64_t)host[k] < limit) {', '(int64_t)host[k] <= limit) {')"
  "loss-tail-unzeroed-from-0|native/src/cuda_backend.cu|s.replace('zero_outside_rows(grad, first, last', 'zero_outside_rows(grad, first, first > 0 ? last : num_tokens')"
  # the CPU's sorted check: the uid range in its vector blocks, order and finiteness in its scalar rows
  "cpu-uid-range-vector|native/src/cpu_adv_kernels.inc|s.replace('            mu = max_u(mu, as_u(u));\n', '')|cpu"
  "cpu-row-traj-order|native/src/cpu_adv_kernels.inc|s.replace('ok = ok && a.traj[i - 1] <= a.traj[i] && (', 'ok = ok && (')|cpu"
  "cpu-row-score-inf|native/src/cpu_adv_kernels.inc|s.replace('(bits & 0x7fffffffu) < 0x7f800000u;', '(bits & 0x7fffffffu) <= 0x7f800000u;')|cpu"
)

if [[ "${1:-}" == --applies ]]; then
    # one python3 for all entries (one line each on stdin)
    printf '%s\n' "${MUTATIONS[@]}" | python3 -c '
import sys
root, stale, count = sys.argv[1], 0, 0
for line in sys.stdin.read().splitlines():
    name, path, expr, *suite = line.split("|")
    count += 1
    if suite and suite != ["cpu"]:
        print(f"{name}: unknown suite {suite[0]!r} (cpu or nothing)"); stale = 1; continue
    s = open(f"{root}/{path}").read()
    if eval(expr, {"s": s}) == s:
        print(f"{name}: does not apply to {path} (the code changed? update the entry)"); stale = 1
if not stale: print(f"mutation-check: all {count} mutations apply")
sys.exit(stale)' "$ROOT"
    exit $?
fi

wanted=("$@")
missed=0
ran=()
for m in "${MUTATIONS[@]}"; do
    IFS='|' read -r name file expr suite <<< "$m"
    if [[ ${#wanted[@]} -gt 0 && ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
    ran+=("$name")
    src="$WORK/$name"
    mkdir -p "$src"
    (cd "$ROOT" && git ls-files -z CMakeLists.txt native kernels | xargs -0 cp --parents -t "$src")
    if ! python3 - "$src/$file" "$expr" <<'EOF'
import sys
path, expr = sys.argv[1], sys.argv[2]
s = open(path).read()
t = eval(expr, {"s": s})
if t == s:
    sys.exit("mutation does not apply")
open(path, "w").write(t)
EOF
    then
        echo "$name: could not be applied to $file (the code changed?)"; missed=1; continue
    fi
    log="$WORK/$name.log"
    target=drmas_test_cuda_emu
    [[ "${suite:-}" == cpu ]] && target=drmas_test_cpu
    if ! { cmake -S "$src" -B "$src/build" -DDRMAS_CUDA=OFF -DCMAKE_BUILD_TYPE=Release \
           && cmake --build "$src/build" -j"$(nproc)" --target "$target"; } > "$log" 2>&1; then
        echo "$name: the mutated sources do not build (see below)"; tail -5 "$log"; missed=1; continue
    fi
    start=$(date +%s)
    # (stderr of the group too: the shell reports an aborted test there)
    if [[ "${suite:-}" == cpu ]]; then
        run_suite() { (cd "$src/build" && ./drmas_test_cpu) > "$log" 2>&1 && (cd "$src/build" && DRMAS_CPU_ISA=v2 ./drmas_test_cpu) >> "$log" 2>&1; }
    else
        run_suite() { (cd "$src/build" && DRMAS_TEST_SCALE=small DRMAS_CUDA_MAX_GRID=3 ./drmas_test_cuda_emu) > "$log" 2>&1 \
                      && (cd "$src/build" && DRMAS_TEST_SCALE=small ./drmas_test_cuda_emu) >> "$log" 2>&1; }
    fi
    if { run_suite; } 2>/dev/null; then
        echo "$name: NOT DETECTED (the ${target#drmas_} suite passed)"; missed=1
    else
        first="$(grep -m1 -E 'drmas CUDA emulation|FAIL|mismatch|Abort|free\(\)' "$log" | cut -c1-220)"
        echo "$name: detected after $(( $(date +%s) - start )) s: $first"
    fi
done
for w in "${wanted[@]}"; do
    [[ " ${ran[*]} " == *" $w "* ]] || { echo "$w: no such mutation"; missed=1; }
done
exit $missed
