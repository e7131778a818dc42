#!/usr/bin/env bash
# Create .venv and install staticsem with its extras. torch==2.13.0 (a CPU wheel) goes in first:
# any other torch requirement would make pip pull a multi-GB CUDA build.
# Also installs the embedded corpus (Debian's wordnet-base and dict-gcide) where apt-get can.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
quiet() { "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
quiet .venv/bin/python -m pip install -q --upgrade pip
quiet .venv/bin/python -m pip install -q "torch==2.13.0"
quiet .venv/bin/python -m pip install -q -e ".[distill,eval,search,dev,ray]"

if [ ! -f /usr/share/wordnet/data.noun ] || [ ! -f /usr/share/dictd/gcide.dict.dz ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=$(command -v sudo || true)
    if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; }; then
        export DEBIAN_FRONTEND=noninteractive
        { $SUDO apt-get install -y -qq wordnet-base dict-gcide \
            || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wordnet-base dict-gcide; }; } >/dev/null 2>&1 \
            || echo "note: could not install wordnet-base and dict-gcide; the demo will use the token method"
    else
        echo "note: no apt-get here, so no embedded corpus; the demo will use the token method"
    fi
fi
.venv/bin/python -c "import torch, staticsem, staticsem.distillation; print('staticsem', staticsem.__version__, '| torch', torch.__version__)"
