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
# the versions the published figures were built with (a model records them; see constraints.txt)
quiet .venv/bin/python -m pip install -q -c scripts/constraints.txt -e ".[distill,eval,search,serve,dev,ray]"

# apt_install NOTE PACKAGE...: Debian packages, where apt-get works (root or sudo); else print NOTE.
apt_install() {
    local note=$1 sudo=""
    shift
    [ "$(id -u)" = 0 ] || sudo=$(command -v sudo || true)
    if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
        export DEBIAN_FRONTEND=noninteractive
        { $sudo apt-get install -y -qq "$@" \
            || { $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@"; }; } >/dev/null 2>&1 \
            || echo "note: could not install $*; $note"
    else
        echo "note: no apt-get here to install $*; $note"
    fi
}

if [ ! -f /usr/share/wordnet/data.noun ] || [ ! -f /usr/share/dictd/gcide.dict.dz ]; then
    apt_install "the demo will use the token method" wordnet-base dict-gcide
fi
# The browser the playground tests drive with Playwright (its own browser download is not used).
if [ ! -x /usr/bin/chromium ]; then
    apt_install "the playground's browser tests will skip" chromium
fi
.venv/bin/python -c "import torch, staticsem, staticsem.distillation; print('staticsem', staticsem.__version__, '| torch', torch.__version__)"
