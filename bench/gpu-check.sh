#!/usr/bin/env bash
# gpu-check.sh — the one prepared script for a machine with an NVIDIA GPU (made for an H200 with
# nvcc, CMake, g++, compute-sanitizer and no JDK; run bench/gpu-prepare.sh elsewhere first and carry
# its .gpu-carry/). It cannot pass without testing the GPU: CMake must compile the CUDA kernels
# (DRMAS_REQUIRE_CUDA), and DRMAS_REQUIRE_GPU=1 turns every "no GPU: skipped" into a failure.
# Steps, each with its log in $OUT (default gpu-out/) and its time in $OUT/summary.md, in this order:
# correctness against the CPU first, then issue 17's figures, then the checks whose time on a real
# GPU nobody has measured yet (the sanitizers), so that a run cut short by the budget still has the
# figures:
#   build      libdrmas and the CUDA test for sm_90 only (-DDRMAS_CUDA_ARCHITECTURES=90-real)
#   ctest      ctest -L gpu: every CUDA result against the CPU oracle, at full size and with the
#              grid capped at 3 blocks (several grid-stride iterations)
#   gpubench   GpuBench at 16M and 64M rows: GPU vs native CPU kernel (table in $OUT/gpu-bench.md)
#   advantage  bench/gpu_advantage.py (python3 + PyTorch): Dr. MAS normalisation at 16M and 64M rows, both
#              libdrmas entries vs the PyTorch composition (bincount/index_add_) on the same device tensors,
#              beside a device-to-device copy of the same bytes: ms, GB/s, % of copy, and a correctness
#              check (table in $OUT/advantage-bench.md)
#   lmhead     bench/gpu_lmhead.py (python3 + PyTorch): one bf16 LM-head update at V = 151,936, H = 2560,
#              N = 16K, fused (chunks + drmas_lmhead_chunk_bf16 on torch's stream; again through the
#              async calls, errors read once) vs PyTorch's materialised log_softmax + autograd: time,
#              max_memory_allocated, and a correctness check (the async results bit for bit the sync ones')
#              (table in $OUT/lmhead-bench.md; ~10 s of GPU time on an H200 plus PyTorch's start)
#   junit      the bindings' JUnit tests (CudaKernelsTest on the GPU) on the jlinked runtime
#   memcheck, racecheck   compute-sanitizer on the CUDA test at DRMAS_TEST_SCALE=small
#   synccheck  compute-sanitizer's barrier checks, if time is left
# The whole run stays under GPU_CHECK_BUDGET_S (default 450 s): each step's timeout is what is left.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
CARRY=.gpu-carry
BUILD=build-gpu
JAVA="$CARRY/jre/bin/java"
export OUT CARRY BUILD JAVA
BUDGET="${GPU_CHECK_BUDGET_S:-450}"
DEADLINE=$((SECONDS + BUDGET))
export DRMAS_REQUIRE_GPU=1
status=0
SUMMARY="$OUT/summary.md"
printf '| step | result | seconds |\n|---|---|---:|\n' > "$SUMMARY"

# step NAME CAP_SECONDS COMMAND...: runs COMMAND with its output in $OUT/NAME.log under a timeout
# of min(CAP, time left); records pass/fail/timeout and the seconds taken.
step() {
    local name="$1" cap="$2"; shift 2
    local left=$((DEADLINE - SECONDS))
    if (( left < 15 )); then
        echo "gpu-check: $name not run: out of time"
        printf '| %s | NOT RUN (out of time) | 0 |\n' "$name" >> "$SUMMARY"
        status=1
        return 1
    fi
    local limit=$(( cap < left ? cap : left )) t0=$SECONDS rc=0
    echo "gpu-check: $name (timeout ${limit}s) ..."
    # through bash, so that COMMAND may be one of the exported functions below
    # (-k: a process stuck in a CUDA call or a JVM whose shutdown hangs is killed 10 s after the TERM)
    timeout -k 10 "$limit" bash -c '"$@"' step "$@" > "$OUT/$name.log" 2>&1 || rc=$?
    local took=$((SECONDS - t0)) result=ok
    if (( rc == 124 )); then result="TIMEOUT after ${limit}s"; elif (( rc != 0 )); then result="FAILED (exit $rc)"; fi
    printf '| %s | %s | %d |\n' "$name" "$result" "$took" >> "$SUMMARY"
    echo "gpu-check: $name: $result in ${took}s"
    if (( rc != 0 )); then status=1; tail -25 "$OUT/$name.log"; return 1; fi
    return 0
}

{ nvidia-smi; nvcc --version; compute-sanitizer --version; cmake --version | head -1; g++ --version | head -1
  nproc; free -g; } > "$OUT/machine.txt" 2>&1

