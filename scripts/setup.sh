#!/usr/bin/env bash
# Create .venv and install staticsem with its extras. torch==2.13.0 (a CPU wheel) goes in first, with pip:
# any other torch requirement would make pip pull a multi-GB CUDA build. The rest is installed by uv (from
# PyPI, with the versions of scripts/constraints.txt; torch stays the one installed), which fetches and
# unpacks in parallel: the set-up's longest step took 2:40 with pip and takes well under a minute with uv.
# Bytecode is written at first import (the Makefile unexports PYTHONDONTWRITEBYTECODE), not compiled ahead:
# compiling all 30,000 modules of the venv took ~90 s of the set-up on 2 cores, most of them never imported;
# left unwritten, every test process and Ray worker compiled torch again (the suite 531 s against 422 s).
# Debian's packages (the embedded corpus and the browser for the playground's tests) install meanwhile,
# where apt-get can. Each step's time is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
quiet() { "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
started=$(date +%s)
step() { echo "setup: $1 ($(($(date +%s) - started)) s)"; }

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

debian() {
    if [ ! -f /usr/share/wordnet/data.noun ] || [ ! -f /usr/share/dictd/gcide.dict.dz ]; then
        apt_install "the demo will use the token method" wordnet-base dict-gcide
    fi
    # The browser the playground tests drive with Playwright (its own browser download is not used).
    if [ ! -x /usr/bin/chromium ]; then
        apt_install "the playground's browser tests will skip" chromium
    fi
}
notes=$(mktemp)
debian >"$notes" 2>&1 &
apt=$!

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
quiet .venv/bin/python -m pip install -q --no-compile "torch==2.13.0" "uv==0.13.9"
step "torch 2.13.0 and uv"
# the versions the published figures were built with (a model records them; see constraints.txt)
.venv/bin/python -m uv pip install --quiet --python .venv/bin/python \
    -c scripts/constraints.txt -e ".[distill,eval,search,serve,dev,ray]"
step "staticsem and its extras"
wait "$apt" || true
cat "$notes"
rm -f "$notes"
step "Debian packages"
.venv/bin/python -c "import torch, staticsem, staticsem.distillation; print('staticsem', staticsem.__version__, '| torch', torch.__version__)"
