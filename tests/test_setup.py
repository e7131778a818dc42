"""The setup pins what decides a build: scripts/constraints.txt holds every package a model's config records
as its ``environment``, setup.sh installs with it, and this environment is the pinned one (a reinstall that
drifts, as an unpinned onnxruntime once did, changes the int8 teacher and every vector)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from staticsem.distillation.methods.classic import train as classic
from staticsem.distillation.methods.glove import train as glove
from staticsem.version import BUILD_PACKAGES

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
RECORDED = sorted({*BUILD_PACKAGES, *classic.PACKAGES, *glove.PACKAGES})  # what every method records


def pins() -> dict[str, str]:
    """``package: version`` of every ``package==version`` line of scripts/constraints.txt."""
    found = {}
    for line in (SCRIPTS / "constraints.txt").read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s#]+)\s*(#.*)?", line.strip())
        if match:
            found[match[1].lower()] = match[2]
    return found


def test_every_package_that_decides_a_build_is_pinned() -> None:
    assert set(RECORDED) <= set(pins())


def test_setup_installs_with_the_pins_and_torch_first_at_the_pinned_version() -> None:
    script = (SCRIPTS / "setup.sh").read_text(encoding="utf-8")
    torch = re.search(rf'pip install [^\n]*"torch=={re.escape(pins()["torch"])}"', script)
    assert torch is not None and torch.start() < script.index("-c scripts/constraints.txt -e")


@pytest.mark.parametrize("package", RECORDED)
def test_this_environment_is_the_pinned_one(package: str) -> None:
    try:
        installed = metadata.version(package)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{package} is not installed here")
    assert installed.split("+")[0] == pins().get(package), f"{package} {installed}: run scripts/setup.sh"
