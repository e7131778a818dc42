#!/usr/bin/env bash
# Create .venv and install staticsem with its extras. torch==2.13.0 (a CPU wheel) goes in first:
# any other torch requirement would make pip pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q -e ".[distill,dev]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import torch, staticsem, staticsem.distillation; print('staticsem', staticsem.__version__, '| torch', torch.__version__)"
