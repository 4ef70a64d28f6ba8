#!/usr/bin/env bash
# gpu-stamp.sh — one hash of the Java sources whose classes bench/gpu-prepare.sh carries to a GPU
# machine (the bindings, their tests, the bench module, the trainer's dev.drmas.algo). gpu-prepare.sh
# writes it into .gpu-carry/STAMP; gpu-check.sh compares it with the sources it runs beside, so that
# classes older than the code (a carry made before the last commits) are not tested in its place.
set -euo pipefail
cd "$(dirname "$0")/.."
find bindings/src/main/java bindings/src/test/java bench/src/main/java java/src/main/java/dev/drmas/algo -type f -name '*.java' \
    | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