build() {
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDRMAS_REQUIRE_CUDA=ON \
        -DDRMAS_CUDA_ARCHITECTURES=90-real -DDRMAS_CUDA_EMULATION=OFF \
        && cmake --build "$BUILD" -j"$(nproc)" --target drmas drmas_test_cuda
}
export -f build
if ! step build 240 build; then
    echo "gpu-check: the build failed; nothing else can run"
    cat "$SUMMARY"
    exit 1
fi

# ctest fails on zero selected tests, and DRMAS_REQUIRE_GPU=1 makes the CUDA test fail, not skip.
step ctest 180 ctest --test-dir "$BUILD" -L gpu --no-tests=error --output-on-failure -V  # (-V: the counts and times of a pass too)
grep -h "CUDA compiled\|passed, " "$OUT/ctest.log" | head -4

# torch_bench NAME: bench/gpu_NAME.py (python3 + a CUDA PyTorch) against this build, table in $OUT/NAME-bench.md
torch_bench() {
    python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__)" \
        || { echo "gpu-check: $1 needs python3 with a CUDA PyTorch"; return 3; }
    python3 "bench/gpu_$1.py" --lib "$BUILD/libdrmas.so" --out "$OUT/$1-bench.md"
}
export -f torch_bench

sanitize() {  # sanitize TOOL [OPTIONS...]: the CUDA test at the small scale under compute-sanitizer
    local tool="$1"; shift
    DRMAS_TEST_SCALE=small compute-sanitizer --tool "$tool" --error-exitcode 99 "$@" "$BUILD/drmas_test_cuda"
}
export -f sanitize

# The carried classes must be those of these sources (gpu-prepare.sh stamps them).
stale=""
if [[ -x "$JAVA" && "$(cat "$CARRY/STAMP" 2>/dev/null)" != "$(bash bench/gpu-stamp.sh)" ]]; then
    stale="the carried classes are not built from these sources (no or another $CARRY/STAMP: rerun bench/gpu-prepare.sh)"
    echo "gpu-check: $stale"
fi

if [[ -x "$JAVA" && -z "$stale" ]]; then
    # (DRMAS_CPU_WORKSPACE_MB: the CPU's random-order scratch at 64M rows, 2.4 GB, kept between calls as at
    # smaller sizes, so that its time is not fresh pages' faults)
    step gpubench 240 env DRMAS_CPU_WORKSPACE_MB=4096 "$JAVA" --enable-native-access=ALL-UNNAMED -Xmx32g -Ddrmas.native.path="$BUILD/libdrmas.so" \
        -cp "$CARRY/classes/bench:$CARRY/classes/bindings:$CARRY/classes/algo" dev.drmas.bench.GpuBench \
        --sizes 16777216,67108864 --threads "$(nproc)" --out "$OUT/gpu-bench.md"
    [[ -f "$OUT/gpu-bench.md" ]] && cat "$OUT/gpu-bench.md"
else
    echo "gpu-check: ${stale:-no $JAVA (run bench/gpu-prepare.sh on a development machine and carry $CARRY)}"
    printf '| gpubench | NOT RUN (%s) | 0 |\n' "${stale:-no $JAVA}" >> "$SUMMARY"
    status=1
fi

step advantage 90 torch_bench advantage
[[ -f "$OUT/advantage-bench.md" ]] && cat "$OUT/advantage-bench.md"

step lmhead 120 torch_bench lmhead
[[ -f "$OUT/lmhead-bench.md" ]] && cat "$OUT/lmhead-bench.md"

if [[ -x "$JAVA" && -z "$stale" ]]; then
    junit() {
        "$JAVA" --enable-native-access=ALL-UNNAMED -Ddrmas.native.path="$BUILD/libdrmas.so" \
            -jar "$CARRY/junit-console.jar" execute --fail-if-no-tests --details=summary --disable-banner \
            --class-path "$CARRY/classes/bindings:$CARRY/classes/bindings-test" --select-package dev.drmas.bindings
    }
    export -f junit
    step junit 150 junit
    grep -E "tests (successful|failed|skipped)" "$OUT/junit.log"
    if grep -qE "\[ +[1-9][0-9]* tests skipped" "$OUT/junit.log"; then
        echo "gpu-check: JUnit skipped tests (with DRMAS_REQUIRE_GPU=1 none may be)"
        printf '| junit | FAILED (tests skipped) | 0 |\n' >> "$SUMMARY"
        status=1
    fi
else
    printf '| junit | NOT RUN (%s) | 0 |\n' "${stale:-no $JAVA}" >> "$SUMMARY"
    status=1
fi

step memcheck 120 sanitize memcheck --leak-check full
step racecheck 150 sanitize racecheck
step synccheck 90 sanitize synccheck
printf '\ntotal %d s (budget %d s), exit %d\n' "$SECONDS" "$BUDGET" "$status" >> "$SUMMARY"
cat "$SUMMARY"
exit $status
