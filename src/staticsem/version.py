"""staticsem's version, and the versions of what a result was made with."""

from __future__ import annotations

import platform
from collections.abc import Iterable
from importlib import metadata

__version__ = "0.1.0"

# what decides a distilled model beside its settings and data: the teacher's numerics (torch,
# transformers, sentence-transformers; the ONNX export and its int8 quantisation: onnx, onnxruntime) and
# the arithmetic after
BUILD_PACKAGES = (
    "numpy",
    "scikit-learn",
    "tokenizers",
    "torch",
    "transformers",
    "sentence-transformers",
    "onnx",
    "onnxruntime",
)


def environment(packages: Iterable[str]) -> dict[str, str]:
    """Python, the platform and the installed version of each of ``packages`` (missing ones left out)."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions
