#!/usr/bin/env bash
# gpu-prepare.sh — run on a development machine (no GPU needed) before a GPU check. The GPU servers
# of our device pool have nvcc, CMake, g++ and compute-sanitizer but no JDK, so this gathers under
# .gpu-carry/ (git-ignored) all that bench/gpu-check.sh needs besides the sources: a jlinked Java
# runtime, JUnit's console launcher (from Maven Central) and the class folders of the bindings (main
# and test), the bench module and the trainer's dev.drmas.algo (what GpuBench uses; no LibTorch).
# It then checks here that JUnit and GpuBench run on that runtime with those folders only, against
# the emulated CUDA backend (libdrmas_emu) standing in for a GPU, and that repository + carry fit in
# the device tool's 64 MiB. On the GPU machine: carry .gpu-carry and run bench/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
JDK="$(./drmas jdk)"  # the launcher's JDK search (a JDK >= 25; the default java may be older)
export JAVA_HOME="$JDK"
export PATH="$JDK/bin:$PATH"
JUNIT_VERSION=1.14.1  # the JUnit Platform of junit-jupiter 5.14.1 (pom.xml)
CARRY=.gpu-carry
LIMIT_MIB=64

echo "gpu-prepare: JDK $JAVA_HOME; building ..."
./drmas build
mvn -B -q test-compile -pl bindings

rm -rf "$CARRY"
mkdir -p "$CARRY/classes"
# java.base (FFM included) and java.sql, which JUnit's console launcher needs (jdeps); no debug data.
jlink --add-modules java.base,java.sql --strip-java-debug-attributes \
    --strip-native-debug-symbols=exclude-debuginfo-files --compress=zip-9 \
    --no-header-files --no-man-pages --output "$CARRY/jre"
mvn -B -q dependency:copy -Dartifact="org.junit.platform:junit-platform-console-standalone:$JUNIT_VERSION" \
    -DoutputDirectory="$CARRY"
mv "$CARRY/junit-platform-console-standalone-$JUNIT_VERSION.jar" "$CARRY/junit-console.jar"
# The class folders; the GPU machine builds its own libdrmas, so the packed one stays behind.
cp -r bindings/target/classes "$CARRY/classes/bindings"
rm -rf "$CARRY/classes/bindings/native"
cp -r bindings/target/test-classes "$CARRY/classes/bindings-test"
cp -r bench/target/classes "$CARRY/classes/bench"
mkdir -p "$CARRY/classes/algo/dev/drmas"
cp -r java/target/classes/dev/drmas/algo "$CARRY/classes/algo/dev/drmas/"

# The same two commands as gpu-check.sh, on libdrmas_emu instead of a GPU build.
EMU="$ROOT/bindings/target/cmake/emu/libdrmas.so"
[[ -f "$EMU" ]] || { echo "gpu-prepare: $EMU is missing (was it built with DRMAS_CUDA_EMULATION=OFF?)" >&2; exit 1; }
export DRMAS_REQUIRE_GPU=1 DRMAS_TEST_SCALE=small
JRE=(env -u CLASSPATH -u JAVA_HOME -u JDK_JAVA_OPTIONS "$CARRY/jre/bin/java" --enable-native-access=ALL-UNNAMED
     "-Ddrmas.native.path=$EMU")
echo "gpu-prepare: JUnit (bindings tests, CUDA on the emulator) on $CARRY/jre ..."
"${JRE[@]}" -jar "$CARRY/junit-console.jar" execute --fail-if-no-tests --details=summary --disable-banner \
    --class-path "$CARRY/classes/bindings:$CARRY/classes/bindings-test" --select-package dev.drmas.bindings \
    > "$CARRY/prepare-junit.log" 2>&1 || { cat "$CARRY/prepare-junit.log"; echo "gpu-prepare: JUnit failed" >&2; exit 1; }
grep -E "tests (successful|failed|skipped)" "$CARRY/prepare-junit.log"
grep -qE "\[ +0 tests skipped" "$CARRY/prepare-junit.log" || { echo "gpu-prepare: JUnit skipped tests" >&2; exit 1; }
echo "gpu-prepare: GpuBench on $CARRY/jre ..."
"${JRE[@]}" -cp "$CARRY/classes/bench:$CARRY/classes/bindings:$CARRY/classes/algo" dev.drmas.bench.GpuBench \
    --sizes 65536 --time 20 > "$CARRY/prepare-gpubench.log" 2>&1 \
    || { cat "$CARRY/prepare-gpubench.log"; echo "gpu-prepare: GpuBench failed" >&2; exit 1; }
grep -E "^\| (advantage|clipped)" "$CARRY/prepare-gpubench.log"

carry_kib=$(du -sk "$CARRY" | cut -f1)
repo_kib=$(git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
echo "gpu-prepare: $CARRY $((carry_kib / 1024)) MiB + repository $((repo_kib / 1024)) MiB (limit $LIMIT_MIB MiB):"
du -sh "$CARRY"/jre "$CARRY"/junit-console.jar "$CARRY"/classes/*
if (( carry_kib + repo_kib > LIMIT_MIB * 1024 )); then
    echo "gpu-prepare: too large for the device tool's carry limit" >&2
    exit 1
fi
# the sources the carried classes were built from, for gpu-check.sh to refuse a stale carry
bash bench/gpu-stamp.sh > "$CARRY/STAMP"
echo "gpu-prepare: ready. On the GPU machine: carry $CARRY, run bench/gpu-check.sh (logs in \$OUT)."
