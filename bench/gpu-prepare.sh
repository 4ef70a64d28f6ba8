#!/usr/bin/env bash
# gpu-prepare.sh — run on a development machine (no GPU needed) before a device check: builds
# the classes, jlinks a small Java runtime into .jdk-runtime/ (GPU servers in our device pool
# have no JDK) and puts JUnit's console launcher beside it. Then run bench/gpu-check.sh on the
# GPU machine, carrying .jdk-runtime, bindings/target/classes, bindings/target/test-classes and
# bench/target/classes (under 64 MiB together; see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./drmas build
mvn -B -q test-compile -pl bindings -Dexec.skip=true
rm -rf .jdk-runtime
"$JAVA_HOME/bin/jlink" --add-modules java.base,jdk.unsupported,java.logging --strip-debug --compress=zip-6 \
    --no-header-files --no-man-pages --output .jdk-runtime
mvn -B -q dependency:copy -Dartifact=org.junit.platform:junit-platform-console-standalone:1.14.1 \
    -DoutputDirectory=.jdk-runtime/junit
du -sh .jdk-runtime bindings/target/classes bindings/target/test-classes bench/target/classes
