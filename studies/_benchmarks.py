"""Puts ``benchmarks/`` on the import path, so a study run as a script can use the benchmarks' helpers.

A study imports this module first (``import _benchmarks  # noqa: F401``), then ``_common`` or
``teacher_backends`` as the benchmark scripts do.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# the studies' STS mean: STS-B dev, SICK-R trial and SICK-R train
STS_FILES = ("stsb-dev.tsv", "sickr-trial.tsv", "sickr-train.tsv")
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


def parse_run(spec: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A study's run ``a=1+b=2`` → {"a": 1, "b": 2} (``default`` → {}): any ``KDSettings`` field, or a name
    of ``extra`` (name → type); an unknown name stops the study."""
    from staticsem.distillation.stages.kd_settings import KDSettings

    # a setting unset by default (None: the build chooses) takes the type of its value without families
    types: dict[str, Any] = {
        f.name: type(getattr(KDSettings().resolved(False), f.name)) for f in fields(KDSettings)
    }
    types.update(extra)
    options: dict[str, Any] = {}
    for part in (p for p in spec.split("+") if p != "default"):
        name, _, value = part.partition("=")
        if name not in types:
            raise SystemExit(f"unknown setting {name!r} in run {spec!r}")
        options[name] = value.lower() == "true" if types[name] is bool else types[name](value)
    return options
