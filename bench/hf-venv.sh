#!/usr/bin/env bash
# hf-venv.sh — makes a Python virtual environment with HF transformers, for the JUnit tests tagged "hf"
# (HfLoadsDrmasCheckpointsTest, HfLoadsTrainedCheckpointsTest): transformers itself loads the model folders
# drmas writes and must compute drmas's logits and tokens. `./drmas test` runs it into .hf-venv from a local
# wheel mirror when it finds one (the drmas script's hf_python); elsewhere the tests skip, and run where
# DRMAS_HF_PYTHON names one. The versions are those the tests were checked with; the torch build
# is the CPU one (the tests run tiny models on the CPU).
#   bench/hf-venv.sh [DIR]     (default DIR: .hf-venv in the checkout, git-ignored)
# Indexes: torch from DRMAS_HF_TORCH_INDEX (default PyTorch's CPU wheels), the rest from pip's own index
# (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL; e.g. a local mirror: file:///opt/pypi/simple).
# Then: DRMAS_HF_PYTHON=DIR/bin/python ./drmas test (the whole suite), or only these tests (README, "The two commands").
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.hf-venv}"
TORCH_VERSION=2.13.0
TRANSFORMERS_VERSION=5.18.0
TORCH_INDEX="${DRMAS_HF_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
command -v python3 >/dev/null || { echo "hf-venv: python3 is not on PATH" >&2; exit 2; }
python3 -c 'import venv, ensurepip' 2>/dev/null \
    || { echo "hf-venv: python3 has no venv/ensurepip module (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 2; }

echo "hf-venv: making $VENV with $(python3 --version) ..."
python3 -m venv "$VENV"
PY="$(cd "$VENV" && pwd)/bin/python"
"$PY" -m pip install -q --upgrade pip
echo "hf-venv: torch $TORCH_VERSION (CPU) from $TORCH_INDEX ..."
# the local version +cpu exists on PyTorch's CPU index; a mirror that holds it under the plain version is asked for that
"$PY" -m pip install -q --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION+cpu" \
    || "$PY" -m pip install -q --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
echo "hf-venv: transformers $TRANSFORMERS_VERSION, safetensors, numpy ..."
"$PY" -m pip install -q "transformers==$TRANSFORMERS_VERSION" safetensors numpy

# what the tests import, and that transformers builds a model of each family drmas writes
"$PY" - <<'EOF'
import torch, transformers, safetensors
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config, LlamaConfig
for c in (Qwen2Config, Qwen3Config, LlamaConfig):
    AutoModelForCausalLM.from_config(c(vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1))
print(f"hf-venv: torch {torch.__version__}, transformers {transformers.__version__}, safetensors {safetensors.__version__}: ok")
EOF
echo "hf-venv: run the check with"
echo "  DRMAS_HF_PYTHON=$PY ./drmas test"
echo "or only its tests:"
echo "  DRMAS_HF_PYTHON=$PY JAVA_HOME=\$(./drmas jdk) mvn -B -pl java -am test-compile surefire:test -Dtest='HfLoads*,PpoOracleTest,HfGenerationOracleTest' -Dsurefire.failIfNoSpecifiedTests=false"
