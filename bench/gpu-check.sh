#!/usr/bin/env bash
# gpu-check.sh — the one prepared script for a machine with an NVIDIA GPU: builds libdrmas
# there with CMake and nvcc, runs ctest (every CUDA result against the CPU oracle), the
# gpu-tagged JUnit tests through the Java bindings, and the GPU benchmark. Logs and the
# benchmark table go to $OUT (default gpu-out/). Needs .jdk-runtime from gpu-prepare.sh for
# the Java parts; without it only the native checks run.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
status=0
(nvidia-smi; nvcc --version) > "$OUT/machine.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 \
    && cmake --build build-gpu -j"$(nproc)" >> "$OUT/build.log" 2>&1 \
    || { echo "gpu-check: build failed"; tail -40 "$OUT/build.log"; exit 1; }
ctest --test-dir build-gpu --output-on-failure > "$OUT/ctest.log" 2>&1 || status=1
tail -25 "$OUT/ctest.log"
JAVA=.jdk-runtime/bin/java
if [[ -x "$JAVA" ]]; then
    "$JAVA" --enable-native-access=ALL-UNNAMED -Ddrmas.native.path=build-gpu \
        -jar .jdk-runtime/junit/junit-platform-console-standalone-1.14.1.jar execute \
        --class-path bindings/target/classes:bindings/target/test-classes \
        --select-package dev.drmas.bindings --details=summary > "$OUT/junit.log" 2>&1 || status=1
    tail -20 "$OUT/junit.log"
    "$JAVA" --enable-native-access=ALL-UNNAMED -Ddrmas.native.path=build-gpu \
        -cp bench/target/classes:bindings/target/classes dev.drmas.bench.GpuBench --out "$OUT/gpu-bench.md" \
        > "$OUT/gpu-bench.log" 2>&1 || status=1
    cat "$OUT/gpu-bench.log" | tail -30
else
    echo "gpu-check: no .jdk-runtime (run bench/gpu-prepare.sh first): Java checks skipped"
fi
exit $status
