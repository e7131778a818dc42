"""Puts ``benchmarks/`` on the import path, so a study run as a script can use the benchmarks' helpers.

A study imports this module first (``import _benchmarks  # noqa: F401``), then ``_common`` or
``teacher_backends`` as the benchmark scripts do.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
